// Hugging Face GPT-2 / LLaMA checkpoint mapping (hf_checkpoint.h).
#include "models/gpt/hf_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "checkpointing/safetensors.h"
#include "core/json_util.h"

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
    if (c.moe.is_moe_layer(l)) {
      // Mixtral's block_sparse_moe: gate = the router, experts.N.{w1 gate, w3 up, w2 down}.
      const std::string b = h + "block_sparse_moe.";
      m.push_back({o + "mlp.router.weight", {b + "gate.weight"}, Layout::kCopy});
      for (int64_t e = 0; e < c.moe.num_experts; ++e) {
        const std::string x = o + "mlp.experts.local_experts." + std::to_string(e) + ".";
        const std::string hx = b + "experts." + std::to_string(e) + ".";
        m.push_back({x + "linear_fc1.weight", {hx + "w1.weight", hx + "w3.weight"}, Layout::kConcatRows});
        m.push_back({x + "linear_fc2.weight", {hx + "w2.weight"}, Layout::kCopy});
      }
      continue;
    }
    m.push_back({o + "mlp.linear_fc1.weight", {h + "mlp.gate_proj.weight", h + "mlp.up_proj.weight"}, Layout::kConcatRows});
    m.push_back({o + "mlp.linear_fc2.weight", {h + "mlp.down_proj.weight"}, Layout::kCopy});
  }
  m.push_back({"decoder.final_layernorm.weight", {"model.norm.weight"}, Layout::kCopy});
  if (c.untie_embeddings_and_output_weights) {
    m.push_back({"output_layer.weight", {"lm_head.weight"}, Layout::kPadRows});
  }
  return m;
}

// The FFN size of the MLP a mapping belongs to: a routed expert's or the dense one.
int64_t ffn_of(const Mapping& m, const ModelConfig& c) {
  return m.ours.find(".mlp.experts.") != std::string::npos ? c.expert_ffn_hidden_size() : c.ffn_hidden_size;
}

