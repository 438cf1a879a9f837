// The host ComputeDevice: plain memory and loops. The demo's element-wise steps on the CPU.
#include <cstdlib>
#include <cstring>

#include "compute_device.hpp"
#include "low_precision.hpp"

namespace epigemm_cli {
namespace {

class HostDevice final : public ComputeDevice {
 public:
  epigemm_memory_t memory() const override { return EPIGEMM_MEMORY_HOST; }
  std::string name() const override { return "host (CPU)"; }
  void* stream() const override { return nullptr; }

  void* allocate(size_t bytes) override {
    void* p = std::malloc(bytes);
    if (p == nullptr) throw DeviceError("host allocation of " + std::to_string(bytes) + " bytes failed");
    return p;
  }
  void release(void* pointer) override { std::free(pointer); }
  void copy_from_host(void* destination, const void* host_source, size_t bytes) override {
    std::memcpy(destination, host_source, bytes);
  }
  void copy_to_host(void* host_destination, const void* source, size_t bytes) override {
    std::memcpy(host_destination, source, bytes);
  }
  void fill(void* data, epigemm_dtype_t dtype, int64_t count, float value) override {
    for (int64_t i = 0; i < count; ++i) store_element(data, dtype, i, value);
  }
  void synchronize() override {}

  void mse_loss_gradient(const float* prediction, const float* target, int64_t count,
                         float gradient_scale, void* gradient, epigemm_dtype_t gradient_dtype,
                         float* loss) override {
    double sum = 0.0;
    for (int64_t i = 0; i < count; ++i) {
      const float error = prediction[i] - target[i];
      sum += double(error) * double(error);
      if (gradient != nullptr) store_element(gradient, gradient_dtype, i, gradient_scale * error);
    }
    *loss = count > 0 ? float(sum / double(count)) : 0.0f;
  }

  void sgd_update(float* master, const float* gradient, int64_t count, float learning_rate,
                  void* working_copy, epigemm_dtype_t working_dtype) override {
    for (int64_t i = 0; i < count; ++i) {
      master[i] -= learning_rate * gradient[i];
      if (working_copy != nullptr) store_element(working_copy, working_dtype, i, master[i]);
    }
  }
};

}  // namespace

std::unique_ptr<ComputeDevice> make_host_device() { return std::make_unique<HostDevice>(); }

#ifndef EPIGEMM_TOOLS_WITH_CUDA
std::unique_ptr<ComputeDevice> make_cuda_device() {
  throw DeviceError("this epigemm program was built without CUDA");
}
#endif

}  // namespace epigemm_cli
