// generate_text: text from a checkpoint (Megatron-LM's tools/run_text_generation_server.py
// and megatron/inference/text_generation, without the server): loads this engine's
// checkpoint (--load DIR with latest_checkpointed_iteration.txt) or a Hugging Face directory
// (config.json + model.safetensors), tokenizes each prompt with Megatron's tokenizer flags,
// prefills it, then generates one token per step reusing the key/value cache
// (inference/text_generation_controller.h), greedy (--top-k 1, the default) or sampled
// (--temperature, --top-k, --top-p, --seed), until the end-of-document token or
// --out-seq-length new tokens. One rank, or tensor parallel under mpirun
// (--tensor-model-parallel-size = the world size); other layouts are refused. --device as for
// pretrain_gpt: cpu, cuda (one GPU per rank) or cpu-fenced; on a device the weights, the
// key/value cache and the activations live in its memory and only the logits come back.
//
//   generate_text --load CKPT --tokenizer-type GPT2BPETokenizer --vocab-file V --merge-file M
//       --prompt "In the beginning" --out-seq-length 40 --top-k 0 --top-p 0.9
//
// Exit codes as pretrain_gpt: 0 done, 2 a bad flag, file or prompt (found before the model
// is built; rank 0 prints it), 1 a failure later.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "config/configs.h"
#include "core/check.h"
#include "core/status.h"
#include "distributed/param_and_grad_buffer.h"
#include "inference/sampling.h"
#include "inference/text_generation_controller.h"
#include "kernels/backend.h"
#include "models/gpt/gpt_inference_wrapper.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/hf_checkpoint.h"
#include "module/device_transfers.h"
#include "optimizer/optimizer.h"
#include "parallel/initialize.h"
#include "tokenizer/tokenizer.h"
#include "training/checkpointing.h"

