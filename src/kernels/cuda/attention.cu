// CUDA attention kernels (kernel_signatures.inc; the specification is ref/attention.cpp), in
// fp32 on the CUDA cores. Every kernel works on 64 x 64 tiles with 256 threads: thread
// (ty, tx) = (tid / 16, tid % 16) owns the tile elements (ty + 16 i, tx + 16 j), i, j < 4, so
// a tile row lives in the 16 lanes of one half-warp (row max / sum by butterfly shuffles, which
// leave every lane the same value). Tile products Q K^T and dO V^T stream the head dim through
// shared memory in chunks of 32 columns (any D); products with V, K, Q or dO accumulate
// 16 * kCols output columns per block (kCols = 2, 4 or 8 by D), larger D adding a grid
// dimension over column blocks (each recomputes the scores: no D limit).
//  * flash_attention_forward: FlashAttention-2 (Dao 2023): one block per (query tile, b, h,
//    column block), online softmax over the key tiles; saves lse = m + log(l).
//  * flash_attention_backward: D = rowsum(dout * out) (workspace), then two kernels that
//    recompute P = exp(s - lse) per tile: dK/dV parallel over key tiles of a (b, group),
//    looping over query tiles then the group's G query heads in a fixed order (GQA sums
//    without atomics), and dQ parallel over query tiles. No float atomics anywhere: every
//    output element is written once, by one thread, after a fixed-order sum.
//  * core_attention_forward: scores (masked, -inf where hidden) into probs, a row softmax in
//    place, then out = dropout(probs) v.
//  * core_attention_backward: recomputes out with the backward's dropout (identity
//    positions) into the workspace for D = rowsum(dout * out) (= sum_j P dP, the reference's
//    `dot`), then the dK/dV and dQ kernels of flash attention reading P from probs.
//  * kv_cache_attention_forward: the flash forward kernel with the cache's row stride and
//    the causal mask at query positions Tk - Tq + t.
// Masks: per element the rule of AttentionMask::visible (first_key, last_key, prefix_end);
// a tile is skipped when the positions of its keys (min/max) are outside the union of its
// rows' bands and above the prefix. Dropout: the Philox element attention_dropout_index(b, h,
// qp, kp) of the reference, drawn by kernels/cuda/philox.cuh (core/rng.cpp's arithmetic).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/philox.cuh"

