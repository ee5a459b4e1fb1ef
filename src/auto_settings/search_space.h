// The auto-settings search space: every candidate (candidate.h) for a world size that the
// engine's own validation accepts (validate_configs on the user's command line with the
// candidate's settings), so nothing the engine refuses is ever proposed. Port of the role of
// MindSpeed auto_settings' search space (search/search_space/).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "auto_settings/candidate.h"
#include "config/configs.h"
#include "core/status.h"

namespace mindspeed {

struct LegalCandidate {
  Candidate candidate;
  Configs configs;  ///< validated
};

struct SearchSpace {
  std::vector<LegalCandidate> legal;
  int64_t considered = 0;
  /// Why the others were refused: the validation message's first words, with counts.
  std::map<std::string, int64_t> refusals;
};

struct SearchLimits {
  int world_size = 1;
  int ranks_per_node = 1;  ///< tensor parallelism stays inside a node
  int64_t max_micro_batch_size = 16;
  int max_virtual_stages = 4;
  int max_context_parallel = 16;
};

/// `base`: the user's configuration parsed from the command line without the searched flags
/// (strip_searched_flags), not yet validated; `vocab_size`: the tokenizer's.
SearchSpace enumerate_candidates(const Configs& base, int64_t vocab_size,
                                 const SearchLimits& limits);

}  // namespace mindspeed
