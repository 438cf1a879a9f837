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

#include <algorithm>
#include <cmath>

#include "backends/cuda/epilogue_kernels.hpp"
#include "core/epilogue_math.hpp"
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

// epigemm_linear_workspace_size promises enough for any one linear-layer call of those sizes,
// whatever dtype the caller declares for the bias and bias gradient (a bf16 layer usually keeps
// fp32 ones). Under auto the backend, and so the workspace, can depend on that dtype: the GPU demo
// once failed with INSUFFICIENT_WORKSPACE on a bf16 layer with fp32 bias gradients. Every layer
// call with every vector dtype must run with exactly the queried bytes.
TEST(CudaBackend, LinearWorkspaceQueryCoversEveryVectorDtype) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  epigemm_context_t handle = nullptr;
  ASSERT_EQ(epigemm_context_create(&handle), EPIGEMM_STATUS_SUCCESS);
  const int64_t tokens = 4096, in = 1024, out = 64;  // the GPU demo's second layer, transposed too
  for (const auto& dims : {std::pair<int64_t, int64_t>{in, out}, std::pair<int64_t, int64_t>{out, in}}) {
    const int64_t fan_in = dims.first, fan_out = dims.second;
    const epigemm_dtype_t bf16 = EPIGEMM_DTYPE_BF16;
    size_t bytes = 0;
    ASSERT_EQ(epigemm_linear_workspace_size(handle, tokens, fan_in, fan_out, bf16, EPIGEMM_MEMORY_DEVICE, &bytes),
              EPIGEMM_STATUS_SUCCESS);
    std::vector<void*> buffers;
    auto alloc = [&](size_t n) {
      void* p = nullptr;
      EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(n, 1)), cudaSuccess);
      EXPECT_EQ(cudaMemset(p, 0, std::max<size_t>(n, 1)), cudaSuccess);
      buffers.push_back(p);
      return p;
    };
    auto tensor = [&](int64_t rows, int64_t cols) {
      return epigemm_tensor_t{alloc(size_t(rows * cols) * 2), bf16, rows, cols, cols, EPIGEMM_MEMORY_DEVICE};
    };
    const epigemm_tensor_t x = tensor(tokens, fan_in), w = tensor(fan_out, fan_in), y = tensor(tokens, fan_out);
    const epigemm_tensor_t pre_out = tensor(tokens, fan_out), dy = tensor(tokens, fan_out);
    const epigemm_tensor_t dx = tensor(tokens, fan_in), pre_in = tensor(tokens, fan_in), dw = tensor(fan_out, fan_in);
    void* workspace = alloc(bytes);
    for (const epigemm_dtype_t v : {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F16, EPIGEMM_DTYPE_BF16}) {
      SCOPED_TRACE("in " + std::to_string(fan_in) + ", out " + std::to_string(fan_out) + ", vector dtype " +
                   std::to_string(int(v)) + ", queried " + std::to_string(bytes) + " bytes");
      const epigemm_vector_t bias{alloc(size_t(fan_out) * 4), v, fan_out, EPIGEMM_MEMORY_DEVICE};
      const epigemm_vector_t bias_grad_in{alloc(size_t(fan_in) * 4), v, fan_in, EPIGEMM_MEMORY_DEVICE};
      const epigemm_vector_t bias_grad_out{alloc(size_t(fan_out) * 4), v, fan_out, EPIGEMM_MEMORY_DEVICE};
      EXPECT_EQ(epigemm_linear_fprop(handle, &x, &w, &bias, &pre_out, &y, workspace, bytes, nullptr),
                EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(handle);
      EXPECT_EQ(epigemm_linear_fprop(handle, &x, &w, &bias, nullptr, &y, workspace, bytes, nullptr),
                EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(handle);
      EXPECT_EQ(epigemm_linear_dgrad(handle, &dy, &w, &pre_in, &bias_grad_in, &dx, workspace, bytes, nullptr),
                EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(handle);
      EXPECT_EQ(epigemm_linear_wgrad(handle, &x, &dy, &dw, 0, &bias_grad_out, workspace, bytes, nullptr),
                EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(handle);
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (void* p : buffers) cudaFree(p);
  }
  epigemm_context_destroy(handle);
}

// Every launch configuration of the tile kernels (kTileConfigs, 1 and 8 waves, the size rules on
// and off, the finish kernel as a dependent or a serial launch) against the host's
// gelu_tanh / gelu_tanh_grad on the same inputs. The backend runs one configuration per op; the
// benchmark times the others, and any of them may become the default, so each must be right.
// fp32 acc (bf16 for the row sums of BGRADB's B), bf16 aux, bias and D, fp32 sums; shapes with
// partial row tiles and partial column chunks.
TEST(CudaKernels, EveryLaunchConfigurationMatchesTheHost) {
  namespace ec = epigemm::cuda;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "SKIP: no CUDA device";
  }
  ec::KernelTuning base;
  const epigemm::Status tuned = ec::query_kernel_tuning(&base);
  if (!tuned.ok()) GTEST_SKIP() << "SKIP: the epilogue kernels cannot run here: " << tuned.message();
  const ec::TileOp ops[] = {ec::TileOp::bias,  ec::TileOp::gelu_aux,    ec::TileOp::gelu_aux_bias,
                            ec::TileOp::dgelu, ec::TileOp::dgelu_bgrad, ec::TileOp::row_sums,
                            ec::TileOp::bias_broadcast};
  // A blocking stream: the cudaMemset / cudaMemcpy poisoning below run on the legacy default
  // stream and must be ordered before each launch (on a non-blocking stream they raced with it).
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  const int64_t shapes[][2] = {{1000, 1234}, {4096, 777}};
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1], count = rows * cols;
    const size_t elements = static_cast<size_t>(count), row_count = static_cast<size_t>(rows);
    std::vector<float> acc(elements, 0.0f);
    std::vector<uint16_t> acc16(elements), aux_in(elements), bias(row_count);
    uint64_t state = 0x9e3779b97f4a7c15ull ^ uint64_t(rows);
    auto uniform = [&state](float lo, float hi) {  // xorshift64*, fixed seed
      state ^= state >> 12;
      state ^= state << 25;
      state ^= state >> 27;
      const double u = double((state * 0x2545f4914f6cdd1dull) >> 11) / double(uint64_t(1) << 53);
      return float(lo + (hi - lo) * u);
    };
    for (int64_t e = 0; e < count; ++e) {
      acc[size_t(e)] = uniform(-5.0f, 5.0f);
      acc16[size_t(e)] = bf16_bits_round(uniform(-5.0f, 5.0f));
      aux_in[size_t(e)] = bf16_bits_round(uniform(-5.0f, 5.0f));
    }
    for (int64_t i = 0; i < rows; ++i) bias[size_t(i)] = bf16_bits_round(uniform(-1.0f, 1.0f));

    void *acc_dev = nullptr, *acc16_dev = nullptr, *aux_dev = nullptr, *d_dev = nullptr,
         *bias_dev = nullptr, *sums_dev = nullptr, *partials_dev = nullptr;
    ASSERT_CUDA(cudaMalloc(&acc_dev, size_t(count) * 4));
    ASSERT_CUDA(cudaMalloc(&acc16_dev, size_t(count) * 2));
    ASSERT_CUDA(cudaMalloc(&aux_dev, size_t(count) * 2));
    ASSERT_CUDA(cudaMalloc(&d_dev, size_t(count) * 2));
    ASSERT_CUDA(cudaMalloc(&bias_dev, size_t(rows) * 2));
    ASSERT_CUDA(cudaMalloc(&sums_dev, size_t(rows) * 4));
    const int64_t partial_count = std::max(ec::row_partial_elements(base, ec::TileOp::dgelu_bgrad, rows, cols),
                                           ec::row_partial_elements(base, ec::TileOp::row_sums, rows, cols));
    ASSERT_CUDA(cudaMalloc(&partials_dev, size_t(partial_count) * 4));
    ASSERT_CUDA(cudaMemcpy(acc_dev, acc.data(), size_t(count) * 4, cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaMemcpy(acc16_dev, acc16.data(), size_t(count) * 2, cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaMemcpy(bias_dev, bias.data(), size_t(rows) * 2, cudaMemcpyHostToDevice));

    for (ec::TileOp op : ops) {
      const bool sums_rows = op == ec::TileOp::dgelu_bgrad || op == ec::TileOp::row_sums;
      const bool writes_aux = op == ec::TileOp::gelu_aux || op == ec::TileOp::gelu_aux_bias;
      // Host expectation: D (and aux) as floats before rounding to bf16, row sums in double.
      std::vector<float> want_d(elements), want_aux(elements);
      std::vector<double> want_sums(row_count, 0.0), sum_scale(row_count, 0.0);
      for (int64_t j = 0; j < cols; ++j) {
        for (int64_t i = 0; i < rows; ++i) {
          const size_t e = size_t(i + j * rows);
          const float a = acc[e], b = bf16_value(bias[size_t(i)]);
          float out = 0.0f;
          switch (op) {
            case ec::TileOp::bias: out = a + b; break;
            case ec::TileOp::gelu_aux: want_aux[e] = a; out = epigemm::gelu_tanh(a); break;
            case ec::TileOp::gelu_aux_bias: want_aux[e] = a + b; out = epigemm::gelu_tanh(a + b); break;
            case ec::TileOp::dgelu:
            case ec::TileOp::dgelu_bgrad: out = a * epigemm::gelu_tanh_grad(bf16_value(aux_in[e])); break;
            case ec::TileOp::row_sums: out = bf16_value(acc16[e]); break;
            case ec::TileOp::bias_broadcast: out = b; break;
          }
          want_d[e] = out;
          want_sums[size_t(i)] += out;
          sum_scale[size_t(i)] += std::fabs(out);
        }
      }
      for (int config = 0; config < ec::kTileConfigCount; ++config) {
        for (int waves : {1, 8}) {
          for (int rules = 0; rules < 2; ++rules) {
            ec::KernelTuning tuning = base;
            tuning.vector_config[int(op)] = config;
            tuning.waves[int(op)] = waves;
            tuning.size_rules = rules == 1;
            tuning.dependent_launch = (config + waves) % 2 == 0;
            SCOPED_TRACE("op " + std::to_string(int(op)) + ", " + std::to_string(rows) + " x " +
                         std::to_string(cols) + ", config " + std::to_string(config) + ", waves " +
                         std::to_string(waves) + ", size rules " + std::to_string(rules) +
                         ", dependent launch " + std::to_string(int(tuning.dependent_launch)));
            ASSERT_CUDA(cudaMemcpy(aux_dev, aux_in.data(), size_t(count) * 2, cudaMemcpyHostToDevice));
            ASSERT_CUDA(cudaMemset(d_dev, 0xff, size_t(count) * 2));  // NaN poison
            ASSERT_CUDA(cudaMemset(sums_dev, 0xff, size_t(rows) * 4));
            ec::TileArgs args;
            args.rows = rows;
            args.cols = cols;
            args.acc = op == ec::TileOp::row_sums ? acc16_dev : acc_dev;
            args.acc_dtype = op == ec::TileOp::row_sums ? EPIGEMM_DTYPE_BF16 : EPIGEMM_DTYPE_F32;
            args.ld_acc = rows;
            args.d = d_dev;
            args.d_dtype = EPIGEMM_DTYPE_BF16;
            args.ld_d = rows;
            args.aux = aux_dev;
            args.aux_dtype = EPIGEMM_DTYPE_BF16;
            args.ld_aux = rows;
            args.bias = bias_dev;
            args.bias_dtype = EPIGEMM_DTYPE_BF16;
            args.row_partials = static_cast<float*>(partials_dev);
            ASSERT_TRUE(ec::tile_vector_path(op, args));
            const epigemm::Status launched =
                ec::launch_tile_kernel(tuning, op, args, sums_dev, EPIGEMM_DTYPE_F32, stream);
            ASSERT_TRUE(launched.ok()) << launched.message();
            ASSERT_CUDA(cudaStreamSynchronize(stream));
            if (op != ec::TileOp::row_sums) {
              std::vector<uint16_t> d(elements), aux(elements);
              ASSERT_CUDA(cudaMemcpy(d.data(), d_dev, size_t(count) * 2, cudaMemcpyDeviceToHost));
              ASSERT_CUDA(cudaMemcpy(aux.data(), aux_dev, size_t(count) * 2, cudaMemcpyDeviceToHost));
              int64_t bad = 0;
              for (int64_t e = 0; e < count; ++e) {
                // The device divides with the hardware reciprocal (a few fp32 ulp): within one
                // bf16 ulp of the host after rounding; aux is exact (no division on its way).
                const float got = bf16_value(d[size_t(e)]), want = want_d[size_t(e)];
                if (!(std::fabs(got - want) <= std::fabs(want) * 0x1p-7f + 1e-30f)) ++bad;
                if (writes_aux && aux[size_t(e)] != bf16_bits_round(want_aux[size_t(e)])) ++bad;
                if (!writes_aux && aux[size_t(e)] != aux_in[size_t(e)]) ++bad;  // untouched
              }
              EXPECT_EQ(bad, 0);
            }
            if (sums_rows) {
              std::vector<float> sums(row_count);
              ASSERT_CUDA(cudaMemcpy(sums.data(), sums_dev, size_t(rows) * 4, cudaMemcpyDeviceToHost));
              int64_t bad = 0;
              for (int64_t i = 0; i < rows; ++i) {
                // fp32 sums in another order than the host's double sum: within 1e-5 of the
                // sum of the terms' magnitudes.
                const double err = std::fabs(double(sums[size_t(i)]) - want_sums[size_t(i)]);
                if (!(err <= 1e-5 * sum_scale[size_t(i)] + 1e-30)) ++bad;
              }
              EXPECT_EQ(bad, 0);
            }
          }
        }
      }
    }
    cudaFree(partials_dev);
    cudaFree(sums_dev);
    cudaFree(bias_dev);
    cudaFree(d_dev);
    cudaFree(aux_dev);
    cudaFree(acc16_dev);
    cudaFree(acc_dev);
  }
  cudaStreamDestroy(stream);
}

#else  // !EPIGEMM_TESTS_WITH_CUDA

TEST(CudaBackend, CallsCaptureIntoAGraphAndReplay) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaBackend, BiasOnMoreThan2To31Elements) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaKernels, EveryLaunchConfigurationMatchesTheHost) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaBackend, LinearWorkspaceQueryCoversEveryVectorDtype) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}

#endif  // EPIGEMM_TESTS_WITH_CUDA

}  // namespace
}  // namespace epigemm_test
