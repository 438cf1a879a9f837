// GPU-specific tests of the `cuda` backend (docs/cuda_backend.md), beside the full matrix of
// test_backend_matrix.cpp that already runs every case on it:
//   - large shapes through every kernel path (16-byte vector and scalar; tall, wide and square
//     grids) for every epilogue, against the reference backend;
//   - one element-wise epilogue on a D of more than 2^31 elements, checked bitwise everywhere;
//   - calls captured into a CUDA graph and replayed on fresh inputs (a call that allocates,
//     synchronizes or reads back to the host cannot be captured);
//   - bias gradients bitwise repeatable across runs;
//   - degenerate sizes on the device.
// Each test prints SKIP where the cuda backend cannot run (no CUDA build, no GPU).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#ifdef EPIGEMM_TESTS_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "epigemm/epigemm.h"
#include "harness/harness.hpp"

namespace epigemm_test {
namespace {

const Target kCuda{EPIGEMM_BACKEND_CUDA, EPIGEMM_MEMORY_DEVICE};

const epigemm_epilogue_t kAllEpilogues[] = {
    EPIGEMM_EPILOGUE_DEFAULT,     EPIGEMM_EPILOGUE_BIAS,  EPIGEMM_EPILOGUE_GELU_AUX,
    EPIGEMM_EPILOGUE_GELU_AUX_BIAS, EPIGEMM_EPILOGUE_DGELU, EPIGEMM_EPILOGUE_DGELU_BGRAD,
    EPIGEMM_EPILOGUE_BGRADB};

// The transposes of the pass an epilogue belongs to (SPEC §1): fprop TN, dgrad NN, wgrad NT.
void pass_transposes(epigemm_epilogue_t e, GemmCase* c) {
  if (e == EPIGEMM_EPILOGUE_DGELU || e == EPIGEMM_EPILOGUE_DGELU_BGRAD) {
    c->transa = EPIGEMM_OP_N;
    c->transb = EPIGEMM_OP_N;
  } else if (e == EPIGEMM_EPILOGUE_BGRADB) {
    c->transa = EPIGEMM_OP_N;
    c->transb = EPIGEMM_OP_T;
  } else {
    c->transa = EPIGEMM_OP_T;
    c->transb = EPIGEMM_OP_N;
  }
}

// One large-shape case: bf16 GEMM with every side operand in a dtype of its own.
GemmCase large_case(epigemm_epilogue_t e, int64_t m, int64_t n, int64_t k, uint64_t index) {
  GemmCase c;
  c.target = kCuda;
  c.epilogue = e;
  pass_transposes(e, &c);
  c.ab_dtype = EPIGEMM_DTYPE_BF16;
  c.d_dtype = EPIGEMM_DTYPE_BF16;
  c.bias_dtype = EPIGEMM_DTYPE_F32;
  c.aux_dtype = EPIGEMM_DTYPE_BF16;
  c.bias_grad_dtype = EPIGEMM_DTYPE_F32;
  c.gemm_m = m;
  c.gemm_n = n;
  c.gemm_k = k;
  c.seed = case_seed("cuda_large", index);
  return c;
}

// Shapes that reach every tile-kernel path. k is small: the point is the epilogue's grid, and
// the reference backend computes every product in double on the CPU.
struct PathShape {
  const char* name;
  int64_t m, n, k;
  bool misaligned;
  int64_t ld_pad;  // 0: default leading dimensions
};
const PathShape kPathShapes[] = {
    {"vector square", 2048, 1536, 8, false, 0},
    {"vector, rows not a multiple of the 256-row tile", 1000, 1200, 5, false, 0},
    {"vector tall", 16384, 72, 4, false, 0},
    {"vector wide", 8, 40000, 3, false, 0},
    {"scalar: misaligned pointers", 2048, 1024, 6, true, 0},
    {"scalar: odd rows", 2047, 1025, 7, false, 0},
    {"scalar: padded leading dimensions", 1024, 777, 5, false, 3},
    {"scalar wide", 3, 30011, 2, false, 0},
};

TEST(CudaBackend, LargeShapesThroughEveryKernelPath) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  uint64_t index = 0;
  for (const PathShape& shape : kPathShapes) {
    for (epigemm_epilogue_t e : kAllEpilogues) {
      GemmCase c = large_case(e, shape.m, shape.n, shape.k, index++);
      c.misaligned = shape.misaligned;
      if (shape.ld_pad > 0) c.padded(shape.ld_pad);
      SCOPED_TRACE(shape.name);
      run_and_check(ctx, c);
    }
  }
}

// fp32 and fp16 storage, alpha/beta and TF32 on large vector-path shapes.
TEST(CudaBackend, LargeShapesOtherDtypesAndScalars) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  uint64_t index = 0;
  for (epigemm_epilogue_t e : kAllEpilogues) {
    GemmCase f16 = large_case(e, 1536, 1024, 16, 100 + index);
    f16.ab_dtype = f16.d_dtype = EPIGEMM_DTYPE_F16;
    f16.bias_dtype = EPIGEMM_DTYPE_BF16;
    f16.aux_dtype = EPIGEMM_DTYPE_F32;
    f16.bias_grad_dtype = EPIGEMM_DTYPE_F16;
    f16.alpha = 0.75f;
    f16.beta = 0.5f;
    run_and_check(ctx, f16);

    GemmCase f32 = large_case(e, 1024, 1280, 16, 200 + index);
    f32.ab_dtype = f32.d_dtype = f32.aux_dtype = f32.bias_dtype = f32.bias_grad_dtype =
        EPIGEMM_DTYPE_F32;
    f32.allow_tf32 = (index % 2) == 1;
    f32.beta = 1.0f;
    run_and_check(ctx, f32);

    GemmCase mixed = large_case(e, 1024, 768, 32, 300 + index);
    mixed.d_dtype = EPIGEMM_DTYPE_F32;  // bf16 inputs, fp32 output: the GEMM writes D directly
    mixed.alpha = -1.5f;
    run_and_check(ctx, mixed);
    ++index;
  }
}

