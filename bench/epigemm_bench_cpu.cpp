// epigemm_bench_cpu: the cpu backend against its math floor and against oneDNN's fused matmul,
// fp32, on the three CPU benchmark layer shapes and a (1024, 1024, 4096) layer
// (docs/dev/cpu_backend.md explains the paths and the numbers).
//
// For each layer shape (tokens, in, out) and pass (fprop, dgrad, wgrad; GEMM coordinates from
// the library's one mapping, map_layer_to_gemm), in one run:
//   openblas-sgemm, onednn-sgemm, onednn-matmul   the plain GEMM (floor candidates: the math
//                                                 floor of the pass is the fastest of them)
//   cpu                 the cpu backend through the public layer-level C API, every epilogue of
//                       the pass, with each activation of --activations (default gelu_tanh)
//   cpu[panel=W]        the backend with panels of W columns (GEMM then epilogue per panel)
//                       instead of one panel, for the pass's full epilogue (with the first
//                       activation of --activations other than the identity, as every
//                       variant): what panels buy
//                       (512 always, more widths with --panels)
//   cpu[openblas]       the backend on OpenBLAS instead of oneDNN, full epilogue
//   cpu[matmul]         the backend forced to run oneDNN's matmul primitive (bias added inside,
//                       D not read) for alpha = 1, beta = 0 GEMMs, on every shape
//   cpu[sgemm]          the backend forced to run dnnl_sgemm (beta = 0) for them (the
//                       default `cpu` picks one of the two per shape: onednn_overwrite_for_shape)
//   cpu[avx2]           the backend with its AVX2 kernels instead of the AVX-512 ones (the
//                       widest build is the default where the CPU has AVX-512)
//   cpu[acc in aux]     ACT_AUX(_BIAS): the GEMM writes acc into the fp32 aux and the pass
//                       writes D from it (the default: acc in D, the pass rewrites D and streams
//                       aux with non-temporal stores)
//   cpu[aux cached]     ACT_AUX(_BIAS): as the default, aux stored through the cache
//   onednn-matmul-fused oneDNN matmul with a bias and/or activation post-op (fprop only; it has
//                       no aux output, so it does less work than ACT_AUX(_BIAS))
//   sgemm+plain-loop    the fastest sgemm then a plain loop for bias + GELU + aux (fprop)
// --engines measures only what that per-shape choice is made from, on DEFAULT (no epilogue):
// onednn-sgemm, onednn-matmul, cpu[sgemm], cpu[matmul] and cpu, written to
// <out>/cpu-engines-<date>.{csv,md}.
// Each path's outputs are checked on sampled elements against a double recomputation before it
// is timed; inputs are random, rotated among sets that together exceed --rotation-mb.
// Writes <out>/cpu-<date>.csv and .md and prints the table.
#include <cblas.h>
#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/epilogue_kernels.hpp"
#include "backends/cpu/gemm_engine.hpp"
#include "core/epilogue_parts.hpp"
#include "core/gemm_call.hpp"
#include "core/layer_mapping.hpp"
#include "epigemm/epigemm.h"
#include "harness/bench_harness.hpp"

extern "C" char* openblas_get_corename(void);

namespace {

using epigemm::GemmCall;
using epigemm_bench::BenchCase;

struct Layer {
  int64_t tokens, in, out;
  std::string name() const {
    return std::to_string(tokens) + "," + std::to_string(in) + "," + std::to_string(out);
  }
};

struct Options {
  std::vector<Layer> layers = {{2048, 1024, 4096}, {512, 4096, 4096}, {1024, 768, 3072},
                               {1024, 1024, 4096}};
  epigemm_bench::TimingOptions timing;
  std::string out = ".";  // as epigemm_bench_gpu: a run from the source tree leaves bench/results as it is
  double rotation_mb = 1024;
  bool variants = true;
  std::vector<int64_t> panel_widths;  // extra cpu[panel=W] variants
  std::string passes = "fprop,dgrad,wgrad";
  bool engines = false;  // only the GEMM paths the engine choice compares (DEFAULT)
  std::vector<epigemm_activation_t> activations = {EPIGEMM_ACTIVATION_GELU_TANH};
};

const char kUsage[] =
    "usage: epigemm_bench_cpu [--shapes t,i,o;t,i,o...] [--reps N] [--warmup N]\n"
    "                         [--out DIR] [--rotation-mb MB] [--passes fprop,dgrad,wgrad]\n"
    "                         [--no-variants] [--panels W,W...] [--engines]\n"
    "                         [--activations gelu_tanh,gelu_erf,relu,silu,identity|all]\n";

// --help: what the program measures and every option, on stdout.
[[noreturn]] void help() {
  std::printf(
      "epigemm_bench_cpu: the cpu backend against the plain fp32 GEMM (OpenBLAS, oneDNN) and\n"
      "oneDNN's fused matmul, per layer shape, pass (fprop, dgrad, wgrad) and epilogue.\n"
      "Each path is checked against a double recomputation before it is timed; writes\n"
      "<out>/cpu-<date>.csv (every timed call) and .md (medians) and prints the table.\n\n"
      "%s\n"
      "  --shapes t,i,o;...   layer shapes tokens,in_features,out_features\n"
      "                       (default 2048,1024,4096;512,4096,4096;1024,768,3072;1024,1024,4096)\n"
      "  --reps N             timed calls per path (default 7)\n"
      "  --warmup N           untimed calls per path first (default 2)\n"
      "  --out DIR            where the results go (default: the current directory; created if missing)\n"
      "  --rotation-mb MB     input sets rotated call by call, together at least MB (default 1024)\n"
      "  --passes LIST        fprop, dgrad and/or wgrad (default all three)\n"
      "  --no-variants        only the floors, cpu and oneDNN fused (not cpu[panel=..] etc.)\n"
      "  --panels W,W...      extra cpu[panel=W] variants\n"
      "  --engines            only the GEMM paths the oneDNN call choice is made from (DEFAULT)\n"
      "  --activations LIST   the activations of the cpu path's epilogues, or all (default\n"
      "                       gelu_tanh); oneDNN fused runs with each as a post-op too\n"
      "  --help               this text\n\n"
      "docs/cpu_backend.md says how to read the results; scripts/cpu_verdict.py summarizes a csv.\n",
      kUsage);
  std::exit(0);
}

// A usage mistake: one line on stderr saying what, exit code 2 (as the epigemm program does).
[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr, "epigemm_bench_cpu: %s (see epigemm_bench_cpu --help)\n", message);
  std::exit(2);
}

