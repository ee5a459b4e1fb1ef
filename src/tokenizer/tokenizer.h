// Tokenizer interface and factory.
// Port of megatron/training/tokenizer/tokenizer.py (build_tokenizer, _NullTokenizer,
// _vocab_size_with_padding) and megatron/core/datasets/megatron_tokenizer.py
// (MegatronTokenizer: unique_identifiers, the tokenizer part of dataset cache keys).
//
// Implemented --tokenizer-type values: GPT2BPETokenizer (gpt2_tokenization.h),
// SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer
// (sentencepiece_tokenizer.h), NullTokenizer, and MindSpeed-LLM's PretrainedFromHF (a Hugging
// Face tokenizer directory, hf_tokenizer.h). The other types Megatron knows are refused with
// Unimplemented.
//
// Thread safety: every method is const and may be called from several threads at once
// (preprocess_data tokenises on all cores with one shared tokenizer).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace mindspeed {

/// Megatron's MegatronTokenizer.unique_identifiers: an OrderedDict
/// {"class": type name, "tokenizer_path": [paths...], <option>: str(value), ...}.
/// GPTDataset serialises it (json.dumps(..., indent=4)) into the MD5 of its cache files.
struct TokenizerIdentifiers {
  std::string class_name;  ///< Megatron's Python class name, e.g. "_GPT2BPETokenizer"
  /// Paths exactly as given on the command line; nullopt is JSON null (_NullTokenizer).
  std::vector<std::optional<std::string>> tokenizer_path;
  /// Extra constructor options in order, values already str()'d as Python does.
  std::vector<std::pair<std::string, std::string>> options;
};

/// Python's json.dumps(identifiers, indent=indent) (ensure_ascii=True) for the dict nested
/// `depth` levels deep: continuation lines are indented by (depth+1)*indent spaces and the
/// closing brace by depth*indent, so the result can be spliced into an enclosing dump.
/// Strings are escaped as with ensure_ascii=True (\uXXXX, surrogate pairs above U+FFFF);
/// ill-formed UTF-8 in a path becomes U+FFFD.
std::string identifiers_to_python_json(const TokenizerIdentifiers& identifiers, int indent = 4,
                                       int depth = 0);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  /// Megatron's tokenizer.tokenize(text), appending the ids to *ids. `text` is UTF-8;
  /// ill-formed UTF-8 is InvalidArgument (Megatron only ever sees decoded text).
  virtual Status tokenize_into(std::string_view text, std::vector<int32_t>* ids) const = 0;
  /// Convenience wrapper around tokenize_into.
  StatusOr<std::vector<int32_t>> tokenize(std::string_view text) const;
  /// Megatron's tokenizer.detokenize(ids). Ids outside the vocabulary are InvalidArgument.
  virtual StatusOr<std::string> detokenize(std::span<const int32_t> ids) const = 0;

  /// Megatron's tokenizer.vocab_size before padding (GPT-2: 50257; NullTokenizer:
  /// --vocab-size + 1). preprocess_data picks the .bin dtype from it (optimal_dtype).
  virtual int64_t vocab_size() const = 0;
  /// End-of-document id appended by --append-eod and used by --eod-mask-loss /
  /// --reset-position-ids. -1 when the model has none (a SentencePiece model without EOS).
  virtual int32_t eod() const = 0;
  /// tokenizer.pad where Megatron defines it; nullopt where Megatron raises (GPTDataset then
  /// pads with -1).
  virtual std::optional<int32_t> pad() const { return std::nullopt; }
  virtual std::optional<int32_t> bos() const { return std::nullopt; }
  virtual std::optional<int32_t> eos() const { return std::nullopt; }
  /// The --tokenizer-type value, e.g. "GPT2BPETokenizer".
  virtual std::string_view name() const = 0;

  const TokenizerIdentifiers& unique_identifiers() const { return identifiers_; }
  /// Megatron's tokenizer.unique_description: json.dumps(unique_identifiers, indent=4).
  std::string unique_description() const { return identifiers_to_python_json(identifiers_); }

 protected:
  explicit Tokenizer(TokenizerIdentifiers identifiers) : identifiers_(std::move(identifiers)) {}

 private:
  TokenizerIdentifiers identifiers_;
};

/// The tokenizer flags of Megatron's _add_tokenizer_args. An empty string means "not given".
struct TokenizerOptions {
  std::string tokenizer_type;         ///< --tokenizer-type, e.g. "GPT2BPETokenizer"
  std::string vocab_file;             ///< --vocab-file
  std::string merge_file;             ///< --merge-file
  std::string tokenizer_model;        ///< --tokenizer-model (SentencePiece .model)
  std::string tokenizer_name_or_path; ///< --tokenizer-name-or-path (PretrainedFromHF: a directory)
  std::optional<int64_t> vocab_size;  ///< --vocab-size (NullTokenizer), default none
  int64_t vocab_extra_ids = 0;        ///< --vocab-extra-ids (SentencePieceTokenizer), default 0
};

/// Megatron's build_tokenizer(args) (without the padded-vocab side effect; see
/// vocab_size_with_padding). Errors name the flag or file and the fix.
StatusOr<std::unique_ptr<Tokenizer>> build_tokenizer(const TokenizerOptions& options);

/// Megatron's --tokenizer-type choices (implemented or not), for help texts.
const std::vector<std::string>& megatron_tokenizer_types();

/// _NullTokenizer(vocab_size): text is space-separated integer ids; vocab_size() is
/// vocab_size + 1 and eod() is vocab_size.
StatusOr<std::unique_ptr<Tokenizer>> make_null_tokenizer(int64_t vocab_size);

/// Megatron's _vocab_size_with_padding: rounds up to a multiple of
/// make_vocab_size_divisible_by * tensor_model_parallel_size.
int64_t vocab_size_with_padding(int64_t vocab_size, int64_t make_vocab_size_divisible_by,
                                int64_t tensor_model_parallel_size);

}  // namespace mindspeed
