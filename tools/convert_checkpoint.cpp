// convert_checkpoint: moves model weights between Hugging Face directories and this engine's
// checkpoints, with MindSpeed-LLM convert_ckpt.py's flag names:
//   convert_checkpoint --load-model-type hf --save-model-type mg --load-dir HF --save-dir CKPT
//   convert_checkpoint --load-model-type mg --save-model-type hf --load-dir CKPT --save-dir HF
// `hf` is a directory transformers loads as it is (config.json + model.safetensors, GPT-2 or
// LLaMA); `mg` is this engine's checkpoint (training/checkpointing.h): weights only, at
// iteration 0, readable by pretrain_gpt --load at any parallel layout, so
// --target-tensor/pipeline-parallel-size are accepted but do not change the files. `mg-torch`
// (Megatron-LM's legacy --ckpt-format torch files: iter_*/mp_rank_XX[_YYY]/model_optim_rng.pt)
// is read (any tensor- and pipeline-parallel split, Megatron core names, local or Transformer
// Engine layer specs); writing it is not implemented yet.
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "config/configs.h"
#include "config/pipeline_layout.h"
#include "core/logging.h"
#include "core/status.h"
#include "distributed/param_and_grad_buffer.h"
#include "kernels/backend.h"
#include "models/gpt/gpt_model_chunks.h"
#include "checkpointing/torch_checkpoint.h"
#include "models/gpt/hf_checkpoint.h"
#include "optimizer/optimizer.h"
#include "training/checkpointing.h"

