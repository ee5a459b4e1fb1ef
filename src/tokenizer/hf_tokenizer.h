// MindSpeed-LLM's --tokenizer-type PretrainedFromHF: a Hugging Face tokenizer directory
// (--tokenizer-name-or-path DIR). Port of _AutoTokenizer in MindSpeed-LLM's
// mindspeed_llm/training/tokenizer/tokenizer.py, which wraps transformers'
// AutoTokenizer.from_pretrained(DIR, use_fast=True, local_files_only=True), for the byte-level
// BPE tokenizers of GPT-2, LLaMA-3 and Qwen2 (tokenizer.json), and for a SentencePiece
// tokenizer.model when DIR has no tokenizer.json.
//
// tokenizer.json (the tokenizers library's serialisation) supported:
//   normalizer     null, NFC (Qwen2), or a Sequence of those
//   pre_tokenizer  ByteLevel (GPT-2), or a Sequence of Split steps with a recognised pattern
//                  (hf_pretokenizer.h; behavior Isolated, invert false) ending in ByteLevel
//                  (LLaMA-3, Qwen2); add_prefix_space and use_regex honoured
//   model          BPE over byte-level symbols: vocab, merges ("a b" strings or ["a", "b"]
//                  pairs), ignore_merges; every merge's halves and result must be tokens and
//                  all 256 byte symbols must be in the vocabulary (so there is never an unknown
//                  token); dropout, byte_fallback, continuing_subword_prefix and
//                  end_of_word_suffix refused
//   added_tokens   split out of the text before normalisation (normalized=false) or after it
//                  (normalized=true), leftmost-longest, with lstrip / rstrip / single_word as
//                  the tokenizers library applies them
//   post_processor null, ByteLevel, TemplateProcessing (its "single" template: e.g. LLaMA-3's
//                  <|begin_of_text|> $A), RobertaProcessing, or a Sequence of those
//   decoder        ByteLevel (null refused: the Rust library would join the tokens with spaces)
// Anything else is refused at load with the file, the JSON field, the value found and what is
// supported.
//
// tokenizer_config.json / special_tokens_map.json (both optional; the second overrides the
// first, as transformers reads them) give eos_token, pad_token, bos_token,
// clean_up_tokenization_spaces and tokenizer_class; the class's own defaults apply to keys
// they do not set (GPT2TokenizerFast: eos "<|endoftext|>"; Qwen2TokenizerFast: eos and pad
// "<|endoftext|>"; LlamaTokenizerFast: bos "<s>", eos "</s>" and a post-processor rebuilt from
// add_bos_token (default true) / add_eos_token (default false)). Without tokenizer_class,
// config.json's model_type picks the class (gpt2, qwen2*, llama).
//
// Semantics (MindSpeed-LLM's _AutoTokenizer):
//   tokenize(text)   tokenizer.encode(text): add_special_tokens=True, so the post-processor's
//                    special tokens are added (LLaMA-3: <|begin_of_text|> first; GPT-2 and
//                    Qwen2: none)
//   detokenize(ids)  tokenizer.decode(ids): special tokens kept, byte-level decoding (a token
//                    whose characters are not all byte symbols decodes to its own UTF-8),
//                    ill-formed UTF-8 -> U+FFFD, then clean_up_tokenization (" ." -> "." ...)
//                    when clean_up_tokenization_spaces is true (false when unset, transformers'
//                    default since 4.45, which MindSpeed-LLM pins)
//   vocab_size()     len(tokenizer): distinct tokens of the vocabulary and the added tokens
//   eod() = eos      eos_token's id (-1 when there is none: MindSpeed raises there)
//   pad()            pad_token's id, else eos's (_AutoTokenizer sets pad = eos when unset)
//   bos()            nullopt (MindSpeed's _AutoTokenizer.bos raises NotImplementedError)
//   vocab_extra_ids  adds the special tokens <extra_id_0..n-1> (new ids after the largest)
//   unique_identifiers {"class": "_AutoTokenizer", "tokenizer_path": [DIR]}
//
// Differences from the Rust library, all deliberate: ill-formed UTF-8 input, an id outside the
// vocabulary in detokenize, a special token named in tokenizer_config.json that is not a token
// (transformers would append it to the vocabulary) are errors, not guesses. The npm reference
// (@huggingface/tokenizers) differs from the Rust library in ways we follow Rust on: single_word
// (npm ignores it) and the ByteLevel pattern's \s (npm uses JavaScript's \s: U+FEFF yes, U+0085
// no; Rust and we: Unicode White_Space). Unicode data: classes and single_word's word characters
// (the Rust regex crate's \w) from the `regex` module's tables (unicode.h), NFC from
// unicodedata 15.1 (unicode_normalization.h).
//
// SentencePiece fallback (no tokenizer.json, a tokenizer.model): LlamaTokenizerFast's
// behaviour approximated by libsentencepiece: the model's encoding, bos_token first when
// add_bos_token (default true), eos_token last when add_eos_token. eos_token, pad_token and
// bos_token come from tokenizer_config.json / special_tokens_map.json as above, resolved
// against the model's pieces (a token that is not a piece is an error naming the file, the
// field and the token); a key neither file sets is the model's own EOS / BOS piece (pad: none).
// eod = eos; pad = pad_token, else eos. Only tokenizer_class LlamaTokenizer(Fast) or none is
// accepted there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace mindspeed {

/// Loads DIR/tokenizer.json (or DIR/tokenizer.model) with DIR's tokenizer_config.json,
/// special_tokens_map.json and config.json. Errors name the file, the field and the fix.
StatusOr<std::unique_ptr<Tokenizer>> load_pretrained_from_hf_tokenizer(
    const std::string& directory, int64_t vocab_extra_ids = 0);

}  // namespace mindspeed
