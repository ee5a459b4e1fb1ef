// One JSONL line -> token ids per key (json_document.h).
#include "tokenizer/json_document.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "core/json_util.h"

namespace mindspeed {
namespace {

std::string json_type_name(const nlohmann::json& value) {
  if (value.is_string()) return "a string";
  if (value.is_number()) return "a number";
  if (value.is_boolean()) return "a boolean";
  if (value.is_null()) return "null";
  if (value.is_array()) return "a list";
  return "an object";
}

Status add_sentence(const std::string& key, const std::string& text, const Tokenizer& tokenizer,
                    int64_t max_id, EncodedKey* out) {
  const size_t before = out->tokens.size();
  const Status status = tokenizer.tokenize_into(text, &out->tokens);
  if (!status.ok()) return invalid_argument("key '", key, "': ", status.message());
  for (size_t j = before; j < out->tokens.size(); ++j) {
    if (out->tokens[j] < 0 || out->tokens[j] > max_id) {
      return invalid_argument("key '", key, "': token id ", out->tokens[j], " does not fit the "
                              "output dtype ", max_id == 65535 ? "uint16" : "int32",
                              " chosen from the vocabulary size ", tokenizer.vocab_size());
    }
  }
  const size_t added = out->tokens.size() - before;
  if (added > 0) out->lengths.push_back(static_cast<int32_t>(added));
  return ok_status();
}

// MindSpeed-LLM's handler path: one sequence per key from the handler's text.
Status encode_with_handler(const nlohmann::json& doc, const Tokenizer& tokenizer,
                           const JsonDocumentOptions& options, std::vector<EncodedKey>* out) {
  bool too_long = false;
  for (size_t k = 0; k < options.json_keys.size(); ++k) {
    const std::string& key = options.json_keys[k];
    EncodedKey& encoded = (*out)[k];
    encoded.tokens.clear();
    encoded.lengths.clear();
    MS_ASSIGN_OR_RETURN(const std::string text, handler_text(options.handler, doc, key));
    encoded.write = !text.empty();
    if (!encoded.write) continue;
    MS_RETURN_IF_ERROR(add_sentence(key, text, tokenizer, options.max_token_id, &encoded));
    if (options.append_eod) encoded.tokens.push_back(tokenizer.eod());
    // One sequence, even an empty one (the handler adds whatever its tokenizer call gave).
    encoded.lengths.assign(1, static_cast<int32_t>(encoded.tokens.size()));
    too_long = too_long || (options.seq_length > 0 &&
                            static_cast<int64_t>(encoded.tokens.size()) >= options.seq_length);
  }
  if (too_long) {
    for (EncodedKey& encoded : *out) {
      encoded.tokens.clear();
      encoded.lengths.clear();
    }
  }
  return ok_status();
}

}  // namespace

Status encode_json_document(std::string_view line, const Tokenizer& tokenizer,
                            const JsonDocumentOptions& options, std::vector<EncodedKey>* out) {
  out->resize(options.json_keys.size());
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
    return invalid_argument("empty line (expected one JSON object per line)");
  }
  std::string error;
  std::optional<nlohmann::json> parsed = try_parse_json(line, &error);
  if (!parsed) return invalid_argument("invalid JSON: ", error);
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) {
    return invalid_argument("expected a JSON object, found ", json_type_name(doc));
  }
  if (options.handler != PretrainHandler::kNone)
    return encode_with_handler(doc, tokenizer, options, out);
  for (size_t k = 0; k < options.json_keys.size(); ++k) {
    const std::string& key = options.json_keys[k];
    EncodedKey& encoded = (*out)[k];
    encoded.tokens.clear();
    encoded.lengths.clear();
    encoded.write = true;
    auto it = doc.find(key);
    if (it == doc.end()) {
      std::string keys;
      for (auto field = doc.begin(); field != doc.end() && keys.size() < 80; ++field) {
        keys += (keys.empty() ? "" : ", ") + field.key();
      }
      return invalid_argument("no key '", key, "' (the object has: ",
                              keys.empty() ? "no keys" : keys, "; see --json-keys)");
    }
    const nlohmann::json& value = it.value();
    if (value.is_string()) {
      MS_RETURN_IF_ERROR(add_sentence(key, value.get_ref<const std::string&>(), tokenizer,
                                      options.max_token_id, &encoded));
    } else if (value.is_array()) {
      for (const nlohmann::json& sentence : value) {
        if (!sentence.is_string()) {
          return invalid_argument("key '", key, "' is a list holding ", json_type_name(sentence),
                                  "; expected a string or a list of strings");
        }
        MS_RETURN_IF_ERROR(add_sentence(key, sentence.get_ref<const std::string&>(), tokenizer,
                                        options.max_token_id, &encoded));
      }
    } else {
      return invalid_argument("key '", key, "' is ", json_type_name(value),
                              ", expected a string (or a list of strings)");
    }
    if (!encoded.tokens.empty() && options.append_eod) {
      encoded.tokens.push_back(tokenizer.eod());
      ++encoded.lengths.back();
    }
  }
  return ok_status();
}

}  // namespace mindspeed
