// GPTModelChunks: this rank's GPT model chunks (pipeline stages) for a PipelineLayout --
// one under 1F1B, v under the interleaved schedule, two under DualPipeV -- built into one
// ParameterRegistry (Megatron's list of model chunks, `model` in training.py).
#pragma once

#include <memory>
#include <vector>

#include "models/gpt/gpt_model.h"
#include "config/pipeline_layout.h"

namespace mindspeed {

class GPTModelChunks {
 public:
  GPTModelChunks(const ModelConfig& config, const ParallelState& ps, ParameterRegistry& registry,
                 const PipelineLayout& layout, bool sequence_parallel);

  const PipelineLayout& layout() const { return layout_; }
  int size() const { return static_cast<int>(chunks_.size()); }
  const GPTModel& operator[](int chunk) const { return *chunks_[static_cast<size_t>(chunk)]; }
  GPTModel& operator[](int chunk) { return *chunks_[static_cast<size_t>(chunk)]; }
  /// The chunks as a schedule drives them (ForwardBackwardArgs::model).
  std::vector<const ModelChunk*> model_chunks() const;
  ParameterRegistry& registry() const { return chunks_.front()->registry(); }

 private:
  PipelineLayout layout_;
  std::vector<std::unique_ptr<GPTModel>> chunks_;
};

}  // namespace mindspeed
