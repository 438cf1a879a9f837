// Tests of the `cutlass` backend (docs/dev/cutlass_backend.md), beside the shared matrix of
// test_backend_matrix.cpp, whose odd shapes it mostly declines (its kernels need 16-byte aligned
// pointers and strides and contiguous extents that are multiples of 8):
//   - on the host, without a GPU: which calls it accepts and the reasons of those it declines;
//   - every kernel it has, end to end against the reference backend, on shapes that are not
//     multiples of the 128 x 128 tile, with alpha and beta, and the backend checked to have run
//     the call itself (not declined it);
//   - a grid smaller than the SM count and one larger (the persistent scheduler's loop);
//   - the kernels of a configuration that the rule takes only on very large calls, called directly
//     on small shapes;
//   - D, aux and the bias gradient bitwise repeatable across runs and across two contexts;
//   - calls captured into a CUDA graph and replayed (no allocation, no synchronization);
//   - a prepared launch repeated only for the call it was made for (a decoy call first, in the same
//     context, differing in one address, alpha or beta).
// Each GPU test prints SKIP where the cutlass backend cannot run (no CUDA build, CUTLASS not
// built, no compute capability 9.0 device).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#ifdef EPIGEMM_TESTS_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "core/backend.hpp"
#include "epigemm/epigemm.h"
#include "harness/graph_capture.hpp"
#include "harness/harness.hpp"

#ifdef EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS
#include "backends/cutlass/cutlass_kernels.hpp"
#include "backends/cutlass/cutlass_tile_config.hpp"
#endif

namespace epigemm {
#ifdef EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS
std::unique_ptr<Backend> create_cutlass_backend();
#endif
}  // namespace epigemm

namespace epigemm_test {
namespace {

const Target kCutlass{EPIGEMM_BACKEND_CUTLASS, EPIGEMM_MEMORY_DEVICE};

// Every activation: each has a forward and a backward activation kernel (ACT and ACT_BIAS with
// the identity are DEFAULT and BIAS, and run the linear_combination_bias kernels).
std::vector<epigemm_activation_t> every_activation() {
  return {EPIGEMM_ACTIVATION_IDENTITY, EPIGEMM_ACTIVATION_GELU_TANH, EPIGEMM_ACTIVATION_GELU_ERF,
          EPIGEMM_ACTIVATION_RELU, EPIGEMM_ACTIVATION_SILU};
}

// One case the cutlass backend runs itself: A, B, D and every side operand in `dtype`, default
// (aligned) leading dimensions, shapes multiples of 8.
GemmCase cutlass_case(epigemm_epilogue_t e, epigemm_activation_t activation, epigemm_op_t transa,
                      epigemm_op_t transb, epigemm_dtype_t dtype, int64_t m, int64_t n, int64_t k,
                      uint64_t index) {
  GemmCase c;
  c.target = kCutlass;
  c.epilogue = e;
  c.activation = activation;
  c.transa = transa;
  c.transb = transb;
  c.ab_dtype = c.d_dtype = c.bias_dtype = c.aux_dtype = c.bias_grad_dtype = dtype;
  c.gemm_m = m;
  c.gemm_n = n;
  c.gemm_k = k;
  c.seed = case_seed("cutlass", index);
  return c;
}

// Every instantiated (epilogue, activation, layout) in one dtype: DEFAULT and BIAS in the four
// layouts, the forward activation epilogues in TN, the backward ones in NN.
std::vector<GemmCase> every_kernel(epigemm_dtype_t dtype, int64_t m, int64_t n, int64_t k, uint64_t first_index) {
  std::vector<GemmCase> cases;
  uint64_t index = first_index;
  const epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  for (epigemm_op_t ta : {N, T}) {
    for (epigemm_op_t tb : {N, T}) {
      for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BIAS}) {
        cases.push_back(cutlass_case(e, EPIGEMM_ACTIVATION_GELU_TANH, ta, tb, dtype, m, n, k, index++));
      }
    }
  }
  for (epigemm_activation_t a : every_activation()) {
    for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_ACT, EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_EPILOGUE_ACT_AUX,
                                 EPIGEMM_EPILOGUE_ACT_AUX_BIAS}) {
      cases.push_back(cutlass_case(e, a, T, N, dtype, m, n, k, index++));
    }
    for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_DACT, EPIGEMM_EPILOGUE_DACT_BGRAD}) {
      cases.push_back(cutlass_case(e, a, N, N, dtype, m, n, k, index++));
    }
  }
  return cases;
}

// Runs the case, requires that cutlass ran it itself, and checks it against the reference.
void run_on_cutlass_and_check(epigemm_context_t ctx, const GemmCase& c) {
  SCOPED_TRACE(c.describe());
  const CaseRun run = run_case(ctx, c);
  ASSERT_TRUE(run.ok);
  EXPECT_FALSE(run.declined) << "cutlass declined a call it has a kernel for: "
                             << epigemm_context_last_error(ctx);
  check_case(ctx, c, run);
}

// ---- on the host: what the backend accepts and declines (no GPU needed) -------------------

#ifdef EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS
// A call in GEMM coordinates with device "pointers" that are never dereferenced (supports() only
// looks at their values): 16-byte aligned, leading dimensions rounded up to 8 elements, unless a
// test moves one.
epigemm::GemmCall host_probe_call(epigemm_epilogue_t e, epigemm_activation_t activation, epigemm_op_t ta,
                                  epigemm_op_t tb, int64_t m, int64_t n, int64_t k) {
  epigemm::GemmCall call;
  call.transa = ta;
  call.transb = tb;
  call.gemm_m = m;
  call.gemm_n = n;
  call.gemm_k = k;
  call.epilogue = e;
  call.activation = activation;
  auto matrix = [](uintptr_t address, int64_t rows, int64_t cols) {
    epigemm::Matrix x;
    x.data = reinterpret_cast<void*>(address);
    x.dtype = EPIGEMM_DTYPE_BF16;
    x.rows = rows;
    x.cols = cols;
    x.ld = (rows + 7) / 8 * 8;  // 16-byte strides, so that each probe breaks only the rule it names
    x.memory = EPIGEMM_MEMORY_DEVICE;
    return x;
  };
  call.a = ta == EPIGEMM_OP_N ? matrix(0x10000000, m, k) : matrix(0x10000000, k, m);
  call.b = tb == EPIGEMM_OP_N ? matrix(0x20000000, k, n) : matrix(0x20000000, n, k);
  call.d = matrix(0x30000000, m, n);
  const epigemm::EpilogueParts parts = call.parts();
  call.has_bias = parts.reads_bias();
  call.has_aux = parts.uses_aux();
  call.has_bias_grad = parts.writes_bias_grad();
  if (call.has_aux) call.aux = matrix(0x40000000, m, n);
  epigemm::Vector vector;
  vector.data = reinterpret_cast<void*>(0x50000000);
  vector.dtype = EPIGEMM_DTYPE_BF16;
  vector.length = m;
  vector.memory = EPIGEMM_MEMORY_DEVICE;
  if (call.has_bias) call.bias = vector;
  if (call.has_bias_grad) call.bias_grad = vector;
  call.backend = EPIGEMM_BACKEND_CUTLASS;
  return call;
}

TEST(CutlassSupport, AcceptsItsKernelsAndDeclinesTheRestWithTheReason) {
  const std::unique_ptr<epigemm::Backend> backend = epigemm::create_cutlass_backend();
  const epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  const epigemm_activation_t gelu = EPIGEMM_ACTIVATION_GELU_TANH;
  struct Probe {
    const char* what;
    epigemm::GemmCall call;
    const char* reason;     // nullptr: supported; else a part of the reason
    size_t copies = 0;      // the least workspace the copies of A and B take (0: none)
    bool sizing = true;     // asked as a size query (a workspace as large as the call needs)
  };
  std::vector<Probe> probes;
  probes.push_back({"DEFAULT TN", host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 136, 200, 72), nullptr});
  probes.push_back({"BIAS TT", host_probe_call(EPIGEMM_EPILOGUE_BIAS, gelu, T, T, 136, 200, 72), nullptr});
  probes.push_back({"ACT_AUX_BIAS(silu) TN",
                    host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_SILU, T, N, 64, 8, 8), nullptr});
  probes.push_back({"DACT_BGRAD(gelu_erf) NN",
                    host_probe_call(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_GELU_ERF, N, N, 8, 24, 16), nullptr});
  probes.push_back({"ACT_AUX_BIAS NN", host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, gelu, N, N, 64, 64, 64),
                    "instantiated for TN (fprop) only"});
  probes.push_back({"DACT TN", host_probe_call(EPIGEMM_EPILOGUE_DACT, gelu, T, N, 64, 64, 64),
                    "instantiated for NN (dgrad) only"});
  probes.push_back({"BGRADB", host_probe_call(EPIGEMM_EPILOGUE_BGRADB, gelu, N, T, 64, 64, 64),
                    "sums an input operand"});
  probes.push_back({"ACT_AUX(identity) TN",
                    host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX, EPIGEMM_ACTIVATION_IDENTITY, T, N, 64, 64, 64), nullptr});
  probes.push_back({"DACT_BGRAD(identity) NN",
                    host_probe_call(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_IDENTITY, N, N, 64, 64, 64),
                    nullptr});
  probes.push_back({"ACT_AUX(identity) NN",
                    host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX, EPIGEMM_ACTIVATION_IDENTITY, N, N, 64, 64, 64),
                    "instantiated for TN (fprop) only"});
  probes.push_back({"gemm_k = 0", host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 64, 64, 0), "empty"});
  // Below TMA's alignment: D, aux and the bias from the registers (DEFAULT, BIAS and the forward
  // activation epilogues); A and B copied into the workspace (`copies`: the bytes the copies take at
  // least, asked with a size query) where a copy keeps TMA's rules, gemm_k padded to a multiple of 8
  // where it is a copied operand's contiguous extent; declined with the rule otherwise.
  probes.push_back({"gemm_m = 17 (D's contiguous extent)",
                    host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 17, 64, 64), nullptr});
  // A (T): 17 vectors of 64 -> 17 x 64; B (N): 64 vectors of 64 -> 64 x 64; 2 bytes each.
  probes.push_back({"gemm_k = 60 (A's and B's contiguous extent in TN)",
                    host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 64, 64, 60), nullptr, (64 + 64) * 64 * 2});
  probes.push_back({"gemm_k = 61, ACT_AUX_BIAS(silu)",
                    host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_SILU, T, N, 64, 72, 61),
                    nullptr, (64 + 72) * 64 * 2});
  // NN: A's contiguous extent is gemm_m, B's gemm_k: both copied, A with 3 zero vectors appended.
  Probe dgrad_odd_k{"gemm_k = 61, DACT_BGRAD(gelu_erf) NN",
                    host_probe_call(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_GELU_ERF, N, N, 64, 32, 61),
                    nullptr, 64 * 64 * 2 + 32 * 64 * 2};
  probes.push_back(dgrad_odd_k);
  Probe misaligned{"A misaligned by 2 bytes", host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 64, 64, 64),
                   nullptr, 64 * 64 * 2};
  misaligned.call.a.data = static_cast<char*>(misaligned.call.a.data) + 2;
  probes.push_back(misaligned);
  Probe misaligned_by_4{"B misaligned by 4 bytes", host_probe_call(EPIGEMM_EPILOGUE_BIAS, gelu, N, T, 64, 64, 64),
                        nullptr, 64 * 64 * 2};
  misaligned_by_4.call.b.data = static_cast<char*>(misaligned_by_4.call.b.data) + 4;
  probes.push_back(misaligned_by_4);
  Probe odd_ld_a{"ld_a = 67", host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, N, N, 64, 64, 64), nullptr,
                 64 * 64 * 2};
  odd_ld_a.call.a.ld = 67;
  probes.push_back(odd_ld_a);
  Probe a_odd_address{"A at an odd address", host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 64, 64, 64),
                      "not aligned to its 2-byte elements"};
  a_odd_address.call.a.data = static_cast<char*>(a_odd_address.call.a.data) + 1;
  probes.push_back(a_odd_address);
  probes.push_back({"gemm_m = 60 (A's contiguous extent in NN)",
                    host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, N, N, 60, 64, 64),
                    "can pad gemm_k only"});
  Probe copies_without_workspace{"A misaligned, no workspace",
                                 host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 64, 64, 64),
                                 "that TMA can load need"};
  copies_without_workspace.call.a.data = static_cast<char*>(copies_without_workspace.call.a.data) + 2;
  copies_without_workspace.sizing = false;
  probes.push_back(copies_without_workspace);
  Probe odd_ld{"ld_d = 68", host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 64, 64, 64), nullptr};
  odd_ld.call.d.ld = 68;
  probes.push_back(odd_ld);
  Probe odd_ld_aux{"ld_aux = 67, ACT_AUX_BIAS(gelu_erf)",
                   host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, T, N, 64, 64, 64),
                   nullptr};
  odd_ld_aux.call.aux.ld = 67;
  probes.push_back(odd_ld_aux);
  Probe d_odd_address{"D at an odd address", host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 64, 64, 64),
                      "not aligned to its 2-byte elements"};
  d_odd_address.call.d.data = static_cast<char*>(d_odd_address.call.d.data) + 1;
  probes.push_back(d_odd_address);
  Probe backward_odd_ld{"ld_d = 68, DACT_BGRAD(silu)",
                        host_probe_call(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_SILU, N, N, 64, 64, 64),
                        "multiple of 16 bytes"};
  backward_odd_ld.call.d.ld = 68;
  probes.push_back(backward_odd_ld);
  Probe bias_misaligned{"bias misaligned", host_probe_call(EPIGEMM_EPILOGUE_BIAS, gelu, T, N, 64, 64, 64),
                        nullptr};
  bias_misaligned.call.bias.data = static_cast<char*>(bias_misaligned.call.bias.data) + 8;
  probes.push_back(bias_misaligned);
  Probe bias_grad_misaligned{"bias_grad misaligned",
                             host_probe_call(EPIGEMM_EPILOGUE_DACT_BGRAD, gelu, N, N, 64, 64, 64),
                             "not 16-byte aligned"};
  bias_grad_misaligned.call.bias_grad.data = static_cast<char*>(bias_grad_misaligned.call.bias_grad.data) + 8;
  probes.push_back(bias_grad_misaligned);
  Probe f32_d{"D f32", host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 64, 64, 64), "D in the input dtype"};
  f32_d.call.d.dtype = EPIGEMM_DTYPE_F32;
  probes.push_back(f32_d);
  Probe f32_in{"A, B f32", host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 64, 64, 64), "f32"};
  f32_in.call.a.dtype = f32_in.call.b.dtype = f32_in.call.d.dtype = EPIGEMM_DTYPE_F32;
  probes.push_back(f32_in);
  Probe bias_f32{"bias f32", host_probe_call(EPIGEMM_EPILOGUE_BIAS, gelu, T, N, 64, 64, 64), "bias is f32"};
  bias_f32.call.bias.dtype = EPIGEMM_DTYPE_F32;
  probes.push_back(bias_f32);
  Probe host{"host memory", host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 64, 64, 64), "host memory"};
  host.call.a.memory = host.call.b.memory = host.call.d.memory = EPIGEMM_MEMORY_HOST;
  probes.push_back(host);

  for (Probe& probe : probes) {
    probe.call.sizing_workspace = probe.sizing;
    const epigemm::Support support = backend->supports(probe.call);
    if (probe.reason == nullptr) {
      EXPECT_TRUE(support.supported) << probe.what << ": declined: " << support.reason;
      const size_t workspace = backend->workspace_bytes(probe.call);
      EXPECT_EQ(workspace > 0, probe.copies > 0 || probe.call.has_bias_grad || probe.call.parts().backward())
          << probe.what << ": workspace " << workspace;
      EXPECT_GE(workspace, probe.copies) << probe.what;
      // The same call with exactly that workspace is accepted as it is, with a byte less declined.
      if (probe.copies > 0) {
        epigemm::GemmCall given = probe.call;
        given.sizing_workspace = false;
        given.workspace = reinterpret_cast<void*>(0x60000000);
        given.workspace_bytes = workspace;
        EXPECT_TRUE(backend->supports(given).supported) << probe.what << ": declined with its workspace";
        given.workspace_bytes = workspace - 1;
        EXPECT_FALSE(backend->supports(given).supported) << probe.what << ": accepted with a byte too few";
      }
    } else {
      EXPECT_FALSE(support.supported) << probe.what << ": accepted";
      EXPECT_NE(support.reason.find(probe.reason), std::string::npos)
          << probe.what << ": the reason \"" << support.reason << "\" does not say \"" << probe.reason << "\"";
    }
  }
}