namespace mindspeed::cuda {
namespace {

/// The reference's keep_scale: 1/(1-p) for a kept element, 0 for a dropped one.
__device__ __forceinline__ float keep_factor(const DropoutSpec& dropout, uint64_t index) {
  return philox_uniform(dropout.rng, index) >= dropout.p ? 1.0f / (1.0f - dropout.p) : 0.0f;
}

// ---- Tiles -----------------------------------------------------------------------------------
constexpr int kTile = 64;             ///< query rows and key rows of a tile
constexpr int kTileThreads = 256;     ///< 16 x 16 threads, 4 x 4 elements each
constexpr int kChunk = 32;            ///< head-dim columns per step of a tile product
constexpr int kLdChunk = kChunk + 1;  ///< padded row of a staged chunk (no bank conflicts)
constexpr int kLdTile = kTile + 1;    ///< padded row of a staged 64 x 64 tile
constexpr int kChunkFloats = 2 * kTile * kLdChunk;  ///< the two staged chunks of tile_dot
constexpr int kTileFloats = kTile * kLdTile;
constexpr int64_t kFar = int64_t{1} << 62;  ///< beyond every position (neutral min / max)
constexpr int kMaxGridYZ = 65535;

__device__ __forceinline__ int tile_ty() { return static_cast<int>(threadIdx.x) / 16; }
__device__ __forceinline__ int tile_tx() { return static_cast<int>(threadIdx.x) % 16; }
__device__ __forceinline__ float neg_inf() { return -INFINITY; }
__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/// Max and sum over the 16 lanes of a half-warp (the threads of one tile row); every lane
/// gets the same value.
__device__ __forceinline__ float row_max(float x) {
#pragma unroll
  for (int offset = 8; offset > 0; offset >>= 1)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
__device__ __forceinline__ float row_sum(float x) {
#pragma unroll
  for (int offset = 8; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

/// dst[r * ldd + c] = src[r * lds + c] for r < rows, c < cols; 0 elsewhere in the
/// kTile x kWidth box (all threads of the block).
template <int kWidth>
__device__ __forceinline__ void load_tile(float* dst, int ldd, const float* src, int64_t lds,
                                          int rows, int cols) {
  for (int e = static_cast<int>(threadIdx.x); e < kTile * kWidth; e += kTileThreads) {
    const int r = e / kWidth, c = e % kWidth;
    dst[r * ldd + c] = r < rows && c < cols ? src[r * lds + c] : 0.0f;
  }
}

/// acc[i][j] = sum_x A[ty + 16 i][x] * B[tx + 16 j][x] over x < D, rows of A (B) at or beyond
/// a_rows (b_rows) reading as 0. Stages chunks of kChunk columns in sA, sB (kTile x kLdChunk
/// each); starts and ends with a __syncthreads(), so the caller may reuse sA, sB around it.
__device__ __forceinline__ void tile_dot(float (&acc)[4][4], const float* A, int64_t lda,
                                         int a_rows, const float* B, int64_t ldb, int b_rows,
                                         int64_t D, float* sA, float* sB) {
  const int ty = tile_ty(), tx = tile_tx();
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (int64_t d0 = 0; d0 < D; d0 += kChunk) {
    const int dc = static_cast<int>(min64(kChunk, D - d0));
    __syncthreads();
    load_tile<kChunk>(sA, kLdChunk, A + d0, lda, a_rows, dc);
    load_tile<kChunk>(sB, kLdChunk, B + d0, ldb, b_rows, dc);
    __syncthreads();
#pragma unroll 8
    for (int x = 0; x < kChunk; ++x) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = sA[(ty + 16 * i) * kLdChunk + x];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = sB[(tx + 16 * j) * kLdChunk + x];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  }
  __syncthreads();
}

/// acc[i][j] += sum_k sP[(ty + 16 i) * kLdTile + k] * sV[k * 16 kCols + tx + 16 j], k < kTile.
template <int kCols>
__device__ __forceinline__ void tile_accumulate(float (&acc)[4][kCols], const float* sP,
                                                const float* sV) {
  const int ty = tile_ty(), tx = tile_tx();
#pragma unroll 4
  for (int k = 0; k < kTile; ++k) {
    float p[4], v[kCols];
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = sP[(ty + 16 * i) * kLdTile + k];
#pragma unroll
    for (int j = 0; j < kCols; ++j) v[j] = sV[k * (16 * kCols) + tx + 16 * j];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < kCols; ++j) acc[i][j] = fmaf(p[i], v[j], acc[i][j]);
  }
}

// ---- Masks -----------------------------------------------------------------------------------
/// The visible key positions of one query row: [lo, hi] (band and document start), plus the
/// prefix (kp < prefix_end) shared by the sample. An invalid row (beyond T) sees nothing.
struct RowBand {
  int64_t qp = 0, lo = kFar, hi = -kFar;
  bool valid = false;
};

__device__ __forceinline__ RowBand row_band(const AttentionMask& mask, int64_t b, int64_t t,
                                            int64_t T, bool valid) {
  RowBand r;
  if (!valid) return r;
  r.qp = mask.q_position(t);
  r.lo = mask.first_key(b, t, T, r.qp);
  r.hi = mask.last_key(r.qp);
  r.valid = true;
  return r;
}

/// AttentionMask::visible for a valid row and a valid key.
__device__ __forceinline__ bool sees(const RowBand& row, int64_t kp, int64_t pend) {
  return (kp >= row.lo && kp <= row.hi) || kp < pend;
}

/// No row of the tile (bands [lo_min.., ..hi_max], prefix below pend) sees a key at a
/// position in [kmin, kmax].
__device__ __forceinline__ bool tile_hidden(int64_t lo_min, int64_t hi_max, int64_t pend,
                                            int64_t kmin, int64_t kmax) {
  return (kmax < lo_min || kmin > hi_max) && kmin >= pend;
}

/// Warp 0: out[0] = min of mins[0..n), out[1] = max of maxs[0..n) (n <= 64). The caller
/// synchronises before (the inputs) and after (the result).
__device__ __forceinline__ void range_of(const int64_t* mins, const int64_t* maxs, int n,
                                         int64_t* out) {
  if (threadIdx.x >= 32) return;
  const int lane = static_cast<int>(threadIdx.x);
  long long lo = kFar, hi = -kFar;
  if (lane < n) {
    lo = mins[lane];
    hi = maxs[lane];
  }
  if (lane + 32 < n) {
    lo = min64(lo, mins[lane + 32]);
    hi = max64(hi, maxs[lane + 32]);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    lo = min64(lo, __shfl_xor_sync(0xffffffffu, lo, offset));
    hi = max64(hi, __shfl_xor_sync(0xffffffffu, hi, offset));
  }
  if (lane == 0) {
    out[0] = lo;
    out[1] = hi;
  }
}

/// The scaled score plus the ALiBi bias of the head (slope) at positions qp, kp.
__device__ __forceinline__ float biased_score(float dot, float scale, const AttentionMask& mask,
                                              float slope, int64_t qp, int64_t kp) {
  float s = dot * scale;
  if (mask.alibi_slopes != nullptr) s += static_cast<float>(alibi_bias(mask.alibi, slope, qp, kp));
  return s;
}

/// The key positions of tile rows [j0, j0 + bk) into s_kp (threads < kTile), and their
/// min / max into kmin, kmax (every thread). Synchronises.
__device__ __forceinline__ void key_tile_positions(const AttentionMask& mask, int64_t j0, int bk,
                                                   int64_t* s_kp, int64_t* s_range, int64_t& kmin,
                                                   int64_t& kmax) {
  const int c = static_cast<int>(threadIdx.x);
  if (c < kTile) s_kp[c] = c < bk ? mask.k_position(j0 + c) : 0;
  __syncthreads();
  if (mask.k_pos == nullptr) {
    kmin = mask.k_offset + j0;
    kmax = kmin + bk - 1;
    return;
  }
  range_of(s_kp, s_kp, bk, s_range);
  __syncthreads();
  kmin = s_range[0];
  kmax = s_range[1];
}

/// The union of the bands of the block's query rows (s_lo / s_hi filled by the caller for
/// all kTile rows, kFar / -kFar for invalid ones): [lo_min, hi_max]. Synchronises.
__device__ __forceinline__ void query_tile_range(const int64_t* s_lo, const int64_t* s_hi,
                                                 int64_t* s_range, int64_t& lo_min,
                                                 int64_t& hi_max) {
  __syncthreads();
  range_of(s_lo, s_hi, kTile, s_range);
  __syncthreads();
  lo_min = s_range[0];
  hi_max = s_range[1];
}

// ---- Flash attention forward (and the key/value cache) ---------------------------------------
struct ForwardArgs {
  float* out;      ///< [T, B, NQ*D]
  float* lse;      ///< [B, NQ, T] or null
  const float* q;  ///< [B, NQ, T, D]
  const float* k;  ///< [B, NKV, kv_rows, D]
  const float* v;
  AttentionMask mask;
  AttentionDims dims;
  DropoutSpec dropout;
  int64_t Tk;       ///< keys
  int64_t kv_rows;  ///< rows of one key/value head (Tk, or the cache's S)
};

/// Dynamic shared memory of the forward and dQ kernels: a score tile (aliasing the staged
/// chunks) and a kTile x 16 kCols block of V (K).
template <int kCols>
constexpr int row_kernel_floats() {
  return (kChunkFloats > kTileFloats ? kChunkFloats : kTileFloats) + kTile * 16 * kCols;
}

// grid (query tiles, B*NQ, column blocks of 16 kCols).
template <int kCols>
__global__ void __launch_bounds__(kTileThreads) flash_forward_kernel(ForwardArgs a) {
  constexpr int kDv = 16 * kCols;
  extern __shared__ float smem[];
  float* sA = smem;                     // Q chunk
  float* sB = smem + kTile * kLdChunk;  // K chunk
  float* sP = smem;                     // probabilities (after the scores: aliases sA, sB)
  float* sV = smem + (kChunkFloats > kTileFloats ? kChunkFloats : kTileFloats);
  __shared__ int64_t s_lo[kTile], s_hi[kTile], s_kp[kTile], s_range[2];

  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const int64_t T = d.T, D = d.D, Tk = a.Tk, G = d.NQ / d.NKV, ldo = d.B * d.NQ * d.D;
  const int64_t qt = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;  // longest (causal) first
  const int64_t bh = blockIdx.y, b = bh / d.NQ, h = bh % d.NQ;
  const int64_t c0 = static_cast<int64_t>(blockIdx.z) * kDv;
  const int64_t i0 = qt * kTile;
  const int bq = static_cast<int>(min64(kTile, T - i0));
  const int ty = tile_ty(), tx = tile_tx();
  const float* qh = a.q + (bh * T + i0) * D;
  const float* kh = a.k + (b * d.NKV + h / G) * a.kv_rows * D;
  const float* vh = a.v + (b * d.NKV + h / G) * a.kv_rows * D;
  const int64_t pend = mask.prefix_end(b);
  const float slope = mask.alibi_slopes != nullptr ? mask.alibi_slopes[h] : 0.0f;
  const bool dropout = a.dropout.active();

  RowBand rows[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = ty + 16 * i;
    rows[i] = row_band(mask, b, i0 + r, T, r < bq);
    if (tx == 0) {
      s_lo[r] = rows[i].lo;
      s_hi[r] = rows[i].hi;
    }
  }
  int64_t lo_min, hi_max;
  query_tile_range(s_lo, s_hi, s_range, lo_min, hi_max);

  float m[4], l[4], o[4][kCols];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = neg_inf();
    l[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < kCols; ++j) o[i][j] = 0.0f;
  }

  for (int64_t j0 = 0; j0 < Tk; j0 += kTile) {
    const int bk = static_cast<int>(min64(kTile, Tk - j0));
    int64_t kmin, kmax;
    key_tile_positions(mask, j0, bk, s_kp, s_range, kmin, kmax);
    if (tile_hidden(lo_min, hi_max, pend, kmin, kmax)) continue;  // uniform over the block

    float s[4][4];
    tile_dot(s, qh, D, bq, kh + j0 * D, D, bk, D, sA, sB);
    load_tile<kDv>(sV, kDv, vh + j0 * D + c0, D, bk, static_cast<int>(min64(kDv, D - c0)));

    int64_t kp[4];
    bool kvalid[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      kvalid[j] = tx + 16 * j < bk;
      kp[j] = s_kp[tx + 16 * j];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float tile_max = neg_inf();
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bool visible = rows[i].valid && kvalid[j] && sees(rows[i], kp[j], pend);
        s[i][j] =
            visible ? biased_score(s[i][j], d.scale, mask, slope, rows[i].qp, kp[j]) : neg_inf();
        tile_max = fmaxf(tile_max, s[i][j]);
      }
      tile_max = row_max(tile_max);
      const float m_new = fmaxf(m[i], tile_max);
      // m[i] = -inf: l and o are still 0 (any factor keeps them); m_new = -inf: nothing seen yet.
      const float corr = m[i] == neg_inf() ? 1.0f : expf(m[i] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float p = s[i][j] == neg_inf() ? 0.0f : expf(s[i][j] - m_new);
        sum += p;
        if (dropout && p != 0.0f)
          p *= keep_factor(a.dropout,
                           attention_dropout_index(a.dropout, d, b, h, rows[i].qp, kp[j]));
        sP[(ty + 16 * i) * kLdTile + tx + 16 * j] = p;
      }
      sum = row_sum(sum);
      l[i] = l[i] * corr + sum;
      m[i] = m_new;
#pragma unroll
      for (int j = 0; j < kCols; ++j) o[i][j] *= corr;
    }
    __syncthreads();
    tile_accumulate<kCols>(o, sP, sV);
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (!rows[i].valid) continue;
    const int64_t t = i0 + ty + 16 * i;
    const bool seen = l[i] > 0.0f;  // the row's maximum contributes exp(0) = 1
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int64_t c = c0 + tx + 16 * j;
      if (c < D) a.out[t * ldo + bh * D + c] = seen ? o[i][j] / l[i] : 0.0f;
    }
    if (a.lse != nullptr && blockIdx.z == 0 && tx == 0)
      a.lse[bh * T + t] = seen ? m[i] + logf(l[i]) : neg_inf();
  }
}

// ---- Backward ----------------------------------------------------------------------------------
/// drow[bh * T + t] = sum_x dout[t, b, h*D + x] * out[t, b, h*D + x]: one warp per row, a
/// fixed order.
__global__ void row_dot_kernel(float* drow, const float* dout, const float* out, int64_t T,
                               int64_t BH, int64_t D, int64_t ldo) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       row < BH * T; row += warps) {
    const int64_t bh = row / T, t = row % T;
    const float* g = dout + t * ldo + bh * D;
    const float* o = out + t * ldo + bh * D;
    float s = 0.0f;
    for (int64_t x = lane; x < D; x += 32) s = fmaf(g[x], o[x], s);
    s = warp_sum(s);
    if (lane == 0) drow[row] = s;
  }
}

