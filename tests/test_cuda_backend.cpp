// GPU-specific tests of the `cuda` backend (docs/cuda_backend.md), beside the full matrix of
// test_backend_matrix.cpp that already runs every case on it:
//   - the launch plan on the host (tile_plan.hpp: the narrower configuration, the size rules,
//     the grid, a kernel for every epilogue and activation), no GPU needed;
//   - every tile op with every activation against the host's functors, on every kernel path;
//   - the kernels' occupancy: none asked at setup, each kernel's once, on first use;
//   - every epilogue with every activation end to end against the reference backend, BGRADA in
//     both layouts of A with its degenerate sizes;
//   - large shapes through every kernel path (16-byte vector and scalar; tall, wide and square
//     grids) for the GELU epilogues, against the reference backend;
//   - one element-wise epilogue on a D of more than 2^31 elements, checked bitwise everywhere;
//   - calls captured into a CUDA graph and replayed on fresh inputs (a call that allocates,
//     synchronizes or reads back to the host cannot be captured);
//   - bias gradients bitwise repeatable across runs;
//   - degenerate sizes on the device.
// Each GPU test prints SKIP where the cuda backend cannot run (no CUDA build, no GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/tile_plan.hpp"
#include "core/epilogue_parts.hpp"

#ifdef EPIGEMM_TESTS_WITH_CUDA
#include <cuda_runtime.h>

#include <cmath>

#include "backends/cuda/epilogue_kernels.hpp"
#include "core/epilogue_math.hpp"
#include "core/numeric.hpp"
#endif

#include "epigemm/epigemm.h"
#include "harness/graph_capture.hpp"
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

// ---- the launch plan on the host (tile_plan.hpp; no GPU needed) ------------------------------

namespace ec = epigemm::cuda;

// The configurations of the library and of the kernel lab (dev/cuda/epilogue_kernels_lab.cu).
const ec::TileConfig kSomeConfigs[] = {
    {128, 2, 4, false}, {256, 2, 4, false}, {128, 4, 3, false}, {128, 4, 4, false}, {256, 4, 4, false},
    {128, 8, 4, false}, {256, 2, 3, false}, {256, 4, 3, false}, {64, 2, 4, false},  {64, 4, 4, false},
    {256, 2, 3, true},  {64, 2, 3, true},   {128, 2, 4, true}};

// The narrower variant only ever narrows a configuration wider than 128 threads along rows to 128
// threads, keeping the rest; it never widens (64-thread rows, 512-row tiles, stay as they are).
TEST(CudaTilePlan, NarrowerConfigNeverWidens) {
  for (const ec::TileConfig& c : kSomeConfigs) {
    const ec::TileConfig narrow = ec::narrower_config(c);
    EXPECT_EQ(narrow.threads_x, c.threads_x > 128 ? 128 : c.threads_x) << c.threads_x;
    EXPECT_LE(narrow.threads_x, c.threads_x);
    EXPECT_EQ(narrow.batch, c.batch);
    EXPECT_EQ(narrow.min_blocks, c.min_blocks);
    EXPECT_EQ(narrow.prefetch, c.prefetch);
  }
  const ec::TileConfig sixty_four{64, 4, 4, false};
  EXPECT_TRUE(ec::narrower_config(sixty_four) == sixty_four);
  EXPECT_TRUE((ec::narrower_config(ec::TileConfig{256, 2, 4, false}) == ec::TileConfig{128, 2, 4, false}));
}

// The size rules: a tile taller than the tensor narrows (if it can), and only then; fewer than
// 8M elements run one wave.
TEST(CudaTilePlan, SizeRules) {
  const ec::TileConfig wide{256, 2, 4, false}, narrow{64, 4, 4, false};
  EXPECT_EQ(ec::config_for_rows(wide, 2047).threads_x, 128);
  EXPECT_EQ(ec::config_for_rows(wide, 2048).threads_x, 256);
  EXPECT_EQ(ec::config_for_rows(narrow, 100).threads_x, 64);
  EXPECT_EQ(ec::config_for_rows(narrow, 4096).threads_x, 64);
  EXPECT_EQ(ec::waves_for_size(8, 1024, 8191), 1);              // 8M - 1024 elements
  EXPECT_EQ(ec::waves_for_size(8, 1024, 8192), 8);              // 8M elements
  EXPECT_EQ(ec::waves_for_size(4, 4096, 8192), 4);
  EXPECT_EQ(ec::waves_for_size(20, 4096, 8192), ec::kMaxWaves);
  // Every op's library configuration on short tensors: narrowed where wider than 128, else kept.
  for (int op = 0; op < ec::kTileOpCount; ++op) {
    const ec::TileConfig c = ec::kLibraryConfig[op];
    const ec::TileConfig on_short = ec::config_for_rows(c, 1000);
    EXPECT_EQ(on_short.threads_x, std::min(c.threads_x, 128)) << "op " << op;
    EXPECT_TRUE(ec::config_for_rows(c, 1 << 20) == c) << "op " << op;
  }
}

// A plan covers every row and column, gives every thread row of a block a column, stays within
// grid.y's 65535 and has about the blocks asked for.
TEST(CudaTilePlan, PlansCoverTheTensor) {
  const int64_t shapes[][2] = {{1000, 1234}, {16384, 8192}, {8, 40000}, {28672, 16384}, {3, 1}, {2048, 3000000}};
  for (const auto& s : shapes) {
    for (int threads_x : {32, 64, 128, 256}) {
      for (int64_t target : {int64_t(1), int64_t(132 * 4), int64_t(132 * 4 * 8)}) {
        const ec::TilePlan plan = ec::plan_tiles(s[0], s[1], threads_x, target);
        const int threads_y = ec::kBlockThreads / threads_x;
        SCOPED_TRACE(std::to_string(s[0]) + " x " + std::to_string(s[1]) + ", threads_x " +
                     std::to_string(threads_x) + ", target " + std::to_string(target));
        EXPECT_GE(plan.row_tiles * threads_x * ec::kRowsPerThread, s[0]);
        EXPECT_LT((plan.row_tiles - 1) * threads_x * ec::kRowsPerThread, s[0]);
        EXPECT_GE(plan.column_chunks * plan.columns_per_chunk, s[1]);
        EXPECT_LT((plan.column_chunks - 1) * plan.columns_per_chunk, s[1]);
        EXPECT_EQ(plan.columns_per_chunk % threads_y, 0);
        EXPECT_LE(plan.column_chunks, 65535);
        if (s[1] >= 65535 * threads_y) continue;  // grid.y bounds the chunks instead
        EXPECT_LE(plan.row_tiles * plan.column_chunks, std::max(plan.row_tiles, target) + plan.row_tiles);
      }
    }
  }
}