// An integer in [min, max] written in full ("12x" is not 12): the option's value or a usage error.
int64_t integer(const std::string& option, const std::string& text, int64_t min, int64_t max) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < min || value > max) {
    usage((option + ": expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
           "], got '" + text + "'").c_str());
  }
  return value;
}

Options parse(int argc, char** argv) {
  Options o;
  constexpr int64_t kLargestSize = int64_t(1) << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
      return argv[++i];
    };
    if (arg == "--shapes") {
      o.layers.clear();
      std::stringstream all(value());
      std::string one;
      while (std::getline(all, one, ';')) {
        std::stringstream fields(one);
        std::string tokens, in, out, extra;
        if (!std::getline(fields, tokens, ',') || !std::getline(fields, in, ',') ||
            !std::getline(fields, out, ',') || std::getline(fields, extra, ',')) {
          usage(("--shapes: expected tokens,in,out, got '" + one + "'").c_str());
        }
        o.layers.push_back(Layer{integer("--shapes", tokens, 1, kLargestSize),
                                 integer("--shapes", in, 1, kLargestSize),
                                 integer("--shapes", out, 1, kLargestSize)});
      }
      if (o.layers.empty()) usage("--shapes: expected at least one tokens,in,out");
    } else if (arg == "--reps") {
      o.timing.repetitions = int(integer(arg, value(), 1, 100000));
    } else if (arg == "--warmup") {
      o.timing.warmup = int(integer(arg, value(), 0, 100000));
    } else if (arg == "--out") {
      o.out = value();
    } else if (arg == "--rotation-mb") {
      o.rotation_mb = double(integer(arg, value(), 0, 1 << 20));
    } else if (arg == "--passes") {
      o.passes = value();
      std::stringstream all(o.passes);
      std::string one;
      while (std::getline(all, one, ',')) {
        if (one != "fprop" && one != "dgrad" && one != "wgrad") {
          usage(("--passes: expected fprop, dgrad or wgrad, got '" + one + "'").c_str());
        }
      }
    } else if (arg == "--panels") {
      std::stringstream all(value());
      std::string one;
      while (std::getline(all, one, ',')) o.panel_widths.push_back(integer(arg, one, 1, kLargestSize));
    } else if (arg == "--engines") {
      o.engines = true;
    } else if (arg == "--activations") {
      o.activations.clear();
      std::stringstream all(value());
      std::string one;
      while (std::getline(all, one, ',')) {
        bool found = false;
        for (int a = 0; a <= int(EPIGEMM_ACTIVATION_SILU); ++a) {
          if (one == "all" || one == epigemm_activation_name(epigemm_activation_t(a))) {
            o.activations.push_back(epigemm_activation_t(a));
            found = true;
          }
        }
        if (!found) usage(("unknown activation " + one).c_str());
      }
    } else if (arg == "--no-variants") {
      o.variants = false;
    } else if (arg == "--help" || arg == "-h") {
      help();
    } else {
      usage(("unknown option " + arg).c_str());
    }
  }
  if (o.timing.repetitions < 1) usage("--reps must be >= 1");
  // Made now, not after the run: a run of ten minutes must not end in "could NOT write".
  const std::string out_error = epigemm_bench::make_output_directory(o.out);
  if (!out_error.empty()) usage(out_error.c_str());
  return o;
}

