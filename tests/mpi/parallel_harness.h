// Trains a tiny model for a few steps under a given parallel layout on synthetic data that
// every layout sees identically (Megatron's sampler slices of the same global batches), and
// returns the per-step losses, gradient norms, the evaluation losses (forward only on
// held-out global batches every few steps, reduced as Megatron's evaluate()) and the final
// weights gathered to full tensors.
// The single-process reference is the same function with every size 1, run by each rank on
// its own, so the comparison needs no files.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config/configs.h"
#include "parallel/initialize.h"
#include "test_util.h"

namespace mindspeed::testing {

struct LayoutOptions {
  int tp = 1;
  /// Pipeline stages (layers split evenly; stage 0 holds the embedding, the last stage the
  /// output layer, a tied output weight there is a copy), run by train_step's schedule (1F1B).
  int pp = 1;
  /// Interleaved schedule: model chunks per pipeline rank (--num-virtual-stages-per-pipeline-rank).
  int virtual_stages = 0;
  int64_t microbatch_group_size = 0;  ///< --microbatch-group-size-per-virtual-pipeline-stage
  bool dualpipev = false;             ///< --schedules-method dualpipev
  bool dw_detach = false;             ///< --dualpipev-dw-detach
  int64_t first_stage_layers = 0;     ///< --decoder-first-pipeline-num-layers
  int64_t last_stage_layers = 0;      ///< --decoder-last-pipeline-num-layers
  bool variable_seq_lengths = false;  ///< --variable-seq-lengths
  /// Drive the stages by hand instead (every micro-batch forward, then every backward, with
  /// send/recv between neighbours): the reference the schedules must equal.
  bool pipeline_by_hand = false;
  bool sequence_parallel = false;
  /// --tp-2d --tp-x tp_x --tp-y tp / tp_x (0: 1-D tensor parallelism).
  int tp_x = 0;
  bool tp_2d_overlap = false;  ///< all three --enable-*overlap*-with-matmul flags
  /// --use-ascend-coc --coc-parallel-num: token chunks of the TP linear layers (1: off).
  int coc = 1;
  bool mc2 = false;  ///< --use-ascend-mc2 (with sequence_parallel)
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  int64_t bucket_size = 0;  ///< elements; 0 = one bucket
  bool gradient_accumulation_fusion = true;
  bool bf16 = false;  ///< --bf16 (also for the single-process reference when set there)
  bool o2_gradient = false;  ///< --o2-gradient (with bf16 and the unfused weight gradient)
  /// --fp16 with the dynamic loss scaler (starting at fp16_initial_loss_scale); the gradients
  /// are fp16 unless fp16_fp32_grads (--accumulate-allreduce-grads-in-fp32).
  bool fp16 = false;
  bool fp16_fp32_grads = false;
  float fp16_initial_loss_scale = 4096.0f;
  bool per_token_loss = false;  ///< --calculate-per-token-loss
  // Context parallelism (--context-parallel-size and MindSpeed's --context-parallel-algo
  // family): every micro-batch split by get_batch_on_this_cp_rank.
  int cp = 1;
  CpAlgo cp_algo = CpAlgo::kRing;
  int ulysses_degree = 1;      ///< --ulysses-degree-in-cp (hybrid)
  bool general_mask = false;   ///< --attention-mask-type general
  int cp_window = 1;           ///< --cp-window-size
  bool cp_overlap = false;     ///< --use-cp-send-recv-overlap
  bool allgather_kv = false;   ///< --use-ulysses-allgather-kv
  // Mixture of experts (the MoE options themselves are in RunOptions::model.moe).
  int ep = 1;                  ///< --expert-model-parallel-size
  int etp = 0;                 ///< --expert-tensor-parallel-size (0: tp)
  bool tp_extend_ep = false;   ///< --moe-tp-extend-ep
  // Megatron's custom FSDP (--use-custom-fsdp --data-parallel-sharding-strategy).
  bool custom_fsdp = false;
  FsdpShardingStrategy fsdp_sharding = FsdpShardingStrategy::kNoShard;
};

struct RunOptions {
  ModelConfig model;
  int64_t micro_batch = 2;
  int64_t global_batch = 8;
  int steps = 10;
  float lr = 1e-3f;
  /// Adam's epsilon. Elements whose gradient is rounding noise (exactly zero in exact
  /// arithmetic) get Adam steps of full size whose sign follows the noise; an epsilon above
  /// the noise level keeps such elements still, so the weight comparison measures the
  /// parallel arithmetic rather than Adam's conditioning.
  float adam_eps = 1e-6f;
  bool flash_attention = true;
  uint64_t seed = 1234;
  /// Evaluate after every `eval_interval` steps (0: never) on `eval_iters` held-out global
  /// batches (the same ones each time): evaluate_step (pipeline stages by hand), the loss
  /// per token over the data-parallel group (evaluation_loss, as pretrain's evaluate()).
  int eval_interval = 5;
  /// Micro-batch m of every global batch has seq_length - 4 * (m % 3) tokens per sample
  /// (layouts need --variable-seq-lengths to pipeline them).
  bool variable_lengths = false;
  int eval_iters = 2;
  /// Packed documents: a few end-of-document tokens per sample, position ids and attention
  /// restarting after each (--reset-position-ids --reset-attention-mask).
  bool reset_attention_mask = false;
};

struct RunResult {
  std::vector<double> losses;
  std::vector<double> grad_norms;
  std::vector<double> loss_scales;  ///< the loss scaler's scale after each step (1 without one)
  std::vector<double> eval_losses;  ///< one per evaluation; the last stage's, on every rank
  /// Full tensors of this rank's stage, by Megatron name (every routed expert's, gathered
  /// from the ranks that hold them).
  std::map<std::string, std::vector<float>> weights;
  /// MoE: each step's logged "load_balancing_loss" and "z_loss" (pretrain's reduction).
  std::vector<double> load_balancing_losses, z_losses;
  int64_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;  ///< this rank's allocator
  int64_t activation_peak_bytes = 0;  ///< the allocator's activation peak over the run (resident)
  int64_t swapped_peak_bytes = 0;     ///< the swap tier's peak (--swap-attention)
  /// Bytes of the swap tier's file: what was handed to the tier, whether or not a write ran
  /// before a prefetch cancelled it (timing-independent, unlike swapped_peak_bytes).
  int64_t swap_file_bytes = 0;
  /// This rank's schedule traces: most micro-batches with live activations in a step, and the
  /// recompute steps run by the schedule (ripipe).
  int64_t peak_in_flight = 0, recompute_steps = 0;
  int64_t num_params_local = 0;
};

/// Tiny GPT-2-style and LLaMA-style configurations (vocabulary padded to 512 for tp <= 4).
ModelConfig tiny_gpt_config();
ModelConfig tiny_llama_config();

/// Runs on all ranks of `world` when layout is given (world size = tp * pp * cp * dp), or on this
/// process alone when `single` is true.
RunResult train(const RunOptions& run, const LayoutOptions& layout, const MpiWorld& world, bool single);

/// Relative limits of a lossy run (16-bit state) against its exact twin.
struct Closeness {
  double loss = 0.0;        ///< losses and evaluation losses, relative
  double grad_norm = 0.0;   ///< gradient norms, relative
  double weight_abs = 0.0;  ///< weights: max(weight_abs, weight_rel * |w|)
  double weight_rel = 0.0;
};

/// Expects `got` within `limits` of `want` (step by step, every evaluation, every weight of this
/// rank); returns the largest absolute weight gap.
double expect_close_runs(const RunResult& got, const RunResult& want, const Closeness& limits);


}  // namespace mindspeed::testing
