// Hugging Face GPT-2 / LLaMA checkpoint mapping (hf_checkpoint.h).
#include "models/gpt/hf_checkpoint.h"

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "checkpointing/safetensors.h"

namespace mindspeed {
namespace {

using Tensors = std::map<std::string, std::vector<float>>;

// One of our parameters and how it is built from Hugging Face tensors.
enum class Layout {
  kCopy,          // same layout
  kTranspose,     // GPT-2 Conv1D [in, out] <-> [out, in]
  kPadRows,       // [V, h] <-> [Vp, h]
  kGpt2Qkv,       // c_attn [h, 3h] (transposed [Q;K;V]) <-> per-head [q,k,v] rows
  kGpt2QkvBias,   // c_attn.bias [3h]
  kLlamaQkv,      // q_proj, k_proj, v_proj <-> per-group [q.., k, v] rows
  kConcatRows,    // [gate; up]
};

struct Mapping {
  std::string ours;
  std::vector<std::string> hf;
  Layout layout;
};

std::vector<Mapping> mappings(const ModelConfig& c, HfArchitecture arch, const std::string& prefix) {
  std::vector<Mapping> m;
  if (arch == HfArchitecture::kGpt2) {
    m.push_back({"embedding.word_embeddings.weight", {prefix + "wte.weight"}, Layout::kPadRows});
    m.push_back({"embedding.position_embeddings.weight", {prefix + "wpe.weight"}, Layout::kCopy});
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string o = "decoder.layers." + std::to_string(l) + ".";
      const std::string h = prefix + "h." + std::to_string(l) + ".";
      m.push_back({o + "input_layernorm.weight", {h + "ln_1.weight"}, Layout::kCopy});
      m.push_back({o + "input_layernorm.bias", {h + "ln_1.bias"}, Layout::kCopy});
      m.push_back({o + "self_attention.linear_qkv.weight", {h + "attn.c_attn.weight"}, Layout::kGpt2Qkv});
      m.push_back({o + "self_attention.linear_qkv.bias", {h + "attn.c_attn.bias"}, Layout::kGpt2QkvBias});
      m.push_back({o + "self_attention.linear_proj.weight", {h + "attn.c_proj.weight"}, Layout::kTranspose});
      m.push_back({o + "self_attention.linear_proj.bias", {h + "attn.c_proj.bias"}, Layout::kCopy});
      m.push_back({o + "pre_mlp_layernorm.weight", {h + "ln_2.weight"}, Layout::kCopy});
      m.push_back({o + "pre_mlp_layernorm.bias", {h + "ln_2.bias"}, Layout::kCopy});
      m.push_back({o + "mlp.linear_fc1.weight", {h + "mlp.c_fc.weight"}, Layout::kTranspose});
      m.push_back({o + "mlp.linear_fc1.bias", {h + "mlp.c_fc.bias"}, Layout::kCopy});
      m.push_back({o + "mlp.linear_fc2.weight", {h + "mlp.c_proj.weight"}, Layout::kTranspose});
      m.push_back({o + "mlp.linear_fc2.bias", {h + "mlp.c_proj.bias"}, Layout::kCopy});
    }
    m.push_back({"decoder.final_layernorm.weight", {prefix + "ln_f.weight"}, Layout::kCopy});
    m.push_back({"decoder.final_layernorm.bias", {prefix + "ln_f.bias"}, Layout::kCopy});
    return m;
  }
  m.push_back({"embedding.word_embeddings.weight", {"model.embed_tokens.weight"}, Layout::kPadRows});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string o = "decoder.layers." + std::to_string(l) + ".";
    const std::string h = "model.layers." + std::to_string(l) + ".";
    m.push_back({o + "input_layernorm.weight", {h + "input_layernorm.weight"}, Layout::kCopy});
    m.push_back({o + "self_attention.linear_qkv.weight",
                 {h + "self_attn.q_proj.weight", h + "self_attn.k_proj.weight", h + "self_attn.v_proj.weight"},
                 Layout::kLlamaQkv});
    if (c.qkv_bias()) {
      m.push_back({o + "self_attention.linear_qkv.bias",
                   {h + "self_attn.q_proj.bias", h + "self_attn.k_proj.bias", h + "self_attn.v_proj.bias"},
                   Layout::kLlamaQkv});
    }
    m.push_back({o + "self_attention.linear_proj.weight", {h + "self_attn.o_proj.weight"}, Layout::kCopy});
    m.push_back({o + "pre_mlp_layernorm.weight", {h + "post_attention_layernorm.weight"}, Layout::kCopy});
    m.push_back({o + "mlp.linear_fc1.weight", {h + "mlp.gate_proj.weight", h + "mlp.up_proj.weight"}, Layout::kConcatRows});
    m.push_back({o + "mlp.linear_fc2.weight", {h + "mlp.down_proj.weight"}, Layout::kCopy});
  }
  m.push_back({"decoder.final_layernorm.weight", {"model.norm.weight"}, Layout::kCopy});
  if (c.untie_embeddings_and_output_weights) {
    m.push_back({"output_layer.weight", {"lm_head.weight"}, Layout::kPadRows});
  }
  return m;
}