// Every epilogue with every activation maps to the tile op of its parts, and the library has a
// kernel of that op for that activation on every path; the op's parts are the epilogue's.
TEST(CudaTilePlan, EveryEpilogueAndActivationHasItsKernel) {
  const epigemm_epilogue_t epilogues[] = {
      EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BIAS,   EPIGEMM_EPILOGUE_ACT,    EPIGEMM_EPILOGUE_ACT_BIAS,
      EPIGEMM_EPILOGUE_ACT_AUX, EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_EPILOGUE_DACT, EPIGEMM_EPILOGUE_DACT_BGRAD,
      EPIGEMM_EPILOGUE_BGRADB,  EPIGEMM_EPILOGUE_BGRADA};
  int kernels = 0;
  for (epigemm_epilogue_t e : epilogues) {
    for (int a = 0; a < ec::kActivationCount; ++a) {
      const epigemm::EpilogueParts parts = epigemm::epilogue_parts(e, epigemm_activation_t(a));
      SCOPED_TRACE(epigemm::epilogue_label(e, epigemm_activation_t(a)));
      if (!parts.computes_on_acc()) continue;
      const ec::TileOp op = ec::tile_op_for(parts);
      const ec::TileOpParts p = ec::tile_op_parts(op);
      EXPECT_EQ(p.adds_bias, parts.reads_bias());
      EXPECT_EQ(p.writes_aux, parts.writes_aux());
      EXPECT_EQ(p.reads_aux, parts.reads_aux());
      EXPECT_EQ(p.sums_rows, parts.bias_grad == epigemm::BiasGradPart::rows_of_gradient);
      EXPECT_TRUE(p.reads_acc && p.writes_d && p.has_activation);
      for (int v = 0; v < ec::kKernelVariantCount; ++v) {
        const ec::KernelVariant k = ec::kernel_variant_of_index(v);
        EXPECT_EQ(ec::kernel_variant_index(k), v);
        const bool loads_width = (!k.wide_acc || p.reads_acc) && (!k.wide_aux || p.reads_aux);
        const bool has_narrower = !(ec::narrower_config(ec::kLibraryConfig[int(op)]) == ec::kLibraryConfig[int(op)]);
        if (loads_width && (!k.narrowed || has_narrower)) {
          EXPECT_TRUE(ec::library_has_kernel(op, parts.activation, k)) << "variant " << v;
          ++kernels;
        }
      }
    }
  }
  EXPECT_GT(kernels, 0);
  // ACT with the identity is D = acc: no kernel; the ops without an activation only the identity.
  EXPECT_FALSE(ec::library_has_kernel(ec::TileOp::act, EPIGEMM_ACTIVATION_IDENTITY, ec::KernelVariant{}));
  EXPECT_TRUE(ec::library_has_kernel(ec::TileOp::row_sums, EPIGEMM_ACTIVATION_IDENTITY, ec::KernelVariant{}));
  EXPECT_FALSE(ec::library_has_kernel(ec::TileOp::row_sums, EPIGEMM_ACTIVATION_SILU, ec::KernelVariant{}));
}

#ifdef EPIGEMM_TESTS_WITH_CUDA

// Every epilogue's call captured into one CUDA graph on a non-blocking stream in global capture
// mode (where cudaMalloc, a host synchronization or a device-to-host copy inside a call would make
// the capture fail), then replayed twice, each time on fresh inputs written into the same
// buffers and with poisoned outputs, and checked against the reference.
TEST(CudaBackend, CallsCaptureIntoAGraphAndReplay) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  std::vector<GemmCase> cases;
  uint64_t index = 0;
  for (epigemm_epilogue_t e : kAllEpilogues) cases.push_back(large_case(e, 768, 520, 24, 600 + index++));
  check_graph_capture_and_replay(ctx, cases, EPIGEMM_BACKEND_CUDA, "cuda_graph_replay");
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
  ASSERT_TRUE(epigemm_test::copy_to_device_and_wait(a_dev, a.data(), a.size() * 2));
  ASSERT_TRUE(epigemm_test::copy_to_device_and_wait(b_dev, b.data(), b.size() * 2));
  ASSERT_TRUE(epigemm_test::copy_to_device_and_wait(bias_dev, bias.data(), bias.size() * 4));
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

// x rounded to nearest even in a dtype, as a float.
float rounded_to(epigemm_dtype_t dtype, float x) {
  unsigned char bytes[4];
  epigemm::store_from_float(bytes, dtype, 0, x);
  return epigemm::load_as_float(bytes, dtype, 0);
}

