// The harness's memory (host buffers with guards, device mirrors through the CUDA runtime),
// targets, contexts and seeds. Device code is compiled when the tests are built with CUDA
// (EPIGEMM_TESTS_WITH_CUDA); without it a device target is reported unusable and skipped.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "harness/harness.hpp"

#ifdef EPIGEMM_TESTS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace epigemm_test {

namespace {

constexpr size_t kAlignment = 256;
constexpr int64_t kBackGuardElements = 19;  // odd, so a guard overrun by a vector width shows

#ifdef EPIGEMM_TESTS_WITH_CUDA
// A CUDA runtime failure in the harness is a test failure (not a library one): say where.
bool cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  ADD_FAILURE() << "harness: " << what << " failed: " << cudaGetErrorString(e);
  return false;
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: clear the sticky-free error
    return 0;
  }
  return count;
}
#endif

}  // namespace

// ---- targets ---------------------------------------------------------------------------------

std::string Target::name() const {
  if (backend == EPIGEMM_BACKEND_AUTO) {
    return memory == EPIGEMM_MEMORY_DEVICE ? "auto_device" : "auto_host";
  }
  return epigemm_backend_name(backend);
}

void PrintTo(const Target& target, std::ostream* os) { *os << target.name(); }

epigemm_memory_t backend_memory(epigemm_backend_t backend) {
  return backend == EPIGEMM_BACKEND_CUDA || backend == EPIGEMM_BACKEND_CUBLASLT ||
                 backend == EPIGEMM_BACKEND_CUTLASS
             ? EPIGEMM_MEMORY_DEVICE
             : EPIGEMM_MEMORY_HOST;
}

std::vector<Target> all_targets() {
  std::vector<Target> targets;
  for (epigemm_backend_t b : {EPIGEMM_BACKEND_REFERENCE, EPIGEMM_BACKEND_CPU, EPIGEMM_BACKEND_CUDA,
                              EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_BACKEND_CUTLASS}) {
    targets.push_back(Target{b, backend_memory(b)});
  }
  targets.push_back(Target{EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_HOST});
  targets.push_back(Target{EPIGEMM_BACKEND_AUTO, EPIGEMM_MEMORY_DEVICE});
  return targets;
}

std::string unusable_reason(epigemm_context_t ctx, const Target& target) {
  const bool device = target.memory == EPIGEMM_MEMORY_DEVICE;
#ifndef EPIGEMM_TESTS_WITH_CUDA
  if (device) {
    return "SKIP: " + target.name() +
           " needs device memory; this build has no CUDA (EPIGEMM_WITH_CUDA off or no toolkit)";
  }
  const bool have_gpu = false;
#else
  const bool have_gpu = device_count() > 0;
#endif
  if (target.backend == EPIGEMM_BACKEND_AUTO) {
    if (!device) return "";
    if (epigemm_backend_usable(ctx, EPIGEMM_BACKEND_CUDA) ||
        epigemm_backend_usable(ctx, EPIGEMM_BACKEND_CUBLASLT)) {
      return "";
    }
    return have_gpu ? "SKIP: auto on device memory: no device backend (cuda, cublaslt) is "
                      "compiled into this build"
                    : "SKIP: auto on device memory: no usable device backend on this machine "
                      "(no GPU)";
  }
  if (epigemm_backend_usable(ctx, target.backend)) return "";
  const std::string name = epigemm_backend_name(target.backend);
  if (!epigemm_backend_compiled(ctx, target.backend)) {
    return "SKIP: backend " + name + " is not compiled into this build";
  }
  if (device && !have_gpu) return "SKIP: backend " + name + " is not usable on this machine (no GPU)";
  return "SKIP: backend " + name + " is not usable on this machine";
}

Context::Context() {
  if (epigemm_context_create(&ctx_) != EPIGEMM_STATUS_SUCCESS) {
    ADD_FAILURE() << "epigemm_context_create failed";
    ctx_ = nullptr;
  }
}
Context::~Context() {
  if (ctx_ != nullptr) epigemm_context_destroy(ctx_);
}

// ---- seeds -----------------------------------------------------------------------------------

