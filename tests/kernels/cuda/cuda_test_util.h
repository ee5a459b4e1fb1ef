// What the CUDA kernel tests share: a fixture that skips, with the CUDA runtime's reason, where
// no GPU is visible (the suite is built on every CI run; it runs where a GPU is), and device
// buffers filled from host vectors and read back. Outputs are poisoned (NaN) before a kernel
// writes them, so an element it forgets fails the comparison.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "test_util.h"

namespace mindspeed::testing {

/// A device array of n T's (RAII).
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n_ > 0) MS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), n_ * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : n_(other.n_), ptr_(other.ptr_) {
    other.ptr_ = nullptr;
  }

  T* get() const { return ptr_; }
  operator T*() const { return ptr_; }  // NOLINT: passed to kernels like a pointer
  size_t size() const { return n_; }

  // Both wait for the device: the backend's stream does not wait for the legacy default
  // stream these copies run on, and a pageable host-to-device copy may return before its DMA.
  void upload(const std::vector<T>& host) {
    MS_CHECK(host.size() == n_, "upload of ", host.size(), " values into ", n_);
    if (n_ > 0)
      MS_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    MS_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    MS_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> host(n_);
    if (n_ > 0)
      MS_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  /// Every byte 0xff: NaN for floats, -1 for integers.
  void poison() {
    if (n_ > 0) MS_CUDA_CHECK(cudaMemset(ptr_, 0xff, n_ * sizeof(T)));
    MS_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  size_t n_ = 0;
  T* ptr_ = nullptr;
};

/// A device copy of a host vector whose values the kernel writes: starts as NaN.
template <typename T>
DeviceBuffer<T> poisoned(size_t n) {
  DeviceBuffer<T> b(n);
  b.poison();
  return b;
}

/// The fixture of every CUDA kernel test: the CUDA backend on GPU 0, or a skip naming why
/// there is none.
class CudaKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const DeviceProbe probe = probe_devices();
    if (probe.cuda_devices == 0) GTEST_SKIP() << "no CUDA device: " << probe.reason;
    auto backend = select_cuda_backend(KernelOptions{}, CudaOptions{});
    ASSERT_TRUE(backend.ok()) << backend.status().to_string();
    backend_ = std::move(*backend);
  }
  const KernelContext& kc() const { return backend_.context; }
  const KernelTable& k() const { return backend_.kernels; }
  Backend backend_;
};

/// The reference kernels' context (one thread: the specification).
inline const KernelContext kRefKc{1};

}  // namespace mindspeed::testing
