// MegatronTorchCheckpoint (megatron_torch_checkpoint.h).
#include "training/megatron_torch_checkpoint.h"

#include <cstdio>
#include <filesystem>

#include "training/checkpointing.h"

namespace mindspeed {
namespace {

// A field of Megatron's saved argparse.Namespace.
struct MegatronArgs {
  const PickleValue* ns;
  const std::string path;
  const PickleValue* field(const char* name) const { return ns->get(name); }
  StatusOr<int64_t> integer(const char* name) const {
    const PickleValue* v = field(name);
    if (v == nullptr || v->kind != PickleValue::Kind::kInt) {
      return invalid_argument(path, ": args.", name, " is missing or not an integer");
    }
    return v->i;
  }
  int64_t integer_or(const char* name, int64_t fallback) const {
    const PickleValue* v = field(name);
    return v != nullptr && v->kind == PickleValue::Kind::kInt ? v->i : fallback;
  }
  bool flag(const char* name, bool fallback = false) const {
    const PickleValue* v = field(name);
    return v != nullptr && v->kind == PickleValue::Kind::kBool ? v->b : fallback;
  }
  double number(const char* name, double fallback) const {
    const PickleValue* v = field(name);
    if (v != nullptr && v->kind == PickleValue::Kind::kFloat) return v->f;
    if (v != nullptr && v->kind == PickleValue::Kind::kInt) return static_cast<double>(v->i);
    return fallback;
  }
  std::string text(const char* name, const std::string& fallback) const {
    const PickleValue* v = field(name);
    return v != nullptr && v->kind == PickleValue::Kind::kString ? v->s : fallback;
  }
};

}  // namespace

bool MegatronTorchCheckpoint::looks_like(const std::string& dir) {
  auto iteration_dir = tracked_iteration_dir(dir);
  if (!iteration_dir.ok()) return false;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(*iteration_dir, ec)) {
    if (entry.path().filename().string().starts_with("mp_rank_")) return true;
  }
  return false;
}

StatusOr<MegatronTorchCheckpoint> MegatronTorchCheckpoint::open(const std::string& dir) {
  MegatronTorchCheckpoint ckpt;
  MS_ASSIGN_OR_RETURN(std::string iteration_dir, tracked_iteration_dir(dir));
  ckpt.release_ = iteration_dir.ends_with("/release");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(iteration_dir, ec)) {
    const std::string name = entry.path().filename().string();
    int t = -1, p = 0;
    if (std::sscanf(name.c_str(), "mp_rank_%2d_%3d", &t, &p) < 1 || t < 0) continue;
    MS_ASSIGN_OR_RETURN(TorchCheckpointFile f, TorchCheckpointFile::open(entry.path().string() + "/model_optim_rng.pt"));
    ckpt.files_.emplace(std::make_pair(t, p), std::move(f));
  }
  if (ec || ckpt.files_.empty()) return not_found("'", iteration_dir, "' holds no mp_rank_XX[_YYY]/model_optim_rng.pt");
  const TorchCheckpointFile& first = ckpt.files_.begin()->second;
  const PickleValue* args_value = first.root().get("args");
  if (args_value == nullptr || args_value->kind != PickleValue::Kind::kObject) {
    return invalid_argument(first.path(), ": no 'args' namespace (not a Megatron checkpoint?)");
  }
  const MegatronArgs a{args_value, first.path()};
  ckpt.tp_ = a.integer_or("tensor_model_parallel_size", 1);
  ckpt.pp_ = a.integer_or("pipeline_model_parallel_size", 1);
  if (a.field("virtual_pipeline_model_parallel_size") != nullptr &&
      a.field("virtual_pipeline_model_parallel_size")->kind == PickleValue::Kind::kInt) {
    return unimplemented(first.path(), ": virtual-pipeline checkpoints (model0, model1, ...) are not read yet");
  }
  if (static_cast<int64_t>(ckpt.files_.size()) != ckpt.tp_ * ckpt.pp_) {
    return invalid_argument(iteration_dir, ": ", ckpt.files_.size(), " rank files for tensor-parallel ", ckpt.tp_,
                            " x pipeline-parallel ", ckpt.pp_, " (incomplete checkpoint?)");
  }
  const PickleValue* it = first.root().get("iteration");
  ckpt.iteration_ = it != nullptr && it->kind == PickleValue::Kind::kInt ? it->i : 0;
  ckpt.consumed_train_ = a.integer_or("consumed_train_samples", 0);
  ckpt.consumed_valid_ = a.integer_or("consumed_valid_samples", 0);
  ModelConfig& m = ckpt.config_;
  MS_ASSIGN_OR_RETURN(m.num_layers, a.integer("num_layers"));
  MS_ASSIGN_OR_RETURN(m.hidden_size, a.integer("hidden_size"));
  MS_ASSIGN_OR_RETURN(m.ffn_hidden_size, a.integer("ffn_hidden_size"));
  MS_ASSIGN_OR_RETURN(m.num_attention_heads, a.integer("num_attention_heads"));
  MS_ASSIGN_OR_RETURN(m.max_position_embeddings, a.integer("max_position_embeddings"));
  MS_ASSIGN_OR_RETURN(m.padded_vocab_size, a.integer("padded_vocab_size"));
  m.kv_channels = a.integer_or("kv_channels", m.hidden_size / m.num_attention_heads);
  m.group_query_attention = a.flag("group_query_attention");
  m.num_query_groups = a.integer_or("num_query_groups", m.num_attention_heads);
  m.vocab_size = a.integer_or("vocab_size", m.padded_vocab_size);
  m.normalization = a.text("normalization", "LayerNorm") == "RMSNorm" ? Normalization::kRMSNorm : Normalization::kLayerNorm;
  m.swiglu = a.flag("swiglu");
  const std::string pos = a.text("position_embedding_type", "learned_absolute");
  m.position_embedding_type = pos == "rope" ? PositionEmbeddingType::kRope
                              : pos == "none" ? PositionEmbeddingType::kNone
                                              : PositionEmbeddingType::kLearnedAbsolute;
  m.untie_embeddings_and_output_weights = a.flag("untie_embeddings_and_output_weights");
  m.add_bias_linear = a.flag("add_bias_linear", true);
  m.add_qkv_bias = a.flag("add_qkv_bias");
  m.norm_epsilon = static_cast<float>(a.number("norm_epsilon", 1e-5));
  m.rotary_base = static_cast<float>(a.number("rotary_base", 10000));
  m.openai_gelu = a.flag("openai_gelu");
  m.rotary_seq_len_interpolation_factor = static_cast<float>(a.number("rotary_seq_len_interpolation_factor", 1.0));
  if (a.flag("use_rope_scaling")) {
    m.rope_scaling = RopeScaling::kLlama3;
    m.rope_scaling_factor = static_cast<float>(a.number("rope_scaling_factor", 8.0));
    m.rope_low_freq_factor = static_cast<float>(a.number("low_freq_factor", 1.0));
    m.rope_high_freq_factor = static_cast<float>(a.number("high_freq_factor", 4.0));
    m.rope_original_max_position_embeddings = a.integer_or("original_max_position_embeddings", 8192);
  }
  if (m.num_layers % ckpt.pp_ != 0) return unimplemented(first.path(), ": uneven pipeline stages are not read yet");
  return ckpt;
}

