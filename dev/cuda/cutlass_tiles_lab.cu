// epigemm_cutlass_tiles_lab: the tile configurations of the cutlass backend's kernels, side by side.
// The library runs one configuration per call, chosen by a pure function of the call
// (src/backends/cutlass/cutlass_tile_config.hpp, tile_config_for); this program runs every
// configuration a kernel family instantiates on the same calls, checks that they agree, and times
// them against cuBLAS's plain GEMM of the same shape, so that the rule is set from measurements.
//
// For each shape (tokens, in, out) and each case (an epilogue with its activation, in the layout of
// its pass: the forward epilogues as fprop, TN, gemm (m, n, k) = (out, tokens, in); the backward
// ones as dgrad, NN, (in, tokens, out)), bf16 everywhere:
//   1. every instantiated configuration, in every tile order, runs once on the same inputs; D (and
//      the bias gradient) must agree with the first's within 1/128 of the array's largest
//      magnitude, or the program stops (the orders of one configuration must agree bitwise);
//   2. the plain cublasGemmEx of the same (m, n, k) and layout (bf16 in and out, fp32 compute)
//      and every configuration are timed interleaved: median of --reps calls between CUDA
//      events after --warmup calls, the inputs rotating among sets of >= 512 MB together (the
//      H200's L2 is 60 MB).
// It prints one row per (shape, case): each (configuration, tile order)'s time over cuBLAS's, and
// which one is fastest. Runs on sm_90a; elsewhere it stops with CUDA's or the backend's message.
//
//   epigemm_cutlass_tiles_lab [--shapes public|derive|both|T,I,O;...] [--cases fwd|bwd|all]
//                             [--reps N] [--warmup N] [--csv FILE]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cutlass/cutlass_kernels.hpp"
#include "backends/cutlass/cutlass_tile_config.hpp"
#include "core/epilogue_parts.hpp"
#include "core/names.hpp"
#include "harness/cuda_timing.cuh"