struct BackwardArgs {
  float* dq;  ///< [B, NQ, T, D]
  float* dk;  ///< [B, NKV, Tk, D]
  float* dv;
  const float* dout;  ///< [T, B, NQ*D]
  const float* q;
  const float* k;
  const float* v;
  const float* lse;    ///< flash: [B, NQ, T]
  const float* probs;  ///< core: [B, NQ, T, Tk] (kGivenProbs)
  const float* drow;   ///< [B, NQ, T]: rowsum(dout * out)
  AttentionMask mask;  ///< core: identity positions (dropout only)
  AttentionDims dims;
  DropoutSpec dropout;
  int64_t Tk;
};

/// Shared memory of the dK/dV kernel: P^T and dS^T tiles, then the staged chunks aliased with
/// the kTile x 16 kCols blocks of dO and Q.
template <int kCols>
constexpr int kv_kernel_floats() {
  return 2 * kTileFloats +
         (kChunkFloats > 2 * kTile * 16 * kCols ? kChunkFloats : 2 * kTile * 16 * kCols);
}

// dK, dV of one key tile of one (b, group), columns [c0, c0 + 16 kCols): grid (key tiles,
// B*NKV, column blocks). Thread rows are keys, columns queries: S^T = K Q^T, dP^T = V dO^T.
// kGivenProbs (core attention): P from probs, no mask, dropout at identity positions.
template <int kCols, bool kGivenProbs>
__global__ void __launch_bounds__(kTileThreads) attention_dkdv_kernel(BackwardArgs a) {
  constexpr int kDv = 16 * kCols;
  extern __shared__ float smem[];
  float* sPT = smem;                   // P^T (dropped), [key][query]
  float* sST = smem + kTileFloats;     // dS^T
  float* sA = smem + 2 * kTileFloats;  // staged chunks of the tile products
  float* sB = sA + kTile * kLdChunk;
  float* sX = smem + 2 * kTileFloats;  // dO block (aliases sA, sB after the products)
  float* sY = sX + kTile * kDv;        // Q block
  __shared__ int64_t s_lo[kTile], s_hi[kTile], s_kp[kTile], s_range[2];

  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const int64_t T = d.T, D = d.D, Tk = a.Tk, G = d.NQ / d.NKV, ldo = d.B * d.NQ * d.D;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int bk = static_cast<int>(min64(kTile, Tk - j0));
  const int64_t bg = blockIdx.y, b = bg / d.NKV, g = bg % d.NKV;
  const int64_t c0 = static_cast<int64_t>(blockIdx.z) * kDv;
  const int dv_cols = static_cast<int>(min64(kDv, D - c0));
  const int ty = tile_ty(), tx = tile_tx();
  const float* kt = a.k + (bg * Tk + j0) * D;
  const float* vt = a.v + (bg * Tk + j0) * D;
  const int64_t pend = kGivenProbs ? -kFar : mask.prefix_end(b);
  const bool dropout = a.dropout.active();

  int64_t kmin, kmax;
  key_tile_positions(mask, j0, bk, s_kp, s_range, kmin, kmax);
  int64_t kp[4];
  bool kvalid[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    kvalid[i] = ty + 16 * i < bk;
    kp[i] = s_kp[ty + 16 * i];
  }

  float dk[4][kCols], dv[4][kCols];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < kCols; ++j) dk[i][j] = dv[i][j] = 0.0f;

  for (int64_t i0 = 0; i0 < T; i0 += kTile) {
    const int bq = static_cast<int>(min64(kTile, T - i0));
    RowBand cols[4];  // the query rows of this thread's tile columns
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = tx + 16 * j;
      cols[j] = row_band(mask, b, i0 + c, T, c < bq);
      if (ty == 0) {
        s_lo[c] = cols[j].lo;
        s_hi[c] = cols[j].hi;
      }
    }
    if (!kGivenProbs) {
      int64_t lo_min, hi_max;
      query_tile_range(s_lo, s_hi, s_range, lo_min, hi_max);
      if (tile_hidden(lo_min, hi_max, pend, kmin, kmax)) continue;  // uniform over the block
    }
    for (int64_t h = g * G; h < (g + 1) * G; ++h) {
      const int64_t bh = b * d.NQ + h;
      const float* qt = a.q + (bh * T + i0) * D;
      const float* dot = a.dout + i0 * ldo + bh * D;
      const float slope =
          !kGivenProbs && mask.alibi_slopes != nullptr ? mask.alibi_slopes[h] : 0.0f;
      float lse[4], drow[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bool valid = cols[j].valid;
        lse[j] = !kGivenProbs && valid ? a.lse[bh * T + i0 + tx + 16 * j] : neg_inf();
        drow[j] = valid ? a.drow[bh * T + i0 + tx + 16 * j] : 0.0f;
      }
      float s[4][4], dp[4][4];
      if (!kGivenProbs) tile_dot(s, kt, D, bk, qt, D, bq, D, sA, sB);
      tile_dot(dp, vt, D, bk, dot, ldo, bq, D, sA, sB);
      if (kGivenProbs) {  // stage P^T, reading probs rows coalesced
        const float* pt = a.probs + (bh * T + i0) * Tk + j0;
        for (int e = static_cast<int>(threadIdx.x); e < kTile * kTile; e += kTileThreads) {
          const int r = e / kTile, c = e % kTile;  // query r, key c
          sPT[c * kLdTile + r] = r < bq && c < bk ? pt[r * Tk + c] : 0.0f;
        }
        __syncthreads();
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int e = (ty + 16 * i) * kLdTile + tx + 16 * j;
          float p;
          if (kGivenProbs) {
            p = sPT[e];
          } else {
            const bool visible =
                kvalid[i] && cols[j].valid && lse[j] != neg_inf() && sees(cols[j], kp[i], pend);
            p = visible
                    ? expf(biased_score(s[i][j], d.scale, mask, slope, cols[j].qp, kp[i]) - lse[j])
                    : 0.0f;
          }
          float keep = 1.0f;
          if (dropout && p != 0.0f)
            keep = keep_factor(a.dropout,
                               attention_dropout_index(a.dropout, d, b, h, cols[j].qp, kp[i]));
          sPT[e] = p * keep;
          sST[e] = p != 0.0f ? p * (dp[i][j] * keep - drow[j]) * d.scale : 0.0f;
        }
      }
      load_tile<kDv>(sX, kDv, dot + c0, ldo, bq, dv_cols);
      load_tile<kDv>(sY, kDv, qt + c0, D, bq, dv_cols);
      __syncthreads();
      tile_accumulate<kCols>(dv, sPT, sX);
      tile_accumulate<kCols>(dk, sST, sY);
    }
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (!kvalid[i]) continue;
    const int64_t row = (bg * Tk + j0 + ty + 16 * i) * D;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int64_t c = c0 + tx + 16 * j;
      if (c < D) {
        a.dk[row + c] = dk[i][j];
        a.dv[row + c] = dv[i][j];
      }
    }
  }
}

