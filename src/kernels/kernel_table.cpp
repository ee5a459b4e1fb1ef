// select_kernels(): fills a KernelTable from the optimization level and MindSpeed's per-op
// fusion flags (kernels.h).
#include "core/logging.h"
#include "kernels/kernels.h"

namespace mindspeed {

KernelTable select_kernels(const KernelOptions& options) {
  const bool cpu_ok = cpu::cpu_kernels_supported();
  const bool wants_fast = options.fast || options.fused_rms_norm || options.fused_swiglu ||
                          options.fused_rotary || options.flash_attention;
  if (wants_fast && !cpu_ok) {
    log_warning("this CPU lacks the AVX2+FMA instructions the fast kernels were built for; "
                "using the reference kernels");
  }
  const bool fast = options.fast && cpu_ok;
  KernelTable t;
  t.name = fast ? "fast (cpu)" : "reference";
  t.embedding_forward = fast ? cpu::embedding_forward : ref::embedding_forward;
  t.embedding_backward = fast ? cpu::embedding_backward : ref::embedding_backward;
  t.layer_norm_forward = fast ? cpu::layer_norm_forward : ref::layer_norm_forward;
  t.layer_norm_backward = fast ? cpu::layer_norm_backward : ref::layer_norm_backward;
  const bool fused_rms = (fast || options.fused_rms_norm) && cpu_ok;
  t.rms_norm_forward = fused_rms ? cpu::rms_norm_forward : ref::rms_norm_forward;
  t.rms_norm_backward = fused_rms ? cpu::rms_norm_backward : ref::rms_norm_backward;
  t.gelu_forward = fast ? cpu::gelu_forward : ref::gelu_forward;
  t.gelu_backward = fast ? cpu::gelu_backward : ref::gelu_backward;
  const bool fused_swiglu = (fast || options.fused_swiglu) && cpu_ok;
  t.swiglu_forward = fused_swiglu ? cpu::swiglu_forward : ref::swiglu_forward;
  t.swiglu_backward = fused_swiglu ? cpu::swiglu_backward : ref::swiglu_backward;
  t.bias_dropout_add_forward = fast ? cpu::bias_dropout_add_forward : ref::bias_dropout_add_forward;
  t.bias_dropout_add_backward =
      fast ? cpu::bias_dropout_add_backward : ref::bias_dropout_add_backward;
  t.dropout_forward = fast ? cpu::dropout_forward : ref::dropout_forward;
  t.dropout_backward = fast ? cpu::dropout_backward : ref::dropout_backward;
  const bool fused_rope = (fast || options.fused_rotary) && cpu_ok;
  t.qkv_split_rope_forward = fused_rope ? cpu::qkv_split_rope_forward : ref::qkv_split_rope_forward;
  t.qkv_split_rope_backward =
      fused_rope ? cpu::qkv_split_rope_backward : ref::qkv_split_rope_backward;
  t.core_attention_forward = fast ? cpu::core_attention_forward : ref::core_attention_forward;
  t.core_attention_backward = fast ? cpu::core_attention_backward : ref::core_attention_backward;
  if (options.flash_attention && cpu_ok) {
    t.flash_attention_forward = cpu::flash_attention_forward;
    t.flash_attention_backward = cpu::flash_attention_backward;
  }
  t.softmax_cross_entropy = fast ? cpu::softmax_cross_entropy : ref::softmax_cross_entropy;
  t.adamw_step = fast ? cpu::adamw_step : ref::adamw_step;
  t.sum_of_squares = fast ? cpu::sum_of_squares : ref::sum_of_squares;
  return t;
}

}  // namespace mindspeed