// Expected Hugging Face shapes of the tensors of a mapping.
std::vector<std::vector<int64_t>> hf_shapes(const Mapping& m, const ModelConfig& c, HfArchitecture arch) {
  const int64_t h = c.hidden_size, D = c.kv_channels, nq = c.num_attention_heads, ng = c.query_groups();
  const bool bias = m.ours.ends_with(".bias");
  switch (m.layout) {
    case Layout::kPadRows: return {{c.vocab_size, h}};
    case Layout::kGpt2Qkv: return {{h, 3 * h}};
    case Layout::kGpt2QkvBias: return {{3 * h}};
    case Layout::kLlamaQkv:
      if (bias) return {{nq * D}, {ng * D}, {ng * D}};
      return {{nq * D, h}, {ng * D, h}, {ng * D, h}};
    case Layout::kConcatRows: return {{c.ffn_hidden_size, h}, {c.ffn_hidden_size, h}};
    case Layout::kTranspose:
      if (m.ours.ends_with("linear_proj.weight")) return {{h, h}};
      if (m.ours.ends_with("linear_fc1.weight")) return {{h, c.ffn_hidden_size}};
      return {{c.ffn_hidden_size, h}};
    case Layout::kCopy:
      if (m.ours == "embedding.position_embeddings.weight") return {{c.max_position_embeddings, h}};
      if (m.ours.ends_with("linear_proj.weight")) return {{h, nq * D}};
      if (m.ours.ends_with("linear_fc2.weight")) return {{h, c.ffn_hidden_size}};
      if (m.ours.ends_with("linear_fc1.bias")) return {{c.ffn_hidden_size}};
      return {{h}};
  }
  (void)arch;
  return {};
}

std::vector<float> transpose(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = x[r * cols + c];
  return out;
}

// Regrouping between per-kind blocks [Q (nq*D rows); K (ng*D); V (ng*D)] of `width` columns
// and Megatron's per-group [q (G*D), k (D), v (D)] rows. to_megatron picks the direction.
std::vector<float> regroup_qkv(const std::vector<float>& src, int64_t nq, int64_t ng, int64_t D,
                               int64_t width, bool to_megatron) {
  const int64_t G = nq / ng;
  std::vector<float> out(src.size());
  for (int64_t g = 0; g < ng; ++g) {
    for (int64_t r = 0; r < (G + 2) * D; ++r) {
      int64_t block_row;  // row in the [Q; K; V] layout
      if (r < G * D) {
        block_row = g * G * D + r;
      } else if (r < (G + 1) * D) {
        block_row = nq * D + g * D + (r - G * D);
      } else {
        block_row = nq * D + ng * D + g * D + (r - (G + 1) * D);
      }
      const int64_t mrow = g * (G + 2) * D + r;
      const int64_t from = to_megatron ? block_row : mrow, to = to_megatron ? mrow : block_row;
      std::copy(src.begin() + from * width, src.begin() + (from + 1) * width, out.begin() + to * width);
    }
  }
  return out;
}

