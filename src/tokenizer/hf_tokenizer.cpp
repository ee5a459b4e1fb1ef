// PretrainedFromHF: Hugging Face tokenizer.json byte-level BPE and the SentencePiece fallback
// (see hf_tokenizer.h).
#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <filesystem>
#include <functional>
#include <optional>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "tokenizer/file_util.h"
#include "tokenizer/hf_pretokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_normalization.h"

namespace mindspeed {
namespace {

using nlohmann::json;

constexpr std::string_view kSupported =
    "PretrainedFromHF supports the byte-level BPE tokenizer.json of GPT-2, LLaMA-3 and Qwen2";
// Largest token id accepted (the id -> token table is dense, so ids may leave only this many
// holes beyond the number of tokens).
constexpr int64_t kMaxTokenId = (int64_t{1} << 26) - 1;
constexpr int64_t kMaxIdHoles = int64_t{1} << 16;

std::string shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > 120) text = text.substr(0, 120) + "...";
  return text;
}

// An optional JSON file of the tokenizer directory: nullopt when absent.
StatusOr<std::optional<json>> read_optional_json(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<json>();
  MS_ASSIGN_OR_RETURN(std::string text, read_text_file(path, ""));
  std::string error;
  std::optional<json> parsed = try_parse_json(text, &error);
  if (!parsed) {
    return invalid_argument("'", path.string(), "': not valid JSON (", error,
                            "); fix or replace the file (a Hugging Face tokenizer directory as "
                            "save_pretrained writes it)");
  }
  if (!parsed->is_object()) {
    return invalid_argument("'", path.string(), "': expected a JSON object, found a JSON ",
                            parsed->type_name());
  }
  return std::optional<json>(std::move(*parsed));
}

// Reads fields of one JSON file with messages naming the file and the field path.
class JsonFields {
 public:
  explicit JsonFields(std::string file) : file_(std::move(file)) {}

