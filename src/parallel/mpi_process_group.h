// ProcessGroup over an MPI communicator. Blocking collectives run on the caller's thread on
// the group's communicator. Asynchronous collectives run, in the order they were issued, on
// one worker thread per group, on a duplicate of the communicator: the worker sits inside
// the MPI call and drives it to completion while the caller computes, which is what makes
// overlap real (OpenMPI does not progress non-blocking collectives on its own). Ranks issue
// a group's asynchronous collectives in the same order, so the worker's FIFO order matches
// across ranks. Point-to-point uses MPI_Isend/MPI_Irecv completed in wait().
// Collectives larger than MPI's int count (all-reduce, all-gather, reduce-scatter,
// broadcast) run as several calls. Needs MPI_THREAD_MULTIPLE.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "parallel/process_group.h"

namespace mindspeed {

/// Takes ownership of `comm` (not freed: freeing is collective and happens in MPI_Finalize).
std::unique_ptr<ProcessGroup> make_mpi_process_group(MPI_Comm comm, std::string name,
                                                     std::vector<int> global_ranks);

/// Tests only: the most elements one MPI call moves (INT_MAX by default), so the pieced
/// path of collectives beyond INT_MAX elements runs on small buffers. Not thread-safe: set it
/// while no collective is in flight.
void set_mpi_max_count_for_testing(int64_t count);

}  // namespace mindspeed
