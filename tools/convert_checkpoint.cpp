// convert_checkpoint: moves model weights between Hugging Face directories and this engine's
// checkpoints, with MindSpeed-LLM convert_ckpt.py's flag names:
//   convert_checkpoint --load-model-type hf --save-model-type mg --load-dir HF --save-dir CKPT
//   convert_checkpoint --load-model-type mg --save-model-type hf --load-dir CKPT --save-dir HF
// `hf` is a directory transformers loads as it is (config.json + model.safetensors, GPT-2 or
// LLaMA); `mg` is this engine's checkpoint (training/checkpointing.h): weights only, at
// iteration 0, readable by pretrain_gpt --load at any parallel layout, so
// --target-tensor/pipeline-parallel-size are accepted but do not change the files. `mg-torch`
// (Megatron-LM's legacy --ckpt-format torch files: iter_*/mp_rank_XX[_YYY]/model_optim_rng.pt)
// is read (any tensor- and pipeline-parallel split, virtual pipeline (model0, model1, ...) and
// uneven first/last stages included, Megatron core names, local or Transformer Engine layer
// specs) and written (release/, at --target-tensor/pipeline-parallel-size, with
// --num-layers-per-virtual-pipeline-stage in Megatron's virtual-pipeline layout).
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "config/configs.h"
#include "config/pipeline_layout.h"
#include "core/status.h"
#include "checkpointing/durable_file.h"
#include "checkpointing/torch_checkpoint.h"
#include "distributed/param_and_grad_buffer.h"
#include "kernels/backend.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/hf_checkpoint.h"
#include "optimizer/optimizer.h"
#include "training/checkpointing.h"
#include "training/megatron_torch_checkpoint.h"