// Every tile op the library compiles, with every activation, against the host's functors on the
// same inputs (core/epilogue_math.hpp): on a short tensor (one wave, the narrower configuration for
// the 256-thread op) in every acc / aux width the op loads, on a tensor of more than 8M elements
// (several waves, the op's configuration as named), and on the scalar path (misaligned pointers,
// odd rows). bf16 D, aux and bias, fp32 sums; partial row tiles and column chunks.
TEST(CudaKernels, EveryOpAndActivationMatchesTheHost) {
  namespace ec = epigemm::cuda;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "SKIP: no CUDA device";
  }
  ec::KernelTuning tuning;
  const epigemm::Status tuned = ec::query_kernel_tuning(&tuning);
  if (!tuned.ok()) GTEST_SKIP() << "SKIP: the epilogue kernels cannot run here: " << tuned.message();
  // A blocking stream: the cudaMemset / cudaMemcpy poisoning below run on the legacy default
  // stream and must be ordered before each launch.
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  struct KernelShape {
    int64_t rows, cols;
    int offset;        // elements added to every pointer: 1 makes them misaligned (scalar path)
    bool all_widths;   // also fp32 aux and bf16 acc (the other vector kernels)
  };
  const KernelShape shapes[] = {{1000, 1234, 0, true}, {2048, 4200, 0, false}, {1001, 777, 1, false}};
  for (const KernelShape& shape : shapes) {
    const int64_t rows = shape.rows, cols = shape.cols, count = rows * cols;
    const size_t elements = size_t(count), row_count = size_t(rows);
    std::vector<float> acc(elements), aux_in(elements), bias(row_count);
    uint64_t state = 0x9e3779b97f4a7c15ull ^ uint64_t(rows);
    auto uniform = [&state](float lo, float hi) {  // xorshift64*, fixed seed
      state ^= state >> 12;
      state ^= state << 25;
      state ^= state >> 27;
      const double u = double((state * 0x2545f4914f6cdd1dull) >> 11) / double(uint64_t(1) << 53);
      return float(lo + (hi - lo) * u);
    };
    // Values representable in bf16, so that every width holds the same inputs.
    for (size_t e = 0; e < elements; ++e) {
      acc[e] = bf16_value(bf16_bits_round(uniform(-5.0f, 5.0f)));
      aux_in[e] = bf16_value(bf16_bits_round(uniform(-5.0f, 5.0f)));
    }
    for (auto& b : bias) b = bf16_value(bf16_bits_round(uniform(-1.0f, 1.0f)));
    // Device copies of every input in fp32 and bf16, one element of slack for the offset.
    auto upload = [&](const std::vector<float>& values, epigemm_dtype_t dtype) {
      const size_t size = dtype == EPIGEMM_DTYPE_F32 ? 4 : 2;
      std::vector<unsigned char> bytes((values.size() + 1) * size, 0);
      for (size_t e = 0; e < values.size(); ++e) {
        epigemm::store_from_float(bytes.data(), dtype, int64_t(e) + shape.offset, values[e]);
      }
      void* device = nullptr;
      EXPECT_EQ(cudaMalloc(&device, bytes.size()), cudaSuccess);
      EXPECT_TRUE(epigemm_test::copy_to_device_and_wait(device, bytes.data(), bytes.size()));
      return device;
    };
    std::vector<void*> buffers;
    auto keep = [&](void* p) {
      buffers.push_back(p);
      return p;
    };
    void* acc_f32 = keep(upload(acc, EPIGEMM_DTYPE_F32));
    void* acc_bf16 = keep(upload(acc, EPIGEMM_DTYPE_BF16));
    void* aux_bf16 = keep(upload(aux_in, EPIGEMM_DTYPE_BF16));
    void* aux_f32 = keep(upload(aux_in, EPIGEMM_DTYPE_F32));
    void* bias_dev = keep(upload(bias, EPIGEMM_DTYPE_BF16));
    void* d_dev = nullptr;
    void* aux_out = nullptr;
    void* sums_dev = nullptr;
    void* partials_dev = nullptr;
    ASSERT_CUDA(cudaMalloc(&d_dev, (elements + 1) * 2));
    ASSERT_CUDA(cudaMalloc(&aux_out, (elements + 1) * 4));
    ASSERT_CUDA(cudaMalloc(&sums_dev, row_count * 4));
    keep(d_dev);
    keep(aux_out);
    keep(sums_dev);
    int64_t partial_count = 1;
    for (int op = 0; op < ec::kTileOpCount; ++op) {
      for (int a = 0; a < ec::kActivationCount; ++a) {
        partial_count = std::max(partial_count, ec::row_partial_elements(tuning, ec::TileOp(op), epigemm_activation_t(a), rows, cols));
      }
    }
    ASSERT_CUDA(cudaMalloc(&partials_dev, size_t(partial_count) * 4));
    keep(partials_dev);
    auto at = [&](void* base, epigemm_dtype_t dtype) {
      return static_cast<void*>(static_cast<unsigned char*>(base) + shape.offset * (dtype == EPIGEMM_DTYPE_F32 ? 4 : 2));
    };

    for (int op_index = 0; op_index < ec::kTileOpCount; ++op_index) {
      const ec::TileOp op = ec::TileOp(op_index);
      const ec::TileOpParts p = ec::tile_op_parts(op);
      for (int a = 0; a < ec::kActivationCount; ++a) {
        const epigemm_activation_t activation = epigemm_activation_t(a);
        if (!ec::library_has_kernel(op, activation, ec::KernelVariant{})) continue;
        // Host expectation: D (and aux) as floats before rounding to bf16, row sums in double.
        std::vector<float> want_d(elements), want_aux(elements);
        std::vector<double> want_sums(row_count, 0.0), sum_scale(row_count, 0.0);
        epigemm::visit_activation(activation, [&](auto act) {
          using Act = decltype(act);
          for (int64_t j = 0; j < cols; ++j) {
            for (int64_t i = 0; i < rows; ++i) {
              const size_t e = size_t(i + j * rows);
              float out;
              if (p.reads_aux) {
                out = acc[e] * Act::derivative(aux_in[e]);
              } else {
                float z = p.reads_acc ? acc[e] : 0.0f;
                if (p.adds_bias) z = p.reads_acc ? z + bias[size_t(i)] : bias[size_t(i)];
                want_aux[e] = z;
                out = Act::forward(z);
              }
              want_d[e] = out;
              want_sums[size_t(i)] += out;
              sum_scale[size_t(i)] += std::fabs(out);
            }
          }
          return 0;
        });
        const bool widths[][2] = {{true, false}, {false, false}, {true, true}, {false, true}};
        for (const auto& width : widths) {
          const bool wide_acc = width[0], wide_aux = width[1];
          if (!shape.all_widths && (!wide_acc || wide_aux)) continue;
          if ((!p.reads_acc && !wide_acc) || (!(p.reads_aux || p.writes_aux) && wide_aux)) continue;
          SCOPED_TRACE(std::string("op ") + std::to_string(op_index) + ", " + epigemm_activation_name(activation) +
                       ", " + std::to_string(rows) + " x " + std::to_string(cols) + ", offset " +
                       std::to_string(shape.offset) + ", acc " + (wide_acc ? "f32" : "bf16") + ", aux " +
                       (wide_aux ? "f32" : "bf16"));
          const epigemm_dtype_t acc_dtype = wide_acc ? EPIGEMM_DTYPE_F32 : EPIGEMM_DTYPE_BF16;
          const epigemm_dtype_t aux_dtype = wide_aux ? EPIGEMM_DTYPE_F32 : EPIGEMM_DTYPE_BF16;
          void* aux_dev = aux_out;
          if (p.reads_aux) aux_dev = wide_aux ? aux_f32 : aux_bf16;
          ASSERT_CUDA(cudaMemset(d_dev, 0xff, (elements + 1) * 2));  // NaN poison
          ASSERT_CUDA(cudaMemset(aux_out, 0xff, (elements + 1) * 4));
          ASSERT_CUDA(cudaMemset(sums_dev, 0xff, row_count * 4));
          ec::TileArgs args;
          args.rows = rows;
          args.cols = cols;
          args.acc = at(wide_acc ? acc_f32 : acc_bf16, acc_dtype);
          args.acc_dtype = acc_dtype;
          args.ld_acc = rows;
          args.d = at(d_dev, EPIGEMM_DTYPE_BF16);
          args.d_dtype = EPIGEMM_DTYPE_BF16;
          args.ld_d = rows;
          args.aux = at(aux_dev, aux_dtype);
          args.aux_dtype = aux_dtype;
          args.ld_aux = rows;
          args.bias = at(bias_dev, EPIGEMM_DTYPE_BF16);
          args.bias_dtype = EPIGEMM_DTYPE_BF16;
          args.row_partials = static_cast<float*>(partials_dev);
          const ec::KernelVariant variant = ec::tile_kernel_variant(op, args);
          EXPECT_EQ(variant.vector, shape.offset == 0 && rows % 8 == 0);
          const epigemm::Status launched =
              ec::launch_tile_kernel(tuning, op, activation, args, sums_dev, EPIGEMM_DTYPE_F32, stream);
          ASSERT_TRUE(launched.ok()) << launched.message();
          ASSERT_CUDA(cudaStreamSynchronize(stream));
          if (p.writes_d || p.writes_aux) {
            std::vector<unsigned char> d((elements + 1) * 2), aux((elements + 1) * 4);
            ASSERT_CUDA(cudaMemcpy(d.data(), d_dev, d.size(), cudaMemcpyDeviceToHost));
            ASSERT_CUDA(cudaMemcpy(aux.data(), aux_out, aux.size(), cudaMemcpyDeviceToHost));
            int64_t bad = 0;
            for (int64_t e = 0; e < count; ++e) {
              const int64_t index = e + shape.offset;
              // The device divides with the hardware reciprocal (a few fp32 ulp): within one
              // bf16 ulp of the host after rounding; aux is exact (no division on its way).
              const float got = epigemm::load_as_float(d.data(), EPIGEMM_DTYPE_BF16, index), want = want_d[size_t(e)];
              if (p.writes_d && !(std::fabs(got - want) <= std::fabs(want) * 0x1p-7f + 1e-30f)) ++bad;
              if (p.writes_aux && epigemm::load_as_float(aux.data(), aux_dtype, index) !=
                                      rounded_to(aux_dtype, want_aux[size_t(e)])) {
                ++bad;
              }
            }
            EXPECT_EQ(bad, 0);
          }
          if (p.sums_rows) {
            std::vector<float> sums(row_count);
            ASSERT_CUDA(cudaMemcpy(sums.data(), sums_dev, row_count * 4, cudaMemcpyDeviceToHost));
            int64_t bad = 0;
            for (int64_t i = 0; i < rows; ++i) {
              // fp32 sums in another order than the host's double sum: within 1e-5 of the sum of
              // the terms' magnitudes.
              const double err = std::fabs(double(sums[size_t(i)]) - want_sums[size_t(i)]);
              if (!(err <= 1e-5 * sum_scale[size_t(i)] + 1e-30)) ++bad;
            }
            EXPECT_EQ(bad, 0);
          }
        }
      }
    }
    for (void* buffer : buffers) cudaFree(buffer);
  }
  cudaStreamDestroy(stream);
}