namespace {

namespace cb = epigemm::cutlass_backend;
using epigemm_bench::DeviceBuffer;
using epigemm_bench::die;

#define CUBLAS_LAB_OK(expr)                                                    \
  do {                                                                         \
    const cublasStatus_t st_ = (expr);                                         \
    if (st_ != CUBLAS_STATUS_SUCCESS) die(std::string(#expr) + " failed");     \
  } while (0)

struct Shape {
  int64_t tokens, in, out;
};
// The public shapes of the benchmark and the `derive` part of its generalization set
// (bench/epigemm_bench_gpu.cu): a rule may be fitted to these; the held-out part checks it there.
const Shape kPublic[] = {{8192, 4096, 16384}, {8192, 16384, 4096}, {4096, 1024, 4096}, {16384, 8192, 28672}, {2048, 768, 3072}};
const Shape kDerive[] = {{256, 768, 3072},    {512, 1024, 4096},   {1000, 768, 3072},   {1024, 2048, 8192},
                         {1536, 5120, 5120},  {2048, 2560, 10240}, {2048, 4096, 12288}, {3000, 1536, 6144},
                         {4096, 4096, 11008}, {4096, 11008, 4096}, {512, 8192, 8192},   {6144, 3072, 12288},
                         {8192, 5120, 13824}, {8192, 13824, 5120}, {12288, 2048, 8192}, {16384, 1024, 4096}};

struct Case {
  epigemm_epilogue_t epilogue;
  epigemm_activation_t activation;
  cb::KernelFamily family;
};
// The forward cases: the cheapest activation without aux, the most expensive one with aux. The
// backward ones: the derivative with and without the bias-gradient reduction.
const Case kForwardCases[] = {
    {EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_RELU, cb::KernelFamily::forward_activation_aux},
    {EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, cb::KernelFamily::forward_activation_aux},
    {EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_RELU, cb::KernelFamily::forward_activation_aux}};
const Case kBackwardCases[] = {
    {EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_GELU_ERF, cb::KernelFamily::backward_activation_bgrad},
    {EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_SILU, cb::KernelFamily::backward_activation_bgrad}};

const cb::TileConfig kConfigs[] = {cb::TileConfig::cooperative_128x128x64, cb::TileConfig::pingpong_128x128x64};
const int kSwizzles[] = {1, 4, 8};

struct Variant {
  cb::TileConfig tile;
  int swizzle;
  const cb::Kernel* kernel;
};

std::string variant_name(cb::TileConfig tile, int swizzle) {
  std::string name = cb::tile_config_name(tile);
  name = name.substr(0, name.find(' '));  // "cooperative" / "pingpong": all are 128x128x64, 1x1x1
  return name + " s" + std::to_string(swizzle);
}

const cb::Kernel* find_kernel(const Case& c, cb::TileConfig tile) {
  switch (c.family) {
    case cb::KernelFamily::linear_combination_bias:
      return cb::find_linear_combination_bias_kernel(EPIGEMM_DTYPE_BF16, cb::OperandLayout::tn, tile);
    case cb::KernelFamily::forward_activation_aux:
      return cb::find_forward_activation_aux_kernel(EPIGEMM_DTYPE_BF16, cb::OperandLayout::tn, c.activation, tile);
    case cb::KernelFamily::backward_activation_bgrad:
      return cb::find_backward_activation_bgrad_kernel(EPIGEMM_DTYPE_BF16, cb::OperandLayout::nn, c.activation, tile);
  }
  return nullptr;
}

// One set of operands of a shape in GEMM terms (the passes' mapping of docs/conventions.md):
// op(A) m x k, op(B) k x n, D, aux m x n column-major, bias / bias_grad of length m.
struct Operands {
  std::unique_ptr<DeviceBuffer> a, b, d, aux, vec;
};

epigemm::Matrix matrix(void* p, int64_t rows, int64_t cols, int64_t ld) {
  epigemm::Matrix x;
  x.data = p;
  x.dtype = EPIGEMM_DTYPE_BF16;
  x.rows = rows;
  x.cols = cols;
  x.ld = ld;
  x.memory = EPIGEMM_MEMORY_DEVICE;
  return x;
}

struct Gemm {
  bool forward;  // fprop TN, else dgrad NN
  int64_t m, n, k;
};

Gemm gemm_of(const Shape& s, bool forward) {
  return forward ? Gemm{true, s.out, s.tokens, s.in} : Gemm{false, s.in, s.tokens, s.out};
}

epigemm::GemmCall call_of(const Gemm& g, const Case& c, const Operands& o, void* workspace, size_t workspace_bytes,
                          cudaStream_t stream) {
  epigemm::GemmCall call;
  call.transa = g.forward ? EPIGEMM_OP_T : EPIGEMM_OP_N;
  call.transb = EPIGEMM_OP_N;
  call.gemm_m = g.m;
  call.gemm_n = g.n;
  call.gemm_k = g.k;
  // fprop: A = W stored [out, in] row-major, i.e. k x m column-major; dgrad: A = W, m x k.
  call.a = g.forward ? matrix(o.a->ptr, g.k, g.m, g.k) : matrix(o.a->ptr, g.m, g.k, g.m);
  call.b = matrix(o.b->ptr, g.k, g.n, g.k);
  call.d = matrix(o.d->ptr, g.m, g.n, g.m);
  call.epilogue = c.epilogue;
  call.activation = c.activation;
  const epigemm::EpilogueParts parts = call.parts();
  call.has_aux = parts.uses_aux();
  if (call.has_aux) call.aux = matrix(o.aux->ptr, g.m, g.n, g.m);
  epigemm::Vector v;
  v.data = o.vec->ptr;
  v.dtype = EPIGEMM_DTYPE_BF16;
  v.length = g.m;
  v.memory = EPIGEMM_MEMORY_DEVICE;
  call.has_bias = parts.reads_bias();
  if (call.has_bias) call.bias = v;
  call.has_bias_grad = parts.writes_bias_grad();
  if (call.has_bias_grad) call.bias_grad = v;
  call.backend = EPIGEMM_BACKEND_CUTLASS;
  call.workspace = workspace;
  call.workspace_bytes = workspace_bytes;
  call.stream = stream;
  return call;
}

std::vector<uint16_t> download(const void* p, int64_t count) {
  std::vector<uint16_t> host(static_cast<size_t>(count));
  EPIGEMM_BENCH_CUDA_OK(cudaMemcpy(host.data(), p, size_t(count) * 2, cudaMemcpyDeviceToHost));
  return host;
}

float bf16_value(uint16_t bits) {
  const uint32_t word = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &word, sizeof f);
  return f;
}

// The largest difference between two bf16 arrays over the largest magnitude in y: configurations
// differ in how wgmma splits a tile among warp groups, so sums may round differently (a relative
// ulp metric would blow up where a value is near 0); NaN anywhere counts as infinitely far.
double scaled_difference(const std::vector<uint16_t>& x, const std::vector<uint16_t>& y) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double a = bf16_value(x[i]), b = bf16_value(y[i]);
    if (std::isnan(a) != std::isnan(b)) return INFINITY;
    if (std::isnan(a)) continue;
    worst = std::max(worst, std::fabs(a - b));
    scale = std::max(scale, std::fabs(b));
  }
  return scale > 0 ? worst / scale : worst;
}