std::vector<float> concat(const std::vector<std::vector<float>>& parts) {
  std::vector<float> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::vector<float> import_tensor(const Mapping& m, const ModelConfig& c,
                                 std::vector<std::vector<float>> hf) {
  const int64_t h = c.hidden_size, D = c.kv_channels, nq = c.num_attention_heads, ng = c.query_groups();
  switch (m.layout) {
    case Layout::kCopy: return std::move(hf[0]);
    case Layout::kTranspose: {
      const auto shapes = hf_shapes(m, c, HfArchitecture::kGpt2);
      return transpose(hf[0], shapes[0][0], shapes[0][1]);
    }
    case Layout::kPadRows: {
      std::vector<float> out(static_cast<size_t>(c.padded_vocab_size * h), 0.0f);
      std::copy(hf[0].begin(), hf[0].end(), out.begin());
      return out;
    }
    case Layout::kGpt2Qkv: return regroup_qkv(transpose(hf[0], h, 3 * h), nq, nq, D, h, true);
    case Layout::kGpt2QkvBias: return regroup_qkv(hf[0], nq, nq, D, 1, true);
    case Layout::kLlamaQkv:
      return regroup_qkv(concat(hf), nq, ng, D, m.ours.ends_with(".bias") ? 1 : h, true);
    case Layout::kConcatRows: return concat(hf);
  }
  return {};
}

std::vector<std::vector<float>> export_tensor(const Mapping& m, const ModelConfig& c,
                                              const std::vector<float>& ours) {
  const int64_t h = c.hidden_size, D = c.kv_channels, nq = c.num_attention_heads, ng = c.query_groups();
  const auto shapes = hf_shapes(m, c, HfArchitecture::kGpt2);
  switch (m.layout) {
    case Layout::kCopy: return {ours};
    case Layout::kTranspose: return {transpose(ours, shapes[0][1], shapes[0][0])};
    case Layout::kPadRows: return {std::vector<float>(ours.begin(), ours.begin() + c.vocab_size * h)};
    case Layout::kGpt2Qkv: return {transpose(regroup_qkv(ours, nq, nq, D, h, false), 3 * h, h)};
    case Layout::kGpt2QkvBias: return {regroup_qkv(ours, nq, nq, D, 1, false)};
    case Layout::kLlamaQkv:
    case Layout::kConcatRows: {
      const auto flat = m.layout == Layout::kLlamaQkv
                            ? regroup_qkv(ours, nq, ng, D, m.ours.ends_with(".bias") ? 1 : h, false)
                            : ours;
      std::vector<std::vector<float>> parts;
      int64_t at = 0;
      for (const auto& s : shapes) {
        int64_t n = 1;
        for (int64_t d : s) n *= d;
        parts.emplace_back(flat.begin() + at, flat.begin() + at + n);
        at += n;
      }
      return parts;
    }
  }
  return {};
}

StatusOr<nlohmann::json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot open '", path, "' (a Hugging Face checkpoint directory needs config.json)");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("'", path, "' is not a JSON object");
  return j;
}

}  // namespace

StatusOr<HfModelInfo> read_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  MS_ASSIGN_OR_RETURN(nlohmann::json j, read_json(path));
  auto get_int = [&](const char* key, int64_t& out) -> Status {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      return invalid_argument(path, ": missing integer field '", key, "'");
    }
    out = j[key].get<int64_t>();
    return ok_status();
  };
  HfModelInfo info;
  ModelConfig& c = info.config;
  const std::string type = j.value("model_type", "");
  if (type == "gpt2") {
    info.architecture = HfArchitecture::kGpt2;
    MS_RETURN_IF_ERROR(get_int("n_embd", c.hidden_size));
    MS_RETURN_IF_ERROR(get_int("n_layer", c.num_layers));
    MS_RETURN_IF_ERROR(get_int("n_head", c.num_attention_heads));
    MS_RETURN_IF_ERROR(get_int("n_positions", c.max_position_embeddings));
    MS_RETURN_IF_ERROR(get_int("vocab_size", c.vocab_size));
    c.ffn_hidden_size = j.contains("n_inner") && j["n_inner"].is_number_integer() ? j["n_inner"].get<int64_t>()
                                                                                   : 4 * c.hidden_size;
    c.norm_epsilon = j.value("layer_norm_epsilon", 1e-5f);
    const std::string act = j.value("activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu") {
      return unimplemented(path, ": activation_function '", act, "' (supported: gelu_new, gelu)");
    }
    c.openai_gelu = act == "gelu_new";
    c.normalization = Normalization::kLayerNorm;
    c.position_embedding_type = PositionEmbeddingType::kLearnedAbsolute;
    c.untie_embeddings_and_output_weights = false;
    c.add_bias_linear = true;
  } else if (type == "llama") {
    info.architecture = HfArchitecture::kLlama;
    MS_RETURN_IF_ERROR(get_int("hidden_size", c.hidden_size));
    MS_RETURN_IF_ERROR(get_int("num_hidden_layers", c.num_layers));
    MS_RETURN_IF_ERROR(get_int("num_attention_heads", c.num_attention_heads));
    MS_RETURN_IF_ERROR(get_int("intermediate_size", c.ffn_hidden_size));
    MS_RETURN_IF_ERROR(get_int("max_position_embeddings", c.max_position_embeddings));
    MS_RETURN_IF_ERROR(get_int("vocab_size", c.vocab_size));
    int64_t kv = c.num_attention_heads;
    if (j.contains("num_key_value_heads")) MS_RETURN_IF_ERROR(get_int("num_key_value_heads", kv));
    c.group_query_attention = kv != c.num_attention_heads;
    c.num_query_groups = kv;
    c.norm_epsilon = j.value("rms_norm_eps", 1e-6f);
    c.rotary_base = j.value("rope_theta", 10000.0f);
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
      return unimplemented(path, ": rope_scaling is not supported yet");
    }
    const std::string act = j.value("hidden_act", "silu");
    if (act != "silu") return unimplemented(path, ": hidden_act '", act, "' (supported: silu)");
    c.swiglu = true;
    c.normalization = Normalization::kRMSNorm;
    c.position_embedding_type = PositionEmbeddingType::kRope;
    c.untie_embeddings_and_output_weights = !j.value("tie_word_embeddings", false);
    c.add_bias_linear = false;
    c.add_qkv_bias = j.value("attention_bias", false);
  } else {
    return unimplemented(path, ": model_type '", type, "' (supported: gpt2, llama)");
  }
  c.kv_channels = c.hidden_size / c.num_attention_heads;
  if (!c.group_query_attention) c.num_query_groups = c.num_attention_heads;
  return info;
}

