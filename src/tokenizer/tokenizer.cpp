// build_tokenizer, _NullTokenizer and the unique-identifier JSON (see tokenizer.h).
#include "tokenizer/tokenizer.h"

#include <climits>

#include "core/check.h"
#include "tokenizer/gpt2_tokenization.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/unicode.h"

namespace mindspeed {
namespace {

void append_json_escape_unit(uint32_t unit, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->append("\\u");
  for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(unit >> shift) & 0xF]);
}

std::string indent_string(int indent, int level) {
  return std::string(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
}

// Megatron's _NullTokenizer: pre-tokenised text, "12 7 99" -> [12, 7, 99].
class NullTokenizer final : public Tokenizer {
 public:
  NullTokenizer(TokenizerIdentifiers identifiers, int64_t vocab_size_without_eod)
      : Tokenizer(std::move(identifiers)), vocab_size_without_eod_(vocab_size_without_eod) {}

  // [int(x) for x in text.split(' ')]: every field (also an empty one) must be an integer.
  // int() also accepts surrounding whitespace, a sign and '_' between digits; ids that are
  // negative or do not fit int32 are refused (Megatron would wrap them in the .bin dtype).
  Status tokenize_into(std::string_view text, std::vector<int32_t>* ids) const override {
    size_t start = 0;
    while (true) {
      const size_t space = text.find(' ', start);
      const std::string_view field =
          text.substr(start, space == std::string_view::npos ? std::string_view::npos
                                                             : space - start);
      MS_ASSIGN_OR_RETURN(int32_t id, parse_id(field));
      ids->push_back(id);
      if (space == std::string_view::npos) break;
      start = space + 1;
    }
    return ok_status();
  }

  StatusOr<std::string> detokenize(std::span<const int32_t> ids) const override {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out.append(std::to_string(ids[i]));
    }
    return out;
  }

  int64_t vocab_size() const override { return vocab_size_without_eod_ + 1; }
  int32_t eod() const override { return static_cast<int32_t>(vocab_size_without_eod_); }
  std::optional<int32_t> eos() const override { return eod(); }
  std::string_view name() const override { return "NullTokenizer"; }

 private:
  static StatusOr<int32_t> parse_id(std::string_view field) {
    const auto is_space = [](char c) {
      return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
    };
    std::string_view s = field;
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    bool negative = false;
    if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
      negative = s.front() == '-';
      s.remove_prefix(1);
    }
    bool ok = !s.empty() && s.front() != '_' && s.back() != '_';
    int64_t value = 0;
    for (size_t i = 0; ok && i < s.size(); ++i) {
      const char c = s[i];
      if (c == '_') {
        ok = s[i - 1] != '_';
      } else if (c >= '0' && c <= '9') {
        value = value * 10 + (c - '0');
        if (value > INT32_MAX) value = int64_t{INT32_MAX} + 1;  // saturate; reported below
      } else {
        ok = false;
      }
    }
    std::string shown(field.substr(0, 40));
    if (!ok) {
      return invalid_argument("NullTokenizer: '", shown, "' is not an integer token id (the text "
                              "must be token ids separated by single spaces)");
    }
    if (negative && value != 0) {
      return invalid_argument("NullTokenizer: token id '", shown, "' is negative");
    }
    if (value > INT32_MAX) {
      return invalid_argument("NullTokenizer: token id '", shown, "' does not fit in int32");
    }
    return static_cast<int32_t>(value);
  }

  int64_t vocab_size_without_eod_;
};

