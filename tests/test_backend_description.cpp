// epigemm_backend_description: what each backend says it runs on (the line `epigemm info`
// prints), and its errors. For the cpu backend the text must name the engine and kernel build
// that the backend's own code picks, with the version its library reports at run time.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "epigemm/epigemm.h"

#if defined(EPIGEMM_BUILT_WITH_CPU_BACKEND)
#include "backends/cpu/epilogue_kernels.hpp"
#include "backends/cpu/gemm_engine.hpp"
#endif

namespace {

class BackendDescription : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(epigemm_context_create(&ctx_), EPIGEMM_STATUS_SUCCESS); }
  void TearDown() override { epigemm_context_destroy(ctx_); }

  // The description, or "" with the failure recorded.
  std::string describe(epigemm_backend_t backend) {
    const char* text = nullptr;
    const epigemm_status_t status = epigemm_backend_description(ctx_, backend, &text);
    EXPECT_EQ(status, EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx_);
    EXPECT_NE(text, nullptr);
    return status == EPIGEMM_STATUS_SUCCESS && text != nullptr ? text : "";
  }

  epigemm_context_t ctx_ = nullptr;
};

TEST_F(BackendDescription, ReferenceAndAutoSayWhatTheyAre) {
  EXPECT_NE(describe(EPIGEMM_BACKEND_REFERENCE).find("double"), std::string::npos);
  EXPECT_NE(describe(EPIGEMM_BACKEND_AUTO).find("dispatcher"), std::string::npos);
}

TEST_F(BackendDescription, CompiledBackendsDescribeThemselvesOthersAreNotSupported) {
  for (const epigemm_backend_t b : {EPIGEMM_BACKEND_REFERENCE, EPIGEMM_BACKEND_CPU, EPIGEMM_BACKEND_CUDA,
                                    EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_BACKEND_CUTLASS}) {
    SCOPED_TRACE(epigemm_backend_name(b));
    const char* text = nullptr;
    const epigemm_status_t status = epigemm_backend_description(ctx_, b, &text);
    if (epigemm_backend_compiled(ctx_, b) == 0) {
      EXPECT_EQ(status, EPIGEMM_STATUS_NOT_SUPPORTED);
      EXPECT_NE(std::string(epigemm_context_last_error(ctx_)).find(epigemm_backend_name(b)), std::string::npos)
          << epigemm_context_last_error(ctx_);
      continue;
    }
    ASSERT_EQ(status, EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx_);
    ASSERT_NE(text, nullptr);
    const std::string description = text;
    EXPECT_FALSE(description.empty());
    // A backend that cannot run here says so, and one that can does not.
    const bool says_unusable = description.rfind("not usable here: ", 0) == 0;
    EXPECT_EQ(says_unusable, epigemm_backend_usable(ctx_, b) == 0) << description;
  }
}

TEST_F(BackendDescription, GpuBackendsNameTheirLibrary) {
  for (const epigemm_backend_t b : {EPIGEMM_BACKEND_CUDA, EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_BACKEND_CUTLASS}) {
    if (epigemm_backend_usable(ctx_, b) == 0) continue;
    const std::string description = describe(b);
    // cutlass: the version of the headers it was built with (4.x, from their cutlass/version.h).
    const char* library = b == EPIGEMM_BACKEND_CUDA       ? "cuBLAS [0-9]+\\.[0-9]+\\.[0-9]+ "
                          : b == EPIGEMM_BACKEND_CUBLASLT ? "cuBLASLt [0-9]+\\.[0-9]+\\.[0-9]+ "
                                                          : "CUTLASS 4\\.[0-9]+\\.[0-9]+ sm90 kernels on device ";
    EXPECT_TRUE(std::regex_search(description, std::regex(library))) << description;
    EXPECT_NE(description.find("compute capability"), std::string::npos) << description;
  }
}

#if defined(EPIGEMM_BUILT_WITH_CPU_BACKEND)
TEST_F(BackendDescription, CpuNamesItsEngineVersionAndKernelBuild) {
  const std::string description = describe(EPIGEMM_BACKEND_CPU);
  const epigemm::CpuGemmEngine engine = epigemm::default_cpu_gemm_engine();
  EXPECT_NE(description.find("GEMM engine " + epigemm::cpu_gemm_engine_version(engine)), std::string::npos)
      << description;
  EXPECT_NE(description.find(engine == epigemm::CpuGemmEngine::onednn ? "oneDNN " : "OpenBLAS "),
            std::string::npos)
      << description;
  const std::string kernels = epigemm::select_epilogue_kernels().name;
  EXPECT_NE(description.find("epilogue kernels " + kernels), std::string::npos) << description;
}
#endif

TEST_F(BackendDescription, BadArgumentsAreInvalidValues) {
  const char* text = nullptr;
  EXPECT_EQ(epigemm_backend_description(ctx_, EPIGEMM_BACKEND_REFERENCE, nullptr), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_NE(std::string(epigemm_context_last_error(ctx_)).find("description is NULL"), std::string::npos);
  EXPECT_EQ(epigemm_backend_description(ctx_, static_cast<epigemm_backend_t>(9), &text),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_NE(std::string(epigemm_context_last_error(ctx_)).find("backend has value 9"), std::string::npos)
      << epigemm_context_last_error(ctx_);
  EXPECT_EQ(epigemm_backend_description(nullptr, EPIGEMM_BACKEND_REFERENCE, &text), EPIGEMM_STATUS_INVALID_VALUE);
}

}  // namespace
