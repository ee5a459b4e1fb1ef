// select_kernels(): fills a KernelTable from the optimization level, MindSpeed's per-op
// fusion flags and Megatron's --no-*-fusion flags (kernels.h).
#include "core/logging.h"
#include "kernels/kernels.h"

namespace mindspeed {
namespace {
// --no-masked-softmax-fusion with the fast kernels: the core attention is the reference
// kernel, flash attention the fast one; each needs its own implementation's workspace.
int64_t unfused_core_fast_flash_workspace(const KernelContext& kc, const AttentionDims& dims, AttentionKernel kernel,
                                          bool backward) {
  return kernel == AttentionKernel::kCore ? ref::attention_workspace_floats(kc, dims, kernel, backward)
                                          : cpu::attention_workspace_floats(kc, dims, kernel, backward);
}
}  // namespace

KernelTable select_kernels(const KernelOptions& options) {
  const bool cpu_ok = cpu::cpu_kernels_supported();
  const bool wants_fast = options.fast || options.fused_rms_norm || options.fused_swiglu ||
                          options.fused_rotary || options.flash_attention ||
                          options.fused_ring_attention_update;
  if (wants_fast && !cpu_ok) {
    log_warning(
        "this CPU lacks the AVX2+FMA instructions the fast kernels were built for; "
        "using the reference kernels");
  }
  const bool fast = options.fast && cpu_ok;
  KernelTable t;
  t.name = fast ? "fast (cpu)" : "reference";
  t.embedding_forward = fast ? cpu::embedding_forward : ref::embedding_forward;
  t.embedding_backward = fast ? cpu::embedding_backward : ref::embedding_backward;
  const bool fast_layer_norm = fast && !options.unpersisted_layer_norm;
  t.layer_norm_forward = fast_layer_norm ? cpu::layer_norm_forward : ref::layer_norm_forward;
  t.layer_norm_backward = fast_layer_norm ? cpu::layer_norm_backward : ref::layer_norm_backward;
  const bool fused_rms = (fast || options.fused_rms_norm) && cpu_ok;
  t.rms_norm_forward = fused_rms ? cpu::rms_norm_forward : ref::rms_norm_forward;
  t.rms_norm_backward = fused_rms ? cpu::rms_norm_backward : ref::rms_norm_backward;
  t.norm_partial_moments = fast ? cpu::norm_partial_moments : ref::norm_partial_moments;
  t.norm_apply = fast ? cpu::norm_apply : ref::norm_apply;
  t.norm_backward_partials = fast ? cpu::norm_backward_partials : ref::norm_backward_partials;
  t.norm_backward_apply = fast ? cpu::norm_backward_apply : ref::norm_backward_apply;
  const bool fast_gelu = fast && !options.unfused_bias_gelu;
  t.gelu_forward = fast_gelu ? cpu::gelu_forward : ref::gelu_forward;
  t.gelu_backward = fast_gelu ? cpu::gelu_backward : ref::gelu_backward;
  const bool fused_swiglu = (fast || options.fused_swiglu) && cpu_ok && !options.unfused_bias_swiglu;
  t.swiglu_forward = fused_swiglu ? cpu::swiglu_forward : ref::swiglu_forward;
  t.swiglu_backward = fused_swiglu ? cpu::swiglu_backward : ref::swiglu_backward;
  const bool fused_dropout = fast && !options.unfused_bias_dropout;
  t.bias_dropout_add_forward = fused_dropout ? cpu::bias_dropout_add_forward : ref::bias_dropout_add_forward;
  t.bias_dropout_add_backward = fused_dropout ? cpu::bias_dropout_add_backward : ref::bias_dropout_add_backward;
  t.dropout_forward = fused_dropout ? cpu::dropout_forward : ref::dropout_forward;
  t.dropout_backward = fused_dropout ? cpu::dropout_backward : ref::dropout_backward;
  const bool fused_rope = (fast || options.fused_rotary) && cpu_ok && !options.unfused_rope;
  t.qkv_split_rope_forward = fused_rope ? cpu::qkv_split_rope_forward : ref::qkv_split_rope_forward;
  t.qkv_split_rope_backward =
      fused_rope ? cpu::qkv_split_rope_backward : ref::qkv_split_rope_backward;
  const bool fused_softmax = fast && !options.unfused_masked_softmax;
  t.core_attention_forward = fused_softmax ? cpu::core_attention_forward : ref::core_attention_forward;
  t.core_attention_backward = fused_softmax ? cpu::core_attention_backward : ref::core_attention_backward;
  if (options.flash_attention) {  // the reference flash kernels at level 0 or without AVX2
    t.flash_attention_forward = fast ? cpu::flash_attention_forward : ref::flash_attention_forward;
    t.flash_attention_backward =
        fast ? cpu::flash_attention_backward : ref::flash_attention_backward;
  }
  t.kv_cache_attention_forward =
      fast ? cpu::kv_cache_attention_forward : ref::kv_cache_attention_forward;
  t.kv_cache_attention_workspace_floats =
      fast ? cpu::kv_cache_attention_workspace_floats : ref::kv_cache_attention_workspace_floats;
  const bool fused_ring_update = (fast || options.fused_ring_attention_update) && cpu_ok;
  t.ring_attention_update = fused_ring_update ? cpu::ring_attention_update : ref::ring_attention_update;
  t.softmax_cross_entropy = fast ? cpu::softmax_cross_entropy : ref::softmax_cross_entropy;
  t.adamw_step = fast ? cpu::adamw_step : ref::adamw_step;
  t.ema_update = fast ? cpu::ema_update : ref::ema_update;
  t.sum_of_squares = fast ? cpu::sum_of_squares : ref::sum_of_squares;
  if (fast) {
    for (const auto& [off, op] : {std::pair{options.unfused_bias_gelu, "gelu"}, {options.unfused_bias_swiglu, "swiglu"},
                                  {options.unfused_bias_dropout, "bias-dropout-add"}, {options.unfused_rope, "rope"},
                                  {options.unfused_masked_softmax, "masked softmax (core attention)"},
                                  {options.unpersisted_layer_norm, "layer norm"}}) {
      if (off) t.unfused_ops += (t.unfused_ops.empty() ? "" : ", ") + std::string(op);
    }
  }
  t.attention_workspace_floats = !fast            ? ref::attention_workspace_floats
                                 : fused_softmax ? cpu::attention_workspace_floats
                                                 : unfused_core_fast_flash_workspace;
  t.vocab_parallel_ce_row_max =
      fast ? cpu::vocab_parallel_ce_row_max : ref::vocab_parallel_ce_row_max;
  t.vocab_parallel_ce_sum_exp =
      fast ? cpu::vocab_parallel_ce_sum_exp : ref::vocab_parallel_ce_sum_exp;
  t.vocab_parallel_ce_finish = fast ? cpu::vocab_parallel_ce_finish : ref::vocab_parallel_ce_finish;
  t.masked_sums = fast ? cpu::masked_sums : ref::masked_sums;
  t.count_nonfinite = fast ? cpu::count_nonfinite : ref::count_nonfinite;
  t.count_zeros = fast ? cpu::count_zeros : ref::count_zeros;
  t.fill_zero = fast ? cpu::fill_zero : ref::fill_zero;
  t.fill = fast ? cpu::fill : ref::fill;
  t.copy = fast ? cpu::copy : ref::copy;
  t.copy_2d = fast ? cpu::copy_2d : ref::copy_2d;
  t.add_inplace = fast ? cpu::add_inplace : ref::add_inplace;
  t.scale_inplace = fast ? cpu::scale_inplace : ref::scale_inplace;
  t.scale_copy = fast ? cpu::scale_copy : ref::scale_copy;
  t.round_to_bf16 = fast ? cpu::round_to_bf16 : ref::round_to_bf16;
  t.convert_to_bf16 = fast ? cpu::convert_to_bf16 : ref::convert_to_bf16;
  t.convert_to_fp32 = fast ? cpu::convert_to_fp32 : ref::convert_to_fp32;
  t.add_into_bf16 = fast ? cpu::add_into_bf16 : ref::add_into_bf16;
  t.round_to_fp16 = fast ? cpu::round_to_fp16 : ref::round_to_fp16;
  t.convert_to_fp16 = fast ? cpu::convert_to_fp16 : ref::convert_to_fp16;
  t.convert_fp16_to_fp32 = fast ? cpu::convert_fp16_to_fp32 : ref::convert_fp16_to_fp32;
  t.add_into_fp16 = fast ? cpu::add_into_fp16 : ref::add_into_fp16;
  t.transpose_01_f32 = fast ? cpu::transpose_01_f32 : ref::transpose_01_f32;
  t.transpose_01_i32 = fast ? cpu::transpose_01_i32 : ref::transpose_01_i32;
  t.linear_forward = fast ? cpu::linear_forward : ref::linear_forward;
  t.linear_backward_input = fast ? cpu::linear_backward_input : ref::linear_backward_input;
  t.linear_backward_weight = fast ? cpu::linear_backward_weight : ref::linear_backward_weight;
  t.grouped_gemm_forward = fast ? cpu::grouped_gemm_forward : ref::grouped_gemm_forward;
  t.grouped_gemm_backward_input =
      fast ? cpu::grouped_gemm_backward_input : ref::grouped_gemm_backward_input;
  t.grouped_gemm_backward_weight =
      fast ? cpu::grouped_gemm_backward_weight : ref::grouped_gemm_backward_weight;
  t.moe_permute_forward = fast ? cpu::moe_permute_forward : ref::moe_permute_forward;
  t.moe_permute_backward = fast ? cpu::moe_permute_backward : ref::moe_permute_backward;
  t.moe_unpermute_forward = fast ? cpu::moe_unpermute_forward : ref::moe_unpermute_forward;
  t.moe_unpermute_backward = fast ? cpu::moe_unpermute_backward : ref::moe_unpermute_backward;
  t.scale_rows = fast ? cpu::scale_rows : ref::scale_rows;
  // The transfers have one CPU form (memcpy; host and device memory are one): the reference's.
  t.copy_to_device = ref::copy_to_device;
  t.copy_to_host = ref::copy_to_host;
  t.copy_bytes = ref::copy_bytes;
  t.zero_bytes = ref::zero_bytes;
  t.synchronize = ref::synchronize;
  return t;
}

}  // namespace mindspeed