namespace mindspeed {
namespace {

struct Options {
  std::string load;
  TokenizerOptions tokenizer;
  std::vector<std::string> prompts;
  std::string prompts_file;
  SamplingParams sampling;
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  int optimization_level = 2;
  bool use_flash_attn = false;
  bool no_kv_cache = false;
  bool unaligned_linear =
      false;  ///< MindSpeed --unaligned-linear: heads and FFN channels split unevenly
  std::string device = "cpu";
};

bool is_hf_dir(const std::string& dir) { return std::filesystem::exists(dir + "/config.json"); }

// Everything checked before a model is built: the flags, the checkpoint's architecture, the
// tokenizer and the prompts. Fills the model config (vocabulary padded for this run's
// tensor-parallel size), the tokenizer and the tokenized prompts.
struct Prepared {
  ModelConfig model;
  bool hf = false;
  std::string iteration_dir;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<std::vector<int32_t>> prompt_ids;
};

Status prepare(Options& o, int world_size, Prepared& p) {
  if (o.pipeline_parallel != 1) {
    return unimplemented("--pipeline-model-parallel-size ", o.pipeline_parallel,
                         ": generation runs the whole model on one pipeline stage; use tensor parallelism "
                         "(--tensor-model-parallel-size) to split it");
  }
  if (o.tensor_parallel != world_size) {
    return invalid_argument("--tensor-model-parallel-size ", o.tensor_parallel, " with ", world_size,
                            " ranks: generation runs on exactly --tensor-model-parallel-size ranks (no data "
                            "parallelism); launch with mpirun -np ", o.tensor_parallel);
  }
  if (o.load.empty()) return invalid_argument("--load DIR is required (a checkpoint or a Hugging Face directory)");
  if (!std::filesystem::is_directory(o.load)) {
    return not_found("--load ", o.load, ": no such directory (give a checkpoint directory with "
                     "latest_checkpointed_iteration.txt or a Hugging Face directory with config.json)");
  }
  if (is_hf_dir(o.load)) {
    p.hf = true;
    MS_ASSIGN_OR_RETURN(HfModelInfo info, read_hf_config(o.load));
    p.model = info.config;
    // A Hugging Face GPT-2 directory usually ships its BPE files: use them when no tokenizer is given.
    if (o.tokenizer.tokenizer_type.empty() && std::filesystem::exists(o.load + "/vocab.json") &&
        std::filesystem::exists(o.load + "/merges.txt")) {
      o.tokenizer.tokenizer_type = "GPT2BPETokenizer";
      o.tokenizer.vocab_file = o.load + "/vocab.json";
      o.tokenizer.merge_file = o.load + "/merges.txt";
    }
  } else if (has_checkpoint_tracker(o.load)) {
    MS_ASSIGN_OR_RETURN(p.iteration_dir, tracked_iteration_dir(o.load));
    if (!std::filesystem::exists(p.iteration_dir + "/metadata.json")) {
      return unimplemented("--load ", o.load, ": ", p.iteration_dir,
                           " has no metadata.json (a Megatron-LM torch checkpoint?); convert it first with "
                           "convert_checkpoint --load-model-type mg-torch --save-model-type mg");
    }
    MS_ASSIGN_OR_RETURN(p.model, checkpoint_model_config(p.iteration_dir));
  } else {
    return not_found("--load ", o.load, ": neither a checkpoint (no latest_checkpointed_iteration.txt) nor a "
                     "Hugging Face directory (no config.json)");
  }
  ModelConfig& m = p.model;
  m.attention_dropout = m.hidden_dropout = 0.0f;
  m.unaligned_linear = o.unaligned_linear;
  if (o.unaligned_linear &&
      (m.query_groups() < o.tensor_parallel || m.ffn_hidden_size < o.tensor_parallel)) {
    return invalid_argument(
        "--unaligned-linear needs a query group and an FFN channel per tensor-parallel rank: ",
        m.query_groups(), " groups, ", m.ffn_hidden_size, " channels for ", o.tensor_parallel,
        " ranks");
  }
  if (!o.unaligned_linear && (m.query_groups() % o.tensor_parallel != 0 ||
                              m.num_attention_heads % o.tensor_parallel != 0)) {
    return invalid_argument("--tensor-model-parallel-size ", o.tensor_parallel,
                            " does not divide the model's ", m.num_attention_heads,
                            " attention heads and ", m.query_groups(),
                            " query groups (--unaligned-linear splits them unevenly)");
  }
  if (!o.unaligned_linear && m.ffn_hidden_size % o.tensor_parallel != 0) {
    return invalid_argument("--tensor-model-parallel-size ", o.tensor_parallel, " does not divide the model's ",
                            "ffn hidden size ", m.ffn_hidden_size);
  }
  m.padded_vocab_size = padded_vocab(m.vocab_size, m.make_vocab_size_divisible_by, o.tensor_parallel);

  if (o.tokenizer.tokenizer_type.empty()) {
    return invalid_argument("no tokenizer: give --tokenizer-type (GPT2BPETokenizer with --vocab-file and "
                            "--merge-file, Llama2Tokenizer/GPTSentencePieceTokenizer with --tokenizer-model, or "
                            "NullTokenizer with --vocab-size)");
  }
  MS_ASSIGN_OR_RETURN(p.tokenizer, build_tokenizer(o.tokenizer));
  if (p.tokenizer->vocab_size() > m.vocab_size) {
    return invalid_argument("the tokenizer has ", p.tokenizer->vocab_size(), " tokens but the model only ",
                            m.vocab_size, ": use the tokenizer the model was trained with");
  }
  MS_RETURN_IF_ERROR(validate_sampling_params(o.sampling, p.tokenizer->vocab_size()));

  std::vector<std::string> texts = o.prompts;
  if (!o.prompts_file.empty()) {
    std::ifstream in(o.prompts_file);
    if (!in) return not_found("--prompts-file ", o.prompts_file, ": cannot open it");
    std::string line;
    int64_t lines = 0;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) texts.push_back(line), ++lines;
    }
    if (lines == 0) return invalid_argument("--prompts-file ", o.prompts_file, " has no prompts (one per line)");
  }
  if (texts.empty()) return invalid_argument("no prompt: give --prompt TEXT or --prompts-file FILE (one per line)");
  for (const std::string& text : texts) {
    if (text.empty()) return invalid_argument("--prompt is empty: a prompt needs at least one token");
    MS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, p.tokenizer->tokenize(text));
    if (ids.empty()) return invalid_argument("the prompt '", text, "' has no tokens");
    if (static_cast<int64_t>(ids.size()) >= m.max_position_embeddings) {
      return invalid_argument("the prompt '", text.substr(0, 40), "...' has ", ids.size(),
                              " tokens; the model takes ", m.max_position_embeddings,
                              " positions (--max-position-embeddings), leaving no room to generate");
    }
    p.prompt_ids.push_back(std::move(ids));
  }
  o.prompts = std::move(texts);
  return ok_status();
}

