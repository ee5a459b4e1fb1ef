// Fuzz target: the GPT-2 BPE tokenizer files (tokenizer/gpt2_tokenization.h). The input is
// vocab.json, the separator of fuzz_util.h, then merges.txt. A vocabulary that loads must
// tokenise text (a fixed sample and the start of the merges text) into ids that detokenise
// back to the same text.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "tokenizer/gpt2_tokenization.h"
#include "tokenizer/unicode.h"

namespace {

void round_trip(const mindspeed::GPT2BPETokenizer& tok, std::string_view text) {
  mindspeed::StatusOr<std::vector<int32_t>> ids = tok.tokenize(text);
  if (!ids.ok()) {
    // Only ill-formed UTF-8 is refused.
    if (mindspeed::find_invalid_utf8(text) == std::string_view::npos) __builtin_trap();
    return;
  }
  for (int32_t id : *ids) {
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  }
  mindspeed::StatusOr<std::string> back = tok.detokenize(*ids);
  if (!back.ok() || *back != text) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mindspeed;
  const auto [vocab, merges] = fuzz::split_two(data, size);
  const std::string vocab_path = fuzz::scratch_file("vocab.json");
  const std::string merges_path = fuzz::scratch_file("merges.txt");
  fuzz::write_file(vocab_path, vocab);
  fuzz::write_file(merges_path, merges);
  StatusOr<std::unique_ptr<GPT2BPETokenizer>> tok = GPT2BPETokenizer::load(vocab_path, merges_path);
  if (!tok.ok()) return 0;
  if ((*tok)->eod() < 0 || (*tok)->eod() >= (*tok)->vocab_size()) __builtin_trap();
  round_trip(**tok, "Hello world, it's 2024: hell's bells\n\t  x \xc3\xa9t\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80!");
  round_trip(**tok, merges.substr(0, 512));
  return 0;
}
