// Megatron-LM's legacy checkpoints (--ckpt-format torch): DIR/<tracked iteration or
// release>/mp_rank_XX[_YYY]/model_optim_rng.pt, one torch.save file per tensor- and
// pipeline-parallel rank (checkpointing/torch_checkpoint.h reads them), each holding the
// argparse.Namespace of the run, the iteration and the rank's state dict under Megatron core
// names with layers numbered from 0 in each pipeline stage. This reassembles the model: the
// architecture from the args, every parameter's full tensor from the rank files (Transformer
// Engine's fused norm names accepted too). The stages follow the args as Megatron built them
// (config/pipeline_layout.h: even split, --decoder-first/last-pipeline-num-layers, and
// --account-for-embedding/loss-in-pipeline-split on an even split); with a virtual pipeline
// a rank file holds one state dict per model chunk, model0, model1, ..., chunk c of pipeline
// rank r being stage c*P + r in model order. The optimizer state is not read.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "checkpointing/torch_checkpoint.h"
#include "config/model_config.h"
#include "core/status.h"
#include "module/parameter.h"

namespace mindspeed {

class MegatronTorchCheckpoint {
 public:
  /// Opens the tracked iteration (or release) of DIR.
  static StatusOr<MegatronTorchCheckpoint> open(const std::string& dir);
  /// True when DIR's tracked iteration holds mp_rank_* directories (Megatron's layout).
  static bool looks_like(const std::string& dir);

  const ModelConfig& model_config() const { return config_; }
  int64_t iteration() const { return iteration_; }
  bool release() const { return release_; }
  int64_t consumed_train_samples() const { return consumed_train_; }
  int64_t consumed_valid_samples() const { return consumed_valid_; }
  /// The full tensor of a parameter (Megatron core name and global shape from `spec`).
  StatusOr<std::vector<float>> full_tensor(const ParameterSpec& spec) const;
  /// Every architecture field the model flags contradict, named by flag. The vocabulary is
  /// compared by its real size when the args record it (the padding then follows this run's
  /// tensor-parallel size), else by the padded size.
  Status check_model_matches(const ModelConfig& flags) const;

 private:
  // Where a global transformer layer lives: pipeline rank, model chunk, index in the chunk.
  struct LayerPlace {
    int rank = 0, chunk = 0;
    int64_t local = 0;
  };
  /// The state dict of model chunk `chunk` in the rank file `f`: 'model', or 'model<chunk>'
  /// with a virtual pipeline.
  StatusOr<const PickleValue*> chunk_state_dict(const TorchCheckpointFile& f, int chunk) const;

  std::map<std::pair<int, int>, TorchCheckpointFile> files_;  // (tp, pp) -> file
  int64_t tp_ = 1, pp_ = 1;
  int chunks_ = 1;                  // model chunks per rank file (the virtual pipeline size)
  std::vector<LayerPlace> layers_;  // by global layer
  ModelConfig config_;
  int64_t iteration_ = 0, consumed_train_ = 0, consumed_valid_ = 0;
  bool release_ = false;
  bool records_vocab_size_ = false;  ///< args hold the tokenizer's vocab_size, not only the padded one
};

}  // namespace mindspeed