// Uniform in [-scale, scale) from a hash of (seed, index): random, reproducible, never all zero.
void fill_uniform(std::vector<float>& v, uint64_t seed, float scale) {
  for (size_t i = 0; i < v.size(); ++i) {
    uint64_t h = seed * 0x9E3779B97F4A7C15ull + i;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    v[i] = (float(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * scale;
  }
}

epigemm_tensor_t tensor(std::vector<float>& v, int64_t rows, int64_t cols) {
  return epigemm_tensor_t{v.data(), EPIGEMM_DTYPE_F32, rows, cols, cols, EPIGEMM_MEMORY_HOST};
}
epigemm_vector_t vec(std::vector<float>& v) {
  return epigemm_vector_t{v.data(), EPIGEMM_DTYPE_F32, int64_t(v.size()), EPIGEMM_MEMORY_HOST};
}

// One input set of a pass: every tensor any path of the pass reads or writes.
struct PassSet {
  std::vector<float> x, w, dy, y, dx, dw, pre_out, pre_in, bias, bias_grad_in, bias_grad_out;
};

PassSet make_set(const Layer& l, const std::string& pass, uint64_t seed) {
  PassSet s;
  const float input_scale = 1.0f;
  if (pass == "fprop" || pass == "wgrad") {
    s.x.resize(size_t(l.tokens * l.in));
    fill_uniform(s.x, seed + 1, input_scale);
  }
  if (pass == "fprop" || pass == "dgrad") {
    s.w.resize(size_t(l.out * l.in));
    // Scaled so that X W^T lands in GELU's interesting range.
    fill_uniform(s.w, seed + 2, float(2.0 / std::sqrt(double(l.in))));
  }
  if (pass == "dgrad" || pass == "wgrad") {
    s.dy.resize(size_t(l.tokens * l.out));
    fill_uniform(s.dy, seed + 3, input_scale);
  }
  if (pass == "fprop") {
    s.y.resize(size_t(l.tokens * l.out));
    s.pre_out.resize(size_t(l.tokens * l.out));
    s.bias.resize(size_t(l.out));
    fill_uniform(s.bias, seed + 4, 0.5f);
    fill_uniform(s.y, seed + 8, 1.0f);  // touched once, so page faults are not timed
    fill_uniform(s.pre_out, seed + 9, 1.0f);
  }
  if (pass == "dgrad") {
    s.dx.resize(size_t(l.tokens * l.in));
    s.pre_in.resize(size_t(l.tokens * l.in));
    fill_uniform(s.pre_in, seed + 5, 3.0f);
    s.bias_grad_in.resize(size_t(l.in));
    fill_uniform(s.dx, seed + 10, 1.0f);
  }
  if (pass == "wgrad") {
    s.dw.resize(size_t(l.out * l.in));
    s.bias_grad_out.resize(size_t(l.out));
    fill_uniform(s.dw, seed + 11, 1.0f);
  }
  return s;
}

double set_bytes(const PassSet& s) {
  size_t n = 0;
  for (const auto* v : {&s.x, &s.w, &s.dy, &s.y, &s.dx, &s.dw, &s.pre_out, &s.pre_in, &s.bias})
    n += v->size();
  return double(n) * 4;
}

// The pass's full epilogue and its GemmCall through the library's one layer mapping.
GemmCall map_pass(const std::string& pass, PassSet& s, const Layer& l, epigemm_epilogue_t e,
                  epigemm_activation_t act, std::vector<epigemm_tensor_t>& keep,
                  std::vector<epigemm_vector_t>& keep_vectors) {
  const epigemm::EpilogueParts parts = epigemm::epilogue_parts(e, act);
  keep.clear();
  keep_vectors.clear();
  keep.reserve(8);
  keep_vectors.reserve(2);
  epigemm::LayerTensors t;
  epigemm::LayerPass lp = epigemm::LayerPass::fprop;
  if (pass == "fprop") {
    keep.push_back(tensor(s.x, l.tokens, l.in));
    keep.push_back(tensor(s.w, l.out, l.in));
    keep.push_back(tensor(s.y, l.tokens, l.out));
    t.x = &keep[0];
    t.w = &keep[1];
    t.y = &keep[2];
    if (parts.writes_aux()) {
      keep.push_back(tensor(s.pre_out, l.tokens, l.out));
      t.pre_act = &keep.back();
    }
    if (parts.reads_bias()) {
      keep_vectors.push_back(vec(s.bias));
      t.bias = &keep_vectors.back();
    }
  } else if (pass == "dgrad") {
    lp = epigemm::LayerPass::dgrad;
    keep.push_back(tensor(s.dy, l.tokens, l.out));
    keep.push_back(tensor(s.w, l.out, l.in));
    keep.push_back(tensor(s.dx, l.tokens, l.in));
    t.dy = &keep[0];
    t.w = &keep[1];
    t.dx = &keep[2];
    if (parts.reads_aux()) {
      keep.push_back(tensor(s.pre_in, l.tokens, l.in));
      t.pre_act = &keep.back();
    }
    if (parts.bias_grad == epigemm::BiasGradPart::rows_of_gradient) {
      keep_vectors.push_back(vec(s.bias_grad_in));
      t.bias_grad = &keep_vectors.back();
    }
  } else {
    lp = epigemm::LayerPass::wgrad;
    keep.push_back(tensor(s.x, l.tokens, l.in));
    keep.push_back(tensor(s.dy, l.tokens, l.out));
    keep.push_back(tensor(s.dw, l.out, l.in));
    t.x = &keep[0];
    t.dy = &keep[1];
    t.dw = &keep[2];
    if (e == EPIGEMM_EPILOGUE_BGRADB) {
      keep_vectors.push_back(vec(s.bias_grad_out));
      t.bias_grad = &keep_vectors.back();
    }
  }
  GemmCall call;
  const epigemm::Status status = epigemm::map_layer_to_gemm(lp, t, &call);
  if (!status.ok()) {
    std::fprintf(stderr, "map_layer_to_gemm: %s\n", status.message().c_str());
    std::exit(1);
  }
  call.epilogue = e;
  call.activation = act;
  return call;
}

// The layer-level C API call of a pass with epilogue e (the `cpu` path).
epigemm_status_t call_layer_api(epigemm_context_t ctx, const std::string& pass, PassSet& s,
                                const Layer& l, epigemm_epilogue_t e, epigemm_activation_t act,
                                void* ws, size_t ws_bytes) {
  const epigemm::EpilogueParts parts = epigemm::epilogue_parts(e, act);
  epigemm_tensor_t X = tensor(s.x, l.tokens, l.in), W = tensor(s.w, l.out, l.in);
  epigemm_tensor_t Y = tensor(s.y, l.tokens, l.out), P = tensor(s.pre_out, l.tokens, l.out);
  epigemm_tensor_t DY = tensor(s.dy, l.tokens, l.out), DX = tensor(s.dx, l.tokens, l.in);
  epigemm_tensor_t PI = tensor(s.pre_in, l.tokens, l.in), DW = tensor(s.dw, l.out, l.in);
  epigemm_vector_t B = vec(s.bias), BGI = vec(s.bias_grad_in), BGO = vec(s.bias_grad_out);
  if (pass == "fprop") {
    return epigemm_linear_fprop_act(ctx, &X, &W, parts.reads_bias() ? &B : nullptr,
                                    parts.activation, parts.writes_aux() ? &P : nullptr, &Y, ws,
                                    ws_bytes, nullptr);
  }
  if (pass == "dgrad") {
    if (!parts.reads_aux()) return epigemm_linear_dgrad(ctx, &DY, &W, nullptr, nullptr, &DX, ws, ws_bytes, nullptr);
    return epigemm_linear_dgrad_act(
        ctx, &DY, &W, parts.activation, &PI,
        parts.bias_grad == epigemm::BiasGradPart::rows_of_gradient ? &BGI : nullptr, &DX, ws,
        ws_bytes, nullptr);
  }
  return epigemm_linear_wgrad(ctx, &X, &DY, &DW, 0,
                              e == EPIGEMM_EPILOGUE_BGRADB ? &BGO : nullptr, ws, ws_bytes, nullptr);
}

// ---- oneDNN matmul in GEMM coordinates --------------------------------------------------------
// Column-major D (m x n) = op(A) op(B) is row-major D^T (n x m) = op(B)^T op(A)^T: oneDNN's src
// is op(B)^T (n x k), its weights op(A)^T (k x m), its dst D^T; strides follow from each
// operand's transpose flag and leading dimension; the bias (one per i) is per dst column.
struct OnednnMatmul {
  dnnl::matmul primitive;
  dnnl::memory::desc src, weights, bias, dst;
  bool has_bias = false;
};

// The oneDNN post-op of an activation (its eltwise algorithms: swish with alpha 1 is silu).
dnnl::algorithm onednn_eltwise(epigemm_activation_t act) {
  switch (act) {
    case EPIGEMM_ACTIVATION_GELU_ERF: return dnnl::algorithm::eltwise_gelu_erf;
    case EPIGEMM_ACTIVATION_RELU: return dnnl::algorithm::eltwise_relu;
    case EPIGEMM_ACTIVATION_SILU: return dnnl::algorithm::eltwise_swish;
    case EPIGEMM_ACTIVATION_GELU_TANH:
    case EPIGEMM_ACTIVATION_IDENTITY: break;
  }
  return dnnl::algorithm::eltwise_gelu_tanh;
}

// act = identity: no post-op.
OnednnMatmul make_matmul(dnnl::engine& eng, const GemmCall& c, bool bias, epigemm_activation_t act) {
  using dims = dnnl::memory::dims;
  using dt = dnnl::memory::data_type;
  const auto n = c.gemm_n, m = c.gemm_m, k = c.gemm_k;
  OnednnMatmul mm;
  mm.src = dnnl::memory::desc(dims{n, k}, dt::f32,
                              c.transb == EPIGEMM_OP_N ? dims{c.b.ld, 1} : dims{1, c.b.ld});
  mm.weights = dnnl::memory::desc(dims{k, m}, dt::f32,
                                  c.transa == EPIGEMM_OP_N ? dims{c.a.ld, 1} : dims{1, c.a.ld});
  mm.dst = dnnl::memory::desc(dims{n, m}, dt::f32, dims{c.d.ld, 1});
  mm.has_bias = bias;
  if (bias) mm.bias = dnnl::memory::desc(dims{1, m}, dt::f32, dims{m, 1});
  dnnl::primitive_attr attr;
  if (act != EPIGEMM_ACTIVATION_IDENTITY) {
    dnnl::post_ops ops;
    // alpha: relu's negative slope (0); swish's sigmoid scale (1: silu).
    ops.append_eltwise(1.0f, onednn_eltwise(act), act == EPIGEMM_ACTIVATION_SILU ? 1.0f : 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::desc desc = bias ? dnnl::matmul::desc(mm.src, mm.weights, mm.bias, mm.dst)
                                       : dnnl::matmul::desc(mm.src, mm.weights, mm.dst);
  mm.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, eng));
  return mm;
}

void run_matmul(OnednnMatmul& mm, dnnl::engine& eng, dnnl::stream& strm, const GemmCall& c) {
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(mm.src, eng, c.b.data)},
      {DNNL_ARG_WEIGHTS, dnnl::memory(mm.weights, eng, c.a.data)},
      {DNNL_ARG_DST, dnnl::memory(mm.dst, eng, c.d.data)}};
  if (mm.has_bias) args.insert({DNNL_ARG_BIAS, dnnl::memory(mm.bias, eng, c.bias.data)});
  mm.primitive.execute(strm, args);
  strm.wait();
}

