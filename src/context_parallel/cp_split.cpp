// CpSplit and get_batch_on_this_cp_rank (cp_split.h).
#include "context_parallel/cp_split.h"

#include <numeric>

#include "core/check.h"

namespace mindspeed {

CpSplit::CpSplit(const ContextParallelConfig& cp, int cp_size, int64_t seq_length)
    : seq_length_(seq_length),
      ring_(cp_size / cp.ulysses_degree),
      ulysses_(cp.ulysses_degree),
      load_balanced_(!cp.general_mask) {
  MS_CHECK(cp.ulysses_degree >= 1 && cp_size % cp.ulysses_degree == 0, "Ulysses degree ",
           cp.ulysses_degree, " does not divide the context-parallel size ", cp_size);
}

std::vector<int32_t> CpSplit::ring_share(int ring_rank) const {
  std::vector<int32_t> positions;
  auto append = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) positions.push_back(static_cast<int32_t>(p));
  };
  if (ring_ == 1) {
    append(0, seq_length_);
  } else if (load_balanced_) {
    const int64_t chunk = seq_length_ / (2 * ring_);
    MS_CHECK(chunk * 2 * ring_ == seq_length_, "sequence length ", seq_length_,
             " is not divisible by 2 x ring degree ", ring_);
    append(ring_rank * chunk, (ring_rank + 1) * chunk);
    append((2 * ring_ - 1 - ring_rank) * chunk, (2 * ring_ - ring_rank) * chunk);
  } else {
    const int64_t share = seq_length_ / ring_;
    MS_CHECK(share * ring_ == seq_length_, "sequence length ", seq_length_,
             " is not divisible by ring degree ", ring_);
    append(ring_rank * share, (ring_rank + 1) * share);
  }
  return positions;
}

std::vector<int64_t> CpSplit::ulysses_lengths(int64_t length) const {
  std::vector<int64_t> lengths(static_cast<size_t>(ulysses_), length / ulysses_);
  for (int64_t k = 0; k < length % ulysses_; ++k) ++lengths[static_cast<size_t>(k)];
  return lengths;
}

std::vector<int32_t> CpSplit::rank_positions(int cp_rank) const {
  const std::vector<int32_t> share = ring_share(cp_rank / ulysses_);
  const std::vector<int64_t> lengths = ulysses_lengths(static_cast<int64_t>(share.size()));
  const int u = cp_rank % ulysses_;
  const int64_t begin = std::accumulate(lengths.begin(), lengths.begin() + u, int64_t{0});
  return {share.begin() + begin, share.begin() + begin + lengths[static_cast<size_t>(u)]};
}

MicroBatch get_batch_on_this_cp_rank(const MicroBatch& full, const CpSplit& split, int cp_rank) {
  MS_CHECK(full.T == split.seq_length(), "micro-batch of ", full.T,
           " positions for a context-parallel split of ", split.seq_length());
  MS_CHECK(full.seq_index.empty(), "micro-batch already split over context parallelism");
  const std::vector<int32_t> positions = split.rank_positions(cp_rank);
  const int64_t B = full.B, S = full.T, T = static_cast<int64_t>(positions.size());
  MicroBatch mb;
  mb.B = B;
  mb.T = T;
  mb.first_sample = full.first_sample;
  mb.seq_total = S;
  mb.seq_index = positions;
  auto take = [&](const auto& from, auto& to) {
    if (from.empty()) return;
    to.resize(static_cast<size_t>(B * T));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) to[b * T + t] = from[b * S + positions[t]];
  };
  take(full.tokens, mb.tokens);
  take(full.labels, mb.labels);
  take(full.loss_mask, mb.loss_mask);
  take(full.position_ids, mb.position_ids);
  take(full.doc_start, mb.doc_start);
  mb.sample_doc_start = full.doc_start;
  mb.sample_loss_tokens = std::accumulate(full.loss_mask.begin(), full.loss_mask.end(), 0.0);
  return mb;
}

}  // namespace mindspeed
