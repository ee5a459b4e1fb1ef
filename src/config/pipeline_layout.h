// PipelineLayout: which layers each pipeline stage builds, on which rank each stage lives and
// which schedule drives them. Ports Megatron's layer split (transformer_block.py
// get_num_layers_to_build, transformer_layer.py get_transformer_layer_offset: even, uneven
// first/last stage, virtual stages) and MindSpeed's DualPipeV chunk layout
// (dualpipev_chunks.py), with the argument rules of megatron/training/arguments.py and
// MindSpeed's feature checks: every combination they refuse is refused here, rule named.
//
// Stages are numbered in model order (stage 0 holds the embedding, the last stage the output
// layer and loss). A rank holds `chunks_per_rank` of them, its "model chunks":
//   1F1B:        chunk 0 = stage r;
//   interleaved: chunk c = stage c*P + r (Megatron's virtual pipeline);
//   DualPipeV:   chunk 0 = stage r, chunk 1 = stage 2P-1-r (the V: rank 0 holds both ends).
#pragma once

#include <cstdint>
#include <vector>

#include "config/parallel_config.h"
#include "core/status.h"

namespace mindspeed {

enum class PipelineSchedule {
  kNoPipelining,  ///< one stage (forward_backward_no_pipelining)
  k1F1B,          ///< forward_backward_pipelining_without_interleaving
  kInterleaved,   ///< forward_backward_pipelining_with_interleaving (virtual pipeline)
  kDualPipeV,     ///< DeepSeek's DualPipeV (MindSpeed --schedules-method dualpipev)
};

const char* pipeline_schedule_name(PipelineSchedule schedule);

struct PipelineStage {
  int rank = 0;             ///< pipeline rank holding the stage
  int chunk = 0;            ///< its model-chunk index on that rank
  int64_t first_layer = 0;  ///< global index of its first transformer layer
  int64_t num_layers = 0;
  bool pre_process = false;   ///< holds the embedding (stage 0)
  bool post_process = false;  ///< holds the output layer and loss (last stage)
};

class PipelineLayout {
 public:
  /// The layout of `num_layers` transformer layers (no-op layers included) under `parallel`,
  /// or the rule the configuration breaks. `num_microbatches` (per data-parallel rank) is
  /// checked against the schedule's minimum when positive.
  static StatusOr<PipelineLayout> build(const ParallelConfig& parallel, int64_t num_layers,
                                        int64_t num_microbatches = 0);
  /// One stage holding every layer (tests, tools).
  static PipelineLayout single(int64_t num_layers);

  PipelineSchedule schedule = PipelineSchedule::kNoPipelining;
  int pipeline_size = 1;
  int chunks_per_rank = 1;  ///< virtual stages per rank (2 for DualPipeV)
  /// Interleaved: micro-batches run per chunk before switching chunks (Megatron's G).
  int64_t microbatch_group_size = 1;
  bool dw_detach = false;  ///< DualPipeV: weight gradients deferred into the bubbles
  /// --variable-seq-lengths: micro-batches may differ in shape; tensors between stages are
  /// preceded by their shapes.
  bool variable_seq_lengths = false;

  std::vector<PipelineStage> stages;  ///< in model order

  int num_stages() const { return static_cast<int>(stages.size()); }
  /// The stage index of `rank`'s model chunk `chunk`.
  int stage_of(int rank, int chunk) const;
  /// `rank`'s stages in chunk order.
  std::vector<PipelineStage> stages_of_rank(int rank) const;
};

}  // namespace mindspeed
