// `epigemm demo`: trains fc1 -> act -> fc2 (two_layer_mlp.hpp; act gelu_tanh, gelu_erf, relu or
// silu) with MSE loss and plain SGD on a synthetic regression task, then checks the first step's
// gradients against the reference backend and against finite differences. docs/cli.md describes
// the output.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "activations.hpp"
#include "commands.hpp"
#include "compute_device.hpp"
#include "epigemm/epigemm.hpp"
#include "low_precision.hpp"
#include "options.hpp"
#include "random.hpp"
#include "two_layer_mlp.hpp"

namespace epigemm_cli {
namespace {

// The synthetic task: targets are the outputs of a fixed random "teacher" MLP
// (in -> kTeacherHidden units of the demo's activation -> out) on inputs x ~ N(0, 1). The student
// is wider than the teacher and has the same activation, so the task is learnable to a small loss.
constexpr int64_t kTeacherHidden = 16;

struct DemoConfig {
  epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
  epigemm_dtype_t dtype = EPIGEMM_DTYPE_F32;
  epigemm_activation_t activation = EPIGEMM_ACTIVATION_GELU_TANH;
  DgradEpilogue dgrad_epilogue = DgradEpilogue::dact_bgrad;
  MlpShape shape;
  int64_t batches = 0;
  int64_t steps = 0;
  double learning_rate = 0;
  uint64_t seed = 0;
  double min_loss_ratio = 0;
  bool on_gpu = false;
};

// Row-major dense layer in double: out[t, o] = sum_i in[t, i] w[o, i] + b[o].
void dense(const std::vector<double>& input, int64_t tokens, int64_t in_features,
           const std::vector<double>& w, const std::vector<double>& b, int64_t out_features,
           std::vector<double>* output) {
  output->assign(size_t(tokens * out_features), 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    const double* x = &input[size_t(t * in_features)];
    for (int64_t o = 0; o < out_features; ++o) {
      const double* row = &w[size_t(o * in_features)];
      double sum = b[size_t(o)];
      for (int64_t i = 0; i < in_features; ++i) sum += x[i] * row[i];
      (*output)[size_t(t * out_features + o)] = sum;
    }
  }
}

// MSE of the MLP in double on one batch: the function whose gradient the library computes.
// relu_pattern (relu only, else empty): relu(z) is taken as z where the pattern is 1 and 0
// elsewhere, i.e. the linear piece of the loss that the unperturbed weights lie on. Central
// differences across relu's kink at 0 measure neither side's slope; on one piece they are exact,
// and that piece's gradient is the one the library computes (relu'(z) at the unperturbed z).
double mlp_loss(epigemm_activation_t activation, const std::vector<char>& relu_pattern,
                const std::vector<double>& x, const std::vector<double>& target, const MlpShape& s,
                const std::vector<double>& w1, const std::vector<double>& b1,
                const std::vector<double>& w2, const std::vector<double>& b2) {
  std::vector<double> hidden, prediction;
  dense(x, s.tokens, s.in_features, w1, b1, s.hidden_features, &hidden);
  for (size_t i = 0; i < hidden.size(); ++i) {
    hidden[i] = relu_pattern.empty() ? activation_value<double>(activation, hidden[i])
                                     : (relu_pattern[i] ? hidden[i] : 0.0);
  }
  dense(hidden, s.tokens, s.hidden_features, w2, b2, s.out_features, &prediction);
  double sum = 0.0;
  for (size_t i = 0; i < prediction.size(); ++i) {
    sum += (prediction[i] - target[i]) * (prediction[i] - target[i]);
  }
  return sum / double(prediction.size());
}

std::vector<float> normal_values(Random& random, int64_t count, double stddev, double mean = 0.0) {
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = float(mean + stddev * random.normal());
  return values;
}

// The data set: `samples` rows of x (stored in the activation dtype) and their targets (f32).
struct Dataset {
  std::vector<unsigned char> x_bytes;  // [samples, in] in the activation dtype
  std::vector<float> x;                // the same values as floats
  std::vector<float> target;           // [samples, out]
};

Dataset make_dataset(const DemoConfig& config, Random& random) {
  const MlpShape& s = config.shape;
  const int64_t samples = config.batches * s.tokens;
  Dataset data;
  data.x = normal_values(random, samples * s.in_features, 1.0);
  data.x_bytes.resize(data.x.size() * dtype_bytes(config.dtype));
  for (size_t i = 0; i < data.x.size(); ++i) {
    data.x[i] = round_to(config.dtype, data.x[i]);  // the teacher sees what the student sees
    store_element(data.x_bytes.data(), config.dtype, int64_t(i), data.x[i]);
  }
  // Teacher weights scaled so that its pre-activations and its outputs are of order 1.
  const auto to_double = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  const std::vector<double> w1 = to_double(normal_values(random, kTeacherHidden * s.in_features,
                                                         1.5 / std::sqrt(double(s.in_features))));
  const std::vector<double> b1 = to_double(normal_values(random, kTeacherHidden, 0.5));
  const std::vector<double> w2 = to_double(normal_values(random, s.out_features * kTeacherHidden,
                                                         1.0 / std::sqrt(double(kTeacherHidden))));
  const std::vector<double> b2 = to_double(normal_values(random, s.out_features, 0.1));
  std::vector<double> hidden, output;
  dense(to_double(data.x), samples, s.in_features, w1, b1, kTeacherHidden, &hidden);
  for (double& h : hidden) h = activation_value<double>(config.activation, h);
  dense(hidden, samples, kTeacherHidden, w2, b2, s.out_features, &output);
  data.target.assign(output.begin(), output.end());
  return data;
}

// The student's initial parameters: the usual fan-in scaling, zero biases.
MlpTensors initial_parameters(const MlpShape& s, Random& random) {
  MlpTensors p;
  p.w1 = normal_values(random, s.hidden_features * s.in_features, 1.0 / std::sqrt(double(s.in_features)));
  p.b1.assign(size_t(s.hidden_features), 0.0f);
  p.w2 = normal_values(random, s.out_features * s.hidden_features,
                       1.0 / std::sqrt(double(s.hidden_features)));
  p.b2.assign(size_t(s.out_features), 0.0f);
  return p;
}

// max_i |value_i - reference_i| / max_i |reference_i|: the error of a gradient tensor relative to
// its own scale (an elementwise relative error is meaningless for entries that are nearly 0).
double scaled_max_error(const std::vector<float>& value, const std::vector<float>& reference) {
  double largest = 0.0, error = 0.0;
  for (size_t i = 0; i < value.size(); ++i) {
    largest = std::max(largest, double(std::fabs(reference[i])));
    const double e = std::fabs(double(value[i]) - double(reference[i]));
    error = std::isnan(e) ? INFINITY : std::max(error, e);
  }
  return largest > 0.0 ? error / largest : error;
}

// Thresholds of the gradient checks by activation dtype. f32: fp32 accumulation orders differ
// between backends (~1e-6 here). bf16: Z1, H, dP, dZ1 are rounded to 8 mantissa bits, and
// backends may round an element differently when it lies at a rounding tie of its own fp32 sum.
double reference_threshold(epigemm_dtype_t dtype) { return dtype == EPIGEMM_DTYPE_F32 ? 1e-4 : 2e-2; }
// Finite differences see the function in exact arithmetic, so bf16 storage of the activations
// shows up in full here.
double finite_difference_threshold(epigemm_dtype_t dtype) { return dtype == EPIGEMM_DTYPE_F32 ? 1e-3 : 5e-2; }

class Progress {
 public:
  explicit Progress(int64_t steps) : steps_(steps), tty_(isatty(STDOUT_FILENO) == 1) {}
  bool wants(int64_t step) {
    if (step + 1 == steps_) return true;
    if (tty_) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_ < std::chrono::milliseconds(100)) return false;
      last_ = now;
      return true;
    }
    const int64_t every = std::max<int64_t>(1, steps_ / 10);
    return (step + 1) % every == 0;
  }
  void show(int64_t step, float loss) {
    const int64_t done = step + 1;
    if (tty_) {
      const int width = 30;
      const int filled = int(width * done / steps_);
      std::printf("\r  [%s%s] %5lld/%lld  loss %.6f", std::string(size_t(filled), '#').c_str(),
                  std::string(size_t(width - filled), '.').c_str(), (long long)done,
                  (long long)steps_, double(loss));
      if (done == steps_) std::printf("\n");
    } else {
      std::printf("  step %5lld/%lld  loss %.6f\n", (long long)done, (long long)steps_, double(loss));
    }
    std::fflush(stdout);
  }

