// The compute backend of a run, chosen in one place (select_backend): the kernel table and
// the context every kernel call carries. Model, parallel and training code reach compute
// only through a Backend (and the allocator); they never include a backend's own headers
// (kernels/cpu/, kernels/blas/). Today there is the CPU backend (reference or fast kernels,
// OpenMP thread pool, OpenBLAS); a CUDA backend adds a table of device kernels, its stream
// in KernelContext and a device allocator, behind the same struct.
#pragma once

#include "kernels/kernels.h"

namespace mindspeed {

struct Backend {
  KernelTable kernels;
  KernelContext context;
};

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