  Status error(std::string_view field, std::string_view what) const {
    return invalid_argument("'", file_, "': field \"", field, "\" ", what);
  }
  Status unsupported(std::string_view field, const json& value, std::string_view supported) const {
    return unimplemented("'", file_, "': field \"", field, "\" is ", shown(value), ", which ",
                         "mindspeed-cpp does not support (", supported, "); ", kSupported);
  }
  // A boolean field; `fallback` when absent or null.
  StatusOr<bool> boolean(const json& object, std::string_view parent, const char* key,
                         bool fallback) const {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) {
      return error(str_cat(parent, parent.empty() ? "" : ".", key),
                   str_cat("is ", shown(*it), ", expected true or false"));
    }
    return it->get<bool>();
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

// The bytes a token string stands for: its byte-level symbols' bytes, or (a token with a
// character that is no byte symbol, as the Rust ByteLevel decoder does) its own UTF-8.
std::string token_bytes(std::string_view token, bool* all_byte_symbols) {
  std::string bytes;
  size_t pos = 0;
  *all_byte_symbols = true;
  while (pos < token.size()) {
    char32_t cp;
    int bad_len;
    const int len = decode_utf8(token, pos, &cp, &bad_len);
    const int byte = len > 0 ? byte_level_byte(cp) : -1;
    if (byte < 0) {
      *all_byte_symbols = false;
      return std::string(token);
    }
    bytes.push_back(static_cast<char>(byte));
    pos += static_cast<size_t>(len);
  }
  return bytes;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// transformers' clean_up_tokenization.
std::string clean_up_tokenization(std::string text) {
  static const std::pair<std::string_view, std::string_view> kReplacements[] = {
      {" .", "."},   {" ?", "?"},   {" !", "!"},     {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kReplacements) {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (true) {
      const size_t hit = text.find(from, pos);
      if (hit == std::string::npos) break;
      out.append(text, pos, hit - pos);
      out.append(to);
      pos = hit + from.size();
    }
    out.append(text, pos, std::string::npos);
    text = std::move(out);
  }
  return text;
}

// ------------------------------------------------------------------ added tokens

struct AddedTokenSpec {
  std::string content;
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A piece of text between added tokens, or one added token (token >= 0: index into the
// added-token list).
struct Section {
  std::string_view text;
  int token = -1;
};

// The byte offset where the code point ending at byte `end` of `text` starts (end > 0, valid
// UTF-8).
size_t code_point_start_before(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return start;
}

// The code point ending at byte `end` of `text` (end > 0, valid UTF-8).
char32_t code_point_before(std::string_view text, size_t end) {
  const size_t start = code_point_start_before(text, end);
  char32_t cp = 0;
  int bad_len;
  return decode_utf8(text, start, &cp, &bad_len) > 0 ? cp : 0xFFFD;
}

char32_t code_point_at(std::string_view text, size_t pos) {
  char32_t cp = 0;
  int bad_len;
  return decode_utf8(text, pos, &cp, &bad_len) > 0 ? cp : 0xFFFD;
}

size_t utf8_length(uint8_t lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

bool is_white_space(char32_t cp) { return char_class(cp) == CharClass::kSpace; }

// Leftmost-longest search for added tokens (the tokenizers library's Aho-Corasick with
// MatchKind::LeftmostLongest), then the single_word / lstrip / rstrip rules of its
// AddedVocabulary::find_matches.
class AddedTokenMatcher {
 public:
  void add(const std::string& pattern, int token) {
    if (pattern.empty()) return;
    by_first_byte_[static_cast<uint8_t>(pattern[0])].push_back({pattern, token});
    empty_ = false;
  }
  void finish() {
    for (auto& candidates : by_first_byte_) {
      std::stable_sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
        return a.first.size() > b.first.size();
      });
    }
  }

  void split(std::string_view text, const std::vector<AddedTokenSpec>& tokens,
             std::vector<Section>* out) const {
    if (empty_) {
      if (!text.empty()) out->push_back(Section{text, -1});
      return;
    }
    size_t start_offset = 0;
    size_t pos = 0;
    while (pos < text.size()) {
      const auto& candidates = by_first_byte_[static_cast<uint8_t>(text[pos])];
      const std::pair<std::string, int>* match = nullptr;
      for (const auto& candidate : candidates) {
        if (text.substr(pos).starts_with(candidate.first)) {
          match = &candidate;
          break;
        }
      }
      if (match == nullptr) {
        ++pos;
        continue;
      }
      size_t start = pos;
      size_t stop = pos + match->first.size();
      const AddedTokenSpec& token = tokens[static_cast<size_t>(match->second)];
      if (token.single_word) {
        const bool word_before = start > 0 && is_word_char(code_point_before(text, start));
        const bool word_after = stop < text.size() && is_word_char(code_point_at(text, stop));
        if (word_before || word_after) {
          pos = stop;
          continue;
        }
      }
      if (token.lstrip) {
        // The whitespace before the token, not reaching into the previous match.
        while (start > start_offset && is_white_space(code_point_before(text, start))) {
          start = code_point_start_before(text, start);
        }
      }
      if (token.rstrip) {
        while (stop < text.size() && is_white_space(code_point_at(text, stop))) {
          stop += utf8_length(static_cast<uint8_t>(text[stop]));
        }
      }
      if (start_offset < start) out->push_back(Section{text.substr(start_offset, start - start_offset), -1});
      out->push_back(Section{text.substr(start, stop - start), match->second});
      start_offset = stop;
      pos = stop;
    }
    if (start_offset < text.size()) out->push_back(Section{text.substr(start_offset), -1});
  }

 private:
  std::array<std::vector<std::pair<std::string, int>>, 256> by_first_byte_;
  bool empty_ = true;
};

// ------------------------------------------------------------------ the tokenizer

struct PreTokenizerStep {
  bool is_split = false;  // Split with `pattern`; otherwise ByteLevel
  SplitPattern pattern = SplitPattern::kGpt2;
  bool add_prefix_space = false;  // ByteLevel
  bool use_regex = true;          // ByteLevel
};

// Pieces of 2..256 bytes are cached per thread (the npm library caches below 256 too).
constexpr size_t kMaxCachedPieceBytes = 256;
constexpr size_t kMaxCacheEntries = 1 << 16;
struct BpeCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};
thread_local BpeCache bpe_cache;
std::atomic<uint64_t> next_instance_id{1};

class HfByteLevelBpeTokenizer final : public Tokenizer {
 public:
  explicit HfByteLevelBpeTokenizer(TokenizerIdentifiers identifiers)
      : Tokenizer(std::move(identifiers)), instance_id_(next_instance_id.fetch_add(1)) {}

  Status tokenize_into(std::string_view text, std::vector<int32_t>* ids) const override {
    const size_t bad = find_invalid_utf8(text);
    if (bad != std::string_view::npos) {
      return invalid_argument("PretrainedFromHF: text is not valid UTF-8 (ill-formed byte 0x",
                              std::hex, static_cast<int>(static_cast<uint8_t>(text[bad])),
                              std::dec, " at byte offset ", bad, ")");
    }
    ids->insert(ids->end(), prefix_ids_.begin(), prefix_ids_.end());
    std::vector<Section> raw_sections;
    raw_matcher_.split(text, added_tokens_, &raw_sections);
    std::vector<Section> sections;
    for (const Section& raw : raw_sections) {
      if (raw.token >= 0) {
        ids->push_back(added_tokens_[static_cast<size_t>(raw.token)].id);
        continue;
      }
      std::string normalized;
      std::string_view normalized_view = raw.text;
      if (nfc_) {
        normalized = nfc_normalize(raw.text);
        normalized_view = normalized;
      }
      sections.clear();
      normalized_matcher_.split(normalized_view, added_tokens_, &sections);
      for (const Section& section : sections) {
        if (section.token >= 0) {
          ids->push_back(added_tokens_[static_cast<size_t>(section.token)].id);
        } else {
          MS_RETURN_IF_ERROR(pre_tokenize_and_encode(section.text, 0, ids));
        }
      }
    }
    ids->insert(ids->end(), suffix_ids_.begin(), suffix_ids_.end());
    return ok_status();
  }

  StatusOr<std::string> detokenize(std::span<const int32_t> ids) const override {
    std::string bytes;
    for (int32_t id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= id_bytes_.size() || !id_present_[id]) {
        return invalid_argument("PretrainedFromHF: token id ", id, " is not in the vocabulary of '",
                                tokenizer_file_, "'");
      }
      bytes.append(id_bytes_[id]);
    }
    std::string text = utf8_decode_replace(bytes);
    if (clean_up_tokenization_spaces_) text = clean_up_tokenization(std::move(text));
    return text;
  }

  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod() const override { return eos_id_.value_or(-1); }
  std::optional<int32_t> eos() const override { return eos_id_; }
  std::optional<int32_t> pad() const override { return pad_id_ ? pad_id_ : eos_id_; }
  std::string_view name() const override { return "PretrainedFromHF"; }

  Status load(const std::filesystem::path& dir, int64_t vocab_extra_ids);

 private:
  Status load_normalizer(const JsonFields& f, const json& root);
  Status load_pre_tokenizer(const JsonFields& f, const json& root);
  Status load_pre_tokenizer_step(const JsonFields& f, const json& step, const std::string& field);
  Status load_model(const JsonFields& f, const json& root);
  Status load_added_tokens(const JsonFields& f, const json& root);
  Status load_post_processor(const JsonFields& f, const json& root);
  Status load_post_processor_step(const JsonFields& f, const json& step, const std::string& field);
  Status load_decoder(const JsonFields& f, const json& root);
  Status load_config(const std::filesystem::path& dir);
  void add_token_string(int32_t id, const std::string& token);
  std::optional<int32_t> token_to_id(std::string_view token) const;

  Status pre_tokenize_and_encode(std::string_view text, size_t step, std::vector<int32_t>* ids) const;
  void bpe(std::string_view piece, std::vector<int32_t>* ids) const;
  void bpe_uncached(std::string_view piece, std::vector<int32_t>* word) const;

  struct Merge {
    int32_t rank;
    int32_t result;
  };

  std::string tokenizer_file_;
  int64_t max_token_id_ = kMaxTokenId;  ///< tokens in the file + kMaxIdHoles (dense ids)
  bool nfc_ = false;
  std::vector<PreTokenizerStep> steps_;
  // Model.
  StringIdMap model_vocab_;     ///< token string -> id (model vocabulary)
  StringIdMap byte_token_ids_;  ///< raw bytes -> id, for tokens made of byte symbols (ignore_merges)
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, Merge> merges_;
  bool ignore_merges_ = false;
  // Added tokens.
  std::vector<AddedTokenSpec> added_tokens_;
  StringIdMap added_ids_;
  AddedTokenMatcher raw_matcher_, normalized_matcher_;
  // Post-processor (single template) and decoder.
  std::vector<int32_t> prefix_ids_, suffix_ids_;
  bool clean_up_tokenization_spaces_ = false;
  // id -> decoded bytes; id_present_[id] when the id names a token.
  std::vector<std::string> id_bytes_;
  std::vector<bool> id_present_;
  int64_t vocab_size_ = 0;
  std::optional<int32_t> eos_id_, pad_id_;
  uint64_t instance_id_;
};

void HfByteLevelBpeTokenizer::add_token_string(int32_t id, const std::string& token) {
  const size_t index = static_cast<size_t>(id);
  if (index >= id_bytes_.size()) {
    id_bytes_.resize(index + 1);
    id_present_.resize(index + 1, false);
  }
  bool all_byte_symbols;
  id_bytes_[index] = token_bytes(token, &all_byte_symbols);
  id_present_[index] = true;
}

std::optional<int32_t> HfByteLevelBpeTokenizer::token_to_id(std::string_view token) const {
  if (auto it = added_ids_.find(token); it != added_ids_.end()) return it->second;
  if (auto it = model_vocab_.find(token); it != model_vocab_.end()) return it->second;
  return std::nullopt;
}

Status HfByteLevelBpeTokenizer::load_normalizer(const JsonFields& f, const json& root) {
  auto it = root.find("normalizer");
  if (it == root.end() || it->is_null()) return ok_status();
  const auto one = [&](const json& n, const std::string& field) -> Status {
    if (!n.is_object() || !n.contains("type")) return f.error(field, "must be an object with a \"type\"");
    const json& type = n["type"];
    if (type == "NFC") {
      nfc_ = true;
      return ok_status();
    }
    return f.unsupported(field + ".type", type, "supported normalizers: null, NFC, or a Sequence of NFC");
  };
  const json& n = *it;
  if (n.is_object() && n.value("type", json()) == "Sequence") {
    auto list = n.find("normalizers");
    if (list == n.end() || !list->is_array()) {
      return f.error("normalizer.normalizers", "must be a list of normalizers");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      MS_RETURN_IF_ERROR(one((*list)[i], str_cat("normalizer.normalizers[", i, "]")));
    }
    return ok_status();
  }
  return one(n, "normalizer");
}

Status HfByteLevelBpeTokenizer::load_pre_tokenizer_step(const JsonFields& f, const json& step,
                                                         const std::string& field) {
  if (!step.is_object() || !step.contains("type")) {
    return f.error(field, "must be an object with a \"type\"");
  }
  const json& type = step["type"];
  PreTokenizerStep s;
  if (type == "ByteLevel") {
    MS_ASSIGN_OR_RETURN(s.add_prefix_space, f.boolean(step, field, "add_prefix_space", false));
    MS_ASSIGN_OR_RETURN(s.use_regex, f.boolean(step, field, "use_regex", true));
    steps_.push_back(s);
    return ok_status();
  }
  if (type == "Split") {
    s.is_split = true;
    auto pattern = step.find("pattern");
    if (pattern == step.end() || !pattern->is_object() || !pattern->contains("Regex") ||
        !(*pattern)["Regex"].is_string()) {
      return f.unsupported(field + ".pattern", pattern == step.end() ? json() : *pattern,
                           "a {\"Regex\": ...} pattern of GPT-2, LLaMA-3 or Qwen2");
    }
    const std::string regex = (*pattern)["Regex"].get<std::string>();
    const std::optional<SplitPattern> known = split_pattern_from_regex(regex);
    if (!known) {
      return f.unsupported(field + ".pattern.Regex", regex,
                           str_cat("the Split regexes recognised are GPT-2's ",
                                   quote_for_message(split_pattern_regex(SplitPattern::kGpt2)), ", LLaMA-3's ",
                                   quote_for_message(split_pattern_regex(SplitPattern::kLlama3)),
                                   " and Qwen2's (LLaMA-3's with \\p{N} for \\p{N}{1,3}); no "
                                   "general regex engine is built in"));
    }
    s.pattern = *known;
    const json behavior = step.value("behavior", json("Isolated"));
    if (behavior != "Isolated") {
      return f.unsupported(field + ".behavior", behavior, "Split behavior \"Isolated\"");
    }
    MS_ASSIGN_OR_RETURN(bool invert, f.boolean(step, field, "invert", false));
    if (invert) return f.unsupported(field + ".invert", true, "invert false");
    steps_.push_back(s);
    return ok_status();
  }
  return f.unsupported(field + ".type", type,
                       "supported pre-tokenizers: ByteLevel, or a Sequence of Split steps with a "
                       "GPT-2, LLaMA-3 or Qwen2 regex followed by ByteLevel");
}

Status HfByteLevelBpeTokenizer::load_pre_tokenizer(const JsonFields& f, const json& root) {
  auto it = root.find("pre_tokenizer");
  if (it == root.end() || it->is_null()) {
    return f.unsupported("pre_tokenizer", json(), "a ByteLevel pre-tokenizer, alone or last in a "
                         "Sequence, is required for byte-level BPE");
  }
  const json& p = *it;
  if (p.is_object() && p.value("type", json()) == "Sequence") {
    auto list = p.find("pretokenizers");
    if (list == p.end() || !list->is_array()) {
      return f.error("pre_tokenizer.pretokenizers", "must be a list of pre-tokenizers");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      MS_RETURN_IF_ERROR(load_pre_tokenizer_step(f, (*list)[i], str_cat("pre_tokenizer.pretokenizers[", i, "]")));
    }
  } else {
    MS_RETURN_IF_ERROR(load_pre_tokenizer_step(f, p, "pre_tokenizer"));
  }
  if (steps_.empty()) {
    return f.unsupported("pre_tokenizer", p, "a ByteLevel pre-tokenizer, alone or last in a "
                         "Sequence, is required for byte-level BPE");
  }
  for (size_t i = 0; i < steps_.size(); ++i) {
    const bool last = i + 1 == steps_.size();
    if (steps_[i].is_split == last) {
      return f.unsupported("pre_tokenizer", p, "exactly one ByteLevel pre-tokenizer, as the last "
                           "step (Split steps before it)");
    }
  }
  return ok_status();
}

Status HfByteLevelBpeTokenizer::load_model(const JsonFields& f, const json& root) {
  auto it = root.find("model");
  if (it == root.end() || !it->is_object()) return f.error("model", "is missing or not an object");
  const json& model = *it;
  const json type = model.value("type", json("BPE"));
  if (type != "BPE") return f.unsupported("model.type", type, "model type \"BPE\"");
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    auto field = model.find(key);
    if (field != model.end() && !field->is_null() && !(field->is_string() && field->get<std::string>().empty())) {
      return f.unsupported(str_cat("model.", key), *field, "null");
    }
  }
  MS_ASSIGN_OR_RETURN(bool byte_fallback, f.boolean(model, "model", "byte_fallback", false));
  if (byte_fallback) return f.unsupported("model.byte_fallback", true, "false (byte-level BPE needs no fallback)");
  MS_ASSIGN_OR_RETURN(ignore_merges_, f.boolean(model, "model", "ignore_merges", false));

  // ---- vocab: {"token": id}
  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return f.error("model.vocab", "is missing or not an object of token -> id");
  }
  if (vocab->empty()) return f.error("model.vocab", "is empty");
  std::unordered_map<int32_t, const std::string*> owner;
  for (auto v = vocab->begin(); v != vocab->end(); ++v) {
    if (!v->is_number_unsigned() || v->get<uint64_t>() > static_cast<uint64_t>(max_token_id_)) {
      return f.error(str_cat("model.vocab[", quote_for_message(v.key()), "]"),
                     str_cat("is ", shown(*v), ", expected a token id in 0..", max_token_id_,
                             " (ids number the tokens of the file, with few gaps)"));
    }
    const int32_t id = static_cast<int32_t>(v->get<uint64_t>());
    auto [slot, inserted] = owner.emplace(id, &v.key());
    if (!inserted) {
      return f.error("model.vocab", str_cat("gives id ", id, " to both ", quote_for_message(*slot->second),
                                            " and ", quote_for_message(v.key()), " (each id names one token)"));
    }
    model_vocab_.emplace(v.key(), id);
    add_token_string(id, v.key());
    bool all_byte_symbols;
    std::string bytes = token_bytes(v.key(), &all_byte_symbols);
    if (all_byte_symbols) byte_token_ids_.emplace(std::move(bytes), id);
  }
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    append_utf8(byte_level_symbol(static_cast<uint8_t>(b)), &symbol);
    auto found = model_vocab_.find(symbol);
    if (found == model_vocab_.end()) {
      return f.error("model.vocab", str_cat("has no token for byte ", b, " (the byte-level symbol ",
                                            quote_for_message(symbol), "); a byte-level BPE vocabulary has "
                                            "all 256 (is this a byte-level BPE tokenizer?)"));
    }
    byte_ids_[static_cast<size_t>(b)] = found->second;
  }

  // ---- merges: ["a b", ...] or [["a", "b"], ...]
  auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) {
    return f.error("model.merges", "is missing or not a list of merges");
  }
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const json& m = (*merges)[rank];
    const std::string field = str_cat("model.merges[", rank, "]");
    std::string parts[2];
    if (m.is_string()) {
      const std::string text = m.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return f.error(field, str_cat("is ", quote_for_message(text), ", expected two tokens separated by "
                                      "one space (\"a b\")"));
      }
      parts[0] = text.substr(0, space);
      parts[1] = text.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      parts[0] = m[0].get<std::string>();
      parts[1] = m[1].get<std::string>();
    } else {
      return f.error(field, str_cat("is ", shown(m), ", expected \"a b\" or [\"a\", \"b\"]"));
    }
    int32_t part_ids[2];
    for (int k = 0; k < 2; ++k) {
      auto found = model_vocab_.find(parts[k]);
      if (found == model_vocab_.end()) {
        return f.error(field, str_cat("names ", quote_for_message(parts[k]), ", which is not in model.vocab "
                                      "(are the vocabulary and the merges from the same "
                                      "tokenizer?)"));
      }
      part_ids[k] = found->second;
    }
    auto result = model_vocab_.find(parts[0] + parts[1]);
    if (result == model_vocab_.end()) {
      return f.error(field, str_cat("merges ", quote_for_message(parts[0]), " and ", quote_for_message(parts[1]),
                                    " into ", quote_for_message(parts[0] + parts[1]), ", which is not in "
                                    "model.vocab (are the vocabulary and the merges from the "
                                    "same tokenizer?)"));
    }
    // A repeated pair keeps its last rank, as in the tokenizers library.
    merges_[pair_key(part_ids[0], part_ids[1])] = Merge{static_cast<int32_t>(rank), result->second};
  }
  return ok_status();
}

