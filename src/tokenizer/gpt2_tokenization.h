// GPT-2 byte-level BPE tokenizer.
// Port of megatron/training/tokenizer/gpt2_tokenization.py (GPT2Tokenizer) and the
// _GPT2BPETokenizer wrapper in megatron/training/tokenizer/tokenizer.py.
//
// encode(text): split the text with GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (matched by hand over code points, classes from the `regex` module's tables), map each
// piece's UTF-8 bytes to vocabulary symbols and apply the merges by rank (all occurrences
// of the lowest-ranked adjacent pair, left to right, until none applies). Ids equal
// Megatron's and the npm gpt-3-encoder's, except U+0085 (whitespace for Megatron's `regex`,
// not for JavaScript) and U+FEFF (the reverse), where we follow Megatron.
//
// Input must be valid UTF-8: Megatron only ever sees decoded text, so ill-formed bytes (or
// lone surrogates, which UTF-8 cannot carry) are InvalidArgument rather than guessed at.
//
// Load-time checks beyond Megatron's (which would silently map unknown symbols to id 0):
// the vocabulary is a JSON object of symbol -> id with ids 0..n-1 each used once, every
// symbol is made of GPT-2 byte symbols, all 256 byte symbols and <|endoftext|> are present,
// and both halves and the result of every merge are in the vocabulary. The merges file is
// read as Megatron reads it: line 1 is a header and text after the last newline is ignored
// (with a warning).
//
// Megatron's per-word cache is kept per thread (no locks), so tokenize_into is thread-safe.
// Pieces longer than 64 bytes are merged with a priority queue (same result, O(n log n)):
// Megatron's loop is quadratic in the piece length.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace mindspeed {

class GPT2BPETokenizer final : public Tokenizer {
 public:
  /// Loads --vocab-file (JSON) and --merge-file (text, first line a "#version" header).
  static StatusOr<std::unique_ptr<GPT2BPETokenizer>> load(const std::string& vocab_file,
                                                          const std::string& merge_file);
  ~GPT2BPETokenizer() override;

  Status tokenize_into(std::string_view text, std::vector<int32_t>* ids) const override;
  StatusOr<std::string> detokenize(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(token_bytes_.size()); }
  int32_t eod() const override { return eod_id_; }
  std::optional<int32_t> eos() const override { return eod_id_; }
  std::string_view name() const override { return "GPT2BPETokenizer"; }

  /// The pre-tokenisation step alone: the pattern's matches as views into `text`.
  /// InvalidArgument if `text` is not valid UTF-8.
  static Status pretokenize(std::string_view text, std::vector<std::string_view>* pieces);

  /// Raw bytes of token `id` (no byte-to-unicode mapping); for tests and inspection.
  const std::string& token_bytes(int32_t id) const { return token_bytes_[id]; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };

  explicit GPT2BPETokenizer(TokenizerIdentifiers identifiers);
  /// BPE of one pre-token (raw bytes), appending ids.
  void bpe(std::string_view piece, std::vector<int32_t>* ids) const;
  void bpe_uncached(std::string_view piece, std::vector<int32_t>* word) const;
  /// The same merges in O(n log n) for long pieces (bpe_uncached rescans the whole word for
  /// every merge: quadratic, hours for a megabyte-long word).
  void bpe_long(std::string_view piece, std::vector<int32_t>* word) const;
  const Merge* find_merge(int32_t left, int32_t right) const;

  std::vector<std::string> token_bytes_;  ///< id -> raw bytes
  int32_t byte_ids_[256] = {};            ///< byte value -> id of its one-byte symbol
  std::unordered_map<uint64_t, Merge> merges_;  ///< (left << 32 | right) -> rank, result
  int32_t eod_id_ = -1;
  uint64_t instance_id_;  ///< owner tag of the per-thread BPE cache (gpt2_tokenization.cpp)
};

}  // namespace mindspeed