// ---- checks: sampled outputs against a double recomputation ------------------------------------

float at(const epigemm::Matrix& x, int64_t r, int64_t c) {
  return static_cast<const float*>(x.data)[r + c * x.ld];
}
double acc_at(const GemmCall& c, int64_t i, int64_t j) {
  double sum = 0;
  for (int64_t p = 0; p < c.gemm_k; ++p) {
    const double a = c.transa == EPIGEMM_OP_N ? at(c.a, i, p) : at(c.a, p, i);
    const double b = c.transb == EPIGEMM_OP_N ? at(c.b, p, j) : at(c.b, j, p);
    sum += a * b;
  }
  return sum;
}
// Written from docs/conventions.md, independently of src/core/epilogue_math.hpp.
double activation(epigemm_activation_t act, double x) {
  switch (act) {
    case EPIGEMM_ACTIVATION_IDENTITY: return x;
    case EPIGEMM_ACTIVATION_GELU_TANH:
      return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case EPIGEMM_ACTIVATION_GELU_ERF: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case EPIGEMM_ACTIVATION_RELU: return x > 0 ? x : 0.0;
    case EPIGEMM_ACTIVATION_SILU: return x / (1 + std::exp(-x));
  }
  return x;
}
double activation_grad(epigemm_activation_t act, double x) {
  switch (act) {
    case EPIGEMM_ACTIVATION_IDENTITY: return 1.0;
    case EPIGEMM_ACTIVATION_GELU_TANH: {
      const double t = std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
    }
    case EPIGEMM_ACTIVATION_GELU_ERF:
      return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    case EPIGEMM_ACTIVATION_RELU: return x > 0 ? 1.0 : 0.0;
    case EPIGEMM_ACTIVATION_SILU: {
      const double s = 1 / (1 + std::exp(-x));
      return s * (1 + x * (1 - s));
    }
  }
  return 1.0;
}

