// convert_checkpoint: moves model weights between Hugging Face directories and this engine's
// checkpoints, with MindSpeed-LLM convert_ckpt.py's flag names:
//   convert_checkpoint --load-model-type hf --save-model-type mg --load-dir HF --save-dir CKPT
//   convert_checkpoint --load-model-type mg --save-model-type hf --load-dir CKPT --save-dir HF
// `hf` is a directory transformers loads as it is (config.json + model.safetensors, GPT-2 or
// LLaMA); `mg` is this engine's checkpoint (training/checkpointing.h): weights only, at
// iteration 0, readable by pretrain_gpt --load at any parallel layout, so
// --target-tensor/pipeline-parallel-size are accepted but do not change the files. `mg-torch`
// (Megatron-LM's legacy --ckpt-format torch files) is refused until it is implemented.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "config/configs.h"
#include "config/pipeline_layout.h"
#include "core/logging.h"
#include "core/status.h"
#include "distributed/param_and_grad_buffer.h"
#include "kernels/backend.h"
#include "models/gpt/gpt_model_chunks.h"
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

Status run(const Options& o) {
  if (o.load_type == "mg-torch" || o.save_type == "mg-torch") {
    return unimplemented("mg-torch (Megatron-LM's --ckpt-format torch files) is not implemented yet; convert "
                         "through hf");
  }
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
