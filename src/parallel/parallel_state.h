// ParallelState: this rank's coordinates and process groups (port of
// megatron/core/parallel_state.py, passed explicitly like the newer ProcessGroupCollection
// rather than kept in module globals). It is the only process-wide state of a run.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "parallel/process_group.h"
#include "parallel/staged_process_group.h"

namespace mindspeed {

struct ParallelSizes {
  int tensor = 1;    ///< --tensor-model-parallel-size
  int pipeline = 1;  ///< --pipeline-model-parallel-size
  int context = 1;   ///< --context-parallel-size
  int expert = 1;    ///< --expert-model-parallel-size (times tp with --moe-tp-extend-ep)
  int expert_tensor = 1;  ///< --expert-tensor-parallel-size (1 with --moe-tp-extend-ep)
  int expert_data = 1;    ///< world / (expert_tensor * expert * pipeline)
  int data = 1;      ///< world / (tensor * pipeline * context)
};

class ParallelState {
 public:
  int world_size = 1;
  int world_rank = 0;
  ParallelSizes sizes;
  int tp_rank = 0, pp_rank = 0, cp_rank = 0, dp_rank = 0, ep_rank = 0, etp_rank = 0;

  ProcessGroup& world() const { return *world_; }
  ProcessGroup& tp() const { return *tp_; }
  ProcessGroup& pp() const { return *pp_; }
  ProcessGroup& cp() const { return *cp_; }
  /// Context parallelism's two levels (MindSpeed hybrid CP): the Ulysses all-to-all group
  /// (the whole cp group for ulysses_cp_algo, one rank for the ring) and the ring group
  /// (the whole cp group for megatron_cp_algo, one rank for Ulysses).
  ProcessGroup& cp_ulysses() const { return *cp_ulysses_; }
  ProcessGroup& cp_ring() const { return *cp_ring_; }
  ProcessGroup& dp() const { return *dp_; }        ///< data parallel, without context parallel
  ProcessGroup& dp_cp() const { return *dp_cp_; }  ///< the DDP / distributed-optimizer group
  ProcessGroup& mp() const { return *mp_; }        ///< model parallel: tp x pp
  ProcessGroup& embedding() const { return *embedding_; }  ///< first and last pipeline stage
  ProcessGroup& tp_cp() const { return *tp_cp_; }  ///< MoE: the router's sequence-partition group
  ProcessGroup& tp_dp_cp() const { return *tp_dp_cp_; }  ///< MoE: the expert-bias token counts
  // Mixture of experts (Megatron's expert rank generator: etp x ep x edp x pp).
  ProcessGroup& ep() const { return *ep_; }                ///< expert parallel
  ProcessGroup& expert_tp() const { return *expert_tp_; }  ///< expert tensor parallel
  ProcessGroup& tp_ep() const { return *tp_ep_; }          ///< expert tensor x expert parallel
  ProcessGroup& tp_ep_pp() const { return *tp_ep_pp_; }    ///< expert model parallel (expert grad norm)
  ProcessGroup& expert_dp() const { return *expert_dp_; }  ///< expert data parallel (expert grad reduction)

  bool is_pipeline_first_stage() const { return pp_rank == 0; }
  bool is_pipeline_last_stage() const { return pp_rank == sizes.pipeline - 1; }

  /// One process: every group has one member.
  static std::unique_ptr<ParallelState> single_process();

  /// Every group behind staged collectives (parallel/staged_process_group.h): for a backend whose
  /// buffers live in device memory and whose groups move host memory.
  void stage_collectives_through_host(const DeviceTransfers& transfers);

  /// Sets the communication buffer (ProcessGroup::set_buffer_bytes) of the group each MindSpeed
  /// key names (config/group_buffers.h), sizes in MB; returns a line per key saying which group
  /// got what, or that this engine has no group of that key.
  std::vector<std::string> set_group_buffers(const std::map<std::string, int64_t>& megabytes);

  std::unique_ptr<ProcessGroup> world_, tp_, pp_, cp_, cp_ulysses_, cp_ring_, dp_, dp_cp_, mp_, embedding_;
  std::unique_ptr<ProcessGroup> tp_cp_, tp_dp_cp_, ep_, expert_tp_, tp_ep_, tp_ep_pp_, expert_dp_;
};

}  // namespace mindspeed
