// epigemm_epilogue_lab: the kernel lab of the cuda backend's tile kernel
// (src/backends/cuda/tile_kernel.cuh), beside the library as llm.c keeps dev/cuda/ beside llmc/.
// The library compiles one launch configuration per op (tile_plan.hpp, kLibraryConfig); this
// program compiles the 13 measured so far as versions 1..13 of the same kernel, validates every
// version against a CPU reference on random data, then times them on the epilogue tensors of the
// three largest public shapes and prints the achieved bandwidth and its fraction of the
// device-to-device copy bandwidth, per (op, activation, configuration).
//
//   versions   1..13: kLabConfigs below (threads_x, batch, min blocks, prefetch), run as named:
//              the op's library waves, no size rules, the finish kernel as a dependent launch
//   variants   "library": the library's configuration, waves, size rules and dependent launch
//              (what launch_tile_kernel runs); "waves<w>": the library's configuration with w
//              waves and no size rules; "serial": the library's, with the tile kernel and the
//              row-sum finish kernel launched in plain stream order instead of each as the
//              programmatic dependent of the kernel before it
//   switches   --version N runs only version N (1..13) or "library"; --waves W, --size-rules 0|1
//              and --dependent-launch 0|1 then apply to it
//
// Tensors, as the library meets them (GEMM coordinates, docs/conventions.md): fprop D is
// out x tokens (act, act_bias, act_aux, act_aux_bias, bias_broadcast), dgrad D is in x tokens
// (dact, dact_bgrad), wgrad's B is out x tokens (row_sums: BGRADB's sums). acc is fp32 (the
// backend's fp32 intermediate), D, aux and bias bf16, the row sums fp32; row_sums reads bf16.
// Buffers rotate among sets totalling >= 512 MB (the H200's L2 is 60 MB); every time is the
// median of --reps calls between CUDA events after --warmup calls, all variants of a tensor
// interleaved. Runs on sm_90a (griddepcontrol); fails with CUDA's message elsewhere.
//
//   epigemm_epilogue_lab [--version all|library|1..13] [--waves 1|2|4|8] [--size-rules 0|1]
//                        [--dependent-launch 0|1] [--ops all|act,act_bias,...]
//                        [--activations all|identity,gelu_tanh,gelu_erf,relu,silu]
//                        [--shapes largest|T,I,O;...] [--reps N] [--warmup N] [--csv FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/tile_kernel.cuh"
#include "core/epilogue_math.hpp"
#include "core/names.hpp"
#include "core/numeric.hpp"
#include "harness/cuda_timing.cuh"