// Every kernel the lookups promise is there, in every tile configuration its family instantiates,
// and is the one asked for (its name says the dtype, the layout, the family, the activation and
// the configuration); what is not instantiated is not found. Every call of a kernel's kind is
// accepted through supports() (CUTLASS's can_implement of the configuration the rule picks
// included).
TEST(CutlassSupport, EveryLookupFindsTheKernelItNames) {
  namespace cb = epigemm::cutlass_backend;
  const std::unique_ptr<epigemm::Backend> backend = epigemm::create_cutlass_backend();
  const cb::OperandLayout layouts[] = {cb::OperandLayout::nn, cb::OperandLayout::nt, cb::OperandLayout::tn,
                                       cb::OperandLayout::tt};
  auto transposes = [](cb::OperandLayout layout, epigemm_op_t* ta, epigemm_op_t* tb) {
    *ta = layout == cb::OperandLayout::tn || layout == cb::OperandLayout::tt ? EPIGEMM_OP_T : EPIGEMM_OP_N;
    *tb = layout == cb::OperandLayout::nt || layout == cb::OperandLayout::tt ? EPIGEMM_OP_T : EPIGEMM_OP_N;
  };
  // Found and named as asked when the family instantiates the configuration; absent otherwise.
  auto expect_lookup = [](const cb::Kernel* kernel, bool instantiated, const std::vector<std::string>& parts) {
    if (!instantiated) {
      EXPECT_EQ(kernel, nullptr) << parts.front() << ": not instantiated, yet found " << kernel->name;
      return 0;
    }
    EXPECT_NE(kernel, nullptr) << parts.front();
    if (kernel == nullptr) return 0;
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(kernel->name).find(part), std::string::npos) << kernel->name << " lacks " << part;
    }
    return 1;
  };
  auto expect_supported = [&](epigemm_epilogue_t e, epigemm_activation_t a, cb::OperandLayout layout,
                              epigemm_dtype_t dtype) {
    epigemm_op_t ta, tb;
    transposes(layout, &ta, &tb);
    epigemm::GemmCall call = host_probe_call(e, a, ta, tb, 136, 200, 72);
    for (epigemm::Matrix* m : {&call.a, &call.b, &call.d, &call.aux}) m->dtype = dtype;
    call.bias.dtype = call.bias_grad.dtype = dtype;
    const epigemm::Support support = backend->supports(call);
    EXPECT_TRUE(support.supported) << epigemm_epilogue_name(e) << " " << epigemm_activation_name(a) << " "
                                   << cb::operand_layout_name(layout) << " " << epigemm_dtype_name(dtype)
                                   << ": declined: " << support.reason;
  };
  using cb::KernelFamily;
  int found = 0;
  for (cb::TileConfig tile : {cb::TileConfig::cooperative_128x128x64, cb::TileConfig::pingpong_128x128x64,
                              cb::TileConfig::pingpong_128x128x64_epilogue_64x64, cb::TileConfig::pingpong_64x128x64,
                              cb::TileConfig::cooperative_128x64x64, cb::TileConfig::cooperative_256x128x64_cluster_1x2,
                              cb::TileConfig::cooperative_256x128x64_cluster_1x2_without_source,
                              cb::TileConfig::pingpong_128x128x64_without_source,
                              cb::TileConfig::pingpong_128x128x64_epilogue_64x64_without_source,
                              cb::TileConfig::pingpong_64x128x64_without_source,
                              cb::TileConfig::cooperative_128x64x64_without_source,
                              cb::TileConfig::cooperative_128x96x64_without_source,
                              cb::TileConfig::cooperative_128x192x64_without_source,
                              cb::TileConfig::pingpong_128x128x64_direct_store}) {
    const std::string config = cb::tile_config_name(tile);
    const bool bias_family = cb::instantiated_in(KernelFamily::linear_combination_bias, tile);
    const bool forward_family = cb::instantiated_in(KernelFamily::forward_activation_aux, tile);
    const bool backward_family = cb::instantiated_in(KernelFamily::backward_activation_bgrad, tile);
    for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F16}) {
      const std::string dtype_name = epigemm_dtype_name(dtype);
      EXPECT_EQ(cb::find_kernel(KernelFamily::linear_combination_bias, tile, EPIGEMM_DTYPE_F32, cb::OperandLayout::tn,
                                EPIGEMM_ACTIVATION_IDENTITY),
                nullptr);
      for (cb::OperandLayout layout : layouts) {
        const std::string layout_name = cb::operand_layout_name(layout);
        found += expect_lookup(cb::find_kernel(KernelFamily::linear_combination_bias, tile, dtype, layout,
                                               EPIGEMM_ACTIVATION_IDENTITY),
                               bias_family,
                               {dtype_name + " " + layout_name + " linear_combination_bias", config});
        expect_supported(EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_ACTIVATION_GELU_TANH, layout, dtype);
        expect_supported(EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, layout, dtype);
        for (epigemm_activation_t a : every_activation()) {
          const std::string act = std::string("(") + epigemm_activation_name(a) + ")";
          const cb::Kernel* forward = cb::find_kernel(KernelFamily::forward_activation_aux, tile, dtype, layout, a);
          const cb::Kernel* backward = cb::find_kernel(KernelFamily::backward_activation_bgrad, tile, dtype, layout, a);
          for (const cb::Kernel* kernel : {forward, backward}) {
            if (kernel != nullptr) {
              EXPECT_EQ(kernel->tile, tile) << kernel->name;
            }
          }
          found += expect_lookup(forward, forward_family && layout == cb::OperandLayout::tn,
                                 {dtype_name + " TN forward_activation_aux" + act, config});
          if (layout == cb::OperandLayout::tn) {
            for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_ACT, EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_EPILOGUE_ACT_AUX,
                                         EPIGEMM_EPILOGUE_ACT_AUX_BIAS}) {
              expect_supported(e, a, layout, dtype);
            }
          }
          found += expect_lookup(backward, backward_family && layout == cb::OperandLayout::nn,
                                 {dtype_name + " NN backward_activation_bgrad" + act, config});
          if (layout == cb::OperandLayout::nn) {
            for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_DACT, EPIGEMM_EPILOGUE_DACT_BGRAD}) {
              expect_supported(e, a, layout, dtype);
            }
          }
        }
      }
    }
  }
  // Cooperative: 8 linear_combination_bias + 10 backward; ping-pong: 10 forward + 10 backward;
  // ping-pong with the 64 x 64 epilogue subtile: 10 forward; the ping-pong 64 x 128 and the
  // cooperative 128 x 64 tiles: 10 forward each; the cooperative 256 x 128 tile in clusters of
  // two: 10 forward + 10 backward, and without a source (beta = 0): 10 forward; the two ping-pong
  // 128 x 128 forward tiles, the ping-pong 64 x 128 and the cooperative 128 x 64 tiles without a
  // source: 10 forward each; the ping-pong 128 x 128 tile with the 64 x 64 subtile and the
  // cooperative 128 x 64 tile, both without a source, also 10 backward each; the direct-store tile:
  // 8 linear_combination_bias + 10 forward; the cooperative 128 x 96 tile without a source: 10
  // forward + 10 backward; the cooperative 128 x 192 tile without a source: 10 backward.
  EXPECT_EQ(found, 158 + 18 + 20 + 10);
}

