// sparse_mode_mask(): npu_fusion_attention's sparse modes as AttentionMasks (sparse_mode.h).
// Without varlen a mode is offsets and a band: rightDownCausal aligns the last query with the
// last key by shifting the positions (q_offset = Skv - Sq when Skv > Sq, else
// k_offset = Sq - Skv, so both stay >= 0). With varlen each query row gets its key range.
#include "kernels/sparse_mode.h"

#include <algorithm>
#include <limits>

namespace mindspeed {
namespace {

// Cumulative lengths -> per-sequence starts and lengths; checks that they add up to `total`.
Status split_lengths(const std::vector<int64_t>& cum, int64_t total, const char* name,
                     std::vector<int64_t>& start, std::vector<int64_t>& len) {
  int64_t prev = 0;
  for (size_t i = 0; i < cum.size(); ++i) {
    if (cum[i] < prev) {
      return invalid_argument(name, " must be cumulative (non-decreasing, from 0): entry ", i,
                              " is ", cum[i], " after ", prev);
    }
    start.push_back(prev);
    len.push_back(cum[i] - prev);
    prev = cum[i];
  }
  if (prev != total) {
    return invalid_argument(name, " ends at ", prev, " but there are ", total, " rows");
  }
  return ok_status();
}

// Visible key rows [c_lo, c_hi] (relative to the sequence's first key) of query row r of a
// sequence of Sq queries and Skv keys under `mode` (0-4 as their non-varlen rule).
void row_range(int mode, int64_t pre, int64_t next, int64_t Sq, int64_t Skv, int64_t r,
               int64_t& c_lo, int64_t& c_hi) {
  const int64_t shift = Skv - Sq;  // bottom-right alignment
  c_lo = 0;
  c_hi = Skv - 1;
  switch (mode) {
    case 0:
      c_lo = r - pre;
      c_hi = r + next;
      break;
    case 2:
      c_hi = r;
      break;
    case 3:
      c_hi = r + shift;
      break;
    case 4:
      c_lo = r + shift - pre;
      c_hi = r + shift + next;
      break;
    default:  // 1: every key
      break;
  }
  c_lo = std::clamp<int64_t>(c_lo, 0, Skv);  // c_lo > c_hi: no key
  c_hi = std::clamp<int64_t>(c_hi, c_lo - 1, Skv - 1);
}

StatusOr<SparseMask> varlen_mask(const SparseModeArgs& a) {
  const int mode = a.sparse_mode;
  if (a.B != 1) return invalid_argument("varlen (TND) sparse modes take B = 1, got B = ", a.B);
  if (a.actual_seq_qlen.size() != a.actual_seq_kvlen.size() || a.actual_seq_qlen.empty()) {
    return invalid_argument(
        "actual_seq_qlen and actual_seq_kvlen must have the same, non-zero "
        "number of entries (got ",
        a.actual_seq_qlen.size(), " and ", a.actual_seq_kvlen.size(), ")");
  }
  std::vector<int64_t> qs, ql, ks, kl;
  MS_RETURN_IF_ERROR(split_lengths(a.actual_seq_qlen, a.Tq, "actual_seq_qlen", qs, ql));
  MS_RETURN_IF_ERROR(split_lengths(a.actual_seq_kvlen, a.Tk, "actual_seq_kvlen", ks, kl));
  const int64_t n = static_cast<int64_t>(ql.size());
  int64_t first = -1, last = -1;  // first and last sequence with queries
  for (int64_t i = 0; i < n; ++i) {
    if (ql[i] > 0 && kl[i] == 0) {
      return invalid_argument("sequence ", i, " has ", ql[i],
                              " queries but no keys (not supported by npu_fusion_attention)");
    }
    if (ql[i] > 0) {
      if (first < 0) first = i;
      last = i;
    }
  }
  // Modes 7 and 8: one sequence is a band (bottom-right aligned), the others causal.
  const int64_t band = mode == 7 ? last : mode == 8 ? first : -1;
  if (band >= 0) {
    const int64_t Sq = ql[band], Skv = kl[band];
    if (a.pre_tokens < Skv) {
      return invalid_argument("sparse_mode ", mode, ": pre_tokens (", a.pre_tokens,
                              ") must be >= the key length of the band sequence (", Skv, ")");
    }
    if (mode == 7 && (a.next_tokens > 0 || a.next_tokens < Sq - Skv)) {
      return invalid_argument("sparse_mode 7: next_tokens (", a.next_tokens, ") must be in [",
                              Sq - Skv, ", 0] (last sequence: Sq - Skv .. 0)");
    }
    if (mode == 8 && a.next_tokens < Sq - Skv) {
      return invalid_argument("sparse_mode 8: next_tokens (", a.next_tokens,
                              ") must be >= ", Sq - Skv, " (first sequence: Sq - Skv)");
    }
  }
  if (mode == 7) {
    for (int64_t i = 0; i < n; ++i) {
      if (i != band && ql[i] > kl[i]) {
        return invalid_argument("sparse_mode 7: sequence ", i, " has more queries (", ql[i],
                                ") than keys (", kl[i], ")");
      }
    }
  }
  SparseMask r;
  r.seq_total = std::max(a.Tq, a.Tk);
  r.base.pre_tokens = kAllTokens;  // the rows' ranges: [doc_start, q_pos]
  r.base.next_tokens = 0;
  r.q_pos.resize(a.Tq);
  r.doc_start.resize(a.Tq);
  for (int64_t i = 0; i < n; ++i) {
    const int rule = i == band ? 4 : mode == 7 ? 3 : mode == 8 ? 2 : mode;
    for (int64_t q = 0; q < ql[i]; ++q) {
      int64_t c_lo, c_hi;
      row_range(rule, a.pre_tokens, a.next_tokens, ql[i], kl[i], q, c_lo, c_hi);
      r.doc_start[qs[i] + q] = static_cast<int32_t>(ks[i] + c_lo);
      r.q_pos[qs[i] + q] = static_cast<int32_t>(ks[i] + c_hi);
    }
  }
  return r;
}

}  // namespace

StatusOr<SparseMask> sparse_mode_mask(const SparseModeArgs& a) {
  const int mode = a.sparse_mode;
  if (mode < 0 || mode > 8) return invalid_argument("sparse_mode must be 0..8, got ", mode);
  if (a.B <= 0 || a.Tq <= 0 || a.Tk <= 0) {
    return invalid_argument("sparse_mode ", mode, ": B, Tq and Tk must be positive (got ", a.B,
                            ", ", a.Tq, ", ", a.Tk, ")");
  }
  const int64_t limit = std::numeric_limits<int32_t>::max() / 2;
  if (a.Tq > limit || a.Tk > limit)
    return invalid_argument("sequence too long for int32 positions");
  const bool varlen = !a.actual_seq_qlen.empty() || !a.actual_seq_kvlen.empty();
  const bool band = mode == 0 || mode == 4 || mode == 7 || mode == 8;
  if (band && a.pre_tokens + a.next_tokens < 0) {
    return invalid_argument("sparse_mode ", mode, ": pre_tokens + next_tokens must be >= 0 (got ",
                            a.pre_tokens, " + ", a.next_tokens, ")");
  }
  if ((mode == 7 || mode == 8) && !varlen) {
    return invalid_argument("sparse_mode ", mode,
                            " is varlen only: give actual_seq_qlen and actual_seq_kvlen");
  }
  if (mode == 5 && varlen) {
    return invalid_argument("sparse_mode 5 (uncompressed prefix) is not supported with varlen");
  }
  if (mode == 6 && varlen) return unimplemented("sparse_mode 6 (prefix) with varlen");
  if (mode != 5 && mode != 6 && !a.prefix.empty()) {
    return invalid_argument("prefix is for sparse_mode 5 and 6 only (got sparse_mode ", mode, ")");
  }
  if (varlen) return varlen_mask(a);

  SparseMask r;
  r.seq_total = std::max(a.Tq, a.Tk);
  AttentionMask& m = r.base;
  const int64_t q_shift = std::max<int64_t>(a.Tk - a.Tq, 0),
                k_shift = std::max<int64_t>(a.Tq - a.Tk, 0);
  switch (mode) {
    case 0:
      m.pre_tokens = a.pre_tokens;
      m.next_tokens = a.next_tokens;
      break;
    case 1:
      m.pre_tokens = kAllTokens;
      m.next_tokens = kAllTokens;
      break;
    case 2:
      break;  // the defaults: causal, top-left aligned
    case 4:
      m.pre_tokens = a.pre_tokens;
      m.next_tokens = a.next_tokens;
      [[fallthrough]];
    default:  // 3, 5, 6: bottom-right aligned
      m.q_offset = q_shift;
      m.k_offset = k_shift;
      break;
  }
  if (mode == 5 || mode == 6) {
    if (static_cast<int64_t>(a.prefix.size()) != a.B) {
      return invalid_argument("sparse_mode ", mode, " needs one prefix length per sample (", a.B,
                              "), got ", a.prefix.size());
    }
    const int64_t lo = a.Tq > a.Tk ? 0 : a.Tk - a.Tq;
    for (int64_t b = 0; b < a.B; ++b) {
      if (a.prefix[b] < lo || a.prefix[b] > a.Tk) {
        return invalid_argument("sparse_mode ", mode, ": prefix[", b, "] = ", a.prefix[b],
                                " must be in [", lo, ", ", a.Tk, "]");
      }
      r.prefix_end.push_back(static_cast<int32_t>(a.prefix[b] + k_shift));
    }
  }
  return r;
}

}  // namespace mindspeed