Status HfByteLevelBpeTokenizer::load_added_tokens(const JsonFields& f, const json& root) {
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return ok_status();
  if (!it->is_array()) return f.error("added_tokens", "must be a list of tokens");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string field = str_cat("added_tokens[", i, "]");
    if (!t.is_object()) return f.error(field, "must be an object {\"id\", \"content\", ...}");
    AddedTokenSpec spec;
    auto content = t.find("content");
    auto id = t.find("id");
    if (content == t.end() || !content->is_string() || content->get<std::string>().empty()) {
      return f.error(field + ".content", "must be a non-empty string");
    }
    if (id == t.end() || !id->is_number_unsigned() || id->get<uint64_t>() > static_cast<uint64_t>(max_token_id_)) {
      return f.error(field + ".id", str_cat("must be a token id in 0..", max_token_id_,
                                            " (ids number the tokens of the file, with few gaps)"));
    }
    spec.content = content->get<std::string>();
    spec.id = static_cast<int32_t>(id->get<uint64_t>());
    if (find_invalid_utf8(spec.content) != std::string::npos) {
      return f.error(field + ".content", "is not valid UTF-8");
    }
    MS_ASSIGN_OR_RETURN(spec.special, f.boolean(t, field, "special", false));
    MS_ASSIGN_OR_RETURN(spec.single_word, f.boolean(t, field, "single_word", false));
    MS_ASSIGN_OR_RETURN(spec.lstrip, f.boolean(t, field, "lstrip", false));
    MS_ASSIGN_OR_RETURN(spec.rstrip, f.boolean(t, field, "rstrip", false));
    MS_ASSIGN_OR_RETURN(spec.normalized, f.boolean(t, field, "normalized", !spec.special));
    if (auto model_id = model_vocab_.find(spec.content);
        model_id != model_vocab_.end() && model_id->second != spec.id) {
      return f.error(field, str_cat("gives ", quote_for_message(spec.content), " id ", spec.id,
                                    ", but model.vocab has it as id ", model_id->second));
    }
    if (added_ids_.find(spec.content) != added_ids_.end()) {
      return f.error(field, str_cat("lists ", quote_for_message(spec.content), " a second time (ids ", added_ids_.at(spec.content),
                                    " and ", spec.id, "); each added token once"));
    }
    if (spec.id < static_cast<int32_t>(id_present_.size()) && id_present_[spec.id] &&
        model_vocab_.find(spec.content) == model_vocab_.end()) {
      return f.error(field, str_cat("gives id ", spec.id, " to ", quote_for_message(spec.content),
                                    ", which model.vocab already uses for another token"));
    }
    added_ids_[spec.content] = spec.id;
    add_token_string(spec.id, spec.content);
    added_tokens_.push_back(std::move(spec));
  }
  return ok_status();
}

