// MindSpeed-LLM's pretraining dataset handlers (preprocess_data.py --handler-name, classes of
// mindspeed_llm/tasks/preprocess/data_handler.py): what text each --json-keys key of one JSONL
// object is tokenised from.
//  * GeneralPretrainHandler: the key's string as it is.
//  * AlpacaPretrainHandler: the "text" key, made from the object's instruction / input / output
//    fields by the handler's chat template (Python's str.format: a missing or null field reads
//    "None", and "input" is dropped to "None" when empty).
//  * SharegptPretrainHandler: the key holds a conversation, a list of objects; their "value"
//    (or, without one, "content") strings joined with nothing between them.
//  * StackOverflowPythonPretrainHandler: the "text" key, made from title, question_body and
//    answer_body. (Its _pre_process in MindSpeed-LLM returns None, so there the handler stops
//    with a TypeError; this follows the evident intent of the format string.)
// The fine-tuning handlers (instruction, pairwise, multi-turn: prompt templates, labels, packing)
// are refused by name with that reason; an unknown name is refused with the list (MindSpeed-LLM
// silently falls back to GeneralPretrainHandler).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace mindspeed {

enum class PretrainHandler {
  kNone,  ///< no --handler-name: Megatron's preprocess_data.py
  kGeneral,
  kAlpaca,
  kSharegpt,
  kStackOverflowPython,
};

/// The handler of a --handler-name value, or an error naming it (fine-tuning handlers are
/// refused with the reason; unknown names with the accepted list).
StatusOr<PretrainHandler> parse_pretrain_handler(const std::string& name);

/// The keys a handler writes: StackOverflowPython always writes "text" (MindSpeed-LLM replaces
/// --json-keys for it); Alpaca writes "text" and needs --json-keys to be text (MindSpeed-LLM
/// fills only that key); the others write `json_keys`.
StatusOr<std::vector<std::string>> handler_output_keys(PretrainHandler handler,
                                                       const std::vector<std::string>& json_keys);

/// The text of output key `key` of `doc` (a JSON object) under `handler` (not kNone), or an
/// InvalidArgument saying which field is missing or of the wrong type.
StatusOr<std::string> handler_text(PretrainHandler handler, const nlohmann::json& doc,
                                   const std::string& key);

}  // namespace mindspeed