// ---- every epilogue with every activation, end to end ----------------------------------------
// Through the public C API with the description's activation, on device buffers of its own (the
// shared harness drives the GELU presets above), against the reference backend on host copies of
// the same inputs.

// A column-major operand on the host (the truth) with a device mirror; ld >= rows; `offset`
// elements before (0, 0) (1: a misaligned pointer).
struct Mirrored {
  epigemm_dtype_t dtype = EPIGEMM_DTYPE_F32;
  int64_t rows = 0, cols = 0, ld = 1, offset = 0;
  std::vector<unsigned char> host;
  void* device = nullptr;

  Mirrored() = default;
  Mirrored(epigemm_dtype_t t, int64_t r, int64_t c, int64_t pad, bool misaligned)
      : dtype(t), rows(r), cols(c), ld(std::max<int64_t>(1, r) + pad), offset(misaligned ? 1 : 0) {
    host.assign(size_t((ld * std::max<int64_t>(c, 1) + offset + 8) * int64_t(epigemm::dtype_size(t))), 0xff);
  }
  // A copy holds the host bytes only (a device mirror of its own on upload()).
  Mirrored(const Mirrored& other)
      : dtype(other.dtype), rows(other.rows), cols(other.cols), ld(other.ld), offset(other.offset), host(other.host) {}
  Mirrored(Mirrored&& other) noexcept { swap(other); }
  Mirrored& operator=(Mirrored other) {
    swap(other);
    return *this;
  }
  ~Mirrored() {
    if (device != nullptr) cudaFree(device);
  }
  void swap(Mirrored& other) {
    std::swap(dtype, other.dtype);
    std::swap(rows, other.rows);
    std::swap(cols, other.cols);
    std::swap(ld, other.ld);
    std::swap(offset, other.offset);
    std::swap(host, other.host);
    std::swap(device, other.device);
  }
  int64_t element_bytes() const { return int64_t(epigemm::dtype_size(dtype)); }
  void* host_data() { return host.data() + offset * element_bytes(); }
  void* device_data() const { return static_cast<unsigned char*>(device) + offset * element_bytes(); }
  float get(int64_t r, int64_t c) const {
    return epigemm::load_as_float(host.data() + offset * element_bytes(), dtype, r + c * ld);
  }
  void set(int64_t r, int64_t c, float v) { epigemm::store_from_float(host_data(), dtype, r + c * ld, v); }
  void upload() {
    if (device == nullptr) {
      ASSERT_EQ(cudaMalloc(&device, host.size()), cudaSuccess);
    }
    EXPECT_TRUE(epigemm_test::copy_to_device_and_wait(device, host.data(), host.size()));
  }
  void download() { EXPECT_EQ(cudaMemcpy(host.data(), device, host.size(), cudaMemcpyDeviceToHost), cudaSuccess); }
  epigemm_matrix_t matrix(epigemm_memory_t memory) {
    return epigemm_matrix_t{memory == EPIGEMM_MEMORY_HOST ? host_data() : device_data(), dtype, rows, cols, ld, memory};
  }
  epigemm_vector_t vector(epigemm_memory_t memory) {
    return epigemm_vector_t{memory == EPIGEMM_MEMORY_HOST ? host_data() : device_data(), dtype, rows, memory};
  }
};