namespace mindspeed {
namespace {

struct Options {
  std::string load_type, save_type, load_dir, save_dir, model_type_hf;
  int target_tp = 1, target_pp = 1;
};

// Hugging Face directory -> this engine's checkpoint (iteration 0, weights only).
Status hf_to_mg(const Options& o) {
  MS_ASSIGN_OR_RETURN(HfModelInfo info, read_hf_config(o.load_dir));
  Configs c;
  c.model = info.config;
  c.model.padded_vocab_size = padded_vocab(c.model.vocab_size, c.model.make_vocab_size_divisible_by, 1);
  const std::unique_ptr<ParallelState> ps = ParallelState::single_process();
  const Backend backend = select_backend(KernelOptions{}, 1);
  Allocator alloc;
  ParameterRegistry registry;
  GPTModelChunks model(c.model, *ps, registry, PipelineLayout::single(c.model.num_layers), false);
  ParamAndGradBuffer buffer(registry, alloc, BufferOptions{});
  MS_RETURN_IF_ERROR(load_hf_checkpoint(o.load_dir, model[0], *ps));
  Optimizer optimizer(c.optimizer, buffer, *ps, alloc, backend, false);
  MS_RETURN_IF_ERROR(save_checkpoint(o.save_dir, CheckpointState{}, c, {registry, buffer, optimizer, *ps},
                                     /*save_optimizer=*/false));
  std::printf("saved %s (%s, %lld layers) as a mindspeed-cpp checkpoint in %s; pretrain_gpt --load %s reads it "
              "at any parallel layout\n",
              o.load_dir.c_str(), info.architecture == HfArchitecture::kGpt2 ? "gpt2" : "llama-style",
              static_cast<long long>(c.model.num_layers), o.save_dir.c_str(), o.save_dir.c_str());
  return ok_status();
}

// This engine's checkpoint (its tracked iteration) -> Hugging Face directory.
Status mg_to_hf(const Options& o) {
  MS_ASSIGN_OR_RETURN(std::string iteration_dir, tracked_iteration_dir(o.load_dir));
  MS_ASSIGN_OR_RETURN(ModelConfig config, checkpoint_model_config(iteration_dir));
  HfArchitecture arch = config.swiglu ? HfArchitecture::kLlama : HfArchitecture::kGpt2;
  if (o.model_type_hf == "gpt2") arch = HfArchitecture::kGpt2;
  if (o.model_type_hf == "llama2" || o.model_type_hf == "llama") arch = HfArchitecture::kLlama;
  if (o.model_type_hf == "qwen2") arch = HfArchitecture::kQwen2;
  if (o.model_type_hf == "mistral") arch = HfArchitecture::kMistral;
  if ((arch != HfArchitecture::kGpt2) != config.swiglu) {
    return invalid_argument("--model-type-hf ", o.model_type_hf, " does not fit the checkpoint (",
                            config.swiglu ? "a LLaMA-style model" : "a GPT-2-style model", ")");
  }
  if (!config.noop_layers.empty()) {
    return unimplemented("the checkpoint has --noop-layers; Hugging Face models have no identity layers");
  }
  MS_ASSIGN_OR_RETURN(auto tensors, read_checkpoint_tensors(iteration_dir, "param"));
  MS_RETURN_IF_ERROR(write_hf_checkpoint(o.save_dir, config, arch, tensors));
  std::printf("saved %s as a Hugging Face directory in %s\n", iteration_dir.c_str(), o.save_dir.c_str());
  return ok_status();
}

// ---- Megatron-LM legacy checkpoints (--ckpt-format torch) --------------------------------

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

// Megatron's checkpoint of a GPT model (one file per tensor- and pipeline-parallel rank,
// layers numbered per stage) merged into this process's whole model.
Status load_megatron_torch(const std::string& dir, ModelConfig* config, ParameterRegistry& registry,
                           std::unique_ptr<GPTModel>* model, std::unique_ptr<ParamAndGradBuffer>* buffer,
                           Allocator& alloc, const ParallelState& ps) {
  MS_ASSIGN_OR_RETURN(std::string iteration_dir, tracked_iteration_dir(dir));
  std::map<std::pair<int, int>, TorchCheckpointFile> files;  // (tp, pp) -> file
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(iteration_dir, ec)) {
    const std::string name = entry.path().filename().string();
    int t = -1, p = 0;
    if (std::sscanf(name.c_str(), "mp_rank_%2d_%3d", &t, &p) < 1 || t < 0) continue;
    MS_ASSIGN_OR_RETURN(TorchCheckpointFile f, TorchCheckpointFile::open(entry.path().string() + "/model_optim_rng.pt"));
    files.emplace(std::make_pair(t, p), std::move(f));
  }
  if (ec || files.empty()) return not_found("'", iteration_dir, "' holds no mp_rank_XX[_YYY]/model_optim_rng.pt");
  const TorchCheckpointFile& first = files.begin()->second;
  const PickleValue* args_value = first.root().get("args");
  if (args_value == nullptr || args_value->kind != PickleValue::Kind::kObject) {
    return invalid_argument(first.path(), ": no 'args' namespace (not a Megatron checkpoint?)");
  }
  const MegatronArgs a{args_value, first.path()};
  const int64_t tp = a.integer_or("tensor_model_parallel_size", 1), pp = a.integer_or("pipeline_model_parallel_size", 1);
  if (a.field("virtual_pipeline_model_parallel_size") != nullptr &&
      a.field("virtual_pipeline_model_parallel_size")->kind == PickleValue::Kind::kInt) {
    return unimplemented(first.path(), ": virtual-pipeline checkpoints (model0, model1, ...) are not read yet");
  }
  if (static_cast<int64_t>(files.size()) != tp * pp) {
    return invalid_argument(iteration_dir, ": ", files.size(), " rank files for tensor-parallel ", tp,
                            " x pipeline-parallel ", pp, " (incomplete checkpoint?)");
  }
  ModelConfig& m = *config;
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
  if (m.num_layers % pp != 0) return unimplemented(first.path(), ": uneven pipeline stages are not read yet");
  *model = std::make_unique<GPTModel>(m, ps, registry);
  *buffer = std::make_unique<ParamAndGradBuffer>(registry, alloc, BufferOptions{});
  const int64_t per_stage = m.num_layers / pp;
  for (const auto& owned : registry.params()) {
    Parameter& param = *owned;
    const std::string& name = param.spec.name;
    int64_t stage = 0;
    std::string local = name;
    int64_t layer = -1;
    if (std::sscanf(name.c_str(), "decoder.layers.%lld.", reinterpret_cast<long long*>(&layer)) == 1) {
      stage = layer / per_stage;
      local = "decoder.layers." + std::to_string(layer % per_stage) + name.substr(name.find('.', 15));
    } else if (name.starts_with("decoder.final_layernorm") || name.starts_with("output_layer")) {
      stage = pp - 1;
    }
    // Transformer Engine's fused spec keeps the norms inside the next linear layer.
    std::vector<std::string> keys{local};
    for (const auto& [ours, te] : {std::pair<std::string, std::string>{"input_layernorm.", "self_attention.linear_qkv.layer_norm_"},
                                   {"pre_mlp_layernorm.", "mlp.linear_fc1.layer_norm_"}}) {
      const size_t at = local.find(ours);
      if (at != std::string::npos) keys.push_back(local.substr(0, at) + te + local.substr(at + ours.size()));
    }
    const int slices = param.is_tensor_parallel() ? static_cast<int>(tp) : 1;
    std::vector<float> full(static_cast<size_t>(param.spec.global_shape.numel()));
    for (int t = 0; t < slices; ++t) {
      const TorchCheckpointFile& f = files.at({t, static_cast<int>(stage)});
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
      if (static_cast<int64_t>(values.size()) * slices != param.spec.global_shape.numel()) {
        return invalid_argument(f.path(), ": '", keys.front(), "' has ", values.size(), " values, expected ",
                                param.spec.global_shape.numel() / slices);
      }
      unslice_from_rank(full.data(), values.data(), param.spec, t, slices);
    }
    set_parameter_from_full(param, full.data(), 0, 1);
  }
  return ok_status();
}

Status mg_torch_to(const Options& o) {
  Configs c;
  const std::unique_ptr<ParallelState> ps = ParallelState::single_process();
  const Backend backend = select_backend(KernelOptions{}, 1);
  Allocator alloc;
  ParameterRegistry registry;
  std::unique_ptr<GPTModel> model;
  std::unique_ptr<ParamAndGradBuffer> buffer;
  MS_RETURN_IF_ERROR(load_megatron_torch(o.load_dir, &c.model, registry, &model, &buffer, alloc, *ps));
  if (o.save_type == "mg") {
    Optimizer optimizer(c.optimizer, *buffer, *ps, alloc, backend, false);
    MS_RETURN_IF_ERROR(save_checkpoint(o.save_dir, CheckpointState{}, c, {registry, *buffer, optimizer, *ps}, false));
  } else {
    HfArchitecture arch = c.model.swiglu ? HfArchitecture::kLlama : HfArchitecture::kGpt2;
    if (o.model_type_hf == "gpt2") arch = HfArchitecture::kGpt2;
    if (o.model_type_hf == "qwen2") arch = HfArchitecture::kQwen2;
    if (o.model_type_hf == "mistral") arch = HfArchitecture::kMistral;
    FullTensors tensors;
    for (const auto& p : registry.params()) tensors[p->spec.name].assign(p->data.f32(), p->data.f32() + p->local_shape.numel());
    MS_RETURN_IF_ERROR(write_hf_checkpoint(o.save_dir, c.model, arch, tensors));
  }
  std::printf("converted the Megatron-LM checkpoint %s (%lld layers) to %s in %s\n", o.load_dir.c_str(),
              static_cast<long long>(c.model.num_layers), o.save_type.c_str(), o.save_dir.c_str());
  return ok_status();
}

Status run(const Options& o) {
  if (o.save_type == "mg-torch") {
    return unimplemented("writing mg-torch (Megatron-LM's --ckpt-format torch files) is not implemented yet; "
                         "mg-torch can be read (--load-model-type mg-torch)");
  }
  if (o.load_type == "mg-torch" && (o.save_type == "hf" || o.save_type == "mg")) return mg_torch_to(o);
  if (o.load_type == "hf" && o.save_type == "mg") return hf_to_mg(o);
  if (o.load_type == "mg" && o.save_type == "hf") return mg_to_hf(o);
  return invalid_argument("--load-model-type ", o.load_type, " --save-model-type ", o.save_type,
                          ": supported are hf -> mg and mg -> hf (an mg checkpoint loads at any parallel layout "
                          "without conversion)");
}

}  // namespace
}  // namespace mindspeed

