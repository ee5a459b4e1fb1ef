// validate_recompute (validate_recompute.h).
#include "config/validate_recompute.h"

namespace mindspeed {

Status validate_recompute(const ModelConfig& model, const ParallelConfig& parallel,
                          const TrainingConfig& training) {
  const RecomputeConfig& rc = model.recompute;
  const bool block = rc.method == RecomputeMethod::kBlock,
             uniform = rc.method == RecomputeMethod::kUniform;
  if (rc.full()) {
    if (rc.method == RecomputeMethod::kNone) {
      return invalid_argument(
          "--recompute-granularity full needs --recompute-method block or uniform "
          "(Megatron's rule)");
    }
    if (rc.num_layers < 0) {
      return invalid_argument(
          "--recompute-granularity full needs --recompute-num-layers (layers per unit with "
          "uniform, layers per pipeline stage with block; Megatron's rule)");
    }
    if (uniform && rc.num_layers < 1) {
      return invalid_argument(
          "--recompute-method uniform needs --recompute-num-layers >= 1 (layers per unit)");
    }
  } else if (rc.selective()) {
    if (rc.method != RecomputeMethod::kNone) {
      return invalid_argument(
          "--recompute-method is not supported with selective recompute granularity "
          "(Megatron's rule; --recompute-activations means selective)");
    }
    if (rc.num_layers >= 0) {
      return invalid_argument(
          "--recompute-num-layers must not be given with selective recompute granularity "
          "(Megatron's rule)");
    }
  } else {
    if (rc.method != RecomputeMethod::kNone) {
      return invalid_argument("--recompute-method needs --recompute-granularity full");
    }
    if (rc.num_layers >= 0 && !rc.swap_attention) {
      return invalid_argument(
          "--recompute-num-layers needs --recompute-granularity full (or --swap-attention, "
          "where it recomputes the MLP of the first K layers)");
    }
  }
  if (rc.swap_attention) {
    if (!training.use_flash_attn) {
      return invalid_argument("--swap-attention needs --use-flash-attn (MindSpeed's rule)");
    }
    if (parallel.dualpipev) {
      return invalid_argument(
          "--swap-attention does not work with --schedules-method dualpipev (MindSpeed's rule)");
    }
    if (rc.full()) {
      return invalid_argument(
          "--swap-attention replaces full recompute: drop --recompute-granularity full and "
          "give --recompute-num-layers K alone to also recompute the MLP of the first K layers "
          "(MindSpeed's swap_attention)");
    }
    const RecomputeConfig::SwapModules& m = rc.swap_modules;
    if (!m.input_norm && !m.self_attention && !m.post_attention_norm) {
      return invalid_argument("--swap-modules names nothing to swap");
    }
  }
  if (rc.selective()) {
    if (rc.modules.moe_act && !model.moe.grouped_gemm) {
      return invalid_argument(
          "--recompute-modules moe_act is only supported with --moe-grouped-gemm "
          "(Megatron's rule)");
    }
    if ((rc.modules.moe || rc.modules.moe_act) && model.moe.num_experts == 0) {
      return invalid_argument(
          "--recompute-modules moe and moe_act need a mixture-of-experts model (--num-experts)");
    }
    if (rc.modules.core_attn && parallel.context_parallel_size > 1) {
      return unimplemented(
          "--recompute-modules core_attn with --context-parallel-size > 1 is not implemented yet "
          "(the context-parallel attention would run its exchange again); use full recompute or "
          "drop core_attn");
    }
    if (rc.modules.core_attn && parallel.tp_2d && parallel.tp_y > 1) {
      return unimplemented(
          "--recompute-modules core_attn (or --recompute-activations) with --tp-2d and --tp-y > 1 "
          "is "
          "not implemented yet (its attention is Ulysses over the Y ranks, whose exchange would "
          "run "
          "again); use full recompute or drop core_attn");
    }
  }
  if (rc.distribute_saved_activations) {
    if (parallel.tensor_model_parallel_size <= 1) {
      return invalid_argument(
          "--distribute-saved-activations can distribute recomputed activations only across "
          "tensor-parallel ranks: it needs --tensor-model-parallel-size > 1 (Megatron's rule)");
    }
    if (!rc.full()) {
      return invalid_argument(
          "--distribute-saved-activations is only for full recompute granularity "
          "(--recompute-granularity full --recompute-method ...; Megatron's rule)");
    }
    if (parallel.sequence_parallel) {
      return invalid_argument(
          "--distribute-saved-activations must be off with --sequence-parallel "
          "(Megatron's rule: the saved input is already split)");
    }
  }
  if (rc.in_advance || rc.in_bubble) {
    const char* flag = rc.in_advance ? "--recompute-in-advance" : "--recompute-in-bubble";
    if (rc.in_advance && rc.in_bubble) {
      return invalid_argument(
          "--recompute-in-advance and --recompute-in-bubble cannot both be on (MindSpeed's rule)");
    }
    const bool virtual_stages =
        !parallel.dualpipev && (parallel.num_virtual_stages_per_pipeline_rank > 1 ||
                                parallel.num_layers_per_virtual_pipeline_stage > 0);
    if (!virtual_stages || parallel.pipeline_model_parallel_size <= 1) {
      return invalid_argument(
          flag,
          " needs the interleaved schedule: --pipeline-model-parallel-size > 1 with "
          "--num-layers-per-virtual-pipeline-stage or --num-virtual-stages-per-pipeline-rank "
          "(MindSpeed's rule)");
    }
    if (rc.in_advance && !(rc.full() && block && rc.num_layers > 0)) {
      return invalid_argument(
          "--recompute-in-advance needs full recompute with --recompute-method block and "
          "--recompute-num-layers > 0 (MindSpeed's rule: not uniform, not selective)");
    }
    if (rc.in_bubble &&
        (rc.granularity != RecomputeGranularity::kNone || rc.num_layers > 0 || rc.swap_attention)) {
      return invalid_argument(
          "--recompute-in-bubble recomputes in the bubbles by itself: it needs no other "
          "recompute (no --recompute-granularity, --recompute-num-layers 0 or none) and no "
          "--swap-attention (MindSpeed's rule)");
    }
  }
  if (rc.layers_per_pp_rank && !(rc.full() && block)) {
    return invalid_argument(
        "--enable-recompute-layers-per-pp-rank needs --recompute-granularity full "
        "--recompute-method block (MindSpeed's rule)");
  }
  struct Lighter {
    const char* flag;
    bool on;
    int64_t num_layers;
  };
  for (const Lighter& f : {Lighter{"--recompute-activation-function", rc.activation_function,
                                   rc.activation_function_num_layers},
                           Lighter{"--recompute-norm", rc.norm, rc.norm_num_layers}}) {
    if (!f.on && f.num_layers >= 0) {
      return invalid_argument(std::string(f.flag), "-num-layers needs ", f.flag);
    }
    if (!f.on) continue;
    if (rc.full() && !block) {
      return invalid_argument(
          f.flag,
          " can be combined with full recompute only with --recompute-method block "
          "(MindSpeed's rule)");
    }
    if (f.num_layers > model.num_layers) {
      return invalid_argument(std::string(f.flag), "-num-layers ", f.num_layers,
                              " is more than --num-layers ", model.num_layers);
    }
  }
  return ok_status();
}

}  // namespace mindspeed