// dQ of one query tile of (b, h), columns [c0, c0 + 16 kCols): grid (query tiles, B*NQ,
// column blocks). Thread rows are queries, columns keys.
template <int kCols, bool kGivenProbs>
__global__ void __launch_bounds__(kTileThreads) attention_dq_kernel(BackwardArgs a) {
  constexpr int kDv = 16 * kCols;
  extern __shared__ float smem[];
  float* sA = smem;
  float* sB = smem + kTile * kLdChunk;
  float* sS = smem;  // dS (after the products: aliases sA, sB)
  float* sK = smem + (kChunkFloats > kTileFloats ? kChunkFloats : kTileFloats);
  __shared__ int64_t s_lo[kTile], s_hi[kTile], s_kp[kTile], s_range[2];

  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const int64_t T = d.T, D = d.D, Tk = a.Tk, G = d.NQ / d.NKV, ldo = d.B * d.NQ * d.D;
  const int64_t qt = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  const int64_t bh = blockIdx.y, b = bh / d.NQ, h = bh % d.NQ;
  const int64_t c0 = static_cast<int64_t>(blockIdx.z) * kDv;
  const int64_t i0 = qt * kTile;
  const int bq = static_cast<int>(min64(kTile, T - i0));
  const int ty = tile_ty(), tx = tile_tx();
  const float* qh = a.q + (bh * T + i0) * D;
  const float* doh = a.dout + i0 * ldo + bh * D;
  const float* kh = a.k + (b * d.NKV + h / G) * Tk * D;
  const float* vh = a.v + (b * d.NKV + h / G) * Tk * D;
  const int64_t pend = kGivenProbs ? -kFar : mask.prefix_end(b);
  const float slope = !kGivenProbs && mask.alibi_slopes != nullptr ? mask.alibi_slopes[h] : 0.0f;
  const bool dropout = a.dropout.active();

  RowBand rows[4];
  float lse[4], drow[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = ty + 16 * i;
    rows[i] = row_band(mask, b, i0 + r, T, r < bq);
    lse[i] = !kGivenProbs && rows[i].valid ? a.lse[bh * T + i0 + r] : neg_inf();
    drow[i] = rows[i].valid ? a.drow[bh * T + i0 + r] : 0.0f;
    if (tx == 0) {
      s_lo[r] = rows[i].lo;
      s_hi[r] = rows[i].hi;
    }
  }
  int64_t lo_min = -kFar, hi_max = kFar;
  if (!kGivenProbs) query_tile_range(s_lo, s_hi, s_range, lo_min, hi_max);

  float dq[4][kCols];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < kCols; ++j) dq[i][j] = 0.0f;

  for (int64_t j0 = 0; j0 < Tk; j0 += kTile) {
    const int bk = static_cast<int>(min64(kTile, Tk - j0));
    int64_t kmin, kmax;
    key_tile_positions(mask, j0, bk, s_kp, s_range, kmin, kmax);
    if (!kGivenProbs && tile_hidden(lo_min, hi_max, pend, kmin, kmax)) continue;

    float s[4][4], dp[4][4];
    if (!kGivenProbs) tile_dot(s, qh, D, bq, kh + j0 * D, D, bk, D, sA, sB);
    tile_dot(dp, doh, ldo, bq, vh + j0 * D, D, bk, D, sA, sB);
    load_tile<kDv>(sK, kDv, kh + j0 * D + c0, D, bk, static_cast<int>(min64(kDv, D - c0)));

    int64_t kp[4];
    bool kvalid[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      kvalid[j] = tx + 16 * j < bk;
      kp[j] = s_kp[tx + 16 * j];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float p;
        if (kGivenProbs) {
          p = rows[i].valid && kvalid[j]
                  ? a.probs[(bh * T + i0 + ty + 16 * i) * Tk + j0 + tx + 16 * j]
                  : 0.0f;
        } else {
          const bool visible =
              rows[i].valid && kvalid[j] && lse[i] != neg_inf() && sees(rows[i], kp[j], pend);
          p = visible
                  ? expf(biased_score(s[i][j], d.scale, mask, slope, rows[i].qp, kp[j]) - lse[i])
                  : 0.0f;
        }
        float keep = 1.0f;
        if (dropout && p != 0.0f)
          keep = keep_factor(a.dropout,
                             attention_dropout_index(a.dropout, d, b, h, rows[i].qp, kp[j]));
        sS[(ty + 16 * i) * kLdTile + tx + 16 * j] =
            p != 0.0f ? p * (dp[i][j] * keep - drow[i]) * d.scale : 0.0f;
      }
    }
    __syncthreads();
    tile_accumulate<kCols>(dq, sS, sK);
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (!rows[i].valid) continue;
    const int64_t row = (bh * T + i0 + ty + 16 * i) * D;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int64_t c = c0 + tx + 16 * j;
      if (c < D) a.dq[row + c] = dq[i][j];
    }
  }
}

