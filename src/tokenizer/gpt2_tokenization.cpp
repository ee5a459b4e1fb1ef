// GPT-2 byte-level BPE (see gpt2_tokenization.h).
#include "tokenizer/gpt2_tokenization.h"

#include <array>
#include <atomic>
#include <climits>
#include <functional>
#include <optional>
#include <queue>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "core/logging.h"
#include "tokenizer/file_util.h"
#include "tokenizer/unicode.h"

namespace mindspeed {
namespace {

std::string hex_code_point(char32_t cp) {
  std::ostringstream out;
  out << "U+" << std::hex << std::uppercase;
  out.width(4);
  out.fill('0');
  out << static_cast<uint32_t>(cp);
  return out.str();
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Pieces of 3..64 bytes are cached: shorter ones are as cheap to merge as to look up,
// longer ones are rare and would bloat the cache.
constexpr size_t kMinCachedPieceBytes = 3;
constexpr size_t kMaxCachedPieceBytes = 64;
// The cache is cleared when it reaches this many entries (bounded memory on huge corpora).
constexpr size_t kMaxCacheEntries = 1 << 16;

// Megatron's self.cache, one per thread (no locking): piece bytes -> ids. `owner` is the
// instance_id_ of the tokenizer the entries belong to.
struct BpeCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};
thread_local BpeCache bpe_cache;

std::atomic<uint64_t> next_instance_id{1};

}  // namespace

GPT2BPETokenizer::GPT2BPETokenizer(TokenizerIdentifiers identifiers)
    : Tokenizer(std::move(identifiers)), instance_id_(next_instance_id.fetch_add(1)) {}

GPT2BPETokenizer::~GPT2BPETokenizer() = default;

StatusOr<std::unique_ptr<GPT2BPETokenizer>> GPT2BPETokenizer::load(const std::string& vocab_file,
                                                                   const std::string& merge_file) {
  TokenizerIdentifiers identifiers;
  identifiers.class_name = "_GPT2BPETokenizer";
  identifiers.tokenizer_path = {vocab_file, merge_file};
  std::unique_ptr<GPT2BPETokenizer> tok(new GPT2BPETokenizer(std::move(identifiers)));

  // ---- vocabulary: {"symbol": id, ...}
  MS_ASSIGN_OR_RETURN(std::string vocab_text, read_text_file(vocab_file, "vocab file"));
  std::string json_error;
  std::optional<nlohmann::json> parsed = try_parse_json(vocab_text, &json_error);
  if (!parsed) {
    return invalid_argument("vocab file '", vocab_file, "': not valid JSON (", json_error,
                            "); --vocab-file expects a JSON object of token -> id such as "
                            "gpt2-vocab.json (is this the merges file?)");
  }
  const nlohmann::json& vocab = *parsed;
  if (!vocab.is_object()) {
    return invalid_argument("vocab file '", vocab_file, "': expected a JSON object of token -> id, "
                            "found a JSON ", vocab.type_name());
  }
  const int64_t n = static_cast<int64_t>(vocab.size());
  tok->token_bytes_.assign(n, std::string());
  std::vector<const std::string*> owner(n, nullptr);
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> symbol_ids;
  symbol_ids.reserve(n);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const std::string& symbol = it.key();
    if (!it.value().is_number_integer()) {
      return invalid_argument("vocab file '", vocab_file, "': token ", quote_for_message(symbol), " maps to ",
                              describe_json_value(it.value()), ", expected an integer id");
    }
    // Non-negative integers are stored unsigned; get<int64_t>() would wrap those above
    // INT64_MAX into negative ids.
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() >= static_cast<uint64_t>(n)) {
      return invalid_argument("vocab file '", vocab_file, "': token ", quote_for_message(symbol), " has id ",
                              it.value().dump(), ", outside 0..", n - 1, " (a vocabulary of ", n,
                              " tokens must use each id 0..", n - 1, " once)");
    }
    const int64_t id = it.value().get<int64_t>();
    if (owner[id] != nullptr) {
      return invalid_argument("vocab file '", vocab_file, "': id ", id, " is used by both ",
                              quote_for_message(*owner[id]), " and ", quote_for_message(symbol));
    }
    owner[id] = &symbol;
    std::string bytes;
    size_t pos = 0;
    while (pos < symbol.size()) {
      char32_t cp;
      int bad_len;
      const int len = decode_utf8(symbol, pos, &cp, &bad_len);
      const int byte = len > 0 ? byte_level_byte(cp) : -1;
      if (byte < 0) {
        return invalid_argument("vocab file '", vocab_file, "': token ", quote_for_message(symbol),
                                " contains ", len > 0 ? hex_code_point(cp) : "ill-formed UTF-8",
                                ", which is not a GPT-2 byte-level symbol (is this a GPT-2 BPE "
                                "vocabulary?)");
      }
      bytes.push_back(static_cast<char>(byte));
      pos += len;
    }
    if (bytes.empty()) {
      return invalid_argument("vocab file '", vocab_file, "': has an empty token (id ", id, ")");
    }
    tok->token_bytes_[id] = std::move(bytes);
    symbol_ids.emplace(symbol, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    append_utf8(byte_level_symbol(static_cast<uint8_t>(b)), &symbol);
    auto it = symbol_ids.find(symbol);
    if (it == symbol_ids.end()) {
      return invalid_argument("vocab file '", vocab_file, "': the symbol ", quote_for_message(symbol),
                              " of byte ", b, " is missing (a GPT-2 vocabulary has all 256 byte "
                              "symbols; is this a GPT-2 BPE vocabulary?)");
    }
    tok->byte_ids_[b] = it->second;
  }
  auto eod = symbol_ids.find(std::string_view("<|endoftext|>"));
  if (eod == symbol_ids.end()) {
    return invalid_argument("vocab file '", vocab_file, "': has no \"<|endoftext|>\" token, which "
                            "GPT2BPETokenizer uses as its end-of-document id");
  }
  tok->eod_id_ = eod->second;

