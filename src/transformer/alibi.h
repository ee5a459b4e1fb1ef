// ALiBi (Press et al., 2022, "Train Short, Test Long"): the per-head slopes and MindSpeed's
// ALiBi flags as the attention kernels' bias form (MindSpeed's
// mindspeed/core/transformer/flash_attention/alibi and docs/zh/features/alibi.md:
// --position-embedding-type alibi, --alibi-fusion-attn-type, --alibi-diagonal-opposite,
// --square-alibi-mask, --fill-neg-inf). The kernels add slope * f(kp - qp) to the scaled
// scores (AttentionMask::alibi_slopes, kernels/kernel_types.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kernels/kernel_types.h"

namespace mindspeed {

/// The slopes of all num_heads heads (MindSpeed's get_slopes, BLOOM's build_alibi_tensor):
/// for n a power of 2, m_i = s^(i+1) with s = 2^(-8/n); otherwise the n' slopes of the largest
/// power of 2 n' < n followed by every other slope of 2n' (the first n - n' of them).
/// Computed in double, rounded to float.
std::vector<float> alibi_slopes(int64_t num_heads);

/// The slopes of this tensor-parallel rank's heads: [rank * n/tp, (rank + 1) * n/tp).
std::vector<float> alibi_slopes_for_rank(int64_t num_heads, int64_t tp_size, int64_t tp_rank);

/// MindSpeed's ALiBi flags.
struct AlibiOptions {
  /// --alibi-fusion-attn-type with --use-fusion-attn-v2: 0 (the bias tensor is built outside
  /// the kernel), 2 (built inside), 3 (sqrt-ALiBi); -1 = the unfused attention path.
  int fusion_attn_type = -1;
  bool diagonal_opposite = false;  ///< --alibi-diagonal-opposite (type 0's tensor)
  bool square_alibi_mask = false;  ///< --square-alibi-mask (unfused path)
  bool fill_neg_inf = false;       ///< --fill-neg-inf (unfused path)
};

/// What the flags mean for the kernels: the bias form, and whether the causal mask applies
/// (the unfused path with --square-alibi-mask and without --fill-neg-inf masks nothing).
struct AlibiKernelForm {
  AlibiBias bias = AlibiBias::kSymmetric;
  bool causal = true;
};

/// Type 0: -m|d| (m d with --alibi-diagonal-opposite); type 2: -m|d| (the flag does not apply);
/// type 3: -m sqrt(|d|); unfused: m kp (BLOOM's form; the softmax equals m d's), m d with
/// --square-alibi-mask. InvalidArgument for type 1 (not released in MindSpeed) or another value.
StatusOr<AlibiKernelForm> alibi_kernel_form(const AlibiOptions& options);

}  // namespace mindspeed