// ---- Core attention: scores, softmax, probabilities times values -----------------------------
// probs[b, h, t, j] = the scaled, biased score where visible, -inf elsewhere: grid (key tiles,
// query tiles, B*NQ).
__global__ void __launch_bounds__(kTileThreads)
    scores_kernel(float* probs, const float* q, const float* k, AttentionMask mask, AttentionDims d,
                  int64_t Tk) {
  __shared__ float sA[kTile * kLdChunk], sB[kTile * kLdChunk];
  __shared__ int64_t s_lo[kTile], s_hi[kTile], s_kp[kTile], s_range[2];
  const int64_t T = d.T, D = d.D, G = d.NQ / d.NKV;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTile,
                i0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t bh = blockIdx.z, b = bh / d.NQ, h = bh % d.NQ;
  const int bq = static_cast<int>(min64(kTile, T - i0)),
            bk = static_cast<int>(min64(kTile, Tk - j0));
  const int ty = tile_ty(), tx = tile_tx();
  const int64_t pend = mask.prefix_end(b);
  const float slope = mask.alibi_slopes != nullptr ? mask.alibi_slopes[h] : 0.0f;

  RowBand rows[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = ty + 16 * i;
    rows[i] = row_band(mask, b, i0 + r, T, r < bq);
    if (tx == 0) {
      s_lo[r] = rows[i].lo;
      s_hi[r] = rows[i].hi;
    }
  }
  int64_t lo_min, hi_max, kmin, kmax;
  query_tile_range(s_lo, s_hi, s_range, lo_min, hi_max);
  key_tile_positions(mask, j0, bk, s_kp, s_range, kmin, kmax);
  float s[4][4] = {};
  const bool hidden = tile_hidden(lo_min, hi_max, pend, kmin, kmax);
  if (!hidden)
    tile_dot(s, q + (bh * T + i0) * D, D, bq, k + ((b * d.NKV + h / G) * Tk + j0) * D, D, bk, D, sA,
             sB);
  float* pt = probs + (bh * T + i0) * Tk + j0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (!rows[i].valid) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = tx + 16 * j;
      if (c >= bk) continue;
      const int64_t kp = s_kp[c];
      const bool visible = !hidden && sees(rows[i], kp, pend);
      pt[(ty + 16 * i) * Tk + c] =
          visible ? biased_score(s[i][j], d.scale, mask, slope, rows[i].qp, kp) : neg_inf();
    }
  }
}

