// epigemm_cutlass_tiles_lab: the tile configurations of the cutlass backend's kernels, side by side.
// The library runs one configuration per call, chosen by a pure function of the call
// (src/backends/cutlass/cutlass_tile_config.hpp, tile_config_for); this program runs every
// configuration a kernel family instantiates on the same calls, checks that they agree, and times
// them against cuBLAS's plain GEMM of the same shape, so that the rule is set from measurements.
//
// For each shape (tokens, in, out) and each case (an epilogue with its activation, in the layout of
// its pass: the forward epilogues as fprop, TN, gemm (m, n, k) = (out, tokens, in); the backward
// ones as dgrad, NN, (in, tokens, out)), bf16 everywhere:
//   1. every instantiated configuration, in every tile order, runs twice on the same inputs (the
//      two runs must agree bitwise); D (and the bias gradient) must agree with the first's within
//      1/128 of the array's largest magnitude, or the program stops (the orders of one
//      configuration must agree bitwise);
//   2. the plain cublasGemmEx of the same (m, n, k) and layout (bf16 in and out, fp32 compute)
//      and every configuration are timed interleaved: median of --reps calls between CUDA
//      events after --warmup calls, the inputs rotating among sets of >= 512 MB together (the
//      H200's L2 is 60 MB).
// It prints one row per (shape, case): each (configuration, tile order)'s time over cuBLAS's, and
// which one is fastest. Runs on sm_90a; elsewhere it stops with CUDA's or the backend's message.
//
//   epigemm_cutlass_tiles_lab [--shapes public|derive|both|T,I,O;...] [--cases fwd|bwd|all]
//                             [--swizzles 1,4,8] [--sets N] [--idle-ms N] [--reps N] [--warmup N]
//                             [--configs NAME,...] [--sustain-ms N] [--csv FILE]
// --configs: the configurations to run, by the names the table prints without the tile order
// (coop128x128, pp128x128, pp128x128e64x64, coop256x128c1x2, pp128x128ns, ...; default: all).
// --sets: how many operand sets the calls rotate among (1-8; default: enough for 512 MB, at most 8);
// --sets 1 repeats one set, so what fits of it stays in L2 between calls.
// --idle-ms N: before each timed call, wait for the GPU and then N ms more, so that every call
// starts on an idle GPU: at the clock a short burst of work gets, not the lowered clock of
// sustained load (the H200's SM clock moves between about 1425 and 1980 MHz).
// --sustain-ms N: afterwards, each of cuBLAS and the variants alone, back to back for about N ms
// (after one stretch of cuBLAS to bring the GPU to its sustained clock), in order and then in
// reverse order, the two stretches averaged: the time per call, the mean SM clock and power
// (NVML, sampled every 5 ms) and the energy per call (that power times the time): what each kernel
// costs at the clock the GPU grants it under sustained load. Printed as a second table at the
// end, and written beside --csv with "-sustained" before its extension.
// Each variant is timed as the backend runs a repeated call: its launch prepared once per operand
// set (CUTLASS's parameters and TMA descriptors), then enqueued.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
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
#include <thread>
#include <vector>

#include "backends/cutlass/cutlass_kernels.hpp"
#include "backends/cutlass/cutlass_tile_config.hpp"
#include "core/epilogue_parts.hpp"
#include "core/layer_mapping.hpp"
#include "core/names.hpp"
#include "harness/cuda_timing.cuh"
#include "harness/layer_shapes.hpp"
#include "nvml_clock_power.hpp"

