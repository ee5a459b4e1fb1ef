// MPI start-up and process groups (initialize.h).
#include "parallel/initialize.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "core/check.h"
#include "parallel/mpi_process_group.h"
#include "parallel/rank_generator.h"

namespace mindspeed {
namespace {

void abort_job(int exit_code) { MPI_Abort(MPI_COMM_WORLD, exit_code == 0 ? 1 : exit_code); }

// The group of `kind` containing `rank`, as a communicator ordered like the group.
std::unique_ptr<ProcessGroup> split_group(const ParallelGroups& groups, const std::string& kind, int rank,
                                          int* rank_in_group) {
  const auto found = groups.groups.find(kind);
  MS_CHECK(found != groups.groups.end(), "build_parallel_groups made no '", kind, "' groups");
  const RankGroups& gs = found->second;
  for (size_t color = 0; color < gs.size(); ++color) {
    const auto it = std::find(gs[color].begin(), gs[color].end(), rank);
    if (it == gs[color].end()) continue;
    const int key = static_cast<int>(it - gs[color].begin());
    MPI_Comm comm;
    MS_CHECK(MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(color), key, &comm) == MPI_SUCCESS,
             "MPI_Comm_split for ", kind);
    if (rank_in_group != nullptr) *rank_in_group = key;
    return make_mpi_process_group(comm, kind, gs[color]);
  }
  // Not a member (a middle pipeline stage has no embedding group): the split is collective,
  // so take part with MPI_UNDEFINED, and hold a group of one (its collectives do nothing).
  MPI_Comm none;
  MS_CHECK(MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &none) == MPI_SUCCESS, "MPI_Comm_split for ", kind);
  if (rank_in_group != nullptr) *rank_in_group = 0;
  return make_single_process_group(kind, rank);
}

// A launcher that started several processes without bootstrapping MPI among them (PyTorch's
// own torchrun, srun without PMIx) leaves each one a world of one: they would train apart and
// overwrite each other's checkpoints. The launcher's variables say so; the job stops naming
// the launch that works.
void check_launcher_agrees(const MpiWorld& world) {
  if (world.size != 1) return;
  auto count = [](const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr ? 0 : std::atoi(v);
  };
  if (const int n = count("WORLD_SIZE"); n > 1) {
    fatal(str_cat(
        "WORLD_SIZE=", n,
        " (set by PyTorch's torchrun or another launcher), but MPI sees a world of 1 process: ",
        "this engine's ranks form their world through MPI. Launch with mindspeed-cpp's "
        "tools/torchrun (the same ",
        "flags as PyTorch's), mpirun, or srun --mpi=pmix"));
  }
  if (const int n = count("SLURM_STEP_NUM_TASKS");
      n > 1 && std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) {
    fatal(str_cat("srun started ", n,
                  " tasks, but MPI sees a world of 1 process: start them with srun --mpi=pmix ",
                  "(Slurm's PMIx plugin bootstraps MPI), or one tools/torchrun per node (srun "
                  "--ntasks-per-node=1 torchrun ...)"));
  }
}

}  // namespace

MpiWorld initialize_mpi(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  MpiWorld world;
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world.size);
  set_log_rank(world.rank);
  set_fatal_handler(abort_job);
  if (provided < MPI_THREAD_MULTIPLE) {
    fatal("the MPI library does not provide MPI_THREAD_MULTIPLE (needed for overlapped communication)");
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world.rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &world.local_size);
  MPI_Comm_rank(node, &world.local_rank);
  MPI_Comm_free(&node);
  check_launcher_agrees(world);
  return world;
}

void finalize_mpi() {
  set_fatal_handler(nullptr);
  MPI_Finalize();
}

