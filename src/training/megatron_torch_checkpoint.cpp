// MegatronTorchCheckpoint (megatron_torch_checkpoint.h).
#include "training/megatron_torch_checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <numeric>
#include <tuple>

#include "config/parallel_config.h"
#include "config/pipeline_layout.h"
#include "core/logging.h"
#include "training/checkpointing.h"

namespace mindspeed {
namespace {

// A float as the shortest decimal that rounds to it, read back as a double: the value Python
// holds for the flag the user typed (--lr 1e-3 is 0.001 there, not 0.0010000000474974513),
// which Megatron's scheduler compares with the checkpoint's on load.
double decimal_of(float v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

// The parameters of a saved chunk state dict in named_parameters() order: its tensors, less
// Transformer Engine's _extra_state entries.
std::vector<std::pair<std::string, const PickleValue*>> megatron_saved_parameters(
    const PickleValue& sd) {
  std::vector<std::pair<std::string, const PickleValue*>> out;
  for (const auto& [key, value] : sd.dict) {
    if (key->kind != PickleValue::Kind::kString || value->kind != PickleValue::Kind::kTensor)
      continue;
    if (!key->s.ends_with("_extra_state")) out.emplace_back(key->s, value.get());
  }
  return out;
}

// _get_param_groups: Megatron's optimizer groups its parameters (in named_parameters() order)
// by whether weight decay applies (not to biases and 1-D tensors), the groups in order of first
// appearance. Returns each group's members (indices into `params`) and, in `group_no_wd`,
// whether the group is the no-weight-decay one.
std::vector<std::vector<size_t>> megatron_weight_decay_groups(
    const std::vector<std::pair<std::string, size_t /*ndim*/>>& params,
    std::vector<bool>* group_no_wd) {
  std::vector<std::vector<size_t>> groups;
  group_no_wd->clear();
  for (size_t k = 0; k < params.size(); ++k) {
    const bool no_wd = params[k].first.ends_with(".bias") || params[k].second == 1;
    auto g = std::find(group_no_wd->begin(), group_no_wd->end(), no_wd);
    if (g == group_no_wd->end()) {
      group_no_wd->push_back(no_wd);
      groups.emplace_back();
      g = group_no_wd->end() - 1;
    }
    groups[static_cast<size_t>(g - group_no_wd->begin())].push_back(k);
  }
  return groups;
}

// The copy of tied embeddings Megatron marks shared_embedding with PP > 1 (its own bucket in the
// distributed optimizer's buffer): the word embeddings of the first stage's first chunk, the
// output layer of the last stage's last chunk.
bool megatron_shared_embedding(const std::string& name, bool tied, int64_t pp, bool pre,
                               bool post) {
  return tied && pp > 1 &&
         ((name == "embedding.word_embeddings.weight" && pre && !post) ||
          (name == "output_layer.weight" && post && !pre));
}

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
  // The distributed optimizer's buffer layout depends on these (read_distributed_optimizer).
  ckpt.ddp_bucket_size_ = a.integer_or("ddp_bucket_size", 0);
  ckpt.ddp_num_buckets_ = a.integer_or("ddp_num_buckets", 0);
  ckpt.data_parallel_cp_ = std::max<int64_t>(1, a.integer_or("data_parallel_size", 1)) *
                           std::max<int64_t>(1, a.integer_or("context_parallel_size", 1));
  ckpt.overlap_grad_reduce_ = a.flag("overlap_grad_reduce");
  ckpt.overlap_param_gather_with_optimizer_step_ =
      a.flag("overlap_param_gather_with_optimizer_step");
  ckpt.pad_buckets_for_high_nccl_busbw_ = a.flag("ddp_pad_buckets_for_high_nccl_busbw");
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
  // Megatron's NullTokenizer adds the end-of-document id to --vocab-size, which args record.
  if (ckpt.records_vocab_size_ && a.text("tokenizer_type", "") == "NullTokenizer")
    m.vocab_size += 1;
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
  // A weights-only load (--no-load-optim, --finetune) does not need it: a problem is kept
  // for optimizer_readable().
  ckpt.optimizer_status_ = ckpt.read_optimizer_state();
  if (!ckpt.optimizer_status_.ok()) ckpt.optimizer_.clear();
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

StatusOr<std::vector<float>> MegatronTorchCheckpoint::assemble(const ParameterSpec& this_run_spec,
                                                               const SliceOf& slice_of) const {
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
    MS_ASSIGN_OR_RETURN(const SliceRef slice, slice_of(f, {t, stage}, chunk, keys));
    if (slice.tensor == nullptr) continue;  // no state yet: zeros
    MS_ASSIGN_OR_RETURN(std::vector<float> values,
                        (slice.file != nullptr ? *slice.file : f).read_f32(*slice.tensor));
    if (slice.skip > 0) {  // leading elements the file lacks: zeros, or the weights for a main copy
      std::vector<float> head(static_cast<size_t>(slice.skip), 0.0f);
      if (slice.fill != nullptr) {
        MS_ASSIGN_OR_RETURN(std::vector<float> weights, f.read_f32(*slice.fill));
        std::copy_n(weights.begin(), slice.skip, head.begin());
      }
      values.insert(values.begin(), head.begin(), head.end());
    }
    if (static_cast<int64_t>(values.size()) * slices != spec.global_shape.numel()) {
      return invalid_argument(f.path(), ": '", keys.front(), "' has ", values.size(),
                              " values, expected ", spec.global_shape.numel() / slices);
    }
    unslice_from_rank(full.data(), values.data(), spec, t, slices);
  }
  return full;
}

StatusOr<std::vector<float>> MegatronTorchCheckpoint::full_tensor(const ParameterSpec& spec) const {
  return assemble(
      spec,
      [&](const TorchCheckpointFile& f, std::pair<int, int>, int chunk,
          const std::vector<std::string>& keys) -> StatusOr<SliceRef> {
        MS_ASSIGN_OR_RETURN(const PickleValue* sd, chunk_state_dict(f, chunk));
        const PickleValue* tensor = nullptr;
        for (const std::string& k : keys) {
          if ((tensor = sd->get(k)) != nullptr) break;
        }
        if (tensor == nullptr || tensor->kind != PickleValue::Kind::kTensor) {
          return not_found(f.path(), ": no tensor '", keys.front(), "' in '",
                           chunks_ > 1 ? "model" + std::to_string(chunk) : "model", "' (for ",
                           spec.name, ")");
        }
        return SliceRef{nullptr, tensor->tensor, 0, nullptr};
      });
}

StatusOr<std::vector<float>> MegatronTorchCheckpoint::full_tensor_for_run(
    const ParameterSpec& spec, const std::string& kind) const {
  ParameterSpec source = spec;
  if (!spec.tied_to.empty()) source.name = spec.tied_to;  // a tied copy: its original
  const bool vocab =
      source.name == "embedding.word_embeddings.weight" || source.name == "output_layer.weight";
  if (vocab)
    source.global_shape = Shape{config_.padded_vocab_size, spec.global_shape[1]};  // as saved
  MS_ASSIGN_OR_RETURN(std::vector<float> full,
                      kind == "weight" ? full_tensor(source) : full_optimizer_tensor(kind, source));
  if (vocab)
    full.resize(static_cast<size_t>(spec.global_shape.numel()), 0.0f);  // this run's padding
  return full;
}

Status MegatronTorchCheckpoint::optimizer_readable() const {
  MS_RETURN_IF_ERROR(optimizer_status_);
  switch (optimizer_state_) {
    case MegatronOptimizerState::kNone:
      return failed_precondition(
          "the Megatron-LM checkpoint holds no optimizer state (saved with --no-save-optim, ",
          "or a release): pass --no-load-optim to start a fresh optimizer from its weights");
    default:
      return ok_status();
  }
}

StatusOr<std::vector<float>> MegatronTorchCheckpoint::full_optimizer_tensor(
    const std::string& kind, const ParameterSpec& spec) const {
  MS_RETURN_IF_ERROR(optimizer_readable());
  if (kind == "param" && optimizer_state_ == MegatronOptimizerState::kFp32)
    return full_tensor(spec);  // its own main copy
  if (kind != "param" && kind != "exp_avg" && kind != "exp_avg_sq") {
    return invalid_argument("no optimizer state '", kind, "' in a Megatron-LM checkpoint");
  }
  return assemble(
      spec,
      [&](const TorchCheckpointFile& f, std::pair<int, int> rank, int chunk,
          const std::vector<std::string>& keys) -> StatusOr<SliceRef> {
        const auto& state = optimizer_.at(rank);
        for (const std::string& k : keys) {
          auto it = state.find({chunk, k});
          if (it == state.end()) continue;
          const OptimizerTensors& t = it->second;
          if (kind == "param" && t.main == nullptr) {
            return not_found(f.path(), ": no fp32 main parameter for '", k,
                             "' in 'fp32_from_fp16_params'");
          }
          return SliceRef{t.file,
                          kind == "param"     ? t.main
                          : kind == "exp_avg" ? t.exp_avg
                                              : t.exp_avg_sq,
                          t.skip, kind == "param" ? t.weight : nullptr};
        }
        return not_found(f.path(), ": no optimizer state for '", keys.front(), "' (for ", spec.name,
                         ")");
      });
}

namespace {

// The value of an int-keyed dict entry (torch's optimizer state is keyed by parameter index).
const PickleValue* int_key(const PickleValue& dict, int64_t key) {
  for (const auto& [k, v] : dict.dict) {
    if (k->kind == PickleValue::Kind::kInt && k->i == key) return v.get();
  }
  return nullptr;
}

// A scalar saved as an int, a float or a 0-d tensor (torch's 'step').
StatusOr<double> scalar_of(const TorchCheckpointFile& f, const PickleValue& v) {
  if (v.kind == PickleValue::Kind::kInt) return static_cast<double>(v.i);
  if (v.kind == PickleValue::Kind::kFloat) return v.f;
  if (v.kind == PickleValue::Kind::kTensor) {
    MS_ASSIGN_OR_RETURN(std::vector<float> x, f.read_f32(*v.tensor));
    if (x.size() == 1) return static_cast<double>(x[0]);
  }
  return invalid_argument(f.path(), ": a scalar was expected in the optimizer state");
}

}  // namespace

Status MegatronTorchCheckpoint::read_rank_optimizer(const TorchCheckpointFile& f,
                                                    std::map<ChunkName, OptimizerTensors>* out,
                                                    MegatronOptimizerState* form, int64_t* step) {
  *form = MegatronOptimizerState::kNone;
  const PickleValue* opt = f.root().get("optimizer");
  if (opt == nullptr || opt->kind == PickleValue::Kind::kNone) return ok_status();
  if (opt->kind == PickleValue::Kind::kList) {
    return unimplemented(
        f.path(), ": the optimizer state of ", opt->items.size(),
        " chained optimizers (expert parameters?) is not read; pass --no-load-optim");
  }
  const PickleValue* inner = opt;
  const PickleValue* main_groups = nullptr;
  if (opt->get("param_groups") ==
      nullptr) {  // a MixedPrecisionOptimizer's: {'optimizer': Adam's, ...}
    inner = opt->get("optimizer");
    main_groups = opt->get("fp32_from_fp16_params");
    if (main_groups == nullptr) main_groups = opt->get("fp32_from_fp16");
  }
  const PickleValue* groups = inner != nullptr ? inner->get("param_groups") : nullptr;
  if (groups == nullptr || groups->kind != PickleValue::Kind::kList) {
    return invalid_argument(
        f.path(), ": 'optimizer' has no 'param_groups' (not a Megatron optimizer state?)");
  }
  const PickleValue* state = inner->get("state");
  if (state == nullptr &&
      (groups->items.empty() || groups->items.front()->get("params") == nullptr)) {
    // DistributedOptimizer.state_dict(): no parameter state; the step in the groups (torch's
    // AdamW moved there, or Apex / Transformer Engine's own).
    *form = MegatronOptimizerState::kDistributed;
    std::optional<double> steps;
    for (const auto& g : groups->items) {
      if (const PickleValue* gs = g->get("step")) {
        MS_ASSIGN_OR_RETURN(const double v, scalar_of(f, *gs));
        if (steps && *steps != v)
          return invalid_argument(f.path(), ": the optimizer's groups were stepped ", *steps,
                                  " and ", v, " times");
        steps = v;
      }
    }
    *step = steps ? static_cast<int64_t>(*steps) : 0;
    return ok_status();
  }
  if (state == nullptr || state->kind != PickleValue::Kind::kDict) {
    return invalid_argument(f.path(), ": the optimizer state dict has no 'state'");
  }
  *form = main_groups != nullptr ? MegatronOptimizerState::kFloat16 : MegatronOptimizerState::kFp32;
  if (opt->get("grad_scaler") != nullptr &&
      opt->get("grad_scaler")->kind == PickleValue::Kind::kDict) {
    const PickleValue& g = *opt->get("grad_scaler");
    GradScalerState scaler;
    if (g.get("scale") != nullptr) {
      MS_ASSIGN_OR_RETURN(const double scale, scalar_of(f, *g.get("scale")));
      scaler.scale = static_cast<float>(scale);
    }
    if (g.get("growth_tracker") != nullptr &&
        g.get("growth_tracker")->kind == PickleValue::Kind::kInt) {
      scaler.growth_tracker = g.get("growth_tracker")->i;
    }
    if (g.get("hysteresis_tracker") != nullptr &&
        g.get("hysteresis_tracker")->kind == PickleValue::Kind::kInt) {
      scaler.hysteresis_tracker = g.get("hysteresis_tracker")->i;
    }
    grad_scaler_ = scaler;
  }
  // Megatron's parameter order: named_parameters() over the chunks = the saved state dicts'.
  std::vector<ChunkName> order;
  std::vector<std::pair<std::string, size_t>> shapes;
  for (int c = 0; c < chunks_; ++c) {
    MS_ASSIGN_OR_RETURN(const PickleValue* sd, chunk_state_dict(f, c));
    for (const auto& [name, value] : megatron_saved_parameters(*sd)) {
      order.emplace_back(c, name);
      shapes.emplace_back(name, value->tensor->shape.size());
    }
  }
  std::vector<bool> group_no_wd;
  std::vector<std::vector<ChunkName>> by_group;
  for (const std::vector<size_t>& members : megatron_weight_decay_groups(shapes, &group_no_wd)) {
    by_group.emplace_back();
    for (size_t k : members) by_group.back().push_back(order[k]);
  }
  auto sizes = [](const auto& lists) {
    std::string s;
    for (const auto& l : lists) s += (s.empty() ? "" : ", ") + std::to_string(l.size());
    return "[" + s + "]";
  };
  std::vector<std::vector<int64_t>> saved;
  for (const auto& g : groups->items) {
    const PickleValue* params = g->get("params");
    if (params == nullptr || params->kind != PickleValue::Kind::kList) {
      return invalid_argument(f.path(), ": an optimizer parameter group has no 'params' list");
    }
    saved.emplace_back();
    for (const auto& i : params->items)
      saved.back().push_back(i->kind == PickleValue::Kind::kInt ? i->i : -1);
  }
  bool same = saved.size() == by_group.size();
  for (size_t g = 0; same && g < saved.size(); ++g) {
    same = saved[g].size() == by_group[g].size();
    const PickleValue* wd = groups->items[g]->get("wd_mult");
    if (same && wd != nullptr &&
        (wd->kind == PickleValue::Kind::kFloat || wd->kind == PickleValue::Kind::kInt)) {
      same = (wd->kind == PickleValue::Kind::kFloat ? wd->f : static_cast<double>(wd->i)) ==
             (group_no_wd[g] ? 0.0 : 1.0);
    }
  }
  if (!same) {
    return invalid_argument(
        f.path(), ": the optimizer's parameter groups hold ", sizes(saved),
        " parameters, but Megatron's grouping of the saved model (weight decay, then not, by "
        "first appearance) gives ",
        sizes(by_group),
        " (a custom no-weight-decay rule, --decoupled-lr or --lr-mult?); pass --no-load-optim");
  }
  if (main_groups != nullptr && (main_groups->kind != PickleValue::Kind::kList ||
                                 main_groups->items.size() != saved.size())) {
    return invalid_argument(f.path(),
                            ": 'fp32_from_fp16_params' does not hold one list per parameter group");
  }
  std::optional<double> steps;
  auto agree_step = [&](double s) -> Status {
    if (steps && *steps != s)
      return invalid_argument(f.path(), ": the optimizer's parameters were stepped ", *steps,
                              " and ", s, " times");
    steps = s;
    return ok_status();
  };
  for (size_t g = 0; g < saved.size(); ++g) {
    if (const PickleValue* gs =
            groups->items[g]->get("step")) {  // Apex / Transformer Engine FusedAdam
      MS_ASSIGN_OR_RETURN(const double s, scalar_of(f, *gs));
      MS_RETURN_IF_ERROR(agree_step(s));
    }
    for (size_t j = 0; j < saved[g].size(); ++j) {
      OptimizerTensors t;
      if (main_groups != nullptr) {
        const PickleValue* list = main_groups->items[g].get();
        if (list->kind != PickleValue::Kind::kList || j >= list->items.size() ||
            list->items[j]->kind != PickleValue::Kind::kTensor) {
          return invalid_argument(f.path(), ": 'fp32_from_fp16_params' group ", g, " lacks tensor ",
                                  j);
        }
        t.main = list->items[j]->tensor;
      }
      if (const PickleValue* s = int_key(*state, saved[g][j])) {
        const PickleValue* a = s->get("exp_avg");
        const PickleValue* b = s->get("exp_avg_sq");
        if (a == nullptr || b == nullptr || a->kind != PickleValue::Kind::kTensor ||
            b->kind != PickleValue::Kind::kTensor) {
          return invalid_argument(f.path(), ": the Adam state of parameter ", saved[g][j], " (",
                                  by_group[g][j].second,
                                  ") lacks exp_avg / exp_avg_sq (not Adam?)");
        }
        t.exp_avg = a->tensor;
        t.exp_avg_sq = b->tensor;
        if (const PickleValue* st = s->get("step")) {  // torch's AdamW
          MS_ASSIGN_OR_RETURN(const double v, scalar_of(f, *st));
          MS_RETURN_IF_ERROR(agree_step(v));
        }
      } else if (!state->dict.empty()) {
        return invalid_argument(f.path(), ": no Adam state for parameter ", saved[g][j], " (",
                                by_group[g][j].second, ")");
      }
      (*out)[by_group[g][j]] = std::move(t);
    }
  }
  *step = steps ? static_cast<int64_t>(*steps) : 0;
  return ok_status();
}

Status MegatronTorchCheckpoint::read_optimizer_state() {
  bool first = true;
  for (const auto& [rank, f] : files_) {
    MegatronOptimizerState form = MegatronOptimizerState::kNone;
    int64_t step = 0;
    MS_RETURN_IF_ERROR(read_rank_optimizer(f, &optimizer_[rank], &form, &step));
    if (form == MegatronOptimizerState::kDistributed)
      MS_RETURN_IF_ERROR(read_distributed_optimizer(rank, f));
    if (!first && (form != optimizer_state_ || step != optimizer_step_)) {
      return invalid_argument(f.path(), ": its optimizer state (", static_cast<int>(form),
                              ", step ", step, ") differs from the other rank files' (",
                              static_cast<int>(optimizer_state_), ", step ", optimizer_step_,
                              "): files of different saves?");
    }
    optimizer_state_ = form;
    optimizer_step_ = step;
    first = false;
  }
  return ok_status();
}

namespace {

// Megatron's _ParamAndGradBuffer for the distributed optimizer (core_v0.12): the parameters in
// reverse named_parameters() order, each start padded to 64 elements, a bucket closed when it
// reaches bucket_size (none: one bucket) or around a shared embedding (its own bucket, start
// padded to the bucket divisor when not a multiple of dp), each bucket end padded to
// lcm(dp, 128[, 2^16]). distrib_optim.pt keeps each bucket's data up to its last parameter's end
// ("numel_unpadded"), the buckets one after another: the offsets returned are in that space.
// A shared embedding whose 64-aligned start is a multiple of dp but not of the divisor starts
// before its own bucket (Megatron pads the bucket start, not the parameter): its first `skip`
// elements lie in the previous bucket's padding, which get_parameter_state_dp_zero drops;
// they are not in the file (Megatron itself restores zeros there).
struct BufferParam {
  int64_t numel = 0;
  bool shared_embedding = false;
};
struct BufferPlace {
  int64_t offset = 0;  ///< of element `skip` in the file's flat tensors
  int64_t skip = 0;    ///< leading elements not in the file
};
StatusOr<std::vector<BufferPlace>> megatron_distopt_offsets(const std::vector<BufferParam>& params,
                                                            int64_t dp,
                                                            int64_t bucket_size /*0: none*/,
                                                            bool high_busbw,
                                                            int64_t* numel_unpadded) {
  auto pad = [](int64_t n, int64_t d) { return (n + d - 1) / d * d; };
  const int64_t divisor =
      std::lcm(std::lcm(dp, int64_t{128}), high_busbw ? int64_t{1} << 16 : int64_t{1});
  std::vector<int64_t> start(params.size()), bucket_of(params.size());
  std::vector<int64_t> bucket_starts, unpadded;
  int64_t param_start = 0, bucket_start = 0, in_bucket = 0, param_end = 0;
  auto close_bucket = [&](int64_t end) {
    bucket_starts.push_back(bucket_start);
    unpadded.push_back(end - bucket_start);
    bucket_start = pad(end, divisor);
    in_bucket = 0;
    return bucket_start;
  };
  for (size_t k = params.size(); k-- > 0;) {
    const BufferParam& p = params[k];
    param_start = pad(param_start, 64);
    if (p.shared_embedding) {
      if (param_start % dp != 0) param_start = pad(param_start, divisor);
      if (in_bucket > 0) close_bucket(param_start);
    }
    param_end = param_start + p.numel;
    start[k] = param_start;
    bucket_of[k] = static_cast<int64_t>(bucket_starts.size());
    ++in_bucket;
    if ((bucket_size > 0 && param_end - bucket_start >= bucket_size) || p.shared_embedding) {
      param_start = close_bucket(param_end);
    } else {
      param_start = param_end;
    }
  }
  if (in_bucket > 0) close_bucket(param_end);
  std::vector<int64_t> before(unpadded.size() + 1, 0);  // unpadded elements of the earlier buckets
  for (size_t b = 0; b < unpadded.size(); ++b) before[b + 1] = before[b] + unpadded[b];
  std::vector<BufferPlace> offsets(params.size());
  for (size_t k = 0; k < params.size(); ++k) {
    const size_t b = static_cast<size_t>(bucket_of[k]);
    const int64_t in = start[k] - bucket_starts[b];
    const int64_t skip = std::max<int64_t>(0, -in);
    if (skip >= params[k].numel || in + params[k].numel > unpadded[b]) {
      return internal_error("Megatron's buffer layout: parameter ", k, " does not fit its bucket");
    }
    offsets[k] = {before[b] + std::max<int64_t>(0, in), skip};
  }
  *numel_unpadded = before.back();
  return offsets;
}

// Megatron's bucket size for a model chunk's buffer (training.get_model, then
// DistributedDataParallel): none without --overlap-grad-reduce, on a later pipeline stage, for
// chunks after the first or with --overlap-param-gather-with-optimizer-step; else
// --ddp-num-buckets' share, --ddp-bucket-size, or max(40M, 1M x data-parallel size). 0: none.
int64_t megatron_bucket_size(bool overlap_grad_reduce,
                             bool overlap_param_gather_with_optimizer_step, int pp_rank, int chunk,
                             int64_t num_buckets, int64_t bucket_size, int64_t dp_cp,
                             int64_t total) {
  if (!overlap_grad_reduce || pp_rank > 0 || chunk > 0 || overlap_param_gather_with_optimizer_step)
    return 0;
  if (num_buckets > 0) return total / num_buckets;
  if (bucket_size > 0) return bucket_size;
  return std::max<int64_t>(40000000, 1000000 * dp_cp);
}

}  // namespace

Status MegatronTorchCheckpoint::read_distributed_optimizer(std::pair<int, int> rank,
                                                           const TorchCheckpointFile& f) {
  const std::string path =
      std::filesystem::path(f.path()).parent_path().string() + "/distrib_optim.pt";
  MS_ASSIGN_OR_RETURN(TorchCheckpointFile opened, TorchCheckpointFile::open(path));
  const TorchCheckpointFile& d = distributed_files_.emplace(rank, std::move(opened)).first->second;
  const PickleValue& root = d.root();
  const PickleValue* coalesced = root.get("buckets_coalesced");
  if (coalesced == nullptr || coalesced->kind != PickleValue::Kind::kBool || !coalesced->b) {
    return unimplemented(
        path, ": a distributed optimizer state of the older per-bucket layout is not read; ",
        "re-save it with Megatron core >= 0.8 or pass --no-load-optim");
  }
  const bool tied = !config_.untie_embeddings_and_output_weights;
  auto& state = optimizer_[rank];
  for (int c = 0; c < chunks_; ++c) {
    // The chunk's dense buffer: {(param dtype, grad dtype): {'param', 'exp_avg', 'exp_avg_sq',
    // 'numel_unpadded'}}.
    const PickleValue* by_dtype = nullptr;
    for (const auto& [k, v] : root.dict) {
      if (k->kind == PickleValue::Kind::kInt && k->i == c) by_dtype = v.get();
    }
    if (by_dtype == nullptr || by_dtype->kind != PickleValue::Kind::kDict ||
        by_dtype->dict.size() != 1) {
      return invalid_argument(path, ": no single-dtype buffer state for model chunk ", c);
    }
    const PickleValue& buffer = *by_dtype->dict.front().second;
    const PickleValue* numel = buffer.get("numel_unpadded");
    const PickleValue* flat[3] = {buffer.get("param"), buffer.get("exp_avg"),
                                  buffer.get("exp_avg_sq")};
    for (const PickleValue* t : flat) {
      if (t == nullptr || t->kind != PickleValue::Kind::kTensor || t->tensor->shape.size() != 1) {
        return invalid_argument(path, ": chunk ", c,
                                " lacks the flat 'param' / 'exp_avg' / 'exp_avg_sq' tensors");
      }
    }
    // The chunk's parameters in named_parameters() order (its saved state dict's).
    MS_ASSIGN_OR_RETURN(const PickleValue* sd, chunk_state_dict(f, c));
    const bool pre = rank.second == 0 && c == 0, post = rank.second == pp_ - 1 && c == chunks_ - 1;
    std::vector<std::string> names;
    std::vector<BufferParam> params;
    for (const auto& [name, value] : megatron_saved_parameters(*sd)) {
      int64_t n = 1;
      for (int64_t dim : value->tensor->shape) n *= dim;
      names.push_back(name);
      params.push_back({n, megatron_shared_embedding(name, tied, pp_, pre, post)});
    }
    int64_t total = 0;
    for (const BufferParam& p : params) total += p.numel;
    const int64_t bucket = megatron_bucket_size(
        overlap_grad_reduce_, overlap_param_gather_with_optimizer_step_, rank.second, c,
        ddp_num_buckets_, ddp_bucket_size_, data_parallel_cp_, total);
    int64_t expected = 0;
    MS_ASSIGN_OR_RETURN(std::vector<BufferPlace> offsets,
                        megatron_distopt_offsets(params, data_parallel_cp_, bucket,
                                                 pad_buckets_for_high_nccl_busbw_, &expected));
    if (numel == nullptr || numel->kind != PickleValue::Kind::kInt || numel->i != expected ||
        flat[0]->tensor->shape[0] != expected) {
      return invalid_argument(
          path, ": chunk ", c, " holds ", numel != nullptr ? numel->i : -1,
          " elements, but Megatron's buffer layout of the saved model and args gives ", expected,
          " (a --ddp-num-buckets split of all chunks, or another Megatron version?); pass "
          "--no-load-optim");
    }
    for (size_t k = 0; k < names.size(); ++k) {
      OptimizerTensors t;
      t.file = &d;
      std::shared_ptr<TorchTensorRef>* out[3] = {&t.main, &t.exp_avg, &t.exp_avg_sq};
      const PickleValue* value = sd->get(names[k]);
      t.skip = offsets[k].skip;
      t.weight = value->tensor;
      for (int i = 0; i < 3; ++i) {
        auto view = std::make_shared<TorchTensorRef>(*flat[i]->tensor);
        view->offset += offsets[k].offset;
        view->shape = value->tensor->shape;
        if (t.skip > 0) view->shape = {params[k].numel - t.skip};  // the elements in the file, flat
        view->stride.assign(view->shape.size(), 1);
        for (size_t dim = view->shape.size(); dim-- > 1;)
          view->stride[dim - 1] = view->stride[dim] * view->shape[dim];
        *out[i] = std::move(view);
      }
      state[{c, names[k]}] = std::move(t);
    }
  }
  return ok_status();
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
      {"norm_epsilon", pickle_float(decimal_of(m.norm_epsilon))},
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

std::shared_ptr<PickleValue> MegatronRankFile::stored(std::vector<TorchSaveTensor>& tensors,
                                                      TorchSaveTensor tensor) {
  auto ref = pickle_value(PickleValue::Kind::kTensor);
  ref->tensor = std::make_shared<TorchTensorRef>();
  ref->tensor->key = std::to_string(tensors.size());
  ref->tensor->shape = tensor.shape;
  tensors.push_back(std::move(tensor));
  return ref;
}

std::shared_ptr<PickleValue> MegatronRankFile::tensor(TorchSaveTensor tensor) {
  return stored(tensors_, std::move(tensor));
}

std::shared_ptr<PickleValue> MegatronRankFile::distributed_tensor(TorchSaveTensor tensor) {
  return stored(distributed_tensors_, std::move(tensor));
}

void MegatronRankFile::add(int chunk, const std::string& name, TorchSaveTensor tensor) {
  models_.at(static_cast<size_t>(chunk))
      ->dict.emplace_back(pickle_string(name), this->tensor(std::move(tensor)));
}

void MegatronRankFile::set(const std::string& key, std::shared_ptr<PickleValue> value) {
  root_->dict.emplace_back(pickle_string(key), std::move(value));
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

void MegatronRankFile::set_distributed_optimizer(std::shared_ptr<PickleValue> root) {
  distributed_root_ = std::move(root);
}

Status MegatronRankFile::write(const std::string& dir, int tp_rank, int pp_rank,
                               int pp_size) const {
  const std::string rank = dir + "/" + rank_dir(tp_rank, pp_rank, pp_size);
  std::error_code ec;
  std::filesystem::create_directories(rank, ec);
  if (ec) return failed_precondition("cannot create '", rank, "': ", ec.message());
  if (distributed_root_ != nullptr) {
    MS_RETURN_IF_ERROR(write_torch_save(rank + "/distrib_optim.pt", "distrib_optim",
                                        *distributed_root_, distributed_tensors_));
  }
  return write_torch_save(rank + "/model_optim_rng.pt", "model_optim_rng", *root_, tensors_);
}

namespace {

const char* decay_style_name(LrDecayStyle s) {
  switch (s) {
    case LrDecayStyle::kConstant:
      return "constant";
    case LrDecayStyle::kLinear:
      return "linear";
    case LrDecayStyle::kCosine:
      return "cosine";
    case LrDecayStyle::kInverseSquareRoot:
      return "inverse-square-root";
    case LrDecayStyle::kWSD:
      return "WSD";
  }
  return "linear";
}

std::shared_ptr<PickleValue> dict_of(const PickleFields& fields) {
  auto d = pickle_value(PickleValue::Kind::kDict);
  for (const auto& [k, v] : fields) d->dict.emplace_back(pickle_string(k), v);
  return d;
}

// OptimizerParamScheduler.state_dict() for the run's flags, as Megatron's
// get_optimizer_param_scheduler computes them (steps in samples), num_steps the samples consumed.
std::shared_ptr<PickleValue> megatron_scheduler_state(const Configs& c, int64_t consumed_samples) {
  const OptimizerConfig& o = c.optimizer;
  const TrainingConfig& t = c.training;
  const bool samples = t.train_samples > 0;
  const int64_t gbs = t.global_batch_size;
  const double decay =
      samples
          ? static_cast<double>(o.lr_decay_samples > 0 ? o.lr_decay_samples : t.train_samples)
          : static_cast<double>((o.lr_decay_iters > 0 ? o.lr_decay_iters : t.train_iters) * gbs);
  const bool fraction = o.lr_warmup_fraction >= 0.0f;
  auto steps = [](double v) { return pickle_int(static_cast<int64_t>(v)); };
  return dict_of({
      {"max_lr", pickle_float(decimal_of(o.lr))},
      {"lr_warmup_steps", fraction ? pickle_float(decimal_of(o.lr_warmup_fraction) * decay)
                                   : steps(samples ? static_cast<double>(o.lr_warmup_samples)
                                                   : static_cast<double>(o.lr_warmup_iters * gbs))},
      {"num_steps", pickle_int(consumed_samples)},
      {"lr_decay_style", pickle_string(decay_style_name(o.lr_decay_style))},
      {"lr_decay_steps", steps(decay)},
      {"min_lr", pickle_float(decimal_of(o.min_lr))},
      {"start_wd", pickle_float(decimal_of(o.weight_decay))},
      {"end_wd", pickle_float(decimal_of(o.weight_decay))},
      {"wd_incr_style", pickle_string("constant")},
      {"wd_incr_steps", steps(samples ? static_cast<double>(t.train_samples)
                                      : static_cast<double>(t.train_iters * gbs))},
  });
}

// One parameter as written into a rank file: its model chunk, Megatron name, and ours.
struct WrittenParam {
  int chunk = 0;
  std::string name;
  const Parameter* param = nullptr;
};

// Where a parameter comes in Megatron's GPTModel (local layer spec): the order its modules
// register their parameters, which named_parameters(), the state dicts and the optimizer's
// numbering follow: the embedding (words, positions), each layer (input norm, the attention's
// linear_proj before linear_qkv as Attention.__init__ builds them, q/k norms, pre-MLP norm,
// fc1, fc2; a weight before its bias), the final norm, the output layer.
std::tuple<int, int64_t, int, int> megatron_order_key(const std::string& name) {
  static const char* const kInLayer[] = {"input_layernorm.",
                                         "self_attention.linear_proj.",
                                         "self_attention.linear_qkv.",
                                         "self_attention.q_layernorm.",
                                         "self_attention.k_layernorm.",
                                         "pre_mlp_layernorm.",
                                         "mlp.linear_fc1.",
                                         "mlp.linear_fc2."};
  const int bias = name.ends_with(".bias") ? 1 : 0;
  long long layer = -1;
  if (std::sscanf(name.c_str(), "decoder.layers.%lld.", &layer) == 1) {
    const std::string rest = name.substr(name.find('.', std::string("decoder.layers.").size()) + 1);
    for (int i = 0; i < static_cast<int>(std::size(kInLayer)); ++i) {
      if (rest.starts_with(kInLayer[i])) return {1, layer, i, bias};
    }
    return {1, layer, static_cast<int>(std::size(kInLayer)), bias};
  }
  if (name.starts_with("embedding.word_embeddings.")) return {0, 0, 0, bias};
  if (name.starts_with("embedding.")) return {0, 0, 1, bias};
  if (name.starts_with("decoder.final_layernorm.")) return {2, 0, 0, bias};
  return {3, 0, 0, bias};  // output_layer
}

// A parameter's optimizer state `kind` (this rank holds all of it: no distributed optimizer).
StatusOr<TorchSaveTensor> state_tensor(Optimizer& optimizer, const Parameter& p,
                                       OptimizerState kind) {
  TorchSaveTensor t;
  for (int d = 0; d < p.local_shape.ndim(); ++d) t.shape.push_back(p.local_shape[d]);
  t.values.assign(static_cast<size_t>(p.local_shape.numel()), 0.0f);
  int64_t covered = 0;
  for (const OwnedRange& r : owned_ranges(p, optimizer)) {
    optimizer.read_state(kind, r.shard, r.hi - r.lo, t.values.data() + r.lo);
    covered += r.hi - r.lo;
  }
  if (covered != p.local_shape.numel()) {
    return internal_error("the optimizer holds ", covered, " of ", p.local_shape.numel(),
                          " elements of ", p.spec.name, " (a distributed optimizer's shard?)");
  }
  return t;
}

// FP32Optimizer / Float16OptimizerWithFloat16Params.state_dict() of Megatron for the written
// parameters: Adam's state numbered group by group (weight decay, then not, by first
// appearance, as _get_param_groups groups them), the groups' hyperparameters.
StatusOr<std::shared_ptr<PickleValue>> megatron_optimizer_state(
    MegatronRankFile& file, const std::vector<WrittenParam>& params, Optimizer& optimizer,
    const Configs& c, bool distributed) {
  std::vector<std::pair<std::string, size_t>> shapes;
  for (const WrittenParam& w : params)
    shapes.emplace_back(w.name, static_cast<size_t>(w.param->local_shape.ndim()));
  std::vector<bool> group_no_wd;
  std::vector<std::vector<const WrittenParam*>> groups;
  for (const std::vector<size_t>& members : megatron_weight_decay_groups(shapes, &group_no_wd)) {
    groups.emplace_back();
    for (size_t k : members) groups.back().push_back(&params[k]);
  }
  const bool half = optimizer.has_state(OptimizerState::kMainParam);
  const int64_t step = optimizer.step_count();
  const OptimizerConfig& o = c.optimizer;
  auto state = pickle_value(PickleValue::Kind::kDict);
  auto param_groups = pickle_value(PickleValue::Kind::kList);
  auto main_groups = pickle_value(PickleValue::Kind::kList);
  int64_t index = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    auto indices = pickle_value(PickleValue::Kind::kList);
    auto mains = pickle_value(PickleValue::Kind::kList);
    for (const WrittenParam* w : groups[g]) {
      indices->items.push_back(pickle_int(index));
      if (step > 0 && !distributed) {  // torch keeps no state for a parameter never stepped
        MS_ASSIGN_OR_RETURN(TorchSaveTensor exp_avg,
                            state_tensor(optimizer, *w->param, OptimizerState::kExpAvg));
        MS_ASSIGN_OR_RETURN(TorchSaveTensor exp_avg_sq,
                            state_tensor(optimizer, *w->param, OptimizerState::kExpAvgSq));
        TorchSaveTensor step_tensor{
            {}, {static_cast<float>(step)}};  // torch's AdamW: a 0-d float tensor
        auto entry = dict_of({{"step", file.tensor(std::move(step_tensor))},
                              {"exp_avg", file.tensor(std::move(exp_avg))},
                              {"exp_avg_sq", file.tensor(std::move(exp_avg_sq))}});
        state->dict.emplace_back(pickle_int(index), entry);
      }
      if (half && !distributed) {
        MS_ASSIGN_OR_RETURN(TorchSaveTensor main,
                            state_tensor(optimizer, *w->param, OptimizerState::kMainParam));
        mains->items.push_back(file.tensor(std::move(main)));
      }
      ++index;
    }
    auto betas = pickle_value(PickleValue::Kind::kTuple);
    betas->items = {pickle_float(decimal_of(o.adam_beta1)), pickle_float(decimal_of(o.adam_beta2))};
    const double wd_mult = group_no_wd[g] ? 0.0 : 1.0;
    param_groups->items.push_back(dict_of({
        {"lr", pickle_float(decimal_of(o.lr))},
        {"betas", betas},
        {"eps", pickle_float(decimal_of(o.adam_eps))},
        {"weight_decay", pickle_float(decimal_of(o.weight_decay) * wd_mult)},
        {"amsgrad", pickle_bool(false)},
        {"maximize", pickle_bool(false)},
        {"foreach", pickle_value(PickleValue::Kind::kNone)},
        {"capturable", pickle_bool(false)},
        {"differentiable", pickle_bool(false)},
        {"fused", pickle_value(PickleValue::Kind::kNone)},
        {"bias_correction", pickle_bool(true)},  // Apex / Transformer Engine FusedAdam
        // Theirs is kept per group; the distributed optimizer keeps torch AdamW's there too.
        {"step", distributed ? pickle_float(static_cast<double>(step)) : pickle_int(step)},
        {"wd_mult", pickle_float(wd_mult)},
        {"lr_mult", pickle_float(1.0)},
        {"is_expert_parallel", pickle_bool(false)},
        {"is_decoupled_lr", pickle_bool(false)},
        {"max_lr", pickle_float(decimal_of(o.lr))},
        {"min_lr", pickle_float(decimal_of(o.min_lr))},
    }));
    // DistributedOptimizer.state_dict() drops the parameter lists (its state is in
    // distrib_optim.pt).
    if (!distributed)
      param_groups->items.back()->dict.emplace_back(pickle_string("params"), indices);
    main_groups->items.push_back(mains);
  }
  if (distributed) {
    PickleFields fields = {{"optimizer", dict_of({{"param_groups", param_groups}})}};
    if (const auto& scaler = optimizer.grad_scaler(); scaler && scaler->is_dynamic()) {
      const GradScalerState st = scaler->state();
      fields.emplace_back("grad_scaler",
                          dict_of({{"scale", file.tensor(TorchSaveTensor{{1}, {st.scale}})},
                                   {"growth_tracker", pickle_int(st.growth_tracker)},
                                   {"hysteresis_tracker", pickle_int(st.hysteresis_tracker)}}));
    }
    return dict_of(fields);
  }
  auto adam = dict_of({{"state", state}, {"param_groups", param_groups}});
  if (!half) return adam;
  PickleFields fields = {{"optimizer", adam}};
  if (const auto& scaler = optimizer.grad_scaler()) {
    PickleFields g;
    if (scaler->is_dynamic()) {
      const GradScalerState st = scaler->state();
      g = {{"scale", file.tensor(TorchSaveTensor{{1}, {st.scale}})},
           {"growth_tracker", pickle_int(st.growth_tracker)},
           {"hysteresis_tracker", pickle_int(st.hysteresis_tracker)}};
    }
    fields.emplace_back("grad_scaler", dict_of(g));
  }
  fields.emplace_back("fp32_from_fp16_params", main_groups);
  return dict_of(fields);
}

}  // namespace

StatusOr<std::optional<MegatronRankFile>> megatron_rank_file_of(
    const Configs& c, const ParameterRegistry& registry, const ParallelState& ps,
    const Backend& backend, const MegatronProgress& progress, Optimizer* optimizer) {
  const ParallelConfig& parallel = c.parallel;
  MS_ASSIGN_OR_RETURN(const PipelineLayout layout,
                      PipelineLayout::build(parallel, c.model.num_layers));
  // Chunk by chunk, each in Megatron's parameter order (as its state dicts list them and its
  // optimizer numbers them).
  std::vector<WrittenParam> written;
  for (const auto& owned : registry.params()) {
    const Parameter& p = *owned;
    const auto place = megatron_chunk_name(p.spec.name, layout, ps.pp_rank);
    if (!place)
      return internal_error("parameter ", p.spec.name, " is on none of pipeline rank ", ps.pp_rank,
                            "'s stages");
    written.push_back({place->chunk, place->name, &p});
  }
  std::stable_sort(written.begin(), written.end(),
                   [](const WrittenParam& x, const WrittenParam& y) {
                     return std::make_pair(x.chunk, megatron_order_key(x.name)) <
                            std::make_pair(y.chunk, megatron_order_key(y.name));
                   });
  // The distributed optimizer's state of this shard, gathered from its data-parallel ranks
  // (each adds what it owns into zeros: exact): [exp_avg of every parameter | exp_avg_sq | main].
  const bool distributed = optimizer != nullptr && parallel.use_distributed_optimizer;
  std::vector<float> gathered;
  std::vector<int64_t> at_of;  // each written parameter's start in one block
  int64_t block = 0;
  if (distributed) {
    for (const WrittenParam& w : written) {
      at_of.push_back(block);
      block += w.param->local_shape.numel();
    }
    const bool half = optimizer->has_state(OptimizerState::kMainParam);
    gathered.assign(static_cast<size_t>(3 * block), 0.0f);
    for (size_t k = 0; k < written.size(); ++k) {
      const OptimizerState kinds[3] = {OptimizerState::kExpAvg, OptimizerState::kExpAvgSq,
                                       OptimizerState::kMainParam};
      for (int b = 0; b < (half ? 3 : 2); ++b) {
        for (const OwnedRange& r : owned_ranges(*written[k].param, *optimizer)) {
          optimizer->read_state(kinds[b], r.shard, r.hi - r.lo,
                                gathered.data() + b * block + at_of[k] + r.lo);
        }
      }
    }
    // In slices of --hccl-slice-size elements (MindSpeed's bound on one call's buffers).
    const int64_t slice = std::max<int64_t>(1, parallel.hccl_slice_size);
    int64_t calls = 0;
    for (int64_t lo = 0; lo < static_cast<int64_t>(gathered.size()); lo += slice, ++calls) {
      ps.dp_cp().all_reduce(gathered.data() + lo,
                            std::min<int64_t>(slice, static_cast<int64_t>(gathered.size()) - lo));
    }
    if (ps.world_rank == 0) {
      log_info("> distrib_optim.pt: ", gathered.size(),
               " state elements gathered over data parallelism in ", calls,
               " call(s) of at most --hccl-slice-size ", slice);
    }
  }
  if (ps.dp_cp().rank() != 0) return std::optional<MegatronRankFile>();
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
      // What Megatron's buffer layout (distrib_optim.pt) depends on.
      {"overlap_grad_reduce", pickle_bool(parallel.overlap_grad_reduce)},
      {"ddp_bucket_size", parallel.ddp_bucket_size > 0 ? pickle_int(parallel.ddp_bucket_size)
                                                       : pickle_value(PickleValue::Kind::kNone)},
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
  // args.vocab_size is the flag: NullTokenizer's --vocab-size, one below its vocabulary (its EOD).
  ModelConfig args_model = c.model;
  if (c.data.tokenizer_type == "NullTokenizer") args_model.vocab_size -= 1;
  MegatronRankFile file(
      megatron_args_namespace(args_model, c.model.padded_vocab_size, split, extra),
      progress.iteration, layout.chunks_per_rank,
      {{"num_floating_point_operations_so_far",
        pickle_float(progress.floating_point_operations_so_far)}});
  for (const WrittenParam& w : written) {
    const Parameter& p = *w.param;
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
        const uint16_t bit = bits[static_cast<size_t>(i)];
        tensor.values[static_cast<size_t>(i)] =
            p.data.dtype == DType::kBFloat16 ? bf16_to_float(bf16{bit}) : fp16_to_float(fp16{bit});
      }
    } else {
      return internal_error("parameter ", p.spec.name, " is stored as ", dtype_name(p.data.dtype));
    }
    file.add(w.chunk, w.name, std::move(tensor));
  }
  if (optimizer != nullptr) {
    MS_ASSIGN_OR_RETURN(std::shared_ptr<PickleValue> state,
                        megatron_optimizer_state(file, written, *optimizer, c, distributed));
    file.set("optimizer", std::move(state));
    file.set("opt_param_scheduler", megatron_scheduler_state(c, progress.consumed_train_samples));
  }
  if (distributed) {
    // distrib_optim.pt: per model chunk, the flat fp32 main parameters and moments in Megatron's
    // buffer layout (the parameters reversed, 64-aligned, buckets without their end padding).
    const bool half = optimizer->has_state(OptimizerState::kMainParam);
    const bool tied = !c.model.untie_embeddings_and_output_weights;
    const int64_t dp_cp = ps.dp_cp().size();
    const int pp = parallel.pipeline_model_parallel_size;
    auto root = dict_of({{"buckets_coalesced", pickle_bool(true)}});
    for (int chunk = 0; chunk < layout.chunks_per_rank; ++chunk) {
      std::vector<size_t> members;
      std::vector<BufferParam> params;
      const bool pre = ps.pp_rank == 0 && chunk == 0,
                 post = ps.pp_rank == pp - 1 && chunk == layout.chunks_per_rank - 1;
      int64_t total = 0;
      for (size_t k = 0; k < written.size(); ++k) {
        if (written[k].chunk != chunk) continue;
        members.push_back(k);
        params.push_back({written[k].param->local_shape.numel(),
                          megatron_shared_embedding(written[k].name, tied, pp, pre, post)});
        total += params.back().numel;
      }
      const int64_t bucket = megatron_bucket_size(parallel.overlap_grad_reduce, false, ps.pp_rank,
                                                  chunk, 0, parallel.ddp_bucket_size, dp_cp, total);
      int64_t numel = 0;
      MS_ASSIGN_OR_RETURN(std::vector<BufferPlace> offsets,
                          megatron_distopt_offsets(params, dp_cp, bucket, false, &numel));
      TorchSaveTensor flat[3];  // param, exp_avg, exp_avg_sq
      for (TorchSaveTensor& t : flat) {
        t.shape = {numel};
        t.values.assign(static_cast<size_t>(numel), 0.0f);
      }
      for (size_t m = 0; m < members.size(); ++m) {
        const WrittenParam& w = written[members[m]];
        const int64_t n = params[m].numel,
                      skip = offsets[m].skip;  // Megatron's file drops `skip` leading elements
        std::vector<float> main(static_cast<size_t>(n));
        if (half) {
          std::copy_n(gathered.data() + 2 * block + at_of[members[m]], n, main.data());
        } else {  // fp32 weights are their own main copy
          backend.kernels.copy_to_host(backend.context, main.data(), w.param->data.data, n * 4);
        }
        std::copy(main.begin() + skip, main.end(), flat[0].values.begin() + offsets[m].offset);
        const float* exp_avg = gathered.data() + at_of[members[m]];
        const float* exp_avg_sq = gathered.data() + block + at_of[members[m]];
        std::copy(exp_avg + skip, exp_avg + n, flat[1].values.begin() + offsets[m].offset);
        std::copy(exp_avg_sq + skip, exp_avg_sq + n, flat[2].values.begin() + offsets[m].offset);
      }
      auto dtypes = pickle_value(PickleValue::Kind::kTuple);
      auto param_dtype = pickle_value(PickleValue::Kind::kGlobal);
      param_dtype->s = c.training.bf16   ? "torch.bfloat16"
                       : c.training.fp16 ? "torch.float16"
                                         : "torch.float32";
      auto grad_dtype = pickle_value(PickleValue::Kind::kGlobal);
      grad_dtype->s = "torch.float32";
      dtypes->items = {param_dtype, grad_dtype};
      auto state = dict_of({{"param", file.distributed_tensor(std::move(flat[0]))},
                            {"exp_avg", file.distributed_tensor(std::move(flat[1]))},
                            {"exp_avg_sq", file.distributed_tensor(std::move(flat[2]))},
                            {"numel_unpadded", pickle_int(numel)}});
      auto by_dtype = pickle_value(PickleValue::Kind::kDict);
      by_dtype->dict.emplace_back(dtypes, state);
      root->dict.emplace_back(pickle_int(chunk), by_dtype);
    }
    file.set_distributed_optimizer(root);
  }
  return std::optional<MegatronRankFile>(std::move(file));
}

}  // namespace mindspeed