namespace {

using epigemm::cuda::TileArgs;
using epigemm::cuda::TileConfig;
using epigemm::cuda::TileOp;
using epigemm::cuda::TileOpParts;
using epigemm::cuda::TilePlan;
namespace ec = epigemm::cuda;

using epigemm_bench::DeviceBuffer;
using epigemm_bench::die;
using epigemm_bench::Timing;
#define CUDA_OK(expr) EPIGEMM_BENCH_CUDA_OK(expr)

// ---- the versions ----------------------------------------------------------------------------

// The launch configurations measured on the H200 (bench/results/h200-2026-11-30-*-sweep.csv):
// the first six from 2026-11-29; then 2026-11-30 candidates for the 32M-element tensors: more
// registers per thread (no cap at 64), 64-thread rows (512-row tiles: a row-sum kernel writes a
// quarter of the partials of a 2048-row tile for the same number of blocks), the
// software-pipelined loop.
constexpr int kVersionCount = 13;
constexpr TileConfig kLabConfigs[kVersionCount] = {
    {128, 2, 4, false}, {256, 2, 4, false}, {128, 4, 3, false}, {128, 4, 4, false},
    {256, 4, 4, false}, {128, 8, 4, false}, {256, 2, 3, false}, {256, 4, 3, false},
    {64, 2, 4, false},  {64, 4, 4, false},  {256, 2, 3, true},  {64, 2, 3, true},
    {128, 2, 4, true}};

constexpr TileOp kOps[] = {TileOp::act,  TileOp::act_bias,   TileOp::act_aux,  TileOp::act_aux_bias,
                           TileOp::dact, TileOp::dact_bgrad, TileOp::row_sums, TileOp::bias_broadcast};

const char* op_name(TileOp op) {
  switch (op) {
    case TileOp::act: return "act";
    case TileOp::act_bias: return "act_bias";
    case TileOp::act_aux: return "act_aux";
    case TileOp::act_aux_bias: return "act_aux_bias";
    case TileOp::dact: return "dact";
    case TileOp::dact_bgrad: return "dact_bgrad";
    case TileOp::row_sums: return "row_sums";
    case TileOp::bias_broadcast: return "bias_broadcast";
  }
  return "?";
}

// acc is fp32 except for row_sums (an operand, bf16); aux is bf16.
template <TileOp kOp>
constexpr bool kWideAcc = kOp != TileOp::row_sums;

// Version v (1-based) of the tile kernel for (op, activation).
template <TileOp kOp, class Act, int kIndex>
const void* version_kernel() {
  constexpr TileConfig c = kLabConfigs[kIndex];
  return reinterpret_cast<const void*>(&ec::tile::tile_kernel<kOp, Act, true, c.threads_x, c.batch, c.min_blocks,
                                                              c.prefetch, kWideAcc<kOp>, false>);
}

template <TileOp kOp, class Act, int... kIndices>
const void* version_kernel_of(int version, std::integer_sequence<int, kIndices...>) {
  const void* kernels[] = {version_kernel<kOp, Act, kIndices>()...};
  return kernels[version - 1];
}

template <TileOp kOp>
const void* kernel_for_op(epigemm_activation_t activation, int version) {
  constexpr auto indices = std::make_integer_sequence<int, kVersionCount>{};
  if constexpr (ec::tile_op_parts(kOp).has_activation) {
    return epigemm::visit_activation(activation, [&](auto act) -> const void* {
      using Act = decltype(act);
      if constexpr (kOp == TileOp::act && std::is_same_v<Act, epigemm::Identity>) {
        return nullptr;  // D = acc: no kernel
      } else {
        return version_kernel_of<kOp, Act>(version, indices);
      }
    });
  } else {
    return version_kernel_of<kOp, epigemm::Identity>(version, indices);
  }
}

const void* kernel_for(TileOp op, epigemm_activation_t activation, int version) {
  switch (op) {
    case TileOp::act: return kernel_for_op<TileOp::act>(activation, version);
    case TileOp::act_bias: return kernel_for_op<TileOp::act_bias>(activation, version);
    case TileOp::act_aux: return kernel_for_op<TileOp::act_aux>(activation, version);
    case TileOp::act_aux_bias: return kernel_for_op<TileOp::act_aux_bias>(activation, version);
    case TileOp::dact: return kernel_for_op<TileOp::dact>(activation, version);
    case TileOp::dact_bgrad: return kernel_for_op<TileOp::dact_bgrad>(activation, version);
    case TileOp::row_sums: return kernel_for_op<TileOp::row_sums>(activation, version);
    case TileOp::bias_broadcast: return kernel_for_op<TileOp::bias_broadcast>(activation, version);
  }
  return nullptr;
}

// The version whose configuration is `config`, or 0.
int version_of(const TileConfig& config) {
  for (int v = 1; v <= kVersionCount; ++v) {
    if (kLabConfigs[v - 1] == config) return v;
  }
  return 0;
}

// One way to launch: a version and the knobs the library fixes.
struct Variant {
  std::string name;
  int version = 1;
  int waves = 1;
  bool size_rules = false;
  bool dependent_launch = true;
};

struct Device {
  int sm_count = 0;
};

// A launch of a variant on a tensor: the version after the size rules, its occupancy, the grid.
struct Launch {
  const void* kernel = nullptr;
  int threads_x = 0;
  TilePlan plan;
};

Launch plan_launch(const Device& device, TileOp op, epigemm_activation_t activation, const Variant& v,
                   int64_t rows, int64_t cols) {
  int version = v.version;
  int waves = v.waves;
  if (v.size_rules) {
    const int narrower = version_of(ec::config_for_rows(kLabConfigs[version - 1], rows));
    if (narrower != 0) version = narrower;  // a narrower configuration outside the 13 stays as named
    waves = ec::waves_for_size(waves, rows, cols);
  }
  Launch launch;
  launch.kernel = kernel_for(op, activation, version);
  launch.threads_x = kLabConfigs[version - 1].threads_x;
  int blocks_per_sm = 0;
  CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, launch.kernel, ec::kBlockThreads, 0));
  launch.plan = ec::plan_tiles(rows, cols, launch.threads_x, ec::target_blocks(device.sm_count, blocks_per_sm, waves));
  return launch;
}