// "" when the sampled outputs of epilogue e with activation act (as a path that writes
// `writes_aux` computes it) agree with the recomputation to 1e-4 relative (fp32 sums of up to
// 4096 terms).
std::string check(const GemmCall& c, epigemm_epilogue_t e, epigemm_activation_t act, bool writes_aux) {
  const epigemm::EpilogueParts parts = epigemm::epilogue_parts(e, act);
  auto close = [](double got, double want) {
    return std::fabs(got - want) <= 1e-4 * (std::fabs(want) + 1.0);
  };
  std::ostringstream bad;
  for (int s = 0; s < 64; ++s) {
    const int64_t i = (s * 7919) % c.gemm_m, j = (s * 104729) % c.gemm_n;
    const double acc = acc_at(c, i, j);
    double want = acc;
    const double bias = c.has_bias ? static_cast<const float*>(c.bias.data)[i] : 0.0;
    if (parts.backward()) {
      want = acc * activation_grad(parts.activation, at(c.aux, i, j));
    } else {
      const double z = parts.reads_bias() ? acc + bias : acc;
      want = activation(parts.activation, z);
      if (writes_aux && parts.writes_aux() && !close(at(c.aux, i, j), z)) bad << "aux(" << i << "," << j << ") ";
    }
    if (!close(at(c.d, i, j), want)) bad << "D(" << i << "," << j << ")=" << at(c.d, i, j) << " want " << want << " ";
  }
  const float* bg = static_cast<const float*>(c.bias_grad.data);
  if (parts.bias_grad == epigemm::BiasGradPart::columns_of_b) {
    for (int64_t j = 0; j < c.gemm_n; j += std::max<int64_t>(1, c.gemm_n / 16)) {
      double sum = 0;
      for (int64_t p = 0; p < c.gemm_k; ++p) sum += c.transb == EPIGEMM_OP_N ? at(c.b, p, j) : at(c.b, j, p);
      if (!close(bg[j], sum)) bad << "bias_grad[" << j << "] ";
    }
  }
  if (parts.bias_grad == epigemm::BiasGradPart::rows_of_gradient) {
    for (int64_t i : {int64_t(0), c.gemm_m / 2, c.gemm_m - 1}) {
      double sum = 0;
      for (int64_t j = 0; j < c.gemm_n; ++j) {
        sum += acc_at(c, i, j) * activation_grad(parts.activation, at(c.aux, i, j));
      }
      if (std::fabs(bg[i] - sum) > 1e-4 * (std::fabs(sum) + std::sqrt(double(c.gemm_n)))) bad << "bias_grad[" << i << "] ";
    }
  }
  return bad.str().empty() ? "" : "FAILED check: " + bad.str().substr(0, 200);
}

// The plain loop after the GEMM, fprop GELU_AUX_BIAS: z = acc + bias; aux = z; D = gelu(z).
void plain_loop_epilogue(const GemmCall& c) {
  float* d = static_cast<float*>(c.d.data);
  float* aux = static_cast<float*>(c.aux.data);
  const float* bias = static_cast<const float*>(c.bias.data);
  for (int64_t j = 0; j < c.gemm_n; ++j) {
    for (int64_t i = 0; i < c.gemm_m; ++i) {
      const float z = d[i + j * c.d.ld] + bias[i];
      aux[i + j * c.aux.ld] = z;
      d[i + j * c.d.ld] = 0.5f * z * (1.0f + std::tanh(0.7978845608f * (z + 0.044715f * z * z * z)));
    }
  }
}

std::vector<epigemm_epilogue_t> pass_epilogues(const std::string& pass) {
  if (pass == "fprop") {
    return {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BIAS, EPIGEMM_EPILOGUE_GELU_AUX,
            EPIGEMM_EPILOGUE_GELU_AUX_BIAS};
  }
  if (pass == "dgrad") return {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_DGELU, EPIGEMM_EPILOGUE_DGELU_BGRAD};
  return {EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_EPILOGUE_BGRADB};
}

std::string read_first_line(const char* path, const char* prefix = nullptr) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (prefix == nullptr) return line;
    // "model name\t: Intel(R) ..." -> "Intel(R) ..."
    if (line.rfind(prefix, 0) == 0) return line.substr(std::min(line.size(), line.find(':') + 2));
  }
  return "";
}

}  // namespace

