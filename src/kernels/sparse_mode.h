// The attention masks of torch_npu's npu_fusion_attention sparse modes (MindSpeed's
// --sparse-mode, --pre-tockens, --next-tockens; docs/zh/ops/fusion_attention.md), expressed
// as an AttentionMask (kernel_types.h) for the ref/ and cpu/ attention kernels. Mode by mode,
// for a query row r and a key row c of one sequence of Sq queries and Skv keys:
//   0 defaultMask: the band c in [r - pre_tokens, r + next_tokens] (top-left aligned);
//   1 allMask:     every key (the kernels take no explicit mask matrix);
//   2 leftUpCausal:    c <= r;
//   3 rightDownCausal: c <= r + Skv - Sq;
//   4 band, bottom-right aligned: c - (Skv - Sq) in [r - pre_tokens, r + next_tokens];
//   5, 6 prefix: mode 3 plus the first prefix[b] keys of sample b for every query;
//   7 varlen, mode 3 per sequence except the last non-empty one, which is mode 4;
//   8 varlen, mode 2 per sequence except the first non-empty one, which is mode 4.
// Varlen (TND): B = 1 and the sequences are given by cumulative lengths actual_seq_qlen /
// actual_seq_kvlen (e.g. {2, 4, 6, 8, 10}); no query sees another sequence's keys. Modes 0-4
// accept them too and then apply per sequence. pre/next are ignored by modes 1, 2, 3, 5, 6.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kernels/kernel_types.h"

namespace mindspeed {

/// MindSpeed's defaults of --pre-tockens and --next-tockens.
inline constexpr int64_t kSparseModePreTokens = 65536;
inline constexpr int64_t kSparseModeNextTokens = 0;

struct SparseModeArgs {
  int sparse_mode = 0;
  int64_t pre_tokens = kSparseModePreTokens;
  int64_t next_tokens = kSparseModeNextTokens;
  int64_t B = 1;                          ///< samples (1 with varlen)
  int64_t Tq = 0, Tk = 0;                 ///< query / key rows per sample (varlen: in total)
  std::vector<int64_t> prefix;            ///< modes 5, 6: [B] prefix length N of each sample
  std::vector<int64_t> actual_seq_qlen;   ///< varlen: cumulative query lengths
  std::vector<int64_t> actual_seq_kvlen;  ///< varlen: cumulative key/value lengths
};

/// An AttentionMask and the per-row arrays it points into (mask() rebuilds the pointers, so
/// the struct may be copied or moved).
struct SparseMask {
  AttentionMask base;               ///< the scalars; its pointers are null
  std::vector<int32_t> q_pos;       ///< [Tq] (varlen) or empty
  std::vector<int32_t> doc_start;   ///< [B*Tq] (varlen) or empty
  std::vector<int32_t> prefix_end;  ///< [B] (modes 5, 6) or empty
  int64_t seq_total = 0;            ///< positions the mask uses: AttentionDims::seq_total

  AttentionMask mask() const {
    AttentionMask m = base;
    if (!q_pos.empty()) m.q_pos = q_pos.data();
    if (!doc_start.empty()) m.doc_start = doc_start.data();
    if (!prefix_end.empty()) m.prefix = prefix_end.data();
    return m;
  }
};

/// The mask of `args.sparse_mode`, or InvalidArgument for a combination npu_fusion_attention
/// rejects (unknown mode, pre + next < 0 in modes 0/4, prefix lengths out of range or missing,
/// cumulative lengths that do not add up, varlen-only modes without them, mode 5 with them,
/// the band conditions of modes 7/8), or Unimplemented for mode 6 with varlen.
/// With varlen every query row gets its visible key range [doc_start, q_pos] (pre_tokens all,
/// next_tokens 0): the dropout indices then follow these positions.
StatusOr<SparseMask> sparse_mode_mask(const SparseModeArgs& args);

}  // namespace mindspeed