Status HfByteLevelBpeTokenizer::load_post_processor_step(const JsonFields& f, const json& step,
                                                          const std::string& field) {
  if (!step.is_object() || !step.contains("type")) {
    return f.error(field, "must be an object with a \"type\"");
  }
  const json& type = step["type"];
  if (type == "ByteLevel") return ok_status();  // offsets only
  if (type == "TemplateProcessing") {
    auto single = step.find("single");
    auto special = step.find("special_tokens");
    if (single == step.end() || !single->is_array()) {
      return f.error(field + ".single", "must be a list of template pieces");
    }
    bool seen_sequence = false;
    for (size_t i = 0; i < single->size(); ++i) {
      const json& piece = (*single)[i];
      const std::string piece_field = str_cat(field, ".single[", i, "]");
      if (piece.is_object() && piece.contains("Sequence")) {
        const json sequence_id = piece["Sequence"].is_object() ? piece["Sequence"].value("id", json()) : json();
        if (sequence_id != "A") {
          return f.unsupported(piece_field + ".Sequence.id", sequence_id, "\"A\" in the single template");
        }
        seen_sequence = true;
        continue;
      }
      if (!piece.is_object() || !piece.contains("SpecialToken") || !piece["SpecialToken"].is_object() ||
          !piece["SpecialToken"].contains("id") || !piece["SpecialToken"]["id"].is_string()) {
        return f.error(piece_field, str_cat("is ", shown(piece), ", expected {\"SpecialToken\": "
                                            "{\"id\": ...}} or {\"Sequence\": {\"id\": \"A\"}}"));
      }
      const std::string name = piece["SpecialToken"]["id"].get<std::string>();
      if (special == step.end() || !special->is_object() || !special->contains(name) ||
          !(*special)[name].is_object() || !(*special)[name].contains("ids") ||
          !(*special)[name]["ids"].is_array()) {
        return f.error(field + ".special_tokens", str_cat("has no entry {\"ids\": [...]} for ",
                                                          quote_for_message(name), " of the single template"));
      }
      for (const json& id : (*special)[name]["ids"]) {
        if (!id.is_number_unsigned() || id.get<uint64_t>() >= id_present_.size() ||
            !id_present_[id.get<uint64_t>()]) {
          return f.error(str_cat(field, ".special_tokens[", quote_for_message(name), "].ids"),
                         str_cat("has ", shown(id), ", which is not a token id of this tokenizer"));
        }
        (seen_sequence ? suffix_ids_ : prefix_ids_).push_back(static_cast<int32_t>(id.get<uint64_t>()));
      }
    }
    if (!seen_sequence) return f.error(field + ".single", "has no {\"Sequence\": {\"id\": \"A\"}}");
    return ok_status();
  }
  if (type == "RobertaProcessing") {
    for (const char* key : {"cls", "sep"}) {
      auto pair = step.find(key);
      if (pair == step.end() || !pair->is_array() || pair->size() != 2 || !(*pair)[1].is_number_unsigned() ||
          (*pair)[1].get<uint64_t>() >= id_present_.size() || !id_present_[(*pair)[1].get<uint64_t>()]) {
        return f.error(str_cat(field, ".", key), "must be [token, id] with a token id of this tokenizer");
      }
      (std::string_view(key) == "cls" ? prefix_ids_ : suffix_ids_)
          .push_back(static_cast<int32_t>((*pair)[1].get<uint64_t>()));
    }
    return ok_status();
  }
  return f.unsupported(field + ".type", type, "supported post-processors: null, ByteLevel, "
                       "TemplateProcessing, RobertaProcessing, or a Sequence of those");
}