std::vector<Shape> parse_shapes(const std::string& which) {
  std::vector<Shape> shapes;
  if (which == "public" || which == "both") shapes.assign(std::begin(kPublic), std::end(kPublic));
  if (which == "derive" || which == "both") shapes.insert(shapes.end(), std::begin(kDerive), std::end(kDerive));
  if (!shapes.empty()) return shapes;
  std::stringstream list(which);
  std::string item;
  while (std::getline(list, item, ';')) {
    long long t = 0, i = 0, o = 0;
    if (std::sscanf(item.c_str(), "%lld,%lld,%lld", &t, &i, &o) != 3 || t <= 0 || i <= 0 || o <= 0) {
      die("--shapes: expected public, derive, both or T,I,O;...; got \"" + which + "\"");
    }
    shapes.push_back({t, i, o});
  }
  return shapes;
}

}  // namespace

int main(int argc, char** argv) {
  epigemm_bench::set_program_name("epigemm_cutlass_tiles_lab");
  std::string which_shapes = "both", which_cases = "all", csv_path;
  epigemm_bench::Timing timing;
  timing.reps = 20;
  timing.warmup = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(arg + ": expected a value");
      return argv[++i];
    };
    if (arg == "--shapes") which_shapes = value();
    else if (arg == "--cases") which_cases = value();
    else if (arg == "--reps") timing.reps = std::max(1, std::atoi(value().c_str()));
    else if (arg == "--warmup") timing.warmup = std::max(0, std::atoi(value().c_str()));
    else if (arg == "--csv") csv_path = value();
    else if (arg == "--help" || arg == "-h") {
      std::printf("epigemm_cutlass_tiles_lab [--shapes public|derive|both|T,I,O;...] [--cases fwd|bwd|all]\n"
                  "                          [--reps N] [--warmup N] [--csv FILE]\n");
      return 0;
    } else {
      die("unknown argument \"" + arg + "\" (see --help)");
    }
  }
  if (which_cases != "fwd" && which_cases != "bwd" && which_cases != "all") {
    die("--cases: expected fwd, bwd or all; got \"" + which_cases + "\"");
  }
  std::vector<Case> cases;
  if (which_cases != "bwd") cases.insert(cases.end(), std::begin(kForwardCases), std::end(kForwardCases));
  if (which_cases != "fwd") cases.insert(cases.end(), std::begin(kBackwardCases), std::end(kBackwardCases));

  int device_id = 0;
  EPIGEMM_BENCH_CUDA_OK(cudaGetDevice(&device_id));
  cudaDeviceProp prop{};
  EPIGEMM_BENCH_CUDA_OK(cudaGetDeviceProperties(&prop, device_id));
  const cb::DeviceFacts device{device_id, prop.multiProcessorCount};
  cudaStream_t stream = nullptr;
  EPIGEMM_BENCH_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas = nullptr;
  CUBLAS_LAB_OK(cublasCreate(&blas));
  const size_t kCublasWorkspace = size_t(32) << 20;
  DeviceBuffer cublas_ws(kCublasWorkspace);
  CUBLAS_LAB_OK(cublasSetStream(blas, stream));
  CUBLAS_LAB_OK(cublasSetWorkspace(blas, cublas_ws.ptr, kCublasWorkspace));

  std::printf("device: %s (%d SMs); bf16; median of %d after %d warm-up calls; each variant's time over cuBLAS's plain GEMM (variant: configuration, s<tile-order swizzle>)\n",
              prop.name, prop.multiProcessorCount, timing.reps, timing.warmup);
  std::printf("| shape (tok,in,out) | pass | epilogue | tiles | cuBLAS ms |");
  for (cb::TileConfig t : kConfigs) {
    for (int swizzle : kSwizzles) std::printf(" %s |", variant_name(t, swizzle).c_str());
  }
  std::printf(" fastest | rule |\n|---|---|---|---:|---:|");
  for (size_t i = 0; i < std::size(kConfigs) * std::size(kSwizzles); ++i) std::printf("---:|");
  std::printf("---|---|\n");
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "tokens,in,out,pass,epilogue,activation,tiles,cublas_ms,variant,ms,ratio,scaled_difference,rule\n";
  }

  for (const Shape& s : parse_shapes(which_shapes)) {
    for (bool forward : {true, false}) {
      const Gemm g = gemm_of(s, forward);
      std::vector<Case> pass_cases;
      for (const Case& c : cases) {
        if ((c.family != cb::KernelFamily::backward_activation_bgrad) == forward) pass_cases.push_back(c);
      }
      if (pass_cases.empty()) continue;
      const size_t set_bytes = size_t(2) * size_t(g.m * g.k + g.k * g.n + 2 * g.m * g.n + g.m);
      const int sets = int(std::min<size_t>(8, std::max<size_t>(1, (size_t(512) << 20) / set_bytes + 1)));
      std::vector<Operands> ops(static_cast<size_t>(sets));
      for (int i = 0; i < sets; ++i) {
        Operands& o = ops[size_t(i)];
        o.a = std::make_unique<DeviceBuffer>(size_t(2 * g.m * g.k));
        o.b = std::make_unique<DeviceBuffer>(size_t(2 * g.k * g.n));
        o.d = std::make_unique<DeviceBuffer>(size_t(2 * g.m * g.n));
        o.aux = std::make_unique<DeviceBuffer>(size_t(2 * g.m * g.n));
        o.vec = std::make_unique<DeviceBuffer>(size_t(2 * g.m));
        epigemm_bench::fill_uniform(o.a->ptr, false, g.m * g.k, 10 + uint64_t(i), 1.0f);
        epigemm_bench::fill_uniform(o.b->ptr, false, g.k * g.n, 20 + uint64_t(i), 1.0f);
        epigemm_bench::fill_uniform(o.aux->ptr, false, g.m * g.n, 30 + uint64_t(i), 2.0f);
        epigemm_bench::fill_uniform(o.vec->ptr, false, g.m, 40 + uint64_t(i), 1.0f);
      }
      // The fills run on the legacy default stream, which a non-blocking stream does not wait for.
      EPIGEMM_BENCH_CUDA_OK(cudaDeviceSynchronize());
      auto cublas_call = [&](int rep) {
        const Operands& o = ops[size_t(rep % sets)];
        const float alpha = 1.0f, beta = 0.0f;
        CUBLAS_LAB_OK(cublasGemmEx(blas, forward ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, int(g.m), int(g.n),
                                   int(g.k), &alpha, o.a->ptr, CUDA_R_16BF, int(forward ? g.k : g.m), o.b->ptr,
                                   CUDA_R_16BF, int(g.k), &beta, o.d->ptr, CUDA_R_16BF, int(g.m),
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      };
      const int64_t tiles = ((g.m + 127) / 128) * ((g.n + 127) / 128);
      for (const Case& c : pass_cases) {
        std::vector<Variant> variants;
        for (cb::TileConfig t : kConfigs) {
          if (const cb::Kernel* k = find_kernel(c, t)) {
            for (int swizzle : kSwizzles) variants.push_back({t, swizzle, k});
          }
        }
        if (variants.empty()) die(std::string("no kernel for ") + epigemm_epilogue_name(c.epilogue));
        size_t workspace_bytes = 0;
        {
          const epigemm::GemmCall probe = call_of(g, c, ops[0], nullptr, 0, stream);
          for (const Variant& v : variants) {
            const epigemm::Status can = v.kernel->check_can_implement(probe, device, cb::TileOrder{v.swizzle});
            if (!can.ok()) die(can.message());
            workspace_bytes = std::max(workspace_bytes, v.kernel->workspace_bytes(probe, device, cb::TileOrder{v.swizzle}));
          }
        }
        DeviceBuffer workspace(std::max<size_t>(workspace_bytes, 16));
        auto run = [&](size_t which, int rep) {
          const epigemm::GemmCall call =
              call_of(g, c, ops[size_t(rep % sets)], workspace.ptr, workspace_bytes, stream);
          const epigemm::Status st = variants[which].kernel->run(call, device, cb::TileOrder{variants[which].swizzle});
          if (!st.ok()) die(st.message());
        };
        // Agreement on set 0: D and the bias gradient of every variant against the first.
        std::vector<double> difference(variants.size(), 0.0);
        std::vector<uint16_t> first_d, first_vec;
        const bool sums = c.epilogue == EPIGEMM_EPILOGUE_DACT_BGRAD;
        for (size_t i = 0; i < variants.size(); ++i) {
          run(i, 0);
          EPIGEMM_BENCH_CUDA_OK(cudaStreamSynchronize(stream));
          std::vector<uint16_t> d = download(ops[0].d->ptr, g.m * g.n);
          std::vector<uint16_t> vec = download(ops[0].vec->ptr, g.m);
          if (i == 0) {
            first_d = std::move(d);
            first_vec = std::move(vec);
            continue;
          }
          const bool same_config = variants[i].tile == variants[0].tile;
          if (same_config && (d != first_d || (sums && vec != first_vec))) {
            die(variant_name(variants[i].tile, variants[i].swizzle) + " is not bitwise equal to " +
                variant_name(variants[0].tile, variants[0].swizzle) + " (" + variants[i].kernel->name + ")");
          }
          difference[i] = scaled_difference(d, first_d);
          if (sums) difference[i] = std::max(difference[i], scaled_difference(vec, first_vec));
          if (!(difference[i] <= 1.0 / 128)) {
            die(std::string(variants[i].kernel->name) + " differs from " + variants[0].kernel->name + " by " +
                std::to_string(difference[i]) + " of the largest magnitude");
          }
        }
        std::vector<std::function<void(int)>> fns = {cublas_call};
        for (size_t i = 0; i < variants.size(); ++i) fns.push_back([&, i](int rep) { run(i, rep); });
        const std::vector<double> ms = epigemm_bench::interleaved_median_ms(timing, stream, fns);
        size_t best = 0;
        for (size_t i = 1; i < variants.size(); ++i) {
          if (ms[i + 1] < ms[best + 1]) best = i;
        }
        const epigemm::GemmCall probe = call_of(g, c, ops[0], nullptr, 0, stream);
        const std::string rule =
            variant_name(cb::tile_config_for(c.family, probe), cb::tile_order_for(probe, device).swizzle);
        const std::string label = epigemm::epilogue_label(c.epilogue, c.activation);
        std::printf("| %lld,%lld,%lld | %s | %s | %lld | %.4f |", (long long)s.tokens, (long long)s.in,
                    (long long)s.out, forward ? "fprop" : "dgrad", label.c_str(), (long long)tiles, ms[0]);
        size_t k = 0;
        for (cb::TileConfig t : kConfigs) {
          for (int swizzle : kSwizzles) {
            if (k < variants.size() && variants[k].tile == t && variants[k].swizzle == swizzle) {
              std::printf(" %.3f |", ms[k + 1] / ms[0]);
              if (csv.is_open()) {
                csv << s.tokens << ',' << s.in << ',' << s.out << ',' << (forward ? "fprop" : "dgrad") << ','
                    << epigemm_epilogue_name(c.epilogue) << ',' << epigemm_activation_name(c.activation) << ','
                    << tiles << ',' << ms[0] << ',' << variant_name(t, swizzle) << ',' << ms[k + 1] << ','
                    << ms[k + 1] / ms[0] << ',' << difference[k] << ',' << rule << '\n';
              }
              ++k;
            } else {
              std::printf(" - |");
            }
          }
        }
        std::printf(" %s | %s |\n", variant_name(variants[best].tile, variants[best].swizzle).c_str(), rule.c_str());
        std::fflush(stdout);
      }
    }
  }
  cublasDestroy(blas);
  cudaStreamDestroy(stream);
  return 0;
}
