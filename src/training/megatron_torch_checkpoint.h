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
// rank r being stage c*P + r in model order.
//
// The optimizer state of the non-distributed optimizer is read too: each rank file's
// 'optimizer' is torch Adam's state dict (FP32Optimizer), or {'optimizer': that,
// 'fp32_from_fp16_params': the fp32 main parameters by group, 'grad_scaler'}
// (Float16OptimizerWithFloat16Params, --bf16 / --fp16). Adam numbers the parameters group by
// group, each group in Megatron's named_parameters() order over the model chunks (the order
// of the saved state dicts), the groups formed by first appearance of (no weight decay: a
// bias or a 1-D tensor) as Megatron's _get_param_groups does; the group sizes saved are
// checked against that. 'step' is read from the per-parameter state (torch's AdamW) or the
// groups (Apex / Transformer Engine FusedAdam). The distributed optimizer's distrib_optim.pt
// is not read yet.
//
// Writing (tools/convert_checkpoint's mg-torch output, pretrain_gpt --save with --ckpt-format
// torch): the same files, one per tensor- and pipeline-parallel rank, with the args Megatron's
// check_checkpoint_args and load_args_from_checkpoint read, the iteration and each model
// chunk's state dict (this engine's names are Megatron core's; layers renumbered from 0 in
// each chunk; fp32 values, which Megatron's load_state_dict copies into bf16 or fp16 models).
// With the non-distributed optimizer and the optimizer saved, each file also holds its
// 'optimizer' (as Megatron's FP32Optimizer / Float16OptimizerWithFloat16Params state_dict():
// Adam's state by parameter index in Megatron's order, 'step' both per parameter as torch's
// AdamW keeps it and per group as Apex / Transformer Engine's FusedAdam do, the fp32 main
// parameters of 16-bit weights, the fp16 loss scaler) and 'opt_param_scheduler' (Megatron's
// values for the run's flags): Megatron resumes with its moments (--no-load-rng: no RNG state
// is written). With the distributed optimizer, 'optimizer' is DistributedOptimizer's
// state_dict() (the groups, the step in them) and distrib_optim.pt beside it holds the main
// parameters and moments of the rank's shard, gathered from its data-parallel ranks, in
// Megatron's buffer layout (get_parameter_state_dp_zero's 'buckets_coalesced' form).
#pragma once

#include <functional>
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
#include "core/status.h"
#include "kernels/backend.h"
#include "module/parameter.h"
#include "optimizer/grad_scaler.h"
#include "optimizer/optimizer.h"

namespace mindspeed {

/// How a Megatron checkpoint holds its optimizer state (model_optim_rng.pt's 'optimizer').
enum class MegatronOptimizerState {
  kNone,         ///< none saved (--no-save-optim, a release checkpoint)
  kFp32,         ///< FP32Optimizer: Adam's state dict; the main parameters are the weights
  kFloat16,      ///< Float16OptimizerWithFloat16Params: plus the fp32 main parameters
  kDistributed,  ///< DistributedOptimizer: the main parameters and moments are in distrib_optim.pt
};

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
  MegatronOptimizerState optimizer_state() const { return optimizer_state_; }
  /// OK when the optimizer state can be loaded, else why not (with the flag that avoids it).
  Status optimizer_readable() const;
  /// Adam's step count when the optimizer state was saved (0 with none).
  int64_t optimizer_step() const { return optimizer_step_; }
  /// The full fp32 tensor of a parameter's optimizer state, laid out as full_tensor: "exp_avg",
  /// "exp_avg_sq" (zeros when saved before the first step) or "param" (the main parameter).
  StatusOr<std::vector<float>> full_optimizer_tensor(const std::string& kind,
                                                     const ParameterSpec& spec) const;
  /// A parameter of this run from the checkpoint: its weights (`kind` "weight") or optimizer
  /// state (as full_optimizer_tensor), a tied copy read from its original, the vocabulary's rows
  /// kept and re-padded to this run's padded size (Megatron pads per tensor-parallel size).
  StatusOr<std::vector<float>> full_tensor_for_run(const ParameterSpec& spec,
                                                   const std::string& kind) const;
  /// The fp16 loss scaler's state ('grad_scaler'), when saved.
  const std::optional<GradScalerState>& grad_scaler() const { return grad_scaler_; }
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
  /// A parameter's optimizer tensors in one rank file (null: no state yet).
  struct OptimizerTensors {
    std::shared_ptr<TorchTensorRef> exp_avg, exp_avg_sq, main;
    const TorchCheckpointFile* file = nullptr;  ///< where they are (null: the rank file)
    int64_t skip = 0;  ///< distrib_optim.pt: leading elements Megatron's dp-zero format drops
    std::shared_ptr<TorchTensorRef> weight;  ///< the model weight (in the rank file), for those
  };
  using ChunkName = std::pair<int, std::string>;  // (model chunk, name in its state dict)
  /// The state dict of model chunk `chunk` in the rank file `f`: 'model', or 'model<chunk>'
  /// with a virtual pipeline.
  StatusOr<const PickleValue*> chunk_state_dict(const TorchCheckpointFile& f, int chunk) const;
  /// Reads the 'optimizer' entry of every rank file (optimizer_state_, optimizer_, step).
  Status read_optimizer_state();
  Status read_rank_optimizer(const TorchCheckpointFile& f,
                             std::map<ChunkName, OptimizerTensors>* out,
                             MegatronOptimizerState* form, int64_t* step);
  /// The full tensor of `spec` from each tensor-parallel rank's slice, `slice_of` giving the
  /// tensor of a rank file (pipeline rank from the layout), chunk and candidate names.
  struct SliceRef {
    const TorchCheckpointFile* file = nullptr;  ///< null: the rank file
    std::shared_ptr<TorchTensorRef> tensor;     ///< null: no state yet (zeros)
    int64_t skip = 0;                           ///< leading elements missing from `tensor`
    std::shared_ptr<TorchTensorRef>
        fill;  ///< in the rank file: what stands in for them (null: zeros)
  };
  using SliceOf =
      std::function<StatusOr<SliceRef>(const TorchCheckpointFile& f, std::pair<int, int> rank,
                                       int chunk, const std::vector<std::string>& keys)>;
  /// The distributed optimizer's distrib_optim.pt beside rank file `f`: each parameter's main
  /// copy and moments as views into its flat tensors, at the offsets Megatron's buffer gives.
  Status read_distributed_optimizer(std::pair<int, int> rank, const TorchCheckpointFile& f);
  StatusOr<std::vector<float>> assemble(const ParameterSpec& spec, const SliceOf& slice_of) const;

