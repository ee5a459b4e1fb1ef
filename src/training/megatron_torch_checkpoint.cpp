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

StatusOr<std::vector<float>> MegatronTorchCheckpoint::full_tensor(
    const ParameterSpec& this_run_spec) const {
  const std::string& name = this_run_spec.name;
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
  // Megatron's files hold 1-D tensor-parallel slices (a 2D run's grid blocks are cut from the
  // whole tensor afterwards).
  const ParameterSpec& spec = one_d_equivalent(this_run_spec);
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

std::shared_ptr<PickleValue> megatron_args_namespace(const ModelConfig& m, int64_t padded_vocab,
                                                     const MegatronTorchSplit& split,
                                                     const PickleFields& extra) {
  const auto none = pickle_value(PickleValue::Kind::kNone);
  auto args = pickle_value(PickleValue::Kind::kObject);
  args->object_class = "argparse.Namespace";
  const bool virtual_pipeline = split.virtual_stages > 1;
  auto layers_or_none = [&](int64_t layers) { return layers > 0 ? pickle_int(layers) : none; };
  const PickleFields fields = {
      {"num_layers", pickle_int(m.num_layers)},
      {"hidden_size", pickle_int(m.hidden_size)},
      {"ffn_hidden_size", pickle_int(m.ffn_hidden_size)},
      {"num_attention_heads", pickle_int(m.num_attention_heads)},
      {"kv_channels", pickle_int(m.kv_channels)},
      {"group_query_attention", pickle_bool(m.group_query_attention)},
      {"num_query_groups", pickle_int(m.query_groups())},
      {"max_position_embeddings", pickle_int(m.max_position_embeddings)},
      {"padded_vocab_size", pickle_int(padded_vocab)},
      {"vocab_size", pickle_int(m.vocab_size)},
      {"make_vocab_size_divisible_by", pickle_int(m.make_vocab_size_divisible_by)},
      {"normalization",
       pickle_string(m.normalization == Normalization::kRMSNorm ? "RMSNorm" : "LayerNorm")},
      {"norm_epsilon", pickle_float(m.norm_epsilon)},
      {"swiglu", pickle_bool(m.swiglu)},
      {"openai_gelu", pickle_bool(m.openai_gelu)},
      {"position_embedding_type",
       pickle_string(m.position_embedding_type == PositionEmbeddingType::kRope   ? "rope"
                     : m.position_embedding_type == PositionEmbeddingType::kNone ? "none"
                     : m.position_embedding_type == PositionEmbeddingType::kAlibi
                         ? "alibi"
                         : "learned_absolute")},
      {"add_position_embedding",
       pickle_bool(m.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute)},
      {"rotary_base", pickle_int(static_cast<int64_t>(m.rotary_base))},
      {"rotary_seq_len_interpolation_factor", pickle_float(m.rotary_seq_len_interpolation_factor)},
      {"use_rope_scaling", pickle_bool(m.rope_scaling == RopeScaling::kLlama3)},
      {"rope_scaling_factor", pickle_float(m.rope_scaling_factor)},
      // Not Megatron arguments (its Llama 3.1 scaling fixes them); kept so nothing is lost.
      {"low_freq_factor", pickle_float(m.rope_low_freq_factor)},
      {"high_freq_factor", pickle_float(m.rope_high_freq_factor)},
      {"original_max_position_embeddings", pickle_int(m.rope_original_max_position_embeddings)},
      {"untie_embeddings_and_output_weights", pickle_bool(m.untie_embeddings_and_output_weights)},
      {"add_bias_linear", pickle_bool(m.add_bias_linear)},
      {"add_qkv_bias", pickle_bool(m.add_qkv_bias)},
      {"tensor_model_parallel_size", pickle_int(split.tp)},
      {"pipeline_model_parallel_size", pickle_int(split.pp)},
      {"virtual_pipeline_model_parallel_size",
       virtual_pipeline ? pickle_int(split.virtual_stages) : none},
      {"num_layers_per_virtual_pipeline_stage",
       virtual_pipeline ? layers_or_none(split.layers_per_virtual_stage) : none},
      {"decoder_first_pipeline_num_layers",
       layers_or_none(split.decoder_first_pipeline_num_layers)},
      {"decoder_last_pipeline_num_layers", layers_or_none(split.decoder_last_pipeline_num_layers)},
      {"transformer_impl", pickle_string("local")},
      {"ckpt_format", pickle_string("torch")},
  };
  for (const auto& [k, v] : fields) args->dict.emplace_back(pickle_string(k), v);
  for (const auto& [k, v] : extra) args->dict.emplace_back(pickle_string(k), v);
  return args;
}

std::optional<MegatronChunkName> megatron_chunk_name(const std::string& ours,
                                                     const PipelineLayout& layout, int pp_rank) {
  long long layer = -1;
  const bool is_layer = std::sscanf(ours.c_str(), "decoder.layers.%lld.", &layer) == 1;
  for (const PipelineStage& st : layout.stages) {
    if (st.rank != pp_rank) continue;
    if (is_layer) {
      if (layer < st.first_layer || layer >= st.first_layer + st.num_layers) continue;
      const size_t rest = ours.find('.', std::string("decoder.layers.").size());
      return MegatronChunkName{
          st.chunk, "decoder.layers." + std::to_string(layer - st.first_layer) + ours.substr(rest)};
    }
    if (ours.starts_with("embedding.") ? st.pre_process : st.post_process)
      return MegatronChunkName{st.chunk, ours};
  }
  return std::nullopt;
}

MegatronRankFile::MegatronRankFile(std::shared_ptr<PickleValue> args, int64_t iteration, int chunks,
                                   const PickleFields& extra)
    : root_(pickle_value(PickleValue::Kind::kDict)) {
  root_->dict.emplace_back(pickle_string("args"), std::move(args));
  root_->dict.emplace_back(pickle_string("checkpoint_version"), pickle_float(3.0));
  root_->dict.emplace_back(pickle_string("iteration"), pickle_int(iteration));
  for (int c = 0; c < chunks; ++c) {
    models_.push_back(pickle_value(PickleValue::Kind::kDict));
    root_->dict.emplace_back(pickle_string(chunks > 1 ? "model" + std::to_string(c) : "model"),
                             models_.back());
  }
  for (const auto& [k, v] : extra) root_->dict.emplace_back(pickle_string(k), v);
}

void MegatronRankFile::add(int chunk, const std::string& name, TorchSaveTensor tensor) {
  auto ref = pickle_value(PickleValue::Kind::kTensor);
  ref->tensor = std::make_shared<TorchTensorRef>();
  ref->tensor->key = std::to_string(tensors_.size());
  tensors_.push_back(std::move(tensor));
  models_.at(static_cast<size_t>(chunk))->dict.emplace_back(pickle_string(name), ref);
}

std::string MegatronRankFile::rank_dir(int tp_rank, int pp_rank, int pp_size) {
  char name[32];
  if (pp_size == 1) {
    std::snprintf(name, sizeof name, "mp_rank_%02d", tp_rank);
  } else {
    std::snprintf(name, sizeof name, "mp_rank_%02d_%03d", tp_rank, pp_rank);
  }
  return name;
}

Status MegatronRankFile::write(const std::string& dir, int tp_rank, int pp_rank,
                               int pp_size) const {
  const std::string rank = dir + "/" + rank_dir(tp_rank, pp_rank, pp_size);
  std::error_code ec;
  std::filesystem::create_directories(rank, ec);
  if (ec) return failed_precondition("cannot create '", rank, "': ", ec.message());
  return write_torch_save(rank + "/model_optim_rng.pt", "model_optim_rng", *root_, tensors_);
}

StatusOr<std::optional<MegatronRankFile>> megatron_rank_file_of(const Configs& c,
                                                                const ParameterRegistry& registry,
                                                                const ParallelState& ps,
                                                                const Backend& backend,
                                                                const MegatronProgress& progress) {
  if (ps.dp_cp().rank() != 0) return std::optional<MegatronRankFile>();
  const ParallelConfig& parallel = c.parallel;
  MS_ASSIGN_OR_RETURN(const PipelineLayout layout,
                      PipelineLayout::build(parallel, c.model.num_layers));
  const TrainingConfig& t = c.training;
  const int64_t dp = ps.dp_cp().size() / parallel.context_parallel_size;
  const PickleFields extra = {
      {"seq_length", pickle_int(c.model.seq_length)},
      {"micro_batch_size", pickle_int(t.micro_batch_size)},
      {"global_batch_size", pickle_int(t.global_batch_size)},
      {"train_iters", pickle_int(t.train_iters)},
      {"consumed_train_samples", pickle_int(progress.consumed_train_samples)},
      {"consumed_valid_samples", pickle_int(progress.consumed_valid_samples)},
      {"context_parallel_size", pickle_int(parallel.context_parallel_size)},
      {"data_parallel_size", pickle_int(dp)},
      {"world_size", pickle_int(ps.world().size())},
      {"sequence_parallel", pickle_bool(parallel.sequence_parallel)},
      {"use_distributed_optimizer", pickle_bool(parallel.use_distributed_optimizer)},
      {"bf16", pickle_bool(t.bf16)},
      {"fp16", pickle_bool(t.fp16)},
      {"tokenizer_type", pickle_string(c.data.tokenizer_type)},
      {"iteration", pickle_int(progress.iteration)},
  };
  const MegatronTorchSplit split{
      .tp = parallel.tensor_model_parallel_size,
      .pp = parallel.pipeline_model_parallel_size,
      .virtual_stages = layout.chunks_per_rank,
      .layers_per_virtual_stage = parallel.num_layers_per_virtual_pipeline_stage,
      .decoder_first_pipeline_num_layers = parallel.decoder_first_pipeline_num_layers,
      .decoder_last_pipeline_num_layers = parallel.decoder_last_pipeline_num_layers};
  MegatronRankFile file(megatron_args_namespace(c.model, c.model.padded_vocab_size, split, extra),
                        progress.iteration, layout.chunks_per_rank,
                        {{"num_floating_point_operations_so_far",
                          pickle_float(progress.floating_point_operations_so_far)}});
  // Chunk by chunk in declaration order, as Megatron's state dicts list them.
  for (int chunk = 0; chunk < layout.chunks_per_rank; ++chunk) {
    for (const auto& owned : registry.params()) {
      const Parameter& p = *owned;
      const auto place = megatron_chunk_name(p.spec.name, layout, ps.pp_rank);
      if (!place)
        return internal_error("parameter ", p.spec.name, " is on none of pipeline rank ",
                              ps.pp_rank, "'s stages");
      if (place->chunk != chunk) continue;
      TorchSaveTensor tensor;
      for (int d = 0; d < p.local_shape.ndim(); ++d) tensor.shape.push_back(p.local_shape[d]);
      const int64_t n = p.local_shape.numel();
      tensor.values.resize(static_cast<size_t>(n));
      // The weights as stored (on a device, through its transfer), widened on the host.
      if (p.data.dtype == DType::kFloat32) {
        backend.kernels.copy_to_host(backend.context, tensor.values.data(), p.data.data, n * 4);
      } else if (is_half_precision(p.data.dtype)) {
        std::vector<uint16_t> bits(static_cast<size_t>(n));
        backend.kernels.copy_to_host(backend.context, bits.data(), p.data.data, n * 2);
        for (int64_t i = 0; i < n; ++i) {
          const uint16_t b = bits[static_cast<size_t>(i)];
          tensor.values[static_cast<size_t>(i)] =
              p.data.dtype == DType::kBFloat16 ? bf16_to_float(bf16{b}) : fp16_to_float(fp16{b});
        }
      } else {
        return internal_error("parameter ", p.spec.name, " is stored as ", dtype_name(p.data.dtype));
      }
      file.add(chunk, place->name, std::move(tensor));
    }
  }
  return std::optional<MegatronRankFile>(std::move(file));
}

}  // namespace mindspeed