// json.dumps(str) with ensure_ascii=True.
std::string python_json_quote(std::string_view utf8) {
  std::string out = "\"";
  size_t pos = 0;
  while (pos < utf8.size()) {
    char32_t cp;
    int bad_len;
    int len = decode_utf8(utf8, pos, &cp, &bad_len);
    if (len == 0) {
      cp = 0xFFFD;
      len = bad_len;
    }
    pos += len;
    switch (cp) {
      case '"': out.append("\\\""); continue;
      case '\\': out.append("\\\\"); continue;
      case '\n': out.append("\\n"); continue;
      case '\r': out.append("\\r"); continue;
      case '\t': out.append("\\t"); continue;
      case '\b': out.append("\\b"); continue;
      case '\f': out.append("\\f"); continue;
      default: break;
    }
    if (cp >= 0x20 && cp <= 0x7E) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x10000) {
      append_json_escape_unit(cp, &out);
    } else {
      const uint32_t v = cp - 0x10000;
      append_json_escape_unit(0xD800 + (v >> 10), &out);
      append_json_escape_unit(0xDC00 + (v & 0x3FF), &out);
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace

std::string identifiers_to_python_json(const TokenizerIdentifiers& identifiers, int indent,
                                       int depth) {
  const std::string item_indent = indent_string(indent, depth + 1);
  std::string out = "{\n";
  out += item_indent + "\"class\": " + python_json_quote(identifiers.class_name) + ",\n";
  out += item_indent + "\"tokenizer_path\": ";
  if (identifiers.tokenizer_path.empty()) {
    out += "[]";
  } else {
    out += "[\n";
    for (size_t i = 0; i < identifiers.tokenizer_path.size(); ++i) {
      const auto& path = identifiers.tokenizer_path[i];
      out += indent_string(indent, depth + 2) + (path ? python_json_quote(*path) : "null");
      out += i + 1 < identifiers.tokenizer_path.size() ? ",\n" : "\n";
    }
    out += item_indent + "]";
  }
  for (const auto& [key, value] : identifiers.options) {
    out += ",\n" + item_indent + python_json_quote(key) + ": " + python_json_quote(value);
  }
  out += "\n" + indent_string(indent, depth) + "}";
  return out;
}

StatusOr<std::vector<int32_t>> Tokenizer::tokenize(std::string_view text) const {
  std::vector<int32_t> ids;
  MS_RETURN_IF_ERROR(tokenize_into(text, &ids));
  return ids;
}

const std::vector<std::string>& megatron_tokenizer_types() {
  static const std::vector<std::string> types = {
      "BertWordPieceLowerCase", "BertWordPieceCase",         "GPT2BPETokenizer",
      "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HuggingFaceTokenizer",
      "Llama2Tokenizer",        "TikTokenizer",              "MultimodalTokenizer",
      "NullTokenizer",          "NullMultimodalTokenizer"};
  return types;
}

StatusOr<std::unique_ptr<Tokenizer>> make_null_tokenizer(int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size >= INT32_MAX) {
    return invalid_argument("--vocab-size (", vocab_size, ") must be in [1, ", INT32_MAX - 1,
                            "] for NullTokenizer (ids 0..vocab_size-1, EOD = vocab_size)");
  }
  TokenizerIdentifiers identifiers;
  identifiers.class_name = "_NullTokenizer";
  identifiers.tokenizer_path = {std::nullopt};
  identifiers.options = {{"vocab_size", std::to_string(vocab_size)}};
  return std::unique_ptr<Tokenizer>(new NullTokenizer(std::move(identifiers), vocab_size));
}

StatusOr<std::unique_ptr<Tokenizer>> build_tokenizer(const TokenizerOptions& options) {
  const std::string& type = options.tokenizer_type;
  const auto need = [&](const std::string& value, const char* flag,
                        const char* example) -> Status {
    if (!value.empty()) return ok_status();
    return invalid_argument("--tokenizer-type ", type, " needs ", flag, " (", example, ")");
  };
  if (type == "GPT2BPETokenizer") {
    MS_RETURN_IF_ERROR(need(options.vocab_file, "--vocab-file", "e.g. data/gpt2/gpt2-vocab.json"));
    MS_RETURN_IF_ERROR(need(options.merge_file, "--merge-file", "e.g. data/gpt2/gpt2-merges.txt"));
    MS_ASSIGN_OR_RETURN(auto tok, GPT2BPETokenizer::load(options.vocab_file, options.merge_file));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (type == "SentencePieceTokenizer" || type == "GPTSentencePieceTokenizer" ||
      type == "Llama2Tokenizer") {
    MS_RETURN_IF_ERROR(need(options.tokenizer_model, "--tokenizer-model",
                            "a SentencePiece .model file"));
    if (type == "SentencePieceTokenizer") {
      if (options.vocab_extra_ids < 0) {
        return invalid_argument("--vocab-extra-ids (", options.vocab_extra_ids,
                                ") must be >= 0");
      }
      return load_sentencepiece_tokenizer(options.tokenizer_model, options.vocab_extra_ids);
    }
    if (type == "GPTSentencePieceTokenizer") {
      return load_gpt_sentencepiece_tokenizer(options.tokenizer_model);
    }
    return load_llama2_tokenizer(options.tokenizer_model);
  }
  if (type == "PretrainedFromHF") {
    return load_pretrained_from_hf_tokenizer(options.tokenizer_name_or_path,
                                             options.vocab_extra_ids);
  }
  if (type == "NullTokenizer") {
    if (!options.vocab_size) {
      return invalid_argument("--tokenizer-type NullTokenizer needs --vocab-size (the number of "
                              "token ids in the pre-tokenised data; EOD becomes that number)");
    }
    return make_null_tokenizer(*options.vocab_size);
  }
  for (const std::string& known : megatron_tokenizer_types()) {
    if (type == known) {
      return unimplemented("--tokenizer-type ", type, " is not implemented in mindspeed-cpp; use "
                           "GPT2BPETokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, "
                           "Llama2Tokenizer, NullTokenizer or MindSpeed-LLM's PretrainedFromHF "
                           "(or tokenise elsewhere and use NullTokenizer)");
    }
  }
  std::string choices;
  for (const std::string& known : megatron_tokenizer_types()) {
    choices += (choices.empty() ? "" : ", ") + known;
  }
  if (type.empty()) {
    return invalid_argument("--tokenizer-type is required (one of ", choices,
                            ", or MindSpeed-LLM's PretrainedFromHF)");
  }
  return invalid_argument("--tokenizer-type '", type, "' is not a Megatron tokenizer type (one of ",
                          choices, ") nor MindSpeed-LLM's PretrainedFromHF");
}

int64_t vocab_size_with_padding(int64_t vocab_size, int64_t make_vocab_size_divisible_by,
                                int64_t tensor_model_parallel_size) {
  const int64_t multiple = make_vocab_size_divisible_by * tensor_model_parallel_size;
  MS_CHECK(multiple > 0, "make_vocab_size_divisible_by (", make_vocab_size_divisible_by,
           ") * tensor_model_parallel_size (", tensor_model_parallel_size, ") must be > 0");
  return (vocab_size + multiple - 1) / multiple * multiple;
}

}  // namespace mindspeed
