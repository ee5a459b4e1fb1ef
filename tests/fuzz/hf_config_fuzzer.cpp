// Fuzz target: a Hugging Face config.json (models/gpt/hf_checkpoint.h, parse_hf_config, the
// text read_hf_config reads from DIR/config.json). A config that parses must describe a
// consistent model (heads divide the hidden size, groups divide the heads) and match itself.
#include <cstddef>
#include <cstdint>

#include "models/gpt/hf_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mindspeed;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  StatusOr<HfModelInfo> info = parse_hf_config(text, "fuzz/config.json");
  if (!info.ok()) {
    if (info.status().message().find("fuzz/config.json") == std::string::npos) __builtin_trap();
    return 0;
  }
  const ModelConfig& c = info->config;
  if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_attention_heads <= 0 || c.vocab_size <= 0 ||
      c.ffn_hidden_size <= 0 || c.max_position_embeddings <= 0 || c.hidden_size % c.num_attention_heads != 0 ||
      c.kv_channels * c.num_attention_heads != c.hidden_size || c.query_groups() <= 0 ||
      c.num_attention_heads % c.query_groups() != 0 || !(c.norm_epsilon > 0.0f)) {
    __builtin_trap();
  }
  if (!check_hf_config_matches(c, *info).ok()) __builtin_trap();
  return 0;
}