namespace {

namespace cb = epigemm::cutlass_backend;
using epigemm_bench::DeviceBuffer;
using epigemm_bench::die;

#define CUBLAS_LAB_OK(expr)                                                    \
  do {                                                                         \
    const cublasStatus_t st_ = (expr);                                         \
    if (st_ != CUBLAS_STATUS_SUCCESS) die(std::string(#expr) + " failed");     \
  } while (0)

// The benchmark's public shapes and the `derive` part of its generalization set
// (bench/harness/layer_shapes.hpp): a rule may be fitted to these; the held-out part checks it.
using epigemm_bench::kDeriveShapes;
using epigemm_bench::kPublicShapes;
using epigemm_bench::Shape;

struct Case {
  epigemm_epilogue_t epilogue;
  epigemm_activation_t activation;
  cb::KernelFamily family;
};
// The forward cases: the cheapest activation and silu without aux, the most expensive one and the
// cheapest with aux. The backward ones: the derivative with and without the bias-gradient reduction,
// and the MLP's own (DACT_BGRAD of the tanh GELU: epigemm.torch.MLP's second layer's dgrad).
const Case kForwardCases[] = {
    {EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_RELU, cb::KernelFamily::forward_activation_aux},
    {EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_ERF, cb::KernelFamily::forward_activation_aux},
    {EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_SILU, cb::KernelFamily::forward_activation_aux},
    {EPIGEMM_EPILOGUE_ACT_AUX_BIAS, EPIGEMM_ACTIVATION_RELU, cb::KernelFamily::forward_activation_aux}};
const Case kBackwardCases[] = {
    {EPIGEMM_EPILOGUE_DACT, EPIGEMM_ACTIVATION_GELU_ERF, cb::KernelFamily::backward_activation_bgrad},
    {EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_SILU, cb::KernelFamily::backward_activation_bgrad},
    {EPIGEMM_EPILOGUE_DACT_BGRAD, EPIGEMM_ACTIVATION_GELU_TANH, cb::KernelFamily::backward_activation_bgrad}};

// Every configuration; --configs picks some of them.
const cb::TileConfig kAllConfigs[] = {cb::TileConfig::cooperative_128x128x64,
                                      cb::TileConfig::pingpong_128x128x64,
                                      cb::TileConfig::pingpong_64x128x64,
                                      cb::TileConfig::cooperative_128x64x64,
                                      cb::TileConfig::pingpong_128x128x64_epilogue_64x64,
                                      cb::TileConfig::cooperative_256x128x64_cluster_1x2,
                                      cb::TileConfig::cooperative_256x128x64_cluster_1x2_without_source,
                                      cb::TileConfig::pingpong_128x128x64_without_source,
                                      cb::TileConfig::pingpong_128x128x64_epilogue_64x64_without_source,
                                      cb::TileConfig::pingpong_64x128x64_without_source,
                                      cb::TileConfig::cooperative_128x64x64_without_source,
                                      cb::TileConfig::cooperative_128x96x64_without_source,
                                      cb::TileConfig::cooperative_128x192x64_without_source};

struct Variant {
  cb::TileConfig tile;
  int swizzle;
  const cb::Kernel* kernel;
};

// "coop128x128", "pp128x128c1x2", "pp128x128e64x64", "coop256x128c1x2ns", "pp128x128e64x64ns": the
// schedule, the tile, the cluster, the epilogue subtile where the configuration names one, and "ns"
// for a kernel that does not read D's old values (no source; the lab's calls have beta = 0).
std::string config_name(cb::TileConfig tile) {
  const cb::TileShape shape = cb::tile_shape_of(tile);
  const std::string name = cb::tile_config_name(tile);
  std::string text = (name.rfind("cooperative", 0) == 0 ? "coop" : "pp") + std::to_string(shape.m) + "x" +
                     std::to_string(shape.n);
  if (shape.cluster_m * shape.cluster_n > 1) {
    text += "c" + std::to_string(shape.cluster_m) + "x" + std::to_string(shape.cluster_n);
  }
  const size_t subtile = name.find("epilogue ");
  if (subtile != std::string::npos) {
    const size_t begin = subtile + std::string("epilogue ").size();
    text += "e" + name.substr(begin, name.find(' ', begin) - begin);
  }
  if (name.find("without source") != std::string::npos) text += "ns";
  return text;
}
// "coop128x128 s4": the configuration and the tile order's swizzle.
std::string variant_name(cb::TileConfig tile, int swizzle) { return config_name(tile) + " s" + std::to_string(swizzle); }

const cb::Kernel* kernel_for_case(const Case& c, cb::TileConfig tile) {
  const cb::OperandLayout layout =
      c.family == cb::KernelFamily::backward_activation_bgrad ? cb::OperandLayout::nn : cb::OperandLayout::tn;
  return cb::find_kernel(c.family, tile, EPIGEMM_DTYPE_BF16, layout, c.activation);
}

// One set of operands of a pass, the layer's row-major tensors as a framework holds them:
//   fprop: w = W [out, in], input = X [tokens, in], output = Y [tokens, out], aux = pre_act, vec = bias [out]
//   dgrad: w = W [out, in], input = dY [tokens, out], output = dX [tokens, in], aux = pre_act, vec = bias_grad [in]
struct Operands {
  std::unique_ptr<DeviceBuffer> w, input, output, aux, vec;
};

// The features of the pass's input and output (fprop: in -> out; dgrad: out -> in).
int64_t input_features(const Shape& s, bool forward) { return forward ? s.in : s.out; }
int64_t output_features(const Shape& s, bool forward) { return forward ? s.out : s.in; }

// The call the layer API would make for the case: the library's one layer -> GEMM mapping
// (core/layer_mapping.hpp) on the operand set, then the case's epilogue, with the backend named.
epigemm::GemmCall call_of(const Shape& s, bool forward, const Case& c, const Operands& o, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream) {
  auto tensor = [](void* p, int64_t rows, int64_t cols) {
    return epigemm_tensor_t{p, EPIGEMM_DTYPE_BF16, rows, cols, cols, EPIGEMM_MEMORY_DEVICE};
  };
  const int64_t out_features = output_features(s, forward);
  const epigemm_tensor_t w = tensor(o.w->ptr, s.out, s.in);
  const epigemm_tensor_t input = tensor(o.input->ptr, s.tokens, input_features(s, forward));
  const epigemm_tensor_t output = tensor(o.output->ptr, s.tokens, out_features);
  const epigemm_tensor_t pre_act = tensor(o.aux->ptr, s.tokens, out_features);
  const epigemm_vector_t vec{o.vec->ptr, EPIGEMM_DTYPE_BF16, out_features, EPIGEMM_MEMORY_DEVICE};
  const epigemm::EpilogueParts parts = epigemm::epilogue_parts(c.epilogue, c.activation);
  epigemm::LayerTensors tensors;
  tensors.w = &w;
  (forward ? tensors.x : tensors.dy) = &input;
  (forward ? tensors.y : tensors.dx) = &output;
  if (parts.uses_aux()) tensors.pre_act = &pre_act;
  if (parts.reads_bias()) tensors.bias = &vec;
  if (parts.writes_bias_grad()) tensors.bias_grad = &vec;
  epigemm::GemmCall call;
  const epigemm::Status mapped =
      epigemm::map_layer_to_gemm(forward ? epigemm::LayerPass::fprop : epigemm::LayerPass::dgrad, tensors, &call);
  if (!mapped.ok()) die(mapped.message());
  call.epilogue = c.epilogue;
  call.activation = c.activation;
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
  if (which == "public" || which == "both") shapes.assign(std::begin(kPublicShapes), std::end(kPublicShapes));
  if (which == "derive" || which == "both") shapes.insert(shapes.end(), std::begin(kDeriveShapes), std::end(kDeriveShapes));
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
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it is measured, also into a file
  std::string which_shapes = "both", which_cases = "all", csv_path;
  std::vector<int> swizzles = {1, 4, 8};
  std::vector<cb::TileConfig> configs(std::begin(kAllConfigs), std::end(kAllConfigs));
  int sets_asked = 0;  // 0: enough operand sets for >= 512 MB (at most 8)
  int idle_ms = 0;
  int sustain_ms = 0;
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
    else if (arg == "--swizzles") {
      swizzles.clear();
      std::stringstream list(value());
      std::string item;
      while (std::getline(list, item, ',')) {
        const int swizzle = std::atoi(item.c_str());
        if (swizzle != 1 && swizzle != 2 && swizzle != 4 && swizzle != 8) die("--swizzles: expected 1, 2, 4 or 8 each");
        swizzles.push_back(swizzle);
      }
    }
    else if (arg == "--configs") {
      configs.clear();
      std::stringstream list(value());
      std::string item;
      while (std::getline(list, item, ',')) {
        const auto* found = std::find_if(std::begin(kAllConfigs), std::end(kAllConfigs),
                                         [&](cb::TileConfig t) { return config_name(t) == item; });
        if (found == std::end(kAllConfigs)) die("--configs: no configuration named \"" + item + "\"");
        configs.push_back(*found);
      }
    }
    else if (arg == "--idle-ms") idle_ms = std::max(0, std::atoi(value().c_str()));
    else if (arg == "--sustain-ms") sustain_ms = std::max(0, std::atoi(value().c_str()));
    else if (arg == "--sets") sets_asked = std::max(1, std::min(8, std::atoi(value().c_str())));
    else if (arg == "--reps") timing.reps = std::max(1, std::atoi(value().c_str()));
    else if (arg == "--warmup") timing.warmup = std::max(0, std::atoi(value().c_str()));
    else if (arg == "--csv") csv_path = value();
    else if (arg == "--help" || arg == "-h") {
      std::printf("epigemm_cutlass_tiles_lab [--shapes public|derive|both|T,I,O;...] [--cases fwd|bwd|all]\n"
                  "                          [--swizzles 1,4,8] [--sets N] [--idle-ms N] [--reps N] [--warmup N]\n"
                  "                          [--configs NAME,...] [--sustain-ms N] [--csv FILE]\n");
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

  std::printf("device: %s (%d SMs); bf16; median of %d after %d warm-up calls; operand sets: %s; %s; each variant's time over cuBLAS's plain GEMM (variant: configuration, s<tile-order swizzle>)\n",
              prop.name, prop.multiProcessorCount, timing.reps, timing.warmup,
              sets_asked > 0 ? std::to_string(sets_asked).c_str() : ">= 512 MB",
              idle_ms > 0 ? ("each call after " + std::to_string(idle_ms) + " ms of an idle GPU").c_str()
                          : "calls back to back");
  std::printf("| shape (tok,in,out) | pass | epilogue | tiles | cuBLAS ms |");
  for (cb::TileConfig t : configs) {
    for (int swizzle : swizzles) std::printf(" %s |", variant_name(t, swizzle).c_str());
  }
  std::printf(" fastest | rule |\n|---|---|---|---:|---:|");
  for (size_t i = 0; i < configs.size() * swizzles.size(); ++i) std::printf("---:|");
  std::printf("---|---|\n");
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "tokens,in,out,pass,epilogue,activation,tiles,cublas_ms,variant,ms,ratio,scaled_difference,rule\n";
  }
  // --sustain-ms: NVML, and the second table's rows (printed at the end) and CSV.
  epigemm_lab::NvmlClockPower nvml(device_id);
  if (sustain_ms > 0 && !nvml.available()) die("--sustain-ms: NVML is not available: " + nvml.why_not());
  std::vector<std::string> sustained_rows;
  std::ofstream sustained_csv;
  if (sustain_ms > 0 && !csv_path.empty()) {
    const size_t dot = csv_path.rfind('.');
    const std::string path = dot == std::string::npos ? csv_path + "-sustained"
                                                      : csv_path.substr(0, dot) + "-sustained" + csv_path.substr(dot);
    sustained_csv.open(path);
    sustained_csv << "tokens,in,out,pass,epilogue,activation,tiles,variant,calls,ms_per_call,ratio,sm_mhz,watts,"
                     "mj_per_call,energy_ratio\n";
  }

  for (const Shape& s : parse_shapes(which_shapes)) {
    // The backend declines rows that are not a multiple of 16 bytes (8 bf16 elements: 3001,1022,4094
    // and the 50257-word vocabulary layers); auto runs those calls elsewhere, so there is nothing
    // to compare here.
    if (s.in % 8 != 0 || s.out % 8 != 0) {
      std::printf("| %lld,%lld,%lld | - | skipped: rows not a multiple of 16 bytes (the backend declines them) |\n",
                  static_cast<long long>(s.tokens), static_cast<long long>(s.in), static_cast<long long>(s.out));
      continue;
    }
    for (bool forward : {true, false}) {
      std::vector<Case> pass_cases;
      for (const Case& c : cases) {
        if ((c.family != cb::KernelFamily::backward_activation_bgrad) == forward) pass_cases.push_back(c);
      }
      if (pass_cases.empty()) continue;
      // Elements of each tensor of an operand set (bf16).
      const int64_t w_count = s.out * s.in, input_count = s.tokens * input_features(s, forward);
      const int64_t output_count = s.tokens * output_features(s, forward), vec_count = output_features(s, forward);
      const size_t set_bytes = size_t(2) * size_t(w_count + input_count + 2 * output_count + vec_count);
      const int sets = sets_asked > 0 ? sets_asked
                                      : int(std::min<size_t>(8, std::max<size_t>(1, (size_t(512) << 20) / set_bytes + 1)));
      std::vector<Operands> ops(static_cast<size_t>(sets));
      for (int i = 0; i < sets; ++i) {
        Operands& o = ops[size_t(i)];
        o.w = std::make_unique<DeviceBuffer>(size_t(2 * w_count));
        o.input = std::make_unique<DeviceBuffer>(size_t(2 * input_count));
        o.output = std::make_unique<DeviceBuffer>(size_t(2 * output_count));
        o.aux = std::make_unique<DeviceBuffer>(size_t(2 * output_count));
        o.vec = std::make_unique<DeviceBuffer>(size_t(2 * vec_count));
        epigemm_bench::fill_uniform(o.w->ptr, false, w_count, 10 + uint64_t(i), 1.0f);
        epigemm_bench::fill_uniform(o.input->ptr, false, input_count, 20 + uint64_t(i), 1.0f);
        epigemm_bench::fill_uniform(o.aux->ptr, false, output_count, 30 + uint64_t(i), 2.0f);
        epigemm_bench::fill_uniform(o.vec->ptr, false, vec_count, 40 + uint64_t(i), 1.0f);
      }
      // The fills run on the legacy default stream, which a non-blocking stream does not wait for.
      EPIGEMM_BENCH_CUDA_OK(cudaDeviceSynchronize());
      // The plain GEMM of the pass, in the GEMM terms of the library's mapping (DEFAULT's call of
      // each operand set, made before the timing).
      std::vector<epigemm::GemmCall> plain_calls;
      for (const Operands& o : ops) {
        plain_calls.push_back(call_of(s, forward, {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_ACTIVATION_IDENTITY,
                                                   cb::KernelFamily::linear_combination_bias},
                                      o, nullptr, 0, stream));
      }
      auto cublas_call = [&](int rep) {
        const epigemm::GemmCall& g = plain_calls[size_t(rep % sets)];
        const float alpha = 1.0f, beta = 0.0f;
        auto op = [](epigemm_op_t t) { return t == EPIGEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N; };
        CUBLAS_LAB_OK(cublasGemmEx(blas, op(g.transa), op(g.transb), int(g.gemm_m), int(g.gemm_n), int(g.gemm_k),
                                   &alpha, g.a.data, CUDA_R_16BF, int(g.a.ld), g.b.data, CUDA_R_16BF, int(g.b.ld),
                                   &beta, g.d.data, CUDA_R_16BF, int(g.d.ld), CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
      };
      const epigemm::GemmCall pass_call = call_of(s, forward, pass_cases[0], ops[0], nullptr, 0, stream);
      const int64_t tiles = ((pass_call.gemm_m + 127) / 128) * ((pass_call.gemm_n + 127) / 128);
      for (const Case& c : pass_cases) {
        std::vector<Variant> variants;
        for (cb::TileConfig t : configs) {
          if (const cb::Kernel* k = kernel_for_case(c, t)) {
            for (int swizzle : swizzles) variants.push_back({t, swizzle, k});
          }
        }
        if (variants.empty()) die(std::string("no kernel for ") + epigemm_epilogue_name(c.epilogue));
        size_t workspace_bytes = 0;
        {
          const epigemm::GemmCall probe = call_of(s, forward, c, ops[0], nullptr, 0, stream);
          for (const Variant& v : variants) {
            const epigemm::Status can = v.kernel->check_can_implement(probe, device, cb::TileOrder{v.swizzle});
            if (!can.ok()) die(can.message());
            workspace_bytes = std::max(workspace_bytes, v.kernel->workspace_bytes(probe, device, cb::TileOrder{v.swizzle}));
          }
        }
        DeviceBuffer workspace(std::max<size_t>(workspace_bytes, 16));
        // One prepared launch per variant and operand set, as the backend keeps them for repeated calls.
        std::vector<std::vector<std::unique_ptr<cb::PreparedLaunch>>> prepared(variants.size());
        for (size_t which = 0; which < variants.size(); ++which) {
          for (int set = 0; set < sets; ++set) {
            const epigemm::GemmCall call =
                call_of(s, forward, c, ops[size_t(set)], workspace.ptr, workspace_bytes, stream);
            std::unique_ptr<cb::PreparedLaunch> launch;
            const epigemm::Status st =
                variants[which].kernel->prepare(call, device, cb::TileOrder{variants[which].swizzle}, &launch);
            if (!st.ok()) die(st.message());
            prepared[which].push_back(std::move(launch));
          }
        }
        auto run = [&](size_t which, int rep) {
          const epigemm::Status st = prepared[which][size_t(rep % sets)]->launch(stream);
          if (!st.ok()) die(st.message());
        };
        // Agreement on set 0: D and the bias gradient of every variant against the first.
        std::vector<double> difference(variants.size(), 0.0);
        std::vector<uint16_t> first_d, first_vec;
        const bool sums = c.epilogue == EPIGEMM_EPILOGUE_DACT_BGRAD;
        for (size_t i = 0; i < variants.size(); ++i) {
          // Twice: the second launch repeats the prepared one (with a stream-K scheduler's reset of
          // its workspace), and must give the same bits.
          std::vector<uint16_t> d, vec;
          for (int repeat = 0; repeat < 2; ++repeat) {
            run(i, 0);
            EPIGEMM_BENCH_CUDA_OK(cudaStreamSynchronize(stream));
            std::vector<uint16_t> again = download(ops[0].output->ptr, output_count);
            std::vector<uint16_t> again_vec = download(ops[0].vec->ptr, vec_count);
            if (repeat == 1 && (again != d || (sums && again_vec != vec))) {
              die(std::string(variants[i].kernel->name) + " (" + variant_name(variants[i].tile, variants[i].swizzle) +
                  ") gave other bits when launched again");
            }
            d = std::move(again);
            vec = std::move(again_vec);
          }
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
        std::function<void()> before_each = nullptr;
        if (idle_ms > 0) {
          before_each = [&] {
            EPIGEMM_BENCH_CUDA_OK(cudaStreamSynchronize(stream));
            std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
          };
        }
        const std::vector<double> ms = epigemm_bench::interleaved_median_ms(timing, stream, fns, before_each);
        size_t best = 0;
        for (size_t i = 1; i < variants.size(); ++i) {
          if (ms[i + 1] < ms[best + 1]) best = i;
        }
        const epigemm::GemmCall probe = call_of(s, forward, c, ops[0], nullptr, 0, stream);
        const std::string rule =
            variant_name(cb::tile_config_for(c.family, probe, device),
                         cb::tile_order_for(probe, device, cb::tile_config_for(c.family, probe, device)).swizzle);
        const std::string label = epigemm::epilogue_label(c.epilogue, c.activation);
        std::printf("| %lld,%lld,%lld | %s | %s | %lld | %.4f |", (long long)s.tokens, (long long)s.in,
                    (long long)s.out, forward ? "fprop" : "dgrad", label.c_str(), (long long)tiles, ms[0]);
        size_t k = 0;
        for (cb::TileConfig t : configs) {
          for (int swizzle : swizzles) {
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
        if (sustain_ms > 0) {
          // Each function alone for about sustain_ms, in order and then in reverse (the GPU's clock
          // and temperature drift over the run), after a stretch of cuBLAS that brings the GPU to
          // its sustained clock; the two stretches of each averaged.
          struct Stretch {
            int calls = 0;
            double ms = 0, mhz = 0, watts = 0, mj = 0;
          };
          auto stretch = [&](size_t f) {
            const int calls = std::max(1, int(double(sustain_ms) / std::max(ms[f], 1e-3)));
            EPIGEMM_BENCH_CUDA_OK(cudaStreamSynchronize(stream));
            cudaEvent_t begin = nullptr, end = nullptr;
            EPIGEMM_BENCH_CUDA_OK(cudaEventCreate(&begin));
            EPIGEMM_BENCH_CUDA_OK(cudaEventCreate(&end));
            epigemm_lab::ClockPowerSampler sampler(nvml, std::chrono::milliseconds(5));
            EPIGEMM_BENCH_CUDA_OK(cudaEventRecord(begin, stream));
            for (int i = 0; i < calls; ++i) fns[f](i);
            EPIGEMM_BENCH_CUDA_OK(cudaEventRecord(end, stream));
            EPIGEMM_BENCH_CUDA_OK(cudaStreamSynchronize(stream));
            sampler.stop();
            float elapsed = 0;
            EPIGEMM_BENCH_CUDA_OK(cudaEventElapsedTime(&elapsed, begin, end));
            cudaEventDestroy(begin);
            cudaEventDestroy(end);
            const double ms_per_call = double(elapsed) / calls;
            return Stretch{calls, ms_per_call, sampler.mean_clock_mhz(), sampler.mean_power_w(),
                           sampler.mean_power_w() * ms_per_call};
          };
          stretch(0);  // to the sustained clock
          std::vector<Stretch> sums(fns.size());
          std::vector<size_t> order(fns.size());
          for (size_t f = 0; f < fns.size(); ++f) order[f] = f;
          for (int pass = 0; pass < 2; ++pass) {
            for (size_t f : order) {
              const Stretch one = stretch(f);
              sums[f].calls += one.calls;
              sums[f].ms += one.ms / 2;
              sums[f].mhz += one.mhz / 2;
              sums[f].watts += one.watts / 2;
              sums[f].mj += one.mj / 2;
            }
            std::reverse(order.begin(), order.end());
          }
          for (size_t f = 0; f < fns.size(); ++f) {
            const std::string name = f == 0 ? "cuBLAS" : variant_name(variants[f - 1].tile, variants[f - 1].swizzle);
            char row[512];
            std::snprintf(row, sizeof(row), "| %lld,%lld,%lld | %s | %s | %s | %d | %.4f | %.3f | %.0f | %.0f | %.1f | %.3f |",
                          (long long)s.tokens, (long long)s.in, (long long)s.out, forward ? "fprop" : "dgrad",
                          label.c_str(), name.c_str(), sums[f].calls, sums[f].ms, sums[f].ms / sums[0].ms, sums[f].mhz,
                          sums[f].watts, sums[f].mj, sums[f].mj / sums[0].mj);
            sustained_rows.push_back(row);
            if (sustained_csv.is_open()) {
              sustained_csv << s.tokens << ',' << s.in << ',' << s.out << ',' << (forward ? "fprop" : "dgrad") << ','
                            << epigemm_epilogue_name(c.epilogue) << ',' << epigemm_activation_name(c.activation)
                            << ',' << tiles << ',' << name << ',' << sums[f].calls << ',' << sums[f].ms << ','
                            << sums[f].ms / sums[0].ms << ',' << sums[f].mhz << ',' << sums[f].watts << ','
                            << sums[f].mj << ',' << sums[f].mj / sums[0].mj << '\n';
            }
          }
        }
      }
    }
  }
  if (!sustained_rows.empty()) {
    std::printf("\nSustained: each alone, back to back for about %d ms, in order and in reverse (the two averaged); "
                "ratio and energy ratio over cuBLAS's\n",
                sustain_ms);
    std::printf("| shape (tok,in,out) | pass | epilogue | kernel | calls | ms/call | ratio | SM MHz | W | mJ/call | energy ratio |\n"
                "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const std::string& row : sustained_rows) std::printf("%s\n", row.c_str());
  }
  cublasDestroy(blas);
  cudaStreamDestroy(stream);
  return 0;
}
