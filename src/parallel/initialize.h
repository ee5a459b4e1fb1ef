// Start-up of a run (port of megatron/training/initialize.py and
// parallel_state.initialize_model_parallel): MPI with MPI_THREAD_MULTIPLE, the fatal handler
// that turns any rank's failure into MPI_Abort of the whole job (with the rank and reason
// printed first), the process groups built with MPI_Comm_split from the rank generator,
// and the OpenMP thread count per rank.
#pragma once

#include <memory>

#include "config/parallel_config.h"
#include "core/status.h"
#include "parallel/parallel_state.h"

namespace mindspeed {

struct MpiWorld {
  int rank = 0;
  int size = 1;
  int local_size = 1;  ///< ranks on this node
  int local_rank = 0;
};

/// MPI_Init_thread + the fatal handler + the "[rank r]" log prefix.
MpiWorld initialize_mpi(int* argc, char*** argv);
/// MPI_Finalize (every rank, on the success and the validation-error paths).
void finalize_mpi();

/// Builds every process group of the layout (all ranks call it together).
StatusOr<std::unique_ptr<ParallelState>> initialize_model_parallel(const ParallelConfig& config,
                                                                   const MpiWorld& world);


}  // namespace mindspeed