// A kernel without a source (no shared memory for D's old values) refuses a call with beta != 0,
// saying why, before CUTLASS is asked; each of the six configurations. And on the grids that take
// those kernels where beta = 0, a call with beta != 0 gets a kernel that accepts it.
TEST(CutlassSupport, KernelWithoutSourceRefusesBeta) {
  namespace cb = epigemm::cutlass_backend;
  const cb::DeviceFacts h200{0, 132};
  for (cb::TileConfig tile : {cb::TileConfig::cooperative_256x128x64_cluster_1x2_without_source,
                              cb::TileConfig::pingpong_128x128x64_without_source,
                              cb::TileConfig::pingpong_128x128x64_epilogue_64x64_without_source,
                              cb::TileConfig::pingpong_64x128x64_without_source,
                              cb::TileConfig::cooperative_128x64x64_without_source,
                              cb::TileConfig::cooperative_128x96x64_without_source}) {
    SCOPED_TRACE(cb::tile_config_name(tile));
    const cb::Kernel* kernel = cb::find_kernel(cb::KernelFamily::forward_activation_aux, tile, EPIGEMM_DTYPE_BF16,
                                               cb::OperandLayout::tn, EPIGEMM_ACTIVATION_SILU);
    ASSERT_NE(kernel, nullptr);
    epigemm::GemmCall call =
        host_probe_call(EPIGEMM_EPILOGUE_ACT, EPIGEMM_ACTIVATION_SILU, EPIGEMM_OP_T, EPIGEMM_OP_N, 520, 376, 200);
    call.beta = 0.5f;
    const epigemm::Status refused = kernel->check_can_implement(call, h200, cb::tile_order_for(call, h200, tile));
    EXPECT_FALSE(refused.ok());
    EXPECT_EQ(refused.code(), EPIGEMM_STATUS_NOT_SUPPORTED);
    EXPECT_NE(refused.message().find("does not read D's old values: beta is 0.5; expected 0"), std::string::npos)
        << refused.message();
  }
  {
    // The cooperative 128 x 192 tile, which only the activation gradients have.
    const cb::TileConfig tile = cb::TileConfig::cooperative_128x192x64_without_source;
    const cb::Kernel* kernel = cb::find_kernel(cb::KernelFamily::backward_activation_bgrad, tile, EPIGEMM_DTYPE_BF16,
                                               cb::OperandLayout::nn, EPIGEMM_ACTIVATION_SILU);
    ASSERT_NE(kernel, nullptr);
    epigemm::GemmCall call =
        host_probe_call(EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_SILU, EPIGEMM_OP_N, EPIGEMM_OP_N, 1024, 3072, 4096);
    ASSERT_EQ(cb::tile_config_for(cb::KernelFamily::backward_activation_bgrad, call, h200), tile);
    call.beta = 0.5f;
    const epigemm::Status refused = kernel->check_can_implement(call, h200, cb::tile_order_for(call, h200, tile));
    EXPECT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("does not read D's old values: beta is 0.5; expected 0"), std::string::npos)
        << refused.message();
    // With beta != 0 the rule gives that grid the cooperative 128 x 128 tile, which reads them.
    EXPECT_EQ(cb::tile_config_for(cb::KernelFamily::backward_activation_bgrad, call, h200),
              cb::TileConfig::cooperative_128x128x64);
  }
  // The 256 x 128 tile's grid (gemm_k 16384, 2048 tiles), the ping-pong tile's with CUTLASS's subtile
  // (gemm_k 2048) and with the 64 x 64 one (gemm_k 1024, silu), and the small grids of the
  // cooperative 128 x 64 tile (132 of its tiles) and the ping-pong 64 x 128 one (187 tiles of
  // 128 x 128), with beta != 0: the kernel the rule picks on the H200 (as supports() does) reads
  // D's old values and accepts the call.
  struct Grid {
    int64_t m, n, k;
  };
  for (const Grid& g : {Grid{128 * 32, 128 * 64, 16384}, Grid{128 * 32, 128 * 64, 2048}, Grid{128 * 32, 128 * 64, 1024},
                        Grid{128 * 66, 128, 1024}, Grid{128 * 17, 128 * 11, 1024}}) {
    epigemm::GemmCall call = host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_SILU, EPIGEMM_OP_T,
                                             EPIGEMM_OP_N, g.m, g.n, g.k);
    call.beta = 0.5f;
    const std::string where = std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k);
    const cb::TileConfig tile = cb::tile_config_for(cb::KernelFamily::forward_activation_aux, call, h200);
    const cb::Kernel* kernel = cb::find_kernel(cb::KernelFamily::forward_activation_aux, tile, EPIGEMM_DTYPE_BF16,
                                               cb::OperandLayout::tn, EPIGEMM_ACTIVATION_SILU);
    ASSERT_NE(kernel, nullptr) << where;
    const epigemm::Status accepted = kernel->check_can_implement(call, h200, cb::tile_order_for(call, h200, tile));
    EXPECT_TRUE(accepted.ok()) << where << " on " << kernel->name << ": " << accepted.message();
  }
}
// The tile order is a pure function of the call's tile grid in the configuration's tiles and the
// SM count: runs of 4 (else 2) tiles from two waves of tiles on, where CUTLASS's rounding of the
// grid to the swizzle adds at most 1/32 to the tiles; CUTLASS's default order elsewhere.
TEST(CutlassSupport, TileOrderDependsOnTheTileGridOnly) {
  namespace cb = epigemm::cutlass_backend;
  const cb::DeviceFacts h200{0, 132};
  auto order_with = [&](cb::TileConfig tile, int64_t m, int64_t n) {
    return cb::tile_order_for(host_probe_call(EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_RELU, EPIGEMM_OP_T,
                                              EPIGEMM_OP_N, m, n, 64),
                              h200, tile)
        .swizzle;
  };
  auto order = [&](int64_t m, int64_t n) { return order_with(cb::TileConfig::pingpong_128x128x64, m, n); };
  // The same for the cooperative 128 x 128 configuration.
  EXPECT_EQ(order_with(cb::TileConfig::cooperative_128x128x64, 128 * 12, 128 * 22), 2);
  EXPECT_EQ(order(2048, 4096), 4);
  EXPECT_EQ(order(128 * 12, 128 * 24), 4);      // 288 tiles, both counts multiples of 4
  EXPECT_EQ(order(128 * 12 - 8, 128 * 24 - 8), 4);  // a partial tile counts as a tile
  EXPECT_EQ(order(128 * 12, 128 * 22), 2);      // 22 would round to 24 (+9%); 2 divides it
  EXPECT_EQ(order(128 * 11, 128 * 23), 1);      // 253 tiles: under two waves
  EXPECT_EQ(order(136, 200), 1);
  EXPECT_EQ(order(16384, 8192), 4);
  EXPECT_EQ(order(28800, 8192), 4);             // 225 x 64 rounds to 228 x 64: +1.3%
  EXPECT_EQ(order(16384, 384), 1);              // 128 x 3 rounds to 128 x 4 under 4 and 2 (+33%)
  EXPECT_EQ(order(14336, 768), 2);              // 112 x 6: 8 under 4 (+33%), 6 under 2
  EXPECT_EQ(cb::tile_order_for(host_probe_call(EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_RELU, EPIGEMM_OP_N,
                                               EPIGEMM_OP_N, 2056, 2184, 8),
                               h200, cb::TileConfig::cooperative_128x128x64)
                .swizzle,
            1);  // 17 x 18: +38% under 4, +5.9% under 2
}

// The grid CUTLASS's persistent scheduler walks (tile_scheduler_params.h): the tiles rounded to
// whole clusters, then to multiples of the swizzle taken times the cluster's extent; the swizzle
// taken is lowered where the grid in clusters is narrower than 3 (for 4) or 2 (for 2) tiles.
TEST(CutlassSupport, ScheduledGridRoundsToClustersThenToTheSwizzle) {
  namespace cb = epigemm::cutlass_backend;
  auto grid = [&](cb::TileShape tile, int64_t m, int64_t n, int swizzle) {
    const cb::TileGrid g = cb::scheduled_grid(
        host_probe_call(EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_RELU, EPIGEMM_OP_T, EPIGEMM_OP_N, m, n, 64),
        tile, swizzle);
    return std::to_string(g.along_m) + "x" + std::to_string(g.along_n);
  };
  const cb::TileShape square{128, 128, 1, 1}, pair_along_n{128, 128, 1, 2}, tall_pair{256, 128, 1, 2};
  EXPECT_EQ(grid(square, 128 * 12, 128 * 22, 1), "12x22");
  EXPECT_EQ(grid(square, 128 * 12, 128 * 22, 4), "12x24");
  EXPECT_EQ(grid(square, 128 * 12, 128 * 22, 2), "12x22");
  EXPECT_EQ(grid(pair_along_n, 128 * 12, 128 * 23, 1), "12x24");  // whole clusters
  EXPECT_EQ(grid(pair_along_n, 128 * 12, 128 * 22, 2), "12x24");  // 2 x 2 along n
  EXPECT_EQ(grid(pair_along_n, 128 * 12, 128 * 22, 4), "12x24");  // 4 x 2 along n
  EXPECT_EQ(grid(tall_pair, 16384 - 8, 8192, 4), "64x64");      // a partial 256-row tile counts
  EXPECT_EQ(grid(tall_pair, 256 * 2, 128 * 9, 4), "2x12");       // 2 x 10 in clusters: swizzle 2, 2 x 2 along n
  EXPECT_EQ(grid(tall_pair, 256, 128 * 9, 4), "1x10");           // 1 x 10: swizzle 1
}

