// MegatronTorchCheckpoint (megatron_torch_checkpoint.h).
#include "training/megatron_torch_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "config/parallel_config.h"
#include "config/pipeline_layout.h"
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
  /// Given a value: present, not None, not False, not an empty list.
  bool is_set(const char* name) const {
    const PickleValue* v = field(name);
    if (v == nullptr || v->kind == PickleValue::Kind::kNone) return false;
    if (v->kind == PickleValue::Kind::kBool) return v->b;
    if (v->kind == PickleValue::Kind::kList || v->kind == PickleValue::Kind::kTuple) return !v->items.empty();
    return true;
  }
};

// The stages Megatron built from the args, in model order (chunk c of pipeline rank r is
// stage c*P + r). config/pipeline_layout.h ports Megatron's split (even, uneven first/last
// stage, virtual stages) and its refusals; --account-for-embedding/loss-in-pipeline-split
// count the embedding and the loss as one layer each of an even split, so stage 0 builds one
// layer less and every later stage starts one layer earlier (the loss: the last stage builds
// one less). Splits Megatron has no offset rule for are refused by argument name.
StatusOr<PipelineLayout> megatron_pipeline_layout(const MegatronArgs& a, int64_t num_layers, int64_t pp) {
  const std::pair<const char*, const char*> not_read[] = {
      {"pipeline_model_parallel_split_rank", "an encoder-decoder split"},
      {"pipeline_model_parallel_layout", "an explicit per-stage layout"},
      {"num_layer_list", "MindSpeed-LLM's per-stage layer list"},
      {"noop_layers", "MindSpeed's no-op layers"},
  };
  for (const auto& [name, what] : not_read) {
    if (a.is_set(name)) {
      return unimplemented(a.path, ": args.", name, " (", what, ") is set; only Megatron's even, uneven first/last ",
                           "and virtual-pipeline splits are read: reshard the checkpoint to one of those first");
    }
  }
  if (a.integer_or("encoder_pipeline_model_parallel_size", 0) > 0) {
    return unimplemented(a.path, ": args.encoder_pipeline_model_parallel_size > 0 (an encoder pipeline) is not read; "
                         "only decoder-only GPT checkpoints are");
  }
  ParallelConfig parallel;
  parallel.pipeline_model_parallel_size = static_cast<int>(pp);
  int64_t* first = &parallel.decoder_first_pipeline_num_layers;
  int64_t* last = &parallel.decoder_last_pipeline_num_layers;
  for (auto [name, layers] : {std::pair{"decoder_first_pipeline_num_layers", first},
                              std::pair{"decoder_last_pipeline_num_layers", last}}) {
    if (!a.is_set(name)) continue;
    MS_ASSIGN_OR_RETURN(*layers, a.integer(name));
    if (*layers <= 0) {
      return unimplemented(a.path, ": args.", name, " = ", *layers, " (a stage without layers) is not read");
    }
  }
  // Megatron records the virtual size it derived from --num-layers-per-virtual-pipeline-stage
  // or --num-virtual-stages-per-pipeline-rank; None (or 1) is one model chunk per rank.
  const int64_t virtual_size = a.integer_or("virtual_pipeline_model_parallel_size", 1);
  const int64_t layers_per_virtual = a.integer_or("num_layers_per_virtual_pipeline_stage", 0);
  if (virtual_size > 1) {
    parallel.num_virtual_stages_per_pipeline_rank = static_cast<int>(virtual_size);
  } else if (!a.is_set("virtual_pipeline_model_parallel_size") && layers_per_virtual > 0) {
    parallel.num_layers_per_virtual_pipeline_stage = layers_per_virtual;  // args without the derived size
  }
  const int64_t embedding = a.flag("account_for_embedding_in_pipeline_split") ? 1 : 0;
  const int64_t loss = a.flag("account_for_loss_in_pipeline_split") ? 1 : 0;
  if ((embedding + loss) > 0 && (*first > 0 || *last > 0)) {
    return invalid_argument(a.path, ": args.account_for_embedding/loss_in_pipeline_split with "
                            "decoder_first/last_pipeline_num_layers is a split Megatron refuses (damaged args?)");
  }
  auto built = PipelineLayout::build(parallel, num_layers + embedding + loss);
  if (!built.ok()) {
    return invalid_argument(a.path, ": the pipeline split in args is not one Megatron builds (damaged args?): ",
                            built.status().message());
  }
  PipelineLayout layout = std::move(*built);
  for (size_t s = 1; s < layout.stages.size(); ++s) layout.stages[s].first_layer -= embedding;
  layout.stages.front().num_layers -= embedding;
  layout.stages.back().num_layers -= loss;
  for (const PipelineStage& st : layout.stages) {
    if (st.num_layers < 0) {
      return invalid_argument(a.path, ": pipeline rank ", st.rank, " chunk ", st.chunk, " has no layer left for ",
                              "args.account_for_embedding/loss_in_pipeline_split (damaged args?)");
    }
  }
  return layout;
}

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
  if (a.integer_or("num_experts", 0) > 0) {
    return unimplemented(first.path(), ": a mixture-of-experts Megatron torch checkpoint (num_experts ",
                         a.integer_or("num_experts", 0), "; expert-parallel rank files and local expert numbering) is "
                         "not read yet; convert it to Hugging Face (Mixtral) first");
  }
  ckpt.tp_ = a.integer_or("tensor_model_parallel_size", 1);
  ckpt.pp_ = a.integer_or("pipeline_model_parallel_size", 1);
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
  // Megatron records the tokenizer's size only when --vocab-size was given; without it only
  // the padded size is known.
  ckpt.records_vocab_size_ = a.integer_or("vocab_size", -1) > 0;
  m.vocab_size = a.integer_or("vocab_size", m.padded_vocab_size);
  m.make_vocab_size_divisible_by = a.integer_or("make_vocab_size_divisible_by", 128);
  m.normalization = a.text("normalization", "LayerNorm") == "RMSNorm" ? Normalization::kRMSNorm : Normalization::kLayerNorm;
  m.swiglu = a.flag("swiglu");
  const std::string pos = a.text("position_embedding_type", "learned_absolute");
  m.position_embedding_type = pos == "rope"    ? PositionEmbeddingType::kRope
                              : pos == "none"  ? PositionEmbeddingType::kNone
                              : pos == "alibi" ? PositionEmbeddingType::kAlibi
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
  MS_ASSIGN_OR_RETURN(const PipelineLayout layout, megatron_pipeline_layout(a, m.num_layers, ckpt.pp_));
  ckpt.chunks_ = layout.chunks_per_rank;
  ckpt.layers_.resize(static_cast<size_t>(m.num_layers));
  for (const PipelineStage& st : layout.stages) {
    for (int64_t i = 0; i < st.num_layers; ++i) {
      ckpt.layers_[static_cast<size_t>(st.first_layer + i)] = {st.rank, st.chunk, i};
    }
  }
  // Every rank file holds each of its chunks with the layers the args give it (a missing
  // model<c> or a file of another split is named here, before any tensor is read).
  for (const auto& [rank, f] : ckpt.files_) {
    for (int c = 0; c < ckpt.chunks_; ++c) {
      MS_ASSIGN_OR_RETURN(const PickleValue* sd, ckpt.chunk_state_dict(f, c));
      int64_t held = 0;
      for (const auto& [key, value] : sd->dict) {
        long long layer = -1;
        if (key->kind != PickleValue::Kind::kString) continue;
        if (std::sscanf(key->s.c_str(), "decoder.layers.%lld.", &layer) == 1) held = std::max<int64_t>(held, layer + 1);
      }
      const int64_t want = layout.stages[static_cast<size_t>(layout.stage_of(rank.second, c))].num_layers;
      if (held != want) {
        return invalid_argument(f.path(), ": ", ckpt.chunks_ > 1 ? "'model" + std::to_string(c) + "'" : "'model'",
                                " holds ", held, " transformer layers but the args (", m.num_layers, " layers, ",
                                ckpt.pp_, " pipeline stages x ", ckpt.chunks_, " virtual) give it ", want,
                                " (files of another split or damaged args?)");
      }
    }
  }
  return ckpt;
}