// OpenBLAS's threads spin for 2^28 cycles (about 0.1 s) after each call before they sleep, and
// on a machine of few cores that spinning slows whichever path runs next (measured: 10x on a small
// shape). OPENBLAS_THREAD_TIMEOUT=4 (2^4 cycles, OpenBLAS's smallest) makes them sleep at once.
// OpenBLAS reads it when it is loaded, before main: so main sets it and runs the program again,
// unless the caller has set it.
namespace {

constexpr const char* kOpenblasThreadTimeout = "OPENBLAS_THREAD_TIMEOUT";

std::string openblas_thread_timeout_text() {
  const char* value = std::getenv(kOpenblasThreadTimeout);
  return value == nullptr ? std::string("unset") : std::string(value);
}

void run_again_with_openblas_thread_timeout(char** argv) {
  if (std::getenv(kOpenblasThreadTimeout) != nullptr) return;
  setenv(kOpenblasThreadTimeout, "4", 1);
  execv("/proc/self/exe", argv);
  // Only on failure: the benchmark runs on, and its header says the variable is unset.
  unsetenv(kOpenblasThreadTimeout);
  std::fprintf(stderr, "epigemm_bench_cpu: could not run again with %s=4 (%s); OpenBLAS's threads spin after each call\n",
               kOpenblasThreadTimeout, std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  run_again_with_openblas_thread_timeout(argv);
  const Options opt = parse(argc, argv);
  const std::string load_before = read_first_line("/proc/loadavg");
  char date[32], stamp[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));

  epigemm_context_t ctx = nullptr;
  if (epigemm_context_create(&ctx) != EPIGEMM_STATUS_SUCCESS) return 1;
  epigemm_context_set_backend(ctx, EPIGEMM_BACKEND_CPU);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);

  struct Variant {
    std::string name;
    std::unique_ptr<epigemm::Backend> backend;
  };
  std::vector<Variant> variants;
  // A variant: the backend with the default options changed by `set`.
  auto add_variant = [&variants](const std::string& name, auto set) {
    epigemm::CpuBackendOptions options;
    set(options);
    variants.push_back({name, epigemm::create_cpu_backend(options)});
  };
  using Options = epigemm::CpuBackendOptions;
  add_variant("cpu[panel=512]", [](Options& o) { o.panel_columns = 512; });
  add_variant("cpu[openblas]", [](Options& o) { o.engine = epigemm::CpuGemmEngine::openblas; });
  add_variant("cpu[matmul]", [](Options& o) { o.onednn_overwrite = epigemm::OnednnOverwrite::matmul_primitive; });
  add_variant("cpu[sgemm]", [](Options& o) { o.onednn_overwrite = epigemm::OnednnOverwrite::sgemm; });
  add_variant("cpu[avx2]", [](Options& o) { o.kernels = epigemm::CpuKernelBuild::avx2; });
  // The two forward-aux plans the default (streamed_aux) is measured against.
  add_variant("cpu[acc in aux]", [](Options& o) { o.forward_aux = epigemm::ForwardAuxPlan::acc_in_aux; });
  add_variant("cpu[aux cached]", [](Options& o) { o.forward_aux = epigemm::ForwardAuxPlan::cached_aux; });
  if (opt.engines) {
    // Only the two forced choices, on DEFAULT (see the file comment).
    variants.erase(std::remove_if(variants.begin(), variants.end(),
                                  [](const Variant& v) {
                                    return v.name != "cpu[sgemm]" && v.name != "cpu[matmul]";
                                  }),
                   variants.end());
  }
  for (int64_t w : opt.panel_widths) {
    add_variant("cpu[panel=" + std::to_string(w) + "]", [w](Options& o) { o.panel_columns = w; });
  }

  epigemm_bench::ResultTable table;
  epigemm_bench::SteadyClockTimer timer;
  int sets_used = 1;
  // The 1-minute load average at the start of each (shape, pass): a run whose maximum is well
  // above its own thread count shared the machine.
  double load_min = 1e9, load_max = 0;