  // ---- merges. Megatron reads read().split('\n')[1:-1]: line 1 is a header and the text
  // after the last newline is dropped; Python's text mode turns \r\n and \r into \n.
  MS_ASSIGN_OR_RETURN(std::string merges_raw, read_text_file(merge_file, "merges file"));
  std::string merges_text;
  merges_text.reserve(merges_raw.size());
  for (size_t i = 0; i < merges_raw.size(); ++i) {
    if (merges_raw[i] == '\r') {
      merges_text.push_back('\n');
      if (i + 1 < merges_raw.size() && merges_raw[i + 1] == '\n') ++i;
    } else {
      merges_text.push_back(merges_raw[i]);
    }
  }
  std::vector<std::string_view> lines;
  {
    size_t start = 0;
    std::string_view all(merges_text);
    while (true) {
      const size_t nl = all.find('\n', start);
      if (nl == std::string_view::npos) {
        lines.push_back(all.substr(start));
        break;
      }
      lines.push_back(all.substr(start, nl - start));
      start = nl + 1;
    }
  }
  if (lines.size() >= 2 && !lines.front().starts_with("#version")) {
    log_warning(str_cat("merges file '", merge_file, "': first line ", quote_for_message(lines.front()),
                        " is skipped as a header, as Megatron does (expected \"#version: ...\")"));
  }
  if (!lines.back().empty()) {
    log_warning(str_cat("merges file '", merge_file, "' does not end with a newline: like "
                        "Megatron, its last line ", quote_for_message(lines.back()), " is not used"));
  }
  int32_t rank = 0;
  size_t num_merges = 0;
  for (size_t li = 1; li + 1 < lines.size(); ++li, ++rank) {
    const std::string_view line = lines[li];
    const size_t line_no = li + 1;
    std::vector<std::string_view> fields;
    size_t pos = 0;
    while (pos < line.size()) {
      while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t' || line[pos] == '\v' ||
                                   line[pos] == '\f')) {
        ++pos;
      }
      const size_t start = pos;
      while (pos < line.size() && !(line[pos] == ' ' || line[pos] == '\t' || line[pos] == '\v' ||
                                    line[pos] == '\f')) {
        ++pos;
      }
      if (pos > start) fields.push_back(line.substr(start, pos - start));
    }
    if (fields.empty()) continue;  // Megatron keeps () here, which never matches a pair
    if (fields.size() != 2) {
      return invalid_argument("merges file '", merge_file, "': line ", line_no,
                              ": expected two symbols separated by a space, found ",
                              fields.size(), " field(s) in ", quote_for_message(line),
                              " (is this a GPT-2 merges file?)");
    }
    int32_t part_ids[2];
    for (int k = 0; k < 2; ++k) {
      auto it = symbol_ids.find(fields[k]);
      if (it == symbol_ids.end()) {
        return invalid_argument("merges file '", merge_file, "': line ", line_no, ": symbol ",
                                quote_for_message(fields[k]), " is not in vocab file '", vocab_file,
                                "' (are the vocab and merges files from the same tokenizer?)");
      }
      part_ids[k] = it->second;
    }
    std::string joined(fields[0]);
    joined.append(fields[1]);
    auto result = symbol_ids.find(joined);
    if (result == symbol_ids.end()) {
      return invalid_argument("merges file '", merge_file, "': line ", line_no, ": merging ",
                              quote_for_message(fields[0]), " and ", quote_for_message(fields[1]), " gives ",
                              quote_for_message(joined), ", which is not in vocab file '", vocab_file,
                              "' (are the vocab and merges files from the same tokenizer?)");
    }
    // dict(zip(merges, range(...))): a repeated pair keeps its last rank.
    tok->merges_[pair_key(part_ids[0], part_ids[1])] = Merge{rank, result->second};
    ++num_merges;
  }
  if (num_merges == 0) {
    return invalid_argument("merges file '", merge_file, "': contains no merges (expected a "
                            "\"#version\" header line, then one \"a b\" merge per line)");
  }
  return tok;
}

