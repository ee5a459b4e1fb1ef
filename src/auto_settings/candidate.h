// Candidate: one point of the auto-settings search space -- a parallel layout (TP, SP, PP, VPP
// or DualPipeV, CP and its algorithm, EP; DP is what is left), the micro-batch size, the
// recompute choice and the distributed optimizer -- as pretrain_gpt's flags and as the same
// settings applied to a parsed command line (MindSpeed auto_settings' search configuration).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/configs.h"
#include "core/status.h"

namespace mindspeed {

enum class RecomputeChoice {
  kNone,
  kSelective,  ///< --recompute-granularity selective (core attention)
  kFull,       ///< --recompute-granularity full: every layer (--recompute-method uniform
               ///< --recompute-num-layers 1), or the first k of each stage (method block)
};

struct Candidate {
  int tp = 1;
  bool sp = false;  ///< --sequence-parallel (tp > 1)
  int pp = 1;
  int vpp = 0;             ///< --num-virtual-stages-per-pipeline-rank (0: none)
  bool dualpipev = false;  ///< --schedules-method dualpipev
  int cp = 1;
  CpAlgo cp_algo = CpAlgo::kRing;
  int ulysses_degree = 1;  ///< hybrid_cp_algo only
  int ep = 1;
  int64_t mbs = 1;
  RecomputeChoice recompute = RecomputeChoice::kNone;
  /// kFull: 0 = every layer (uniform); k > 0 = the first k layers of each pipeline stage or model
  /// chunk (--recompute-method block --recompute-num-layers k).
  int64_t recompute_layers = 0;
  bool distributed_optimizer = false;

  int dp(int world_size) const { return world_size / (tp * pp * cp); }
  bool operator==(const Candidate&) const = default;
};

/// Layers of one model chunk (a pipeline stage, or a virtual stage with VPP or DualPipeV) when
/// `num_layers` are split evenly over `pp` ranks of `vpp` chunks each (DualPipeV: 2).
inline int64_t layers_per_model_chunk(int64_t num_layers, int pp, int vpp, bool dualpipev) {
  return num_layers / (static_cast<int64_t>(pp) * (vpp > 0 ? vpp : dualpipev ? 2 : 1));
}

/// The flags that set `c` (appended to the command line without the searched flags).
std::vector<std::string> candidate_flags(const Candidate& c);
/// The same settings written into a parsed, not yet validated, configuration.
void apply_candidate(const Candidate& c, Configs& configs);
/// "TP2+SP PP2 VPP2 CP2(ulysses) EP1 DP1 mbs1 recompute=full distopt" for logs and the plan
/// (block recompute: "recompute=full(block 2)").
std::string candidate_name(const Candidate& c, int world_size);
const char* recompute_choice_name(RecomputeChoice r);
const char* cp_algo_flag_value(CpAlgo algo);

/// The command line without the flags the search sets and without --auto-settings and its
/// companions (both "--flag value" and "--flag=value"): the model and training as the user wrote
/// them.
std::vector<std::string> strip_searched_flags(const std::vector<std::string>& args);

}  // namespace mindspeed