  for (const Layer& layer : opt.layers) {
    for (const std::string pass : {"fprop", "dgrad", "wgrad"}) {
      if (opt.passes.find(pass) == std::string::npos) continue;
      std::vector<PassSet> sets;
      sets.push_back(make_set(layer, pass, 1000));
      const int n_sets = epigemm_bench::rotation_sets(set_bytes(sets[0]), opt.rotation_mb * 1e6, 16);
      sets_used = std::max(sets_used, n_sets);
      for (int s = 1; s < n_sets; ++s) sets.push_back(make_set(layer, pass, 1000 + 100 * uint64_t(s)));
      const double load = std::atof(read_first_line("/proc/loadavg").c_str());
      load_min = std::min(load_min, load);
      load_max = std::max(load_max, load);
      std::fprintf(stderr, "== %s %s: %d input set(s) of %.0f MB; 1-minute load %.2f\n",
                   layer.name().c_str(), pass.c_str(), n_sets, set_bytes(sets[0]) / 1e6, load);

      const epigemm_epilogue_t full = pass_epilogues(pass).back();
      // The variants run the full epilogue with the first activation asked for other than the
      // identity (the identity alone if that is all).
      epigemm_activation_t variant_activation = opt.activations.front();
      for (const epigemm_activation_t act : opt.activations) {
        if (act != EPIGEMM_ACTIVATION_IDENTITY) {
          variant_activation = act;
          break;
        }
      }
      std::vector<std::vector<epigemm_tensor_t>> keep(n_sets);
      std::vector<std::vector<epigemm_vector_t>> keep_vectors(n_sets);
      std::vector<GemmCall> calls;       // DEFAULT views, for the floors
      std::vector<GemmCall> full_calls;  // the full epilogue's views
      for (int s = 0; s < n_sets; ++s) {
        full_calls.push_back(map_pass(pass, sets[s], layer, full, variant_activation,
                                      keep[s], keep_vectors[s]));
        calls.push_back(full_calls.back());
        calls.back().epilogue = EPIGEMM_EPILOGUE_DEFAULT;
      }
      auto row = [&](const std::string& path, const std::string& epilogue) {
        return BenchCase{layer.name(), pass, epilogue, "f32", path};
      };
      // Every path of the pass is registered (after one checked call), then all are timed
      // together, interleaved (time_interleaved), OpenBLAS's too: main() runs the benchmark
      // with OPENBLAS_THREAD_TIMEOUT set, so that OpenBLAS's threads sleep right after a call
      // instead of spinning into the next path's time.
      struct PathRun {
        BenchCase c;
        bool floor;
        std::function<void(int)> fn;
        std::string note;
      };
      std::vector<PathRun> paths;
      std::vector<std::unique_ptr<OnednnMatmul>> matmuls;  // alive until the pass is timed
      auto add = [&](const BenchCase& bc, bool floor, const std::function<void(int)>& fn,
                     const std::string& note) { paths.push_back(PathRun{bc, floor, fn, note}); };

      // Floors.
      for (const auto engine : {epigemm::CpuGemmEngine::openblas, epigemm::CpuGemmEngine::onednn}) {
        if (opt.engines && engine == epigemm::CpuGemmEngine::openblas) continue;
        auto gemm = [&, engine](int s) {
          const GemmCall& c = calls[size_t(s)];
          const epigemm::Status st = epigemm::cpu_sgemm(
              engine, c.transa, c.transb, c.gemm_m, c.gemm_n, c.gemm_k, 1.0f,
              static_cast<const float*>(c.a.data), c.a.ld, static_cast<const float*>(c.b.data),
              c.b.ld, 0.0f, static_cast<float*>(c.d.data), c.d.ld);
          if (!st.ok()) std::fprintf(stderr, "%s\n", st.message().c_str());
        };
        gemm(0);
        add(row(epigemm::cpu_gemm_engine_name(engine), "DEFAULT"), true, gemm,
            check(calls[0], EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_ACTIVATION_IDENTITY, false));
      }
      {
        matmuls.push_back(std::make_unique<OnednnMatmul>(
            make_matmul(eng, calls[0], false, EPIGEMM_ACTIVATION_IDENTITY)));
        OnednnMatmul* mm = matmuls.back().get();
        auto fn = [&, mm](int s) { run_matmul(*mm, eng, strm, calls[size_t(s)]); };
        fn(0);
        add(row("onednn-matmul", "DEFAULT"), true, fn,
            check(calls[0], EPIGEMM_EPILOGUE_DEFAULT, EPIGEMM_ACTIVATION_IDENTITY, false));
      }

      // The cpu backend through the layer-level C API, every epilogue of the pass.
      size_t ws_bytes = 0;
      epigemm_linear_workspace_size(ctx, layer.tokens, layer.in, layer.out, EPIGEMM_DTYPE_F32,
                                    EPIGEMM_MEMORY_HOST, &ws_bytes);
      std::vector<unsigned char> workspace(ws_bytes + 1);
      for (size_t a = 0; a < opt.activations.size(); ++a) {
        const epigemm_activation_t act = opt.activations[a];
        for (const epigemm_epilogue_t e : pass_epilogues(pass)) {
          if (opt.engines && e != EPIGEMM_EPILOGUE_DEFAULT) continue;
          // Epilogues without an activation do not depend on it: timed once.
          const epigemm::EpilogueParts parts = epigemm::epilogue_parts(e, act);
          const bool has_activation = parts.activation != EPIGEMM_ACTIVATION_IDENTITY || parts.uses_aux();
          if (a > 0 && !has_activation) continue;
          std::vector<epigemm_tensor_t> k0;
          std::vector<epigemm_vector_t> kv0;
          const GemmCall view = map_pass(pass, sets[0], layer, e, act, k0, kv0);
          auto fn = [&, e, act](int s) {
            const epigemm_status_t st = call_layer_api(ctx, pass, sets[size_t(s)], layer, e, act,
                                                       workspace.data(), ws_bytes);
            if (st != EPIGEMM_STATUS_SUCCESS) {
              std::fprintf(stderr, "cpu: %s\n", epigemm_context_last_error(ctx));
              std::exit(1);
            }
          };
          fn(0);
          epigemm_backend_t ran;
          epigemm_context_last_backend(ctx, &ran, nullptr);
          add(row("cpu", epigemm::epilogue_label(e, act)), false, fn,
              ran == EPIGEMM_BACKEND_CPU ? check(view, e, act, true) : "FAILED: backend cpu did not run");
        }
      }

      // Variants of the backend on the full epilogue (on DEFAULT with --engines).
      const epigemm_epilogue_t variant_epilogue = opt.engines ? EPIGEMM_EPILOGUE_DEFAULT : full;
      const std::vector<GemmCall>& variant_calls = opt.engines ? calls : full_calls;
      if (opt.variants) {
        for (Variant& variant : variants) {
          epigemm::Backend* backend = variant.backend.get();
          auto fn = [&, backend](int s) {
            GemmCall c = variant_calls[size_t(s)];
            c.backend = EPIGEMM_BACKEND_CPU;
            const size_t bytes = backend->workspace_bytes(c);
            c.workspace = workspace.data();
            c.workspace_bytes = bytes;
            if (bytes > ws_bytes) std::exit(1);
            const epigemm::Status st = backend->run(c);
            if (!st.ok()) std::fprintf(stderr, "%s\n", st.message().c_str());
          };
          fn(0);
          const epigemm_activation_t act = opt.engines ? EPIGEMM_ACTIVATION_IDENTITY : variant_activation;
          add(row(variant.name, epigemm::epilogue_label(variant_epilogue, act)), false, fn,
              check(variant_calls[0], variant_epilogue, act, true));
        }
      }

      // oneDNN's fused matmul and the plain loop, forward only.
      if (pass == "fprop" && !opt.engines) {
        struct Fused {
          epigemm_epilogue_t e;
          bool bias;
          epigemm_activation_t act;
        };
        std::vector<Fused> fused = {Fused{EPIGEMM_EPILOGUE_BIAS, true, EPIGEMM_ACTIVATION_IDENTITY}};
        for (const epigemm_activation_t act : opt.activations) {
          if (act == EPIGEMM_ACTIVATION_IDENTITY) continue;
          fused.push_back(Fused{EPIGEMM_EPILOGUE_GELU_AUX, false, act});
          fused.push_back(Fused{EPIGEMM_EPILOGUE_GELU_AUX_BIAS, true, act});
        }
        for (const Fused f : fused) {
          matmuls.push_back(std::make_unique<OnednnMatmul>(make_matmul(eng, full_calls[0], f.bias, f.act)));
          OnednnMatmul* mm = matmuls.back().get();
          auto fn = [&, mm](int s) { run_matmul(*mm, eng, strm, full_calls[size_t(s)]); };
          fn(0);
          GemmCall view = full_calls[0];
          view.has_bias = f.bias;
          const bool with_act = f.act != EPIGEMM_ACTIVATION_IDENTITY;
          add(row("onednn-matmul-fused", epigemm::epilogue_label(f.e, f.act)), false, fn,
              std::string(with_act ? "no aux written " : "") + check(view, f.e, f.act, false));
        }
        auto fn = [&](int s) {
          const GemmCall& c = full_calls[size_t(s)];
          const epigemm::Status st = epigemm::cpu_sgemm(
              epigemm::CpuGemmEngine::onednn, c.transa, c.transb, c.gemm_m, c.gemm_n, c.gemm_k,
              1.0f, static_cast<const float*>(c.a.data), c.a.ld,
              static_cast<const float*>(c.b.data), c.b.ld, 0.0f, static_cast<float*>(c.d.data), c.d.ld);
          if (st.ok()) plain_loop_epilogue(c);
        };
        fn(0);
        add(row("sgemm+plain-loop", "GELU_AUX_BIAS"), false, fn,
            check(full_calls[0], EPIGEMM_EPILOGUE_GELU_AUX_BIAS, EPIGEMM_ACTIVATION_GELU_TANH, true));
      }

      std::vector<std::function<void(int)>> fns;
      for (const PathRun& path : paths) fns.push_back(path.fn);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const std::vector<std::vector<double>> seconds =
          epigemm_bench::time_interleaved(timer, opt.timing, n_sets, fns);
      for (size_t i = 0; i < paths.size(); ++i) {
        table.add(paths[i].c, paths[i].floor, seconds[i], paths[i].note);
        std::fprintf(stderr, "   %-28s %-14s %9.3f ms %s\n", paths[i].c.path.c_str(),
                     paths[i].c.epilogue.c_str(), epigemm_bench::median(seconds[i]) * 1e3,
                     paths[i].note.c_str());
      }
    }
  }