// In place over rows of n scores (-inf = hidden): softmax, 0 where hidden, a row of zeros when
// everything is. One warp per row.
__global__ void softmax_rows_kernel(float* x, int64_t rows, int64_t n) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows;
       row += warps) {
    float* p = x + row * n;
    float mx = neg_inf();
    for (int64_t j = lane; j < n; j += 32) mx = fmaxf(mx, p[j]);
    mx = warp_max(mx);
    if (mx == neg_inf()) {
      for (int64_t j = lane; j < n; j += 32) p[j] = 0.0f;
      continue;
    }
    float sum = 0.0f;
    for (int64_t j = lane; j < n; j += 32) {
      const float e = p[j] == neg_inf() ? 0.0f : expf(p[j] - mx);
      p[j] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    for (int64_t j = lane; j < n; j += 32) p[j] = p[j] / sum;
  }
}

// out[t, b, h*D + c] = sum_j dropout(probs[b, h, t, j]) v[j, c], dropout at the positions of
// `mask`: grid (query tiles, B*NQ, column blocks).
template <int kCols>
__global__ void __launch_bounds__(kTileThreads)
    probs_times_values_kernel(float* out, const float* probs, const float* v, AttentionMask mask,
                              AttentionDims d, DropoutSpec dropout, int64_t Tk) {
  constexpr int kDv = 16 * kCols;
  extern __shared__ float smem[];
  float* sP = smem;
  float* sV = smem + kTileFloats;
  const int64_t T = d.T, D = d.D, G = d.NQ / d.NKV, ldo = d.B * d.NQ * d.D;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t bh = blockIdx.y, b = bh / d.NQ, h = bh % d.NQ;
  const int64_t c0 = static_cast<int64_t>(blockIdx.z) * kDv;
  const int bq = static_cast<int>(min64(kTile, T - i0));
  const int ty = tile_ty(), tx = tile_tx();
  const float* vh = v + (b * d.NKV + h / G) * Tk * D;
  const float* ph = probs + (bh * T + i0) * Tk;
  const bool active = dropout.active();

  float o[4][kCols];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < kCols; ++j) o[i][j] = 0.0f;
  for (int64_t j0 = 0; j0 < Tk; j0 += kTile) {
    const int bk = static_cast<int>(min64(kTile, Tk - j0));
    __syncthreads();  // the previous tile's readers
    for (int e = static_cast<int>(threadIdx.x); e < kTile * kTile; e += kTileThreads) {
      const int r = e / kTile, c = e % kTile;
      float p = r < bq && c < bk ? ph[r * Tk + j0 + c] : 0.0f;
      if (active && p != 0.0f)
        p *= keep_factor(dropout, attention_dropout_index(dropout, d, b, h, mask.q_position(i0 + r),
                                                          mask.k_position(j0 + c)));
      sP[r * kLdTile + c] = p;
    }
    load_tile<kDv>(sV, kDv, vh + j0 * D + c0, D, bk, static_cast<int>(min64(kDv, D - c0)));
    __syncthreads();
    tile_accumulate<kCols>(o, sP, sV);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = ty + 16 * i;
    if (r >= bq) continue;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int64_t c = c0 + tx + 16 * j;
      if (c < D) out[(i0 + r) * ldo + bh * D + c] = o[i][j];
    }
  }
}