Status HfByteLevelBpeTokenizer::load_post_processor(const JsonFields& f, const json& root) {
  auto it = root.find("post_processor");
  if (it == root.end() || it->is_null()) return ok_status();
  const json& p = *it;
  if (p.is_object() && p.value("type", json()) == "Sequence") {
    auto list = p.find("processors");
    if (list == p.end() || !list->is_array()) {
      return f.error("post_processor.processors", "must be a list of post-processors");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      MS_RETURN_IF_ERROR(load_post_processor_step(f, (*list)[i], str_cat("post_processor.processors[", i, "]")));
    }
    return ok_status();
  }
  return load_post_processor_step(f, p, "post_processor");
}

Status HfByteLevelBpeTokenizer::load_decoder(const JsonFields& f, const json& root) {
  // No decoder (absent or null) would make the Rust library join the token strings with
  // spaces, not decode bytes: only the ByteLevel decoder is supported.
  auto it = root.find("decoder");
  if (it == root.end() || !it->is_object() || it->value("type", json()) != "ByteLevel") {
    return f.unsupported("decoder", it == root.end() ? json() : *it, "decoder ByteLevel");
  }
  return ok_status();
}

// ------------------------------------------------------------------ transformers' config

// A special-token value of tokenizer_config.json / special_tokens_map.json: a string, an
// AddedToken object {"content": ...}, or null.
StatusOr<std::optional<std::string>> special_token_value(const JsonFields& f, const json& value,
                                                         const std::string& key) {
  if (value.is_null()) return std::optional<std::string>();
  if (value.is_string()) return std::optional<std::string>(value.get<std::string>());
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return std::optional<std::string>(value["content"].get<std::string>());
  }
  return f.error(key, str_cat("is ", shown(value), ", expected a token string, {\"content\": "
                              "...} or null"));
}

struct TokenizerClassDefaults {
  std::optional<std::string> bos, eos, pad;
  bool llama = false;  // LlamaTokenizerFast: the post-processor comes from add_bos/eos_token
};

// The special-token defaults of transformers' tokenizer classes (their __init__ arguments).
std::optional<TokenizerClassDefaults> class_defaults(std::string name) {
  if (name.ends_with("Fast")) name.resize(name.size() - 4);
  TokenizerClassDefaults d;
  if (name == "GPT2Tokenizer") {
    d.bos = d.eos = "<|endoftext|>";
  } else if (name == "Qwen2Tokenizer") {
    d.eos = d.pad = "<|endoftext|>";
  } else if (name == "LlamaTokenizer") {
    d.bos = "<s>";
    d.eos = "</s>";
    d.llama = true;
  } else if (name == "PreTrainedTokenizer" || name.empty()) {
    // no defaults
  } else {
    return std::nullopt;
  }
  return d;
}

// tokenizer_config.json + special_tokens_map.json + config.json, as transformers combines them.
struct HfConfig {
  std::string tokenizer_class;  ///< "" when neither file names one
  std::string tokenizer_class_file;  ///< tokenizer_config.json, or config.json (its model_type)
  std::optional<std::string> bos, eos, pad;
  /// The file that set bos / eos / pad (special_tokens_map.json over tokenizer_config.json);
  /// empty when the value is the tokenizer class's default.
  std::string bos_file, eos_file, pad_file;
  bool clean_up_tokenization_spaces = false;  // transformers' default since 4.45 (MindSpeed-LLM pins 4.57)
  bool add_bos_token = true;   // LlamaTokenizerFast only
  bool add_eos_token = false;  // LlamaTokenizerFast only
  bool llama = false;
};