// Expected Hugging Face shapes of the tensors of a mapping.
std::vector<std::vector<int64_t>> hf_shapes(const Mapping& m, const ModelConfig& c, HfArchitecture arch) {
  const int64_t h = c.hidden_size, D = c.kv_channels, nq = c.num_attention_heads, ng = c.query_groups();
  const int64_t F = ffn_of(m, c);
  const bool bias = m.ours.ends_with(".bias");
  switch (m.layout) {
    case Layout::kPadRows: return {{c.vocab_size, h}};
    case Layout::kGpt2Qkv: return {{h, 3 * h}};
    case Layout::kGpt2QkvBias: return {{3 * h}};
    case Layout::kLlamaQkv:
      if (bias) return {{nq * D}, {ng * D}, {ng * D}};
      return {{nq * D, h}, {ng * D, h}, {ng * D, h}};
    case Layout::kConcatRows: return {{F, h}, {F, h}};
    case Layout::kTranspose:
      if (m.ours.ends_with("linear_proj.weight")) return {{h, h}};
      if (m.ours.ends_with("linear_fc1.weight")) return {{h, c.ffn_hidden_size}};
      return {{c.ffn_hidden_size, h}};
    case Layout::kCopy:
      if (m.ours == "embedding.position_embeddings.weight") return {{c.max_position_embeddings, h}};
      if (m.ours.ends_with("linear_proj.weight")) return {{h, nq * D}};
      if (m.ours.ends_with("linear_fc2.weight")) return {{h, F}};
      if (m.ours.ends_with("linear_fc1.bias")) return {{c.ffn_hidden_size}};
      if (m.ours.ends_with("mlp.router.weight")) return {{c.moe.num_experts, h}};
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

// Megatron's linear_qkv rows are per query group [q (G*D rows), k (D), v (D)]; Hugging Face
// stacks them per kind [Q (nq*D rows); K (ng*D); V (ng*D)]. The row of the per-kind layout
// holding Megatron row `mrow`.
int64_t qkv_block_row(int64_t mrow, int64_t nq, int64_t ng, int64_t D) {
  const int64_t G = nq / ng, g = mrow / ((G + 2) * D), r = mrow % ((G + 2) * D);
  if (r < G * D) return g * G * D + r;
  if (r < (G + 1) * D) return nq * D + g * D + (r - G * D);
  return nq * D + ng * D + g * D + (r - (G + 1) * D);
}

// Megatron's per-group rows (of `width` columns) from the per-kind blocks (export).
std::vector<float> qkv_to_blocks(const std::vector<float>& src, int64_t nq, int64_t ng, int64_t D, int64_t width) {
  std::vector<float> out(src.size());
  const int64_t rows = (nq + 2 * ng) * D;
  for (int64_t mrow = 0; mrow < rows; ++mrow) {
    std::copy(src.begin() + mrow * width, src.begin() + (mrow + 1) * width,
              out.begin() + qkv_block_row(mrow, nq, ng, D) * width);
  }
  return out;
}

// Where row `row` of one of our tensors comes from in the mapping's Hugging Face tensors:
// tensor `tensor`, its row `index` (its column for a transposed layout); tensor -1 is a
// vocabulary padding row (zeros).
struct HfRow {
  int tensor = -1;
  int64_t index = 0;
};

bool is_transposed(Layout layout) { return layout == Layout::kTranspose || layout == Layout::kGpt2Qkv; }

HfRow hf_row_of(const Mapping& m, const ModelConfig& c, int64_t row) {
  const int64_t D = c.kv_channels, nq = c.num_attention_heads, ng = c.query_groups();
  switch (m.layout) {
    case Layout::kCopy:
    case Layout::kTranspose: return {0, row};
    case Layout::kPadRows: return row < c.vocab_size ? HfRow{0, row} : HfRow{};
    case Layout::kConcatRows: {
      const int64_t F = ffn_of(m, c);
      return row < F ? HfRow{0, row} : HfRow{1, row - F};
    }
    case Layout::kGpt2Qkv:
    case Layout::kGpt2QkvBias: return {0, qkv_block_row(row, nq, nq, D)};
    case Layout::kLlamaQkv: {
      const int64_t b = qkv_block_row(row, nq, ng, D);
      if (b < nq * D) return {0, b};
      if (b < (nq + ng) * D) return {1, b - nq * D};
      return {2, b - (nq + ng) * D};
    }
  }
  return {};
}

// The number of elements of our tensor built by the mapping (padding rows included).
int64_t our_numel(const Mapping& m, const ModelConfig& c, const std::vector<std::vector<int64_t>>& shapes) {
  if (m.layout == Layout::kPadRows) return c.padded_vocab_size * c.hidden_size;
  int64_t total = 0;
  for (const auto& s : shapes) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    total += n;
  }
  return total;
}

std::vector<std::vector<float>> export_tensor(const Mapping& m, const ModelConfig& c,
                                              const std::vector<float>& ours) {
  const int64_t h = c.hidden_size, D = c.kv_channels, nq = c.num_attention_heads, ng = c.query_groups();
  const auto shapes = hf_shapes(m, c, HfArchitecture::kGpt2);
  switch (m.layout) {
    case Layout::kCopy: return {ours};
    case Layout::kTranspose: return {transpose(ours, shapes[0][1], shapes[0][0])};
    case Layout::kPadRows: return {std::vector<float>(ours.begin(), ours.begin() + c.vocab_size * h)};
    case Layout::kGpt2Qkv: return {transpose(qkv_to_blocks(ours, nq, nq, D, h), 3 * h, h)};
    case Layout::kGpt2QkvBias: return {qkv_to_blocks(ours, nq, nq, D, 1)};
    case Layout::kLlamaQkv:
    case Layout::kConcatRows: {
      const auto flat = m.layout == Layout::kLlamaQkv
                            ? qkv_to_blocks(ours, nq, ng, D, m.ours.ends_with(".bias") ? 1 : h)
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

// config.json's text, or an error naming the file.
StatusOr<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open '", path, "' (a Hugging Face checkpoint directory needs config.json)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return data_loss("cannot read '", path, "'");
  return text.str();
}

// config.json as a JSON object, or an error naming the file (and the line and column of a
// syntax error).
StatusOr<nlohmann::json> parse_json_object(std::string_view text, const std::string& path) {
  std::string error;
  std::optional<nlohmann::json> j = try_parse_json(text, &error);
  if (!j) return invalid_argument("'", path, "' is not valid JSON: ", error);
  if (!j->is_object()) {
    return invalid_argument("'", path, "' is a JSON ", j->type_name(), ", expected a JSON object of config fields");
  }
  return std::move(*j);
}

// Typed access to the fields of config.json. Every error names the file, the field, the
// value found and what was expected. Optional fields that are absent or null (Python None)
// leave the output untouched, i.e. keep the Hugging Face default.
class ConfigFields {
 public:
  ConfigFields(const nlohmann::json& j, const std::string& path) : j_(j), path_(path) {}

  /// Present and not null.
  bool has(const char* key) const {
    const auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  /// A required integer in [1, 2^31 - 1] (sizes and counts).
  Status positive_int(const char* key, int64_t* out) const {
    if (!has(key)) return invalid_argument(path_, ": missing field '", key, "' (expected a positive integer)");
    return optional_positive_int(key, out);
  }
  Status optional_positive_int(const char* key, int64_t* out) const {
    if (!has(key)) return ok_status();
    const nlohmann::json& v = *j_.find(key);
    // Non-negative integers are stored unsigned (also those above INT64_MAX, which
    // get<int64_t>() would wrap), negative ones signed; 1.0 or "64" are not integers.
    const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= kMaxSize
                                             : v.is_number_integer() && v.get<int64_t>() >= 1;
    if (!fits) return wrong(key, v, "a positive integer (at most 2147483647)");
    *out = v.get<int64_t>();
    return ok_status();
  }
  /// A number > 0 that stays finite and > 0 as a float (epsilons, the rotary base): 1e-95
  /// would become an epsilon of 0.
  Status optional_positive_number(const char* key, float* out) const {
    if (!has(key)) return ok_status();
    const nlohmann::json& v = *j_.find(key);
    const float value = v.is_number() ? static_cast<float>(v.get<double>()) : 0.0f;
    if (!(value > 0.0f) || !std::isfinite(value)) {
      return wrong(key, v, "a positive number (nonzero and finite as a float32)");
    }
    *out = value;
    return ok_status();
  }
  Status optional_bool(const char* key, bool* out) const {
    if (!has(key)) return ok_status();
    const nlohmann::json& v = *j_.find(key);
    if (!v.is_boolean()) return wrong(key, v, "true or false");
    *out = v.get<bool>();
    return ok_status();
  }
  Status optional_string(const char* key, std::string* out) const {
    if (!has(key)) return ok_status();
    const nlohmann::json& v = *j_.find(key);
    if (!v.is_string()) return wrong(key, v, "a string");
    *out = v.get<std::string>();
    return ok_status();
  }

 private:
  static constexpr int64_t kMaxSize = 2147483647;

  Status wrong(const char* key, const nlohmann::json& v, const char* expected) const {
    return invalid_argument(path_, ": field '", key, "' is ", describe_json_value(v), "; expected ", expected);
  }

  const nlohmann::json& j_;
  const std::string& path_;
};

// `a` must be a multiple of `b` (two fields of config.json).
Status check_divisible(const std::string& path, const char* a_key, int64_t a, const char* b_key, int64_t b) {
  if (a % b == 0) return ok_status();
  return invalid_argument(path, ": field '", a_key, "' (", a, ") is not divisible by field '", b_key, "' (", b, ")");
}

}  // namespace

StatusOr<HfModelInfo> read_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  MS_ASSIGN_OR_RETURN(const std::string text, read_text(path));
  return parse_hf_config(text, path);
}

StatusOr<HfModelInfo> parse_hf_config(std::string_view json_text, const std::string& path) {
  MS_ASSIGN_OR_RETURN(nlohmann::json j, parse_json_object(json_text, path));
  const ConfigFields f(j, path);
  HfModelInfo info;
  ModelConfig& c = info.config;
  std::string type;
  if (!f.has("model_type")) {
    return invalid_argument(path, ": missing field 'model_type' (expected \"gpt2\" or \"llama\")");
  }
  MS_RETURN_IF_ERROR(f.optional_string("model_type", &type));
  if (type == "gpt2") {
    info.architecture = HfArchitecture::kGpt2;
    MS_RETURN_IF_ERROR(f.positive_int("n_embd", &c.hidden_size));
    MS_RETURN_IF_ERROR(f.positive_int("n_layer", &c.num_layers));
    MS_RETURN_IF_ERROR(f.positive_int("n_head", &c.num_attention_heads));
    MS_RETURN_IF_ERROR(f.positive_int("n_positions", &c.max_position_embeddings));
    MS_RETURN_IF_ERROR(f.positive_int("vocab_size", &c.vocab_size));
    MS_RETURN_IF_ERROR(check_divisible(path, "n_embd", c.hidden_size, "n_head", c.num_attention_heads));
    c.ffn_hidden_size = 4 * c.hidden_size;  // n_inner null or absent: 4 * n_embd
    MS_RETURN_IF_ERROR(f.optional_positive_int("n_inner", &c.ffn_hidden_size));
    c.norm_epsilon = 1e-5f;
    MS_RETURN_IF_ERROR(f.optional_positive_number("layer_norm_epsilon", &c.norm_epsilon));
    std::string act = "gelu_new";
    MS_RETURN_IF_ERROR(f.optional_string("activation_function", &act));
    if (act != "gelu_new" && act != "gelu") {
      return unimplemented(path, ": activation_function '", act, "' (supported: gelu_new, gelu)");
    }
    bool tie = true;
    MS_RETURN_IF_ERROR(f.optional_bool("tie_word_embeddings", &tie));
    if (!tie) {
      return unimplemented(path, ": tie_word_embeddings false is not supported for gpt2 (the output layer "
                           "is the word embedding)");
    }
    c.openai_gelu = act == "gelu_new";
    c.normalization = Normalization::kLayerNorm;
    c.position_embedding_type = PositionEmbeddingType::kLearnedAbsolute;
    c.untie_embeddings_and_output_weights = false;
    c.add_bias_linear = true;
  } else if (type == "llama" || type == "qwen2" || type == "mistral" || type == "mixtral") {
    // Qwen2 and Mistral are LLaMA with a QKV bias (Qwen2) or a sliding window (Mistral);
    // Mixtral is Mistral with every MLP a mixture of experts.
    info.architecture = type == "qwen2"     ? HfArchitecture::kQwen2
                        : type == "mistral" ? HfArchitecture::kMistral
                        : type == "mixtral" ? HfArchitecture::kMixtral
                                            : HfArchitecture::kLlama;
    if (info.architecture == HfArchitecture::kMixtral) {
      MS_RETURN_IF_ERROR(f.positive_int("num_local_experts", &c.moe.num_experts));
      MS_RETURN_IF_ERROR(f.positive_int("num_experts_per_tok", &c.moe.router_topk));
      double jitter = 0.0;
      if (f.has("router_jitter_noise") && j.at("router_jitter_noise").is_number()) {
        jitter = j.at("router_jitter_noise").get<double>();
      }
      if (jitter != 0.0) {
        return unimplemented(path, ": router_jitter_noise ", jitter, " (Hugging Face's multiplicative jitter of the "
                             "router input); train with --moe-input-jitter-eps instead");
      }
    }
    MS_RETURN_IF_ERROR(f.positive_int("hidden_size", &c.hidden_size));
    MS_RETURN_IF_ERROR(f.positive_int("num_hidden_layers", &c.num_layers));
    MS_RETURN_IF_ERROR(f.positive_int("num_attention_heads", &c.num_attention_heads));
    MS_RETURN_IF_ERROR(f.positive_int("intermediate_size", &c.ffn_hidden_size));
    if (type == "mixtral") c.moe.ffn_hidden_size = c.ffn_hidden_size;
    MS_RETURN_IF_ERROR(f.positive_int("max_position_embeddings", &c.max_position_embeddings));
    MS_RETURN_IF_ERROR(f.positive_int("vocab_size", &c.vocab_size));
    MS_RETURN_IF_ERROR(
        check_divisible(path, "hidden_size", c.hidden_size, "num_attention_heads", c.num_attention_heads));
    int64_t head_dim = c.hidden_size / c.num_attention_heads;
    MS_RETURN_IF_ERROR(f.optional_positive_int("head_dim", &head_dim));
    if (head_dim % 2 != 0) return invalid_argument(path, ": head_dim ", head_dim, " must be even (rotary halves)");
    c.kv_channels = head_dim;  // may differ from hidden_size / num_attention_heads (Megatron --kv-channels)
    int64_t kv = c.num_attention_heads;  // num_key_value_heads null or absent: no grouping
    MS_RETURN_IF_ERROR(f.optional_positive_int("num_key_value_heads", &kv));
    MS_RETURN_IF_ERROR(check_divisible(path, "num_attention_heads", c.num_attention_heads, "num_key_value_heads", kv));
    c.group_query_attention = kv != c.num_attention_heads;
    c.num_query_groups = kv;
    c.norm_epsilon = 1e-6f;
    MS_RETURN_IF_ERROR(f.optional_positive_number("rms_norm_eps", &c.norm_epsilon));
    c.rotary_base = 10000.0f;
    MS_RETURN_IF_ERROR(f.optional_positive_number("rope_theta", &c.rotary_base));
    if (f.has("rope_scaling") && !j.at("rope_scaling").is_null()) {
      const nlohmann::json& rs = j.at("rope_scaling");
      if (!rs.is_object()) return invalid_argument(path, ": rope_scaling must be an object or null");
      const std::string kind = rs.value("rope_type", rs.value("type", std::string()));
      auto number = [&](const char* key, double fallback) -> StatusOr<double> {
        if (!rs.contains(key)) return fallback;
        if (!rs.at(key).is_number() || rs.at(key).get<double>() <= 0) {
          return invalid_argument(path, ": rope_scaling.", key, " must be a positive number");
        }
        return rs.at(key).get<double>();
      };
      MS_ASSIGN_OR_RETURN(const double factor, number("factor", 0));
      if (factor <= 0) return invalid_argument(path, ": rope_scaling needs a positive 'factor'");
      if (kind == "llama3") {
        c.rope_scaling = RopeScaling::kLlama3;
        c.rope_scaling_factor = static_cast<float>(factor);
        MS_ASSIGN_OR_RETURN(const double low, number("low_freq_factor", 1.0));
        MS_ASSIGN_OR_RETURN(const double high, number("high_freq_factor", 4.0));
        MS_ASSIGN_OR_RETURN(const double original, number("original_max_position_embeddings", 8192));
        c.rope_low_freq_factor = static_cast<float>(low);
        c.rope_high_freq_factor = static_cast<float>(high);
        c.rope_original_max_position_embeddings = static_cast<int64_t>(original);
      } else if (kind == "linear") {
        c.rotary_seq_len_interpolation_factor = static_cast<float>(factor);
      } else {
        return unimplemented(path, ": rope_scaling type '", kind, "' (supported: llama3, linear)");
      }
    }
    if ((info.architecture == HfArchitecture::kMistral || info.architecture == HfArchitecture::kMixtral) &&
        f.has("sliding_window") && !j.at("sliding_window").is_null()) {
      int64_t window = 0;
      MS_RETURN_IF_ERROR(f.optional_positive_int("sliding_window", &window));
      if (window < c.max_position_embeddings) {
        return unimplemented(path, ": sliding_window ", window, " (< max_position_embeddings ",
                             c.max_position_embeddings, "): importing Hugging Face sliding-window attention is not "
                             "implemented yet (its window convention differs between attention implementations); "
                             "train with --window-size instead");
      }
    }
    if (info.architecture == HfArchitecture::kQwen2) {
      bool sliding = false;
      MS_RETURN_IF_ERROR(f.optional_bool("use_sliding_window", &sliding));
      if (sliding) {
        return unimplemented(path, ": use_sliding_window true: importing Hugging Face sliding-window attention is "
                             "not implemented yet; train with --window-size instead");
      }
    }
    std::string act = "silu";
    MS_RETURN_IF_ERROR(f.optional_string("hidden_act", &act));
    if (act != "silu") return unimplemented(path, ": hidden_act '", act, "' (supported: silu)");
    bool tie = false;
    MS_RETURN_IF_ERROR(f.optional_bool("tie_word_embeddings", &tie));
    bool attention_bias = info.architecture == HfArchitecture::kQwen2;  // Qwen2: q/k/v biases
    MS_RETURN_IF_ERROR(f.optional_bool("attention_bias", &attention_bias));
    c.swiglu = true;
    c.normalization = Normalization::kRMSNorm;
    c.position_embedding_type = PositionEmbeddingType::kRope;
    c.untie_embeddings_and_output_weights = !tie;
    c.add_bias_linear = false;
    c.add_qkv_bias = attention_bias;
  } else {
    return unimplemented(path, ": model_type '", type, "' (supported: gpt2, llama, qwen2, mistral, mixtral)");
  }
  if (c.kv_channels == 0) c.kv_channels = c.hidden_size / c.num_attention_heads;
  if (!c.group_query_attention) c.num_query_groups = c.num_attention_heads;
  return info;
}

Status check_hf_model_type(const std::string& dir, const std::string& model_type_hf) {
  MS_ASSIGN_OR_RETURN(const HfModelInfo info, read_hf_config(dir));
  const HfArchitecture want = model_type_hf == "gpt2" ? HfArchitecture::kGpt2
                              : model_type_hf == "qwen25" || model_type_hf == "qwen2"
                                  ? HfArchitecture::kQwen2
                              : model_type_hf == "mistral" ? HfArchitecture::kMistral
                              : model_type_hf == "mixtral" ? HfArchitecture::kMixtral
                                                           : HfArchitecture::kLlama;
  if (want == info.architecture) return ok_status();
  static const char* const kModelType[] = {"gpt2", "llama", "qwen2", "mistral", "mixtral"};
  return invalid_argument("--model-type-hf ", model_type_hf, " does not match ", dir,
                          "/config.json, whose model_type is ",
                          kModelType[static_cast<int>(info.architecture)]);
}

Status check_hf_config_matches(const ModelConfig& flags, const HfModelInfo& hf) {
  const std::string problems = architecture_differences(flags, hf.config, "config.json says");
  if (!problems.empty()) {
    return invalid_argument("the model flags do not match the Hugging Face config.json:", problems);
  }
  return ok_status();
}

namespace {

// The tensors of a Hugging Face directory: model.safetensors, or the shards that
// model.safetensors.index.json maps every tensor name to (each mapped on first use).
class HfTensorSource {
 public:
  static StatusOr<HfTensorSource> open(const std::string& dir) {
    HfTensorSource src;
    src.dir_ = dir;
    std::error_code ec;
    const std::string index = dir + "/model.safetensors.index.json";
    if (!std::filesystem::is_regular_file(index, ec)) {
      if (!std::filesystem::is_regular_file(dir + "/model.safetensors", ec)) {
        return not_found("'", dir, "' holds neither model.safetensors nor model.safetensors.index.json");
      }
      src.single_ = true;
      return src;
    }
    MS_ASSIGN_OR_RETURN(const std::string text, read_text(index));
    MS_ASSIGN_OR_RETURN(nlohmann::json j, parse_json_object(text, index));
    if (!j.contains("weight_map") || !j.at("weight_map").is_object()) {
      return invalid_argument(index, ": no 'weight_map' object (tensor name -> shard file)");
    }
    for (const auto& [name, file] : j.at("weight_map").items()) {
      if (!file.is_string()) return invalid_argument(index, ": weight_map['", name, "'] is not a file name");
      const std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
        return invalid_argument(index, ": weight_map['", name, "'] = '", f,
                                "' is not a file name in the same directory");
      }
      src.weight_map_[name] = f;
    }
    return src;
  }

  bool has(const std::string& name) {
    if (!single_) return weight_map_.count(name) > 0;
    auto f = file("model.safetensors");
    return f.ok() && (*f)->find(name) != nullptr;
  }

  Status check_shape(const std::string& name, const std::vector<int64_t>& shape) {
    MS_ASSIGN_OR_RETURN(SafetensorsFile * f, file_of(name));
    return f->check_shape(name, shape);
  }

  /// Elements first + stride * [0, count) of the tensor, from its memory-mapped shard.
  Status read(const std::string& name, int64_t first, int64_t count, int64_t stride, float* out) {
    MS_ASSIGN_OR_RETURN(SafetensorsFile * f, file_of(name));
    return f->read_f32_elements(name, first, count, stride, out);
  }

 private:
  StatusOr<SafetensorsFile*> file_of(const std::string& tensor) {
    if (single_) return file("model.safetensors");
    auto it = weight_map_.find(tensor);
    if (it == weight_map_.end()) {
      return not_found(dir_, "/model.safetensors.index.json: no shard holds tensor '", tensor, "'");
    }
    return file(it->second);
  }

  StatusOr<SafetensorsFile*> file(const std::string& name) {
    auto it = files_.find(name);
    if (it != files_.end()) return &it->second;
    MS_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(dir_ + "/" + name));
    return &files_.emplace(name, std::move(f)).first->second;
  }

  std::string dir_;
  bool single_ = false;
  std::map<std::string, std::string> weight_map_;
  std::map<std::string, SafetensorsFile> files_;
};

// A routed expert's mapping whose expert lives on another expert-parallel rank: rank r of
// the ep group holds experts [r * E/ep, (r + 1) * E/ep) (MoELayer's placement).
bool held_by_another_expert_rank(const Mapping& m, const ModelConfig& c, const ParallelState& ps) {
  static constexpr std::string_view kExperts = ".mlp.experts.local_experts.";
  const size_t at = m.ours.find(kExperts);
  if (at == std::string::npos || ps.sizes.expert <= 1) return false;
  const int64_t expert = std::stoll(m.ours.substr(at + kExperts.size()));
  const int64_t per_rank = c.moe.num_experts / ps.sizes.expert;
  return expert / per_rank != ps.ep_rank;
}

}  // namespace