struct ActCase {
  epigemm_epilogue_t epilogue = EPIGEMM_EPILOGUE_DEFAULT;
  epigemm_activation_t activation = EPIGEMM_ACTIVATION_GELU_TANH;
  epigemm_op_t transa = EPIGEMM_OP_T, transb = EPIGEMM_OP_N;
  int64_t m = 1, n = 1, k = 1;
  epigemm_dtype_t ab = EPIGEMM_DTYPE_BF16, d = EPIGEMM_DTYPE_BF16, side = EPIGEMM_DTYPE_BF16;
  float alpha = 1.0f, beta = 0.0f;
  int64_t pad = 0;
  bool misaligned = false;
  uint32_t seed = 1;

  epigemm::EpilogueParts parts() const { return epigemm::epilogue_parts(epilogue, activation); }
  std::string describe() const {
    return epigemm::epilogue_label(epilogue, activation) + " " + (transa == EPIGEMM_OP_T ? "T" : "N") +
           (transb == EPIGEMM_OP_T ? "T" : "N") + " m " + std::to_string(m) + " n " + std::to_string(n) + " k " +
           std::to_string(k) + " ab " + epigemm_dtype_name(ab) + " d " + epigemm_dtype_name(d) + " side " +
           epigemm_dtype_name(side) + " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta) +
           " pad " + std::to_string(pad) + (misaligned ? " misaligned" : "");
  }
};

struct ActOperands {
  Mirrored a, b, d, bias, aux, bias_grad;
};

ActOperands make_operands(const ActCase& c) {
  uint64_t state = 0x243f6a8885a308d3ull ^ (uint64_t(c.seed) * 0x9e3779b97f4a7c15ull);
  auto uniform = [&state](float lo, float hi) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const double u = double((state * 0x2545f4914f6cdd1dull) >> 11) / double(uint64_t(1) << 53);
    return float(lo + (hi - lo) * u);
  };
  const epigemm::EpilogueParts parts = c.parts();
  const bool an = c.transa == EPIGEMM_OP_N, bn = c.transb == EPIGEMM_OP_N;
  ActOperands o;
  o.a = Mirrored(c.ab, an ? c.m : c.k, an ? c.k : c.m, c.pad, c.misaligned);
  o.b = Mirrored(c.ab, bn ? c.k : c.n, bn ? c.n : c.k, c.pad + 1, c.misaligned);
  o.d = Mirrored(c.d, c.m, c.n, c.pad + 2, c.misaligned);
  for (int64_t j = 0; j < o.a.cols; ++j)
    for (int64_t i = 0; i < o.a.rows; ++i) o.a.set(i, j, uniform(-1.0f, 1.0f));
  for (int64_t j = 0; j < o.b.cols; ++j)
    for (int64_t i = 0; i < o.b.rows; ++i) o.b.set(i, j, uniform(-1.0f, 1.0f));
  if (c.beta != 0.0f) {
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t i = 0; i < c.m; ++i) o.d.set(i, j, uniform(-1.0f, 1.0f));
  }
  if (parts.reads_bias()) {
    o.bias = Mirrored(c.side, c.m, 1, 0, c.misaligned);
    for (int64_t i = 0; i < c.m; ++i) o.bias.set(i, 0, uniform(-1.0f, 1.0f));
  }
  if (parts.uses_aux()) {
    o.aux = Mirrored(c.side, c.m, c.n, c.pad + 3, c.misaligned);
    if (parts.reads_aux()) {
      for (int64_t j = 0; j < c.n; ++j)
        for (int64_t i = 0; i < c.m; ++i) o.aux.set(i, j, 3.0f * uniform(-1.0f, 1.0f));
    }
  }
  if (parts.writes_bias_grad()) o.bias_grad = Mirrored(c.side, parts.bias_grad_length(c.m, c.n), 1, 0, c.misaligned);
  return o;
}

struct DescOwner {
  epigemm_gemm_desc_t desc = nullptr;
  ~DescOwner() {
    if (desc != nullptr) epigemm_gemm_desc_destroy(desc);
  }
};

// The description of the case on `memory`'s views of the operands.
void describe_call(const ActCase& c, ActOperands& o, epigemm_memory_t memory, epigemm_backend_t backend,
                   DescOwner* owner) {
  const epigemm::EpilogueParts parts = c.parts();
  ASSERT_EQ(epigemm_gemm_desc_create(&owner->desc), EPIGEMM_STATUS_SUCCESS);
  epigemm_gemm_desc_t desc = owner->desc;
  ASSERT_EQ(epigemm_gemm_desc_set_transpose(desc, c.transa, c.transb), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_gemm_desc_set_scalars(desc, c.alpha, c.beta), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_gemm_desc_set_epilogue(desc, c.epilogue), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_gemm_desc_set_activation(desc, c.activation), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_gemm_desc_set_backend(desc, backend), EPIGEMM_STATUS_SUCCESS);
  if (parts.reads_bias()) {
    const epigemm_vector_t v = o.bias.vector(memory);
    ASSERT_EQ(epigemm_gemm_desc_set_bias(desc, &v), EPIGEMM_STATUS_SUCCESS);
  }
  if (parts.uses_aux()) {
    const epigemm_matrix_t m = o.aux.matrix(memory);
    ASSERT_EQ(epigemm_gemm_desc_set_aux(desc, &m), EPIGEMM_STATUS_SUCCESS);
  }
  if (parts.writes_bias_grad()) {
    const epigemm_vector_t v = o.bias_grad.vector(memory);
    ASSERT_EQ(epigemm_gemm_desc_set_bias_grad(desc, &v), EPIGEMM_STATUS_SUCCESS);
  }
}