void run_launch(const Launch& launch, TileOp op, const Variant& v, const TileArgs& args, float* sums,
                cudaStream_t stream) {
  const epigemm::Status status = ec::tile::launch_tile(launch.kernel, launch.threads_x, launch.plan,
                                                       ec::tile_op_parts(op).sums_rows, args, sums,
                                                       EPIGEMM_DTYPE_F32, v.dependent_launch, stream);
  if (!status.ok()) die(status.message());
  CUDA_OK(cudaGetLastError());
}

// ---- the CPU reference ---------------------------------------------------------------------

uint16_t bf16_bits(float f) { return epigemm::float_to_bf16(f).bits; }  // nearest even
float bf16_value(uint16_t bits) { return epigemm::bf16_to_float(epigemm::BFloat16{bits}); }

// Host data of one tensor (column-major rows x cols, ld = rows) and what the op must produce.
struct HostTensor {
  int64_t rows = 0, cols = 0;
  std::vector<float> acc;            // fp32 acc
  std::vector<uint16_t> acc16, aux_in, bias;  // bf16: row_sums' operand, dact's aux, the bias
  std::vector<float> want_d, want_aux;        // before rounding to bf16
  std::vector<double> want_sums, sum_scale;   // per row: the sum and the sum of magnitudes
};

uint64_t g_state = 0x9e3779b97f4a7c15ull;
float uniform(float lo, float hi) {  // xorshift64*, fixed seed
  g_state ^= g_state >> 12;
  g_state ^= g_state << 25;
  g_state ^= g_state >> 27;
  const double u = double((g_state * 0x2545f4914f6cdd1dull) >> 11) / double(uint64_t(1) << 53);
  return float(lo + (hi - lo) * u);
}

HostTensor random_tensor(int64_t rows, int64_t cols) {
  HostTensor t;
  t.rows = rows;
  t.cols = cols;
  const size_t count = size_t(rows * cols);
  t.acc.resize(count);
  t.acc16.resize(count);
  t.aux_in.resize(count);
  t.bias.resize(size_t(rows));
  for (size_t e = 0; e < count; ++e) {
    t.acc[e] = uniform(-5.0f, 5.0f);
    t.acc16[e] = bf16_bits(uniform(-5.0f, 5.0f));
    t.aux_in[e] = bf16_bits(uniform(-5.0f, 5.0f));
  }
  for (auto& b : t.bias) b = bf16_bits(uniform(-1.0f, 1.0f));
  return t;
}

// The op's outputs on the host, with the activation functor in float (the device's type).
template <class Act>
void reference(TileOp op, HostTensor& t) {
  const TileOpParts p = ec::tile_op_parts(op);
  const size_t count = size_t(t.rows * t.cols);
  t.want_d.assign(count, 0.0f);
  t.want_aux.assign(count, 0.0f);
  t.want_sums.assign(size_t(t.rows), 0.0);
  t.sum_scale.assign(size_t(t.rows), 0.0);
  for (int64_t j = 0; j < t.cols; ++j) {
    for (int64_t i = 0; i < t.rows; ++i) {
      const size_t e = size_t(i + j * t.rows);
      const float acc = op == TileOp::row_sums ? bf16_value(t.acc16[e]) : t.acc[e];
      float out;
      if (p.reads_aux) {
        out = acc * Act::derivative(bf16_value(t.aux_in[e]));
      } else {
        float z = p.reads_acc ? acc : 0.0f;
        if (p.adds_bias) z = p.reads_acc ? z + bf16_value(t.bias[size_t(i)]) : bf16_value(t.bias[size_t(i)]);
        t.want_aux[e] = z;
        out = Act::forward(z);
      }
      t.want_d[e] = out;
      t.want_sums[size_t(i)] += out;
      t.sum_scale[size_t(i)] += std::fabs(out);
    }
  }
}

