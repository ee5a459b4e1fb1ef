// select_backend (backend.h).
#include "kernels/backend.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "core/rng.h"
#include "kernels/blas/gemm.h"
#include "kernels/fenced/fenced_device.h"

namespace mindspeed {

int default_threads_per_rank(int ranks_on_node) {
  const int cores = static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
  return std::max(1, cores / std::max(1, ranks_on_node));
}

Backend select_backend(const KernelOptions& options, int threads) {
  if (threads <= 0) threads = omp_get_max_threads();
  omp_set_num_threads(threads);
  blas_set_num_threads(threads);
  Backend backend;
  backend.kernels = select_kernels(options);
  if (options.profile_kernels) backend.kernels = profiled_kernels(backend.kernels);
  backend.context.num_threads = threads;
  return backend;
}

void set_deterministic_threads() { omp_set_dynamic(0); }

StatusOr<Backend> select_device_backend(DeviceKind device, const KernelOptions& options, int threads,
                                        const CudaOptions& cuda) {
  switch (device) {
    case DeviceKind::kCpu: return select_backend(options, threads);
    case DeviceKind::kCpuFenced: {
      // Profiling wraps the fence, as it wraps a GPU's kernels: its cost functions run on the host.
      KernelOptions unprofiled = options;
      unprofiled.profile_kernels = false;
      Backend backend = select_backend(unprofiled, threads);
      backend.kernels = fenced::fenced_kernels(backend.kernels);
      if (options.profile_kernels) backend.kernels = profiled_kernels(backend.kernels, true);
      backend.device = DeviceKind::kCpuFenced;
      return backend;
    }
    case DeviceKind::kCuda: {
      MS_ASSIGN_OR_RETURN(Backend backend, select_cuda_backend(options, cuda));
      if (options.profile_kernels) backend.kernels = profiled_kernels(backend.kernels, true);
      return backend;
    }
  }
  return invalid_argument("unknown device");
}

StatusOr<int> cuda_device_of_rank(int local_rank, const DeviceProbe& probe) {
  if (!probe.cuda_built || probe.cuda_devices == 0) {
    return failed_precondition("--device cuda: ", probe.reason.empty() ? "no GPU" : probe.reason);
  }
  const char* launcher_local_rank = std::getenv("LOCAL_RANK");
  if (launcher_local_rank != nullptr) local_rank = std::atoi(launcher_local_rank);
  return local_rank % probe.cuda_devices;
}

StatusOr<std::unique_ptr<MemorySource>> device_memory_source(const Backend& backend) {
  switch (backend.device) {
    case DeviceKind::kCpu: return host_memory_source();
    case DeviceKind::kCpuFenced: return fenced::device_memory();
    case DeviceKind::kCuda: return cuda_device_memory(backend.cuda_device);
  }
  return invalid_argument("unknown device");
}

Tensor device_zeros(const Backend& backend, Allocator& allocator, Shape shape, DType dtype, MemoryCategory category) {
  Tensor t(allocator, shape, dtype, category);
  backend.kernels.zero_bytes(backend.context, t.data(), t.nbytes());
  return t;
}

namespace {
template <typename T>
Tensor device_copy(const Backend& backend, Allocator& allocator, std::span<const T> host,
                   DType dtype, MemoryCategory category) {
  Tensor t(allocator, Shape{static_cast<int64_t>(host.size())}, dtype, category);
  backend.kernels.copy_to_device(backend.context, t.data(), host.data(),
                                 static_cast<int64_t>(host.size_bytes()));
  return t;
}
}  // namespace

Tensor device_copy_of(const Backend& backend, Allocator& allocator, std::span<const float> host,
                      MemoryCategory category) {
  return device_copy(backend, allocator, host, DType::kFloat32, category);
}

Tensor device_copy_of(const Backend& backend, Allocator& allocator, std::span<const int32_t> host,
                      MemoryCategory category) {
  return device_copy(backend, allocator, host, DType::kInt32, category);
}

std::vector<float> host_copy_of(const Backend& backend, const float* device, int64_t n) {
  std::vector<float> host(static_cast<size_t>(n));
  backend.kernels.copy_to_host(backend.context, host.data(), device,
                               n * static_cast<int64_t>(sizeof(float)));
  return host;
}

double measure_gemm_tflops(const Backend& backend, Allocator& allocator, int64_t n, int calls) {
  std::vector<float> host(static_cast<size_t>(n * n));
  fill_normal(host.data(), n * n, 0.0f, 1.0f, RngStream{1234, 0x67656d6d /*"gemm"*/});
  const Tensor a = device_copy_of(backend, allocator, host, MemoryCategory::kWorkspace);
  const Tensor b = device_copy_of(backend, allocator, host, MemoryCategory::kWorkspace);
  Tensor c(allocator, Shape{n, n}, DType::kFloat32, MemoryCategory::kWorkspace);
  const KernelTable& k = backend.kernels;
  for (int i = 0; i < 3; ++i)
    k.linear_forward(backend.context, c.f32(), a.f32(), b.f32(), nullptr, n, n, n);
  k.synchronize(backend.context);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    k.linear_forward(backend.context, c.f32(), a.f32(), b.f32(), nullptr, n, n, n);
  k.synchronize(backend.context);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) * calls /
         seconds / 1e12;
}

