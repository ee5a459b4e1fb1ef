// SentencePiece-based tokenizers (Debian's libsentencepiece; its headers stay in the .cpp).
// Port of _SentencePieceTokenizer, _GPTSentencePieceTokenizer and _Llama2Tokenizer in
// megatron/training/tokenizer/tokenizer.py, with Megatron's id semantics:
//
// SentencePieceTokenizer: the model's pieces, then <CLS>, <SEP>, <EOD>, <MASK>, the pad, BOS
//   and EOS pieces (<PAD>/<BOS>/<EOS> when the model has none) and <extra_id_0..n-1>, each
//   appended only if not already a piece. vocab_size() counts them all; eod() is <EOD> (not
//   EOS); pad() the pad piece. tokenize() splits the text at these special strings (earliest
//   first) and encodes the parts; detokenize() puts a space around each special token.
// GPTSentencePieceTokenizer: the model's pieces only; plain encode; eod() = EOS id.
// Llama2Tokenizer: the model's pieces only; tokenize() prepends BOS (never appends EOS);
//   eod() = EOS id; pad() is undefined as in Megatron (AttributeError there).
//
// Differences from Megatron: ill-formed UTF-8 input is InvalidArgument, and a Llama2 model
// without a BOS piece is refused at load (Megatron would write id -1 into every document).
// A damaged model is InvalidArgument, also where libsentencepiece throws (e.g. its trie
// builder on an empty piece): no exception leaves the wrapper.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace mindspeed {

StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece_tokenizer(const std::string& model_file,
                                                                  int64_t vocab_extra_ids);
/// A model's pieces (piece i has id i) and the ids its trainer gave BOS, EOS and pad (-1 when
/// it has none): for callers that resolve token strings against the model (PretrainedFromHF's
/// tokenizer_config.json over a tokenizer.model).
struct SentencePieceVocabulary {
  std::vector<std::string> pieces;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t pad_id = -1;
};

/// `vocabulary`, when not null, receives the model's pieces and special ids.
StatusOr<std::unique_ptr<Tokenizer>> load_gpt_sentencepiece_tokenizer(
    const std::string& model_file, SentencePieceVocabulary* vocabulary = nullptr);
StatusOr<std::unique_ptr<Tokenizer>> load_llama2_tokenizer(const std::string& model_file);

}  // namespace mindspeed
