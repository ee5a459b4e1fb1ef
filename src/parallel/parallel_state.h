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
  /// 2D tensor parallelism (--tp-2d): the tensor-parallel ranks as an X x Y grid (tensor =
  /// tp_x * tp_y); tp_x 0 = 1-D tensor parallelism.
  int tp_x = 0, tp_y = 0;
};

class ParallelState {
 public:
  int world_size = 1;
  int world_rank = 0;
  ParallelSizes sizes;
  int tp_rank = 0, pp_rank = 0, cp_rank = 0, dp_rank = 0, ep_rank = 0, etp_rank = 0;
  int tp_x_rank = 0,
      tp_y_rank = 0;  ///< 2D tensor parallelism: tp_rank = tp_y_rank * tp_x + tp_x_rank

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

  // 2D tensor parallelism (MindSpeed's parallel_state_2d.py): the X groups are runs of tp_x
  // consecutive ranks of a tp group, the Y groups every tp_x-th rank of it.
  bool tp_2d() const { return sizes.tp_x > 0; }
  ProcessGroup& tp_x() const { return *tp_x_; }
  ProcessGroup& tp_y() const { return *tp_y_; }
  /// The attention of a 2D layer spans the Y group united with the context-parallel group
  /// (MindSpeed's TensorParallelYUnionCP, ordered cp-major): this state's cp and cp_ulysses
  /// groups are that union (Ulysses over Y * CP ranks), its ring group one rank.
  const ParallelState& attention_2d() const { return *attention_2d_; }
  /// The X and Y groups in the tensor-parallel role (tp(), sizes.tensor, tp_rank), for the
  /// chunked GEMM + collective ops of comm_gemm.h on one axis.
  const ParallelState& tp_x_as_tp() const { return *tp_x_as_tp_; }
  const ParallelState& tp_y_as_tp() const { return *tp_y_as_tp_; }

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
  std::unique_ptr<ProcessGroup> tp_x_, tp_y_;  ///< 2D tensor parallelism only
  std::unique_ptr<ParallelState> attention_2d_, tp_x_as_tp_,
      tp_y_as_tp_;  ///< 2D tensor parallelism only
};

}  // namespace mindspeed
