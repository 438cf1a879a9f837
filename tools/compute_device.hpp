// Where the demo and `epigemm check` keep their buffers, and the demo's element-wise steps
// besides the library (the MSE loss gradient, the SGD update). One implementation keeps host
// memory and runs loops (compute_device_host.cpp); one keeps CUDA device memory and runs small
// kernels on its own stream (compute_device_cuda.cu), so the whole training step stays on the GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "epigemm/epigemm.h"
#include "low_precision.hpp"

namespace epigemm_cli {

// A failure of the device runtime (allocation, copy, launch); main() reports it, exit code 1.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ComputeDevice {
 public:
  virtual ~ComputeDevice() = default;
  virtual epigemm_memory_t memory() const = 0;
  virtual std::string name() const = 0;
  // The stream every library call and kernel of this device is ordered on (a cudaStream_t, or
  // nullptr on the host).
  virtual void* stream() const = 0;

  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* pointer) = 0;
  virtual void copy_from_host(void* destination, const void* host_source, size_t bytes) = 0;
  virtual void copy_to_host(void* host_destination, const void* source, size_t bytes) = 0;
  // Fills `count` elements of `dtype` with a float value (NaN poisons outputs in `check`).
  virtual void fill(void* data, epigemm_dtype_t dtype, int64_t count, float value) = 0;
  // Waits for everything enqueued so far.
  virtual void synchronize() = 0;

  // The MSE loss over `count` elements and its gradient:
  //   prediction, target: [count] f32;
  //   gradient[i] = gradient_scale * (prediction[i] - target[i]), stored in gradient_dtype
  //     (skipped when gradient is nullptr);
  //   *loss = sum_i (prediction[i] - target[i])^2 / count  (f32, in this device's memory),
  //     summed in a fixed order so that the same inputs give bitwise the same loss.
  virtual void mse_loss_gradient(const float* prediction, const float* target, int64_t count,
                                 float gradient_scale, void* gradient, epigemm_dtype_t gradient_dtype,
                                 float* loss) = 0;

  // Plain SGD on an fp32 master copy: master[i] -= learning_rate * gradient[i]; then, when
  // working_copy is not nullptr, working_copy[i] = master[i] rounded to working_dtype (the bf16
  // weights the GEMMs read).
  virtual void sgd_update(float* master, const float* gradient, int64_t count, float learning_rate,
                          void* working_copy, epigemm_dtype_t working_dtype) = 0;
};

std::unique_ptr<ComputeDevice> make_host_device();
// The current CUDA device; throws DeviceError when the program is built without CUDA or no GPU
// is present.
std::unique_ptr<ComputeDevice> make_cuda_device();

// A buffer of one device, released with it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(ComputeDevice& device, epigemm_dtype_t dtype, int64_t count)
      : device_(&device), dtype_(dtype), count_(count),
        data_(device.allocate(size_t(count > 0 ? count : 1) * dtype_bytes(dtype))) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      device_ = other.device_;
      dtype_ = other.dtype_;
      count_ = other.count_;
      data_ = other.data_;
      other.data_ = nullptr;
    }
    return *this;
  }

  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  epigemm_dtype_t dtype() const { return dtype_; }
  int64_t count() const { return count_; }
  size_t bytes() const { return size_t(count_) * dtype_bytes(dtype_); }

 private:
  void reset() {
    if (data_ != nullptr) device_->release(data_);
    data_ = nullptr;
  }
  ComputeDevice* device_ = nullptr;
  epigemm_dtype_t dtype_ = EPIGEMM_DTYPE_F32;
  int64_t count_ = 0;
  void* data_ = nullptr;
};

}  // namespace epigemm_cli