// ---- Launch helpers --------------------------------------------------------------------------
/// Calls f(std::integral_constant<int, kCols>) with the column block for head dim D.
template <typename F>
void with_cols(int64_t D, F&& f) {
  if (D <= 32) {
    f(std::integral_constant<int, 2>{});
  } else if (D <= 64) {
    f(std::integral_constant<int, 4>{});
  } else {
    f(std::integral_constant<int, 8>{});
  }
}

unsigned int tiles(int64_t n) { return static_cast<unsigned int>((n + kTile - 1) / kTile); }

/// Raises the kernel's dynamic shared memory limit when above the default 48 KiB.
template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    MS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
}

dim3 grid3(int64_t x, int64_t y, int64_t z) {
  MS_CHECK(y <= kMaxGridYZ && z <= kMaxGridYZ, "attention grid (", x, ", ", y, ", ", z,
           ") too large");
  return dim3(static_cast<unsigned int>(x), static_cast<unsigned int>(y),
              static_cast<unsigned int>(z));
}

void launch_forward(const KernelContext& kc, const ForwardArgs& a) {
  const AttentionDims& d = a.dims;
  if (d.B * d.NQ * d.T == 0 || d.D == 0) return;
  MS_CHECK(d.NKV > 0 && d.NQ % d.NKV == 0, "attention: NQ ", d.NQ, " not a multiple of NKV ",
           d.NKV);
  with_cols(d.D, [&](auto cols) {
    constexpr int kCols = decltype(cols)::value;
    const size_t bytes = row_kernel_floats<kCols>() * sizeof(float);
    allow_shared(flash_forward_kernel<kCols>, bytes);
    const dim3 grid = grid3(tiles(d.T), d.B * d.NQ, (d.D + 16 * kCols - 1) / (16 * kCols));
    flash_forward_kernel<kCols><<<grid, kTileThreads, bytes, stream_of(kc)>>>(a);
    MS_CUDA_CHECK_LAUNCH();
  });
}

/// D = rowsum(dout * out) into drow, then dK/dV and dQ.
template <bool kGivenProbs>
void launch_backward(const KernelContext& kc, const BackwardArgs& a, const float* out,
                     float* drow) {
  const AttentionDims& d = a.dims;
  const int64_t BH = d.B * d.NQ, ldo = d.B * d.NQ * d.D;
  if (d.D == 0) return;
  MS_CHECK(d.NKV > 0 && d.NQ % d.NKV == 0, "attention: NQ ", d.NQ, " not a multiple of NKV ",
           d.NKV);
  if (BH * d.T > 0) {
    row_dot_kernel<<<blocks_for(BH * d.T * 32), kThreads, 0, stream_of(kc)>>>(drow, a.dout, out,
                                                                              d.T, BH, d.D, ldo);
    MS_CUDA_CHECK_LAUNCH();
  }
  with_cols(d.D, [&](auto cols) {
    constexpr int kCols = decltype(cols)::value;
    const int64_t blocks = (d.D + 16 * kCols - 1) / (16 * kCols);
    if (d.B * d.NKV * a.Tk > 0) {
      const size_t bytes = kv_kernel_floats<kCols>() * sizeof(float);
      allow_shared(attention_dkdv_kernel<kCols, kGivenProbs>, bytes);
      attention_dkdv_kernel<kCols, kGivenProbs>
          <<<grid3(tiles(a.Tk), d.B * d.NKV, blocks), kTileThreads, bytes, stream_of(kc)>>>(a);
      MS_CUDA_CHECK_LAUNCH();
    }
    if (BH * d.T > 0) {
      const size_t bytes = row_kernel_floats<kCols>() * sizeof(float);
      allow_shared(attention_dq_kernel<kCols, kGivenProbs>, bytes);
      attention_dq_kernel<kCols, kGivenProbs>
          <<<grid3(tiles(d.T), BH, blocks), kTileThreads, bytes, stream_of(kc)>>>(a);
      MS_CUDA_CHECK_LAUNCH();
    }
  });
}