Status GPT2BPETokenizer::pretokenize(std::string_view text, std::vector<std::string_view>* pieces) {
  thread_local std::vector<CodePoint> cps;
  MS_RETURN_IF_ERROR(decode_code_points(text, &cps));
  const size_t n = cps.size();
  const auto offset = [&](size_t i) { return i < n ? cps[i].offset : text.size(); };
  const auto run_end = [&](size_t i, CharClass cls) {
    while (i < n && cps[i].cls == cls) ++i;
    return i;
  };
  size_t i = 0;
  while (i < n) {
    size_t end = 0;
    const char32_t c = cps[i].cp;
    const CharClass cls = cps[i].cls;
    const CharClass next_cls = i + 1 < n ? cps[i + 1].cls : CharClass::kSpace;
    if (c == '\'' && i + 1 < n) {  // 's|'t|'re|'ve|'m|'ll|'d
      const char32_t c1 = cps[i + 1].cp;
      const char32_t c2 = i + 2 < n ? cps[i + 2].cp : 0;
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        end = i + 2;
      } else if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
        end = i + 3;
      }
    }
    if (end == 0) {
      if (c == ' ' && i + 1 < n && next_cls != CharClass::kSpace) {
        end = run_end(i + 1, next_cls);  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+"
      } else if (cls != CharClass::kSpace) {
        end = run_end(i, cls);  // the same without the leading space
      } else {
        const size_t j = run_end(i, CharClass::kSpace);
        // \s+(?!\S): the run, less its last character when a non-space follows;
        // a single space before a non-space falls through to \s+.
        end = (j < n && j - i >= 2) ? j - 1 : j;
      }
    }
    pieces->push_back(text.substr(offset(i), offset(end) - offset(i)));
    i = end;
  }
  return ok_status();
}

