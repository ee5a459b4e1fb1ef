// Hugging Face checkpoints (a directory with config.json and model.safetensors) for GPT-2
// (GPT2LMHeadModel) and LLaMA (LlamaForCausalLM): their parameter names and layouts mapped
// to this model's Megatron-core names and layouts, both ways.
//  * GPT-2 Conv1D weights are [in, out] and are transposed; c_attn's [Q; K; V] columns are
//    regrouped into Megatron's per-head [q, k, v] rows.
//  * LLaMA q_proj/k_proj/v_proj are regrouped into Megatron's per-group [q.., k, v] rows;
//    gate_proj and up_proj become linear_fc1 = [gate; up].
//  * Word embeddings and the output layer are padded with zero rows to the padded vocab.
// The Hugging Face LLaMA q/k weights are already permuted for the rotate-half rotary form,
// which is the form the kernels use, so no further permutation is needed.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/model_config.h"
#include "core/status.h"
#include "models/gpt/gpt_model.h"

namespace mindspeed {

/// kQwen2 and kMistral use the LLaMA names and layouts (Qwen2 with q/k/v biases).
enum class HfArchitecture { kGpt2, kLlama, kQwen2, kMistral, kMixtral };

struct HfModelInfo {
  HfArchitecture architecture = HfArchitecture::kGpt2;
  ModelConfig config;  ///< the architecture fields from config.json
};

/// Parses DIR/config.json.
StatusOr<HfModelInfo> read_hf_config(const std::string& dir);
/// Parses the text of a config.json; `path` is the file named in error messages.
StatusOr<HfModelInfo> parse_hf_config(std::string_view json_text, const std::string& path);
/// Every field the model flags set that config.json contradicts, as one error naming the
/// flags and both values.
Status check_hf_config_matches(const ModelConfig& flags, const HfModelInfo& hf);
/// MindSpeed-LLM's --model-type-hf against DIR/config.json's model_type: llama2 / llama are
/// "llama", qwen25 / qwen2 "qwen2", mistral, mixtral and gpt2 themselves; an error names both.
Status check_hf_model_type(const std::string& dir, const std::string& model_type_hf);
/// Loads DIR/model.safetensors into `model` (this rank's shards; into device memory through
/// `backend`'s transfers when given).
Status load_hf_checkpoint(const std::string& dir, GPTModel& model, const ParallelState& ps,
                          const Backend* backend = nullptr);

/// Full (unsharded) tensors of the model, by Megatron name.
using FullTensors = std::map<std::string, std::vector<float>>;
/// Converts Megatron-named full tensors into Hugging Face names and layouts (padding rows of
/// the vocabulary are dropped).
StatusOr<std::map<std::string, std::vector<float>>> export_hf_tensors(const ModelConfig& config,
                                                                      HfArchitecture arch,
                                                                      const FullTensors& tensors);

/// config.json for the model as Hugging Face transformers reads it (GPT2LMHeadModel or
/// LlamaForCausalLM, float32).
std::string hf_config_json(const ModelConfig& config, HfArchitecture arch);
/// Writes DIR/config.json and DIR/model.safetensors (HF names and layouts) from Megatron-named
/// full tensors; the directory is created.
Status write_hf_checkpoint(const std::string& dir, const ModelConfig& config, HfArchitecture arch,
                           const FullTensors& tensors);

}  // namespace mindspeed