StatusOr<std::vector<float>> MegatronTorchCheckpoint::full_tensor(const ParameterSpec& spec) const {
  const std::string& name = spec.name;
  const int64_t per_stage = config_.num_layers / pp_;
  int64_t stage = 0;
  std::string local = name;
  long long layer = -1;
  if (std::sscanf(name.c_str(), "decoder.layers.%lld.", &layer) == 1) {
    stage = layer / per_stage;
    local = "decoder.layers." + std::to_string(layer % per_stage) + name.substr(name.find('.', 15));
  } else if (name.starts_with("decoder.final_layernorm") || name.starts_with("output_layer")) {
    stage = pp_ - 1;
  }
  // Transformer Engine's fused spec keeps the norms inside the next linear layer.
  std::vector<std::string> keys{local};
  for (const auto& [ours, te] : {std::pair<std::string, std::string>{"input_layernorm.", "self_attention.linear_qkv.layer_norm_"},
                                 {"pre_mlp_layernorm.", "mlp.linear_fc1.layer_norm_"}}) {
    const size_t at = local.find(ours);
    if (at != std::string::npos) keys.push_back(local.substr(0, at) + te + local.substr(at + ours.size()));
  }
  const int slices = spec.split != TensorParallelSplit::kReplicated ? static_cast<int>(tp_) : 1;
  std::vector<float> full(static_cast<size_t>(spec.global_shape.numel()));
  for (int t = 0; t < slices; ++t) {
    const TorchCheckpointFile& f = files_.at({t, static_cast<int>(stage)});
    const PickleValue* sd = f.root().get("model");
    if (sd == nullptr || sd->kind != PickleValue::Kind::kDict) return invalid_argument(f.path(), ": no 'model' dict");
    const PickleValue* tensor = nullptr;
    for (const std::string& k : keys) {
      if ((tensor = sd->get(k)) != nullptr) break;
    }
    if (tensor == nullptr || tensor->kind != PickleValue::Kind::kTensor) {
      return not_found(f.path(), ": no tensor '", keys.front(), "' (for ", name, ")");
    }
    MS_ASSIGN_OR_RETURN(std::vector<float> values, f.read_f32(*tensor->tensor));
    if (static_cast<int64_t>(values.size()) * slices != spec.global_shape.numel()) {
      return invalid_argument(f.path(), ": '", keys.front(), "' has ", values.size(), " values, expected ",
                              spec.global_shape.numel() / slices);
    }
    unslice_from_rank(full.data(), values.data(), spec, t, slices);
  }
  return full;
}

Status MegatronTorchCheckpoint::check_model_matches(const ModelConfig& flags) const {
  const std::string problems =
      architecture_differences(flags, config_, "the checkpoint has", /*compare_padded_vocab=*/true);
  if (!problems.empty()) return invalid_argument("the model flags do not match the Megatron-LM checkpoint:", problems);
  return ok_status();
}

}  // namespace mindspeed
