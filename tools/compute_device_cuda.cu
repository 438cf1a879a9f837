// The CUDA ComputeDevice: device buffers on the current GPU, one stream, and the demo's small
// element-wise kernels (MSE loss gradient, SGD update) so a training step never leaves the GPU.
// Kernels first, then the host class that launches them on its stream and checks each launch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "compute_device.hpp"

namespace epigemm_cli {
namespace {

// One fixed-size block reduces the loss, so the summation order (and the loss) is the same on
// every run: no atomics.
constexpr int kLossThreads = 1024;
constexpr int kElementwiseThreads = 256;

__device__ void store_as(void* data, epigemm_dtype_t dtype, int64_t i, float value) {
  if (dtype == EPIGEMM_DTYPE_BF16) {
    static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(value);
  } else if (dtype == EPIGEMM_DTYPE_F16) {
    static_cast<__half*>(data)[i] = __float2half_rn(value);
  } else {
    static_cast<float*>(data)[i] = value;
  }
}

// prediction, target: [count] f32 -> gradient [count] (gradient_dtype).
__global__ void mse_gradient_kernel(const float* prediction, const float* target, int64_t count,
                                    float gradient_scale, void* gradient, epigemm_dtype_t gradient_dtype) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    store_as(gradient, gradient_dtype, i, gradient_scale * (prediction[i] - target[i]));
  }
}

// One block of kLossThreads: *loss = sum (prediction - target)^2 / count.
__global__ void mse_loss_kernel(const float* prediction, const float* target, int64_t count, float* loss) {
  __shared__ float partial[kLossThreads];
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += kLossThreads) {
    const float error = prediction[i] - target[i];
    sum += error * error;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int width = kLossThreads / 2; width > 0; width /= 2) {
    if (int(threadIdx.x) < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = count > 0 ? partial[0] / float(count) : 0.0f;
}

// master [count] f32 -= learning_rate * gradient [count] f32; working_copy = master in working_dtype.
__global__ void sgd_kernel(float* master, const float* gradient, int64_t count, float learning_rate,
                           void* working_copy, epigemm_dtype_t working_dtype) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float updated = master[i] - learning_rate * gradient[i];
    master[i] = updated;
    if (working_copy != nullptr) store_as(working_copy, working_dtype, i, updated);
  }
}

__global__ void fill_kernel(void* data, epigemm_dtype_t dtype, int64_t count, float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    store_as(data, dtype, i, value);
  }
}

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw DeviceError(std::string(what) + " failed: " + cudaGetErrorString(status));
  }
}

// Enough blocks to fill the GPU, grid-stride loops for the rest.
unsigned elementwise_blocks(int64_t count) {
  const int64_t blocks = (count + kElementwiseThreads - 1) / kElementwiseThreads;
  return unsigned(blocks < 1 ? 1 : (blocks > 4096 ? 4096 : blocks));
}

class CudaDevice final : public ComputeDevice {
 public:
  CudaDevice() {
    int count = 0;
    check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (count == 0) throw DeviceError("no CUDA device present");
    check_cuda(cudaGetDevice(&device_), "cudaGetDevice");
    cudaDeviceProp properties;
    check_cuda(cudaGetDeviceProperties(&properties, device_), "cudaGetDeviceProperties");
    name_ = std::string("GPU ") + std::to_string(device_) + " (" + properties.name + ")";
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CudaDevice() override { cudaStreamDestroy(stream_); }

  epigemm_memory_t memory() const override { return EPIGEMM_MEMORY_DEVICE; }
  std::string name() const override { return name_; }
  void* stream() const override { return stream_; }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  void release(void* pointer) override { cudaFree(pointer); }
  void copy_from_host(void* destination, const void* host_source, size_t bytes) override {
    check_cuda(cudaMemcpyAsync(destination, host_source, bytes, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync (host to device)");
    synchronize();  // the host buffer may be freed as soon as this returns
  }
  void copy_to_host(void* host_destination, const void* source, size_t bytes) override {
    check_cuda(cudaMemcpyAsync(host_destination, source, bytes, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync (device to host)");
    synchronize();
  }
  void fill(void* data, epigemm_dtype_t dtype, int64_t count, float value) override {
    if (count == 0) return;
    fill_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream_>>>(data, dtype, count, value);
    check_cuda(cudaGetLastError(), "fill_kernel launch");
  }
  void synchronize() override { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  void mse_loss_gradient(const float* prediction, const float* target, int64_t count,
                         float gradient_scale, void* gradient, epigemm_dtype_t gradient_dtype,
                         float* loss) override {
    if (gradient != nullptr && count > 0) {
      mse_gradient_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream_>>>(
          prediction, target, count, gradient_scale, gradient, gradient_dtype);
      check_cuda(cudaGetLastError(), "mse_gradient_kernel launch");
    }
    mse_loss_kernel<<<1, kLossThreads, 0, stream_>>>(prediction, target, count, loss);
    check_cuda(cudaGetLastError(), "mse_loss_kernel launch");
  }

  void sgd_update(float* master, const float* gradient, int64_t count, float learning_rate,
                  void* working_copy, epigemm_dtype_t working_dtype) override {
    if (count == 0) return;
    sgd_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream_>>>(
        master, gradient, count, learning_rate, working_copy, working_dtype);
    check_cuda(cudaGetLastError(), "sgd_kernel launch");
  }

 private:
  int device_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<ComputeDevice> make_cuda_device() { return std::make_unique<CudaDevice>(); }

}  // namespace epigemm_cli