double measure_flash_attention_forward_seconds(const Backend& backend, Allocator& allocator,
                                               const AttentionDims& dims, float dropout_p,
                                               int calls) {
  const int64_t nq = dims.B * dims.NQ * dims.T * dims.D,
                nkv = dims.B * dims.NKV * dims.keys() * dims.D;
  std::vector<float> host(static_cast<size_t>(std::max(nq, nkv)));
  fill_normal(host.data(), static_cast<int64_t>(host.size()), 0.0f, 1.0f,
              RngStream{1234, 0x61747461 /*"atta"*/});
  const std::span<const float> q_host(host.data(), static_cast<size_t>(nq)),
      kv_host(host.data(), static_cast<size_t>(nkv));
  const Tensor q = device_copy_of(backend, allocator, q_host, MemoryCategory::kWorkspace);
  const Tensor k = device_copy_of(backend, allocator, kv_host, MemoryCategory::kWorkspace);
  const Tensor v = device_copy_of(backend, allocator, kv_host, MemoryCategory::kWorkspace);
  Tensor out(allocator, Shape{nq}, DType::kFloat32, MemoryCategory::kWorkspace);
  Tensor lse(allocator, Shape{dims.B * dims.NQ * dims.T}, DType::kFloat32,
             MemoryCategory::kWorkspace);
  const KernelTable& kt = backend.kernels;
  Tensor ws(allocator,
            Shape{std::max<int64_t>(1, kt.attention_workspace_floats(
                                           backend.context, dims, AttentionKernel::kFlash, false))},
            DType::kFloat32, MemoryCategory::kWorkspace);
  const AttentionMask causal;
  DropoutSpec dropout;
  dropout.p = dropout_p;
  dropout.rng = RngStream{1234, 0x64726f70 /*"drop"*/};
  auto call = [&] {
    kt.flash_attention_forward(backend.context, out.f32(), lse.f32(), q.f32(), k.f32(), v.f32(),
                               causal, dims, dropout, ws.f32());
    kt.synchronize(backend.context);
  };
  call();
  std::vector<double> seconds;
  for (int i = 0; i < std::max(1, calls); ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + static_cast<int64_t>(seconds.size() / 2),
                   seconds.end());
  return seconds[seconds.size() / 2];
}

bool is_device_memory(const Backend& backend, const void* ptr) {
  switch (backend.device) {
    case DeviceKind::kCpu: return false;
    case DeviceKind::kCpuFenced: return fenced::is_device_pointer(ptr);
    case DeviceKind::kCuda: return cuda_is_device_pointer(ptr);
  }
  return false;
}

#ifndef MS_HAVE_CUDA
// A build without the CUDA toolkit (kernels/cuda/cuda_backend.cpp holds the real ones).
DeviceProbe probe_devices() {
  DeviceProbe probe;
  probe.reason = "this build has no CUDA backend (configured without the CUDA toolkit)";
  return probe;
}

StatusOr<Backend> select_cuda_backend(const KernelOptions&, const CudaOptions&) {
  return unimplemented(
      "this build has no CUDA backend: configure with the CUDA toolkit (cmake --preset cuda)");
}

StatusOr<std::unique_ptr<MemorySource>> cuda_device_memory(int) {
  return unimplemented("this build has no CUDA backend: no device memory");
}

StatusOr<std::unique_ptr<MemorySource>> cuda_pinned_host_memory() {
  return unimplemented("this build has no CUDA backend: no pinned host memory");
}

bool cuda_is_device_pointer(const void*) { return false; }
#endif

}  // namespace mindspeed