  std::map<std::pair<int, int>, TorchCheckpointFile> files_;  // (tp, pp) -> file
  int64_t tp_ = 1, pp_ = 1;
  int chunks_ = 1;                  // model chunks per rank file (the virtual pipeline size)
  std::vector<LayerPlace> layers_;  // by global layer
  ModelConfig config_;
  int64_t iteration_ = 0, consumed_train_ = 0, consumed_valid_ = 0;
  bool release_ = false;
  bool records_vocab_size_ = false;  ///< args hold the tokenizer's vocab_size, not only the padded one
  MegatronOptimizerState optimizer_state_ = MegatronOptimizerState::kNone;
  int64_t optimizer_step_ = 0;
  std::map<std::pair<int, int>, std::map<ChunkName, OptimizerTensors>>
      optimizer_;  // (tp, pp) -> state
  std::map<std::pair<int, int>, TorchCheckpointFile>
      distributed_files_;        // (tp, pp) -> distrib_optim.pt
  int64_t ddp_bucket_size_ = 0;  ///< from the args: --ddp-bucket-size (0: none given)
  int64_t ddp_num_buckets_ = 0;
  int64_t data_parallel_cp_ = 1;  ///< data x context parallel size of the saving run
  bool overlap_grad_reduce_ = false, overlap_param_gather_with_optimizer_step_ = false;
  bool pad_buckets_for_high_nccl_busbw_ = false;
  std::optional<GradScalerState> grad_scaler_;
  Status optimizer_status_;  ///< why the optimizer state cannot be read, if it cannot
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
  /// A tensor stored in the file, to place anywhere in the root (the optimizer's state).
  std::shared_ptr<PickleValue> tensor(TorchSaveTensor tensor);
  /// A root entry after the models ('optimizer', 'opt_param_scheduler').
  void set(const std::string& key, std::shared_ptr<PickleValue> value);
  /// A tensor stored in distrib_optim.pt, the distributed optimizer's file beside this one.
  std::shared_ptr<PickleValue> distributed_tensor(TorchSaveTensor tensor);
  /// distrib_optim.pt's root (its tensors from distributed_tensor()).
  void set_distributed_optimizer(std::shared_ptr<PickleValue> root);
  bool has_distributed_optimizer() const { return distributed_root_ != nullptr; }
  /// Writes DIR/mp_rank_TT[_PPP]/model_optim_rng.pt (the directory is created), and
  /// distrib_optim.pt when set.
  Status write(const std::string& dir, int tp_rank, int pp_rank, int pp_size) const;
  /// "mp_rank_TT" (one pipeline stage) or "mp_rank_TT_PPP", Megatron's rank directory.
  static std::string rank_dir(int tp_rank, int pp_rank, int pp_size);

 private:
  /// A kTensor value for `tensor`, stored as the next of `tensors` (the archive's records).
  static std::shared_ptr<PickleValue> stored(std::vector<TorchSaveTensor>& tensors,
                                             TorchSaveTensor tensor);
  std::shared_ptr<PickleValue> root_;
  std::vector<std::shared_ptr<PickleValue>> models_;
  std::vector<TorchSaveTensor> tensors_;
  std::shared_ptr<PickleValue> distributed_root_;
  std::vector<TorchSaveTensor> distributed_tensors_;
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
/// cannot hold are refused at validation (config/validate.cpp). `optimizer`: its state goes in
/// too (null: none). With the distributed optimizer the call is collective over the data x
/// context-parallel group (the state is gathered to its first rank).
StatusOr<std::optional<MegatronRankFile>> megatron_rank_file_of(
    const Configs& c, const ParameterRegistry& registry, const ParallelState& ps,
    const Backend& backend, const MegatronProgress& progress, Optimizer* optimizer = nullptr);

}  // namespace mindspeed
