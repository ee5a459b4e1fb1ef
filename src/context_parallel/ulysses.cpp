// Ulysses all-to-alls (ulysses.h). Each packs its send buffer so that the block for rank k
// is contiguous, runs one variable-size all-to-all over the group, and unpacks.
#include "context_parallel/ulysses.h"

#include <cstring>
#include <numeric>

#include "core/check.h"
#include "core/tensor.h"

namespace mindspeed {
namespace {

void copy_floats(float* dst, const float* src, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// [B, N, T_k, D] on every rank k -> [B, N/u, Tu, D] (heads block r).
void sequence_to_heads(Allocator& alloc, ProcessGroup& group, const UlyssesShape& s, float* out,
                       const float* in) {
  const int u = group.size(), r = group.rank();
  MS_CHECK(static_cast<int>(s.lengths.size()) == u && s.N % u == 0, "Ulysses exchange of ", s.N,
           " heads over ", u, " ranks");
  const int64_t Nu = s.N / u, Tr = s.lengths[static_cast<size_t>(r)], Tu = s.total(), D = s.D;
  Tensor send(alloc, Shape{s.B * s.N * Tr * D}, DType::kFloat32, MemoryCategory::kWorkspace);
  Tensor recv(alloc, Shape{s.B * Nu * Tu * D}, DType::kFloat32, MemoryCategory::kWorkspace);
  std::vector<int64_t> send_counts(u), recv_counts(u);
  float* dst = send.f32();
  for (int k = 0; k < u; ++k) {  // block k: [B, Nu, Tr, D] of heads k*Nu...
    for (int64_t b = 0; b < s.B; ++b) {
      copy_floats(dst, in + (b * s.N + k * Nu) * Tr * D, Nu * Tr * D);
      dst += Nu * Tr * D;
    }
    send_counts[k] = s.B * Nu * Tr * D;
    recv_counts[k] = s.B * Nu * s.lengths[static_cast<size_t>(k)] * D;
  }
  group.all_to_all_async(recv.f32(), recv_counts, send.f32(), send_counts)->wait();
  const float* src = recv.f32();
  for (int k = 0; k < u; ++k) {  // from rank k: [B, Nu, T_k, D] at positions offset(k)...
    const int64_t Tk = s.lengths[static_cast<size_t>(k)], off = s.offset(k);
    for (int64_t bh = 0; bh < s.B * Nu; ++bh) {
      copy_floats(out + (bh * Tu + off) * D, src, Tk * D);
      src += Tk * D;
    }
  }
}

// The inverse: [B, N/u, Tu, D] -> [B, N, T_r, D].
void heads_to_sequence(Allocator& alloc, ProcessGroup& group, const UlyssesShape& s, float* out,
                       const float* in) {
  const int u = group.size(), r = group.rank();
  const int64_t Nu = s.N / u, Tr = s.lengths[static_cast<size_t>(r)], Tu = s.total(), D = s.D;
  Tensor send(alloc, Shape{s.B * Nu * Tu * D}, DType::kFloat32, MemoryCategory::kWorkspace);
  Tensor recv(alloc, Shape{s.B * s.N * Tr * D}, DType::kFloat32, MemoryCategory::kWorkspace);
  std::vector<int64_t> send_counts(u), recv_counts(u);
  float* dst = send.f32();
  for (int k = 0; k < u; ++k) {
    const int64_t Tk = s.lengths[static_cast<size_t>(k)], off = s.offset(k);
    for (int64_t bh = 0; bh < s.B * Nu; ++bh) {
      copy_floats(dst, in + (bh * Tu + off) * D, Tk * D);
      dst += Tk * D;
    }
    send_counts[k] = s.B * Nu * Tk * D;
    recv_counts[k] = s.B * Nu * Tr * D;
  }
  group.all_to_all_async(recv.f32(), recv_counts, send.f32(), send_counts)->wait();
  const float* src = recv.f32();
  for (int k = 0; k < u; ++k) {
    for (int64_t b = 0; b < s.B; ++b) {
      copy_floats(out + (b * s.N + k * Nu) * Tr * D, src, Nu * Tr * D);
      src += Nu * Tr * D;
    }
  }
}

// [Tu, B, (N/u)*D] -> [T_r, B, N*D]: the rows of rank k are contiguous already.
void context_to_sequence(Allocator& alloc, ProcessGroup& group, const UlyssesShape& s, float* out,
                         const float* in) {
  const int u = group.size(), r = group.rank();
  const int64_t Nu = s.N / u, Tr = s.lengths[static_cast<size_t>(r)], W = Nu * s.D;
  Tensor recv(alloc, Shape{Tr * s.B * s.N * s.D}, DType::kFloat32, MemoryCategory::kWorkspace);
  std::vector<int64_t> send_counts(u), recv_counts(u);
  for (int k = 0; k < u; ++k) {
    send_counts[k] = s.lengths[static_cast<size_t>(k)] * s.B * W;
    recv_counts[k] = Tr * s.B * W;
  }
  group.all_to_all_async(recv.f32(), recv_counts, in, send_counts)->wait();
  for (int k = 0; k < u; ++k) {
    const float* src = recv.f32() + k * Tr * s.B * W;
    for (int64_t row = 0; row < Tr * s.B; ++row)
      copy_floats(out + row * s.N * s.D + k * W, src + row * W, W);
  }
}

// The inverse: [T_r, B, N*D] -> [Tu, B, (N/u)*D].
void context_to_heads(Allocator& alloc, ProcessGroup& group, const UlyssesShape& s, float* out,
                      const float* in) {
  const int u = group.size(), r = group.rank();
  const int64_t Nu = s.N / u, Tr = s.lengths[static_cast<size_t>(r)], W = Nu * s.D;
  Tensor send(alloc, Shape{Tr * s.B * s.N * s.D}, DType::kFloat32, MemoryCategory::kWorkspace);
  std::vector<int64_t> send_counts(u), recv_counts(u);
  for (int k = 0; k < u; ++k) {
    float* dst = send.f32() + k * Tr * s.B * W;
    for (int64_t row = 0; row < Tr * s.B; ++row)
      copy_floats(dst + row * W, in + row * s.N * s.D + k * W, W);
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

void SequenceToHeads::forward(Allocator& alloc, ProcessGroup& group, const UlyssesShape& s,
                              float* out, const float* in) {
  sequence_to_heads(alloc, group, s, out, in);
}
void SequenceToHeads::backward(Allocator& alloc, ProcessGroup& group, const UlyssesShape& s,
                               float* din, const float* dout) {
  heads_to_sequence(alloc, group, s, din, dout);
}
void ContextToSequence::forward(Allocator& alloc, ProcessGroup& group, const UlyssesShape& s,
                                float* out, const float* in) {
  context_to_sequence(alloc, group, s, out, in);
}
void ContextToSequence::backward(Allocator& alloc, ProcessGroup& group, const UlyssesShape& s,
                                 float* din, const float* dout) {
  context_to_heads(alloc, group, s, din, dout);
}

void RepeatKeyValueHeads::forward(int64_t repeats, int64_t B, int64_t N, int64_t T, int64_t D,
                                  float* out, const float* in) {
  for (int64_t bh = 0; bh < B * N; ++bh)
    for (int64_t k = 0; k < repeats; ++k)
      copy_floats(out + (bh * repeats + k) * T * D, in + bh * T * D, T * D);
}

void RepeatKeyValueHeads::backward(int64_t repeats, int64_t B, int64_t N, int64_t T, int64_t D,
                                   float* din, const float* dout) {
  for (int64_t bh = 0; bh < B * N; ++bh) {
    float* d = din + bh * T * D;
    copy_floats(d, dout + bh * repeats * T * D, T * D);
    for (int64_t k = 1; k < repeats; ++k) {
      const float* g = dout + (bh * repeats + k) * T * D;
      for (int64_t i = 0; i < T * D; ++i) d[i] += g[i];
    }
  }
}

void AllGatherKeyValues::forward(Allocator& alloc, ProcessGroup& group, int64_t B, int64_t N,
                                 int64_t T, int64_t D, float* out, const float* in) {
  const int u = group.size();
  Tensor gathered(alloc, Shape{u * B * N * T * D}, DType::kFloat32,
                  MemoryCategory::kWorkspace);  // [u, B, N, T, D]
  group.all_gather(gathered.f32(), in, B * N * T * D);
  for (int k = 0; k < u; ++k)
    for (int64_t bh = 0; bh < B * N; ++bh)
      copy_floats(out + (bh * u + k) * T * D, gathered.f32() + (k * B * N + bh) * T * D, T * D);
}

void AllGatherKeyValues::backward(Allocator& alloc, ProcessGroup& group, int64_t B, int64_t N,
                                  int64_t T, int64_t D, float* din, const float* dout) {
  const int u = group.size();
  Tensor blocks(alloc, Shape{u * B * N * T * D}, DType::kFloat32,
                MemoryCategory::kWorkspace);  // [u, B, N, T, D]
  for (int k = 0; k < u; ++k)
    for (int64_t bh = 0; bh < B * N; ++bh)
      copy_floats(blocks.f32() + (k * B * N + bh) * T * D, dout + (bh * u + k) * T * D, T * D);
  group.reduce_scatter(din, blocks.f32(), B * N * T * D);
}

}  // namespace mindspeed