 private:
  int64_t steps_;
  bool tty_;
  std::chrono::steady_clock::time_point last_{};
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

DemoConfig parse_config(Options& options, epigemm::Handle& handle) {
  DemoConfig config;
  const epigemm_backend_t backends[] = {EPIGEMM_BACKEND_AUTO, EPIGEMM_BACKEND_REFERENCE,
                                        EPIGEMM_BACKEND_CPU, EPIGEMM_BACKEND_CUDA,
                                        EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_BACKEND_CUTLASS};
  config.backend =
      backends[options.choice("backend", {"auto", "reference", "cpu", "cuda", "cublaslt", "cutlass"})];
  config.dtype = options.choice("dtype", {"fp32", "bf16"}) == 0 ? EPIGEMM_DTYPE_F32 : EPIGEMM_DTYPE_BF16;
  const epigemm_activation_t activations[] = {EPIGEMM_ACTIVATION_GELU_TANH, EPIGEMM_ACTIVATION_GELU_ERF,
                                              EPIGEMM_ACTIVATION_RELU, EPIGEMM_ACTIVATION_SILU};
  config.activation = activations[options.choice("activation", {"gelu_tanh", "gelu_erf", "relu", "silu"})];
  // dgelu_bgrad / dgelu: the names from before other activations existed.
  config.dgrad_epilogue = options.choice("dgrad-epilogue", {"dact_bgrad", "dact", "dgelu_bgrad", "dgelu"}) % 2 == 0
                              ? DgradEpilogue::dact_bgrad
                              : DgradEpilogue::dact;
  if (config.backend != EPIGEMM_BACKEND_AUTO && !handle.usable(config.backend)) {
    throw UsageError(std::string("--backend ") + epigemm_backend_name(config.backend) +
                     ": not usable here (not compiled into this build, or it needs a GPU); "
                     "`epigemm info` lists the usable backends");
  }
  const bool gpu_backend = config.backend == EPIGEMM_BACKEND_CUDA || config.backend == EPIGEMM_BACKEND_CUBLASLT ||
                           config.backend == EPIGEMM_BACKEND_CUTLASS;
  const bool gpu_present = handle.usable(EPIGEMM_BACKEND_CUDA) || handle.usable(EPIGEMM_BACKEND_CUBLASLT);
#ifdef EPIGEMM_TOOLS_WITH_CUDA
  config.on_gpu = gpu_backend || (config.backend == EPIGEMM_BACKEND_AUTO && gpu_present);
#else
  (void)gpu_backend;
  (void)gpu_present;
#endif
  // Sizes: the first default for the CPU, the second for the GPU (docs/cli.md).
  const auto size = [&](const char* name, int64_t cpu, int64_t gpu, int64_t max) {
    return options.given(name) ? options.integer(name, 1, max) : (config.on_gpu ? gpu : cpu);
  };
  config.shape.tokens = size("tokens", 256, 4096, int64_t(1) << 20);
  config.shape.in_features = size("in", 64, 256, int64_t(1) << 16);
  config.shape.hidden_features = size("hidden", 256, 1024, int64_t(1) << 16);
  config.shape.out_features = size("out", 16, 64, int64_t(1) << 16);
  config.batches = options.integer("batches", 1, 1 << 16);
  // The GPU data set is 16x larger (more rows, wider), so the loss needs more steps to fall as
  // far as memorization lets it on the CPU's small set; a GPU step takes well under a millisecond.
  config.steps = size("steps", 300, 1000, int64_t(1) << 24);
  // With relu the loss diverges or falls less than 10x at lr 1 (seeds 1-4 of the CPU demo); at 0.5
  // it falls 19-28x (seeds 1-5).
  const double default_lr = config.activation == EPIGEMM_ACTIVATION_RELU ? 0.5 : 1.0;
  config.learning_rate = options.given("lr") ? options.real("lr", 0.0, 1e6) : default_lr;
  config.seed = uint64_t(options.integer("seed", 0, INT64_MAX));
  config.min_loss_ratio = options.real("min-loss-ratio", 0.0, 1e12);
  const double data_bytes = double(config.batches * config.shape.tokens) *
                            double(config.shape.in_features + config.shape.out_features) * 4.0;
  if (data_bytes > 8e9) {
    throw UsageError("--batches x --tokens x (--in + --out) makes a data set of " +
                     std::to_string(int64_t(data_bytes / 1e9)) + " GB; expected at most 8 GB");
  }
  return config;
}

// The first step again, on host copies of its inputs (initial weights, batch 0), with every call
// forced to the reference backend; prints and judges max |g - g_ref| / max |g_ref| per tensor.
bool check_against_reference(const DemoConfig& config, const Dataset& data, const MlpTensors& initial,
                             const MlpTensors& gradients, bool demo_ran_on_reference) {
  epigemm::Handle reference_handle;
  reference_handle.set_backend(EPIGEMM_BACKEND_REFERENCE);
  std::unique_ptr<ComputeDevice> host = make_host_device();
  TwoLayerMlp reference_mlp(*host, reference_handle, config.shape, config.dtype, config.activation,
                            config.dgrad_epilogue);
  reference_mlp.set_parameters(initial);
  DeviceBuffer reference_loss(*host, EPIGEMM_DTYPE_F32, 1);
  reference_mlp.forward(data.x_bytes.data());
  reference_mlp.loss_and_gradient(data.target.data(), reference_loss.f32());
  reference_mlp.backward(data.x_bytes.data());
  const MlpTensors reference = reference_mlp.download_gradients();

  const double threshold = reference_threshold(config.dtype);
  std::printf("  vs the reference backend (max |g - g_ref| / max |g_ref|, threshold %g):\n", threshold);
  const struct {
    const char* name;
    const std::vector<float>& value;
    const std::vector<float>& reference;
  } tensors[] = {{"dW1", gradients.w1, reference.w1},
                 {"db1", gradients.b1, reference.b1},
                 {"dW2", gradients.w2, reference.w2},
                 {"db2", gradients.b2, reference.b2}};
  bool all_ok = true;
  for (const auto& t : tensors) {
    const double error = scaled_max_error(t.value, t.reference);
    const bool ok = error <= threshold;
    all_ok = all_ok && ok;
    std::printf("    %-4s %-8s %.3e  %s\n", t.name,
                ("[" + std::to_string(t.value.size()) + "]").c_str(), error, ok ? "PASS" : "FAIL");
  }
  if (demo_ran_on_reference) {
    std::printf("    (the demo itself ran on the reference backend, so these agree by construction;\n"
                "     the finite-difference check below is the independent one)\n");
  }
  return all_ok;
}

// Central differences of the loss in double (mlp_loss, independent of the library) along one
// random direction v over all parameters, against <g, v>. The loss is evaluated on the weights
// the GEMMs read (bf16-rounded in bf16 mode) and batch 0; the error is relative to |g| (the
// spread of <g, v> over directions). For relu, on the linear piece of the unperturbed weights
// (mlp_loss).
bool check_against_finite_differences(const DemoConfig& config, const Dataset& data,
                                      const MlpTensors& initial, const MlpTensors& gradients) {
  const MlpShape& s = config.shape;
  Random direction_random(config.seed ^ 0x5eedf00dull);
  const auto as_read_by_gemm = [&](const std::vector<float>& v) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = double(round_to(config.dtype, v[i]));
    return out;
  };
  std::vector<double> w1 = as_read_by_gemm(initial.w1), w2 = as_read_by_gemm(initial.w2);
  std::vector<double> b1(initial.b1.begin(), initial.b1.end()), b2(initial.b2.begin(), initial.b2.end());
  const std::vector<double> x(data.x.begin(), data.x.begin() + s.tokens * s.in_features);
  const std::vector<double> target(data.target.begin(), data.target.begin() + s.tokens * s.out_features);
  std::vector<double*> parameters;
  std::vector<double> direction;
  std::vector<float> gradient;
  const auto add = [&](std::vector<double>& p, const std::vector<float>& g) {
    for (size_t i = 0; i < p.size(); ++i) {
      parameters.push_back(&p[i]);
      direction.push_back(direction_random.normal());
      gradient.push_back(g[i]);
    }
  };
  add(w1, gradients.w1);
  add(b1, gradients.b1);
  add(w2, gradients.w2);
  add(b2, gradients.b2);
  // relu: which hidden pre-activations are positive at the unperturbed weights.
  std::vector<char> relu_pattern;
  if (config.activation == EPIGEMM_ACTIVATION_RELU) {
    std::vector<double> z;
    dense(x, s.tokens, s.in_features, w1, b1, s.hidden_features, &z);
    for (const double v : z) relu_pattern.push_back(v > 0.0 ? 1 : 0);
  }
  const double epsilon = 1e-4;
  const auto shifted_loss = [&](double sign) {
    for (size_t i = 0; i < parameters.size(); ++i) *parameters[i] += sign * epsilon * direction[i];
    const double loss = mlp_loss(config.activation, relu_pattern, x, target, s, w1, b1, w2, b2);
    for (size_t i = 0; i < parameters.size(); ++i) *parameters[i] -= sign * epsilon * direction[i];
    return loss;
  };
  const double finite_difference = (shifted_loss(+1.0) - shifted_loss(-1.0)) / (2.0 * epsilon);
  double projected = 0.0, gradient_norm = 0.0;
  for (size_t i = 0; i < gradient.size(); ++i) {
    projected += double(gradient[i]) * direction[i];
    gradient_norm += double(gradient[i]) * double(gradient[i]);
  }
  gradient_norm = std::sqrt(gradient_norm);
  const double error = std::fabs(finite_difference - projected) / std::max(gradient_norm, 1e-30);
  const double threshold = finite_difference_threshold(config.dtype);
  const bool ok = error <= threshold;
  std::printf("  vs central finite differences in double along a random direction v:\n"
              "    dL/dv %.6e, <g, v> %.6e: error / |g| %.3e (threshold %g)  %s\n",
              finite_difference, projected, error, threshold, ok ? "PASS" : "FAIL");
  return ok;
}

}  // namespace