// ---- device buffers of one tensor ------------------------------------------------------------

struct DeviceTensor {
  std::unique_ptr<DeviceBuffer> acc, acc16, aux, d, bias;
  DeviceTensor(int64_t rows, int64_t cols) {
    const size_t count = size_t(rows * cols);
    acc = std::make_unique<DeviceBuffer>(count * 4);
    acc16 = std::make_unique<DeviceBuffer>(count * 2);
    aux = std::make_unique<DeviceBuffer>(count * 2);
    d = std::make_unique<DeviceBuffer>(count * 2);
    bias = std::make_unique<DeviceBuffer>(size_t(rows) * 2);
  }
  TileArgs args(TileOp op, int64_t rows, int64_t cols) const {
    TileArgs a;
    a.rows = rows;
    a.cols = cols;
    a.acc = op == TileOp::row_sums ? acc16->ptr : acc->ptr;
    a.acc_dtype = op == TileOp::row_sums ? EPIGEMM_DTYPE_BF16 : EPIGEMM_DTYPE_F32;
    a.ld_acc = rows;
    a.d = d->ptr;
    a.d_dtype = EPIGEMM_DTYPE_BF16;
    a.ld_d = rows;
    a.aux = aux->ptr;
    a.aux_dtype = EPIGEMM_DTYPE_BF16;
    a.ld_aux = rows;
    a.bias = bias->ptr;
    a.bias_dtype = EPIGEMM_DTYPE_BF16;
    return a;
  }
};

// ---- validation ------------------------------------------------------------------------------

// Runs the variant on the host tensor's data and compares with the reference; returns the number
// of bad elements (D, aux, row sums).
int64_t validate(const Device& device, TileOp op, epigemm_activation_t activation, const Variant& v,
                 const HostTensor& t, cudaStream_t stream) {
  const TileOpParts p = ec::tile_op_parts(op);
  const int64_t rows = t.rows, cols = t.cols, count = rows * cols;
  DeviceTensor dev(rows, cols);
  CUDA_OK(cudaMemcpy(dev.acc->ptr, t.acc.data(), size_t(count) * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dev.acc16->ptr, t.acc16.data(), size_t(count) * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dev.aux->ptr, t.aux_in.data(), size_t(count) * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dev.bias->ptr, t.bias.data(), size_t(rows) * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dev.d->ptr, 0xff, size_t(count) * 2));  // NaN poison
  const Launch launch = plan_launch(device, op, activation, v, rows, cols);
  DeviceBuffer partials(size_t(launch.plan.column_chunks * rows) * 4), sums(size_t(rows) * 4);
  CUDA_OK(cudaMemset(sums.ptr, 0xff, size_t(rows) * 4));
  TileArgs args = dev.args(op, rows, cols);
  args.row_partials = static_cast<float*>(partials.ptr);
  run_launch(launch, op, v, args, static_cast<float*>(sums.ptr), stream);
  CUDA_OK(cudaStreamSynchronize(stream));
  int64_t bad = 0;
  if (p.writes_d || p.writes_aux) {
    std::vector<uint16_t> d(static_cast<size_t>(count)), aux(static_cast<size_t>(count));
    CUDA_OK(cudaMemcpy(d.data(), dev.d->ptr, size_t(count) * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(aux.data(), dev.aux->ptr, size_t(count) * 2, cudaMemcpyDeviceToHost));
    for (int64_t e = 0; e < count; ++e) {
      // The device divides with the hardware reciprocal (a few fp32 ulp): within one bf16 ulp of
      // the host after rounding; aux is exact.
      const float got = bf16_value(d[size_t(e)]), want = t.want_d[size_t(e)];
      if (p.writes_d && !(std::fabs(got - want) <= std::fabs(want) * 0x1p-7f + 1e-30f)) ++bad;
      if (p.writes_aux && aux[size_t(e)] != bf16_bits(t.want_aux[size_t(e)])) ++bad;
      if (!p.writes_aux && aux[size_t(e)] != t.aux_in[size_t(e)]) ++bad;
    }
  }
  if (p.sums_rows) {
    std::vector<float> got(static_cast<size_t>(rows));
    CUDA_OK(cudaMemcpy(got.data(), sums.ptr, size_t(rows) * 4, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < rows; ++i) {
      const double err = std::fabs(double(got[size_t(i)]) - t.want_sums[size_t(i)]);
      if (!(err <= 1e-5 * t.sum_scale[size_t(i)] + 1e-30)) ++bad;
    }
  }
  return bad;
}

// ---- timing (harness/cuda_timing.cuh) -------------------------------------------------------

// Bytes a launch moves: acc (4 bytes, 2 for row_sums), aux and D (2 bytes each) once.
double bytes_moved(TileOp op, int64_t rows, int64_t cols) {
  const TileOpParts p = ec::tile_op_parts(op);
  double per_element = 0.0;
  if (p.reads_acc) per_element += op == TileOp::row_sums ? 2.0 : 4.0;
  if (p.reads_aux || p.writes_aux) per_element += 2.0;
  if (p.writes_d) per_element += 2.0;
  return double(rows) * double(cols) * per_element;
}

struct Shape {
  int64_t tokens, in, out;
};

// The tensor an op runs on for a shape (see the header).
std::pair<int64_t, int64_t> tensor_of(TileOp op, const Shape& s) {
  switch (op) {
    case TileOp::dact:
    case TileOp::dact_bgrad: return {s.in, s.tokens};
    case TileOp::act:
    case TileOp::act_bias:
    case TileOp::act_aux:
    case TileOp::act_aux_bias:
    case TileOp::row_sums:
    case TileOp::bias_broadcast: return {s.out, s.tokens};
  }
  return {0, 0};
}

std::vector<std::string> split(const std::string& list, char sep) {
  std::vector<std::string> items;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, sep)) items.push_back(item);
  return items;
}

