// The Split pre-tokenizer patterns of Hugging Face tokenizer.json files that mindspeed-cpp
// recognises, matched by hand (no regex engine). Port of what the tokenizers library's
// Split { pattern: Regex, behavior: Isolated, invert: false } does with these patterns
// (Oniguruma semantics: \s is Unicode White_Space, \p{L} / \p{N} the general categories,
// leftmost-first alternation), checked against the npm @huggingface/tokenizers package:
//
//   kGpt2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//           (also the pattern of the ByteLevel pre-tokenizer with use_regex: GPT-2, RoBERTa)
//   kLlama3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+      (LLaMA-3, tiktoken cl100k)
//   kQwen2  the same with \p{N} instead of \p{N}{1,3}                (Qwen2, Qwen2.5, Qwen3)
//
// Every code point is matched by some alternative of these patterns, so "Isolated" splitting
// gives exactly the matches. (?i:...) folds ASCII case only, as the npm library does
// (Oniguruma would also fold U+017F LATIN SMALL LETTER LONG S to s).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace mindspeed {

enum class SplitPattern { kGpt2, kLlama3, kQwen2 };

/// The pattern whose regex source (as stored in tokenizer.json, after JSON unescaping) is
/// exactly `regex`; nullopt for any other regex.
std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex);

/// The regex source of `pattern`, and a short name for messages ("GPT-2", "LLaMA-3", "Qwen2").
std::string_view split_pattern_regex(SplitPattern pattern);
std::string_view split_pattern_name(SplitPattern pattern);

/// Appends the matches of `pattern` in `text` (valid UTF-8; otherwise InvalidArgument) as
/// views into `text`; their concatenation is `text`.
Status split_with_pattern(SplitPattern pattern, std::string_view text,
                          std::vector<std::string_view>* pieces);

}  // namespace mindspeed
