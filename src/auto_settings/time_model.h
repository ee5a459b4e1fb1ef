// The auto-settings time model: one training step's seconds for a validated configuration,
// split into compute (forward and backward of the busiest pipeline rank, embedding and loss),
// recompute, pipeline bubble, per-step work (optimizer, gradient reduction) and exposed
// communication; and the communication volumes per process group.
// - Measured mode: the profiled costs of the layer shape (profile.h: a + b*L + c*m + d*L*m at
//   micro-batch 1, tensor/context-parallel communication inside d), scaled by the micro-batch
//   size, per pipeline stage (the last one also runs the output layer and the loss), run
//   through the schedule's own plan on the machine's shared cores (step_simulation.h: the
//   bubble of 1F1B, interleaved, DualPipeV; when ranks outnumber cores, a rank waiting in the
//   bubble lends its core to the others). Recompute: a whole forward (full), the core
//   attention's forward as the profile timed the kernel (selective).
// - Analytic mode (a target larger than this machine): the same composition with d and c from
//   FLOPs at a GEMM rate, plus communication bytes at the given or measured bandwidths, where
//   the engine does not overlap them.
// Port of the role of MindSpeed auto_settings' performance model (module/, search/).
#pragma once

#include <map>
#include <string>

#include "auto_settings/memory_model.h"
#include "config/configs.h"
#include "core/status.h"

namespace mindspeed {

/// Seconds of the four cost terms at micro-batch size 1; c and d at micro-batch size b are
/// c * (f + (1 - f) b) with f = fixed_fraction (launch and collective latencies do not grow
/// with the micro-batch, the arithmetic does).
struct LayerTimes {
  double per_step = 0.0;              ///< a
  double per_layer_step = 0.0;        ///< b
  double per_microbatch = 0.0;        ///< c
  double per_layer_microbatch = 0.0;  ///< d
  double fixed_fraction = 0.0;        ///< f
  /// Analytic mode: the communication inside d and b (measured costs include it unseparated).
  double comm_per_layer_microbatch = 0.0, comm_per_layer_step = 0.0;
  /// One layer's core attention forward (part of d): what selective recompute runs again.
  /// Measured: the kernel timed on this machine (profile.h); analytic: its FLOPs at the rate.
  double attention_forward = 0.0;
  double microbatch_scale(int64_t micro_batch_size) const {
    return fixed_fraction + (1.0 - fixed_fraction) * static_cast<double>(micro_batch_size);
  }
};

/// b / (a + b) of the profile fit (profile.h): one layer's parameters over the one-layer
/// model's (the optimizer and the gradient reduction scale with them).
double layer_param_share(const Configs& c);

struct StepTime {
  double compute = 0.0;       ///< forward + backward of the busiest rank's share, all micro-batches
  double recompute = 0.0;     ///< the part of compute that recomputes activations
  double bubble = 0.0;        ///< pipeline idle time of the busiest rank
  double per_step = 0.0;      ///< optimizer, gradient reduction and the step's fixed costs
  double exposed_comm = 0.0;  ///< analytic mode: the communication inside compute and per_step
  double total = 0.0;
};

/// Payload bytes per step by group ("tp", "cp", "pp", "dp_cp", "embedding"), counted as the
/// engine's ProcessGroup::stats() counts them (the whole buffer of each collective; pp: the
/// sends), on the busiest pipeline rank; `memory` gives each stage's parameters.
using CommVolumes = std::map<std::string, double>;
CommVolumes comm_volumes(const Configs& c, int world_size, const MemoryEstimate& memory);

struct ClusterRates {
  double flops_per_second = 0.0;  ///< dense GEMM rate of one rank
  double intra_node_bytes_per_second = 0.0;
  double inter_node_bytes_per_second = 0.0;
  int ranks_per_node = 1;
};

/// d and c of the analytic mode: FLOPs of a layer (and of the embedding/output layer) for one
/// micro-batch at `rates`, plus the tensor- and context-parallel bytes at the bandwidth of their
/// groups; b: the gradient reduction; a: 0.
LayerTimes analytic_layer_times(const Configs& c, int world_size, const ClusterRates& rates);

/// How the ranks of a run share this machine's cores.
struct CoreSharing {
  double oversubscription = 1.0;  ///< ranks / cores when ranks outnumber cores, else 1
  /// The demand of a rank waiting on a pipeline neighbour, as a share of a working rank's
  /// (profile.h measures it; step_simulation.h).
  double waiting_share = 0.0;
};

/// The step of `c` from the micro-batch-1 costs `t` (measured with every rank busy).
StatusOr<StepTime> predict_step_time(const Configs& c, int world_size, const LayerTimes& t,
                                     const CoreSharing& sharing = {});

/// The extra forward work of the recompute mode, as a fraction of a layer's forward + backward
/// (d of `t`): a whole forward (full), the core attention's (selective, at most a third).
double recompute_fraction(const Configs& c, const LayerTimes& t);

/// Forward FLOPs of one layer's core attention for one micro-batch of `c` on one rank.
double attention_forward_flops(const Configs& c, int world_size);

}  // namespace mindspeed
