// The CUDA backend's kernels: the signatures of kernels/kernel_signatures.inc again, in
// namespace cuda, taking device pointers and queuing their work on the KernelContext's stream
// (kernels/cuda/cuda_context.h). The reference kernels (ref/) are their specification; each is
// tested against its reference in tests/kernels/cuda/ on a GPU. select_cuda_kernels() fills a
// KernelTable with the ones that exist; missing_cuda_kernels() names the others.
// Host memory where the CPU kernels' callers keep it: masked_sums' `sums` (two doubles), the
// grouped GEMMs' `counts` and their arrays of (device) weight pointers; the scalar results
// (masked_sums, count_nonfinite, sum_of_squares) wait for the stream. Everything else is device
// memory.
#pragma once

#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace mindspeed::cuda {
#include "kernels/kernel_signatures.inc"

/// sums[c] += x[0][c] + ... + x[R-1][c], the rows added in order from 0 (the CPU's bias
/// gradient order: bit-identical). elementwise.cu; used by the GEMMs' bias gradient.
void column_sums_accumulate(const KernelContext& kc, float* sums /*[C] +=*/,
                            const float* x /*[R,C]*/, int64_t R, int64_t C);

/// The CUDA table: every op the backend has; the others stay null.
KernelTable select_cuda_kernels(const KernelOptions& options);

// Each file of kernels/cuda/ fills the table entries of the kernels it defines;
// select_cuda_kernels calls them all (nothing registers itself).
void fill_elementwise_kernels(KernelTable& t);    // elementwise.cu
void fill_normalization_kernels(KernelTable& t);  // normalization.cu: LayerNorm, RMSNorm
void fill_activation_kernels(KernelTable& t);     // activation.cu: GELU, SwiGLU
void fill_dropout_kernels(KernelTable& t);        // dropout.cu: dropout, bias-dropout-add
void fill_embedding_kernels(KernelTable& t);      // embedding.cu
void fill_rope_kernels(KernelTable& t);           // rope.cu: QKV split with rotary embedding
void fill_attention_kernels(KernelTable& t, const KernelOptions& options);  // attention.cu
void fill_cross_entropy_kernels(KernelTable& t);                            // cross_entropy.cu
void fill_optimizer_kernels(KernelTable& t);       // optimizer.cu: AdamW, EMA, sum of squares
void fill_moe_kernels(KernelTable& t);             // moe_permute.cu
void fill_ring_attention_kernels(KernelTable& t);  // ring_attention.cu
void fill_gemm_kernels(KernelTable& t);            // gemm.cpp (cuBLASLt), grouped_gemm.cpp
/// The ops of the kernel table the CUDA backend does not have yet.
std::vector<std::string> missing_cuda_kernels();
}  // namespace mindspeed::cuda
