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
//
// Writing (tools/convert_checkpoint's mg-torch output, pretrain_gpt --save with --ckpt-format
// torch): the same files, one per tensor- and pipeline-parallel rank, with the args Megatron's
// check_checkpoint_args and load_args_from_checkpoint read, the iteration and each model
// chunk's state dict (this engine's names are Megatron core's; layers renumbered from 0 in
// each chunk; fp32 values, which Megatron's load_state_dict copies into bf16 or fp16 models).
// No optimizer or RNG state is written into them: Megatron resumes from them with
// --no-load-optim --no-load-rng.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpointing/torch_checkpoint.h"
#include "config/configs.h"
#include "config/model_config.h"
#include "config/pipeline_layout.h"
#include "kernels/backend.h"
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

/// The pipeline split a written checkpoint's args describe (Megatron's flags for it).
struct MegatronTorchSplit {
  int tp = 1, pp = 1;
  int virtual_stages = 1;                ///< model chunks per rank
  int64_t layers_per_virtual_stage = 0;  ///< --num-layers-per-virtual-pipeline-stage (0: not given)
  int64_t decoder_first_pipeline_num_layers = 0;  ///< 0: not given
  int64_t decoder_last_pipeline_num_layers = 0;
};

using PickleFields = std::vector<std::pair<std::string, std::shared_ptr<PickleValue>>>;

/// Megatron's argparse.Namespace for the model at `split`: the architecture fields (vocabulary
/// padded to `padded_vocab`), the parallel and pipeline fields, then `extra`.
std::shared_ptr<PickleValue> megatron_args_namespace(const ModelConfig& m, int64_t padded_vocab,
                                                     const MegatronTorchSplit& split,
                                                     const PickleFields& extra = {});

/// Where one of our parameters goes in pipeline rank `pp_rank`'s file: the model chunk and the
/// name in its state dict (a layer renumbered from 0 in the chunk's stage; the embedding in the
/// first stage's chunk; the final norm and output layer in the last stage's). nullopt: not on
/// any of that rank's stages.
struct MegatronChunkName {
  int chunk = 0;
  std::string name;
};
std::optional<MegatronChunkName> megatron_chunk_name(const std::string& ours,
                                                     const PipelineLayout& layout, int pp_rank);

/// One model_optim_rng.pt: the args, checkpoint_version 3.0, the iteration, each chunk's state
/// dict ('model', or 'model0', 'model1', ... with several chunks), then `extra` root entries.
class MegatronRankFile {
 public:
  MegatronRankFile(std::shared_ptr<PickleValue> args, int64_t iteration, int chunks,
                   const PickleFields& extra = {});
  void add(int chunk, const std::string& name, TorchSaveTensor tensor);
  /// Writes DIR/mp_rank_TT[_PPP]/model_optim_rng.pt (the directory is created).
  Status write(const std::string& dir, int tp_rank, int pp_rank, int pp_size) const;
  /// "mp_rank_TT" (one pipeline stage) or "mp_rank_TT_PPP", Megatron's rank directory.
  static std::string rank_dir(int tp_rank, int pp_rank, int pp_size);

 private:
  std::shared_ptr<PickleValue> root_;
  std::vector<std::shared_ptr<PickleValue>> models_;
  std::vector<TorchSaveTensor> tensors_;
};

/// The progress a training save records (Megatron keeps it in the args and the root dict).
struct MegatronProgress {
  int64_t iteration = 0;
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  double floating_point_operations_so_far = 0.0;
};

/// pretrain_gpt --ckpt-format torch: this rank's Megatron file for the save (its tensor- and
/// pipeline-parallel shard of every model chunk, the weights as the model holds them widened to
/// fp32, and the run's args), or nullopt on ranks that write none: only the first rank of each
/// data x context-parallel group writes (the others hold the same shard). The layouts the format
/// cannot hold are refused at validation (config/validate.cpp).
StatusOr<std::optional<MegatronRankFile>> megatron_rank_file_of(const Configs& c,
                                                                const ParameterRegistry& registry,
                                                                const ParallelState& ps,
                                                                const Backend& backend,
                                                                const MegatronProgress& progress);

}  // namespace mindspeed
