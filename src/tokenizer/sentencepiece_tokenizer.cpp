// SentencePiece-based tokenizers (see sentencepiece_tokenizer.h).
#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/unicode.h"

namespace mindspeed {
namespace {

enum class SpKind { kSentencePiece, kGptSentencePiece, kLlama2 };

// Runs a libsentencepiece call; the text of an exception it throws, or nullopt.
template <typename Fn>
std::optional<std::string> catch_exception(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return std::string(e.what());
  } catch (...) {
    return std::string("unknown exception");
  }
  return std::nullopt;
}

Status check_utf8(std::string_view text, std::string_view tokenizer) {
  const size_t bad = find_invalid_utf8(text);
  if (bad == std::string_view::npos) return ok_status();
  return invalid_argument(tokenizer, ": text is not valid UTF-8 (ill-formed byte at offset ", bad,
                          ")");
}

class SentencePieceTokenizerImpl final : public Tokenizer {
 public:
  SentencePieceTokenizerImpl(TokenizerIdentifiers identifiers, SpKind kind)
      : Tokenizer(std::move(identifiers)), kind_(kind) {}

  Status init(const std::string& model_file, int64_t vocab_extra_ids) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(model_file, ec)) {
      return not_found("tokenizer model '", model_file, "': no such file (--tokenizer-model "
                       "expects a SentencePiece .model file)");
    }
    sentencepiece::util::Status status;
    // libsentencepiece reports some damaged models by throwing (its Darts trie builder on an
    // empty piece or a NUL byte in one); no exception leaves this library.
    const std::optional<std::string> thrown = catch_exception([&] { status = processor_.Load(model_file); });
    if (thrown) {
      return invalid_argument("tokenizer model '", model_file, "': not a valid SentencePiece "
                              "model (", *thrown, "); --tokenizer-model expects the .model file "
                              "written by spm_train");
    }
    if (!status.ok()) {
      return invalid_argument("tokenizer model '", model_file, "': not a valid SentencePiece "
                              "model (", status.ToString(), "); --tokenizer-model expects the "
                              ".model file written by spm_train");
    }
    const int n = processor_.GetPieceSize();
    if (n <= 0) {
      return invalid_argument("tokenizer model '", model_file, "': the model has no pieces");
    }
    for (int i = 0; i < n; ++i) {
      const std::string& piece = processor_.IdToPiece(i);
      vocab_[piece] = i;
      inv_vocab_.push_back(piece);
    }
    pad_id_ = processor_.pad_id();
    bos_id_ = processor_.bos_id();
    eos_id_ = processor_.eos_id();
    if (kind_ == SpKind::kLlama2 && bos_id_ < 0) {
      return invalid_argument("tokenizer model '", model_file, "': has no BOS piece (bos_id = ",
                              bos_id_, "), but Llama2Tokenizer starts every text with BOS; use "
                              "GPTSentencePieceTokenizer for this model");
    }
    if (kind_ != SpKind::kSentencePiece) return ok_status();

