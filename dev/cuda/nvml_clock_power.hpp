// The GPU's SM clock and power draw through NVML, for the labs that ask what a kernel costs at
// the clock the GPU grants it under sustained load (the H200 lowers its SM clock to stay under its
// power limit, so a kernel that moves more data runs at a lower clock). The energy of a stretch of
// calls is taken as its mean sampled power times its time: NVML's energy counter, read before and
// after stretches of 0.7-1 s at a steady 690 W, was up to 8% off that product, and the ratio of two
// kernels' energies up to 12% off.
//
// NVML comes with the driver (libnvidia-ml.so.1), not with the CUDA toolkit's headers on every
// machine, so it is opened at run time and its few functions are declared here with NVML's C
// signatures. Where it cannot be opened, available() is false and the lab says so.
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace epigemm_lab {

class NvmlClockPower {
 public:
  // The NVML device of a CUDA device (matched by its PCI bus id: NVML's indices follow another order).
  explicit NvmlClockPower(int cuda_device) {
    library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) {
      why_ = "libnvidia-ml.so.1 not found";
      return;
    }
    init_ = reinterpret_cast<Init>(dlsym(library_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<Shutdown>(dlsym(library_, "nvmlShutdown"));
    by_bus_id_ = reinterpret_cast<ByBusId>(dlsym(library_, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock_ = reinterpret_cast<Clock>(dlsym(library_, "nvmlDeviceGetClockInfo"));
    power_ = reinterpret_cast<Power>(dlsym(library_, "nvmlDeviceGetPowerUsage"));
    if (!init_ || !shutdown_ || !by_bus_id_ || !clock_ || !power_) {
      why_ = "libnvidia-ml.so.1 lacks a function this lab needs";
      return;
    }
    if (init_() != 0) {
      why_ = "nvmlInit_v2 failed";
      return;
    }
    initialized_ = true;
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, int(sizeof(bus_id)), cuda_device) != cudaSuccess ||
        by_bus_id_(bus_id, &device_) != 0) {
      why_ = std::string("no NVML device for PCI bus id ") + bus_id;
      return;
    }
    unsigned probe = 0;
    if (power_(device_, &probe) != 0) {
      why_ = "the device does not report its power draw";
      return;
    }
    ok_ = true;
  }
  ~NvmlClockPower() {
    if (initialized_) shutdown_();
    if (library_ != nullptr) dlclose(library_);
  }
  NvmlClockPower(const NvmlClockPower&) = delete;
  NvmlClockPower& operator=(const NvmlClockPower&) = delete;

  bool available() const { return ok_; }
  const std::string& why_not() const { return why_; }

  unsigned sm_clock_mhz() const {
    unsigned mhz = 0;
    clock_(device_, kClockSm, &mhz);
    return mhz;
  }
  unsigned power_mw() const {
    unsigned mw = 0;
    power_(device_, &mw);
    return mw;
  }

 private:
  struct Device;  // nvmlDevice_t is an opaque pointer
  using Init = int (*)();
  using Shutdown = int (*)();
  using ByBusId = int (*)(const char*, Device**);
  using Clock = int (*)(Device*, int, unsigned*);
  using Power = int (*)(Device*, unsigned*);
  static constexpr int kClockSm = 1;  // NVML_CLOCK_SM

  void* library_ = nullptr;
  Init init_ = nullptr;
  Shutdown shutdown_ = nullptr;
  ByBusId by_bus_id_ = nullptr;
  Clock clock_ = nullptr;
  Power power_ = nullptr;
  Device* device_ = nullptr;
  bool initialized_ = false;
  bool ok_ = false;
  std::string why_;
};

// The mean SM clock and power over a stretch of time, sampled every `period` by a thread of its
// own from construction to stop().
class ClockPowerSampler {
 public:
  ClockPowerSampler(const NvmlClockPower& nvml, std::chrono::milliseconds period)
      : thread_([this, &nvml, period] {
          while (!stop_.load()) {
            clock_sum_ += nvml.sm_clock_mhz();
            power_sum_ += nvml.power_mw();
            ++samples_;
            std::this_thread::sleep_for(period);
          }
        }) {}
  ~ClockPowerSampler() { stop(); }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  double mean_clock_mhz() const { return samples_ == 0 ? 0.0 : double(clock_sum_) / double(samples_); }
  double mean_power_w() const { return samples_ == 0 ? 0.0 : double(power_sum_) / double(samples_) / 1000.0; }

 private:
  std::atomic<bool> stop_{false};
  unsigned long long clock_sum_ = 0, power_sum_ = 0, samples_ = 0;
  std::thread thread_;
};

}  // namespace epigemm_lab