// The model on this rank's tensor-parallel shard, with the checkpoint's weights.
struct LoadedModel {
  ParameterRegistry registry;
  std::unique_ptr<GPTModel> model;
  std::unique_ptr<ParamAndGradBuffer> buffer;
};

Status load_model(const Options& o, const Prepared& p, const ParallelState& ps, Allocator& alloc,
                  const Backend& backend, LoadedModel& out) {
  out.model = std::make_unique<GPTModel>(p.model, ps, out.registry);
  BufferOptions buffer_options;
  buffer_options.backend = &backend;
  out.buffer = std::make_unique<ParamAndGradBuffer>(out.registry, alloc, buffer_options);
  if (p.hf) return load_hf_checkpoint(o.load, *out.model, ps, &backend);
  Configs configs;
  configs.model = p.model;
  configs.parallel.tensor_model_parallel_size = o.tensor_parallel;
  Optimizer optimizer(configs.optimizer, *out.buffer, ps, alloc, backend, false);
  CheckpointLoadOptions load;
  load.load_optimizer = false;
  load.finetune = true;  // weights only
  return load_checkpoint(o.load, configs, {out.registry, *out.buffer, optimizer, ps}, load).status();
}

// The backend of --device; on cuda this rank's GPU (LOCAL_RANK or the MPI node-local rank).
StatusOr<Backend> select_generation_backend(const std::string& device, const KernelOptions& options,
                                            const MpiWorld& world) {
  const int threads = default_threads_per_rank(world.local_size);
  CudaOptions cuda;
  const DeviceKind kind = device == "cuda"         ? DeviceKind::kCuda
                          : device == "cpu-fenced" ? DeviceKind::kCpuFenced
                                                   : DeviceKind::kCpu;
  if (kind == DeviceKind::kCuda) {
    MS_ASSIGN_OR_RETURN(cuda.device, cuda_device_of_rank(world.local_rank, probe_devices()));
  }
  return select_device_backend(kind, options, threads, cuda);
}

