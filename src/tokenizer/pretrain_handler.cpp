// MindSpeed-LLM's pretraining dataset handlers (pretrain_handler.h).
#include "tokenizer/pretrain_handler.h"

#include <array>
#include <nlohmann/json.hpp>
#include <string_view>

namespace mindspeed {
namespace {

struct NamedHandler {
  std::string_view name;
  PretrainHandler handler;
};

constexpr std::array<NamedHandler, 4> kPretrainHandlers = {{
    {"GeneralPretrainHandler", PretrainHandler::kGeneral},
    {"AlpacaPretrainHandler", PretrainHandler::kAlpaca},
    {"SharegptPretrainHandler", PretrainHandler::kSharegpt},
    {"StackOverflowPythonPretrainHandler", PretrainHandler::kStackOverflowPython},
}};

// MindSpeed-LLM's supervised fine-tuning, preference and RL data handlers.
constexpr std::array<std::string_view, 15> kFineTuningHandlers = {
    "AlpacaStyleInstructionHandler",
    "SharegptStyleInstructionHandler",
    "OpenAIInstructionHandler",
    "AlpacaStylePairwiseHandler",
    "SharegptStylePairwiseHandler",
    "PPOAlpacaStyleInstructionHandler",
    "HunyuanInstructionHandler",
    "R1AlpacaStyleInstructionHandler",
    "R1SharegptStyleInstructionHandler",
    "LlamaFactoryInstructionHandler",
    "GeneralInstructionHandler",
    "BelleMultiTurnInstructionHandler",
    "MOSSMultiTurnHandler",
    "MOSSInstructionHandler",
    "LeetcodePythonInstructionHandler",
};

std::string pretrain_handler_list() {
  std::string out;
  for (const NamedHandler& h : kPretrainHandlers) out += str_cat(out.empty() ? "" : ", ", h.name);
  return out;
}

// Python's str() of a template field as the handler's format() prints it: a string as it is,
// None (missing or null) as "None"; other JSON types are refused.
StatusOr<std::string> python_str(const nlohmann::json& doc, const char* field,
                                 const char* handler) {
  const auto it = doc.find(field);
  if (it == doc.end() || it->is_null()) return std::string("None");
  if (!it->is_string()) {
    return invalid_argument(handler, ": field '", field, "' is a JSON ", it->type_name(),
                            "; expected a string");
  }
  return it->get<std::string>();
}

StatusOr<std::string> string_field(const nlohmann::json& doc, const std::string& key,
                                   const char* handler) {
  const auto it = doc.find(key);
  if (it == doc.end()) return invalid_argument(handler, ": no key '", key, "' (see --json-keys)");
  if (!it->is_string()) {
    return invalid_argument(handler, ": key '", key, "' is a JSON ", it->type_name(),
                            "; expected a string");
  }
  return it->get<std::string>();
}

}  // namespace

StatusOr<PretrainHandler> parse_pretrain_handler(const std::string& name) {
  for (const NamedHandler& h : kPretrainHandlers) {
    if (h.name == name) return h.handler;
  }
  for (std::string_view fine_tuning : kFineTuningHandlers) {
    if (fine_tuning == name) {
      return unimplemented(
          "--handler-name ", name,
          " is one of MindSpeed-LLM's fine-tuning handlers (instruction, "
          "preference or multi-turn data: prompt templates, labels and packing); mindspeed-cpp "
          "pretrains only. Pretraining handlers: ",
          pretrain_handler_list());
    }
  }
  return invalid_argument(
      "--handler-name '", name,
      "' is not a MindSpeed-LLM dataset handler; pretraining handlers: ", pretrain_handler_list());
}

StatusOr<std::vector<std::string>> handler_output_keys(PretrainHandler handler,
                                                       const std::vector<std::string>& json_keys) {
  if (handler == PretrainHandler::kStackOverflowPython) return std::vector<std::string>{"text"};
  if (handler == PretrainHandler::kAlpaca && json_keys != std::vector<std::string>{"text"}) {
    return invalid_argument(
        "--handler-name AlpacaPretrainHandler writes one dataset, 'text' (built from the "
        "instruction, input and output fields); pass --json-keys text (the default)");
  }
  return json_keys;
}

StatusOr<std::string> handler_text(PretrainHandler handler, const nlohmann::json& doc,
                                   const std::string& key) {
  switch (handler) {
    case PretrainHandler::kNone:
    case PretrainHandler::kGeneral:
      return string_field(doc, key, "GeneralPretrainHandler");
    case PretrainHandler::kAlpaca: {
      static constexpr const char* kName = "AlpacaPretrainHandler";
      MS_ASSIGN_OR_RETURN(const std::string instruction, python_str(doc, "instruction", kName));
      MS_ASSIGN_OR_RETURN(const std::string output, python_str(doc, "output", kName));
      // `f" Input:\n{input}" if sample.get("input") else None`: a missing, null or empty input is
      // None.
      const auto input = doc.find("input");
      const bool has_input = input != doc.end() && !input->is_null() &&
                             !(input->is_string() && input->get_ref<const std::string&>().empty());
      std::string inputs = "None";
      if (has_input) {
        MS_ASSIGN_OR_RETURN(const std::string text, python_str(doc, "input", kName));
        inputs = " Input:\n" + text;
      }
      return str_cat(
          "A chat between a curious user and an artificial intelligence assistant. The assistant "
          "gives "
          "helpful, detailed, and polite answers to the user's questions.USER: Below is an "
          "instruction "
          "that describes a task. Write a response that appropriately completes the request.\n\n"
          "### Instruction:\n",
          instruction, "\n\n###", inputs, "\n\n### Response: ASSISTANT: ", output);
    }
    case PretrainHandler::kSharegpt: {
      static constexpr const char* kName = "SharegptPretrainHandler";
      const auto it = doc.find(key);
      if (it == doc.end()) return invalid_argument(kName, ": no key '", key, "' (see --json-keys)");
      if (!it->is_array()) {
        return invalid_argument(
            kName, ": key '", key, "' is a JSON ", it->type_name(),
            "; expected a conversation (a list of objects with a 'value' or 'content' string)");
      }
      std::string text;
      for (size_t i = 0; i < it->size(); ++i) {
        const nlohmann::json& turn = (*it)[i];
        const nlohmann::json* value = nullptr;
        if (turn.is_object()) {
          if (turn.contains("value")) {
            value = &turn.at("value");
          } else if (turn.contains("content")) {
            value = &turn.at("content");
          }
        }
        if (value == nullptr || !value->is_string()) {
          return invalid_argument(kName, ": key '", key, "' item ", i,
                                  " has no 'value' or 'content' string");
        }
        text += value->get_ref<const std::string&>();
      }
      return text;
    }
    case PretrainHandler::kStackOverflowPython: {
      static constexpr const char* kName = "StackOverflowPythonPretrainHandler";
      MS_ASSIGN_OR_RETURN(const std::string title, python_str(doc, "title", kName));
      MS_ASSIGN_OR_RETURN(const std::string question, python_str(doc, "question_body", kName));
      MS_ASSIGN_OR_RETURN(const std::string answer, python_str(doc, "answer_body", kName));
      return str_cat("In python, ", title, "\n### Question:\n", question, "\n### Response:\n",
                     answer, "\n");
    }
  }
  return internal_error("unknown pretrain handler");
}

}  // namespace mindspeed