TEST(CudaBackend, DegenerateSizes) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  const int64_t sizes[][3] = {{0, 37, 5}, {37, 0, 5}, {37, 29, 0}, {0, 0, 0}, {64, 48, 0}};
  uint64_t index = 0;
  for (const auto& s : sizes) {
    for (epigemm_epilogue_t e : kAllEpilogues) {
      for (float beta : {0.0f, 0.5f}) {
        GemmCase c = large_case(e, s[0], s[1], s[2], 400 + index++);
        c.beta = beta;
        run_and_check(ctx, c);
      }
    }
  }
}

// The same inputs twice give bitwise the same D and bias gradient (no atomics in the sums).
TEST(CudaBackend, BiasGradientsAreBitwiseRepeatable) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  std::vector<GemmCase> cases;
  cases.push_back(large_case(EPIGEMM_EPILOGUE_DGELU_BGRAD, 4096, 8192, 64, 500));
  cases.push_back(large_case(EPIGEMM_EPILOGUE_DGELU_BGRAD, 1000, 3001, 64, 501));  // scalar path
  cases.push_back(large_case(EPIGEMM_EPILOGUE_BGRADB, 4096, 3072, 8192, 502));
  GemmCase bgradb_nn = large_case(EPIGEMM_EPILOGUE_BGRADB, 1024, 3072, 8192, 503);
  bgradb_nn.transb = EPIGEMM_OP_N;  // columns of op(B) contiguous: the other reduction
  cases.push_back(bgradb_nn);
  for (const GemmCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const CaseRun first = run_case(ctx, c);
    ASSERT_TRUE(first.ok);
    for (int repeat = 0; repeat < 3; ++repeat) {
      const CaseRun again = run_case(ctx, c);
      ASSERT_TRUE(again.ok);
      expect_bitwise_equal("bias_grad", first.after.bias_grad, again.after.bias_grad);
      expect_bitwise_equal("D", first.after.d, again.after.d);
    }
  }
}

#ifdef EPIGEMM_TESTS_WITH_CUDA

#define ASSERT_CUDA(expr)                                                               \
  do {                                                                                  \
    const cudaError_t err_ = (expr);                                                    \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_);          \
  } while (0)