// The tile configuration: cooperative for DEFAULT and BIAS; ping-pong for the forward activation
// epilogues (its kernels without a source where beta = 0), with the 64 x 64 epilogue subtile for
// silu and the GELUs where gemm_k <= 1024, whatever the grid; for the backward ones ping-pong from
// two waves of tiles on (264 on the H200), with the same subtile without a source where beta = 0
// and gemm_k <= 1024 for silu and the GELUs, cooperative below two waves; both on the cooperative
// 128 x 96 tile where its tiles fill 90-100% of the SMs once, 128 x 128 ones 70-90% and gemm_k >=
// 3072 (beta = 0, after the smaller tiles of small grids). Each choice is a configuration its
// family instantiates.
TEST(CutlassSupport, TileConfigDependsOnTheFamilyAndTheGrid) {
  namespace cb = epigemm::cutlass_backend;
  const cb::DeviceFacts h200{0, 132};
  const epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  auto config = [&](cb::KernelFamily family, int64_t m, int64_t n, int64_t k = 2048,
                    epigemm_activation_t activation = EPIGEMM_ACTIVATION_SILU) {
    const bool forward = family != cb::KernelFamily::backward_activation_bgrad;
    const epigemm_epilogue_t e = family == cb::KernelFamily::backward_activation_bgrad ? EPIGEMM_EPILOGUE_DACT
                                 : family == cb::KernelFamily::forward_activation_aux  ? EPIGEMM_EPILOGUE_ACT_AUX_BIAS
                                                                                       : EPIGEMM_EPILOGUE_BIAS;
    const cb::TileConfig tile = cb::tile_config_for(family, host_probe_call(e, activation, forward ? T : N, N, m, n, k), h200);
    EXPECT_TRUE(cb::instantiated_in(family, tile)) << cb::tile_config_name(tile);
    return tile;
  };
  using cb::KernelFamily;
  const cb::TileConfig coop = cb::TileConfig::cooperative_128x128x64, pingpong = cb::TileConfig::pingpong_128x128x64,
                       subtile = cb::TileConfig::pingpong_128x128x64_epilogue_64x64,
                       narrow_coop_reading = cb::TileConfig::cooperative_128x64x64,
                       short_pingpong_reading = cb::TileConfig::pingpong_64x128x64;
  // The forward tiles without a source where beta is 0 (host_probe_call's).
  const cb::TileConfig fwd_pingpong = cb::TileConfig::pingpong_128x128x64_without_source,
                       fwd_subtile = cb::TileConfig::pingpong_128x128x64_epilogue_64x64_without_source,
                       narrow_coop = cb::TileConfig::cooperative_128x64x64_without_source,
                       short_pingpong = cb::TileConfig::pingpong_64x128x64_without_source;
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 24, 128 * 11), pingpong);  // 264 tiles
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 24, 128 * 11 - 8), pingpong);  // partial tiles count
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 263, 128), coop);  // 263 tiles
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 128, 128 * 64), pingpong);
  // gemm_k at most 1024 with silu or a GELU and beta = 0: the 64 x 64 subtile without a source.
  const cb::TileConfig bwd_subtile = cb::TileConfig::pingpong_128x128x64_epilogue_64x64_without_source;
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 128, 128 * 64, 64), bwd_subtile);
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 4096, 4096, 1024, EPIGEMM_ACTIVATION_GELU_TANH),
            bwd_subtile);  // the MLP 4096,1024,4096's second layer
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 3072, 2048, 768, EPIGEMM_ACTIVATION_GELU_ERF), bwd_subtile);
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 4096, 4096, 1032, EPIGEMM_ACTIVATION_GELU_TANH), pingpong);
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 4096, 4096, 1024, EPIGEMM_ACTIVATION_RELU), pingpong);
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 4096, 4096, 1024, EPIGEMM_ACTIVATION_IDENTITY), pingpong);
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 263, 128, 1024), coop);  // under two waves
  // At most one tile of 128 x 64 per SM with beta = 0: the cooperative 128 x 64 tile without a
  // source, for every activation.
  const cb::TileConfig bwd_narrow = cb::TileConfig::cooperative_128x64x64_without_source;
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 768, 256, 3072), bwd_narrow);   // 256,768,3072: 24 tiles
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 768, 1000, 3072), bwd_narrow);  // 1000,768,3072: 96
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 66, 128), bwd_narrow);    // 132 tiles of 128 x 64
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 66, 128 + 8), coop);      // 198 of them
  // Where 128 x 128 tiles fill 70-90% of the SMs, 128 x 96 ones 90-100% and gemm_k >= 3072 (beta =
  // 0), the cooperative 128 x 96 tile without a source, in both families; the smaller tiles above
  // first.
  const cb::TileConfig coop96 = cb::TileConfig::cooperative_128x96x64_without_source;
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 768, 2048, 3072), coop96);   // 2048,768,3072: 96 -> 132
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 768, 2048, 50257), coop96);  // 2048,768,50257
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 768, 2048, 3072), coop96);      // 2048,3072,768's forward
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 4096, 384, 14336), coop96);     // 384,14336,4096's: 128
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 768, 2048, 3064), fwd_pingpong);  // gemm_k under 3072
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 768, 2048, 3064), coop);
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 768, 2048, 64), coop);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 384, 128 * 31, 3072), coop96);  // 93 tiles -> 126
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 384, 128 * 31, 3072), coop96);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 512, 128 * 23, 3072), fwd_pingpong);  // 92 -> 124
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 512, 128 * 23, 3072), coop);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 7680, 128, 3072), fwd_pingpong);  // 60 -> 120: padding
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 12, 96 * 11, 3072), coop96);  // 108 -> 132
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 7, 96 * 19, 3072), fwd_pingpong);  // 105 -> 133
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 7, 96 * 19, 3072), coop);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 66, 136, 3072), fwd_pingpong);  // 132 of 128 x 128
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 768, 2048, 1024), short_pingpong);  // gemm_k <= 1024
  // Where 128 x 128 tiles take one to one and a half waves, 128 x 192 ones fill 90-100% of the SMs
  // once and gemm_k >= 3072 (beta = 0): the cooperative 128 x 192 tile without a source, for the
  // activation gradients only.
  const cb::TileConfig coop192 = cb::TileConfig::cooperative_128x192x64_without_source;
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 1024, 3072, 4096), coop192);   // 192 tiles -> 128
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 2048, 1536, 5632), coop192);   // 1536,2048,5632
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 4096, 768, 14336), coop192);   // 768,4096,14336
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 1024, 3072, 4096), fwd_pingpong);  // not the forward pass
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 1024, 3072, 3064), coop);      // gemm_k under 3072
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 11, 192 * 12, 3072), coop192);  // 198 -> 132
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 11, 192 * 12 + 8, 3072), coop);  // 209 -> 143
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 7, 192 * 17, 3072), coop192);   // 182 -> 119
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 13, 192 * 9, 3072), coop);    // 182 -> 117: 89%
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 12, 128 * 11, 3072), coop);   // 132: one wave
  EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 128 * 19, 128 * 7, 3072), coop);    // 133 -> 95: 72%
  EXPECT_EQ(config(KernelFamily::linear_combination_bias, 768, 2048, 3072), coop);
  for (KernelFamily family : {KernelFamily::forward_activation_aux, KernelFamily::backward_activation_bgrad}) {
    const bool forward = family == KernelFamily::forward_activation_aux;
    epigemm::GemmCall accumulate = host_probe_call(forward ? EPIGEMM_EPILOGUE_ACT_AUX_BIAS : EPIGEMM_EPILOGUE_DACT,
                                                   EPIGEMM_ACTIVATION_SILU, forward ? T : N, N, 768, 2048, 3072);
    accumulate.beta = 0.5f;  // reads D's old values: the 128 x 128 tile with a source
    EXPECT_EQ(cb::tile_config_for(family, accumulate, h200), forward ? pingpong : coop);
  }
  for (epigemm_activation_t a : every_activation()) {
    EXPECT_EQ(config(KernelFamily::backward_activation_bgrad, 1024, 512, 4096, a), bwd_narrow)
        << epigemm_activation_name(a);  // 512,1024,4096: 64 tiles
  }
  {
    epigemm::GemmCall accumulate =
        host_probe_call(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_SILU, N, N, 768, 1000, 3072);
    accumulate.beta = 1.0f;  // reads D's old values: the 128 x 128 tile with a source
    EXPECT_EQ(cb::tile_config_for(KernelFamily::backward_activation_bgrad, accumulate, h200), coop);
  }
  {
    epigemm::GemmCall accumulate =
        host_probe_call(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_SILU, N, N, 4096, 4096, 1024);
    accumulate.beta = 0.5f;  // reads D's old values: the tile with a source
    EXPECT_EQ(cb::tile_config_for(KernelFamily::backward_activation_bgrad, accumulate, h200), pingpong);
  }
  // gemm_k from 8192 on grids of at least 15 waves (1980 tiles on 132 SMs): the cooperative
  // 256 x 128 tile in clusters of two, in both activation families.
  // The forward ones without a source where beta is 0 (host_probe_call's), with one otherwise.
  for (KernelFamily family : {KernelFamily::forward_activation_aux, KernelFamily::backward_activation_bgrad}) {
    const cb::TileConfig wide = family == KernelFamily::forward_activation_aux
                                    ? cb::TileConfig::cooperative_256x128x64_cluster_1x2_without_source
                                    : cb::TileConfig::cooperative_256x128x64_cluster_1x2;
    EXPECT_EQ(config(family, 128 * 32, 128 * 64, 16384), wide);          // 8192,16384,4096's forward: 2048 tiles
    EXPECT_EQ(config(family, 128 * 45, 128 * 44, 8192), wide);           // 1980 tiles
    EXPECT_EQ(config(family, 128 * 45, 128 * 44 - 8, 8192), wide);       // partial tiles count
    const cb::TileConfig below = family == KernelFamily::forward_activation_aux ? fwd_pingpong : pingpong;
    EXPECT_EQ(config(family, 128 * 1979, 128, 8192), below);             // 1979 tiles
    EXPECT_EQ(config(family, 128 * 32, 128 * 64, 8184), below);          // gemm_k under 8192
    EXPECT_EQ(config(family, 128 * 224, 128 * 128, 8192, EPIGEMM_ACTIVATION_GELU_ERF), wide);
  }
  for (float beta : {0.5f, -1.0f}) {
    epigemm::GemmCall accumulate = host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_SILU, T, N, 128 * 32,
                                                   128 * 64, 16384);
    accumulate.beta = beta;
    EXPECT_EQ(cb::tile_config_for(KernelFamily::forward_activation_aux, accumulate, h200),
              cb::TileConfig::cooperative_256x128x64_cluster_1x2)
        << "beta " << beta;
  }
  EXPECT_EQ(config(KernelFamily::linear_combination_bias, 128 * 32, 128 * 64, 16384), coop);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 18, 128 * 11), fwd_pingpong);  // 198 tiles: 1.5 waves
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 128, 128 * 64), fwd_pingpong);
  // Under 1.5 waves of 128 x 128 tiles with gemm_k at most 1024, the smaller tiles: the cooperative
  // 128 x 64 one where its tiles are at most one per SM, else the ping-pong 64 x 128 one; for every
  // activation.
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 18, 128 * 11 - 8, 1024), fwd_subtile);  // partial tiles count
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 197, 128, 1024), short_pingpong);     // 197 tiles
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 17, 128 * 11, 1024), short_pingpong);  // 187 tiles
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 66, 128, 1024), narrow_coop);  // 132 tiles of 128 x 64
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 66, 128 + 8, 1024), short_pingpong);  // 198 of 128 x 64
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 2, 128, 64), narrow_coop);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 2, 128, 64, EPIGEMM_ACTIVATION_RELU), narrow_coop);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 2, 128, 1032), fwd_pingpong);  // a longer gemm_k
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 17, 128 * 11, 1032, EPIGEMM_ACTIVATION_RELU), fwd_pingpong);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 24, 128 * 2, 768, EPIGEMM_ACTIVATION_GELU_ERF),
            narrow_coop);  // 256,768,3072's forward: 48 tiles
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 24, 1000, 768, EPIGEMM_ACTIVATION_GELU_ERF),
            short_pingpong);  // 1000,768,3072's forward: 192 tiles
  // The subtile: gemm_k at most 1024, and an activation with an exponential.
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 128, 128 * 64, 1024), fwd_subtile);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 18, 128 * 11, 64), fwd_subtile);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 128 * 128, 128 * 64, 1032), fwd_pingpong);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 4096, 16384, 1024, EPIGEMM_ACTIVATION_GELU_TANH), fwd_subtile);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 4096, 16384, 768, EPIGEMM_ACTIVATION_GELU_ERF), fwd_subtile);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 4096, 16384, 768, EPIGEMM_ACTIVATION_RELU), fwd_pingpong);
  EXPECT_EQ(config(KernelFamily::forward_activation_aux, 4096, 16384, 768, EPIGEMM_ACTIVATION_IDENTITY), fwd_pingpong);
  EXPECT_EQ(config(KernelFamily::linear_combination_bias, 128 * 128, 128 * 64), coop);
  EXPECT_EQ(config(KernelFamily::linear_combination_bias, 128 * 128, 128 * 64, 64), coop);
  // On twice the SMs the same 264 tiles are one wave.
  EXPECT_EQ(cb::tile_config_for(KernelFamily::backward_activation_bgrad,
                                host_probe_call(EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_SILU, N, N, 128 * 24, 128 * 11, 64),
                                cb::DeviceFacts{0, 264}),
            coop);
  EXPECT_EQ(cb::tile_config_for(KernelFamily::forward_activation_aux,
                                host_probe_call(EPIGEMM_EPILOGUE_ACT, EPIGEMM_ACTIVATION_SILU, T, N, 128 * 18, 128 * 11, 2048),
                                cb::DeviceFacts{0, 264}),
            fwd_pingpong);
  // beta != 0: the ping-pong tiles that read D's old values.
  for (int64_t k : {int64_t(2048), int64_t(1024)}) {
    epigemm::GemmCall accumulate =
        host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_SILU, T, N, 128 * 128, 128 * 64, k);
    accumulate.beta = 1.0f;
    EXPECT_EQ(cb::tile_config_for(KernelFamily::forward_activation_aux, accumulate, h200), k == 1024 ? subtile : pingpong);
  }
  EXPECT_EQ(cb::tile_config_for(KernelFamily::forward_activation_aux,
                                host_probe_call(EPIGEMM_EPILOGUE_ACT, EPIGEMM_ACTIVATION_SILU, T, N, 128 * 18, 128 * 11, 512),
                                cb::DeviceFacts{0, 264}),
            short_pingpong);
  // beta != 0 on the small grids: the smaller tiles that read D's old values.
  for (const auto& [m, n, expected] : {std::tuple<int64_t, int64_t, cb::TileConfig>{128 * 66, 128, narrow_coop_reading},
                                       std::tuple<int64_t, int64_t, cb::TileConfig>{128 * 17, 128 * 11, short_pingpong_reading}}) {
    epigemm::GemmCall accumulate = host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_SILU, T, N, m, n, 1024);
    accumulate.beta = 0.5f;
    EXPECT_EQ(cb::tile_config_for(KernelFamily::forward_activation_aux, accumulate, h200), expected) << m << " x " << n;
  }
}

