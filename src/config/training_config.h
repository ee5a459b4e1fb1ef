// TrainingConfig: batch sizes, iterations, logging, evaluation, kernels and precision.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/device.h"
#include "core/profiler.h"

namespace mindspeed {

/// --rampup-batch-size START INCREMENT SAMPLES (Megatron's batch-size ramp-up).
struct RampupBatchSize {
  int64_t start_global_batch_size = 0;
  int64_t batch_size_increment = 0;
  int64_t rampup_samples = 0;
};

/// --attention-backend (Megatron's AttnBackend): kFlash and kFused run flash attention,
/// kUnfused the core attention that materialises the softmax; kAuto picks flash; kUnset: the
/// flag was not given (MindSpeed's --use-flash-attn decides).
enum class AttentionBackend { kUnset, kFlash, kFused, kUnfused, kLocal, kAuto };

/// Megatron's --no-*-fusion flags: the op runs as its unfused reference kernel.
struct KernelFusionConfig {
  bool bias_gelu = true;       ///< false: --no-bias-gelu-fusion
  bool bias_swiglu = true;     ///< false: --no-bias-swiglu-fusion
  bool bias_dropout = true;    ///< false: --no-bias-dropout-fusion
  bool rope = true;            ///< false: --no-rope-fusion
  bool masked_softmax = true;  ///< false: --no-masked-softmax-fusion (the non-flash core attention)
  bool persist_layer_norm = true;  ///< false: --no-persist-layer-norm (LayerNorm)
};

struct TrainingConfig {
  int64_t micro_batch_size = 1;   ///< --micro-batch-size
  int64_t global_batch_size = 0;  ///< --global-batch-size; 0 = micro * data-parallel size
  /// --train-iters; with --train-samples, derived from it (training.py's update_train_iters).
  int64_t train_iters = 0;
  int64_t train_samples = 0;      ///< --train-samples: sample-based training (0 = iteration-based)
  std::optional<RampupBatchSize> rampup_batch_size;  ///< --rampup-batch-size (sample-based only)
  bool decrease_batch_size_if_needed = false;        ///< --decrease-batch-size-if-needed
  int64_t seed = 1234;            ///< --seed
  int64_t log_interval = 100;     ///< --log-interval
  int64_t eval_interval = 1000;   ///< --eval-interval
  int64_t eval_iters = 100;       ///< --eval-iters
  int optimization_level = 2;     ///< --optimization-level (MindSpeed: 0 reference, 1 fused, 2 + algorithms)
  bool use_flash_attn = false;    ///< --use-flash-attn (level-2 feature)
  bool use_fused_rmsnorm = false;     ///< --use-fused-rmsnorm
  bool use_fused_swiglu = false;      ///< --use-fused-swiglu
  bool use_fused_rotary_pos_emb = false;  ///< --use-fused-rotary-pos-emb
  bool use_fused_ring_attention_update = false;  ///< --use-fused-ring-attention-update
  AttentionBackend attention_backend = AttentionBackend::kUnset;  ///< --attention-backend
  KernelFusionConfig fusion;      ///< Megatron's --no-*-fusion, --no-persist-layer-norm
  bool bf16 = false;              ///< --bf16
  // fp16 mixed precision (Megatron's mixed-precision group).
  bool fp16 = false;              ///< --fp16: fp16 weights and activations, fp32 main parameters
  /// --loss-scale: a constant loss scale (ConstantGradScaler, with --fp16 or --bf16); 0 = unset
  /// (Megatron's None): --fp16 then scales dynamically.
  double loss_scale = 0.0;
  double initial_loss_scale = 4294967296.0;  ///< --initial-loss-scale (2^32)
  double min_loss_scale = 1.0;               ///< --min-loss-scale
  double loss_scale_window = 1000.0;         ///< --loss-scale-window: good iterations before the scale doubles
  int64_t hysteresis = 2;                    ///< --hysteresis: overflowing iterations before the scale halves
  /// --accumulate-allreduce-grads-in-fp32: with --fp16 the gradient buffer is fp32 (else fp16,
  /// as Megatron's grad_reduce_in_fp32 = False); --bf16 always accumulates in fp32.
  bool accumulate_allreduce_grads_in_fp32 = false;
  /// --attention-softmax-in-fp32 / --apply-query-key-layer-scaling: attention scores and their
  /// softmax are fp32 here whatever the flags (never stored in 16 bits), which is what the first
  /// guarantees; the second's 1/layer pre-scale and layer post-scale cancel exactly in fp32.
  bool attention_softmax_in_fp32 = false;
  bool apply_query_key_layer_scaling = false;
  /// The loss scaler that --fp16 / --bf16 with these flags get (Megatron's
  /// get_megatron_optimizer): constant with --loss-scale, dynamic with --fp16 alone, none else.
  bool has_loss_scaler() const { return (fp16 || bf16) && loss_scale > 0.0 ? true : fp16; }
  bool dynamic_loss_scaling() const { return fp16 && !(loss_scale > 0.0); }
  /// --fp16 without --accumulate-allreduce-grads-in-fp32: fp16 gradient buffer.
  bool fp16_gradients() const { return fp16 && !accumulate_allreduce_grads_in_fp32; }
  /// --calculate-per-token-loss: the gradient is that of the global batch's summed token losses
  /// divided by its loss tokens (Megatron's per-token normalisation), not the mean over
  /// micro-batches of each micro-batch's mean.
  bool calculate_per_token_loss = false;
  /// --swap-dir (mindspeed-cpp): where the swap tier of --swap-attention keeps its file (on an
  /// accelerator the tier is host memory; here it is a file on local disk); empty = $TMPDIR or /tmp.
  std::string swap_dir;
  bool deterministic_mode = false;  ///< --deterministic-mode / --npu-deterministic
  /// Stop with a diagnosis when the loss or a gradient is not finite (Megatron's default;
  /// false with --no-check-for-nan-in-loss-and-grad: non-finite updates are then skipped).
  bool check_for_nan_in_loss_and_grad = true;
  double peak_tflops = 0.0;       ///< --peak-tflops (mindspeed-cpp): per-rank peak for MFU; 0 = not shown
  /// --load: a checkpoint directory (Megatron's tracker file; training/checkpointing.h) or a
  /// Hugging Face directory (config.json + model.safetensors).
  std::string load;
  std::string save;               ///< --save: checkpoint directory
  /// --ckpt-format torch: each save also writes Megatron-LM's legacy files (model_optim_rng.pt
  /// per tensor- and pipeline-parallel rank) beside this engine's resumable state.
  bool ckpt_format_torch = false;
  /// MindSpeed-LLM's --enable-hf2mg-convert: --load must be a Hugging Face directory (read
  /// directly, no conversion step); --model-type-hf names its family (checked against config.json).
  bool enable_hf2mg_convert = false;
  std::string model_type_hf;
  int64_t save_interval = 0;      ///< --save-interval: iterations between saves (0: only at the end)
  bool async_save = false;        ///< --async-save: write checkpoints in the background
  bool no_save_optim = false;     ///< --no-save-optim
  bool no_load_optim = false;     ///< --no-load-optim
  bool no_load_rng = false;       ///< --no-load-rng (nothing to skip: dropout is keyed, not stateful)
  bool no_save_rng = false;       ///< --no-save-rng (likewise)
  bool finetune = false;          ///< --finetune: load weights only, start at iteration 0
  int64_t ckpt_step = -1;         ///< --ckpt-step: load this iteration instead of the tracked one
  bool exit_on_missing_checkpoint = false;
  profiler::Options profile;      ///< --profile and MindSpeed's --profile-* flags  ///< --exit-on-missing-checkpoint
  int64_t exit_interval = 0;      ///< --exit-interval: save (with --save) and exit at multiples
  double exit_duration_in_mins = 0.0;  ///< --exit-duration-in-mins: save and exit after this long
  bool exit_signal_handler = false;    ///< --exit-signal-handler: on SIGTERM finish the step, save, exit 0
  bool skip_train = false;        ///< --skip-train: no training; evaluate the (loaded) model and exit
  int64_t num_workers = 2;        ///< --num-workers (Megatron's data-loader processes; see arguments.cpp)
  int num_threads = 0;            ///< --num-threads (mindspeed-cpp): OpenMP threads per rank; 0 = cores / ranks on the node
  DeviceKind device = DeviceKind::kCpu;  ///< --device (mindspeed-cpp)
  bool allow_tf32 = false;        ///< --allow-tf32 (mindspeed-cpp): fp32 GEMMs on TF32 tensor cores (CUDA)
};

}  // namespace mindspeed