Status load_hf_checkpoint(const std::string& dir, GPTModel& model, const ParallelState& ps, const Backend* backend) {
  MS_ASSIGN_OR_RETURN(HfModelInfo info, read_hf_config(dir));
  const ModelConfig& c = model.config();
  MS_RETURN_IF_ERROR(check_hf_config_matches(c, info));
  MS_ASSIGN_OR_RETURN(HfTensorSource file, HfTensorSource::open(dir));
  // GPT-2 checkpoints are saved with or without the "transformer." prefix.
  std::string prefix;
  if (info.architecture == HfArchitecture::kGpt2 && file.has("transformer.wte.weight")) {
    prefix = "transformer.";
  }
  for (const Mapping& m : mappings(c, info.architecture, prefix)) {
    // The parameter itself and any tied copy of it on this rank (a last pipeline stage's
    // output_layer.weight); with pipeline parallelism a stage holds only its own layers.
    std::vector<Parameter*> targets;
    if (Parameter* p = model.registry().find(m.ours)) targets.push_back(p);
    for (const auto& q : model.registry().params())
      if (q->spec.tied_to == m.ours) targets.push_back(q.get());
    if (targets.empty()) {
      // Not on this rank: a layer of another pipeline stage, or a routed expert that another
      // expert-parallel rank holds (experts are named by their global index).
      if (ps.sizes.pipeline == 1 && !held_by_another_expert_rank(m, c, ps)) {
        return internal_error("no model parameter ", m.ours);
      }
      continue;
    }
    const auto shapes = hf_shapes(m, c, info.architecture);
    for (size_t i = 0; i < m.hf.size(); ++i) MS_RETURN_IF_ERROR(file.check_shape(m.hf[i], shapes[i]));
    // Each rank reads only the rows (or, transposed, columns) of its own shard, straight
    // from the memory-mapped file.
    for (Parameter* target : targets) {
      if (our_numel(m, c, shapes) != target->spec.global_shape.numel()) {
        return internal_error(m.ours, ": the mapping builds ", our_numel(m, c, shapes), " values for ",
                              target->spec.global_shape.to_string());
      }
      std::vector<float> shard(static_cast<size_t>(target->local_shape.numel()));
      const ShardCoords at = shard_coords(target->spec, ps);
      for (const ShardRun& run : shard_runs(target->spec, at.rank, at.count)) {
        const HfRow source = hf_row_of(m, c, run.row);
        float* out = shard.data() + run.local_offset;
        const int64_t count = run.col_end - run.col_begin;
        if (source.tensor < 0) {
          std::fill(out, out + count, 0.0f);  // vocabulary padding
          continue;
        }
        const std::string& name = m.hf[static_cast<size_t>(source.tensor)];
        const std::vector<int64_t>& shape = shapes[static_cast<size_t>(source.tensor)];
        if (is_transposed(m.layout)) {  // our row = their column: [in, out] -> [out, in]
          MS_RETURN_IF_ERROR(file.read(name, run.col_begin * shape[1] + source.index, count, shape[1], out));
        } else {
          const int64_t width = shape.size() > 1 ? shape[1] : 1;
          MS_RETURN_IF_ERROR(file.read(name, source.index * width + run.col_begin, count, 1, out));
        }
      }
      set_parameter_from_shard(*target, shard.data(), backend);
    }
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
    int64_t hf_numel = 0;
    for (const auto& shape : hf_shapes(m, config, arch)) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      hf_numel += n;
    }
    // Word embeddings and the output layer carry the padding rows of the vocabulary.
    const bool padded = m.layout == Layout::kPadRows;
    const auto have = static_cast<int64_t>(it->second.size());
    if (padded ? have < hf_numel : have != hf_numel) {
      return invalid_argument("tensor ", m.ours, " has ", have, " values but the model config needs ",
                              padded ? "at least " : "", hf_numel, " (does the config match the tensors?)");
    }
    auto parts = export_tensor(m, config, it->second);
    for (size_t i = 0; i < m.hf.size(); ++i) out[m.hf[i]] = std::move(parts[i]);
  }
  return out;
}

