// The compute backend of a run, chosen in one place (select_backend): the kernel table and
// the context every kernel call carries. Model, parallel and training code reach compute
// only through a Backend (and the allocator); they never include a backend's own headers
// (kernels/cpu/, kernels/blas/, kernels/cuda/). The CPU backend: reference or fast kernels,
// OpenMP thread pool, OpenBLAS. The CUDA backend (built when the toolkit is found): device
// kernels on one stream, cuBLASLt GEMMs; its state lives as long as any copy of the Backend.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/status.h"
#include "core/tensor.h"
#include "kernels/kernels.h"

namespace mindspeed {

struct Backend {
  KernelTable kernels;
  KernelContext context;
  DeviceKind device = DeviceKind::kCpu;
  int cuda_device = 0;  ///< the GPU (DeviceKind::kCuda)
  /// What the context points to (the CUDA backend's device state); null on the CPU.
  std::shared_ptr<void> owner;
  /// Host and device memory are one (the CPU): data needs no transfer.
  bool unified_memory() const { return device == DeviceKind::kCpu; }
};

/// The devices this process could run on: whether this build has the CUDA backend, and the
/// GPUs the CUDA runtime shows it (0, with the runtime's reason, when none or no driver).
struct DeviceProbe {
  bool cuda_built = false;
  int cuda_devices = 0;
  std::string reason;              ///< why there is no GPU (empty when there is one)
  std::vector<std::string> names;  ///< "NVIDIA H100 80GB HBM3 (sm_90, 81559 MiB)" per GPU
};
DeviceProbe probe_devices();

/// The GPU of a rank, as torchrun and Megatron map them: the launcher's LOCAL_RANK when set,
/// else `local_rank` (MPI's node-local rank), modulo the GPUs of `probe`. FailedPrecondition
/// with the runtime's reason when there is no GPU.
StatusOr<int> cuda_device_of_rank(int local_rank, const DeviceProbe& probe);

struct CudaOptions {
  int device = 0;           ///< the GPU's index among the visible ones
  bool allow_tf32 = false;  ///< fp32 GEMMs may use TF32 tensor cores
  /// --bf16: GEMM inputs rounded to bf16 on the tensor cores, fp32 accumulation and output
  /// (Megatron's bf16 GEMMs); the CPU backend keeps fp32 GEMMs on bf16-exact weights.
  bool bf16_gemm_inputs = false;
};
/// The CUDA backend on GPU `cuda.device`: its stream, cuBLASLt handle and workspace, and the
/// CUDA kernel table (the ops it lacks are null: cuda::missing_cuda_kernels()). Fails with the
/// runtime's reason (no GPU, bad index, out of memory), or unimplemented in a CPU-only build.
StatusOr<Backend> select_cuda_backend(const KernelOptions& options, const CudaOptions& cuda);

/// The backend of --device: select_backend (cpu), its kernels behind the fence (cpu-fenced,
/// kernels/fenced/), or select_cuda_backend (cuda). `threads`: OpenMP threads of the CPU kernels.
StatusOr<Backend> select_device_backend(DeviceKind device, const KernelOptions& options, int threads,
                                        const CudaOptions& cuda);
/// Where the backend's kernels keep their data (activations, parameters, gradients, optimizer
/// state): host memory, the fenced arena, or the GPU's memory.
StatusOr<std::unique_ptr<MemorySource>> device_memory_source(const Backend& backend);
/// True when `ptr` is device memory of the backend (always false on the CPU, where host and
/// device memory are one).
bool is_device_memory(const Backend& backend, const void* ptr);

/// A tensor of zeros in the backend's memory (Tensor::zeros writes them from the host, which a
/// device's memory does not allow).
Tensor device_zeros(const Backend& backend, Allocator& allocator, Shape shape, DType dtype, MemoryCategory category);
/// A copy of host values in the backend's memory ([n] of kFloat32 / kInt32): what host code
/// computed (MoE routing, per-row factors) handed to the kernels.
Tensor device_copy_of(const Backend& backend, Allocator& allocator, std::span<const float> host,
                      MemoryCategory category);
Tensor device_copy_of(const Backend& backend, Allocator& allocator, std::span<const int32_t> host,
                      MemoryCategory category);
/// n values the kernels wrote, copied into host memory for host code to read.
std::vector<float> host_copy_of(const Backend& backend, const float* device /*[n]*/, int64_t n);

/// The backend's GEMM rate in TFLOP/s: linear_forward on random n x n x n operands (normal
/// values: the power a real GEMM draws), after warm-up calls, timed over `calls` calls up to a
/// synchronize. With CudaOptions::bf16_gemm_inputs it is the bf16 tensor-core rate. The peak the
/// log's MFU is taken against on a GPU when --peak-tflops is not given.
double measure_gemm_tflops(const Backend& backend, Allocator& allocator, int64_t n, int calls);

/// Seconds of one causal flash_attention_forward of `dims` (q, k, v of normal values) with
/// attention dropout `dropout_p` (its position-keyed masks drawn as in training), after a warm-up
/// call, the median of `calls` calls each up to a synchronize: what the auto-settings profile
/// charges selective recompute (it re-runs the core attention's forward).
double measure_flash_attention_forward_seconds(const Backend& backend, Allocator& allocator,
                                               const AttentionDims& dims, float dropout_p,
                                               int calls);

/// Memory sources for an Allocator (core/allocator.h) on the CUDA backend: device memory of GPU
/// `device` (cudaMalloc), and pinned host memory (cudaMallocHost) for host <-> device copies.
/// Fail without that GPU, or in a CPU-only build.
StatusOr<std::unique_ptr<MemorySource>> cuda_device_memory(int device);
StatusOr<std::unique_ptr<MemorySource>> cuda_pinned_host_memory();
/// True for device (or managed) memory of a GPU.
bool cuda_is_device_pointer(const void* ptr);

/// The CPU backend: kernels chosen by `options`; `threads` OpenMP/BLAS threads per rank
/// (threads <= 0: the current OpenMP default, i.e. OMP_NUM_THREADS). Sets the OpenMP default
/// and the BLAS thread count to the same number.
Backend select_backend(const KernelOptions& options, int threads = 0);

/// Threads per rank when --num-threads is not given: the online cores divided by the ranks
/// on this node (at least 1).
int default_threads_per_rank(int ranks_on_node);

/// --deterministic-mode: a fixed OpenMP team size in every parallel region (our kernels and
/// reductions are deterministic at a fixed thread count already).
void set_deterministic_threads();

}  // namespace mindspeed