  const std::string load_after = read_first_line("/proc/loadavg");
  std::ostringstream header;
  header << "# cpu backend benchmark, " << stamp << "\n\n"
         << "- machine: " << read_first_line("/proc/cpuinfo", "model name") << ", "
         << omp_get_max_threads() << " OpenMP threads; OpenBLAS core: " << openblas_get_corename()
         << "; cpu backend kernels: " << epigemm::select_epilogue_kernels().name << "\n"
         << "- /proc/loadavg before: " << load_before << "; after: " << load_after
         << "; 1-minute load at the start of each (shape, pass): " << load_min << " - " << load_max
         << " (this benchmark's own " << omp_get_max_threads() << " threads add about as much)\n"
         << "- fp32; median of " << opt.timing.repetitions << " timed calls after "
         << opt.timing.warmup << " warm-up calls, the paths of a pass timed interleaved (one call "
            "of each per round, in an order shuffled per round; OpenBLAS's too, with OPENBLAS_THREAD_TIMEOUT="
         << openblas_thread_timeout_text() << "); inputs rotated call by call (every path too) over up to " << sets_used
         << " sets (>= " << opt.rotation_mb << " MB together)\n"
         << "- x floor: the median over the math floor of the same (shape, pass) in this run, the "
            "fastest of " << (opt.engines ? "onednn-sgemm and onednn-matmul (--engines: OpenBLAS not run)"
                                          : "openblas-sgemm, onednn-sgemm and onednn-matmul") << "\n"
         << "- command: epigemm_bench_cpu";
  for (int i = 1; i < argc; ++i) header << ' ' << argv[i];
  header << "\n";
  std::printf("%s\n", header.str().c_str());
  table.print(stdout);
  const std::string base = opt.out + (opt.engines ? "/cpu-engines-" : "/cpu-") + date;
  const bool ok = table.write_csv(base + ".csv") && table.write_markdown(base + ".md", header.str());
  std::printf("\n%s %s.csv and %s.md\n", ok ? "wrote" : "could NOT write", base.c_str(), base.c_str());
  epigemm_context_destroy(ctx);
  return ok ? 0 : 1;
}