// auto's priority for cutlass reads the epilogue's parts, the waves of 128 x 128 tiles over the
// SMs and how full the last wave is: forward activation epilogues 35 from 7 waves on, 25 from
// 0.75, and below where the smaller tiles run (gemm_k <= 1024), else 1 (the identity with an aux:
// 25); DACT and DACT_BGRAD 35 from 7 waves on, 25 where the cooperative 128 x 64 tile runs (at
// most one of its tiles per SM, beta = 0), 25 below 7 waves
// where the last wave is at least 90% full or backward_gradient_time_ratio predicts cutlass
// faster (a less full last wave with a short gemm_k), with the grid at least half a wave, else 1;
// both 25 where the cooperative 128 x 96 tile runs; the plain epilogues (DEFAULT, BIAS, the
// identity without an aux) 1.
TEST(CutlassSupport, AutoPriorityDependsOnTheEpilogueAndTheWaves) {
  namespace cb = epigemm::cutlass_backend;
  const cb::DeviceFacts h200{0, 132};
  const epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  auto priority = [&](epigemm_epilogue_t e, epigemm_activation_t act, int64_t m, int64_t n, int64_t k = 64) {
    const bool forward = e == EPIGEMM_EPILOGUE_ACT || e == EPIGEMM_EPILOGUE_ACT_BIAS || e == EPIGEMM_EPILOGUE_ACT_AUX ||
                         e == EPIGEMM_EPILOGUE_ACT_AUX_BIAS || e == EPIGEMM_EPILOGUE_BIAS;
    return cb::auto_priority_for(host_probe_call(e, act, forward ? T : N, N, m, n, k), h200);
  };
  const epigemm_activation_t silu = EPIGEMM_ACTIVATION_SILU, gelu = EPIGEMM_ACTIVATION_GELU_TANH;
  // 132 * 7 = 924 tiles: 32 x 29 = 928 is 7.03 waves, 32 x 28 = 896 is 6.8 (its last wave 896 /
  // 924 = 97% full).
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, silu, 128 * 32, 128 * 29), 35);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, silu, 128 * 32, 128 * 28), 25);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT, gelu, 128 * 20, 128 * 10), 25);  // 200 tiles: 1.52 waves
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT, gelu, 128 * 10, 128 * 10), 25);  // 100 tiles: 0.76 waves
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT, gelu, 128 * 14, 128 * 7), 25);    // 98 tiles: 0.74 waves
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_AUX, silu, 128 * 24, 128 * 2), 25);  // 48 tiles: 0.36 waves
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_RELU, 8, 8), 25);  // 1 tile
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_AUX, silu, 128 * 24, 128 * 2, 1024), 25);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_AUX, silu, 128 * 24, 128 * 2, 1032), 1);  // no smaller tiles there
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT, gelu, 128 * 14, 128 * 7, 14336), 1);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 32, 128 * 29), 35);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 32, 128 * 28), 25);          // last wave 97% full
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 24, 128 * 12, 6144), 1);     // 288 tiles: 73%
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 16, 128 * 8), 25);           // 128 tiles: 97%
  // Under half a wave (60 tiles) cutlass runs the cooperative 128 x 64 tile (120 of them): 25; a
  // call that reads D's old values runs the 128 x 128 tile there: 1.
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 6, 128 * 10), 25);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_RELU, 768, 1000, 3072), 25);
  {
    epigemm::GemmCall accumulate = host_probe_call(EPIGEMM_EPILOGUE_DACT, silu, N, N, 128 * 6, 128 * 10, 64);
    accumulate.beta = 0.5f;
    EXPECT_EQ(cb::auto_priority_for(accumulate, h200), 1);
  }
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 66, 128 + 8), 25);  // 132 tiles (198 of 128 x 64): one full wave
  // Where the cooperative 128 x 96 tile runs: 25, forward and backward, below 0.75 waves and with a
  // last wave under 90% full too; with beta != 0 (the 128 x 128 tile with a source) as before.
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_GELU_ERF, 768, 2048, 3072), 25);  // 96 tiles
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, 768, 2048, 3072), 25);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT, gelu, 4096, 384, 14336), 25);
  // Where the cooperative 128 x 192 tile runs: 25, also where the 128 x 128 grid's last wave is
  // under 90% full and the time model says cuda (a last wave 45% full, gemm_k 14336); with beta != 0
  // (the 128 x 128 tile with a source) as before.
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT_BGRAD, silu, 4096, 768, 14336), 25);
  {
    epigemm::GemmCall accumulate = host_probe_call(EPIGEMM_EPILOGUE_DACT_BGRAD, silu, N, N, 4096, 768, 14336);
    accumulate.beta = 1.0f;
    EXPECT_EQ(cb::auto_priority_for(accumulate, h200), 1);
  }
  // Outside the tile's bounds the rules before it: a short gemm_k (the time model: 1), a 128 x 128
  // grid under 70% of the SMs (the forward pass below 0.75 waves: 1).
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 768, 2048, 64), 1);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, 7680, 128, 3072), 1);
  {
    epigemm::GemmCall accumulate =
        host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, T, N, 768, 2048, 3072);
    accumulate.beta = 1.0f;
    EXPECT_EQ(cb::auto_priority_for(accumulate, h200), 1);
    accumulate = host_probe_call(EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_GELU_ERF, N, N, 768, 2048, 3072);
    accumulate.beta = 1.0f;
    EXPECT_EQ(cb::auto_priority_for(accumulate, h200), 1);
  }
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT_BGRAD, silu, 128 * 128, 128 * 64), 35);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT_BGRAD, silu, 128 * 40, 128 * 12), 25);    // 480 tiles: 91%
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT_BGRAD, silu, 128 * 20, 128 * 16, 10240), 1);  // 320 tiles: 81%
  // Below 90% the predicted time ratio decides: on 336 tiles (85%) cutlass with gemm_k 4096,
  // where cuda's fp32 round trip weighs most (predicted 0.95), cuda with 11008 (1.05); on 576
  // tiles (87%) with the bias gradient, which no longer counts, cuda with 11008 (1.03), cutlass
  // with 4096 (0.94). Below 3072 gemm_k counts as 3072.
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 112, 128 * 3, 4096), 25);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 112, 128 * 3, 11008), 1);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT_BGRAD, silu, 128 * 32, 128 * 18, 11008), 1);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT_BGRAD, silu, 128 * 32, 128 * 18, 4096), 25);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 20, 128 * 16, 64),
            priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 20, 128 * 16, 3072));
  EXPECT_LT(cb::backward_gradient_time_ratio(0.85, 4096), cb::backward_gradient_time_ratio(0.85, 11008));
  EXPECT_LT(cb::backward_gradient_time_ratio(0.85, 4096), cb::backward_gradient_time_ratio(0.80, 4096));
  // With and without the bias gradient the same choice: on 800 tiles (87%) with gemm_k 5120
  // cutlass (predicted 0.97; with the earlier fit's bias-gradient term 1.01: cuda).
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, silu, 128 * 40, 128 * 20, 5120), 25);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT_BGRAD, silu, 128 * 40, 128 * 20, 5120), 25);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_AUX, EPIGEMM_ACTIVATION_IDENTITY, 128 * 24, 128 * 2), 25);  // 0.36 waves
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_IDENTITY, 128 * 16, 128 * 12), 1);  // 73%
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_IDENTITY, 128 * 128, 128 * 64), 35);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_AUX, EPIGEMM_ACTIVATION_IDENTITY, 128 * 20, 128 * 10), 25);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_IDENTITY, 128 * 32, 128 * 29), 35);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_IDENTITY, 128 * 128, 128 * 64), 1);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_DEFAULT, gelu, 128 * 128, 128 * 64), 1);
  EXPECT_EQ(priority(EPIGEMM_EPILOGUE_BIAS, gelu, 128 * 128, 128 * 64), 1);
  // Matrices that TMA cannot move as they are, whatever the epilogue and the size: 35 (cuBLAS's fast
  // kernels need the same 16-byte rules). Through the backend, which finds how they move: D's rows
  // not 16-byte multiples, A's address 2 bytes off, gemm_k = 61 (A and B copied).
  EXPECT_EQ(cb::auto_priority_for(host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 128, 128, 64), h200,
                                  cb::MatrixMovement::tma_loads_register_stores),
            35);
  EXPECT_EQ(cb::auto_priority_for(host_probe_call(EPIGEMM_EPILOGUE_BIAS, gelu, T, N, 128, 128, 64), h200,
                                  cb::MatrixMovement::tma, /*copies_operands=*/true),
            35);
  {
    const std::unique_ptr<epigemm::Backend> backend = epigemm::create_cutlass_backend();
    epigemm::GemmCall odd_rows = host_probe_call(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, 128 * 128, 128 * 64, 64);
    EXPECT_EQ(backend->auto_priority(odd_rows), 1);
    odd_rows.d.ld += 1;
    EXPECT_EQ(backend->auto_priority(odd_rows), 35);
    epigemm::GemmCall shifted = host_probe_call(EPIGEMM_EPILOGUE_BIAS, gelu, N, N, 128 * 24, 128 * 12, 6144);
    EXPECT_EQ(backend->auto_priority(shifted), 1);
    shifted.a.data = static_cast<char*>(shifted.a.data) + 2;
    EXPECT_EQ(backend->auto_priority(shifted), 35);
    EXPECT_EQ(backend->auto_priority(host_probe_call(EPIGEMM_EPILOGUE_BIAS, gelu, T, N, 128 * 24, 128 * 2, 1029)),
              35);
  }
  // The same grid on an SM count twice the H200's is half the waves.
  EXPECT_EQ(cb::auto_priority_for(host_probe_call(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, silu, T, N, 128 * 32, 128 * 29, 64),
                                  cb::DeviceFacts{0, 264}),
            25);
}
#else
TEST(CutlassSupport, ScheduledGridRoundsToClustersThenToTheSwizzle) {
  GTEST_SKIP() << "SKIP: the cutlass backend is not built (no CUDA, no CUTLASS headers, or no 90a "
                  "in CMAKE_CUDA_ARCHITECTURES)";
}
TEST(CutlassSupport, TileOrderDependsOnTheTileGridOnly) {
  GTEST_SKIP() << "SKIP: the cutlass backend is not built (no CUDA, no CUTLASS headers, or no 90a "
                  "in CMAKE_CUDA_ARCHITECTURES)";
}
TEST(CutlassSupport, TileConfigDependsOnTheFamilyAndTheGrid) {
  GTEST_SKIP() << "SKIP: the cutlass backend is not built (no CUDA, no CUTLASS headers, or no 90a "
                  "in CMAKE_CUDA_ARCHITECTURES)";
}
TEST(CutlassSupport, AutoPriorityDependsOnTheEpilogueAndTheWaves) {
  GTEST_SKIP() << "SKIP: the cutlass backend is not built (no CUDA, no CUTLASS headers, or no 90a "
                  "in CMAKE_CUDA_ARCHITECTURES)";
}
TEST(CutlassSupport, EveryLookupFindsTheKernelItNames) {
  GTEST_SKIP() << "SKIP: the cutlass backend is not built (no CUDA, no CUTLASS headers, or no 90a "
                  "in CMAKE_CUDA_ARCHITECTURES)";
}
TEST(CutlassSupport, AcceptsItsKernelsAndDeclinesTheRestWithTheReason) {
  GTEST_SKIP() << "SKIP: the cutlass backend is not built (no CUDA, no CUTLASS headers, or no 90a "
                  "in CMAKE_CUDA_ARCHITECTURES)";
}
TEST(CutlassSupport, KernelWithoutSourceRefusesBeta) {
  GTEST_SKIP() << "SKIP: the cutlass backend is not built (no CUDA, no CUTLASS headers, or no 90a "
                  "in CMAKE_CUDA_ARCHITECTURES)";
}
#endif

// ---- on the GPU -----------------------------------------------------------------------------

// Every kernel, in both dtypes, on a shape that is not a multiple of the tile in any direction
// (gemm_m = 136: one full tile and 8 rows; gemm_n = 200; gemm_k = 72, one full 64-deep slice and
// 8), with alpha and beta, and with padded leading dimensions (multiples of 8 elements). With beta
// = 0 the activation gradients run the cooperative 128 x 64 tile without a source (2 x 4 of its
// tiles), with beta = 0.5 the cooperative 128 x 128 tile.
TEST(CutlassBackend, EveryKernelOnShapesNotMultiplesOfTheTile) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
  uint64_t index = 0;
  for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F16}) {
    for (GemmCase c : every_kernel(dtype, 136, 200, 72, index)) {
      run_on_cutlass_and_check(ctx, c);
      c.alpha = -0.75f;
      c.beta = 0.5f;
      c.lda = c.a_rows() + 8;
      c.ldb = c.b_rows() + 16;
      c.ldd = c.gemm_m + 24;
      if (c.has_aux()) c.ldaux = c.gemm_m + 8;
      c.seed = case_seed("cutlass_accumulate", index);
      run_on_cutlass_and_check(ctx, c);
      ++index;
    }
    index += 100;
  }
}

