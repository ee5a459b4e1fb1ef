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
// Engine layer specs) and written (release/, at --target-tensor/pipeline-parallel-size).
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
#include "checkpointing/durable_file.h"
#include "checkpointing/torch_checkpoint.h"
#include "models/gpt/hf_checkpoint.h"
#include "optimizer/optimizer.h"
#include "training/checkpointing.h"
#include "training/megatron_torch_checkpoint.h"

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

// Megatron's checkpoint of a GPT model merged into this process's whole model.
Status load_megatron_torch(const std::string& dir, ModelConfig* config, ParameterRegistry& registry,
                           std::unique_ptr<GPTModel>* model, std::unique_ptr<ParamAndGradBuffer>* buffer,
                           Allocator& alloc, const ParallelState& ps) {
  MS_ASSIGN_OR_RETURN(MegatronTorchCheckpoint ckpt, MegatronTorchCheckpoint::open(dir));
  *config = ckpt.model_config();
  *model = std::make_unique<GPTModel>(*config, ps, registry);
  *buffer = std::make_unique<ParamAndGradBuffer>(registry, alloc, BufferOptions{});
  for (const auto& p : registry.params()) {
    MS_ASSIGN_OR_RETURN(std::vector<float> full, ckpt.full_tensor(p->spec));
    set_parameter_from_full(*p, full.data(), 0, 1);
  }
  return ok_status();
}