namespace mindspeed {
namespace {

struct Options {
  std::string load_type, save_type, load_dir, save_dir, model_type_hf;
  int target_tp = 1, target_pp = 1;
  int64_t layers_per_virtual_stage = 0;  ///< --num-layers-per-virtual-pipeline-stage (0: none)
};

// Megatron-LM's legacy checkpoint of the whole model at --target-tensor/pipeline-parallel-size:
// DIR/release/mp_rank_XX[_YYY]/model_optim_rng.pt and the tracker "release" (weights only, as
// Megatron's own converters write). With --num-layers-per-virtual-pipeline-stage K each rank
// file holds its model chunks as model0, model1, ... (Megatron's interleaved layout: chunk c
// of pipeline rank r is stage c*P + r of K layers, numbered from 0 in the chunk).
Status write_megatron_torch(const std::string& dir, const ModelConfig& m, const ParameterRegistry& registry, int tp,
                            int pp, int64_t layers_per_virtual_stage) {
  if (m.num_layers % pp != 0) {
    return invalid_argument("--target-pipeline-parallel-size ", pp, " does not divide the ", m.num_layers, " layers");
  }
  ParallelConfig parallel;
  parallel.pipeline_model_parallel_size = pp;
  parallel.num_layers_per_virtual_pipeline_stage = layers_per_virtual_stage;
  auto built = PipelineLayout::build(parallel, m.num_layers);
  if (!built.ok()) {
    return invalid_argument("--num-layers-per-virtual-pipeline-stage ", layers_per_virtual_stage,
                            " with --target-pipeline-parallel-size ", pp, ": ", built.status().message());
  }
  const PipelineLayout& layout = *built;
  const int chunks = layout.chunks_per_rank;
  // Megatron pads the vocabulary to a multiple of --make-vocab-size-divisible-by times the
  // tensor-parallel size (_vocab_size_with_padding); a run at the target size builds its
  // embedding and output layer with that many rows and refuses any other.
  const int64_t padded = padded_vocab(m.vocab_size, m.make_vocab_size_divisible_by, tp);
  auto is_vocab = [](const Parameter& p) {
    return p.spec.name == "embedding.word_embeddings.weight" || p.spec.name == "output_layer.weight";
  };
  for (const auto& p : registry.params()) {
    if (is_vocab(*p)) continue;  // re-padded below
    if (p->is_tensor_parallel() && p->spec.global_shape[p->spec.split == TensorParallelSplit::kColumns ? 1 : 0] % tp != 0) {
      return invalid_argument("--target-tensor-parallel-size ", tp, " does not divide ", p->spec.name);
    }
  }
  const auto args = megatron_args_namespace(
      m, padded,
      MegatronTorchSplit{.tp = tp,
                         .pp = pp,
                         .virtual_stages = chunks,
                         .layers_per_virtual_stage = chunks > 1 ? layers_per_virtual_stage : 0});
  const std::string release = dir + "/release";
  for (int t = 0; t < tp; ++t) {
    for (int stage = 0; stage < pp; ++stage) {
      MegatronRankFile file(args, /*iteration=*/0, chunks);
      auto add = [&](int chunk, const std::string& name, const Parameter& p) {
        const int slices = p.is_tensor_parallel() ? tp : 1;
        ParameterSpec spec = p.spec;
        const float* values = p.data.f32();
        std::vector<float> repadded;  // [padded, h]: the real rows, then zeros
        if (is_vocab(p) && spec.global_shape[0] != padded) {
          const int64_t h = spec.global_shape[1], rows = std::min(padded, spec.global_shape[0]);
          repadded.assign(static_cast<size_t>(padded * h), 0.0f);
          std::copy(values, values + rows * h, repadded.begin());
          spec.global_shape = Shape{padded, h};
          values = repadded.data();
        }
        std::vector<int64_t> shape;
        for (int i = 0; i < spec.global_shape.ndim(); ++i) shape.push_back(spec.global_shape[i]);
        if (slices > 1) shape[spec.split == TensorParallelSplit::kColumns ? 1 : 0] /= slices;
        TorchSaveTensor out{shape, std::vector<float>(static_cast<size_t>(spec.global_shape.numel() / slices))};
        slice_for_rank(out.values.data(), values, spec, slices > 1 ? t : 0, slices);
        file.add(chunk, name, std::move(out));
      };
      for (int c = 0; c < chunks; ++c) {
        for (const auto& owned : registry.params()) {
          const Parameter& p = *owned;
          const auto place = megatron_chunk_name(p.spec.name, layout, stage);
          if (place && place->chunk == c) add(c, place->name, p);
          // Tied embeddings with a pipeline: the last stage keeps its copy as the output layer.
          if (p.spec.name == "embedding.word_embeddings.weight" && pp > 1 &&
              !m.untie_embeddings_and_output_weights) {
            const auto copy = megatron_chunk_name("output_layer.weight", layout, stage);
            if (copy && copy->chunk == c) add(c, copy->name, p);
          }
        }
      }
      MS_RETURN_IF_ERROR(file.write(release, t, stage, pp));
    }
  }
  return write_file_atomically(dir + "/latest_checkpointed_iteration.txt", std::string("release"));
}

// The source, whatever its type, as one process's whole model (fp32, no parallelism).
struct WholeModel {
  Configs configs;
  HfArchitecture source_arch = HfArchitecture::kGpt2;  ///< a Hugging Face source's family
  ParameterRegistry registry;
  std::unique_ptr<GPTModel> model;
  std::unique_ptr<ParamAndGradBuffer> buffer;
};

Status load_whole_model(const Options& o, WholeModel& w, Allocator& alloc, const ParallelState& ps) {
  ModelConfig& c = w.configs.model;
  std::unique_ptr<MegatronTorchCheckpoint> megatron;
  std::string iteration_dir;
  if (o.load_type == "hf") {
    MS_ASSIGN_OR_RETURN(HfModelInfo info, read_hf_config(o.load_dir));
    c = info.config;
    c.padded_vocab_size = padded_vocab(c.vocab_size, c.make_vocab_size_divisible_by, 1);
    w.source_arch = info.architecture;
  } else if (o.load_type == "mg-torch") {
    MS_ASSIGN_OR_RETURN(MegatronTorchCheckpoint ckpt, MegatronTorchCheckpoint::open(o.load_dir));
    megatron = std::make_unique<MegatronTorchCheckpoint>(std::move(ckpt));
    c = megatron->model_config();
  } else {  // mg: this engine's checkpoint, weights only
    MS_ASSIGN_OR_RETURN(iteration_dir, tracked_iteration_dir(o.load_dir));
    MS_ASSIGN_OR_RETURN(c, checkpoint_model_config(iteration_dir));
  }
  if (o.load_type != "hf") {
    w.source_arch = c.moe.enabled() ? HfArchitecture::kMixtral : c.swiglu ? HfArchitecture::kLlama : HfArchitecture::kGpt2;
  }
  w.model = std::make_unique<GPTModel>(c, ps, w.registry);
  w.buffer = std::make_unique<ParamAndGradBuffer>(w.registry, alloc, BufferOptions{});
  if (o.load_type == "hf") return load_hf_checkpoint(o.load_dir, *w.model, ps);
  std::map<std::string, std::vector<float>> tensors;
  if (!iteration_dir.empty()) {
    MS_ASSIGN_OR_RETURN(tensors, read_checkpoint_tensors(iteration_dir, "param"));
  }
  for (const auto& p : w.registry.params()) {
    std::vector<float> full;
    if (megatron) {
      MS_ASSIGN_OR_RETURN(full, megatron->full_tensor(p->spec));
    } else {
      auto it = tensors.find(p->spec.name);
      if (it == tensors.end() || static_cast<int64_t>(it->second.size()) != p->spec.global_shape.numel()) {
        return invalid_argument(iteration_dir, ": no tensor '", p->spec.name, "' of the model's shape");
      }
      full = std::move(it->second);
    }
    set_parameter_from_full(*p, full.data(), 0, 1);
  }
  return ok_status();
}

// The Hugging Face family to write: --model-type-hf, else the source's.
StatusOr<HfArchitecture> output_architecture(const Options& o, const WholeModel& w) {
  HfArchitecture arch = w.source_arch;
  if (o.model_type_hf == "gpt2") arch = HfArchitecture::kGpt2;
  if (o.model_type_hf == "llama2" || o.model_type_hf == "llama") arch = HfArchitecture::kLlama;
  if (o.model_type_hf == "qwen2") arch = HfArchitecture::kQwen2;
  if (o.model_type_hf == "mistral") arch = HfArchitecture::kMistral;
  if (o.model_type_hf == "mixtral") arch = HfArchitecture::kMixtral;
  const ModelConfig& c = w.configs.model;
  if (c.moe.enabled() != (arch == HfArchitecture::kMixtral)) {
    return invalid_argument("--model-type-hf ", o.model_type_hf, " does not fit the checkpoint (",
                            c.moe.enabled() ? "a mixture-of-experts model: use mixtral" : "a dense model", ")");
  }
  if (c.moe.enabled() && (c.moe.shared_expert_intermediate_size > 0 || c.moe.layer_pattern.size() > 0)) {
    for (int64_t l = 0; l < c.num_layers; ++l) {
      if (!c.moe.is_moe_layer(l) || c.moe.shared_expert_intermediate_size > 0) {
        return unimplemented("the checkpoint's model has dense layers (--moe-layer-freq) or shared experts, which "
                             "MixtralForCausalLM does not; exporting it to Hugging Face is not implemented");
      }
    }
  }
  if ((arch != HfArchitecture::kGpt2) != c.swiglu) {
    return invalid_argument("--model-type-hf ", o.model_type_hf, " does not fit the checkpoint (",
                            c.swiglu ? "a LLaMA-style model" : "a GPT-2-style model", ")");
  }
  if (!c.noop_layers.empty()) {
    return unimplemented("the checkpoint has --noop-layers; Hugging Face models have no identity layers");
  }
  if (c.position_embedding_type == PositionEmbeddingType::kAlibi || c.attention_window > 0) {
    return unimplemented("the checkpoint's model uses ", c.attention_window > 0 ? "sliding-window" : "ALiBi",
                         " attention; exporting it to Hugging Face (GPT-2 / LLaMA families) is not implemented");
  }
  return arch;
}

// Any type to any other: the source as a whole model, then written in the target's format.
Status run(const Options& o) {
  if (o.load_type == o.save_type && o.load_type != "mg-torch") {
    return invalid_argument("--load-model-type and --save-model-type are both ", o.load_type, ": nothing to convert",
                            o.load_type == "mg" ? " (an mg checkpoint loads at any parallel layout without conversion)"
                                                : "");
  }
  const std::unique_ptr<ParallelState> ps = ParallelState::single_process();
  Allocator alloc;
  WholeModel w;
  MS_RETURN_IF_ERROR(load_whole_model(o, w, alloc, *ps));
  if (o.save_type == "mg") {
    // Weights only, at iteration 0; pretrain_gpt --load reads it at any parallel layout.
    const Backend backend = select_backend(KernelOptions{}, 1);
    Optimizer optimizer(w.configs.optimizer, *w.buffer, *ps, alloc, backend, false);
    MS_RETURN_IF_ERROR(save_checkpoint(o.save_dir, CheckpointState{}, w.configs,
                                       {w.registry, *w.buffer, optimizer, *ps}, /*save_optimizer=*/false));
  } else if (o.save_type == "hf") {
    MS_ASSIGN_OR_RETURN(const HfArchitecture arch, output_architecture(o, w));
    FullTensors tensors;
    for (const auto& p : w.registry.params()) {
      tensors[p->spec.name].assign(p->data.f32(), p->data.f32() + p->local_shape.numel());
    }
    MS_RETURN_IF_ERROR(write_hf_checkpoint(o.save_dir, w.configs.model, arch, tensors));
  } else {
    if (w.configs.model.moe.enabled()) {
      return unimplemented("writing a mixture-of-experts model as a Megatron torch checkpoint (expert-parallel rank "
                           "files, local expert numbering) is not implemented; save as mg or hf (Mixtral)");
    }
    MS_RETURN_IF_ERROR(write_megatron_torch(o.save_dir, w.configs.model, w.registry, o.target_tp, o.target_pp,
                                            o.layers_per_virtual_stage));
  }
  std::printf("converted %s (%s, %lld layers) to %s in %s\n", o.load_dir.c_str(), o.load_type.c_str(),
              static_cast<long long>(w.configs.model.num_layers), o.save_type.c_str(), o.save_dir.c_str());
  return ok_status();
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
                 "gpt2, llama2, llama, qwen2, mistral or mixtral (default: gpt2, llama or mixtral, from the checkpoint)")
      ->check(CLI::IsMember({"gpt2", "llama2", "llama", "qwen2", "mistral", "mixtral"}));
  auto* target_tp = app.add_option("--target-tensor-parallel-size", o.target_tp,
                 "mg-torch output: tensor-parallel size (mg checkpoints load at any)")
      ->check(CLI::PositiveNumber);
  auto* target_pp = app.add_option("--target-pipeline-parallel-size", o.target_pp,
                 "mg-torch output: pipeline-parallel size (mg checkpoints load at any)")
      ->check(CLI::PositiveNumber);
  auto* target_vpp = app.add_option("--num-layers-per-virtual-pipeline-stage", o.layers_per_virtual_stage,
                 "mg-torch output: layers per virtual pipeline stage (rank files hold model0, model1, ...)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  // MindSpeed-LLM's scripts pass the target layout with every output type; only mg-torch
  // files are laid out by it (an mg checkpoint loads at any layout, Hugging Face has none).
  if (o.save_type != "mg-torch") {
    for (const auto* opt : {target_tp, target_pp, target_vpp}) {
      if (opt->count() > 0 && (opt == target_vpp || opt->as<int>() != 1)) {
        std::printf("convert_checkpoint: note: %s only lays out mg-torch output; the %s output %s\n",
                    opt->get_name().c_str(), o.save_type.c_str(),
                    o.save_type == "mg" ? "loads at any parallel layout" : "has no parallel layout");
      }
    }
  }
  const mindspeed::Status s = mindspeed::run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "convert_checkpoint: error: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