// Matrices that TMA cannot move as they are, every kernel that takes them, in both dtypes, each as
// given and with alpha = -0.75, beta = 0.5:
//   - D and aux stored without TMA, through the staged tile (DEFAULT and BIAS in the four layouts,
//     every forward activation epilogue): leading dimensions of D and aux that are odd (ldd 139,
//     ldaux 141: written out element by element) on 136 x 200 x 72 (one full tile and 8 rows; 200
//     columns; one full 64-deep slice and 8), and on the fprop layout gemm_m = 137, D's contiguous
//     extent odd (D's old values read into the staged tile where beta != 0); ldd 140 and ldaux 138
//     (written out 4 and 2 elements at a time) on both, where gemm_m = 137 leaves the last tile 9
//     rows, which end inside a piece;
//   - A and B copied into the workspace for TMA (every kernel, the activation gradients included):
//     odd leading dimensions of A and B (lda, ldb 3 more than their rows: copies at a leading
//     dimension rounded to 8); gemm_k = 70, A's or B's contiguous extent in every layout but NT (both
//     copied, gemm_k padded with zeros to 72), and the same with ldd 139 (copies and register stores
//     together); a data gradient with gemm_k = 50257 as a GPT-2 output layer's (B, dY, with rows 2-byte
//     aligned; A, W, given 7 zero rows);
//   - grids of more tiles than the H200 has SMs (the persistent loop), the fprop layout's
//     ACT_AUX_BIAS(gelu_erf) and DEFAULT: 2001 x 1100 x 72 (16 x 9 tiles, D's rows 2-byte aligned
//     as a GPT-2 output layer's 50257 outputs leave them), 1022 x 3001 x 70 (8 x 24 tiles, every
//     matrix as a layer of 1022 inputs and 4094 outputs leaves them: A and B copied, D from the
//     registers) and such an output layer itself, 50257 x 136 x 16 (393 x 2 tiles; on 132 SMs the
//     tile order's runs of 2 round the scheduler's grid to 394 x 2, a tile row wholly past gemm_m
//     that stores nothing).
TEST(CutlassBackend, UnalignedMatricesThroughCopiesAndTheRegisters) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
  const epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  uint64_t index = 5000;
  auto kernels = [&](epigemm_dtype_t dtype, int64_t m, int64_t n, int64_t k, bool backward) {
    std::vector<GemmCase> cases;
    for (const GemmCase& c : every_kernel(dtype, m, n, k, index)) {
      const bool is_backward = c.epilogue == EPIGEMM_EPILOGUE_DACT || c.epilogue == EPIGEMM_EPILOGUE_DACT_BGRAD;
      if (backward || !is_backward) cases.push_back(c);
    }
    index += 100;
    return cases;
  };
  auto run_as_given_and_accumulating = [&](GemmCase c) {
    run_on_cutlass_and_check(ctx, c);
    c.alpha = -0.75f;
    c.beta = 0.5f;
    c.seed = case_seed("cutlass_unaligned_accumulate", c.seed);
    run_on_cutlass_and_check(ctx, c);
  };
  for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F16}) {
    for (GemmCase c : kernels(dtype, 136, 200, 72, /*backward=*/false)) {
      c.ldd = 139;
      if (c.has_aux()) c.ldaux = 141;
      run_as_given_and_accumulating(c);
    }
    for (const GemmCase& c : kernels(dtype, 137, 200, 72, false)) {
      if (c.transa == T && c.transb == N) run_as_given_and_accumulating(c);
    }
    for (const int64_t m : {136, 137}) {
      for (GemmCase c : kernels(dtype, m, 200, 72, false)) {
        if (m == 137 && (c.transa != T || c.transb != N)) continue;
        c.ldd = 140;
        if (c.has_aux()) c.ldaux = 138;
        run_as_given_and_accumulating(c);
      }
    }
    // A and B copied.
    for (GemmCase c : kernels(dtype, 136, 200, 72, /*backward=*/true)) {
      c.lda = c.a_rows() + 3;
      c.ldb = c.b_rows() + 3;
      run_as_given_and_accumulating(c);
    }
    for (const GemmCase& c : kernels(dtype, 136, 200, 70, true)) run_as_given_and_accumulating(c);
    for (GemmCase c : kernels(dtype, 136, 200, 70, false)) {
      c.ldd = 139;
      run_as_given_and_accumulating(c);
    }
  }
  for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_DACT_BGRAD}) {
    run_on_cutlass_and_check(ctx, cutlass_case(e, EPIGEMM_ACTIVATION_GELU_TANH, N, N, EPIGEMM_DTYPE_BF16, 136, 64,
                                               50257, index++));
  }
  const int64_t large[][3] = {{2001, 1100, 72}, {1022, 3001, 70}, {50257, 136, 16}};
  for (const auto& shape : large) {
    for (epigemm_epilogue_t e : {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_ACT_AUX_BIAS}) {
      run_on_cutlass_and_check(ctx, cutlass_case(e, EPIGEMM_ACTIVATION_GELU_ERF, T, N, EPIGEMM_DTYPE_BF16, shape[0],
                                                 shape[1], shape[2], index++));
    }
  }
}

// 2 x 1 output tiles on a device of 132 SMs: most CTAs of the persistent grid get no tile.
TEST(CutlassBackend, GridSmallerThanTheSmCount) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
  for (const GemmCase& c : every_kernel(EPIGEMM_DTYPE_BF16, 256, 120, 520, 1000)) run_on_cutlass_and_check(ctx, c);
}

// The forward activation kernels of every tile configuration that tile_config_for chooses, each on
// a cheap shape that takes it on the H200's 132 SMs (the reference runs on the CPU, in double): the
// cooperative 128 x 64 tile on 2 x 3 tiles of 128 x 128 (the other tests' small shapes take it too),
// the ping-pong 64 x 128 tile on 9 x 9, and on 18 x 11 (198 tiles, 1.5 waves) the ping-pong
// 128 x 128 tile (the kernels without a source: the cases have beta = 0; the ping-pong 128 x 128
// ones with a source are also PingpongTilesWithAndWithoutSource's): with the 64 x 64 epilogue subtile where gemm_k is at most
// 1024 for silu and the GELUs, with CUTLASS's 64 x 32 for relu and the identity, and where gemm_k = 1032 (16 64-deep
// slices and 8; silu and gelu_erf, the rest costs the CPU reference too long). Shapes not
// multiples of the tile; ACT_AUX_BIAS (each kernel also runs ACT, ACT_BIAS and ACT_AUX, with the
// bias or aux node switched off), and ACT on the two smaller grids; and on every grid
// ACT_AUX_BIAS with beta = 0.5 (the kernels with a source). On another SM count the rule
// may pick other kernels for these shapes; the test then still checks them against the reference.
// (The 256 x 128 tile, which the rule takes only on calls too large for the reference, is
// WideTileInClustersOfTwo's.)
TEST(CutlassBackend, ForwardKernelsOfEveryTileConfiguration) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
  const epigemm_dtype_t bf16 = EPIGEMM_DTYPE_BF16, f16 = EPIGEMM_DTYPE_F16;
  const epigemm_epilogue_t act = EPIGEMM_EPILOGUE_ACT, act_aux_bias = EPIGEMM_EPILOGUE_ACT_AUX_BIAS;
  const epigemm_activation_t silu = EPIGEMM_ACTIVATION_SILU, gelu_erf = EPIGEMM_ACTIVATION_GELU_ERF;
  struct Grid {
    int64_t m, n, k;
    std::vector<epigemm_dtype_t> dtypes;
    std::vector<epigemm_epilogue_t> epilogues;
    std::vector<epigemm_activation_t> activations;
  };
  const int64_t large_m = 128 * 17 + 8, large_n = 128 * 10 + 8;  // 18 x 11 tiles
  const std::vector<Grid> grids = {
      {136, 264, 1024, {bf16, f16}, {act, act_aux_bias}, every_activation()},
      {1032, 1096, 136, {bf16, f16}, {act, act_aux_bias}, every_activation()},
      {large_m, large_n, 72, {bf16}, {act_aux_bias}, every_activation()},
      {large_m, large_n, 1032, {bf16}, {act_aux_bias}, {silu, gelu_erf}},
  };
#if defined(EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS) && defined(EPIGEMM_TESTS_WITH_CUDA)
  {
    namespace cb = epigemm::cutlass_backend;
    int sm_count = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    if (sm_count == 132) {
      auto config = [&](const Grid& g, epigemm_activation_t a) {
        return cb::tile_config_for(cb::KernelFamily::forward_activation_aux,
                                   host_probe_call(act_aux_bias, a, EPIGEMM_OP_T, EPIGEMM_OP_N, g.m, g.n, g.k),
                                   cb::DeviceFacts{0, sm_count});
      };
      EXPECT_EQ(config(grids[0], silu), cb::TileConfig::cooperative_128x64x64_without_source);
      EXPECT_EQ(config(grids[1], silu), cb::TileConfig::pingpong_64x128x64_without_source);
      EXPECT_EQ(config(grids[2], silu), cb::TileConfig::pingpong_128x128x64_epilogue_64x64_without_source);
      EXPECT_EQ(config(grids[2], EPIGEMM_ACTIVATION_RELU), cb::TileConfig::pingpong_128x128x64_without_source);
      EXPECT_EQ(config(grids[3], silu), cb::TileConfig::pingpong_128x128x64_without_source);
    }
  }
#endif
  uint64_t index = 4000;
  for (const Grid& g : grids) {
    for (epigemm_dtype_t dtype : g.dtypes) {
      for (epigemm_activation_t a : g.activations) {
        for (epigemm_epilogue_t e : g.epilogues) {
          run_on_cutlass_and_check(ctx, cutlass_case(e, a, EPIGEMM_OP_T, EPIGEMM_OP_N, dtype, g.m, g.n, g.k, index++));
        }
      }
    }
  }
  // beta != 0: the kernels that read D's old values (the cooperative 128 x 64, ping-pong 64 x 128
  // and ping-pong 128 x 128 tiles).
  for (const Grid& g : grids) {
    for (epigemm_activation_t a : {silu, gelu_erf}) {
      GemmCase c = cutlass_case(act_aux_bias, a, EPIGEMM_OP_T, EPIGEMM_OP_N, bf16, g.m, g.n, g.k, index++);
      c.beta = 0.5f;
      run_on_cutlass_and_check(ctx, c);
    }
  }
}