// Megatron-LM's legacy checkpoint of the whole model at --target-tensor/pipeline-parallel-size:
// DIR/release/mp_rank_XX[_YYY]/model_optim_rng.pt and the tracker "release" (weights only, as
// Megatron's own converters write).
Status write_megatron_torch(const std::string& dir, const ModelConfig& m, const ParameterRegistry& registry, int tp,
                            int pp) {
  if (m.num_layers % pp != 0) {
    return invalid_argument("--target-pipeline-parallel-size ", pp, " does not divide the ", m.num_layers, " layers");
  }
  for (const auto& p : registry.params()) {
    if (p->is_tensor_parallel() && p->spec.global_shape[p->spec.split == TensorParallelSplit::kColumns ? 1 : 0] % tp != 0) {
      return invalid_argument("--target-tensor-parallel-size ", tp, " does not divide ", p->spec.name);
    }
  }
  auto make_value = [](PickleValue::Kind k) {
    auto v = std::make_shared<PickleValue>();
    v->kind = k;
    return v;
  };
  auto text = [&](const std::string& x) {
    auto v = make_value(PickleValue::Kind::kString);
    v->s = x;
    return v;
  };
  auto integer = [&](int64_t x) {
    auto v = make_value(PickleValue::Kind::kInt);
    v->i = x;
    return v;
  };
  auto number = [&](double x) {
    auto v = make_value(PickleValue::Kind::kFloat);
    v->f = x;
    return v;
  };
  auto boolean = [&](bool x) {
    auto v = make_value(PickleValue::Kind::kBool);
    v->b = x;
    return v;
  };
  // Megatron's argparse.Namespace: the fields check_checkpoint_args compares and the model's shape.
  auto args = make_value(PickleValue::Kind::kObject);
  args->object_class = "argparse.Namespace";
  const std::vector<std::pair<std::string, std::shared_ptr<PickleValue>>> fields = {
      {"num_layers", integer(m.num_layers)},
      {"hidden_size", integer(m.hidden_size)},
      {"ffn_hidden_size", integer(m.ffn_hidden_size)},
      {"num_attention_heads", integer(m.num_attention_heads)},
      {"kv_channels", integer(m.kv_channels)},
      {"group_query_attention", boolean(m.group_query_attention)},
      {"num_query_groups", integer(m.query_groups())},
      {"max_position_embeddings", integer(m.max_position_embeddings)},
      {"padded_vocab_size", integer(m.padded_vocab_size)},
      {"vocab_size", integer(m.vocab_size)},
      {"make_vocab_size_divisible_by", integer(m.make_vocab_size_divisible_by)},
      {"normalization", text(m.normalization == Normalization::kRMSNorm ? "RMSNorm" : "LayerNorm")},
      {"norm_epsilon", number(m.norm_epsilon)},
      {"swiglu", boolean(m.swiglu)},
      {"openai_gelu", boolean(m.openai_gelu)},
      {"position_embedding_type",
       text(m.position_embedding_type == PositionEmbeddingType::kRope ? "rope"
            : m.position_embedding_type == PositionEmbeddingType::kNone ? "none"
                                                                          : "learned_absolute")},
      {"add_position_embedding", boolean(m.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute)},
      {"rotary_base", integer(static_cast<int64_t>(m.rotary_base))},
      {"rotary_seq_len_interpolation_factor", number(m.rotary_seq_len_interpolation_factor)},
      {"use_rope_scaling", boolean(m.rope_scaling == RopeScaling::kLlama3)},
      {"rope_scaling_factor", number(m.rope_scaling_factor)},
      // Not Megatron arguments (its Llama 3.1 scaling fixes them); kept so nothing is lost.
      {"low_freq_factor", number(m.rope_low_freq_factor)},
      {"high_freq_factor", number(m.rope_high_freq_factor)},
      {"original_max_position_embeddings", integer(m.rope_original_max_position_embeddings)},
      {"untie_embeddings_and_output_weights", boolean(m.untie_embeddings_and_output_weights)},
      {"add_bias_linear", boolean(m.add_bias_linear)},
      {"add_qkv_bias", boolean(m.add_qkv_bias)},
      {"tensor_model_parallel_size", integer(tp)},
      {"pipeline_model_parallel_size", integer(pp)},
      {"transformer_impl", text("local")},
      {"ckpt_format", text("torch")},
  };
  for (const auto& [k, v] : fields) args->dict.emplace_back(text(k), v);
  const std::string release = dir + "/release";
  const int64_t per_stage = m.num_layers / pp;
  for (int t = 0; t < tp; ++t) {
    for (int stage = 0; stage < pp; ++stage) {
      std::vector<TorchSaveTensor> tensors;
      auto model = make_value(PickleValue::Kind::kDict);
      auto add = [&](const std::string& name, const Parameter& p) {
        const int slices = p.is_tensor_parallel() ? tp : 1;
        std::vector<int64_t> shape;
        for (int i = 0; i < p.spec.global_shape.ndim(); ++i) shape.push_back(p.spec.global_shape[i]);
        if (slices > 1) shape[p.spec.split == TensorParallelSplit::kColumns ? 1 : 0] /= slices;
        TorchSaveTensor out{shape, std::vector<float>(static_cast<size_t>(p.spec.global_shape.numel() / slices))};
        slice_for_rank(out.values.data(), p.data.f32(), p.spec, slices > 1 ? t : 0, slices);
        auto ref = make_value(PickleValue::Kind::kTensor);
        ref->tensor = std::make_shared<TorchTensorRef>();
        ref->tensor->key = std::to_string(tensors.size());
        tensors.push_back(std::move(out));
        model->dict.emplace_back(text(name), ref);
      };
      for (const auto& owned : registry.params()) {
        const Parameter& p = *owned;
        const std::string& name = p.spec.name;
        long long layer = -1;
        if (std::sscanf(name.c_str(), "decoder.layers.%lld.", &layer) == 1) {
          if (layer / per_stage != stage) continue;
          add("decoder.layers." + std::to_string(layer % per_stage) + name.substr(name.find('.', 15)), p);
        } else if (name.starts_with("embedding.")) {
          if (stage == 0) add(name, p);
          // Tied embeddings with a pipeline: the last stage keeps its copy as the output layer.
          if (stage == pp - 1 && pp > 1 && !m.untie_embeddings_and_output_weights && name == "embedding.word_embeddings.weight") {
            add("output_layer.weight", p);
          }
        } else if (stage == pp - 1) {
          add(name, p);
        }
      }
      auto root = make_value(PickleValue::Kind::kDict);
      root->dict.emplace_back(text("args"), args);
      root->dict.emplace_back(text("checkpoint_version"), number(3.0));
      root->dict.emplace_back(text("iteration"), integer(0));
      root->dict.emplace_back(text("model"), model);
      char rank[32];
      if (pp == 1) {
        std::snprintf(rank, sizeof rank, "mp_rank_%02d", t);
      } else {
        std::snprintf(rank, sizeof rank, "mp_rank_%02d_%03d", t, stage);
      }
      std::error_code ec;
      std::filesystem::create_directories(release + "/" + rank, ec);
      if (ec) return failed_precondition("cannot create '", release, "/", rank, "': ", ec.message());
      MS_RETURN_IF_ERROR(
          write_torch_save(release + "/" + rank + "/model_optim_rng.pt", "model_optim_rng", *root, tensors));
    }
  }
  return write_file_atomically(dir + "/latest_checkpointed_iteration.txt", std::string("release"));
}

