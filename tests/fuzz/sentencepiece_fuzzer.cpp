// Fuzz target: a SentencePiece .model file through our wrapper
// (tokenizer/sentencepiece_tokenizer.h), loaded as each of the three tokenizer types. A
// model that loads must tokenise a fixed sample and the input's own bytes (when UTF-8) into
// ids inside its vocabulary, and detokenise them.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

void exercise(const mindspeed::Tokenizer& tok, std::string_view text) {
  mindspeed::StatusOr<std::vector<int32_t>> ids = tok.tokenize(text);
  if (!ids.ok()) {
    if (ids.status().code() != mindspeed::StatusCode::kInvalidArgument &&
        ids.status().code() != mindspeed::StatusCode::kInternal) {
      __builtin_trap();
    }
    return;
  }
  for (int32_t id : *ids) {
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  }
  (void)tok.detokenize(*ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mindspeed;
  const std::string path = fuzz::scratch_file("tokenizer.model");
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::write_file(path, bytes);
  std::string text = "Hello world <EOD> <extra_id_0> caf\xc3\xa9 \xe2\x96\x81 12345";
  const std::string_view tail = bytes.substr(bytes.size() > 64 ? bytes.size() - 64 : 0);
  if (find_invalid_utf8(tail) == std::string_view::npos) text.append(tail);
  StatusOr<std::unique_ptr<Tokenizer>> loaded[] = {
      load_sentencepiece_tokenizer(path, 3), load_gpt_sentencepiece_tokenizer(path),
      load_llama2_tokenizer(path)};
  for (auto& tok : loaded) {
    if (!tok.ok()) continue;
    if ((*tok)->vocab_size() <= 0) __builtin_trap();
    exercise(**tok, text);
  }
  return 0;
}
