// Which positions of a sample each context-parallel rank holds, and the slicing of a
// micro-batch to them: port of MindSpeed's get_batch_on_this_cp_rank
// (mindspeed/core/context_parallel/get_batch_utils.py) for every algorithm:
//  * Ulysses: contiguous shares, uneven when the length does not divide (MindSpeed's
//    unaligned Ulysses, cal_split_sizes: the first s % C ranks hold one position more);
//  * ring, causal mask: 2R chunks, ring rank r keeps chunks r and 2R-1-r (load balance);
//  * ring, general mask: contiguous shares;
//  * hybrid: the ring split over the R ring ranks, then each ring share cut into u
//    contiguous sub-shares, one per Ulysses rank (cp rank = ring rank * u + Ulysses rank,
//    MindSpeed's hybrid group layout).
#pragma once

#include <cstdint>
#include <vector>

#include "config/parallel_config.h"
#include "module/forward_context.h"

namespace mindspeed {

class CpSplit {
 public:
  /// `cp` validated (config/validate.cpp): ulysses_degree divides cp_size.
  CpSplit(const ContextParallelConfig& cp, int cp_size, int64_t seq_length);

  int64_t seq_length() const { return seq_length_; }
  int ring_degree() const { return ring_; }
  int ulysses_degree() const { return ulysses_; }
  /// Positions of the sample that ring rank `ring_rank`'s Ulysses group holds together (the
  /// queries and keys of that ring step after the Ulysses all-to-all), in local order.
  std::vector<int32_t> ring_share(int ring_rank) const;
  /// Lengths of the u sub-shares of a ring share of `length` positions.
  std::vector<int64_t> ulysses_lengths(int64_t length) const;
  /// Positions cp rank `cp_rank` holds, in local order.
  std::vector<int32_t> rank_positions(int cp_rank) const;

 private:
  int64_t seq_length_;
  int ring_, ulysses_;
  bool load_balanced_;
};

/// This cp rank's share of `full` (micro-batch of whole samples): tokens, labels, loss mask,
/// position ids and document starts at its positions, with seq_index, seq_total,
/// sample_doc_start and sample_loss_tokens set (MicroBatch).
MicroBatch get_batch_on_this_cp_rank(const MicroBatch& full, const CpSplit& split, int cp_rank);

}  // namespace mindspeed
