// Port of megatron/training/checkpointing.py (save_checkpoint, load_checkpoint, the tracker
// file and check_checkpoint_args) with a resharding on-disk format in the spirit of
// torch_dist's ShardedTensors:
//
//   DIR/latest_checkpointed_iteration.txt   "500" (Megatron's tracker; "release" accepted)
//   DIR/iter_0000500/metadata.json          the index: iteration, consumed samples, flops,
//                                           optimizer step, architecture and layout
//                                           arguments, every tensor's global shape and
//                                           split, every chunk (which file, which tensor-
//                                           parallel rank of how many, which flat range of
//                                           that rank's slice), every file's size and CRC-32
//   DIR/iter_0000500/rank_00003.safetensors one per rank that holds a main replica: the fp32
//                                           main parameters and Adam moments it owns
//
// Every rank writes its own file in parallel (no gather to rank 0, no CPU group); only the
// main replica writes (tensor-parallel rank 0 for replicated tensors, data-parallel rank 0
// without the distributed optimizer, every data-parallel rank for its shard with it; tied
// copies are not written). Loading reassembles each needed tensor from the chunks of the
// saving layout and slices it for this rank, so a checkpoint saved at any tensor, pipeline,
// virtual-pipeline and data-parallel layout, with or without the distributed optimizer,
// loads at any other, optimizer state included.
//
// With --ckpt-format torch the iteration also holds Megatron-LM's legacy files,
// iter_0000500/mp_rank_TT[_PPP]/model_optim_rng.pt (training/megatron_torch_checkpoint.h), and
// this engine's index and rank files move into iter_0000500/mindspeed_cpp/: Megatron reads an
// iteration directory holding metadata.json as a torch_dist checkpoint. Loading finds the
// index in either place.
//
// Crash safety: the iteration is written into iter_XXXXXXX.tmp, every file fsynced, the
// directory renamed into place and fsynced, and only then the tracker replaced atomically;
// a job killed at any moment leaves `latest` pointing at a complete checkpoint. Loading
// checks every file's size and checksum and refuses a damaged checkpoint naming the file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/configs.h"
#include "core/status.h"
#include "distributed/param_and_grad_buffer.h"
#include "optimizer/optimizer.h"
#include "parallel/parallel_state.h"

namespace mindspeed {

/// The training progress a checkpoint carries besides the tensors.
class MegatronTorchCheckpoint;

struct CheckpointState {
  int64_t iteration = 0;
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  double floating_point_operations_so_far = 0.0;
  /// Iterations (and their samples) whose update was skipped (an fp16 overflow): the learning
  /// rate schedule counts only the others, as Megatron's OptimizerParamScheduler.num_steps.
  int64_t skipped_iterations = 0;
  int64_t skipped_samples = 0;
};

/// What a checkpoint reads from and writes into on this rank.
struct CheckpointTarget {
  const ParameterRegistry& registry;
  ParamAndGradBuffer& buffer;
  Optimizer& optimizer;
  const ParallelState& ps;
};

/// Saves iteration `state.iteration` under `dir` (collective over the world). The parameters
/// must be final (finish any pending data-parallel parameter gather first).
Status save_checkpoint(const std::string& dir, const CheckpointState& state, const Configs& configs,
                       const CheckpointTarget& target, bool save_optimizer);

/// Saves one checkpoint at a time, synchronously or (--async-save) in the background: save()
/// copies this rank's tensors out of the live buffers at once (the snapshot, taken before the
/// next optimizer step changes anything) and a thread writes them while training goes on;
/// finish() publishes the iteration (index, rename, tracker) once every rank has written.
/// All ranks call save() and finish() at the same points (both are collective while a save
/// is pending).
class CheckpointSaver {
 public:
  CheckpointSaver(const ParallelState& ps, bool async);
  ~CheckpointSaver();
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  /// Waits for the previous save, then starts this one (and finishes it unless async).
  Status save(const std::string& dir, const CheckpointState& state, const Configs& configs,
              const CheckpointTarget& target, bool save_optimizer);
  /// Publishes the pending save if every rank wrote its files (wait: block until they have).
  Status finish(bool wait);
  bool pending() const { return pending_ != nullptr; }

 private:
  struct Pending;
  const ParallelState& ps_;
  bool async_;
  std::unique_ptr<Pending> pending_;
};

struct CheckpointLoadOptions {
  bool load_optimizer = true;  ///< false: --no-load-optim (moments zero, step 0)
  bool finetune = false;       ///< --finetune: weights only, progress starts at iteration 0
  int64_t ckpt_step = -1;      ///< --ckpt-step: this iteration instead of the tracker's
};

/// True when `dir` holds Megatron's tracker file (a checkpoint directory, possibly empty).
bool has_checkpoint_tracker(const std::string& dir);
/// True when the iteration `dir`'s tracker names holds this engine's index (metadata.json): a
/// checkpoint to resume from, even when --ckpt-format torch put Megatron's files beside it.
bool has_checkpoint_index(const std::string& dir);

/// Loads the tracked (or --ckpt-step) iteration of `dir` into the target (collective over
/// the world); returns the progress to continue from. Refuses a damaged or incomplete
/// checkpoint, naming the file, and architecture arguments that differ, naming the flag.
StatusOr<CheckpointState> load_checkpoint(const std::string& dir, const Configs& configs,
                                          const CheckpointTarget& target, const CheckpointLoadOptions& options);

/// Megatron-LM's optimizer state (--ckpt-format torch, see megatron_torch_checkpoint.h) into the
/// target's optimizer, after its weights were loaded: each parameter's Adam moments and fp32
/// main copy cut to the parts this rank's optimizer owns, the step count and the loss scaler.
Status load_megatron_optimizer_state(const MegatronTorchCheckpoint& ckpt,
                                     const CheckpointTarget& target);

/// The full fp32 tensors of a checkpoint iteration directory (`dir/iter_XXXXXXX`), by
/// Megatron name: "param", "exp_avg" or "exp_avg_sq" (tests and tools).
StatusOr<std::map<std::string, std::vector<float>>> read_checkpoint_tensors(const std::string& iteration_dir,
                                                                           const std::string& kind = "param");

/// The iteration directory DIR's tracker names ("DIR/iter_0000500", or "DIR/release").
StatusOr<std::string> tracked_iteration_dir(const std::string& dir);

/// The model architecture a checkpoint was saved with (its padded vocabulary from the saved
/// word embedding): what tools need to export it.
StatusOr<ModelConfig> checkpoint_model_config(const std::string& iteration_dir);

/// "DIR/iter_0000500".
std::string checkpoint_iteration_dir(const std::string& dir, int64_t iteration);

}  // namespace mindspeed