/// out = dropout(probs) v, dropout at the positions of `mask`.
void launch_probs_times_values(const KernelContext& kc, float* out, const float* probs,
                               const float* v, const AttentionMask& mask, const AttentionDims& d,
                               const DropoutSpec& dropout) {
  if (d.B * d.NQ * d.T == 0 || d.D == 0) return;
  with_cols(d.D, [&](auto cols) {
    constexpr int kCols = decltype(cols)::value;
    const size_t bytes = (kTileFloats + kTile * 16 * kCols) * sizeof(float);
    allow_shared(probs_times_values_kernel<kCols>, bytes);
    const dim3 grid = grid3(tiles(d.T), d.B * d.NQ, (d.D + 16 * kCols - 1) / (16 * kCols));
    probs_times_values_kernel<kCols>
        <<<grid, kTileThreads, bytes, stream_of(kc)>>>(out, probs, v, mask, d, dropout, d.keys());
    MS_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

// ---- The kernels of kernel_signatures.inc --------------------------------------------------
void core_attention_forward(const KernelContext& kc, float* out, float* probs, const float* q,
                            const float* k, const float* v, const AttentionMask& mask,
                            const AttentionDims& dims, const DropoutSpec& dropout,
                            float* /*workspace*/) {
  const int64_t BH = dims.B * dims.NQ, T = dims.T, Tk = dims.keys();
  if (BH * T == 0) return;
  MS_CHECK(dims.NKV > 0 && dims.NQ % dims.NKV == 0, "attention: NQ ", dims.NQ,
           " not a multiple of NKV ", dims.NKV);
  if (Tk > 0) {
    MS_CHECK(BH <= kMaxGridYZ, "attention: B*NQ ", BH, " too large");
    scores_kernel<<<dim3(tiles(Tk), tiles(T), static_cast<unsigned int>(BH)), kTileThreads, 0,
                    stream_of(kc)>>>(probs, q, k, mask, dims, Tk);
    MS_CUDA_CHECK_LAUNCH();
    softmax_rows_kernel<<<blocks_for(BH * T * 32), kThreads, 0, stream_of(kc)>>>(probs, BH * T, Tk);
    MS_CUDA_CHECK_LAUNCH();
  }
  launch_probs_times_values(kc, out, probs, v, mask, dims, dropout);
}

void core_attention_backward(const KernelContext& kc, float* dq, float* dk, float* dv,
                             const float* dout, const float* probs, const float* q, const float* k,
                             const float* v, const AttentionDims& dims, const DropoutSpec& dropout,
                             float* workspace) {
  // workspace: the recomputed out [T, B, NQ*D], then drow [B, NQ, T].
  const AttentionMask identity{};  // dropout at positions qp = t, kp = j (the reference's rule)
  float* recomputed = workspace;
  float* drow = workspace + dims.T * dims.B * dims.NQ * dims.D;
  launch_probs_times_values(kc, recomputed, probs, v, identity, dims, dropout);
  BackwardArgs a{dq,      dk,    dv,   dout,     q,    k,       v,
                 nullptr, probs, drow, identity, dims, dropout, dims.keys()};
  launch_backward<true>(kc, a, recomputed, drow);
}

void flash_attention_forward(const KernelContext& kc, float* out, float* lse, const float* q,
                             const float* k, const float* v, const AttentionMask& mask,
                             const AttentionDims& dims, const DropoutSpec& dropout,
                             float* /*workspace*/) {
  launch_forward(kc, ForwardArgs{out, lse, q, k, v, mask, dims, dropout, dims.keys(), dims.keys()});
}

void flash_attention_backward(const KernelContext& kc, float* dq, float* dk, float* dv,
                              const float* dout, const float* out, const float* lse, const float* q,
                              const float* k, const float* v, const AttentionMask& mask,
                              const AttentionDims& dims, const DropoutSpec& dropout,
                              float* workspace) {
  // workspace: drow [B, NQ, T].
  BackwardArgs a{dq,  dk,      dv,        dout, q,    k,       v,
                 lse, nullptr, workspace, mask, dims, dropout, dims.keys()};
  launch_backward<false>(kc, a, out, workspace);
}

int64_t attention_workspace_floats(const KernelContext& /*kc*/, const AttentionDims& dims,
                                   AttentionKernel kernel, bool backward) {
  if (!backward) return 0;
  const int64_t drow = dims.B * dims.NQ * dims.T;
  return kernel == AttentionKernel::kCore ? dims.T * dims.B * dims.NQ * dims.D + drow : drow;
}

void kv_cache_attention_forward(const KernelContext& kc, float* out, const float* q,
                                const float* k_cache, const float* v_cache, int64_t B, int64_t NQ,
                                int64_t NKV, int64_t Tq, int64_t Tk, int64_t S, int64_t D,
                                float scale, float* /*workspace*/) {
  AttentionDims dims;
  dims.B = B;
  dims.T = Tq;
  dims.NQ = NQ;
  dims.NKV = NKV;
  dims.D = D;
  dims.scale = scale;
  dims.num_heads_total = NQ;
  dims.Tk = Tk;
  AttentionMask mask;  // causal: query t at position Tk - Tq + t sees keys j <= its position
  mask.q_offset = Tk - Tq;
  launch_forward(kc,
                 ForwardArgs{out, nullptr, q, k_cache, v_cache, mask, dims, DropoutSpec{}, Tk, S});
}

int64_t kv_cache_attention_workspace_floats(const KernelContext& /*kc*/, int64_t /*Tq*/,
                                            int64_t /*Tk*/) {
  return 0;
}

void fill_attention_kernels(KernelTable& t, const KernelOptions& options) {
  t.core_attention_forward = core_attention_forward;
  t.core_attention_backward = core_attention_backward;
  if (options
          .flash_attention) {  // as select_kernels: null unless selected (the model then uses core)
    t.flash_attention_forward = flash_attention_forward;
    t.flash_attention_backward = flash_attention_backward;
  }
  t.attention_workspace_floats = attention_workspace_floats;
  t.kv_cache_attention_forward = kv_cache_attention_forward;
  t.kv_cache_attention_workspace_floats = kv_cache_attention_workspace_floats;
}

}  // namespace mindspeed::cuda