std::string hf_config_json(const ModelConfig& c, HfArchitecture arch) {
  nlohmann::ordered_json j;
  if (arch == HfArchitecture::kGpt2) {
    j = {{"architectures", {"GPT2LMHeadModel"}},
         {"model_type", "gpt2"},
         {"n_embd", c.hidden_size},
         {"n_layer", c.num_layers},
         {"n_head", c.num_attention_heads},
         {"n_positions", c.max_position_embeddings},
         {"n_ctx", c.max_position_embeddings},
         {"n_inner", c.ffn_hidden_size},
         {"vocab_size", c.vocab_size},
         {"layer_norm_epsilon", c.norm_epsilon},
         {"activation_function", c.openai_gelu ? "gelu_new" : "gelu"},
         {"tie_word_embeddings", true},
         {"torch_dtype", "float32"}};
  } else {
    const bool qwen2 = arch == HfArchitecture::kQwen2, mistral = arch == HfArchitecture::kMistral;
    const bool mixtral = arch == HfArchitecture::kMixtral;
    j = {{"architectures", {qwen2     ? "Qwen2ForCausalLM"
                            : mistral ? "MistralForCausalLM"
                            : mixtral ? "MixtralForCausalLM"
                                      : "LlamaForCausalLM"}},
         {"model_type", qwen2 ? "qwen2" : mistral ? "mistral" : mixtral ? "mixtral" : "llama"},
         {"hidden_size", c.hidden_size},
         {"num_hidden_layers", c.num_layers},
         {"num_attention_heads", c.num_attention_heads},
         {"num_key_value_heads", c.query_groups()},
         {"intermediate_size", c.ffn_hidden_size},
         {"max_position_embeddings", c.max_position_embeddings},
         {"vocab_size", c.vocab_size},
         {"rms_norm_eps", c.norm_epsilon},
         {"rope_theta", c.rotary_base},
         {"hidden_act", "silu"},
         {"tie_word_embeddings", !c.untie_embeddings_and_output_weights},
         {"attention_bias", c.add_qkv_bias},
         {"head_dim", c.kv_channels},
         {"torch_dtype", "float32"}};
    if (mixtral) {
      j["intermediate_size"] = c.expert_ffn_hidden_size();
      j["num_local_experts"] = c.moe.num_experts;
      j["num_experts_per_tok"] = c.moe.router_topk;
      j["router_aux_loss_coef"] = c.moe.aux_loss_coeff;
      j["output_router_logits"] = false;
    }
    if (c.rope_scaling == RopeScaling::kLlama3) {
      j["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", c.rope_scaling_factor},
                           {"low_freq_factor", c.rope_low_freq_factor},
                           {"high_freq_factor", c.rope_high_freq_factor},
                           {"original_max_position_embeddings", c.rope_original_max_position_embeddings}};
    } else if (c.rotary_seq_len_interpolation_factor != 1.0f) {
      j["rope_scaling"] = {{"type", "linear"}, {"factor", c.rotary_seq_len_interpolation_factor}};
    }
  }
  return j.dump(2) + "\n";
}

Status write_hf_checkpoint(const std::string& dir, const ModelConfig& config, HfArchitecture arch,
                           const FullTensors& tensors) {
  MS_ASSIGN_OR_RETURN(auto hf, export_hf_tensors(config, arch, tensors));
  std::vector<SafetensorsTensorToWrite> out;
  for (auto& [name, values] : hf) {
    // Shapes as Hugging Face lays them out.
    std::vector<int64_t> shape;
    for (const Mapping& m : mappings(config, arch, arch == HfArchitecture::kGpt2 ? "transformer." : "")) {
      for (size_t i = 0; i < m.hf.size(); ++i) {
        if (m.hf[i] == name) shape = hf_shapes(m, config, arch)[i];
      }
    }
    MS_CHECK(!shape.empty(), "no Hugging Face shape for ", name);
    out.push_back({name, shape, std::move(values), {}});
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return failed_precondition("cannot create '", dir, "': ", ec.message());
  MS_RETURN_IF_ERROR(write_safetensors(dir + "/model.safetensors", out, {{"format", "pt"}}));
  return write_file_atomically(dir + "/config.json", hf_config_json(config, arch));
}

}  // namespace mindspeed
