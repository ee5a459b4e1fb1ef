// Ulysses all-to-alls (ulysses.h). Each packs its send buffer so that the block for rank k
// is contiguous, runs one variable-size all-to-all over the group, and unpacks.
#include "context_parallel/ulysses.h"

#include <numeric>

#include "core/check.h"
#include "core/tensor.h"

namespace mindspeed {
namespace {

Tensor workspace(const ForwardContext& ctx, int64_t floats) {
  return Tensor(*ctx.alloc, Shape{floats}, DType::kFloat32, MemoryCategory::kWorkspace);
}

// rows blocks of width floats between strided layouts, by the backend's kernels.
void copy_blocks(const ForwardContext& ctx, float* out, int64_t out_stride, const float* in,
                 int64_t in_stride, int64_t rows, int64_t width) {
  ctx.k().copy_2d(ctx.kc(), out, in, rows, width, out_stride, in_stride);
}

// [B, N, T_k, D] on every rank k -> [B, N/u, Tu, D] (heads block r).
void sequence_to_heads(const ForwardContext& ctx, ProcessGroup& group, const UlyssesShape& s,
                       float* out, const float* in) {
  const int u = group.size(), r = group.rank();
  MS_CHECK(static_cast<int>(s.lengths.size()) == u && s.N % u == 0, "Ulysses exchange of ", s.N,
           " heads over ", u, " ranks");
  const int64_t Nu = s.N / u, Tr = s.lengths[static_cast<size_t>(r)], Tu = s.total(), D = s.D;
  Tensor send = workspace(ctx, s.B * s.N * Tr * D);
  Tensor recv = workspace(ctx, s.B * Nu * Tu * D);
  std::vector<int64_t> send_counts(u), recv_counts(u);
  for (int k = 0; k < u; ++k) {  // block k: [B, Nu, Tr, D] of heads k*Nu...
    const int64_t block = Nu * Tr * D;
    copy_blocks(ctx, send.f32() + k * s.B * block, block, in + k * block, s.N * Tr * D, s.B, block);
    send_counts[k] = s.B * block;
    recv_counts[k] = s.B * Nu * s.lengths[static_cast<size_t>(k)] * D;
  }
  group.all_to_all_async(recv.f32(), recv_counts, send.f32(), send_counts)->wait();
  const float* src = recv.f32();
  for (int k = 0; k < u; ++k) {  // from rank k: [B, Nu, T_k, D] at positions offset(k)...
    const int64_t Tk = s.lengths[static_cast<size_t>(k)], off = s.offset(k);
    copy_blocks(ctx, out + off * D, Tu * D, src, Tk * D, s.B * Nu, Tk * D);
    src += s.B * Nu * Tk * D;
  }
}

// The inverse: [B, N/u, Tu, D] -> [B, N, T_r, D].
void heads_to_sequence(const ForwardContext& ctx, ProcessGroup& group, const UlyssesShape& s,
                       float* out, const float* in) {
  const int u = group.size(), r = group.rank();
  const int64_t Nu = s.N / u, Tr = s.lengths[static_cast<size_t>(r)], Tu = s.total(), D = s.D;
  Tensor send = workspace(ctx, s.B * Nu * Tu * D);
  Tensor recv = workspace(ctx, s.B * s.N * Tr * D);
  std::vector<int64_t> send_counts(u), recv_counts(u);
  float* dst = send.f32();
  for (int k = 0; k < u; ++k) {
    const int64_t Tk = s.lengths[static_cast<size_t>(k)], off = s.offset(k);
    copy_blocks(ctx, dst, Tk * D, in + off * D, Tu * D, s.B * Nu, Tk * D);
    dst += s.B * Nu * Tk * D;
    send_counts[k] = s.B * Nu * Tk * D;
    recv_counts[k] = s.B * Nu * Tr * D;
  }
  group.all_to_all_async(recv.f32(), recv_counts, send.f32(), send_counts)->wait();
  for (int k = 0; k < u; ++k) {
    const int64_t block = Nu * Tr * D;
    copy_blocks(ctx, out + k * block, s.N * Tr * D, recv.f32() + k * s.B * block, block, s.B,
                block);
  }
}

// [Tu, B, (N/u)*D] -> [T_r, B, N*D]: the rows of rank k are contiguous already.
void context_to_sequence(const ForwardContext& ctx, ProcessGroup& group, const UlyssesShape& s,
                         float* out, const float* in) {
  const int u = group.size(), r = group.rank();
  const int64_t Nu = s.N / u, Tr = s.lengths[static_cast<size_t>(r)], W = Nu * s.D;
  Tensor recv = workspace(ctx, Tr * s.B * s.N * s.D);
  std::vector<int64_t> send_counts(u), recv_counts(u);
  for (int k = 0; k < u; ++k) {
    send_counts[k] = s.lengths[static_cast<size_t>(k)] * s.B * W;
    recv_counts[k] = Tr * s.B * W;
  }
  group.all_to_all_async(recv.f32(), recv_counts, in, send_counts)->wait();
  for (int k = 0; k < u; ++k)
    copy_blocks(ctx, out + k * W, s.N * s.D, recv.f32() + k * Tr * s.B * W, W, Tr * s.B, W);
}

// The inverse: [T_r, B, N*D] -> [Tu, B, (N/u)*D].
void context_to_heads(const ForwardContext& ctx, ProcessGroup& group, const UlyssesShape& s,
                      float* out, const float* in) {
  const int u = group.size(), r = group.rank();
  const int64_t Nu = s.N / u, Tr = s.lengths[static_cast<size_t>(r)], W = Nu * s.D;
  Tensor send = workspace(ctx, Tr * s.B * s.N * s.D);
  std::vector<int64_t> send_counts(u), recv_counts(u);
  for (int k = 0; k < u; ++k) {
    copy_blocks(ctx, send.f32() + k * Tr * s.B * W, W, in + k * W, s.N * s.D, Tr * s.B, W);
    send_counts[k] = Tr * s.B * W;
    recv_counts[k] = s.lengths[static_cast<size_t>(k)] * s.B * W;
  }
  group.all_to_all_async(out, recv_counts, send.f32(), send_counts)->wait();
}

}  // namespace

int64_t UlyssesShape::total() const {
  return std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
}

int64_t UlyssesShape::offset(int k) const {
  return std::accumulate(lengths.begin(), lengths.begin() + k, int64_t{0});
}

void SequenceToHeads::forward(const ForwardContext& ctx, ProcessGroup& group, const UlyssesShape& s,
                              float* out, const float* in) {
  sequence_to_heads(ctx, group, s, out, in);
}
void SequenceToHeads::backward(const ForwardContext& ctx, ProcessGroup& group,
                               const UlyssesShape& s, float* din, const float* dout) {
  heads_to_sequence(ctx, group, s, din, dout);
}
void ContextToSequence::forward(const ForwardContext& ctx, ProcessGroup& group,
                                const UlyssesShape& s, float* out, const float* in) {
  context_to_sequence(ctx, group, s, out, in);
}
void ContextToSequence::backward(const ForwardContext& ctx, ProcessGroup& group,
                                 const UlyssesShape& s, float* din, const float* dout) {
  context_to_heads(ctx, group, s, din, dout);
}

void RepeatKeyValueHeads::forward(const ForwardContext& ctx, int64_t repeats, int64_t B, int64_t N,
                                  int64_t T, int64_t D, float* out, const float* in) {
  const int64_t head = T * D;
  for (int64_t k = 0; k < repeats; ++k)
    copy_blocks(ctx, out + k * head, repeats * head, in, head, B * N, head);
}

void RepeatKeyValueHeads::backward(const ForwardContext& ctx, int64_t repeats, int64_t B, int64_t N,
                                   int64_t T, int64_t D, float* din, const float* dout) {
  const int64_t head = T * D;
  copy_blocks(ctx, din, head, dout, repeats * head, B * N, head);
  for (int64_t bh = 0; bh < B * N; ++bh) {
    for (int64_t k = 1; k < repeats; ++k)
      ctx.k().add_inplace(ctx.kc(), din + bh * head, dout + (bh * repeats + k) * head, head);
  }
}

void AllGatherKeyValues::forward(const ForwardContext& ctx, ProcessGroup& group, int64_t B,
                                 int64_t N, int64_t T, int64_t D, float* out, const float* in) {
  const int u = group.size();
  const int64_t head = T * D;
  Tensor gathered = workspace(ctx, u * B * N * head);  // [u, B, N, T, D]
  group.all_gather(gathered.f32(), in, B * N * head);
  for (int k = 0; k < u; ++k)
    copy_blocks(ctx, out + k * head, u * head, gathered.f32() + k * B * N * head, head, B * N,
                head);
}

void AllGatherKeyValues::backward(const ForwardContext& ctx, ProcessGroup& group, int64_t B,
                                  int64_t N, int64_t T, int64_t D, float* din, const float* dout) {
  const int u = group.size();
  const int64_t head = T * D;
  Tensor blocks = workspace(ctx, u * B * N * head);  // [u, B, N, T, D]
  for (int k = 0; k < u; ++k)
    copy_blocks(ctx, blocks.f32() + k * B * N * head, head, dout + k * head, u * head, B * N, head);
  group.reduce_scatter(din, blocks.f32(), B * N * head);
}

}  // namespace mindspeed