// Every epilogue's call captured into one CUDA graph on a non-blocking stream in global capture
// mode (where cudaMalloc, a host synchronization or a device-to-host copy inside a call would make
// the capture fail), then replayed twice, each time on fresh inputs written into the same
// buffers and with poisoned outputs, and checked against the reference.
TEST(CudaBackend, CallsCaptureIntoAGraphAndReplay) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  struct Captured {
    GemmCase c;
    Operands ops;
    OperandViews views;
    Desc desc;
    std::unique_ptr<Workspace> workspace;
  };
  std::vector<Captured> calls;
  uint64_t index = 0;
  for (epigemm_epilogue_t e : kAllEpilogues) {
    Captured call;
    call.c = large_case(e, 768, 520, 24, 600 + index++);
    call.ops = Operands::make(call.c);
    call.ops.upload(call.c);
    call.views = OperandViews::of(call.c, call.ops, EPIGEMM_MEMORY_DEVICE);
    call.desc = make_desc(call.c, call.views, EPIGEMM_BACKEND_CUDA);
    size_t bytes = 0;
    ASSERT_EQ(epigemm_gemm_workspace_size(ctx, call.desc.get(), &call.views.a, &call.views.b,
                                          &call.views.d, &bytes),
              EPIGEMM_STATUS_SUCCESS)
        << epigemm_context_last_error(ctx);
    call.workspace = std::make_unique<Workspace>(bytes, EPIGEMM_MEMORY_DEVICE);
    calls.push_back(std::move(call));
  }

  Stream stream(EPIGEMM_MEMORY_DEVICE);
  const cudaStream_t s = static_cast<cudaStream_t>(stream.get());
  // One uncaptured run of each call first, as a framework warms up before capturing: CUDA loads
  // kernel modules lazily on first launch, which is not what this test is about.
  for (Captured& call : calls) {
    ASSERT_EQ(epigemm_gemm(ctx, call.desc.get(), &call.views.a, &call.views.b, &call.views.d,
                           call.workspace->data(), call.workspace->bytes(), stream.get()),
              EPIGEMM_STATUS_SUCCESS)
        << epigemm_context_last_error(ctx);
  }
  stream.synchronize();
  ASSERT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  std::vector<epigemm_status_t> statuses;
  std::vector<std::string> messages;
  for (Captured& call : calls) {
    statuses.push_back(epigemm_gemm(ctx, call.desc.get(), &call.views.a, &call.views.b,
                                    &call.views.d, call.workspace->data(), call.workspace->bytes(),
                                    stream.get()));
    messages.push_back(epigemm_context_last_error(ctx));
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(statuses[i], EPIGEMM_STATUS_SUCCESS) << calls[i].c.describe() << ": " << messages[i];
  }
  ASSERT_EQ(end, cudaSuccess) << "capture failed: " << cudaGetErrorString(end);
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  for (int replay = 0; replay < 2; ++replay) {
    std::vector<Operands> before;
    for (Captured& call : calls) {
      // Fresh inputs in the same buffers, poisoned outputs.
      Rng rng(case_seed("cuda_graph_replay", uint64_t(replay) * 100 + uint64_t(call.c.epilogue)));
      call.ops.a.fill_uniform(rng, -1.0, 1.0);
      call.ops.b.fill_uniform(rng, -1.0, 1.0);
      call.ops.d.fill_poison();
      if (call.c.has_bias()) call.ops.bias.fill_uniform(rng, -1.0, 1.0);
      if (call.c.has_aux()) {
        if (call.c.aux_is_output()) {
          call.ops.aux.fill_poison();
        } else {
          call.ops.aux.fill_uniform(rng, -3.0, 3.0);
        }
      }
      if (call.c.has_bias_grad()) call.ops.bias_grad.fill_poison();
      call.ops.upload(call.c);
      before.push_back(call.ops);
    }
    ASSERT_CUDA(cudaGraphLaunch(exec, s));
    stream.synchronize();
    for (size_t i = 0; i < calls.size(); ++i) {
      SCOPED_TRACE("replay " + std::to_string(replay) + ": " + calls[i].c.describe());
      CaseRun run;
      run.ok = true;
      run.ran = EPIGEMM_BACKEND_CUDA;
      run.before = before[i];
      calls[i].ops.download(calls[i].c, stream.get());
      run.after = calls[i].ops;
      check_case(ctx, calls[i].c, run);
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

uint16_t bf16_bits_round(float f) {  // round to nearest even; the inputs here are finite
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float bf16_value(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// BIAS with a bf16 D of 65536 x 32769 = 2^31 + 2^16 elements (the fp32 intermediate in the
// workspace is 8.6 GB). k = 1 and bf16 inputs make every product exact in fp32, so each element
// must be bitwise round_bf16(a[i] * b[j] + bias[i]): checked for all of them.
TEST(CudaBackend, BiasOnMoreThan2To31Elements) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  const int64_t m = 65536, n = 32769, k = 1;
  ASSERT_GT(m * n, int64_t(1) << 31);
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t d_bytes = size_t(m * n) * 2;
  if (free_bytes < d_bytes * 3 + (size_t(1) << 30)) {
    GTEST_SKIP() << "SKIP: needs about " << (d_bytes * 3 >> 30) << " GiB of free device memory, "
                 << (free_bytes >> 30) << " GiB free";
  }

  Rng rng(case_seed("cuda_2to31", 0));
  std::vector<uint16_t> a(static_cast<size_t>(m)), b(static_cast<size_t>(n));
  std::vector<float> bias(static_cast<size_t>(m));
  for (auto& x : a) x = bf16_bits_round(float(rng.uniform(-2.0, 2.0)));
  for (auto& x : b) x = bf16_bits_round(float(rng.uniform(-2.0, 2.0)));
  for (auto& x : bias) x = float(rng.uniform(-1.0, 1.0));

  void *a_dev = nullptr, *b_dev = nullptr, *bias_dev = nullptr, *d_dev = nullptr;
  ASSERT_CUDA(cudaMalloc(&a_dev, a.size() * 2));
  ASSERT_CUDA(cudaMalloc(&b_dev, b.size() * 2));
  ASSERT_CUDA(cudaMalloc(&bias_dev, bias.size() * 4));
  ASSERT_CUDA(cudaMalloc(&d_dev, d_bytes));
  ASSERT_CUDA(cudaMemcpy(a_dev, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(b_dev, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(bias_dev, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(d_dev, 0xff, d_bytes));  // 0xffff is a bf16 NaN: unwritten shows

  // A is m x 1 (transa N), B is 1 x n (transb N).
  const epigemm_matrix_t A{a_dev, EPIGEMM_DTYPE_BF16, m, k, m, EPIGEMM_MEMORY_DEVICE};
  const epigemm_matrix_t B{b_dev, EPIGEMM_DTYPE_BF16, k, n, k, EPIGEMM_MEMORY_DEVICE};
  const epigemm_matrix_t D{d_dev, EPIGEMM_DTYPE_BF16, m, n, m, EPIGEMM_MEMORY_DEVICE};
  const epigemm_vector_t bias_view{bias_dev, EPIGEMM_DTYPE_F32, m, EPIGEMM_MEMORY_DEVICE};
  epigemm_gemm_desc_t desc = nullptr;
  ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_gemm_desc_set_epilogue(desc, EPIGEMM_EPILOGUE_BIAS), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_gemm_desc_set_bias(desc, &bias_view), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_gemm_desc_set_backend(desc, EPIGEMM_BACKEND_CUDA), EPIGEMM_STATUS_SUCCESS);
  size_t ws_bytes = 0;
  ASSERT_EQ(epigemm_gemm_workspace_size(ctx, desc, &A, &B, &D, &ws_bytes), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx);
  void* ws = nullptr;
  ASSERT_CUDA(cudaMalloc(&ws, ws_bytes));
  EXPECT_EQ(epigemm_gemm(ctx, desc, &A, &B, &D, ws, ws_bytes, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx);
  ASSERT_CUDA(cudaDeviceSynchronize());

  std::vector<uint16_t> d(static_cast<size_t>(m * n));
  ASSERT_CUDA(cudaMemcpy(d.data(), d_dev, d_bytes, cudaMemcpyDeviceToHost));
  int64_t mismatches = 0, first_bad = -1;
  for (int64_t j = 0; j < n; ++j) {
    const float bj = bf16_value(b[size_t(j)]);
    for (int64_t i = 0; i < m; ++i) {
      const uint16_t want = bf16_bits_round(bf16_value(a[size_t(i)]) * bj + bias[size_t(i)]);
      if (d[size_t(i + j * m)] != want) {
        if (first_bad < 0) first_bad = i + j * m;
        ++mismatches;
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << "first mismatch at element " << first_bad << " (row "
                           << (first_bad < 0 ? 0 : first_bad % m) << ", column "
                           << (first_bad < 0 ? 0 : first_bad / m) << ")";
  epigemm_gemm_desc_destroy(desc);
  cudaFree(ws);
  cudaFree(d_dev);
  cudaFree(bias_dev);
  cudaFree(b_dev);
  cudaFree(a_dev);
}

#else  // !EPIGEMM_TESTS_WITH_CUDA

TEST(CudaBackend, CallsCaptureIntoAGraphAndReplay) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaBackend, BiasOnMoreThan2To31Elements) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}

#endif  // EPIGEMM_TESTS_WITH_CUDA

}  // namespace
}  // namespace epigemm_test
