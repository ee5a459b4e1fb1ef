// The CUDA backend (kernels/backend.h): the GPUs this process sees, its per-rank state
// (device, stream, cuBLASLt handle and workspace, reduction scratch) and its kernel table.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "core/str_cat.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"

namespace mindspeed {
namespace cuda {
namespace {

constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's recommendation for Hopper
constexpr size_t kScratchBytes = size_t{1} << 20;

// The state and what it owns, released in reverse order when the last Backend copy goes.
struct OwnedState {
  DeviceState state;
  ~OwnedState() {
    cudaSetDevice(state.device);
    if (state.stream != nullptr) cudaStreamSynchronize(state.stream);
    if (state.host_scratch != nullptr) cudaFreeHost(state.host_scratch);
    if (state.bf16_gemm_scratch != nullptr) cudaFree(state.bf16_gemm_scratch);
    if (state.scratch != nullptr) cudaFree(state.scratch);
    if (state.gemm_workspace != nullptr) cudaFree(state.gemm_workspace);
    if (state.cublaslt != nullptr) cublasLtDestroy(state.cublaslt);
    if (state.stream != nullptr) cudaStreamDestroy(state.stream);
  }
};

Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return ok_status();
  return failed_precondition(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error),
                             ")");
}

}  // namespace

KernelTable select_cuda_kernels(const KernelOptions& options) {
  KernelTable t;
  t.name = "cuda";
  fill_elementwise_kernels(t);
  fill_normalization_kernels(t);
  fill_activation_kernels(t);
  fill_dropout_kernels(t);
  fill_embedding_kernels(t);
  fill_rope_kernels(t);
  fill_attention_kernels(t, options);
  fill_cross_entropy_kernels(t);
  fill_optimizer_kernels(t);
  fill_moe_kernels(t);
  fill_ring_attention_kernels(t);
  fill_gemm_kernels(t);
  return t;
}

std::vector<std::string> missing_cuda_kernels() {
  const KernelTable t = select_cuda_kernels(KernelOptions{.flash_attention = true});
  std::vector<std::string> missing;
  for_each_kernel_op(t, [&](const char* name, bool present) {
    if (!present) missing.emplace_back(name);
  });
  return missing;
}

}  // namespace cuda

DeviceProbe probe_devices() {
  DeviceProbe probe;
  probe.cuda_built = true;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear it: no device is not an error of later calls
    probe.reason = str_cat("cudaGetDeviceCount: ", cudaGetErrorName(error), " (",
                           cudaGetErrorString(error), ")");
    return probe;
  }
  probe.cuda_devices = count;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) {
      probe.names.push_back(str_cat(prop.name, " (sm_", prop.major, prop.minor, ", ",
                                    prop.totalGlobalMem >> 20, " MiB)"));
    }
  }
  if (count == 0) probe.reason = "cudaGetDeviceCount: 0 devices";
  return probe;
}

StatusOr<Backend> select_cuda_backend(const KernelOptions& options,
                                      const CudaOptions& cuda_options) {
  auto owned = std::make_shared<cuda::OwnedState>();
  cuda::DeviceState& s = owned->state;
  s.device = cuda_options.device;
  s.allow_tf32 = cuda_options.allow_tf32;
  s.bf16_gemm_inputs = cuda_options.bf16_gemm_inputs;
  MS_RETURN_IF_ERROR(
      cuda::cuda_status(cudaSetDevice(s.device), str_cat("cudaSetDevice(", s.device, ")").c_str()));
  MS_RETURN_IF_ERROR(cuda::cuda_status(
      cudaDeviceGetAttribute(&s.num_sms, cudaDevAttrMultiProcessorCount, s.device),
      "cudaDeviceGetAttribute"));
  MS_RETURN_IF_ERROR(cuda::cuda_status(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking),
                                       "cudaStreamCreate"));
  if (cublasLtCreate(&s.cublaslt) != CUBLAS_STATUS_SUCCESS)
    return failed_precondition("cublasLtCreate failed");
  s.gemm_workspace_bytes = cuda::kGemmWorkspaceBytes;
  MS_RETURN_IF_ERROR(cuda::cuda_status(cudaMalloc(&s.gemm_workspace, s.gemm_workspace_bytes),
                                       "cudaMalloc (GEMM workspace)"));
  s.scratch_bytes = cuda::kScratchBytes;
  MS_RETURN_IF_ERROR(
      cuda::cuda_status(cudaMalloc(&s.scratch, s.scratch_bytes), "cudaMalloc (scratch)"));
  MS_RETURN_IF_ERROR(
      cuda::cuda_status(cudaMallocHost(&s.host_scratch, 4096), "cudaMallocHost (scratch)"));
  Backend backend;
  backend.kernels = cuda::select_cuda_kernels(options);
  backend.context.num_threads = 1;
  backend.context.stream = s.stream;
  backend.context.device = &s;
  backend.device = DeviceKind::kCuda;
  backend.cuda_device = s.device;
  backend.owner = std::move(owned);
  return backend;
}

}  // namespace mindspeed