std::string fmt(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  epigemm_bench::set_program_name("epigemm_epilogue_lab");
  std::string version_arg = "all", ops_arg = "all", activations_arg = "all", shapes_arg = "largest", csv_path;
  int waves_arg = 0, size_rules_arg = -1, dependent_arg = -1;
  Timing timing;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + arg);
      return argv[++i];
    };
    if (arg == "--version") version_arg = value();
    else if (arg == "--waves") waves_arg = std::atoi(value().c_str());
    else if (arg == "--size-rules") size_rules_arg = std::atoi(value().c_str());
    else if (arg == "--dependent-launch") dependent_arg = std::atoi(value().c_str());
    else if (arg == "--ops") ops_arg = value();
    else if (arg == "--activations") activations_arg = value();
    else if (arg == "--shapes") shapes_arg = value();
    else if (arg == "--reps") timing.reps = std::max(1, std::atoi(value().c_str()));
    else if (arg == "--warmup") timing.warmup = std::max(0, std::atoi(value().c_str()));
    else if (arg == "--csv") csv_path = value();
    else {
      die("usage: epigemm_epilogue_lab [--version all|library|1..13] [--waves 1|2|4|8] [--size-rules 0|1] "
          "[--dependent-launch 0|1] [--ops all|act,act_bias,act_aux,act_aux_bias,dact,dact_bgrad,row_sums,"
          "bias_broadcast] [--activations all|identity,gelu_tanh,gelu_erf,relu,silu] [--shapes largest|T,I,O;...] "
          "[--reps N] [--warmup N] [--csv FILE]");
    }
  }
  if (waves_arg != 0 && (waves_arg < 1 || waves_arg > ec::kMaxWaves)) {
    die("--waves is " + std::to_string(waves_arg) + "; expected 1 to " + std::to_string(ec::kMaxWaves));
  }

  std::vector<TileOp> ops;
  for (TileOp op : kOps) {
    if (ops_arg == "all" || ("," + ops_arg + ",").find("," + std::string(op_name(op)) + ",") != std::string::npos) {
      ops.push_back(op);
    }
  }
  if (ops.empty()) die("--ops: no known op in '" + ops_arg + "'");
  std::vector<epigemm_activation_t> activations;
#define EPIGEMM_LAB_ACTIVATION(value, functor, name)                                                        \
  if (activations_arg == "all" || ("," + activations_arg + ",").find(std::string(",") + name + ",") != std::string::npos) \
    activations.push_back(value);
  EPIGEMM_FOR_EACH_ACTIVATION(EPIGEMM_LAB_ACTIVATION)