// Runs the case on the reference backend (host copies of the inputs) and returns the outputs.
ActOperands reference_outputs(epigemm_context_t ctx, const ActCase& c, const ActOperands& inputs) {
  ActOperands ref = inputs;
  DescOwner owner;
  describe_call(c, ref, EPIGEMM_MEMORY_HOST, EPIGEMM_BACKEND_REFERENCE, &owner);
  const epigemm_matrix_t a = ref.a.matrix(EPIGEMM_MEMORY_HOST), b = ref.b.matrix(EPIGEMM_MEMORY_HOST),
                         d = ref.d.matrix(EPIGEMM_MEMORY_HOST);
  EXPECT_EQ(epigemm_gemm(ctx, owner.desc, &a, &b, &d, nullptr, 0, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx);
  return ref;
}

// |out - ref| <= tolerance (|ref| + 1) on every element; NaN only where the reference has it.
void expect_close(const char* name, const Mirrored& out, const Mirrored& ref, double tolerance) {
  int64_t bad = 0, first = -1;
  for (int64_t j = 0; j < out.cols; ++j) {
    for (int64_t i = 0; i < out.rows; ++i) {
      const double o = out.get(i, j), r = ref.get(i, j);
      const bool ok = std::isnan(r) ? std::isnan(o) : std::fabs(o - r) <= tolerance * (std::fabs(r) + 1.0);
      if (!ok) {
        if (first < 0) first = i + j * out.rows;
        ++bad;
      }
    }
  }
  EXPECT_EQ(bad, 0) << name << ": first bad element (" << (first < 0 ? 0 : first % out.rows) << ", "
                    << (first < 0 ? 0 : first / out.rows) << ")";
}

void expect_matches_reference(const ActCase& c, const ActOperands& out, const ActOperands& ref) {
  const epigemm::EpilogueParts parts = c.parts();
  const bool all_f32 = c.ab == EPIGEMM_DTYPE_F32 && c.d == EPIGEMM_DTYPE_F32 && c.side == EPIGEMM_DTYPE_F32;
  const double tolerance = all_f32 ? 2e-5 : 1.6e-2;
  expect_close("D", out.d, ref.d, tolerance);
  if (parts.writes_aux()) expect_close("aux", out.aux, ref.aux, tolerance);
  if (parts.writes_bias_grad()) {
    // A sum of n (rows of g) or k (an operand) terms: the tolerance scaled by their count's root.
    const int64_t terms = parts.bias_grad == epigemm::BiasGradPart::rows_of_gradient ? c.n : c.k;
    expect_close("bias_grad", out.bias_grad, ref.bias_grad, tolerance * std::sqrt(double(std::max<int64_t>(terms, 1))));
  }
}

// Uploads the operands, runs the case on the cuda backend on `stream`, downloads them.
void run_on_cuda(epigemm_context_t ctx, const ActCase& c, ActOperands& o, cudaStream_t stream) {
  for (Mirrored* m : {&o.a, &o.b, &o.d, &o.bias, &o.aux, &o.bias_grad}) {
    if (!m->host.empty()) m->upload();
  }
  DescOwner owner;
  describe_call(c, o, EPIGEMM_MEMORY_DEVICE, EPIGEMM_BACKEND_CUDA, &owner);
  const epigemm_matrix_t a = o.a.matrix(EPIGEMM_MEMORY_DEVICE), b = o.b.matrix(EPIGEMM_MEMORY_DEVICE),
                         d = o.d.matrix(EPIGEMM_MEMORY_DEVICE);
  size_t bytes = 0;
  ASSERT_EQ(epigemm_gemm_workspace_size(ctx, owner.desc, &a, &b, &d, &bytes), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx);
  void* workspace = nullptr;
  ASSERT_CUDA(cudaMalloc(&workspace, std::max<size_t>(bytes, 1)));
  EXPECT_EQ(epigemm_gemm(ctx, owner.desc, &a, &b, &d, workspace, bytes, stream), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx);
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  cudaFree(workspace);
  for (Mirrored* m : {&o.a, &o.b, &o.d, &o.bias, &o.aux, &o.bias_grad}) {
    if (!m->host.empty()) m->download();
  }
}

// Runs the case on the cuda backend, checks it against the reference backend on the same inputs,
// and returns the cuda backend's outputs.
ActOperands expect_cuda_matches_reference(epigemm_context_t ctx, const ActCase& c, cudaStream_t stream) {
  const ActOperands inputs = make_operands(c);
  const ActOperands ref = reference_outputs(ctx, c, inputs);
  ActOperands out = inputs;
  run_on_cuda(ctx, c, out, stream);
  expect_matches_reference(c, out, ref);
  return out;
}

const epigemm_epilogue_t kEveryEpilogue[] = {
    EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BIAS,   EPIGEMM_EPILOGUE_ACT,        EPIGEMM_EPILOGUE_ACT_BIAS,
    EPIGEMM_EPILOGUE_ACT_AUX, EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_EPILOGUE_DACT, EPIGEMM_EPILOGUE_DACT_BGRAD,
    EPIGEMM_EPILOGUE_BGRADB,  EPIGEMM_EPILOGUE_BGRADA};

std::vector<epigemm_activation_t> every_activation() {
  std::vector<epigemm_activation_t> all;
#define EPIGEMM_TEST_ACTIVATION(value, functor, name) all.push_back(value);
  EPIGEMM_FOR_EACH_ACTIVATION(EPIGEMM_TEST_ACTIVATION)
#undef EPIGEMM_TEST_ACTIVATION
  return all;
}

// The transposes of the pass an epilogue belongs to: fprop TN, dgrad NN, wgrad NT (BGRADA runs
// in both layouts of A in the tests that name it).
void act_pass_transposes(ActCase* c) {
  const epigemm::EpilogueParts parts = c->parts();
  c->transa = parts.backward() ? EPIGEMM_OP_N : EPIGEMM_OP_T;
  c->transb = EPIGEMM_OP_N;
  if (parts.bias_grad == epigemm::BiasGradPart::columns_of_b || parts.bias_grad == epigemm::BiasGradPart::rows_of_a) {
    c->transa = EPIGEMM_OP_N;
    c->transb = EPIGEMM_OP_T;
  }
}

TEST(CudaBackend, EveryEpilogueAndActivationMatchesTheReference) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  Stream stream(EPIGEMM_MEMORY_DEVICE);
  struct Layout {
    int64_t m, n, k, pad;
    bool misaligned;
    epigemm_dtype_t ab, d, side;
    float alpha, beta;
  };
  const Layout layouts[] = {
      {264, 200, 40, 0, false, EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_BF16, 1.0f, 0.0f},  // vector path
      {131, 97, 33, 3, true, EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F32, 0.75f, 0.5f},     // scalar path
      {2056, 72, 24, 0, false, EPIGEMM_DTYPE_F16, EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_BF16, -1.5f, 0.0f},  // mixed dtypes
  };
  uint32_t seed = 1;
  for (const Layout& l : layouts) {
    for (epigemm_epilogue_t e : kEveryEpilogue) {
      for (epigemm_activation_t activation : every_activation()) {
        ActCase c;
        c.epilogue = e;
        c.activation = activation;
        act_pass_transposes(&c);
        c.m = l.m, c.n = l.n, c.k = l.k, c.pad = l.pad, c.misaligned = l.misaligned;
        c.ab = l.ab, c.d = l.d, c.side = l.side, c.alpha = l.alpha, c.beta = l.beta;
        c.seed = seed++;
        SCOPED_TRACE(c.describe());
        expect_cuda_matches_reference(ctx, c, static_cast<cudaStream_t>(stream.get()));
      }
    }
  }
}

