// Fuzz target: JSONL lines as preprocess_data reads them (tokenizer/json_document.h). The
// input is a chunk of a corpus file: split into lines at '\n' (a trailing '\r' dropped, as
// preprocess_data's reader does), each line encoded for the keys "text" and "title" with the
// GPT-2 tokenizer of data/gpt2 (uint16 output) and with the NullTokenizer (int32 output), and
// through MindSpeed-LLM's pretraining handlers (tokenizer/pretrain_handler.h: General with
// --seq-length, Alpaca, Sharegpt, StackOverflowPython). An encoded document must have ids inside
// the output dtype and lengths that add up (a handler's one sequence may be empty, as its
// tokenizer call returns it; Megatron's encoding keeps non-empty sequences only).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tokenizer/json_document.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Setup {
  std::unique_ptr<mindspeed::Tokenizer> gpt2, null;
};

const Setup& setup() {
  static const Setup s = [] {
    Setup out;
    mindspeed::TokenizerOptions gpt2;
    gpt2.tokenizer_type = "GPT2BPETokenizer";
    gpt2.vocab_file = std::string(MS_SOURCE_DIR) + "/data/gpt2/gpt2-vocab.json";
    gpt2.merge_file = std::string(MS_SOURCE_DIR) + "/data/gpt2/gpt2-merges.txt";
    auto g = mindspeed::build_tokenizer(gpt2);
    if (!g.ok()) __builtin_trap();  // the data/gpt2 files are part of the repository
    out.gpt2 = std::move(*g);
    auto n = mindspeed::make_null_tokenizer(1000);
    if (!n.ok()) __builtin_trap();
    out.null = std::move(*n);
    return out;
  }();
  return s;
}

// `in_vocab`: ids must also be inside the vocabulary (the NullTokenizer takes any id).
void check(std::string_view line, const mindspeed::Tokenizer& tok, const mindspeed::JsonDocumentOptions& options,
           bool in_vocab) {
  std::vector<mindspeed::EncodedKey> doc;
  const mindspeed::Status status = mindspeed::encode_json_document(line, tok, options, &doc);
  if (!status.ok()) {
    if (status.code() != mindspeed::StatusCode::kInvalidArgument || status.message().empty()) __builtin_trap();
    return;
  }
  if (doc.size() != options.json_keys.size()) __builtin_trap();
  const bool handler = options.handler != mindspeed::PretrainHandler::kNone;
  for (const mindspeed::EncodedKey& key : doc) {
    int64_t total = 0;
    if (handler && key.lengths.size() > 1) __builtin_trap();  // one text, one sequence
    if (!key.write && !key.tokens.empty()) __builtin_trap();
    for (int32_t length : key.lengths) {
      if (length < 0 || (length == 0 && !handler)) __builtin_trap();
      if (handler && options.seq_length > 0 && length >= options.seq_length) __builtin_trap();
      total += length;
    }
    if (total != static_cast<int64_t>(key.tokens.size())) __builtin_trap();
    for (int32_t id : key.tokens) {
      if (id < 0 || id > options.max_token_id || (in_vocab && id >= tok.vocab_size())) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Setup& s = setup();
  mindspeed::JsonDocumentOptions gpt2_options;
  gpt2_options.json_keys = {"text"};
  gpt2_options.append_eod = true;
  gpt2_options.max_token_id = 65535;
  mindspeed::JsonDocumentOptions null_options;
  null_options.json_keys = {"text", "title"};
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    check(line, *s.gpt2, gpt2_options, true);
    check(line, *s.null, null_options, false);
    for (const auto handler : {mindspeed::PretrainHandler::kGeneral, mindspeed::PretrainHandler::kAlpaca,
                               mindspeed::PretrainHandler::kSharegpt,
                               mindspeed::PretrainHandler::kStackOverflowPython}) {
      mindspeed::JsonDocumentOptions options = gpt2_options;
      options.handler = handler;
      options.seq_length = handler == mindspeed::PretrainHandler::kGeneral ? 16 : 0;
      check(line, *s.gpt2, options, true);
    }
  }
  return 0;
}
