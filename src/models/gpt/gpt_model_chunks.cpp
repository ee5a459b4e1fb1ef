// GPTModelChunks (gpt_model_chunks.h).
#include "models/gpt/gpt_model_chunks.h"

#include "core/check.h"

namespace mindspeed {

GPTModelChunks::GPTModelChunks(const ModelConfig& config, const ParallelState& ps, ParameterRegistry& registry,
                               const PipelineLayout& layout, bool sequence_parallel)
    : layout_(layout) {
  MS_CHECK(layout.pipeline_size == ps.sizes.pipeline, "pipeline layout for ", layout.pipeline_size,
           " ranks, parallel state with ", ps.sizes.pipeline);
  MS_CHECK(layout.schedule != PipelineSchedule::kDualPipeV || config.untie_embeddings_and_output_weights,
           "DualPipeV needs --untie-embeddings-and-output-weights (validate_configs refuses this)");
  const std::vector<PipelineStage> stages = layout.stages_of_rank(ps.pp_rank);
  for (const PipelineStage& s : stages) {
    chunks_.push_back(std::make_unique<GPTModel>(config, ps, registry,
                                                 GPTModelOptions{.first_layer = s.first_layer,
                                                                 .num_layers = s.num_layers,
                                                                 .pre_process = s.pre_process,
                                                                 .post_process = s.post_process,
                                                                 .sequence_parallel = sequence_parallel,
                                                                 .virtual_rank = s.chunk,
                                                                 .virtual_size = static_cast<int>(stages.size())}));
  }
}

std::vector<const ModelChunk*> GPTModelChunks::model_chunks() const {
  std::vector<const ModelChunk*> out;
  for (const auto& c : chunks_) out.push_back(c.get());
  return out;
}

}  // namespace mindspeed