// BGRADA in both layouts of A (transa N: the row sums of the tile kernel over a strided A;
// transa T: the column sums), with every degenerate size: gemm_n = 0 still writes the sums,
// gemm_k = 0 writes zeros, gemm_m = 0 writes nothing; and bitwise the same sums twice.
TEST(CudaBackend, BgradaSumsBothLayoutsAndDegenerateSizes) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  Stream stream(EPIGEMM_MEMORY_DEVICE);
  // 3000 x 4100 sums: several waves of the row-sum kernel (more than 8M elements); n stays small
  // so that the reference backend's GEMM on the host stays cheap.
  const int64_t sizes[][3] = {{3000, 8, 4100}, {1001, 300, 777}, {37, 0, 5}, {37, 29, 0}, {0, 29, 5}, {64, 0, 0}};
  uint32_t seed = 100;
  for (epigemm_op_t transa : {EPIGEMM_OP_N, EPIGEMM_OP_T}) {
    for (const auto& size : sizes) {
      for (float beta : {0.0f, 0.5f}) {
        ActCase c;
        c.epilogue = EPIGEMM_EPILOGUE_BGRADA;
        c.transa = transa;
        c.transb = EPIGEMM_OP_T;
        c.m = size[0], c.n = size[1], c.k = size[2];
        c.side = EPIGEMM_DTYPE_F32;
        c.beta = beta;
        c.seed = seed++;
        SCOPED_TRACE(c.describe());
        const ActOperands out = expect_cuda_matches_reference(ctx, c, static_cast<cudaStream_t>(stream.get()));
        ActOperands again = make_operands(c);
        run_on_cuda(ctx, c, again, static_cast<cudaStream_t>(stream.get()));
        EXPECT_EQ(out.bias_grad.host, again.bias_grad.host) << "bias_grad differs between two runs";
      }
    }
  }
}