const GPT2BPETokenizer::Merge* GPT2BPETokenizer::find_merge(int32_t left, int32_t right) const {
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void GPT2BPETokenizer::bpe_uncached(std::string_view piece, std::vector<int32_t>* word) const {
  word->clear();
  for (char ch : piece) word->push_back(byte_ids_[static_cast<uint8_t>(ch)]);
  while (word->size() > 1) {
    const Merge* best = nullptr;
    size_t best_i = 0;
    for (size_t i = 0; i + 1 < word->size(); ++i) {
      const Merge* m = find_merge((*word)[i], (*word)[i + 1]);
      if (m != nullptr && (best == nullptr || m->rank < best->rank)) {
        best = m;
        best_i = i;
      }
    }
    if (best == nullptr) break;
    const int32_t first = (*word)[best_i];
    const int32_t second = (*word)[best_i + 1];
    // Merge every occurrence of (first, second), scanning left to right.
    size_t out = 0;
    for (size_t i = 0; i < word->size();) {
      if (i + 1 < word->size() && (*word)[i] == first && (*word)[i + 1] == second) {
        (*word)[out++] = best->result;
        i += 2;
      } else {
        (*word)[out++] = (*word)[i++];
      }
    }
    word->resize(out);
  }
}

void GPT2BPETokenizer::bpe_long(std::string_view piece, std::vector<int32_t>* word) const {
  // Megatron's loop: merge every occurrence of the lowest-ranked adjacent pair, left to right,
  // until no pair has a merge. Here the symbols form a linked list and a min-heap holds the
  // candidate pairs as (rank, position of the left symbol). One round takes every entry of
  // the lowest rank in position order and merges those still present, exactly as the loop's
  // left-to-right pass (a merge creates only pairs with its result, never the merged pair
  // again: ranks are per pair and a result differs from both halves); then the pairs next to
  // each merged symbol are queued. Stale entries are skipped when popped.
  const size_t n = piece.size();
  std::vector<int32_t> sym(n);
  std::vector<int64_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    sym[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
    prev[i] = static_cast<int64_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : -1;
  }
  struct Candidate {
    int32_t rank;
    int64_t pos;
    int32_t left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto push = [&](int64_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const Merge* m = find_merge(sym[pos], sym[next[pos]])) heap.push({m->rank, pos, sym[pos], sym[next[pos]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int64_t>(i));
  std::vector<bool> removed(n, false);
  std::vector<int64_t> merged;
  while (!heap.empty()) {
    const int32_t rank = heap.top().rank;
    merged.clear();
    while (!heap.empty() && heap.top().rank == rank) {
      const Candidate c = heap.top();
      heap.pop();
      if (removed[c.pos] || next[c.pos] < 0 || sym[c.pos] != c.left || sym[next[c.pos]] != c.right) continue;
      const Merge* m = find_merge(c.left, c.right);
      const int64_t gone = next[c.pos];
      sym[c.pos] = m->result;
      removed[gone] = true;
      next[c.pos] = next[gone];
      if (next[gone] >= 0) prev[next[gone]] = c.pos;
      merged.push_back(c.pos);
    }
    for (int64_t pos : merged) {
      if (removed[pos]) continue;
      push(prev[pos]);
      push(pos);
    }
  }
  word->clear();
  for (int64_t i = n > 0 ? 0 : -1; i >= 0; i = next[i]) word->push_back(sym[i]);
}

void GPT2BPETokenizer::bpe(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.size() == 1) {
    ids->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  thread_local std::vector<int32_t> word;
  if (piece.size() > kMaxCachedPieceBytes) {
    bpe_long(piece, &word);
    ids->insert(ids->end(), word.begin(), word.end());
    return;
  }
  if (piece.size() < kMinCachedPieceBytes) {
    bpe_uncached(piece, &word);
    ids->insert(ids->end(), word.begin(), word.end());
    return;
  }
  BpeCache& cache = bpe_cache;
  if (cache.owner != instance_id_ || cache.map.size() >= kMaxCacheEntries) {
    cache.map.clear();
    cache.owner = instance_id_;
  }
  auto it = cache.map.find(piece);
  if (it == cache.map.end()) {
    bpe_uncached(piece, &word);
    it = cache.map.emplace(std::string(piece), word).first;
  }
  ids->insert(ids->end(), it->second.begin(), it->second.end());
}

Status GPT2BPETokenizer::tokenize_into(std::string_view text, std::vector<int32_t>* ids) const {
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  MS_RETURN_IF_ERROR(pretokenize(text, &pieces));
  for (std::string_view piece : pieces) bpe(piece, ids);
  return ok_status();
}

StatusOr<std::string> GPT2BPETokenizer::detokenize(std::span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      return invalid_argument("GPT2BPETokenizer: token id ", id, " is outside the vocabulary [0, ",
                              vocab_size(), ")");
    }
    bytes.append(token_bytes_[id]);
  }
  return utf8_decode_replace(bytes);
}

}  // namespace mindspeed