StatusOr<const PickleValue*> MegatronTorchCheckpoint::chunk_state_dict(const TorchCheckpointFile& f, int chunk) const {
  const std::string key = chunks_ > 1 ? "model" + std::to_string(chunk) : "model";
  const PickleValue* sd = f.root().get(key);
  if (sd == nullptr || sd->kind != PickleValue::Kind::kDict) {
    if (chunks_ > 1) {
      return invalid_argument(f.path(), ": no '", key, "' dict, though args.virtual_pipeline_model_parallel_size is ",
                              chunks_, " (a truncated or damaged rank file: copy it again from the run)");
    }
    return invalid_argument(f.path(), ": no 'model' dict");
  }
  return sd;
}

StatusOr<std::vector<float>> MegatronTorchCheckpoint::full_tensor(const ParameterSpec& spec) const {
  const std::string& name = spec.name;
  // The rank file and chunk: a layer's from the layout (renumbered from 0 in its chunk), the
  // embedding in chunk 0 of rank 0, the final norm and output layer in the last chunk of the
  // last rank.
  int stage = 0, chunk = 0;
  std::string local = name;
  long long layer = -1;
  if (std::sscanf(name.c_str(), "decoder.layers.%lld.", &layer) == 1) {
    if (layer < 0 || layer >= static_cast<long long>(layers_.size())) {
      return invalid_argument("the Megatron-LM checkpoint has ", layers_.size(), " layers, asked for ", name);
    }
    const LayerPlace& at = layers_[static_cast<size_t>(layer)];
    stage = at.rank;
    chunk = at.chunk;
    local = "decoder.layers." + std::to_string(at.local) + name.substr(name.find('.', 15));
  } else if (name.starts_with("decoder.final_layernorm") || name.starts_with("output_layer")) {
    stage = static_cast<int>(pp_ - 1);
    chunk = chunks_ - 1;
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
    const TorchCheckpointFile& f = files_.at({t, stage});
    MS_ASSIGN_OR_RETURN(const PickleValue* sd, chunk_state_dict(f, chunk));
    const PickleValue* tensor = nullptr;
    for (const std::string& k : keys) {
      if ((tensor = sd->get(k)) != nullptr) break;
    }
    if (tensor == nullptr || tensor->kind != PickleValue::Kind::kTensor) {
      return not_found(f.path(), ": no tensor '", keys.front(), "' in '",
                       chunks_ > 1 ? "model" + std::to_string(chunk) : "model", "' (for ", name, ")");
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
      architecture_differences(flags, config_, "the checkpoint has", /*compare_padded_vocab=*/!records_vocab_size_);
  if (!problems.empty()) return invalid_argument("the model flags do not match the Megatron-LM checkpoint:", problems);
  return ok_status();
}

}  // namespace mindspeed