StatusOr<HfConfig> read_hf_config(const std::filesystem::path& dir) {
  HfConfig config;
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  const std::filesystem::path map_path = dir / "special_tokens_map.json";
  const std::filesystem::path model_config_path = dir / "config.json";
  MS_ASSIGN_OR_RETURN(std::optional<json> tokenizer_config, read_optional_json(config_path));
  MS_ASSIGN_OR_RETURN(std::optional<json> special_map, read_optional_json(map_path));
  const JsonFields cf(config_path.string());
  const JsonFields mf(map_path.string());
  const json empty = json::object();
  const json& tc = tokenizer_config ? *tokenizer_config : empty;
  const json& sm = special_map ? *special_map : empty;

  if (auto it = tc.find("tokenizer_class"); it != tc.end() && !it->is_null()) {
    if (!it->is_string()) return cf.error("tokenizer_class", "must be a string");
    config.tokenizer_class = it->get<std::string>();
    config.tokenizer_class_file = cf.file();
  } else {
    MS_ASSIGN_OR_RETURN(std::optional<json> model_config, read_optional_json(model_config_path));
    if (model_config && model_config->contains("model_type") && (*model_config)["model_type"].is_string()) {
      const std::string model_type = (*model_config)["model_type"].get<std::string>();
      if (model_type == "gpt2") config.tokenizer_class = "GPT2TokenizerFast";
      if (model_type.starts_with("qwen2") || model_type.starts_with("qwen3")) config.tokenizer_class = "Qwen2TokenizerFast";
      if (model_type == "llama") config.tokenizer_class = "LlamaTokenizerFast";
      config.tokenizer_class_file = model_config_path.string();
    }
  }
  std::optional<TokenizerClassDefaults> defaults = class_defaults(config.tokenizer_class);
  if (!defaults) {
    // Other classes: no special-token defaults of their own are known; their files must
    // name the tokens.
    defaults = TokenizerClassDefaults{};
  }
  config.llama = defaults->llama;
  config.bos = defaults->bos;
  config.eos = defaults->eos;
  config.pad = defaults->pad;
  struct Key {
    const char* name;
    std::optional<std::string>* target;
    std::string* file;
  };
  for (const Key& key : {Key{"bos_token", &config.bos, &config.bos_file},
                         Key{"eos_token", &config.eos, &config.eos_file},
                         Key{"pad_token", &config.pad, &config.pad_file}}) {
    if (auto it = tc.find(key.name); it != tc.end()) {
      MS_ASSIGN_OR_RETURN(*key.target, special_token_value(cf, *it, key.name));
      *key.file = cf.file();
    }
    if (auto it = sm.find(key.name); it != sm.end()) {
      MS_ASSIGN_OR_RETURN(*key.target, special_token_value(mf, *it, key.name));
      *key.file = mf.file();
    }
  }
  MS_ASSIGN_OR_RETURN(config.clean_up_tokenization_spaces,
                      cf.boolean(tc, "", "clean_up_tokenization_spaces", false));
  MS_ASSIGN_OR_RETURN(config.add_bos_token, cf.boolean(tc, "", "add_bos_token", true));
  MS_ASSIGN_OR_RETURN(config.add_eos_token, cf.boolean(tc, "", "add_eos_token", false));
  MS_ASSIGN_OR_RETURN(bool split_special_tokens, cf.boolean(tc, "", "split_special_tokens", false));
  if (split_special_tokens) {
    return cf.unsupported("split_special_tokens", true, "false: special tokens in the text are "
                          "encoded as themselves");
  }
  return config;
}

Status HfByteLevelBpeTokenizer::load_config(const std::filesystem::path& dir) {
  MS_ASSIGN_OR_RETURN(HfConfig config, read_hf_config(dir));
  const std::string config_file = (dir / "tokenizer_config.json").string();
  const auto resolve = [&](const std::optional<std::string>& token, const std::string& file, const char* key)
      -> StatusOr<std::optional<int32_t>> {
    if (!token) return std::optional<int32_t>();
    std::optional<int32_t> id = token_to_id(*token);
    if (!id) {
      if (file.empty()) {
        return invalid_argument("'", config.tokenizer_class_file, "' (tokenizer_class ",
                                quote_for_message(config.tokenizer_class), ", whose default ", key, " is ",
                                quote_for_message(*token), "): ", key, " ", quote_for_message(*token),
                                " is not a token of '", tokenizer_file_, "'; set ", key, " in '", config_file,
                                "' to one of its tokens (or null)");
      }
      return invalid_argument("'", file, "': ", key, " ", quote_for_message(*token), " is not a token of '",
                              tokenizer_file_, "'; set ", key, " to one of its tokens (or null)");
    }
    return id;
  };
  MS_ASSIGN_OR_RETURN(eos_id_, resolve(config.eos, config.eos_file, "eos_token"));
  MS_ASSIGN_OR_RETURN(pad_id_, resolve(config.pad, config.pad_file, "pad_token"));
  MS_ASSIGN_OR_RETURN(std::optional<int32_t> bos_id, resolve(config.bos, config.bos_file, "bos_token"));
  clean_up_tokenization_spaces_ = config.clean_up_tokenization_spaces;
  if (config.llama) {
    // LlamaTokenizerFast.update_post_processor: "<bos> $A <eos>" from add_bos/eos_token.
    prefix_ids_.clear();
    suffix_ids_.clear();
    if (config.add_bos_token) {
      if (!bos_id) return invalid_argument("'", config_file, "': add_bos_token is true but there is no bos_token");
      prefix_ids_.push_back(*bos_id);
    }
    if (config.add_eos_token) {
      if (!eos_id_) return invalid_argument("'", config_file, "': add_eos_token is true but there is no eos_token");
      suffix_ids_.push_back(*eos_id_);
    }
  }
  return ok_status();
}

