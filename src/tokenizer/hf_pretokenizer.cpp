// Hand-coded Split patterns of Hugging Face tokenizer.json files (see hf_pretokenizer.h).
#include "tokenizer/hf_pretokenizer.h"

#include <cstdint>

#include "tokenizer/gpt2_tokenization.h"
#include "tokenizer/unicode.h"

namespace mindspeed {
namespace {

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool is_cr_or_lf(char32_t cp) { return cp == '\r' || cp == '\n'; }

char32_t ascii_lower(char32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp; }

// The end of the match at cps[i] of the LLaMA-3 pattern (max_digits 3) or Qwen2's (1).
size_t match_llama3_style(const std::vector<CodePoint>& cps, size_t i, size_t max_digits) {
  const size_t n = cps.size();
  const auto run_end = [&](size_t k, CharClass cls) {
    while (k < n && cps[k].cls == cls) ++k;
    return k;
  };
  const char32_t c = cps[i].cp;
  const CharClass cls = cps[i].cls;
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (c == '\'' && i + 1 < n) {
    const char32_t c1 = ascii_lower(cps[i + 1].cp);
    const char32_t c2 = i + 2 < n ? ascii_lower(cps[i + 2].cp) : 0;
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
      return i + 3;
    }
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (cls == CharClass::kLetter) return run_end(i, CharClass::kLetter);
  if (cls != CharClass::kNumber && !is_cr_or_lf(c) && i + 1 < n &&
      cps[i + 1].cls == CharClass::kLetter) {
    return run_end(i + 1, CharClass::kLetter);
  }
  // \p{N}{1,3} or \p{N}
  if (cls == CharClass::kNumber) {
    size_t end = i;
    while (end < n && end - i < max_digits && cps[end].cls == CharClass::kNumber) ++end;
    return end;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  size_t other_start = n;
  if (cls == CharClass::kOther) {
    other_start = i;
  } else if (c == ' ' && i + 1 < n && cps[i + 1].cls == CharClass::kOther) {
    other_start = i + 1;
  }
  if (other_start < n) {
    size_t end = run_end(other_start, CharClass::kOther);
    while (end < n && is_cr_or_lf(cps[end].cp)) ++end;
    return end;
  }
  // Only whitespace is left. \s*[\r\n]+: the run up to and including its last \r or \n.
  const size_t space_end = run_end(i, CharClass::kSpace);
  for (size_t k = space_end; k > i; --k) {
    if (is_cr_or_lf(cps[k - 1].cp)) return k;
  }
  // \s+(?!\S): the run, less its last character when a non-space follows; \s+ otherwise.
  if (space_end < n && space_end - i >= 2) return space_end - 1;
  return space_end;
}

}  // namespace

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex) {
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2}) {
    if (regex == split_pattern_regex(p)) return p;
  }
  return std::nullopt;
}

std::string_view split_pattern_regex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kGpt2: return kGpt2Regex;
    case SplitPattern::kLlama3: return kLlama3Regex;
    case SplitPattern::kQwen2: return kQwen2Regex;
  }
  return {};
}

std::string_view split_pattern_name(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kGpt2: return "GPT-2";
    case SplitPattern::kLlama3: return "LLaMA-3";
    case SplitPattern::kQwen2: return "Qwen2";
  }
  return {};
}

Status split_with_pattern(SplitPattern pattern, std::string_view text,
                          std::vector<std::string_view>* pieces) {
  if (pattern == SplitPattern::kGpt2) return GPT2BPETokenizer::pretokenize(text, pieces);
  thread_local std::vector<CodePoint> cps;
  MS_RETURN_IF_ERROR(decode_code_points(text, &cps));
  const size_t max_digits = pattern == SplitPattern::kLlama3 ? 3 : 1;
  const size_t n = cps.size();
  const auto offset = [&](size_t k) { return k < n ? cps[k].offset : text.size(); };
  for (size_t i = 0; i < n;) {
    const size_t end = match_llama3_style(cps, i, max_digits);
    pieces->push_back(text.substr(offset(i), offset(end) - offset(i)));
    i = end;
  }
  return ok_status();
}

}  // namespace mindspeed