    // _SentencePieceTokenizer._initalize: append the special tokens.
    const auto piece_or = [&](int id, const char* fallback) {
      return (id >= 0 && id < n) ? processor_.IdToPiece(id) : std::string(fallback);
    };
    add_special_token("<CLS>");
    add_special_token("<SEP>");
    eod_id_ = add_special_token("<EOD>");
    add_special_token("<MASK>");
    pad_id_ = add_special_token(piece_or(pad_id_, "<PAD>"));
    bos_id_ = add_special_token(piece_or(bos_id_, "<BOS>"));
    eos_id_ = add_special_token(piece_or(eos_id_, "<EOS>"));
    for (int64_t i = 0; i < vocab_extra_ids; ++i) {
      add_special_token("<extra_id_" + std::to_string(i) + ">");
    }
    return ok_status();
  }

  Status tokenize_into(std::string_view text, std::vector<int32_t>* ids) const override {
    MS_RETURN_IF_ERROR(check_utf8(text, name()));
    if (kind_ == SpKind::kLlama2) ids->push_back(bos_id_);
    if (kind_ != SpKind::kSentencePiece) return encode(text, ids);
    // Split at the earliest special token (ties: the one added first), encode the text
    // before it, emit its id, continue after it.
    size_t idx = 0;
    while (true) {
      size_t best_pos = std::string_view::npos;
      const std::pair<std::string, int32_t>* best = nullptr;
      for (const auto& special : special_tokens_) {
        if (special.first.empty()) continue;
        const size_t pos = text.find(special.first, idx);
        if (pos != std::string_view::npos && (best == nullptr || pos < best_pos)) {
          best_pos = pos;
          best = &special;
        }
      }
      if (best == nullptr) break;
      MS_RETURN_IF_ERROR(encode(text.substr(idx, best_pos - idx), ids));
      ids->push_back(best->second);
      idx = best_pos + best->first.size();
    }
    return encode(text.substr(idx), ids);
  }

  StatusOr<std::string> detokenize(std::span<const int32_t> ids) const override {
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size()) {
        return invalid_argument(name(), ": token id ", id, " is outside the vocabulary [0, ",
                                vocab_size(), ")");
      }
    }
    if (kind_ != SpKind::kSentencePiece) return decode(ids);
    std::string text;
    size_t last = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = inv_special_tokens_.find(ids[i]);
      if (it == inv_special_tokens_.end()) continue;
      MS_ASSIGN_OR_RETURN(std::string part, decode(ids.subspan(last, i - last)));
      text += part + " " + it->second + " ";
      last = i + 1;
    }
    MS_ASSIGN_OR_RETURN(std::string tail, decode(ids.subspan(last)));
    return text + tail;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(inv_vocab_.size()); }
  int32_t eod() const override { return kind_ == SpKind::kSentencePiece ? eod_id_ : eos_id_; }
  std::optional<int32_t> pad() const override {
    if (kind_ == SpKind::kLlama2) return std::nullopt;
    return pad_id_;
  }
  std::optional<int32_t> bos() const override { return bos_id_; }
  std::optional<int32_t> eos() const override { return eos_id_; }
  SentencePieceVocabulary vocabulary() const {
    SentencePieceVocabulary v;
    v.pieces = inv_vocab_;
    v.bos_id = processor_.bos_id();
    v.eos_id = processor_.eos_id();
    v.pad_id = processor_.pad_id();
    return v;
  }
  std::string_view name() const override {
    switch (kind_) {
      case SpKind::kSentencePiece: return "SentencePieceTokenizer";
      case SpKind::kGptSentencePiece: return "GPTSentencePieceTokenizer";
      case SpKind::kLlama2: return "Llama2Tokenizer";
    }
    return "";
  }

 private:
  // _add_special_token: a new id only for strings that are not pieces yet.
  int32_t add_special_token(const std::string& token) {
    auto it = vocab_.find(token);
    int32_t id;
    if (it == vocab_.end()) {
      id = static_cast<int32_t>(inv_vocab_.size());
      vocab_[token] = id;
      inv_vocab_.push_back(token);
    } else {
      id = it->second;
    }
    bool found = false;
    for (auto& special : special_tokens_) {
      if (special.first == token) {
        special.second = id;
        found = true;
      }
    }
    if (!found) special_tokens_.emplace_back(token, id);
    inv_special_tokens_[id] = token;
    return id;
  }

  Status encode(std::string_view text, std::vector<int32_t>* ids) const {
    if (text.empty()) return ok_status();
    std::vector<int> pieces;
    sentencepiece::util::Status status;
    if (const auto thrown = catch_exception([&] { status = processor_.Encode(text, &pieces); })) {
      return internal_error(name(), ": SentencePiece encode failed: ", *thrown);
    }
    if (!status.ok()) return internal_error(name(), ": SentencePiece encode failed: ",
                                            status.ToString());
    ids->insert(ids->end(), pieces.begin(), pieces.end());
    return ok_status();
  }

  StatusOr<std::string> decode(std::span<const int32_t> ids) const {
    const std::vector<int> pieces(ids.begin(), ids.end());
    std::string text;
    sentencepiece::util::Status status;
    if (const auto thrown = catch_exception([&] { status = processor_.Decode(pieces, &text); })) {
      return invalid_argument(name(), ": SentencePiece decode failed: ", *thrown);
    }
    if (!status.ok()) {
      return invalid_argument(name(), ": SentencePiece decode failed: ", status.ToString());
    }
    return text;
  }

  SpKind kind_;
  sentencepiece::SentencePieceProcessor processor_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> inv_vocab_;
  /// In insertion order (the order Megatron's dict iterates when splitting text).
  std::vector<std::pair<std::string, int32_t>> special_tokens_;
  std::unordered_map<int32_t, std::string> inv_special_tokens_;
  int32_t pad_id_ = -1;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t eod_id_ = -1;
};

StatusOr<std::unique_ptr<Tokenizer>> load(const std::string& model_file, SpKind kind,
                                          const char* class_name, int64_t vocab_extra_ids,
                                          SentencePieceVocabulary* vocabulary = nullptr) {
  TokenizerIdentifiers identifiers;
  identifiers.class_name = class_name;
  identifiers.tokenizer_path = {model_file};
  identifiers.options = {{"vocab_extra_ids", std::to_string(vocab_extra_ids)}};
  auto tok = std::make_unique<SentencePieceTokenizerImpl>(std::move(identifiers), kind);
  MS_RETURN_IF_ERROR(tok->init(model_file, vocab_extra_ids));
  if (vocabulary != nullptr) *vocabulary = tok->vocabulary();
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece_tokenizer(const std::string& model_file,
                                                                  int64_t vocab_extra_ids) {
  return load(model_file, SpKind::kSentencePiece, "_SentencePieceTokenizer", vocab_extra_ids);
}

StatusOr<std::unique_ptr<Tokenizer>> load_gpt_sentencepiece_tokenizer(
    const std::string& model_file, SentencePieceVocabulary* vocabulary) {
  return load(model_file, SpKind::kGptSentencePiece, "_GPTSentencePieceTokenizer", 0, vocabulary);
}

StatusOr<std::unique_ptr<Tokenizer>> load_llama2_tokenizer(const std::string& model_file) {
  return load(model_file, SpKind::kLlama2, "_Llama2Tokenizer", 0);
}

}  // namespace mindspeed