// Calls of the new epilogues captured into one CUDA graph (global capture mode: an allocation,
// a host synchronization or a copy to the host inside a call breaks it), BGRADA's fork to the
// second stream and join included, then replayed on fresh inputs against the reference.
TEST(CudaBackend, ActivationAndBgradaCallsCaptureIntoAGraph) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCuda);
  struct Captured {
    ActCase c;
    ActOperands ops;
    DescOwner owner;
    epigemm_matrix_t a{}, b{}, d{};
    void* workspace = nullptr;
    size_t bytes = 0;
  };
  std::vector<std::unique_ptr<Captured>> calls;
  const std::pair<epigemm_epilogue_t, epigemm_activation_t> cases[] = {
      {EPIGEMM_EPILOGUE_BGRADA, EPIGEMM_ACTIVATION_GELU_TANH}, {EPIGEMM_EPILOGUE_ACT, EPIGEMM_ACTIVATION_RELU},
      {EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_SILU}, {EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_GELU_ERF},
      {EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_GELU_ERF}};
  uint32_t seed = 200;
  for (const auto& cs : cases) {
    auto call = std::make_unique<Captured>();
    call->c.epilogue = cs.first;
    call->c.activation = cs.second;
    act_pass_transposes(&call->c);
    call->c.m = 768, call->c.n = 520, call->c.k = 24;
    call->c.seed = seed++;
    call->ops = make_operands(call->c);
    for (Mirrored* m : {&call->ops.a, &call->ops.b, &call->ops.d, &call->ops.bias, &call->ops.aux, &call->ops.bias_grad}) {
      if (!m->host.empty()) m->upload();
    }
    describe_call(call->c, call->ops, EPIGEMM_MEMORY_DEVICE, EPIGEMM_BACKEND_CUDA, &call->owner);
    call->a = call->ops.a.matrix(EPIGEMM_MEMORY_DEVICE);
    call->b = call->ops.b.matrix(EPIGEMM_MEMORY_DEVICE);
    call->d = call->ops.d.matrix(EPIGEMM_MEMORY_DEVICE);
    ASSERT_EQ(epigemm_gemm_workspace_size(ctx, call->owner.desc, &call->a, &call->b, &call->d, &call->bytes),
              EPIGEMM_STATUS_SUCCESS)
        << epigemm_context_last_error(ctx);
    ASSERT_CUDA(cudaMalloc(&call->workspace, call->bytes));
    calls.push_back(std::move(call));
  }
  Stream stream(EPIGEMM_MEMORY_DEVICE);
  const cudaStream_t s = static_cast<cudaStream_t>(stream.get());
  for (auto& call : calls) {  // one uncaptured run first: kernel modules load lazily
    ASSERT_EQ(epigemm_gemm(ctx, call->owner.desc, &call->a, &call->b, &call->d, call->workspace, call->bytes, s),
              EPIGEMM_STATUS_SUCCESS)
        << epigemm_context_last_error(ctx);
  }
  stream.synchronize();
  ASSERT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  std::vector<epigemm_status_t> statuses;
  for (auto& call : calls) {
    statuses.push_back(epigemm_gemm(ctx, call->owner.desc, &call->a, &call->b, &call->d, call->workspace, call->bytes, s));
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  for (size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(statuses[i], EPIGEMM_STATUS_SUCCESS) << calls[i]->c.describe();
  ASSERT_EQ(end, cudaSuccess) << "capture failed: " << cudaGetErrorString(end);
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    std::vector<ActOperands> refs;
    for (auto& call : calls) {
      // Fresh inputs in the same buffers, poisoned outputs.
      ActCase fresh = call->c;
      fresh.seed += 1000 * uint32_t(replay + 1);
      const ActOperands inputs = make_operands(fresh);
      for (auto pair : {std::make_pair(&call->ops.a, &inputs.a), std::make_pair(&call->ops.b, &inputs.b),
                        std::make_pair(&call->ops.d, &inputs.d), std::make_pair(&call->ops.bias, &inputs.bias),
                        std::make_pair(&call->ops.aux, &inputs.aux), std::make_pair(&call->ops.bias_grad, &inputs.bias_grad)}) {
        pair.first->host = pair.second->host;
        if (!pair.first->host.empty()) pair.first->upload();
      }
      refs.push_back(reference_outputs(ctx, call->c, inputs));
    }
    ASSERT_CUDA(cudaGraphLaunch(exec, s));
    stream.synchronize();
    for (size_t i = 0; i < calls.size(); ++i) {
      SCOPED_TRACE("replay " + std::to_string(replay) + ": " + calls[i]->c.describe());
      for (Mirrored* m : {&calls[i]->ops.d, &calls[i]->ops.aux, &calls[i]->ops.bias_grad}) {
        if (!m->host.empty()) m->download();
      }
      expect_matches_reference(calls[i]->c, calls[i]->ops, refs[i]);
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (auto& call : calls) cudaFree(call->workspace);
}

// The backend's setup (query_kernel_tuning, what CudaBackend::init calls) reads the device and
// asks no kernel's occupancy; the first plan of a kernel asks for that kernel's alone, and later
// plans and workspace queries of it reuse the answer (docs: epilogue_kernels.hpp, KernelTuning).
TEST(CudaKernels, OccupancyIsAskedOncePerKernelOnFirstUse) {
  namespace ec = epigemm::cuda;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "SKIP: no CUDA device";
  }
  ec::KernelTuning tuning;
  const epigemm::Status tuned = ec::query_kernel_tuning(&tuning);
  if (!tuned.ok()) GTEST_SKIP() << "SKIP: the epilogue kernels cannot run here: " << tuned.message();
  EXPECT_GT(tuning.sm_count, 0);
  EXPECT_EQ(tuning.occupancy_queries, 0);
  for (int op = 0; op < ec::kTileOpCount; ++op) {
    for (int a = 0; a < ec::kActivationCount; ++a) {
      for (int v = 0; v < ec::kKernelVariantCount; ++v) EXPECT_FALSE(tuning.occupancy_known[op][a][v]);
    }
  }

  const ec::KernelVariant scalar{};
  const int bias_op = int(ec::TileOp::act_bias), identity = int(EPIGEMM_ACTIVATION_IDENTITY);
  ec::TilePlan first, again;
  ASSERT_TRUE(ec::library_tile_plan(tuning, ec::TileOp::act_bias, EPIGEMM_ACTIVATION_IDENTITY, scalar, 4096,
                                    4096, &first).ok());
  EXPECT_EQ(tuning.occupancy_queries, 1);
  EXPECT_TRUE(tuning.occupancy_known[bias_op][identity][0]);
  EXPECT_GE(tuning.blocks_per_sm[bias_op][identity][0], 1);
  ASSERT_TRUE(ec::library_tile_plan(tuning, ec::TileOp::act_bias, EPIGEMM_ACTIVATION_IDENTITY, scalar, 4096,
                                    4096, &again).ok());
  EXPECT_EQ(tuning.occupancy_queries, 1);
  EXPECT_EQ(first.column_chunks, again.column_chunks);
  EXPECT_EQ(first.row_tiles, again.row_tiles);

  // A workspace query asks about every kernel the call may run (its path depends on the
  // pointers), each once.
  int variants = 0;
  for (int v = 0; v < ec::kKernelVariantCount; ++v) {
    if (ec::library_has_kernel(ec::TileOp::dact_bgrad, EPIGEMM_ACTIVATION_GELU_TANH, ec::kernel_variant_of_index(v))) {
      ++variants;
    }
  }
  const int64_t partials =
      ec::row_partial_elements(tuning, ec::TileOp::dact_bgrad, EPIGEMM_ACTIVATION_GELU_TANH, 4096, 8192);
  EXPECT_GT(partials, 0);
  EXPECT_EQ(tuning.occupancy_queries, 1 + variants);
  EXPECT_EQ(ec::row_partial_elements(tuning, ec::TileOp::dact_bgrad, EPIGEMM_ACTIVATION_GELU_TANH, 4096, 8192),
            partials);
  EXPECT_EQ(tuning.occupancy_queries, 1 + variants);

  // A fresh tuning asks again and gets the same answers: the plans do not depend on the order.
  ec::KernelTuning fresh;
  ASSERT_TRUE(ec::query_kernel_tuning(&fresh).ok());
  EXPECT_EQ(ec::row_partial_elements(fresh, ec::TileOp::dact_bgrad, EPIGEMM_ACTIVATION_GELU_TANH, 4096, 8192),
            partials);
  ec::TilePlan from_fresh;
  ASSERT_TRUE(ec::library_tile_plan(fresh, ec::TileOp::act_bias, EPIGEMM_ACTIVATION_IDENTITY, scalar, 4096,
                                    4096, &from_fresh).ok());
  EXPECT_EQ(from_fresh.column_chunks, first.column_chunks);
}

#else  // !EPIGEMM_TESTS_WITH_CUDA

TEST(CudaBackend, CallsCaptureIntoAGraphAndReplay) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaBackend, BiasOnMoreThan2To31Elements) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaKernels, EveryOpAndActivationMatchesTheHost) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaKernels, OccupancyIsAskedOncePerKernelOnFirstUse) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaBackend, EveryEpilogueAndActivationMatchesTheReference) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaBackend, BgradaSumsBothLayoutsAndDegenerateSizes) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaBackend, ActivationAndBgradaCallsCaptureIntoAGraph) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}
TEST(CudaBackend, LinearWorkspaceQueryCoversEveryVectorDtype) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cuda backend is not compiled in)";
}

#endif  // EPIGEMM_TESTS_WITH_CUDA

}  // namespace
}  // namespace epigemm_test
