// What epigemm's GPU benchmark programs share (bench/epigemm_bench_gpu.cu, the kernel labs of
// dev/cuda/): stopping at a CUDA error, device buffers, random device inputs, and the CUDA-event
// timer (median of single-call times, several paths interleaved). Header-only; each program
// includes it from its one translation unit and names itself with set_program_name().
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "round_order.hpp"

namespace epigemm_bench {

inline std::string& program_name() {
  static std::string name = "epigemm";
  return name;
}
inline void set_program_name(const char* name) { program_name() = name; }

// A benchmark stops at the first failure it cannot report in its table.
[[noreturn]] inline void die(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program_name().c_str(), message.c_str());
  std::exit(1);
}

#define EPIGEMM_BENCH_CUDA_OK(expr)                                                                    \
  do {                                                                                                 \
    const cudaError_t err_ = (expr);                                                                   \
    if (err_ != cudaSuccess) ::epigemm_bench::die(std::string(#expr) + ": " + cudaGetErrorString(err_)); \
  } while (0)

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) { EPIGEMM_BENCH_CUDA_OK(cudaMalloc(&ptr, std::max<size_t>(n, 256))); }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Uniform values in [-scale, scale) from a hash of (seed, index): random, reproducible, not zero.
// fp32 or bf16 (rounded to nearest even).
static __global__ void fill_uniform_kernel(void* x, bool fp32, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t h = seed * 0x9E3779B97F4A7C15ull + uint64_t(i);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    const float u = float(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    const float v = (2.0f * u - 1.0f) * scale;
    if (fp32) {
      static_cast<float*>(x)[i] = v;
    } else {
      static_cast<__nv_bfloat16*>(x)[i] = __float2bfloat16_rn(v);
    }
  }
}

inline void fill_uniform(void* x, bool fp32, int64_t count, uint64_t seed, float scale) {
  fill_uniform_kernel<<<4096, 256>>>(x, fp32, count, seed, scale);
  EPIGEMM_BENCH_CUDA_OK(cudaGetLastError());
}

struct Timing {
  int warmup = 5;
  int reps = 25;
};

// Median milliseconds of each fn over t.reps rounds; in every round each fn runs once, in turn,
// between its own two events. Interleaving puts every variant under the same clocks and
// temperature, so their ratios do not drift with the card's state during the run. The rounds
// follow a balanced design (round_order.hpp), t.reps rounded up to whole blocks of it, so that
// every fn runs in every position and after every other fn equally often: a call meets what the
// call before it left in L2 (inputs it read, dirty lines it has not written back), and on shapes
// whose tensors fit in the 60 MB L2 that is worth up to a fifth of a kernel's time. before
// (optional) runs ahead of each timed call, outside its events.
inline std::vector<double> interleaved_median_ms(const Timing& t, cudaStream_t stream,
                                                 const std::vector<std::function<void(int)>>& fns,
                                                 const std::function<void()>& before = nullptr) {
  for (int i = 0; i < t.warmup; ++i) {
    for (const auto& fn : fns) fn(i);
  }
  const size_t n = fns.size();
  const size_t block = balanced_block_rounds(n);
  const int reps = n == 0 ? 0 : int((size_t(t.reps) + block - 1) / block * block);
  std::vector<cudaEvent_t> events(2 * n * size_t(reps));
  for (auto& e : events) EPIGEMM_BENCH_CUDA_OK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    for (size_t v : balanced_round_order(n, size_t(i))) {
      if (before) before();
      EPIGEMM_BENCH_CUDA_OK(cudaEventRecord(events[2 * (size_t(i) * n + v)], stream));
      fns[v](t.warmup + i);
      EPIGEMM_BENCH_CUDA_OK(cudaEventRecord(events[2 * (size_t(i) * n + v) + 1], stream));
    }
  }
  EPIGEMM_BENCH_CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<double> medians(n);
  for (size_t v = 0; v < n; ++v) {
    std::vector<double> ms(static_cast<size_t>(reps));
    for (int i = 0; i < reps; ++i) {
      float value = 0;
      EPIGEMM_BENCH_CUDA_OK(
          cudaEventElapsedTime(&value, events[2 * (size_t(i) * n + v)], events[2 * (size_t(i) * n + v) + 1]));
      ms[size_t(i)] = value;
    }
    // The median; of an even count, the mean of the two middle values (an even count is
    // common with whole blocks, and taking one of the two would pick a side of a two-mode sample).
    std::sort(ms.begin(), ms.end());
    const size_t half = ms.size() / 2;
    medians[v] = ms.size() % 2 == 1 ? ms[half] : 0.5 * (ms[half - 1] + ms[half]);
  }
  for (auto& e : events) cudaEventDestroy(e);
  return medians;
}

// Median milliseconds of one fn (each call between two events).
inline double median_ms(const Timing& t, cudaStream_t stream, const std::function<void(int)>& fn) {
  return interleaved_median_ms(t, stream, {fn})[0];
}

// The device-to-device copy bandwidth in TB/s, read + write counted (2 GiB copied).
inline double copy_tbps(const Timing& t, cudaStream_t stream) {
  const size_t bytes = size_t(2) << 30;
  DeviceBuffer src(bytes), dst(bytes);
  fill_uniform(src.ptr, false, int64_t(bytes / 2), 1, 1.0f);
  const double ms = median_ms(t, stream, [&](int) {
    EPIGEMM_BENCH_CUDA_OK(cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  return 2.0 * double(bytes) / (ms * 1e-3) / 1e12;
}

}  // namespace epigemm_bench