// Any source into this process's whole model (for mg-torch output).
Status load_whole_model(const Options& o, ModelConfig* config, ParameterRegistry& registry,
                        std::unique_ptr<GPTModel>* model, std::unique_ptr<ParamAndGradBuffer>* buffer, Allocator& alloc,
                        const ParallelState& ps) {
  if (o.load_type == "mg-torch") return load_megatron_torch(o.load_dir, config, registry, model, buffer, alloc, ps);
  if (o.load_type == "hf") {
    MS_ASSIGN_OR_RETURN(HfModelInfo info, read_hf_config(o.load_dir));
    *config = info.config;
    config->padded_vocab_size = padded_vocab(config->vocab_size, config->make_vocab_size_divisible_by, 1);
    *model = std::make_unique<GPTModel>(*config, ps, registry);
    *buffer = std::make_unique<ParamAndGradBuffer>(registry, alloc, BufferOptions{});
    return load_hf_checkpoint(o.load_dir, **model, ps);
  }
  // mg: this engine's checkpoint, weights only.
  MS_ASSIGN_OR_RETURN(std::string iteration_dir, tracked_iteration_dir(o.load_dir));
  MS_ASSIGN_OR_RETURN(*config, checkpoint_model_config(iteration_dir));
  *model = std::make_unique<GPTModel>(*config, ps, registry);
  *buffer = std::make_unique<ParamAndGradBuffer>(registry, alloc, BufferOptions{});
  MS_ASSIGN_OR_RETURN(auto tensors, read_checkpoint_tensors(iteration_dir, "param"));
  for (const auto& p : registry.params()) {
    auto it = tensors.find(p->spec.name);
    if (it == tensors.end() || static_cast<int64_t>(it->second.size()) != p->spec.global_shape.numel()) {
      return invalid_argument(iteration_dir, ": no tensor '", p->spec.name, "' of the model's shape");
    }
    set_parameter_from_full(*p, it->second.data(), 0, 1);
  }
  return ok_status();
}

Status to_mg_torch(const Options& o) {
  Configs c;
  const std::unique_ptr<ParallelState> ps = ParallelState::single_process();
  Allocator alloc;
  ParameterRegistry registry;
  std::unique_ptr<GPTModel> model;
  std::unique_ptr<ParamAndGradBuffer> buffer;
  MS_RETURN_IF_ERROR(load_whole_model(o, &c.model, registry, &model, &buffer, alloc, *ps));
  MS_RETURN_IF_ERROR(write_megatron_torch(o.save_dir, c.model, registry, o.target_tp, o.target_pp));
  std::printf("wrote a Megatron-LM --ckpt-format torch checkpoint (tensor-parallel %d x pipeline-parallel %d) in %s\n",
              o.target_tp, o.target_pp, o.save_dir.c_str());
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
  if (o.save_type == "mg-torch") return to_mg_torch(o);
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
                 "mg-torch output: tensor-parallel size (mg checkpoints load at any)")
      ->check(CLI::PositiveNumber);
  app.add_option("--target-pipeline-parallel-size", o.target_pp,
                 "mg-torch output: pipeline-parallel size (mg checkpoints load at any)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const mindspeed::Status s = mindspeed::run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "convert_checkpoint: error: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