#if defined(EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS) && defined(EPIGEMM_TESTS_WITH_CUDA)
// Runs the case on one kernel of a tile configuration, called directly as the backend calls it
// (its launch on the case's stream, with the workspace the kernel asks for), and checks it against
// the reference with the harness's tolerances. For a configuration that the rule takes only on
// calls the reference cannot check in a test's time (the 256 x 128 tile: gemm_k >= 8192 on 15
// waves of tiles); the rule's choice of it is tested on the host (TileConfigDependsOnTheFamilyAndTheGrid).
// `adjust` (if given) changes the drawn inputs before the call; the reference sees the same.
void run_kernel_and_check(epigemm_context_t ctx, const GemmCase& c, epigemm::cutlass_backend::TileConfig tile,
                          const std::function<void(Operands&)>& adjust = {}) {
  namespace cb = epigemm::cutlass_backend;
  SCOPED_TRACE(c.describe() + " on " + cb::tile_config_name(tile));
  const bool forward = !epigemm::epilogue_parts(c.epilogue, c.activation).backward();
  const cb::Kernel* kernel =
      cb::find_kernel(forward ? cb::KernelFamily::forward_activation_aux : cb::KernelFamily::backward_activation_bgrad,
                      tile, c.ab_dtype, forward ? cb::OperandLayout::tn : cb::OperandLayout::nn, c.activation);
  ASSERT_NE(kernel, nullptr);
  CaseRun run;
  run.before = Operands::make(c);
  if (adjust) adjust(run.before);
  run.after = run.before;
  run.after.upload(c);
  const OperandViews v = OperandViews::of(c, run.after, EPIGEMM_MEMORY_DEVICE);
  auto matrix = [](const epigemm_matrix_t& m) {
    return epigemm::Matrix{m.data, m.dtype, m.rows, m.cols, m.ld, m.memory};
  };
  auto vector = [](const epigemm_vector_t& x) { return epigemm::Vector{x.data, x.dtype, x.length, x.memory}; };
  epigemm::GemmCall call;
  call.transa = c.transa;
  call.transb = c.transb;
  call.gemm_m = c.gemm_m;
  call.gemm_n = c.gemm_n;
  call.gemm_k = c.gemm_k;
  call.a = matrix(v.a);
  call.b = matrix(v.b);
  call.d = matrix(v.d);
  call.alpha = c.alpha;
  call.beta = c.beta;
  call.epilogue = c.epilogue;
  call.activation = c.activation;
  call.has_bias = c.has_bias();
  if (call.has_bias) call.bias = vector(v.bias);
  call.has_aux = c.has_aux();
  if (call.has_aux) call.aux = matrix(v.aux);
  call.has_bias_grad = c.has_bias_grad();
  if (call.has_bias_grad) call.bias_grad = vector(v.bias_grad);
  call.backend = EPIGEMM_BACKEND_CUTLASS;
  int device = 0, sm_count = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  const cb::DeviceFacts facts{device, sm_count};
  const cb::TileOrder order = cb::tile_order_for(call, facts, tile);
  const epigemm::Status can = kernel->check_can_implement(call, facts, order);
  ASSERT_TRUE(can.ok()) << can.message();
  Workspace workspace(kernel->workspace_bytes(call, facts, order), EPIGEMM_MEMORY_DEVICE);
  Stream stream(EPIGEMM_MEMORY_DEVICE);
  call.workspace = workspace.data();
  call.workspace_bytes = workspace.bytes();
  call.stream = stream.get();
  const epigemm::Status ran = kernel->run(call, facts, order);
  ASSERT_TRUE(ran.ok()) << ran.message();
  stream.synchronize();
  run.after.download(c, stream.get());
  run.ok = true;
  run.ran = EPIGEMM_BACKEND_CUTLASS;
  check_outputs(c, run, reference_expected(ctx, c, run.before));
}
#endif

// The cooperative 256 x 128 tile in clusters of two (1 x 2 CTAs along gemm_n, A's tile multicast),
// which the rule takes on long, large calls: every forward and backward activation kernel of it in
// both dtypes, called directly, on 3 x 3 tiles of 256 x 128 whose columns round up to 2 clusters
// (gemm_m = 520: two full tiles and 8 rows; gemm_n = 376; gemm_k = 200, three 64-deep slices and 8),
// with alpha and beta on the second run of each; and ACT_AUX_BIAS(gelu_erf) and
// DACT_BGRAD(silu) on 13 x 11 tiles (143, more than the 132 SMs: the persistent loop and the row
// sums of several tiles per row block).
TEST(CutlassBackend, WideTileInClustersOfTwo) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
#if defined(EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS) && defined(EPIGEMM_TESTS_WITH_CUDA)
  const auto wide = epigemm::cutlass_backend::TileConfig::cooperative_256x128x64_cluster_1x2;
  uint64_t index = 5000;
  for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F16}) {
    for (GemmCase c : every_kernel(dtype, 520, 376, 200, index)) {
      const epigemm::EpilogueParts parts = epigemm::epilogue_parts(c.epilogue, c.activation);
      // DEFAULT, BIAS and the identity without an aux run the linear_combination_bias kernels.
      if (!parts.backward() && parts.activation == EPIGEMM_ACTIVATION_IDENTITY && !parts.uses_aux()) continue;
      run_kernel_and_check(ctx, c, wide);
      c.alpha = -0.75f;
      c.beta = 0.5f;
      c.seed = case_seed("cutlass_wide_accumulate", index++);
      run_kernel_and_check(ctx, c, wide);
    }
    index += 100;
  }
  const epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  run_kernel_and_check(ctx,
                       cutlass_case(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, T, N, EPIGEMM_DTYPE_BF16,
                                    256 * 12 + 8, 128 * 11 - 8, 136, 5400),
                       wide);
  run_kernel_and_check(ctx,
                       cutlass_case(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_SILU, N, N, EPIGEMM_DTYPE_BF16,
                                    256 * 12 + 8, 128 * 11 - 8, 136, 5401),
                       wide);
  // The same tile without a source (no shared memory for D's old values): the forward kernels with
  // beta = 0, on the same shapes (KernelWithoutSourceRefusesBeta: a call with beta != 0).
  const auto wide_without_source = epigemm::cutlass_backend::TileConfig::cooperative_256x128x64_cluster_1x2_without_source;
  for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F16}) {
    for (GemmCase c : every_kernel(dtype, 520, 376, 200, index)) {
      const epigemm::EpilogueParts parts = epigemm::epilogue_parts(c.epilogue, c.activation);
      if (parts.backward() || (parts.activation == EPIGEMM_ACTIVATION_IDENTITY && !parts.uses_aux())) continue;
      c.alpha = -0.75f;
      c.seed = case_seed("cutlass_wide_without_source", index++);
      run_kernel_and_check(ctx, c, wide_without_source);
    }
  }
  run_kernel_and_check(ctx,
                       cutlass_case(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, T, N, EPIGEMM_DTYPE_BF16,
                                    256 * 12 + 8, 128 * 11 - 8, 136, 5402),
                       wide_without_source);
#endif
}

// The ping-pong 128 x 128 forward tiles, both subtiles, called directly: the kernels without a
// source with beta = 0 (what the rule runs for every layer-level call), the ones that read D's old
// values with beta = 0.5 (what it runs where beta != 0); every activation's kernel in both dtypes
// on 18 x 11 tiles (more than the 132 SMs: the persistent loop) with gemm_k = 72 and, for silu and
// gelu_erf, 1032 (16 64-deep slices and 8). The same for the activation gradients' kernels of the
// tile (DACT_BGRAD, gemm_k = 72): with CUTLASS's subtile and a source, and with the 64 x 64 subtile
// without one.
TEST(CutlassBackend, PingpongTilesWithAndWithoutSource) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
#if defined(EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS) && defined(EPIGEMM_TESTS_WITH_CUDA)
  namespace cb = epigemm::cutlass_backend;
  const int64_t m = 128 * 17 + 8, n = 128 * 10 + 8;
  uint64_t index = 5500;
  for (cb::TileConfig tile : {cb::TileConfig::pingpong_128x128x64_without_source,
                              cb::TileConfig::pingpong_128x128x64_epilogue_64x64_without_source,
                              cb::TileConfig::pingpong_128x128x64, cb::TileConfig::pingpong_128x128x64_epilogue_64x64}) {
    const bool reads_source = tile == cb::TileConfig::pingpong_128x128x64 ||
                              tile == cb::TileConfig::pingpong_128x128x64_epilogue_64x64;
    auto with_scalars = [&](GemmCase c) {
      c.alpha = -0.75f;
      c.beta = reads_source ? 0.5f : 0.0f;
      return c;
    };
    for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F16}) {
      for (epigemm_activation_t a : every_activation()) {
        run_kernel_and_check(
            ctx, with_scalars(cutlass_case(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, a, EPIGEMM_OP_T, EPIGEMM_OP_N, dtype, m, n, 72, index++)),
            tile);
      }
    }
    for (epigemm_activation_t a : {EPIGEMM_ACTIVATION_SILU, EPIGEMM_ACTIVATION_GELU_ERF}) {
      run_kernel_and_check(ctx,
                           with_scalars(cutlass_case(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, a, EPIGEMM_OP_T, EPIGEMM_OP_N,
                                                     EPIGEMM_DTYPE_BF16, m, n, 1032, index++)),
                           tile);
    }
    // The activation gradients with the bias gradient (NN), on the two tiles the rule takes for
    // them (the 64 x 64 subtile without a source where beta = 0 and gemm_k <= 1024, CUTLASS's
    // subtile with a source otherwise): the row sums of several tiles per row block.
    if (tile == cb::TileConfig::pingpong_128x128x64_epilogue_64x64_without_source ||
        tile == cb::TileConfig::pingpong_128x128x64) {
      for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F16}) {
        for (epigemm_activation_t a : every_activation()) {
          run_kernel_and_check(
              ctx, with_scalars(cutlass_case(EPIGEMM_EPILOGUE_DACT_BGRAD, a, EPIGEMM_OP_N, EPIGEMM_OP_N, dtype, m, n, 72, index++)),
              tile);
        }
      }
    }
  }
#endif
}

#if defined(EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS) && defined(EPIGEMM_TESTS_WITH_CUDA)
// A cooperative tile without a source, called directly on an m x n problem, in each activation
// family that instantiates it: every activation and both dtypes with alpha = -0.75, ACT_AUX_BIAS
// (TN) and DACT_BGRAD (NN) at gemm_k = 72; then silu and gelu_erf in bf16, ACT_BIAS and DACT at
// gemm_k = 1032 (17 slices, the last partial). `index` numbers the cases' inputs.
void check_cooperative_tile_in_its_families(epigemm_context_t ctx, epigemm::cutlass_backend::TileConfig tile,
                                            int64_t m, int64_t n, uint64_t index) {
  namespace cb = epigemm::cutlass_backend;
  const bool forward = cb::instantiated_in(cb::KernelFamily::forward_activation_aux, tile);
  const bool backward = cb::instantiated_in(cb::KernelFamily::backward_activation_bgrad, tile);
  ASSERT_TRUE(forward || backward) << cb::tile_config_name(tile);
  auto run_scaled = [&](epigemm_epilogue_t e, epigemm_activation_t a, epigemm_dtype_t dtype, int64_t k) {
    const bool transposed_a = !epigemm::epilogue_parts(e, a).backward();
    GemmCase c = cutlass_case(e, a, transposed_a ? EPIGEMM_OP_T : EPIGEMM_OP_N, EPIGEMM_OP_N, dtype, m, n, k, index++);
    c.alpha = -0.75f;
    run_kernel_and_check(ctx, c, tile);
  };
  for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F16}) {
    for (epigemm_activation_t a : every_activation()) {
      if (forward) run_scaled(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, a, dtype, 72);
      if (backward) run_scaled(EPIGEMM_EPILOGUE_DACT_BGRAD, a, dtype, 72);
    }
  }
  for (epigemm_activation_t a : {EPIGEMM_ACTIVATION_SILU, EPIGEMM_ACTIVATION_GELU_ERF}) {
    if (forward) run_scaled(EPIGEMM_EPILOGUE_ACT_BIAS, a, EPIGEMM_DTYPE_BF16, 1032);
    if (backward) run_scaled(EPIGEMM_EPILOGUE_DACT, a, EPIGEMM_DTYPE_BF16, 1032);
  }
}
#endif

// The cooperative 128 x 96 tile without a source, in both activation families, on 18 x 11 tiles
// (more than the SMs; the last tile row and column partial: 1000 = 10 x 96 + 40).
TEST(CutlassBackend, CooperativeTileOf96Columns) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
#if defined(EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS) && defined(EPIGEMM_TESTS_WITH_CUDA)
  check_cooperative_tile_in_its_families(ctx, epigemm::cutlass_backend::TileConfig::cooperative_128x96x64_without_source,
                                         128 * 17 + 8, 96 * 10 + 40, 5700);
#endif
}

// The cooperative 128 x 192 tile without a source (the activation gradients only) on 17 x 8 tiles
// (more than the SMs; the last tile row and column partial: 1480 = 7 x 192 + 136).
TEST(CutlassBackend, CooperativeTileOf192Columns) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
#if defined(EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS) && defined(EPIGEMM_TESTS_WITH_CUDA)
  check_cooperative_tile_in_its_families(
      ctx, epigemm::cutlass_backend::TileConfig::cooperative_128x192x64_without_source, 128 * 16 + 8, 192 * 7 + 136, 5900);
#endif
}

