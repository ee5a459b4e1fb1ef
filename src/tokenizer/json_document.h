// One line of a JSONL corpus as preprocess_data reads it: Megatron's Encoder.encode of
// tools/preprocess_data.py (without --split-sentences). The line is one JSON object; for each
// --json-keys key its value is a string (one sequence) or a list of strings (one sequence
// each, as Megatron's --split-sentences output). Each non-empty tokenised sequence is kept;
// with append_eod the tokenizer's EOD id ends a non-empty document (its last sequence grows
// by one). A bad line (blank, invalid JSON, not an object, missing key, a value that is not
// a string or a list of strings, text the tokenizer refuses, an id that does not fit the
// output dtype) is InvalidArgument saying why; the caller adds the file and line number.
//
// With one of MindSpeed-LLM's pretraining handlers (--handler-name, pretrain_handler.h) each key
// is one text made by the handler and tokenised as one sequence (its EOD appended with
// append_eod), as the handler's _filter does; a key whose text is empty writes no document
// (the handler drops it); with seq_length, a document whose sequence in any key has
// seq_length tokens or more keeps no sequence in any key (an empty document), as the handler's
// _serialize_to_disk skips it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/pretrain_handler.h"
#include "tokenizer/tokenizer.h"

namespace mindspeed {

struct JsonDocumentOptions {
  std::vector<std::string> json_keys{"text"};  ///< --json-keys
  bool append_eod = false;                     ///< --append-eod
  int64_t max_token_id = INT32_MAX;            ///< the largest id the output dtype holds
  PretrainHandler handler = PretrainHandler::kNone;  ///< --handler-name (kNone: Megatron's encode)
  int64_t seq_length = 0;                            ///< --seq-length with a handler (0: no limit)
};

/// The tokens of one key of one document: tokens of all its sequences back to back, and
/// the length of each sequence.
struct EncodedKey {
  std::vector<int32_t> tokens;
  std::vector<int32_t> lengths;
  bool write = true;  ///< false: no document for this key (a handler's empty text)
};

/// Encodes `line` for every key (all keys or nothing): (*out)[k] is key k's document. `out`
/// is resized to the number of keys and its vectors reused.
Status encode_json_document(std::string_view line, const Tokenizer& tokenizer,
                            const JsonDocumentOptions& options, std::vector<EncodedKey>* out);

}  // namespace mindspeed