int run(int argc, char** argv) {
  MpiWorld world = initialize_mpi(&argc, &argv);
  auto stop = [&](const std::string& message, int code) {
    if (world.rank == 0 && !message.empty()) std::fprintf(stderr, "generate_text: %s\n", message.c_str());
    finalize_mpi();
    return code;
  };
  Options o;
  CLI::App app{"Generate text from a checkpoint (greedy or sampled, with a key/value cache)"};
  app.add_option("--load", o.load, "Checkpoint directory (latest_checkpointed_iteration.txt) or Hugging Face "
                                   "directory (config.json + model.safetensors)");
  app.add_option("--tokenizer-type", o.tokenizer.tokenizer_type,
                 "GPT2BPETokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer or "
                 "NullTokenizer (default: GPT2BPETokenizer when the Hugging Face directory has vocab.json and "
                 "merges.txt)");
  app.add_option("--vocab-file", o.tokenizer.vocab_file, "GPT-2 BPE vocab.json");
  app.add_option("--merge-file", o.tokenizer.merge_file, "GPT-2 BPE merges.txt");
  app.add_option("--tokenizer-model", o.tokenizer.tokenizer_model, "SentencePiece .model");
  app.add_option("--vocab-size", o.tokenizer.vocab_size, "NullTokenizer: vocabulary size (ids 0..N-1, EOD = N)");
  app.add_option("--prompt,--prompts", o.prompts, "A prompt (repeatable)");
  app.add_option("--prompts-file", o.prompts_file, "A file of prompts, one per line (empty lines skipped)");
  app.add_option("--out-seq-length,--num-tokens-to-generate", o.sampling.num_tokens_to_generate,
                 "New tokens per prompt at most (fewer when the model's --max-position-embeddings is reached or "
                 "the end-of-document token is generated) [30]");
  app.add_option("--temperature", o.sampling.temperature, "Sampling temperature, > 0 [1.0]");
  app.add_option("--top-k,--top_k", o.sampling.top_k, "1: greedy (default); 0: no top-k filter; K > 1: sample "
                                                      "from the K most likely tokens [1]");
  app.add_option("--top-p,--top_p", o.sampling.top_p, "Nucleus sampling mass in [0, 1], applied after top-k; 0: off "
                                                      "(needs --top-k other than 1) [0.0]");
  app.add_option("--seed", o.sampling.seed, "Random seed of the sampling [1234]");
  app.add_option("--tensor-model-parallel-size", o.tensor_parallel, "Tensor-parallel size = number of ranks [1]")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--pipeline-model-parallel-size", o.pipeline_parallel, "Only 1 (generation runs one stage) [1]");
  app.add_option("--optimization-level", o.optimization_level, "0: reference kernels, 1-2: fast kernels [2]")
      ->check(CLI::Range(0, 2));
  app.add_flag("--unaligned-linear", o.unaligned_linear,
               "MindSpeed: heads (by query group) and FFN channels need not divide "
               "--tensor-model-parallel-size");
  app.add_flag("--use-flash-attn", o.use_flash_attn, "Flash attention for the no-cache forward (--no-kv-cache)");
  app.add_option("--device", o.device,
                 "cpu; cuda (one GPU per rank); cpu-fenced (device memory fenced off from "
                 "host code) [cpu]")
      ->check(CLI::IsMember({"cpu", "cuda", "cpu-fenced"}));
  app.add_flag("--no-kv-cache", o.no_kv_cache,
               "Recompute the whole sequence every step instead of reusing the key/value cache (a check)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    if (world.rank == 0) std::printf("%s", app.help().c_str());
    return stop("", 0);
  } catch (const CLI::ParseError& e) {
    return stop(std::string("error: ") + e.what(), 2);
  }
  Prepared p;
  if (Status s = prepare(o, world.size, p); !s.ok()) return stop("error: " + s.to_string(), 2);

  ParallelConfig pc;
  pc.tensor_model_parallel_size = o.tensor_parallel;
  auto ps = initialize_model_parallel(pc, world);
  if (!ps.ok()) fatal(ps.status().to_string());
  const KernelOptions kernel_options{
      .fast = o.optimization_level >= 1,
      .flash_attention = o.use_flash_attn && o.optimization_level >= 2};
  auto backend_or = select_generation_backend(o.device, kernel_options, world);
  if (!backend_or.ok()) return stop("error: " + backend_or.status().to_string(), 2);
  const Backend backend = std::move(backend_or).value();
  auto memory = device_memory_source(backend);
  if (!memory.ok()) fatal("--device " + o.device + ": " + memory.status().to_string());
  Allocator alloc(std::move(memory).value());
  // On a device the tensor-parallel gathers move its memory: stage them through the host.
  if (!backend.unified_memory()) (*ps)->stage_collectives_through_host(device_transfers(backend));
  LoadedModel loaded;
  if (Status s = load_model(o, p, **ps, alloc, backend, loaded); !s.ok()) fatal("loading " + o.load + ": " + s.to_string());

  ForwardContext ctx;
  ctx.backend = &backend;
  ctx.alloc = &alloc;
  ctx.ps = ps->get();
  ctx.training = false;
  GPTInferenceWrapper wrapper(*loaded.model, ctx, !o.no_kv_cache);
  GenerationOptions g;
  g.sampling = o.sampling;
  g.vocab_size = p.tokenizer->vocab_size();
  g.eod = p.tokenizer->eod();
  for (size_t i = 0; i < p.prompt_ids.size(); ++i) {
    g.stream = i;
    auto result = generate_tokens(wrapper, p.prompt_ids[i], g);
    if (!result.ok()) fatal("prompt " + std::to_string(i + 1) + ": " + result.status().to_string());
    auto text = p.tokenizer->detokenize(result->tokens);
    if (!text.ok()) fatal("detokenizing the generated tokens: " + text.status().to_string());
    if (world.rank == 0) {
      std::printf("prompt: %s\ngenerated (%zu tokens, %s): %s\n\n", o.prompts[i].c_str(), result->tokens.size(),
                  result->stopped_at_eod ? "stopped at end of document" : "length limit", text->c_str());
      std::fflush(stdout);
    }
  }
  return stop("", 0);
}

}  // namespace
}  // namespace mindspeed

int main(int argc, char** argv) {
  try {
    return mindspeed::run(argc, argv);
  } catch (const std::exception& e) {
    mindspeed::fatal(std::string("uncaught exception: ") + e.what());
  } catch (...) {
    mindspeed::fatal("uncaught exception");
  }
}
