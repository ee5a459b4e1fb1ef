// KernelTable: the set of compute kernels a run uses, chosen once at start-up by
// --optimization-level (MindSpeed §0.1): level 0 runs the reference kernels (ref/, the
// specification), levels 1 and 2 the fast ones (cpu/: fused, vectorised, OpenMP). Nothing
// registers itself; select_kernels() fills the table explicitly (style_anchors §9.7).
// Model code calls kernels only through a table, never a backend header.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/kernel_types.h"

namespace mindspeed {

namespace ref {
#include "kernels/kernel_signatures.inc"
}  // namespace ref

namespace cpu {
#include "kernels/kernel_signatures.inc"
/// True when this machine can run the cpu/ kernels (built for AVX2+FMA on x86-64).
bool cpu_kernels_supported();
}  // namespace cpu

struct KernelTable {
  const char* name = "";
  /// The ops that run their unfused reference kernel although the fast ones were selected
  /// (Megatron's --no-*-fusion), comma-separated; empty when none.
  std::string unfused_ops;
  decltype(&ref::embedding_forward) embedding_forward = nullptr;
  decltype(&ref::embedding_backward) embedding_backward = nullptr;
  decltype(&ref::layer_norm_forward) layer_norm_forward = nullptr;
  decltype(&ref::layer_norm_backward) layer_norm_backward = nullptr;
  decltype(&ref::rms_norm_forward) rms_norm_forward = nullptr;
  decltype(&ref::rms_norm_backward) rms_norm_backward = nullptr;
  decltype(&ref::gelu_forward) gelu_forward = nullptr;
  decltype(&ref::gelu_backward) gelu_backward = nullptr;
  decltype(&ref::swiglu_forward) swiglu_forward = nullptr;
  decltype(&ref::swiglu_backward) swiglu_backward = nullptr;
  decltype(&ref::bias_dropout_add_forward) bias_dropout_add_forward = nullptr;
  decltype(&ref::bias_dropout_add_backward) bias_dropout_add_backward = nullptr;
  decltype(&ref::dropout_forward) dropout_forward = nullptr;
  decltype(&ref::dropout_backward) dropout_backward = nullptr;
  decltype(&ref::qkv_split_rope_forward) qkv_split_rope_forward = nullptr;
  decltype(&ref::qkv_split_rope_backward) qkv_split_rope_backward = nullptr;
  decltype(&ref::core_attention_forward) core_attention_forward = nullptr;
  decltype(&ref::core_attention_backward) core_attention_backward = nullptr;
  /// Null when flash attention is not selected (the model then uses core attention).
  decltype(&ref::flash_attention_forward) flash_attention_forward = nullptr;
  decltype(&ref::flash_attention_backward) flash_attention_backward = nullptr;
  decltype(&ref::kv_cache_attention_forward) kv_cache_attention_forward = nullptr;
  decltype(&ref::kv_cache_attention_workspace_floats) kv_cache_attention_workspace_floats = nullptr;
  decltype(&ref::ring_attention_update) ring_attention_update = nullptr;
  decltype(&ref::softmax_cross_entropy) softmax_cross_entropy = nullptr;
  decltype(&ref::adamw_step) adamw_step = nullptr;
  decltype(&ref::ema_update) ema_update = nullptr;
  decltype(&ref::sum_of_squares) sum_of_squares = nullptr;
  decltype(&ref::attention_workspace_floats) attention_workspace_floats = nullptr;
  decltype(&ref::vocab_parallel_ce_row_max) vocab_parallel_ce_row_max = nullptr;
  decltype(&ref::vocab_parallel_ce_sum_exp) vocab_parallel_ce_sum_exp = nullptr;
  decltype(&ref::vocab_parallel_ce_finish) vocab_parallel_ce_finish = nullptr;
  decltype(&ref::masked_sums) masked_sums = nullptr;
  decltype(&ref::count_nonfinite) count_nonfinite = nullptr;
  decltype(&ref::fill_zero) fill_zero = nullptr;
  decltype(&ref::copy) copy = nullptr;
  decltype(&ref::add_inplace) add_inplace = nullptr;
  decltype(&ref::scale_inplace) scale_inplace = nullptr;
  decltype(&ref::scale_copy) scale_copy = nullptr;
  decltype(&ref::round_to_bf16) round_to_bf16 = nullptr;
  decltype(&ref::convert_to_bf16) convert_to_bf16 = nullptr;
  decltype(&ref::convert_to_fp32) convert_to_fp32 = nullptr;
  decltype(&ref::add_into_bf16) add_into_bf16 = nullptr;
  decltype(&ref::round_to_fp16) round_to_fp16 = nullptr;
  decltype(&ref::convert_to_fp16) convert_to_fp16 = nullptr;
  decltype(&ref::convert_fp16_to_fp32) convert_fp16_to_fp32 = nullptr;
  decltype(&ref::add_into_fp16) add_into_fp16 = nullptr;
  decltype(&ref::transpose_01_f32) transpose_01_f32 = nullptr;
  decltype(&ref::transpose_01_i32) transpose_01_i32 = nullptr;
  decltype(&ref::linear_forward) linear_forward = nullptr;
  decltype(&ref::linear_backward_input) linear_backward_input = nullptr;
  decltype(&ref::linear_backward_weight) linear_backward_weight = nullptr;
  decltype(&ref::grouped_gemm_forward) grouped_gemm_forward = nullptr;
  decltype(&ref::grouped_gemm_backward_input) grouped_gemm_backward_input = nullptr;
  decltype(&ref::grouped_gemm_backward_weight) grouped_gemm_backward_weight = nullptr;
  decltype(&ref::moe_permute_forward) moe_permute_forward = nullptr;
  decltype(&ref::moe_permute_backward) moe_permute_backward = nullptr;
  decltype(&ref::moe_unpermute_forward) moe_unpermute_forward = nullptr;
  decltype(&ref::moe_unpermute_backward) moe_unpermute_backward = nullptr;
  decltype(&ref::scale_rows) scale_rows = nullptr;
};

/// What selects each kernel. `fast` is --optimization-level >= 1; the per-op flags are
/// MindSpeed's (--use-fused-rmsnorm, --use-fused-swiglu, --use-fused-rotary-pos-emb,
/// --use-fused-ring-attention-update) and pick
/// the fused op even at level 0; flash attention is a level-2 feature (--use-flash-attn).
struct KernelOptions {
  bool fast = true;
  bool fused_rms_norm = false;
  bool fused_swiglu = false;
  bool fused_rotary = false;
  bool fused_ring_attention_update = false;
  bool flash_attention = false;
  // Megatron's --no-*-fusion flags: these ops run their unfused reference kernels even when
  // the fast (fused) kernels are selected.
  bool unfused_bias_gelu = false;       ///< --no-bias-gelu-fusion: gelu
  bool unfused_bias_swiglu = false;     ///< --no-bias-swiglu-fusion: swiglu
  bool unfused_bias_dropout = false;    ///< --no-bias-dropout-fusion: bias-dropout-add, dropout
  bool unfused_rope = false;            ///< --no-rope-fusion: qkv split + rope
  bool unfused_masked_softmax = false;  ///< --no-masked-softmax-fusion: core (non-flash) attention
  bool unpersisted_layer_norm = false;  ///< --no-persist-layer-norm: layer norm
  /// --profile-level level1+: every kernel call recorded by the profiler (core/profiler.h).
  bool profile_kernels = false;
};

/// Number of (query row, key row) pairs `mask` lets see each other, summed over the dims.B
/// samples (one head): the score elements attention computes, for FLOP counts.
double attention_visible_pairs(const AttentionMask& mask, const AttentionDims& dims);

/// Fills the table. On a machine that cannot run the cpu/ kernels every op falls back to
/// its reference kernel, with a warning.
KernelTable select_kernels(const KernelOptions& options);
/// `inner` with every kernel wrapped to record a profiler event (name, FLOPs or bytes,
/// shapes); one wrapped table per process.
KernelTable profiled_kernels(const KernelTable& inner);
/// All reference kernels (tests compare against these).
inline KernelTable reference_kernels() { return select_kernels(KernelOptions{.fast = false}); }

}  // namespace mindspeed