int main(int argc, char** argv) {
  mindspeed::Options o;
  CLI::App app{"Convert checkpoints between Hugging Face and mindspeed-cpp (MindSpeed-LLM convert_ckpt.py flags)"};
  app.add_option("--load-model-type", o.load_type, "hf, mg or mg-torch")
      ->required()
      ->check(CLI::IsMember({"hf", "mg", "mg-torch"}));
  app.add_option("--save-model-type", o.save_type, "hf, mg or mg-torch")
      ->required()
      ->check(CLI::IsMember({"hf", "mg", "mg-torch"}));
  app.add_option("--load-dir", o.load_dir, "Directory to read")->required();
  app.add_option("--save-dir", o.save_dir, "Directory to write")->required();
  app.add_option("--model-type-hf", o.model_type_hf,
                 "gpt2, llama2, llama, qwen2 or mistral (default: gpt2 or llama, from the checkpoint)")
      ->check(CLI::IsMember({"gpt2", "llama2", "llama", "qwen2", "mistral"}));
  app.add_option("--target-tensor-parallel-size", o.target_tp,
                 "Accepted: mg checkpoints load at any tensor-parallel size")
      ->check(CLI::PositiveNumber);
  app.add_option("--target-pipeline-parallel-size", o.target_pp,
                 "Accepted: mg checkpoints load at any pipeline-parallel size")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const mindspeed::Status s = mindspeed::run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "convert_checkpoint: error: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
