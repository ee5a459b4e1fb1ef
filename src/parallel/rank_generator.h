// Port of megatron/core/parallel_state.py RankGenerator and
// generate_masked_orthogonal_rank_groups: the ranks of every process group, from the
// parallel sizes and the order string ("tp-cp-ep-dp-pp" by default; the first token varies
// fastest). A group for a token set (e.g. "tp-pp") holds the ranks that differ only in those
// coordinates, ordered by them; groups are listed by the remaining coordinates.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace mindspeed {

using RankGroups = std::vector<std::vector<int>>;

/// Megatron's generate_masked_orthogonal_rank_groups.
RankGroups masked_orthogonal_rank_groups(int world_size, const std::vector<int>& sizes,
                                         const std::vector<bool>& mask);

class RankGenerator {
 public:
  /// Sizes of tp, ep, dp, pp, cp; `order` like "tp-cp-ep-dp-pp". A size > 1 missing from the
  /// order is an error; missing sizes of 1 are appended.
  static StatusOr<RankGenerator> create(int tp, int ep, int dp, int pp, int cp, std::string order);
  /// Groups for a token set such as "tp", "dp-cp" or "tp-pp".
  RankGroups get_ranks(const std::string& tokens) const;
  int world_size() const { return world_size_; }
  const std::string& order() const { return order_; }

 private:
  std::map<std::string, int> sizes_;
  std::string order_;
  std::vector<std::string> ordered_;
  std::vector<int> ordered_sizes_;
  int world_size_ = 1;
};

/// Every group a run creates (dense and expert generators), named as in Megatron.
struct ParallelGroups {
  std::map<std::string, RankGroups> groups;  ///< "tp", "pp", "dp", "dp-cp", "cp", "mp", ...
};

struct ParallelLayout {
  int world_size = 1;
  int tp = 1, pp = 1, cp = 1, ep = 1, etp = 0;  ///< etp 0 = same as tp
  bool tp_pp_dp_order = false;                  ///< --use-tp-pp-dp-mapping
  /// Ulysses ranks inside each context-parallel group (MindSpeed's hybrid CP): "cp-ulysses"
  /// groups are runs of this many consecutive cp ranks, "cp-ring" groups take every
  /// cp_ulysses-th cp rank. 1 = ring only (cp-ring = cp); cp = Ulysses only.
  int cp_ulysses = 1;
  /// 2D tensor parallelism (--tp-2d --tp-x): X of the X x Y grid of each tp group ("tp-x",
  /// "tp-y" and "tp-y-cp" groups); 0 = none.
  int tp_x = 0;
};

struct ParallelConfig;
/// The layout of `config` on `world_size` ranks.
ParallelLayout parallel_layout(const ParallelConfig& config, int world_size);

/// Builds all groups, or the rule a layout breaks (sizes that do not divide, mismatched
/// pipeline groups between the dense and expert generators).
StatusOr<ParallelGroups> build_parallel_groups(const ParallelLayout& layout);
/// Human-readable listing, one line per group kind (the dry-run output).
std::string format_parallel_groups(const ParallelLayout& layout, const ParallelGroups& groups);

}  // namespace mindspeed