// The bias gradient of DACT_BGRAD adds only the columns inside gemm_n, and reads only the rows
// inside gemm_m. TMA reads the operands past their last row as zeros, so the accumulator past the
// problem's last column or row is a sum of products with 0: NaN where the other operand holds an
// Inf. On every backward tile configuration, called directly, identity (g = acc), both dtypes:
// - 136 x 200 x 72 (the last tile column partial on every tile width): A(5, 3) = +Inf and op(B)'s
//   row 3 positive make row 5 of acc +Inf in every column, NaN in the columns past gemm_n; its
//   bias gradient must be +Inf, not NaN (the columns past the end left out of the sum);
// - 136 x 256 x 72 (every tile column full, the last tile row partial): op(B)(3, 7) = +Inf and A's
//   column 3 positive make column 7 of acc +Inf in every row, NaN in the rows past gemm_m; every
//   bias gradient must be +Inf (those rows' partials, in the padding, never read).
TEST(CutlassBackend, RowSumsLeaveOutTheColumnsAndRowsPastTheEnd) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
#if defined(EPIGEMM_HAVE_CUTLASS_BACKEND_FOR_TESTS) && defined(EPIGEMM_TESTS_WITH_CUDA)
  namespace cb = epigemm::cutlass_backend;
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t m = 136, k = 72;
  uint64_t index = 5800;
  for (cb::TileConfig tile : {cb::TileConfig::cooperative_128x128x64, cb::TileConfig::pingpong_128x128x64,
                              cb::TileConfig::cooperative_256x128x64_cluster_1x2,
                              cb::TileConfig::pingpong_128x128x64_epilogue_64x64_without_source,
                              cb::TileConfig::cooperative_128x64x64_without_source,
                              cb::TileConfig::cooperative_128x96x64_without_source,
                              cb::TileConfig::cooperative_128x192x64_without_source}) {
    for (epigemm_dtype_t dtype : {EPIGEMM_DTYPE_BF16, EPIGEMM_DTYPE_F16}) {
      auto run_identity = [&](int64_t n, const std::function<void(Operands&)>& adjust) {
        run_kernel_and_check(ctx,
                             cutlass_case(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_IDENTITY, EPIGEMM_OP_N,
                                          EPIGEMM_OP_N, dtype, m, n, k, index++),
                             tile, adjust);
      };
      const int64_t partial_n = 200, full_n = 256;
      run_identity(partial_n, [&](Operands& ops) {
        ops.a.set(5, 3, inf);
        for (int64_t j = 0; j < partial_n; ++j) ops.b.set(3, j, 0.25 + std::fabs(ops.b.get(3, j)));
      });
      run_identity(full_n, [&](Operands& ops) {
        ops.b.set(3, 7, inf);
        for (int64_t i = 0; i < m; ++i) ops.a.set(i, 3, 0.25 + std::fabs(ops.a.get(i, 3)));
      });
    }
  }
#endif
}

// 17 x 11 = 187 output tiles, more than the SMs: each CTA of the persistent grid loops over tiles,
// and the DACT_BGRAD row sums add 11 partial tiles per row block. The reference runs on the CPU in
// double, so gemm_k stays small.
TEST(CutlassBackend, GridLargerThanTheSmCount) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
  const epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  const epigemm_activation_t gelu = EPIGEMM_ACTIVATION_GELU_TANH;
  std::vector<GemmCase> cases = {
      cutlass_case(EPIGEMM_EPILOGUE_DEFAULT, gelu, T, N, EPIGEMM_DTYPE_BF16, 2056, 1288, 136, 2000),
      cutlass_case(EPIGEMM_EPILOGUE_BIAS, gelu, N, T, EPIGEMM_DTYPE_F16, 2056, 1288, 136, 2001),
      cutlass_case(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, gelu, T, N, EPIGEMM_DTYPE_BF16, 2056, 1288, 136, 2002),
      cutlass_case(EPIGEMM_EPILOGUE_DACT_BGRAD, gelu, N, N, EPIGEMM_DTYPE_BF16, 2056, 1288, 136, 2003),
      cutlass_case(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_SILU, N, N, EPIGEMM_DTYPE_F16, 1032, 4104, 64, 2004),
      // At least twice the H200's 132 SMs, with partial tiles: 16 x 20 = 320 tiles take the tile
      // order of runs of 4, 16 x 18 = 288 runs of 2 (cutlass_tile_config.hpp, tile_order_for), in
      // the ping-pong and the cooperative kernels.
      cutlass_case(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, T, N, EPIGEMM_DTYPE_BF16, 2040, 2552, 136, 2005),
      cutlass_case(EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_RELU, T, N, EPIGEMM_DTYPE_F16, 2040, 2296, 72, 2006),
      cutlass_case(EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_GELU_TANH, N, N, EPIGEMM_DTYPE_BF16, 2040, 2552, 136, 2007),
      cutlass_case(EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_SILU, N, N, EPIGEMM_DTYPE_F16, 2040, 2296, 72, 2008),
  };
  for (const GemmCase& c : cases) run_on_cutlass_and_check(ctx, c);
}

// The same inputs give bitwise the same D, aux and bias gradient: twice in one context, and once
// more in a second context (a fresh backend, nothing cached). The kernel and tile shape are a pure
// function of the call, and the bias-gradient sums add per-tile partials in a fixed order.
TEST(CutlassBackend, BitwiseRepeatableAcrossRunsAndContexts) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
  Context other;
  const epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  const std::vector<GemmCase> cases = {
      cutlass_case(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_GELU_TANH, N, N, EPIGEMM_DTYPE_BF16, 1032, 3000, 64, 3000),
      // 12 x 24 = 288 tiles: the tile order of runs of 4.
      cutlass_case(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_RELU, N, N, EPIGEMM_DTYPE_BF16, 1528, 3064, 64, 3003),
      cutlass_case(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, T, N, EPIGEMM_DTYPE_F16, 1032, 1000, 264, 3001),
      cutlass_case(EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, N, T, EPIGEMM_DTYPE_BF16, 520, 1000, 1032, 3002),
  };
  for (const GemmCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const CaseRun first = run_case(ctx, c);
    ASSERT_TRUE(first.ok && !first.declined);
    const CaseRun runs[] = {run_case(ctx, c), run_case(ctx, c), run_case(other, c)};
    for (const CaseRun& again : runs) {
      ASSERT_TRUE(again.ok && !again.declined);
      expect_bitwise_equal("D", first.after.d, again.after.d);
      if (c.aux_is_output()) expect_bitwise_equal("aux", first.after.aux, again.after.aux);
      if (c.has_bias_grad()) expect_bitwise_equal("bias_grad", first.after.bias_grad, again.after.bias_grad);
    }
  }
}

#ifdef EPIGEMM_TESTS_WITH_CUDA
// The backend keeps the prepared launches (CUTLASS's parameters, TMA descriptors included) of recent
// calls and repeats one only for a call with the same launch key (cutlass_backend.cpp). Each case
// runs right after a decoy call in the same context that differs from it in one value the key
// holds: an operand's address (then a scratch buffer of zeros), alpha or beta. Had the key left
// that value out, the case would repeat the decoy's launch, and its outputs, checked against the
// reference, would be the decoy's values or would land in the scratch buffer.
enum class Decoy { a, b, d, bias, aux, bias_grad, alpha, beta };

const char* decoy_name(Decoy decoy) {
  switch (decoy) {
    case Decoy::a: return "A elsewhere";
    case Decoy::b: return "B elsewhere";
    case Decoy::d: return "D elsewhere";
    case Decoy::bias: return "bias elsewhere";
    case Decoy::aux: return "aux elsewhere";
    case Decoy::bias_grad: return "bias_grad elsewhere";
    case Decoy::alpha: return "alpha doubled";
    case Decoy::beta: return "beta 1";
  }
  return "?";
}

size_t matrix_bytes(const epigemm_matrix_t& m) { return size_t(m.ld) * size_t(m.cols) * 2; }

TEST(CutlassBackend, RepeatsAPreparedLaunchOnlyForTheSameCall) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
  const epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  struct Run {
    GemmCase c;
    std::vector<Decoy> decoys;
  };
  const std::vector<Run> runs = {
      {cutlass_case(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, T, N, EPIGEMM_DTYPE_BF16, 264, 136, 72, 5000),
       {Decoy::a, Decoy::b, Decoy::d, Decoy::bias, Decoy::aux, Decoy::alpha, Decoy::beta}},
      {cutlass_case(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_SILU, N, N, EPIGEMM_DTYPE_BF16, 264, 520, 72, 5001),
       {Decoy::d, Decoy::aux, Decoy::bias_grad, Decoy::alpha}},
      {cutlass_case(EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, N, T, EPIGEMM_DTYPE_F16, 136, 264, 72, 5002),
       {Decoy::bias, Decoy::beta}},
  };
  for (const Run& run : runs) {
    for (const Decoy decoy : run.decoys) {
      SCOPED_TRACE(decoy_name(decoy));
      SCOPED_TRACE(run.c.describe());
      const Invoke decoy_first = [decoy](epigemm_context_t context, const GemmCase& c, const OperandViews& v,
                                         void* workspace, size_t workspace_bytes, void* stream) {
        // Zeros, as large as the largest operand.
        size_t scratch_bytes = std::max({matrix_bytes(v.a), matrix_bytes(v.b), matrix_bytes(v.d)});
        if (c.has_aux()) scratch_bytes = std::max(scratch_bytes, matrix_bytes(v.aux));
        void* scratch = nullptr;
        EXPECT_EQ(cudaMalloc(&scratch, scratch_bytes), cudaSuccess);
        EXPECT_EQ(cudaMemset(scratch, 0, scratch_bytes), cudaSuccess);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        GemmCase decoy_case = c;
        OperandViews decoy_views = v;
        switch (decoy) {
          case Decoy::a: decoy_views.a.data = scratch; break;
          case Decoy::b: decoy_views.b.data = scratch; break;
          case Decoy::d: decoy_views.d.data = scratch; break;
          case Decoy::bias: decoy_views.bias.data = scratch; break;
          case Decoy::aux: decoy_views.aux.data = scratch; break;
          case Decoy::bias_grad: decoy_views.bias_grad.data = scratch; break;
          case Decoy::alpha: decoy_case.alpha = 2.0f * c.alpha; break;
          case Decoy::beta: decoy_case.beta = 1.0f; break;
        }
        const Desc desc = make_desc(decoy_case, decoy_views, c.target.backend);
        EXPECT_EQ(epigemm_gemm(context, desc.get(), &decoy_views.a, &decoy_views.b, &decoy_views.d, workspace,
                               workspace_bytes, stream),
                  EPIGEMM_STATUS_SUCCESS)
            << epigemm_context_last_error(context);
        const epigemm_status_t status = invoke_description(context, c, v, workspace, workspace_bytes, stream);
        EXPECT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), cudaSuccess);
        EXPECT_EQ(cudaFree(scratch), cudaSuccess);
        return status;
      };
      const CaseRun result = run_case(ctx, run.c, decoy_first);
      ASSERT_TRUE(result.ok);
      EXPECT_FALSE(result.declined) << epigemm_context_last_error(ctx);
      check_case(ctx, run.c, result);
    }
  }
}

// One call of each family captured into a CUDA graph in global capture mode (where an allocation,
// a host synchronization or a device-to-host copy inside a call makes the capture fail; the
// DACT_BGRAD call's second kernel, the sum of its row partials, is a captured node), replayed
// twice on fresh inputs and checked against the reference.
TEST(CutlassBackend, CallsCaptureIntoAGraphAndReplay) {
  Context ctx;
  EPIGEMM_SKIP_IF_UNUSABLE(ctx, kCutlass);
  const epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
  const std::vector<GemmCase> cases = {
      cutlass_case(EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, T, N, EPIGEMM_DTYPE_BF16, 264, 136, 72, 4000),
      cutlass_case(EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, T, N, EPIGEMM_DTYPE_BF16, 264, 136, 72, 4001),
      cutlass_case(EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_GELU_TANH, N, N, EPIGEMM_DTYPE_BF16, 264, 520, 72, 4002),
  };
  check_graph_capture_and_replay(ctx, cases, EPIGEMM_BACKEND_CUTLASS, "cutlass_graph_replay");
}
#else
TEST(CutlassBackend, RepeatsAPreparedLaunchOnlyForTheSameCall) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cutlass backend is not compiled in)";
}
TEST(CutlassBackend, CallsCaptureIntoAGraphAndReplay) {
  GTEST_SKIP() << "SKIP: this build has no CUDA (the cutlass backend is not compiled in)";
}
#endif

}  // namespace
}  // namespace epigemm_test