StatusOr<std::unique_ptr<ParallelState>> initialize_model_parallel(const ParallelConfig& config,
                                                                   const MpiWorld& world) {
  const ParallelLayout layout = parallel_layout(config, world.size);
  MS_ASSIGN_OR_RETURN(ParallelGroups groups, build_parallel_groups(layout));
  auto ps = std::make_unique<ParallelState>();
  ps->world_size = world.size;
  ps->world_rank = world.rank;
  ps->sizes.tensor = layout.tp;
  ps->sizes.pipeline = layout.pp;
  ps->sizes.context = layout.cp;
  ps->sizes.expert = layout.ep;
  ps->sizes.data = world.size / (layout.tp * layout.pp * layout.cp);
  std::vector<int> all(world.size);
  for (int r = 0; r < world.size; ++r) all[r] = r;
  MPI_Comm world_comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &world_comm);
  ps->world_ = make_mpi_process_group(world_comm, "world", all);
  int unused = 0;
  ps->tp_ = split_group(groups, "tp", world.rank, &ps->tp_rank);
  ps->pp_ = split_group(groups, "pp", world.rank, &ps->pp_rank);
  ps->cp_ = split_group(groups, "cp", world.rank, &ps->cp_rank);
  ps->cp_ulysses_ = split_group(groups, "cp-ulysses", world.rank, &unused);
  ps->cp_ring_ = split_group(groups, "cp-ring", world.rank, &unused);
  ps->dp_ = split_group(groups, "dp", world.rank, &ps->dp_rank);
  ps->dp_cp_ = split_group(groups, "dp-cp", world.rank, &unused);
  ps->mp_ = split_group(groups, "mp", world.rank, &unused);
  ps->embedding_ = split_group(groups, "embedding", world.rank, &unused);
  ps->tp_cp_ = split_group(groups, "tp-cp", world.rank, &unused);
  ps->tp_dp_cp_ = split_group(groups, "tp-dp-cp", world.rank, &unused);
  ps->ep_ = split_group(groups, "ep", world.rank, &ps->ep_rank);
  ps->expert_tp_ = split_group(groups, "expert-tp", world.rank, &ps->etp_rank);
  ps->tp_ep_ = split_group(groups, "tp-ep", world.rank, &unused);
  ps->tp_ep_pp_ = split_group(groups, "tp-ep-pp", world.rank, &unused);
  ps->expert_dp_ = split_group(groups, "expert-dp", world.rank, &unused);
  ps->sizes.expert = ps->ep_->size();
  ps->sizes.expert_tensor = ps->expert_tp_->size();
  ps->sizes.expert_data = ps->expert_dp_->size();
  if (layout.tp_x > 0) {
    ps->sizes.tp_x = layout.tp_x;
    ps->sizes.tp_y = layout.tp / layout.tp_x;
    ps->tp_x_ = split_group(groups, "tp-x", world.rank, &ps->tp_x_rank);
    ps->tp_y_ = split_group(groups, "tp-y", world.rank, &ps->tp_y_rank);
    MS_CHECK(ps->tp_rank == ps->tp_y_rank * layout.tp_x + ps->tp_x_rank,
             "2D tensor-parallel grid out of order");
    // The attention's view: Ulysses over the Y x CP union, no ring.
    auto view = ParallelState::single_process();
    view->world_size = world.size;
    view->world_rank = world.rank;
    view->sizes.context = ps->sizes.tp_y * layout.cp;
    view->cp_ = split_group(groups, "tp-y-cp", world.rank, &view->cp_rank);
    view->cp_ulysses_ = split_group(groups, "tp-y-cp", world.rank, &unused);
    ps->attention_2d_ = std::move(view);
    for (const char* axis : {"tp-x", "tp-y"}) {
      auto as_tp = ParallelState::single_process();
      as_tp->world_size = world.size;
      as_tp->world_rank = world.rank;
      as_tp->tp_ = split_group(groups, axis, world.rank, &as_tp->tp_rank);
      as_tp->sizes.tensor = as_tp->tp_->size();
      (std::string(axis) == "tp-x" ? ps->tp_x_as_tp_ : ps->tp_y_as_tp_) = std::move(as_tp);
    }
  }
  return ps;
}

}  // namespace mindspeed