Status HfByteLevelBpeTokenizer::load(const std::filesystem::path& dir, int64_t vocab_extra_ids) {
  const std::filesystem::path path = dir / "tokenizer.json";
  tokenizer_file_ = path.string();
  MS_ASSIGN_OR_RETURN(std::string text, read_text_file(path, ""));
  std::string error;
  std::optional<json> parsed = try_parse_json(text, &error);
  if (!parsed) {
    return invalid_argument("'", tokenizer_file_, "': not valid JSON (", error, "); expected a "
                            "Hugging Face tokenizer.json (as tokenizer.save() writes it)");
  }
  if (!parsed->is_object()) {
    return invalid_argument("'", tokenizer_file_, "': expected a JSON object, found a JSON ",
                            parsed->type_name());
  }
  const json& root = *parsed;
  const JsonFields f(tokenizer_file_);
  {
    int64_t tokens = vocab_extra_ids;
    if (auto model = root.find("model"); model != root.end() && model->is_object() && model->contains("vocab")) {
      tokens += static_cast<int64_t>((*model)["vocab"].size());
    }
    if (auto added = root.find("added_tokens"); added != root.end()) tokens += static_cast<int64_t>(added->size());
    max_token_id_ = std::min(kMaxTokenId, tokens + kMaxIdHoles);
  }
  MS_RETURN_IF_ERROR(load_normalizer(f, root));
  MS_RETURN_IF_ERROR(load_pre_tokenizer(f, root));
  MS_RETURN_IF_ERROR(load_model(f, root));
  MS_RETURN_IF_ERROR(load_added_tokens(f, root));
  MS_RETURN_IF_ERROR(load_post_processor(f, root));
  MS_RETURN_IF_ERROR(load_decoder(f, root));

  // --vocab-extra-ids: AddedVocabulary::add_tokens gives a new token the id after the largest
  // added id (or the model's vocabulary size when that is larger).
  if (vocab_extra_ids > 0) {
    int64_t next_id = static_cast<int64_t>(model_vocab_.size());
    for (const AddedTokenSpec& t : added_tokens_) {
      if (t.id >= static_cast<int64_t>(model_vocab_.size())) next_id = std::max<int64_t>(next_id, t.id + 1);
    }
    for (int64_t i = 0; i < vocab_extra_ids; ++i) {
      AddedTokenSpec spec;
      spec.content = str_cat("<extra_id_", i, ">");
      spec.special = true;
      spec.normalized = false;
      if (std::optional<int32_t> existing = token_to_id(spec.content)) {
        spec.id = *existing;
      } else {
        if (next_id > kMaxTokenId) return invalid_argument("--vocab-extra-ids ", vocab_extra_ids, " is too large");
        spec.id = static_cast<int32_t>(next_id++);
      }
      added_ids_[spec.content] = spec.id;
      add_token_string(spec.id, spec.content);
      added_tokens_.push_back(std::move(spec));
    }
  }
  for (size_t i = 0; i < added_tokens_.size(); ++i) {
    const AddedTokenSpec& t = added_tokens_[i];
    if (t.normalized && nfc_) {
      normalized_matcher_.add(nfc_normalize(t.content), static_cast<int>(i));
    } else if (t.normalized) {
      normalized_matcher_.add(t.content, static_cast<int>(i));
    } else {
      raw_matcher_.add(t.content, static_cast<int>(i));
    }
  }
  raw_matcher_.finish();
  normalized_matcher_.finish();
  // len(tokenizer): the distinct token strings of the vocabulary and the added tokens.
  vocab_size_ = static_cast<int64_t>(model_vocab_.size());
  for (const auto& [content, id] : added_ids_) {
    if (model_vocab_.find(content) == model_vocab_.end()) ++vocab_size_;
  }
  return load_config(dir);
}

Status HfByteLevelBpeTokenizer::pre_tokenize_and_encode(std::string_view text, size_t step,
                                                        std::vector<int32_t>* ids) const {
  if (text.empty()) return ok_status();
  const PreTokenizerStep& s = steps_[step];
  if (s.is_split) {
    std::vector<std::string_view> pieces;
    MS_RETURN_IF_ERROR(split_with_pattern(s.pattern, text, &pieces));
    for (std::string_view piece : pieces) MS_RETURN_IF_ERROR(pre_tokenize_and_encode(piece, step + 1, ids));
    return ok_status();
  }
  // ByteLevel (the last step): optional prefix space, optional GPT-2 split, then BPE over the
  // piece's bytes.
  std::string prefixed;
  if (s.add_prefix_space && text.front() != ' ') {
    prefixed = " ";
    prefixed.append(text);
    text = prefixed;
  }
  if (!s.use_regex) {
    bpe(text, ids);
    return ok_status();
  }
  std::vector<std::string_view> pieces;
  MS_RETURN_IF_ERROR(split_with_pattern(SplitPattern::kGpt2, text, &pieces));
  for (std::string_view piece : pieces) bpe(piece, ids);
  return ok_status();
}