#undef EPIGEMM_LAB_ACTIVATION
  if (activations.empty()) die("--activations: no known activation in '" + activations_arg + "'");
  std::vector<Shape> shapes = {{8192, 4096, 16384}, {8192, 16384, 4096}, {16384, 8192, 28672}};
  if (shapes_arg != "largest") {
    shapes.clear();
    for (const std::string& item : split(shapes_arg, ';')) {
      long long t = 0, in = 0, out = 0;
      if (std::sscanf(item.c_str(), "%lld,%lld,%lld", &t, &in, &out) != 3 || t <= 0 || in <= 0 || out <= 0) {
        die("--shapes: '" + item + "' is not tokens,in,out with positive sizes");
      }
      shapes.push_back({t, in, out});
    }
  }

  Device device;
  int id = 0;
  CUDA_OK(cudaGetDevice(&id));
  CUDA_OK(cudaDeviceGetAttribute(&device.sm_count, cudaDevAttrMultiProcessorCount, id));
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, id));
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));

  const double copy_tbps = epigemm_bench::copy_tbps(timing, stream);
  std::printf("device: %s (%d SMs, L2 %d MB); device-to-device copy %.3f TB/s (read + write); median of %d after %d\n",
              prop.name, device.sm_count, prop.l2CacheSize >> 20, copy_tbps, timing.reps, timing.warmup);

  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    if (!csv) die("--csv: cannot write " + csv_path);
    csv << "op,activation,variant,threads_x,batch,min_blocks,prefetch,waves,size_rules,dependent_launch,rows,cols,ms,"
           "tbps,fraction_of_copy\n";
  }
  std::printf("%-14s %-10s %-9s %-24s %-14s %9s %8s %8s\n", "op", "activation", "variant", "configuration",
              "tensor", "ms", "TB/s", "of copy");

  // The small tensors every variant is validated on: partial row tiles and column chunks, and
  // 2048 rows (a 256-thread tile's full height).
  const std::pair<int64_t, int64_t> validation_shapes[] = {{1000, 1234}, {2048, 777}};
  int64_t failures = 0;
  for (TileOp op : ops) {
    const TileOpParts parts = ec::tile_op_parts(op);
    const TileConfig library = ec::kLibraryConfig[int(op)];
    const int library_version = version_of(library);
    if (library_version == 0) die(std::string("the library's configuration of ") + op_name(op) + " is none of the 13 versions");
    const int library_waves = ec::kLibraryWaves[int(op)];
    // The variants of this op (see the header).
    std::vector<Variant> variants;
    if (version_arg == "all") {
      for (int v = 1; v <= kVersionCount; ++v) {
        variants.push_back({"v" + std::to_string(v), v, library_waves, false, true});
      }
      variants.push_back({"library", library_version, library_waves, true, true});
      for (int w : {1, 2, 4, 8}) {
        if (w != library_waves) variants.push_back({"waves" + std::to_string(w), library_version, w, false, true});
      }
      if (parts.sums_rows) variants.push_back({"serial", library_version, library_waves, true, false});
    } else {
      const bool lib = version_arg == "library";
      const int v = lib ? library_version : std::atoi(version_arg.c_str());
      if (v < 1 || v > kVersionCount) die("--version is '" + version_arg + "'; expected all, library or 1 to 13");
      variants.push_back({lib ? "library" : "v" + std::to_string(v), v, waves_arg ? waves_arg : library_waves,
                          size_rules_arg >= 0 ? size_rules_arg == 1 : lib, dependent_arg >= 0 ? dependent_arg == 1 : true});
    }
    for (epigemm_activation_t activation : activations) {
      if (!parts.has_activation && activation != EPIGEMM_ACTIVATION_IDENTITY) continue;
      if (op == TileOp::act && activation == EPIGEMM_ACTIVATION_IDENTITY) continue;  // D = acc
      const char* aname = epigemm::activation_name(activation);

      // Validate every variant before any is timed.
      bool valid = true;
      for (const auto& vs : validation_shapes) {
        HostTensor t = random_tensor(vs.first, vs.second);
        epigemm::visit_activation(activation, [&](auto act) { reference<decltype(act)>(op, t); });
        for (const Variant& v : variants) {
          const int64_t bad = validate(device, op, activation, v, t, stream);
          if (bad != 0) {
            std::printf("VALIDATION FAILED: %s %s %s on %lld x %lld: %lld bad elements\n", op_name(op), aname,
                        v.name.c_str(), (long long)vs.first, (long long)vs.second, (long long)bad);
            valid = false;
            ++failures;
          }
        }
      }
      if (!valid) continue;

      for (const Shape& s : shapes) {
        const std::pair<int64_t, int64_t> tensor_size = tensor_of(op, s);
        const int64_t rows = tensor_size.first, cols = tensor_size.second;
        const size_t set_bytes = size_t(bytes_moved(op, rows, cols)) + size_t(rows) * 2;
        const int sets = int(std::min<size_t>(8, std::max<size_t>(1, (size_t(512) << 20) / set_bytes + 1)));
        std::vector<std::unique_ptr<DeviceTensor>> tensors;
        for (int r = 0; r < sets; ++r) {
          tensors.push_back(std::make_unique<DeviceTensor>(rows, cols));
          const DeviceTensor& t = *tensors.back();
          epigemm_bench::fill_uniform(t.acc->ptr, true, rows * cols, 10 + uint64_t(r), 4.0f);
          epigemm_bench::fill_uniform(t.acc16->ptr, false, rows * cols, 20 + uint64_t(r), 4.0f);
          epigemm_bench::fill_uniform(t.aux->ptr, false, rows * cols, 30 + uint64_t(r), 4.0f);
          epigemm_bench::fill_uniform(t.bias->ptr, false, rows, 40 + uint64_t(r), 1.0f);
        }
        std::vector<Launch> launches;
        int64_t most_chunks = 1;
        for (const Variant& v : variants) {
          launches.push_back(plan_launch(device, op, activation, v, rows, cols));
          most_chunks = std::max(most_chunks, launches.back().plan.column_chunks);
        }
        DeviceBuffer partials(size_t(most_chunks * rows) * 4), sums(size_t(rows) * 4);
        std::vector<std::function<void(int)>> fns;
        for (size_t k = 0; k < variants.size(); ++k) {
          fns.push_back([&, k](int rep) {
            TileArgs args = tensors[size_t(rep % sets)]->args(op, rows, cols);
            args.row_partials = static_cast<float*>(partials.ptr);
            run_launch(launches[k], op, variants[k], args, static_cast<float*>(sums.ptr), stream);
          });
        }
        const std::vector<double> ms = epigemm_bench::interleaved_median_ms(timing, stream, fns);
        const double bytes = bytes_moved(op, rows, cols);
        for (size_t k = 0; k < variants.size(); ++k) {
          const Variant& v = variants[k];
          const TileConfig c = kLabConfigs[v.version - 1];
          const double tbps = bytes / (ms[k] * 1e-3) / 1e12;
          char config[64];
          std::snprintf(config, sizeof config, "%d,%d,%d%s w%d%s%s", c.threads_x, c.batch, c.min_blocks,
                        c.prefetch ? ",pf" : "", v.waves, v.size_rules ? " rules" : "", v.dependent_launch ? "" : " serial");
          char tensor[32];
          std::snprintf(tensor, sizeof tensor, "%lldx%lld", (long long)rows, (long long)cols);
          std::printf("%-14s %-10s %-9s %-24s %-14s %9.4f %8.3f %8.3f\n", op_name(op), aname, v.name.c_str(), config,
                      tensor, ms[k], tbps, tbps / copy_tbps);
          if (csv) {
            csv << op_name(op) << "," << aname << "," << v.name << "," << c.threads_x << "," << c.batch << ","
                << c.min_blocks << "," << int(c.prefetch) << "," << v.waves << "," << int(v.size_rules) << ","
                << int(v.dependent_launch) << "," << rows << "," << cols << "," << fmt(ms[k], 5) << "," << fmt(tbps)
                << "," << fmt(tbps / copy_tbps) << "\n";
          }
        }
        std::fflush(stdout);
      }
    }
  }
  cudaStreamDestroy(stream);
  if (failures > 0) {
    std::fprintf(stderr, "epigemm_epilogue_lab: %lld variant(s) failed validation\n", (long long)failures);
    return 1;
  }
  return 0;
}