int run_demo(int argc, char** argv, int first) {
  Options options("demo",
                  "Trains a two-layer MLP (fc1 -> activation -> fc2, MSE loss, plain SGD) on a synthetic\n"
                  "regression task with epigemm computing every linear layer, then checks the first\n"
                  "step's gradients against the reference backend and finite differences.\n"
                  "Runs on the GPU when one is usable, on the CPU otherwise.");
  options.add("backend", "NAME", "auto|reference|cpu|cuda|cublaslt|cutlass", "auto");
  options.add("dtype", "TYPE", "fp32|bf16 (bf16: bf16 activations and GEMM weights, fp32 master weights)", "fp32");
  options.add("activation", "NAME", "gelu_tanh|gelu_erf|relu|silu: the hidden layer's activation", "gelu_tanh");
  options.add("dgrad-epilogue", "NAME",
              "dact_bgrad|dact (or dgelu_bgrad|dgelu): fc2 dgrad epilogue (dact: db1 from fc1's wgrad)",
              "dact_bgrad");
  options.add("tokens", "N", "rows per batch", "256 on the CPU, 4096 on the GPU");
  options.add("in", "N", "in_features of fc1", "64 / 256");
  options.add("hidden", "N", "out_features of fc1 = in_features of fc2", "256 / 1024");
  options.add("out", "N", "out_features of fc2", "16 / 64");
  options.add("batches", "N", "batches in the data set (steps cycle through them)", "8");
  options.add("steps", "N", "SGD steps", "300 / 1000");
  options.add("lr", "X", "learning rate", "1; 0.5 with --activation relu");
  options.add("seed", "N", "seed of the data set and of the initial weights", "1");
  options.add("min-loss-ratio", "X", "fail unless the loss falls by at least this factor", "10");
  if (!options.parse(argc, argv, first)) return 0;

  epigemm::Handle handle;
  const DemoConfig config = parse_config(options, handle);
  handle.set_backend(config.backend);
  const MlpShape& s = config.shape;
  const char* dtype_text = config.dtype == EPIGEMM_DTYPE_F32 ? "fp32" : "bf16";
  const char* act = epigemm_activation_name(config.activation);

  std::unique_ptr<ComputeDevice> device = config.on_gpu ? make_cuda_device() : make_host_device();
  std::printf("epigemm demo: fc1 -> %s -> fc2, MSE loss, plain SGD, every linear layer by epigemm\n", act);
  std::printf("  task     regression onto a random teacher MLP (%lld -> %lld %s -> %lld), seed %llu\n",
              (long long)s.in_features, (long long)kTeacherHidden, act, (long long)s.out_features,
              (unsigned long long)config.seed);
  std::printf("  model    in %lld -> hidden %lld (%s) -> out %lld; %lld batches x %lld tokens\n",
              (long long)s.in_features, (long long)s.hidden_features, act, (long long)s.out_features,
              (long long)config.batches, (long long)s.tokens);
  std::printf("  run      %s, backend %s, dtype %s%s, fc2 dgrad %s, %lld steps, lr %g\n",
              device->name().c_str(), epigemm_backend_name(config.backend), dtype_text,
              config.dtype == EPIGEMM_DTYPE_BF16 ? " (fp32 master weights)" : "",
              config.dgrad_epilogue == DgradEpilogue::dact_bgrad ? "DACT_BGRAD" : "DACT",
              (long long)config.steps, config.learning_rate);

  Random random(config.seed);
  const Dataset data = make_dataset(config, random);
  const MlpTensors initial = initial_parameters(s, random);

  const int64_t x_batch_bytes = s.tokens * s.in_features * int64_t(dtype_bytes(config.dtype));
  const int64_t target_batch_count = s.tokens * s.out_features;
  DeviceBuffer x_all(*device, config.dtype, config.batches * s.tokens * s.in_features);
  DeviceBuffer target_all(*device, EPIGEMM_DTYPE_F32, config.batches * target_batch_count);
  DeviceBuffer losses(*device, EPIGEMM_DTYPE_F32, config.steps + config.batches);
  device->copy_from_host(x_all.data(), data.x_bytes.data(), x_all.bytes());
  device->copy_from_host(target_all.data(), data.target.data(), target_all.bytes());
  const auto x_batch = [&](int64_t b) { return static_cast<const unsigned char*>(x_all.data()) + b * x_batch_bytes; };
  const auto target_batch = [&](int64_t b) { return target_all.f32() + b * target_batch_count; };
  const auto read_loss = [&](int64_t slot) {
    float loss = 0.0f;
    device->copy_to_host(&loss, losses.f32() + slot, sizeof loss);
    return loss;
  };

  TwoLayerMlp mlp(*device, handle, s, config.dtype, config.activation, config.dgrad_epilogue);
  mlp.set_parameters(initial);

  // The loss over the whole data set (forward passes only), in the slots after the step losses.
  const auto dataset_loss = [&]() {
    double sum = 0.0;
    for (int64_t b = 0; b < config.batches; ++b) {
      mlp.forward(x_batch(b));
      mlp.loss_only(target_batch(b), losses.f32() + config.steps + b);
    }
    for (int64_t b = 0; b < config.batches; ++b) sum += read_loss(config.steps + b);
    return sum / double(config.batches);
  };

  const auto start = std::chrono::steady_clock::now();
  const double loss_start = dataset_loss();
  std::printf("training\n");
  Progress progress(config.steps);
  MlpTensors first_gradients;
  std::vector<float> first_b1_grad_from_wgrad;
  std::vector<CallRecord> first_calls;
  for (int64_t step = 0; step < config.steps; ++step) {
    const int64_t b = step % config.batches;
    mlp.forward(x_batch(b));
    mlp.loss_and_gradient(target_batch(b), losses.f32() + step);
    mlp.backward(x_batch(b));
    if (step == 0) {
      first_gradients = mlp.download_gradients();
      first_b1_grad_from_wgrad = mlp.download_fc1_bias_grad_from_wgrad();
      first_calls = mlp.calls();
    }
    mlp.sgd_update(float(config.learning_rate));
    if (progress.wants(step)) progress.show(step, read_loss(step));
  }
  const double loss_end = dataset_loss();
  device->synchronize();
  const double train_seconds = seconds_since(start);

  // A loss that became NaN or Inf (a learning rate too large) fails, whatever the ratio says.
  const bool finite = std::isfinite(loss_start) && std::isfinite(loss_end);
  const double ratio = !finite ? NAN : loss_end > 0.0 ? loss_start / loss_end : INFINITY;
  const bool loss_ok = finite && ratio >= config.min_loss_ratio;
  std::printf("loss over the data set: start %.6f, end %.6f: %.1fx lower (%s: needs >= %gx)\n",
              loss_start, loss_end, ratio, loss_ok ? "PASS" : "FAIL", config.min_loss_ratio);
  std::printf("time: %.2f s for %lld steps (%.2f ms/step)\n", train_seconds, (long long)config.steps,
              1e3 * train_seconds / double(config.steps));

  std::printf("backend of each call (first step):\n");
  size_t call_width = 0;  // the columns line up whatever the epilogue and activation names
  for (const CallRecord& c : first_calls) call_width = std::max(call_width, c.call.size());
  for (const CallRecord& c : first_calls) {
    std::printf("  %-*s %-10s %s\n", int(call_width), c.call.c_str(), epigemm_backend_name(c.backend),
                c.reason.c_str());
  }

  const auto check_start = std::chrono::steady_clock::now();
  std::printf("gradient check of the first step (batch 0, the initial weights):\n");
  bool all_reference = true;
  for (const CallRecord& c : first_calls) all_reference = all_reference && c.backend == EPIGEMM_BACKEND_REFERENCE;
  const bool reference_ok = check_against_reference(config, data, initial, first_gradients, all_reference);
  const bool finite_difference_ok = check_against_finite_differences(config, data, initial, first_gradients);
  const bool all_ok = reference_ok && finite_difference_ok;

  // Two computations of fc1's bias gradient from different epilogues (informational).
  if (config.dgrad_epilogue == DgradEpilogue::dact_bgrad) {
    std::printf("  db1 from fc2 dgrad DACT_BGRAD vs from fc1 wgrad BGRADB: %.3e (max diff / max |db1|)\n",
                scaled_max_error(first_b1_grad_from_wgrad, first_gradients.b1));
  }
  std::printf("  checks took %.2f s\n", seconds_since(check_start));

  const bool passed = all_ok && loss_ok;
  std::printf("result: %s\n", passed ? "PASS" : "FAIL");
  return passed ? 0 : 1;
}

}  // namespace epigemm_cli
