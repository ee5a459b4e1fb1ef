// select_backend (backend.h).
#include "kernels/backend.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>

#include "kernels/blas/gemm.h"

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
#endif

}  // namespace mindspeed