Status check_hf_config_matches(const ModelConfig& f, const HfModelInfo& hf) {
  const ModelConfig& c = hf.config;
  std::string problems;
  auto check = [&](const char* flag, auto ours, auto theirs) {
    if (ours != theirs) problems += str_cat("\n  ", flag, " is ", ours, " but config.json says ", theirs);
  };
  check("--num-layers", f.num_layers, c.num_layers);
  check("--hidden-size", f.hidden_size, c.hidden_size);
  check("--num-attention-heads", f.num_attention_heads, c.num_attention_heads);
  check("--ffn-hidden-size", f.ffn_hidden_size, c.ffn_hidden_size);
  check("--kv-channels", f.kv_channels, c.kv_channels);
  check("--num-query-groups", f.query_groups(), c.query_groups());
  check("--max-position-embeddings", f.max_position_embeddings, c.max_position_embeddings);
  check("vocabulary size (tokenizer / --vocab-size)", f.vocab_size, c.vocab_size);
  check("--normalization", f.normalization == Normalization::kLayerNorm ? "LayerNorm" : "RMSNorm",
        c.normalization == Normalization::kLayerNorm ? "LayerNorm" : "RMSNorm");
  check("--swiglu", f.swiglu, c.swiglu);
  if (!c.swiglu) check("--openai-gelu", f.openai_gelu, c.openai_gelu);
  check("--position-embedding-type", static_cast<int>(f.position_embedding_type),
        static_cast<int>(c.position_embedding_type));
  check("--untie-embeddings-and-output-weights", f.untie_embeddings_and_output_weights,
        c.untie_embeddings_and_output_weights);
  check("bias in linear layers (--disable-bias-linear)", f.add_bias_linear, c.add_bias_linear);
  check("--norm-epsilon", f.norm_epsilon, c.norm_epsilon);
  if (c.position_embedding_type == PositionEmbeddingType::kRope) check("--rotary-base", f.rotary_base, c.rotary_base);
  if (!problems.empty()) {
    return invalid_argument("the model flags do not match the Hugging Face config.json:", problems);
  }
  return ok_status();
}

Status load_hf_checkpoint(const std::string& dir, GPTModel& model, const ParallelState& ps) {
  MS_ASSIGN_OR_RETURN(HfModelInfo info, read_hf_config(dir));
  const ModelConfig& c = model.config();
  MS_RETURN_IF_ERROR(check_hf_config_matches(c, info));
  MS_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(dir + "/model.safetensors"));
  // GPT-2 checkpoints are saved with or without the "transformer." prefix.
  std::string prefix;
  if (info.architecture == HfArchitecture::kGpt2 && file.find("transformer.wte.weight") != nullptr) {
    prefix = "transformer.";
  }
  for (const Mapping& m : mappings(c, info.architecture, prefix)) {
    Parameter* p = model.registry().find(m.ours);
    if (p == nullptr) return internal_error("no model parameter ", m.ours);
    const auto shapes = hf_shapes(m, c, info.architecture);
    std::vector<std::vector<float>> hf;
    for (size_t i = 0; i < m.hf.size(); ++i) {
      MS_ASSIGN_OR_RETURN(auto t, file.read_f32(m.hf[i], shapes[i]));
      hf.push_back(std::move(t));
    }
    const std::vector<float> full = import_tensor(m, c, std::move(hf));
    if (static_cast<int64_t>(full.size()) != p->spec.global_shape.numel()) {
      return internal_error(m.ours, ": imported ", full.size(), " values for ", p->spec.global_shape.to_string());
    }
    set_parameter_from_full(*p, full.data(), ps.tp_rank, ps.sizes.tensor);
  }
  return ok_status();
}

StatusOr<std::map<std::string, std::vector<float>>> export_hf_tensors(const ModelConfig& config,
                                                                      HfArchitecture arch,
                                                                      const FullTensors& tensors) {
  std::map<std::string, std::vector<float>> out;
  for (const Mapping& m : mappings(config, arch, arch == HfArchitecture::kGpt2 ? "transformer." : "")) {
    auto it = tensors.find(m.ours);
    if (it == tensors.end()) return not_found("no tensor ", m.ours, " to export");
    auto parts = export_tensor(m, config, it->second);
    for (size_t i = 0; i < m.hf.size(); ++i) out[m.hf[i]] = std::move(parts[i]);
  }
  return out;
}

}  // namespace mindspeed