uint64_t base_seed() {
  static const uint64_t seed = [] {
    uint64_t s = 0x5eed2024u;
    const char* env = std::getenv("EPIGEMM_TEST_SEED");
    if (env != nullptr && std::strcmp(env, "random") == 0) {
      std::random_device device;
      s = (uint64_t(device()) << 32) ^ device();
    } else if (env != nullptr && *env != '\0') {
      s = std::strtoull(env, nullptr, 0);
    }
    std::printf("[epigemm harness] base seed %llu (replay: EPIGEMM_TEST_SEED=%llu)\n",
                static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

uint64_t case_seed(const std::string& name, uint64_t index) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the name
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  Rng mix(base_seed() ^ h ^ (index * 0x9e3779b97f4a7c15ull));
  return mix.next();
}

std::string replay_hint() {
  std::ostringstream os;
  os << "replay: EPIGEMM_TEST_SEED=" << base_seed();
  if (const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    os << " --gtest_filter='" << info->test_suite_name() << "." << info->name() << "'";
  }
  return os.str();
}

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform(double lo, double hi) {
  return lo + (hi - lo) * (double(next() >> 11) * 0x1.0p-53);
}

// ---- Tensor ----------------------------------------------------------------------------------

void Tensor::Free::operator()(unsigned char* p) const { std::free(p); }

Tensor::Tensor(epigemm_dtype_t dtype, int64_t rows, int64_t cols, int64_t ld, bool misaligned)
    : dtype_(dtype), rows_(rows), cols_(cols), ld_(ld) {
  const int64_t size = int64_t(dtype_bytes(dtype));
  front_ = int64_t(kAlignment) / size + (misaligned ? 1 : 0);
  bytes_ = size_t((front_ + ld * cols + kBackGuardElements) * size);
  const size_t allocated = (bytes_ + kAlignment - 1) / kAlignment * kAlignment;
  host_.reset(static_cast<unsigned char*>(std::aligned_alloc(kAlignment, allocated)));
  if (!host_) throw std::bad_alloc();
  fill_poison();
}

Tensor Tensor::vector(epigemm_dtype_t dtype, int64_t length, bool misaligned) {
  return Tensor(dtype, length, 1, length > 0 ? length : 1, misaligned);
}

Tensor::Tensor(const Tensor& other)
    : dtype_(other.dtype_), rows_(other.rows_), cols_(other.cols_), ld_(other.ld_),
      front_(other.front_), bytes_(other.bytes_) {
  if (other.host_) {
    const size_t allocated = (bytes_ + kAlignment - 1) / kAlignment * kAlignment;
    host_.reset(static_cast<unsigned char*>(std::aligned_alloc(kAlignment, allocated)));
    if (!host_) throw std::bad_alloc();
    std::memcpy(host_.get(), other.host_.get(), bytes_);
  }
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) {
    Tensor copy(other);
    *this = std::move(copy);
  }
  return *this;
}

Tensor::Tensor(Tensor&& other) noexcept
    : dtype_(other.dtype_), rows_(other.rows_), cols_(other.cols_), ld_(other.ld_),
      front_(other.front_), host_(std::move(other.host_)), bytes_(other.bytes_),
      device_(other.device_) {
  other.device_ = nullptr;
  other.bytes_ = 0;
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    release_device();
    dtype_ = other.dtype_;
    rows_ = other.rows_;
    cols_ = other.cols_;
    ld_ = other.ld_;
    front_ = other.front_;
    host_ = std::move(other.host_);
    bytes_ = other.bytes_;
    device_ = other.device_;
    other.device_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

Tensor::~Tensor() { release_device(); }

void Tensor::release_device() {
#ifdef EPIGEMM_TESTS_WITH_CUDA
  if (device_ != nullptr) cudaFree(device_);
#endif
  device_ = nullptr;
}

double Tensor::get(int64_t r, int64_t c) const { return decode(host_data(), dtype_, r + c * ld_); }

void Tensor::set(int64_t r, int64_t c, double v) { encode(host_data(), dtype_, r + c * ld_, v); }

bool Tensor::is_poison(int64_t r, int64_t c) const {
  const unsigned char* p =
      static_cast<const unsigned char*>(host_data()) + (r + c * ld_) * int64_t(dtype_bytes(dtype_));
  uint32_t bits = 0;
  std::memcpy(&bits, p, dtype_bytes(dtype_));
  return bits == poison_bits(dtype_);
}

void Tensor::fill_uniform(Rng& rng, double lo, double hi) {
  for (int64_t c = 0; c < cols_; ++c) {
    for (int64_t r = 0; r < rows_; ++r) set(r, c, rng.uniform(lo, hi));
  }
}

void Tensor::fill_poison() {
  const uint32_t bits = poison_bits(dtype_);
  const size_t size = dtype_bytes(dtype_);
  for (size_t offset = 0; offset + size <= bytes_; offset += size) {
    std::memcpy(host_.get() + offset, &bits, size);
  }
}

bool Tensor::inside(int64_t index) const {
  const int64_t local = index - front_;
  if (local < 0 || rows_ == 0 || cols_ == 0) return false;
  const int64_t c = local / ld_, r = local % ld_;
  return c < cols_ && r < rows_;
}

void* Tensor::device_data() const {
  return static_cast<unsigned char*>(device_) + front_ * int64_t(dtype_bytes(dtype_));
}

epigemm_matrix_t Tensor::matrix(epigemm_memory_t memory) const {
  void* data = memory == EPIGEMM_MEMORY_DEVICE ? device_data() : host_data();
  return epigemm_matrix_t{data, dtype_, rows_, cols_, ld_, memory};
}

epigemm_vector_t Tensor::as_vector(epigemm_memory_t memory) const {
  void* data = memory == EPIGEMM_MEMORY_DEVICE ? device_data() : host_data();
  return epigemm_vector_t{data, dtype_, rows_ * cols_, memory};
}

epigemm_tensor_t Tensor::row_major(epigemm_memory_t memory) const {
  void* data = memory == EPIGEMM_MEMORY_DEVICE ? device_data() : host_data();
  return epigemm_tensor_t{data, dtype_, cols_, rows_, ld_, memory};
}

bool copy_to_device_and_wait(void* device, const void* host, size_t bytes) {
#ifdef EPIGEMM_TESTS_WITH_CUDA
  // Without the wait a call (or the download of an untouched buffer) could read device memory the
  // copy has not reached yet: seen with 16 test processes sharing one GPU.
  return cuda_ok(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D") &&
         cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the upload");
#else
  (void)device, (void)host, (void)bytes;
  ADD_FAILURE() << "harness: copy_to_device_and_wait() in a build without CUDA";
  return false;
#endif
}

void Tensor::upload() {
#ifdef EPIGEMM_TESTS_WITH_CUDA
  if (device_ == nullptr && !cuda_ok(cudaMalloc(&device_, bytes_), "cudaMalloc")) {
    device_ = nullptr;
    return;
  }
  copy_to_device_and_wait(device_, host_.get(), bytes_);
#else
  ADD_FAILURE() << "harness: upload() in a build without CUDA";
#endif
}

void Tensor::download(void* stream) {
#ifdef EPIGEMM_TESTS_WITH_CUDA
  if (device_ == nullptr) return;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cuda_ok(cudaMemcpyAsync(host_.get(), device_, bytes_, cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync D2H");
  cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
#else
  (void)stream;
  ADD_FAILURE() << "harness: download() in a build without CUDA";
#endif
}

// ---- Workspace, Stream -----------------------------------------------------------------------

Workspace::Workspace(size_t bytes, epigemm_memory_t memory) : bytes_(bytes), memory_(memory) {
  if (bytes == 0) return;
  if (memory == EPIGEMM_MEMORY_DEVICE) {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    if (!cuda_ok(cudaMalloc(&data_, bytes), "cudaMalloc workspace")) data_ = nullptr;
#else
    ADD_FAILURE() << "harness: device workspace in a build without CUDA";
#endif
    return;
  }
  data_ = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  // Garbage, not zeros: a backend must not rely on a cleared workspace.
  if (data_ != nullptr) std::memset(data_, 0xa5, bytes);
}

Workspace::~Workspace() {
  if (data_ == nullptr) return;
  if (memory_ == EPIGEMM_MEMORY_DEVICE) {
#ifdef EPIGEMM_TESTS_WITH_CUDA
    cudaFree(data_);
#endif
  } else {
    std::free(data_);
  }
}

Stream::Stream(epigemm_memory_t memory) {
  if (memory != EPIGEMM_MEMORY_DEVICE) return;
#ifdef EPIGEMM_TESTS_WITH_CUDA
  cudaStream_t s = nullptr;
  if (cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate")) stream_ = s;
#endif
}

Stream::~Stream() {
#ifdef EPIGEMM_TESTS_WITH_CUDA
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
#endif
}

void Stream::synchronize() const {
#ifdef EPIGEMM_TESTS_WITH_CUDA
  if (stream_ != nullptr) cuda_ok(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
#endif
}

}  // namespace epigemm_test