void HfByteLevelBpeTokenizer::bpe_uncached(std::string_view piece, std::vector<int32_t>* word) const {
  // The tokenizers library's Word::merge_all: repeatedly merge the adjacent pair of lowest
  // rank (leftmost first among equal ranks) until no pair has a merge.
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
    auto it = merges_.find(pair_key(sym[pos], sym[next[pos]]));
    if (it != merges_.end()) heap.push({it->second.rank, pos, sym[pos], sym[next[pos]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int64_t>(i));
  std::vector<bool> removed(n, false);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (removed[c.pos] || next[c.pos] < 0 || sym[c.pos] != c.left || sym[next[c.pos]] != c.right) continue;
    const int64_t gone = next[c.pos];
    sym[c.pos] = merges_.find(pair_key(c.left, c.right))->second.result;
    removed[gone] = true;
    next[c.pos] = next[gone];
    if (next[gone] >= 0) prev[next[gone]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  word->clear();
  for (int64_t i = n > 0 ? 0 : -1; i >= 0; i = next[i]) word->push_back(sym[i]);
}

void HfByteLevelBpeTokenizer::bpe(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.size() == 1) {
    ids->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    if (auto it = byte_token_ids_.find(piece); it != byte_token_ids_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  thread_local std::vector<int32_t> word;
  if (piece.size() > kMaxCachedPieceBytes) {
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

// ------------------------------------------------------------------ SentencePiece fallback

// DIR/tokenizer.model as transformers' LlamaTokenizerFast: libsentencepiece encodes (as
// GPTSentencePieceTokenizer), the post-processor adds bos_token / eos_token as add_bos_token /
// add_eos_token say, and MindSpeed's PretrainedFromHF ids follow: eod() and eos() are
// eos_token's id, pad() pad_token's id or else eos (_AutoTokenizer sets pad_token_id =
// eos_token_id when it is None), no bos(). The special tokens are tokenizer_config.json's /
// special_tokens_map.json's, resolved against the model's pieces; a key neither file sets
// takes the model's own BOS / EOS piece (LlamaTokenizer's "<s>" / "</s>") and no pad.
class HfSentencePieceTokenizer final : public Tokenizer {
 public:
  HfSentencePieceTokenizer(TokenizerIdentifiers identifiers, std::unique_ptr<Tokenizer> inner,
                           std::optional<int32_t> prefix, std::optional<int32_t> suffix,
                           std::optional<int32_t> eos, std::optional<int32_t> pad)
      : Tokenizer(std::move(identifiers)), inner_(std::move(inner)), prefix_(prefix), suffix_(suffix),
        eos_(eos), pad_(pad) {}

  Status tokenize_into(std::string_view text, std::vector<int32_t>* ids) const override {
    const size_t start = ids->size();
    if (prefix_) ids->push_back(*prefix_);
    const Status encoded = inner_->tokenize_into(text, ids);
    if (!encoded.ok()) {
      ids->resize(start);
      return encoded;
    }
    if (suffix_) ids->push_back(*suffix_);
    return ok_status();
  }
  StatusOr<std::string> detokenize(std::span<const int32_t> ids) const override {
    return inner_->detokenize(ids);
  }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int32_t eod() const override { return eos_.value_or(-1); }
  std::optional<int32_t> eos() const override { return eos_; }
  std::optional<int32_t> pad() const override { return pad_ ? pad_ : eos_; }
  std::string_view name() const override { return "PretrainedFromHF"; }

 private:
  std::unique_ptr<Tokenizer> inner_;
  std::optional<int32_t> prefix_, suffix_, eos_, pad_;
};

StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece_directory(const std::filesystem::path& dir,
                                                                  TokenizerIdentifiers identifiers,
                                                                  int64_t vocab_extra_ids) {
  if (vocab_extra_ids > 0) {
    return unimplemented("--vocab-extra-ids with PretrainedFromHF is supported for tokenizer.json "
                         "only, not for the SentencePiece tokenizer.model in '", dir.string(), "'");
  }
  MS_ASSIGN_OR_RETURN(HfConfig config, read_hf_config(dir));
  const std::string config_file = (dir / "tokenizer_config.json").string();
  if (!config.tokenizer_class.empty() && !config.llama) {
    return unimplemented("'", config_file, "': tokenizer_class ",
                         quote_for_message(config.tokenizer_class), " with a SentencePiece tokenizer.model and "
                         "no tokenizer.json is not supported (only LlamaTokenizer); save the "
                         "tokenizer with a tokenizer.json (transformers: "
                         "AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR))");
  }
  const std::string model = (dir / "tokenizer.model").string();
  SentencePieceVocabulary vocabulary;
  MS_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> inner, load_gpt_sentencepiece_tokenizer(model, &vocabulary));
  StringIdMap piece_ids;
  for (size_t i = 0; i < vocabulary.pieces.size(); ++i) {
    piece_ids.emplace(vocabulary.pieces[i], static_cast<int32_t>(i));
  }
  const auto own_piece = [](int32_t id) { return id >= 0 ? std::optional<int32_t>(id) : std::nullopt; };
  // A key a file sets is resolved against the pieces (null: none); otherwise `fallback`.
  const auto resolve = [&](const std::optional<std::string>& token, const std::string& file, const char* key,
                           std::optional<int32_t> fallback) -> StatusOr<std::optional<int32_t>> {
    if (file.empty()) return fallback;
    if (!token) return std::optional<int32_t>();
    auto it = piece_ids.find(*token);
    if (it == piece_ids.end()) {
      return invalid_argument("'", file, "': ", key, " ", quote_for_message(*token), " is not a piece of the "
                              "SentencePiece model '", model, "' (", vocabulary.pieces.size(), " pieces); set ",
                              key, " to one of its pieces (or null)");
    }
    return std::optional<int32_t>(it->second);
  };
  MS_ASSIGN_OR_RETURN(std::optional<int32_t> bos, resolve(config.bos, config.bos_file, "bos_token", own_piece(vocabulary.bos_id)));
  MS_ASSIGN_OR_RETURN(std::optional<int32_t> eos, resolve(config.eos, config.eos_file, "eos_token", own_piece(vocabulary.eos_id)));
  MS_ASSIGN_OR_RETURN(std::optional<int32_t> pad, resolve(config.pad, config.pad_file, "pad_token", std::nullopt));
  if (config.add_bos_token && !bos) {
    return invalid_argument("'", model, "': add_bos_token is true (LlamaTokenizer's default; '", config_file,
                            "' may set it to false) but there is no bos_token (the model has no BOS "
                            "piece, or bos_token is null)");
  }
  if (config.add_eos_token && !eos) {
    return invalid_argument("'", model, "': add_eos_token is true but there is no eos_token (the model "
                            "has no EOS piece, or eos_token is null)");
  }
  return std::unique_ptr<Tokenizer>(new HfSentencePieceTokenizer(
      std::move(identifiers), std::move(inner), config.add_bos_token ? bos : std::nullopt,
      config.add_eos_token ? eos : std::nullopt, eos, pad));
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> load_pretrained_from_hf_tokenizer(const std::string& directory,
                                                                       int64_t vocab_extra_ids) {
  if (directory.empty()) {
    return invalid_argument("--tokenizer-type PretrainedFromHF needs --tokenizer-name-or-path (a "
                            "local directory holding the model's tokenizer.json, e.g. a Hugging "
                            "Face model download)");
  }
  if (vocab_extra_ids < 0) {
    return invalid_argument("--vocab-extra-ids (", vocab_extra_ids, ") must be >= 0");
  }
  std::error_code ec;
  const std::filesystem::path dir(directory);
  if (!std::filesystem::exists(dir, ec)) {
    return not_found("--tokenizer-name-or-path '", directory, "': no such directory (MindSpeed-LLM "
                     "loads with local_files_only=True: give the local directory holding "
                     "tokenizer.json, not a Hub model name)");
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    return invalid_argument("--tokenizer-name-or-path '", directory, "' is a file; give the "
                            "directory that holds tokenizer.json (and tokenizer_config.json)");
  }
  TokenizerIdentifiers identifiers;
  identifiers.class_name = "_AutoTokenizer";
  identifiers.tokenizer_path = {directory};
  if (std::filesystem::exists(dir / "tokenizer.json", ec)) {
    auto tok = std::make_unique<HfByteLevelBpeTokenizer>(std::move(identifiers));
    const Status loaded = tok->load(dir, vocab_extra_ids);
    if (!loaded.ok() && std::filesystem::exists(dir / "tokenizer.model", ec)) {
      // LLaMA-2-style directories hold a SentencePiece-style tokenizer.json (not supported)
      // beside the tokenizer.model it was made from.
      return Status(loaded.code(), str_cat(loaded.message(), "; this directory also holds tokenizer.model: move "
                                                             "tokenizer.json aside to use the SentencePiece model"));
    }
    MS_RETURN_IF_ERROR(loaded);
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (std::filesystem::exists(dir / "tokenizer.model", ec)) {
    return load_sentencepiece_directory(dir, std::move(identifiers), vocab_extra_ids);
  }
  return not_found("--tokenizer-name-or-path '", directory, "': has neither tokenizer.json (a "
                   "Hugging Face fast tokenizer) nor tokenizer.model (SentencePiece); give the "
                   "directory of a model's tokenizer files");
}

}  // namespace mindspeed
