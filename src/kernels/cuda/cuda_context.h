// The CUDA backend's per-rank state, what KernelContext::stream and ::device point to on that
// backend: the stream every kernel of the run is queued on, cuBLASLt's handle and workspace,
// and a scratch area for the reductions that hand a scalar back to the host.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/kernel_types.h"

namespace mindspeed::cuda {

struct DeviceState {
  int device = 0;
  int num_sms = 0;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  void* gemm_workspace = nullptr;  ///< cuBLASLt's workspace (device)
  size_t gemm_workspace_bytes = 0;
  void* scratch = nullptr;  ///< reductions' partial results (device)
  size_t scratch_bytes = 0;
  void* host_scratch = nullptr;  ///< pinned host memory the reductions' results come back to
  /// fp32 GEMMs may use TF32 tensor cores (off by default: fp32 results as the CPU's).
  bool allow_tf32 = false;
  /// --bf16: the GEMMs' inputs rounded to bf16 (tensor cores), fp32 accumulation and output.
  bool bf16_gemm_inputs = false;
  void* bf16_gemm_scratch = nullptr;  ///< the rounded inputs (device; grows, never shrinks)
  size_t bf16_gemm_scratch_bytes = 0;
};

inline DeviceState& device_state(const KernelContext& kc) {
  return *static_cast<DeviceState*>(kc.device);
}
inline cudaStream_t stream_of(const KernelContext& kc) {
  return static_cast<cudaStream_t>(kc.stream);
}

}  // namespace mindspeed::cuda
