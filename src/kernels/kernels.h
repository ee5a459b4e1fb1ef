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

/// Every op of the kernel table, in declaration order (X(op) per op).
// clang-format off
#define MS_KERNEL_OPS(X)                                                                           \
  X(embedding_forward) X(embedding_backward) X(layer_norm_forward) X(layer_norm_backward)          \
  X(rms_norm_forward) X(rms_norm_backward) X(norm_partial_moments) X(norm_apply)                  \
  X(norm_backward_partials) X(norm_backward_apply) X(gelu_forward) X(gelu_backward) X(swiglu_forward) \
  X(swiglu_backward) X(bias_dropout_add_forward) X(bias_dropout_add_backward) X(dropout_forward)   \
  X(dropout_backward) X(qkv_split_rope_forward) X(qkv_split_rope_backward)                         \
  X(core_attention_forward) X(core_attention_backward) X(flash_attention_forward)                  \
  X(flash_attention_backward) X(kv_cache_attention_forward)                                        \
  X(kv_cache_attention_workspace_floats) X(ring_attention_update) X(softmax_cross_entropy)         \
  X(adamw_step) X(ema_update) X(sum_of_squares) X(attention_workspace_floats)                      \
  X(vocab_parallel_ce_row_max) X(vocab_parallel_ce_sum_exp) X(vocab_parallel_ce_finish)            \
  X(masked_sums) X(count_nonfinite) X(count_zeros) X(fill_zero) X(fill) X(copy) X(copy_2d)         \
  X(add_inplace) X(scale_inplace) X(scale_copy) X(round_to_bf16) X(convert_to_bf16)                \
  X(convert_to_fp32) X(add_into_bf16) X(round_to_fp16) X(convert_to_fp16)                          \
  X(convert_fp16_to_fp32) X(add_into_fp16) X(transpose_01_f32) X(transpose_01_i32)                 \
  X(linear_forward) X(linear_backward_input) X(linear_backward_weight) X(grouped_gemm_forward)     \
  X(grouped_gemm_backward_input) X(grouped_gemm_backward_weight) X(moe_permute_forward)            \
  X(moe_permute_backward) X(moe_unpermute_forward) X(moe_unpermute_backward) X(scale_rows)         \
  X(copy_to_device) X(copy_to_host) X(copy_bytes) X(zero_bytes) X(synchronize)
// clang-format on

struct KernelTable {
  const char* name = "";
  /// The ops that run their unfused reference kernel although the fast ones were selected
  /// (Megatron's --no-*-fusion), comma-separated; empty when none.
  std::string unfused_ops;
  /// One function pointer per op, of its reference kernel's type. flash_attention_forward and
  /// _backward are null when flash attention is not selected (the model then uses core
  /// attention); a backend that lacks an op leaves it null (kernels/cuda/).
#define MS_DECLARE_KERNEL_OP(op) decltype(&ref::op) op = nullptr;
  MS_KERNEL_OPS(MS_DECLARE_KERNEL_OP)
#undef MS_DECLARE_KERNEL_OP
};

/// Calls fn(op name, the table has it) for every op, in declaration order.
template <typename Fn>
void for_each_kernel_op(const KernelTable& table, Fn&& fn) {
#define MS_VISIT_KERNEL_OP(op) fn(#op, table.op != nullptr);
  MS_KERNEL_OPS(MS_VISIT_KERNEL_OP)
#undef MS_VISIT_KERNEL_OP
}

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
/// shapes); one wrapped table per process. `device_memory`: the kernels' arrays are device
/// memory that host code cannot read, so attention FLOPs are counted from the mask's offsets
/// and windows alone (its position and document arrays left out).
KernelTable profiled_kernels(const KernelTable& inner, bool device_memory = false);
/// All reference kernels (tests compare against these).
inline KernelTable reference_kernels() { return select_kernels(KernelOptions{.fast = false}); }

}  // namespace mindspeed
