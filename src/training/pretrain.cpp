// pretrain() (pretrain.h).
#include "training/pretrain.h"

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "checkpointing/durable_file.h"
#include "config/group_buffers.h"
#include "config/num_microbatches_calculator.h"
#include "config/validate.h"
#include "context_parallel/cp_split.h"
#include "core/check.h"
#include "core/logging.h"
#include "core/profiler.h"
#include "core/str_cat.h"
#include "core/swap_tier.h"
#include "core/timers.h"
#include "datasets/blended_megatron_dataset_builder.h"
#include "datasets/data_samplers.h"
#include "datasets/indexed_dataset.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/param_and_grad_buffer.h"
#include "kernels/host_swap_tier.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/hf_checkpoint.h"
#include "module/device_transfers.h"
#include "optimizer/lr_scheduler.h"
#include "optimizer/optimizer.h"
#include "parallel/agreement.h"
#include "tokenizer/tokenizer.h"
#include "training/checkpointing.h"
#include "training/flops.h"
#include "training/megatron_torch_checkpoint.h"
#include "training/non_finite_check.h"
#include "training/train_step.h"
#include "training/training_log.h"
#include "training/training_metrics.h"

namespace mindspeed {
namespace {

// --exit-signal-handler (Megatron's DistributedSignalHandler): SIGTERM only sets a flag; the
// training loop finishes the iteration, saves and exits cleanly.
volatile std::sig_atomic_t g_sigterm = 0;
void on_sigterm(int) { g_sigterm = 1; }
void install_sigterm_handler() { std::signal(SIGTERM, on_sigterm); }
bool sigterm_received() { return g_sigterm != 0; }

KernelOptions kernel_options(const TrainingConfig& t, const ParallelConfig& p) {
  KernelOptions k;
  k.fast = t.optimization_level >= 1;
  k.fused_rms_norm = t.use_fused_rmsnorm;
  k.fused_swiglu = t.use_fused_swiglu;
  k.fused_rotary = t.use_fused_rotary_pos_emb;
  k.fused_ring_attention_update = t.use_fused_ring_attention_update;
  // MindSpeed: --use-flash-attn is a level-2 feature; below level 2 it is not applied.
  // Context parallelism needs flash attention's log-sum-exp (MindSpeed forces it on).
  // Context parallelism, and 2D tensor parallelism's attention over the Y x CP union, run flash
  // attention.
  k.flash_attention = (t.use_flash_attn && t.optimization_level >= 2) ||
                      p.context_parallel_size > 1 ||
                      (p.tp_2d && p.tp_y * p.context_parallel_size > 1);
  // Megatron's --attention-backend flash / fused / auto asks for flash attention whatever the level.
  const AttentionBackend b = t.attention_backend;
  k.flash_attention |= b == AttentionBackend::kFlash || b == AttentionBackend::kFused || b == AttentionBackend::kAuto;
  k.unfused_bias_gelu = !t.fusion.bias_gelu;
  k.unfused_bias_swiglu = !t.fusion.bias_swiglu;
  k.unfused_bias_dropout = !t.fusion.bias_dropout;
  k.unfused_rope = !t.fusion.rope;
  k.unfused_masked_softmax = !t.fusion.masked_softmax;
  k.unpersisted_layer_norm = !t.fusion.persist_layer_norm;
  return k;
}

TokenizerOptions tokenizer_options_of(const DataConfig& d) {
  TokenizerOptions o;
  o.tokenizer_type = d.tokenizer_type;
  o.vocab_file = d.vocab_file;
  o.merge_file = d.merge_file;
  o.tokenizer_model = d.tokenizer_model;
  o.tokenizer_name_or_path = d.tokenizer_name_or_path;
  o.vocab_extra_ids = d.vocab_extra_ids;
  if (d.vocab_size > 0) o.vocab_size = d.vocab_size;
  return o;
}

TokenizerIdentity tokenizer_identity(const Tokenizer& tokenizer) {
  const TokenizerIdentifiers& ids = tokenizer.unique_identifiers();
  TokenizerIdentity identity;
  identity.class_name = ids.class_name;
  identity.tokenizer_path = ids.tokenizer_path;
  identity.options = ids.options;
  return identity;
}

// Token and label ids must index the (padded) embedding table: a dataset written with another
// tokenizer, or Megatron's mock data (ids up to 4095) with a smaller --vocab-size, is refused
// here with the sample named instead of reading outside the table. Position ids must index
// the position table (learned or rotary).
Status check_token_ids(const MicroBatch& mb, int64_t padded_vocab, int64_t vocab, int64_t max_positions) {
  for (size_t i = 0; i < mb.position_ids.size(); ++i) {
    const int32_t pos = mb.position_ids[i];
    if (pos < 0 || pos >= max_positions) {
      return invalid_argument("sample ", mb.first_sample + static_cast<int64_t>(i) / mb.T, " holds position id ", pos,
                              ", outside --max-position-embeddings (", max_positions,
                              "); raise --max-position-embeddings to at least --seq-length");
    }
  }
  for (size_t i = 0; i < mb.tokens.size(); ++i) {
    const int32_t ids[2] = {mb.tokens[i], mb.labels[i]};
    for (int32_t id : ids) {
      if (id < 0 || id >= padded_vocab) {
        return invalid_argument("sample ", mb.first_sample + static_cast<int64_t>(i) / mb.T, " holds token id ", id,
                                ", outside the vocabulary (", vocab, " tokens, padded to ", padded_vocab,
                                "); the data was made with another tokenizer, or --vocab-size is too small "
                                "(Megatron's mock data uses ids up to 4095)");
      }
    }
  }
  return ok_status();
}

// Every rank calls these at the same point: the status all ranks agreed on
// (parallel/agreement.h), so a failure any rank sees stops every rank here, once reported.
Status agreed(ProcessGroup& world, const Status& local) { return agree_on_failure(world, local); }
template <typename T>
StatusOr<T> agreed(ProcessGroup& world, StatusOr<T> local) {
  MS_RETURN_IF_ERROR(agree_on_failure(world, local.status()));
  return local;
}

// One global batch of this rank's micro-batches, with their token ids checked; false when the
// data ran out.
StatusOr<bool> next_global_batch(GptDataLoader& loader, const Configs& c, const ParallelState& ps, int64_t num_micro,
                                 const ForwardContext& ctx, std::vector<MicroBatch>& out) {
  out.clear();
  GptBatch batch;
  for (int64_t m = 0; m < num_micro; ++m) {
    MS_ASSIGN_OR_RETURN(const bool got, loader.next(&batch));
    if (!got) return false;
    MicroBatch mb;
    mb.B = batch.micro_batch_size;
    mb.T = batch.seq_length;
    mb.tokens = std::move(batch.tokens);
    mb.labels = std::move(batch.labels);
    mb.loss_mask = std::move(batch.loss_mask);
    mb.position_ids = std::move(batch.position_ids);
    if (c.data.reset_attention_mask) mb.doc_start = std::move(batch.doc_start);
    mb.first_sample = batch.sample_ids.empty() ? 0 : batch.sample_ids.front();
    MS_RETURN_IF_ERROR(
        check_token_ids(mb, c.model.padded_vocab_size, c.model.vocab_size, c.model.max_position_embeddings));
    if (ps.sizes.context > 1) {
      // Every rank of a context-parallel group reads the same samples and keeps its share.
      mb = get_batch_on_this_cp_rank(mb, CpSplit(c.parallel.cp, ps.sizes.context, mb.T), ps.cp_rank);
    }
    upload_micro_batch(mb, *ctx.backend, *ctx.alloc);  // a device's kernels read its copies
    out.push_back(std::move(mb));
  }
  return true;
}

// Runs eval_iters global batches forward-only; returns the token-weighted mean loss over the
// data-parallel group (Megatron 0.12: sum of losses / sum of tokens).
// Megatron's track_moe_metrics for one iteration: each tracked loss's per-layer sums (over
// the micro-batches) summed over the pipeline stages (and, for the load-balancing loss, over
// the tensor x context sequence partition), times 1 / micro-batches, averaged over the MoE
// layers. Clears the tracker.
std::vector<std::pair<std::string, double>> moe_losses_of_iteration(const Configs& c, const ParallelState& ps,
                                                                    int64_t num_micro, MoeAuxLosses& losses) {
  std::vector<std::pair<std::string, double>> out;
  const MoeConfig& moe = c.model.moe;
  if (!moe.enabled()) return out;
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < c.model.num_layers; ++l) moe_layers += moe.is_moe_layer(l) ? 1 : 0;
  auto reduce = [&](std::vector<double>& values, bool over_partition) {
    double sum = 0.0;
    for (double v : values) sum += v;
    sum = ps.pp().all_reduce_scalar(sum, ReduceOp::kSum);
    if (over_partition) sum = ps.tp_cp().all_reduce_scalar(sum, ReduceOp::kSum);
    return sum / static_cast<double>(num_micro) / static_cast<double>(std::max<int64_t>(moe_layers, 1));
  };
  if (moe.load_balancing == MoeLoadBalancing::kAuxLoss || moe.load_balancing == MoeLoadBalancing::kSeqAuxLoss) {
    out.emplace_back("load_balancing_loss", reduce(losses.load_balancing, /*over_partition=*/true));
  }
  if (moe.z_loss_coeff > 0) out.emplace_back("z_loss", reduce(losses.z, /*over_partition=*/false));
  losses.clear();
  return out;
}

StatusOr<double> evaluate(const GPTModelChunks& model, const ForwardContext& ctx, GptDataLoader& loader,
                          const Configs& c, int64_t num_micro, const ParallelState& ps) {
  LossSums sums;
  std::vector<MicroBatch> mbs;
  for (int64_t i = 0; i < c.training.eval_iters; ++i) {
    MS_ASSIGN_OR_RETURN(const bool got, agreed(ps.world(), next_global_batch(loader, c, ps, num_micro, ctx, mbs)));
    MS_RETURN_IF_ERROR(agreed(ps.world(), got ? ok_status()
                                              : failed_precondition("the validation/test data ran out after ", i,
                                                                    " of --eval-iters (", c.training.eval_iters,
                                                                    ") iterations")));
    const LossSums s = evaluate_step(model, ctx, mbs);
    sums.loss_sum += s.loss_sum;
    sums.num_tokens += s.num_tokens;
  }
  return evaluation_loss(ps, sums);
}

// Whether a Megatron-LM checkpoint's optimizer state is loaded: as Megatron's load_checkpoint,
// not from a release, with --finetune or with --no-load-optim.
bool loads_megatron_optimizer(const Configs& c, const MegatronTorchCheckpoint& ckpt) {
  return !ckpt.release() && !c.training.no_load_optim && !c.training.finetune;
}

// Megatron-LM's --ckpt-format torch checkpoint into this rank's parameters (before the
// optimizer exists, as a Hugging Face import): the weights, and the progress unless
// --finetune. Its optimizer state, when it is to be loaded, must be readable (checked here,
// loaded once the optimizer exists: load_megatron_optimizer_state).
Status load_megatron_weights(const Configs& c, const MegatronTorchCheckpoint& ckpt,
                             const ParallelState& ps, const ParameterRegistry& registry,
                             const Backend& backend, CheckpointState* start) {
  MS_RETURN_IF_ERROR(ckpt.check_model_matches(c.model));
  if (loads_megatron_optimizer(c, ckpt)) {
    const Status readable = ckpt.optimizer_readable();
    if (!readable.ok())
      return Status(readable.code(), str_cat("--load ", c.training.load, ": ", readable.message()));
  }
  for (const auto& p : registry.params()) {
    MS_ASSIGN_OR_RETURN(std::vector<float> full, ckpt.full_tensor_for_run(p->spec, "weight"));
    const ShardCoords at = shard_coords(p->spec, ps);
    set_parameter_from_full(*p, full.data(), at.rank, at.count, &backend);
  }
  if (!c.training.finetune) {
    start->iteration = ckpt.iteration();
    start->consumed_train_samples = ckpt.consumed_train_samples();
    start->consumed_valid_samples = ckpt.consumed_valid_samples();
  }
  return ok_status();
}

}  // namespace

// The profiled train steps [--profile-step-start, --profile-step-end) of this process
// (MindSpeed counts train steps from 0 in each run). Ranks align their clocks at a world
// barrier; the trace's metadata gets this rank's coordinates and the communication counters
// (ProcessGroup::stats) of the window, per group and kind, which the trace's communication
// events must add up to.
class ProfileWindow {
 public:
  ProfileWindow(const profiler::Options& options, const ParallelState& ps, std::function<void()> drain)
      : options_(options), ps_(ps), drain_(std::move(drain)) {
    if (!options.enabled) return;
    ps.world().barrier();  // every rank, profiled or not: the clocks' common point
    profiler::set_sync_point();
    profiler::add_metadata("coordinates", str_cat("{\"tp\":", ps.tp_rank, ",\"pp\":", ps.pp_rank, ",\"dp\":",
                                                 ps.dp_rank, ",\"cp\":", ps.cp_rank, ",\"world_size\":",
                                                 ps.world_size, "}"));
  }
  /// Before train step `step` (0-based in this run): the window ending after step - 1
  /// closes (its trace is written), the one starting at `step` opens.
  Status before_step(int64_t step) {
    if (!options_.enabled || !profiler::selected()) return ok_status();
    if (step == options_.step_end && open_) {
      drain_();  // collectives still in flight belong to the window
      add_counters();
      open_ = false;
      MS_RETURN_IF_ERROR(profiler::step_end(step - 1));
    }
    if (step == options_.step_start) {
      start_ = counters();
      open_ = true;
      profiler::step_begin(step);
    }
    return ok_status();
  }
  /// Training stopped inside the window: write what was recorded.
  Status finish() {
    if (!open_) return ok_status();
    drain_();
    add_counters();
    open_ = false;
    return profiler::finish();
  }

 private:
  using Counters = std::map<std::string, CommStats>;
  Counters counters() const {
    Counters out;
    for (ProcessGroup* g : {&ps_.world(), &ps_.tp(), &ps_.pp(), &ps_.cp(), &ps_.dp(), &ps_.dp_cp(), &ps_.mp(),
                            &ps_.embedding()}) {
      if (g->size() < 2) continue;  // no communication
      CommStats& sum = out[g->name()];
      for (int k = 0; k < kNumCollectiveKinds; ++k) {
        sum.calls[k] += g->stats().calls[k];
        sum.bytes[k] += g->stats().bytes[k];
      }
    }
    return out;
  }
  void add_counters() const {
    std::string json = "{";
    for (const auto& [name, now] : counters()) {
      const CommStats& before = start_.count(name) ? start_.at(name) : CommStats{};
      std::string kinds;
      for (int k = 0; k < kNumCollectiveKinds; ++k) {
        const int64_t calls = now.calls[k] - before.calls[k];
        if (calls == 0) continue;
        kinds += str_cat(kinds.empty() ? "" : ",", "\"", collective_name(static_cast<CollectiveKind>(k)),
                         "\":{\"calls\":", calls, ",\"bytes\":", now.bytes[k] - before.bytes[k], "}");
      }
      json += str_cat(json.size() > 1 ? "," : "", "\"", name, "\":{", kinds, "}");
    }
    profiler::add_metadata("comm_counters", json + "}");
  }
  profiler::Options options_;
  const ParallelState& ps_;
  std::function<void()> drain_;
  Counters start_;
  bool open_ = false;
};

// The backend of --device: one GPU per rank with cuda, the local rank's (LOCAL_RANK's under a
// torchrun-style launch, the MPI node-local rank otherwise) modulo the GPUs this process sees.
// Ranks sharing a GPU work (the collectives are staged through host memory), with a note.
namespace {
StatusOr<Backend> select_run_backend(const Configs& c, const KernelOptions& kopts, const MpiWorld& world) {
  const int threads = c.training.num_threads > 0 ? c.training.num_threads : default_threads_per_rank(world.local_size);
  CudaOptions cuda;
  cuda.allow_tf32 = c.training.allow_tf32;
  cuda.bf16_gemm_inputs = c.training.bf16;  // Megatron's bf16 GEMMs: bf16 inputs, fp32 accumulation
  if (c.training.device == DeviceKind::kCuda) {
    const DeviceProbe probe = probe_devices();
    MS_ASSIGN_OR_RETURN(cuda.device, cuda_device_of_rank(world.local_rank, probe));
    if (world.local_rank == 0) {
      log_info("> --device cuda: ", probe.cuda_devices, " GPU(s) visible: ", probe.names.front(),
               world.local_size > probe.cuda_devices
                   ? str_cat("; ", world.local_size, " ranks on this node share them (collectives staged through host)")
                   : std::string());
    }
  }
  return select_device_backend(c.training.device, kopts, threads, cuda);
}

// The run report of an --auto-settings measurement run (auto_settings/run_launcher.h): set by the
// planner in the environment of the runs it launches (MindSpeed's OOTB_OPTIMIZER_PROFILING runs
// play this part), never by users. Each rank writes <path>.rank<R>.json at the end of training:
// its coordinates, the allocator's exact peaks per category and the seconds of every iteration.
constexpr const char* kRunReportVariable = "MINDSPEED_AUTO_SETTINGS_REPORT";

// The groups whose traffic a run report gives, by name.
std::vector<std::pair<const char*, const ProcessGroup*>> reported_groups(const ParallelState& ps) {
  return {{"tp", &ps.tp()},
          {"pp", &ps.pp()},
          {"cp", &ps.cp()},
          {"cp_ring", &ps.cp_ring()},
          {"cp_ulysses", &ps.cp_ulysses()},
          {"dp_cp", &ps.dp_cp()},
          {"embedding", &ps.embedding()},
          {"ep", &ps.ep()},
          {"expert_dp", &ps.expert_dp()}};
}

// Each reported group's payload bytes per collective kind (ProcessGroup::stats()).
std::map<std::string, CommStats> traffic_of(const ParallelState& ps) {
  std::map<std::string, CommStats> out;
  for (const auto& [name, group] : reported_groups(ps)) out[name] = group->stats();
  return out;
}

Status write_run_report(const std::string& path, const ParallelState& ps, const MemoryStats& stats,
                        const std::vector<double>& iteration_seconds,
                        const std::map<std::string, CommStats>& traffic_after_first) {
  nlohmann::json j;
  j["rank"] = ps.world_rank;
  j["tp_rank"] = ps.tp_rank;
  j["pp_rank"] = ps.pp_rank;
  j["cp_rank"] = ps.cp_rank;
  j["dp_rank"] = ps.dp_rank;
  nlohmann::json peaks = nlohmann::json::object();
  for (int k = 0; k < kNumMemoryCategories; ++k) {
    peaks[memory_category_name(static_cast<MemoryCategory>(k))] =
        stats.peak[static_cast<size_t>(k)];
  }
  j["peak_bytes"] = peaks;
  j["total_peak_bytes"] = stats.total_peak;
  j["swapped_peak_bytes"] = stats.total_swapped_peak;
  j["iteration_seconds"] = iteration_seconds;
  // Payload bytes each group moved after the first iteration (evaluation is off in these runs),
  // and the calls, per collective kind: the traffic of iteration_seconds.size() - 1 iterations.
  nlohmann::json traffic = nlohmann::json::object(), calls = nlohmann::json::object();
  for (const auto& [name, now] : traffic_of(ps)) {
    const auto first = traffic_after_first.find(name);
    nlohmann::json kinds = nlohmann::json::object(), counts = nlohmann::json::object();
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      const char* kind = collective_name(static_cast<CollectiveKind>(k));
      const bool known = first != traffic_after_first.end();
      if (const int64_t d = now.bytes[k] - (known ? first->second.bytes[k] : 0); d != 0)
        kinds[kind] = d;
      if (const int64_t d = now.calls[k] - (known ? first->second.calls[k] : 0); d != 0)
        counts[kind] = d;
    }
    traffic[name] = kinds;
    calls[name] = counts;
  }
  j["traffic_bytes"] = traffic;
  j["traffic_calls"] = calls;
  return write_file_atomically(str_cat(path, ".rank", ps.world_rank, ".json"), j.dump() + "\n");
}
}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> build_tokenizer_from_config(const DataConfig& data) {
  return build_tokenizer(tokenizer_options_of(data));
}

Status pretrain(const Configs& c, const Tokenizer& tokenizer_ref, const MpiWorld& world, const PretrainHooks& hooks) {
  Timer setup_timer;
  MS_ASSIGN_OR_RETURN(std::unique_ptr<ParallelState> ps_owner, initialize_model_parallel(c.parallel, world));
  const ParallelState& ps = *ps_owner;
  const bool log_rank0 = world.rank == 0;
  const bool log_last = world.rank == world.size - 1;  // Megatron's print_rank_last
  const Tokenizer* tokenizer = &tokenizer_ref;
  MS_CHECK(c.model.padded_vocab_size == padded_vocab(tokenizer->vocab_size(), c.model.make_vocab_size_divisible_by,
                                                     c.parallel.tensor_model_parallel_size),
           "pretrain() needs the configs validated with this tokenizer's vocabulary size");
  // --profile: which ranks record which steps (core/profiler.h); kernels are wrapped only on
  // a profiled rank at level1 or above.
  profiler::configure(c.training.profile, world.rank);
  if (log_rank0 && c.training.profile.enabled && c.training.profile.level != profiler::Level::kLevel2 &&
      (c.training.profile.with_stack || c.training.profile.record_shapes)) {
    log_warning("--profile-with-stack and --profile-record-shapes add to level2 traces; at this --profile-level "
                "they record nothing");
  }
  KernelOptions kopts = kernel_options(c.training, c.parallel);
  kopts.profile_kernels = profiler::selected() && c.training.profile.level != profiler::Level::kLevel0;
  MS_ASSIGN_OR_RETURN(const Backend backend, agreed(ps.world(), select_run_backend(c, kopts, world)));
  // On a device the buffers live in its memory; the MPI groups move host memory: stage them.
  if (!backend.unified_memory()) ps_owner->stage_collectives_through_host(device_transfers(backend));
  // MindSpeed's per-group communication buffers (--hccl-group-buffer[-adaptive]).
  MS_ASSIGN_OR_RETURN(const auto buffers, group_buffers(c));
  if (!buffers.empty()) {
    const std::vector<std::string> lines = ps_owner->set_group_buffers(buffers);
    if (log_rank0) {
      log_info("> communication buffer per group (",
               c.parallel.hccl_group_buffer_adaptive ? "adaptive" : "",
               c.parallel.hccl_group_buffer_adaptive && !c.parallel.hccl_group_buffer.empty() ? ", "
                                                                                              : "",
               c.parallel.hccl_group_buffer.empty() ? "" : "--hccl-group-buffer",
               "; a larger collective runs as several MPI calls; other groups unbounded):");
      for (const std::string& line : lines) log_info(">   ", line);
    }
  }
  const KernelTable& kernels = backend.kernels;
  const int threads = backend.context.num_threads;
  if (c.training.deterministic_mode) set_deterministic_threads();
  if (log_rank0) {
    log_info("> mindspeed-cpp: world size ", world.size, " (tp ", ps.sizes.tensor, ", pp ", ps.sizes.pipeline,
             ", cp ", ps.sizes.context, ", dp ", ps.sizes.data, "), ", threads, " OpenMP threads per rank");
    log_info("> kernels: ", kernels.name, " (optimization level ", c.training.optimization_level, "), attention: ",
             kernels.flash_attention_forward ? "flash" : "core (unfused)",
             kernels.unfused_ops.empty() ? "" : "; unfused reference kernels (--no-*-fusion): " + kernels.unfused_ops);
    log_info("> padded vocab (size: ", c.model.vocab_size, ") with ", c.model.padded_vocab_size - c.model.vocab_size,
             " dummy tokens (new size: ", c.model.padded_vocab_size, ")");
    if (c.training.use_flash_attn && !kopts.flash_attention) {
      log_warning("--use-flash-attn is a MindSpeed level-2 feature; at --optimization-level " +
                  std::to_string(c.training.optimization_level) + " it is not applied");
    }
  }

  // Every tensor of the model, its gradients and optimizer state and its activations lives in the
  // backend's memory (the GPU's with --device cuda); host code reaches it through transfers.
  MS_ASSIGN_OR_RETURN(std::unique_ptr<MemorySource> device_memory, agreed(ps.world(), device_memory_source(backend)));
  Allocator alloc(std::move(device_memory));
  // MFU on a GPU: against the GEMM rate measured here at start-up (bf16 tensor cores with --bf16),
  // the fastest rank's, unless --peak-tflops names the peak. Its own allocator: nothing stays.
  double peak_tflops = c.training.peak_tflops;
  if (peak_tflops == 0.0 && backend.device == DeviceKind::kCuda) {
    MS_ASSIGN_OR_RETURN(std::unique_ptr<MemorySource> scratch_memory,
                        device_memory_source(backend));
    Allocator scratch(std::move(scratch_memory));
    peak_tflops = ps.world().all_reduce_scalar(measure_gemm_tflops(backend, scratch, 4096, 20),
                                               ReduceOp::kMax);
    if (log_rank0) {
      log_info("> MFU against the measured ", c.training.bf16 ? "bf16" : "fp32",
               " GEMM rate of this GPU: ", str_cat(std::lround(peak_tflops)),
               " TFLOP/s (4096^3 through the engine's GEMM, its input rounding included; "
               "--peak-tflops sets another peak)");
    }
  }
  ParameterRegistry registry;
  // This rank's pipeline stages (validated): the layer split and the schedule.
  // Micro-batches per iteration: constant, or following --rampup-batch-size (Megatron's
  // calculators). The pipeline layout and the evaluations use the full global batch's count;
  // each batch of a ramp is checked against the schedule's rules here.
  const int64_t num_micro_full = c.training.global_batch_size / (c.training.micro_batch_size * ps.dp().size());
  MS_ASSIGN_OR_RETURN(NumMicroBatchesCalculator micro_batches,
                      agreed(ps.world(), NumMicroBatchesCalculator::create(
                                             c.training.global_batch_size, c.training.micro_batch_size, ps.dp().size(),
                                             c.training.decrease_batch_size_if_needed, c.training.rampup_batch_size)));
  if (const auto& ramp = c.training.rampup_batch_size) {
    const int64_t unit = c.training.micro_batch_size * ps.dp().size();
    for (int64_t b = ramp->start_global_batch_size; b < c.training.global_batch_size; b += ramp->batch_size_increment) {
      if (b / unit < 1 || (b % unit != 0 && !c.training.decrease_batch_size_if_needed)) continue;  // refused when used
      MS_RETURN_IF_ERROR(agreed(ps.world(), PipelineLayout::build(c.parallel, c.model.num_layers, b / unit).status()));
    }
  }
  MS_ASSIGN_OR_RETURN(const PipelineLayout layout,
                      agreed(ps.world(), PipelineLayout::build(c.parallel, c.model.num_layers, num_micro_full)));
  if (log_rank0 && ps.sizes.pipeline > 1) {
    std::string stages;
    for (const PipelineStage& s : layout.stages) {
      stages += (stages.empty() ? "" : ", ") + std::to_string(s.first_layer) + "-" +
                std::to_string(s.first_layer + s.num_layers - 1) + "@" + std::to_string(s.rank);
    }
    log_info("> pipeline: ", pipeline_schedule_name(layout.schedule), ", ", layout.chunks_per_rank,
             " chunk(s) per rank, ", num_micro_full, " micro-batches; stage layers@rank: ", stages);
  }
  GPTModelChunks model(c.model, ps, registry, layout, c.parallel.sequence_parallel);
  BufferOptions bopts = buffer_options_of(c, ps.dp_cp().size(), ps.expert_dp().size());
  bopts.backend = &backend;
  ParamAndGradBuffer buffer(model.registry(), alloc, bopts);
  std::error_code ec;
  const bool load_hf = !c.training.load.empty() && std::filesystem::is_regular_file(c.training.load + "/config.json", ec);
  // Megatron-LM's own torch checkpoint (weights); one this engine saved with --ckpt-format torch
  // also holds its index and resumes through it.
  const bool load_megatron = !c.training.load.empty() && !load_hf &&
                             MegatronTorchCheckpoint::looks_like(c.training.load) &&
                             !has_checkpoint_index(c.training.load);
  CheckpointState megatron_start;
  std::optional<MegatronTorchCheckpoint> megatron_ckpt;
  if (load_megatron) {
    MS_ASSIGN_OR_RETURN(MegatronTorchCheckpoint opened,
                        agreed(ps.world(), MegatronTorchCheckpoint::open(c.training.load)));
    megatron_ckpt.emplace(std::move(opened));
  }
  if (load_hf) {
    if (!c.training.model_type_hf.empty()) {
      MS_RETURN_IF_ERROR(
          agreed(ps.world(), check_hf_model_type(c.training.load, c.training.model_type_hf)));
    }
    MS_RETURN_IF_ERROR(agreed(ps.world(), load_hf_checkpoint(c.training.load, model[0], ps, &backend)));
    MS_RETURN_IF_ERROR(agreed(ps.world(), check_weights_finite(model.registry(), backend, alloc, c.training.load)));
    if (log_rank0) log_info("> loaded Hugging Face checkpoint from ", c.training.load);
  } else if (load_megatron) {
    MS_RETURN_IF_ERROR(agreed(ps.world(), load_megatron_weights(c, *megatron_ckpt, ps, registry,
                                                                backend, &megatron_start)));
    MS_RETURN_IF_ERROR(agreed(ps.world(), check_weights_finite(model.registry(), backend, alloc, c.training.load)));
    if (log_rank0) {
      log_info("> loaded the weights of the Megatron-LM checkpoint ", c.training.load, " (--ckpt-format torch) at iteration ",
               megatron_start.iteration);
    }
  } else {
    initialize_parameters(model.registry(), static_cast<uint64_t>(c.training.seed), ps, &backend);
  }
  // Dense parameters summed over tensor x pipeline, routed experts over expert tensor x
  // expert x pipeline (each counted once: a tensor replicated over tp, or over an axis of the 2D
  // grid, by the rank holding its main copy; a tied copy by the stage owning the original).
  int64_t local_dense = 0, local_expert = 0;
  for (const auto& p : model.registry().params()) {
    if (p->spec.expert_parallel) {
      local_expert += p->local_shape.numel();
    } else if (holds_main_tp_copy(p->spec, ps) && !p->is_tied_copy()) {
      local_dense += p->local_shape.numel();
    }
  }
  const int64_t total_params =
      static_cast<int64_t>(ps.mp().all_reduce_scalar(static_cast<double>(local_dense), ReduceOp::kSum) +
                           ps.tp_ep_pp().all_reduce_scalar(static_cast<double>(local_expert), ReduceOp::kSum));
  if (log_rank0) {
    log_info(" > number of parameters on (tensor, pipeline) model parallel rank (", ps.tp_rank, ", ", ps.pp_rank,
             "): ", model.registry().num_local_elements(), " (model total ", total_params, ")");
  }
  DdpConfig dconf;
  dconf.overlap_grad_reduce = c.parallel.overlap_grad_reduce;
  dconf.overlap_param_gather = c.parallel.overlap_param_gather;
  dconf.use_distributed_optimizer = c.parallel.use_distributed_optimizer;
  dconf.shard_grads = c.parallel.shard_gradients();
  dconf.shard_params = c.parallel.shard_parameters();
  dconf.half_grads = is_half_precision(bopts.grad_dtype);
  dconf.calculate_per_token_loss = c.training.calculate_per_token_loss;
  DistributedDataParallel ddp(buffer, ps, dconf, backend);
  // --swap-attention / --swap-optimizer: the swap tier (a file on local disk on the CPU; host
  // memory, pinned on a GPU, on a device). Made before the optimizer, which keeps tensors in it.
  std::unique_ptr<SwapTier> swap_tier;
  if (c.model.recompute.swap_attention || c.optimizer.swap_optimizer) {
    std::string where;
    if (backend.unified_memory()) {
      std::string dir = c.training.swap_dir;
      if (dir.empty()) dir = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp";
      MS_ASSIGN_OR_RETURN(std::unique_ptr<FileSwapTier> file_tier,
                          agreed(ps.world(), FileSwapTier::open(dir, alloc)));
      where = file_tier->path();
      swap_tier = std::move(file_tier);
    } else {
      MS_ASSIGN_OR_RETURN(std::unique_ptr<HostSwapTier> host_tier,
                          agreed(ps.world(), HostSwapTier::open(backend, alloc)));
      where = str_cat(host_tier->host_memory_name(), " memory");
      swap_tier = std::move(host_tier);
    }
    if (log_rank0) {
      log_info("> swap tier: ", where, " (",
               c.model.recompute.swap_attention && c.optimizer.swap_optimizer
                   ? "--swap-attention, --swap-optimizer"
               : c.optimizer.swap_optimizer ? "--swap-optimizer"
                                            : "--swap-attention",
               ")");
    }
  }
  Optimizer optimizer(c.optimizer, buffer, ps, alloc, backend, c.parallel.use_distributed_optimizer, swap_tier.get());
  if (c.training.has_loss_scaler()) {
    // Megatron's get_megatron_optimizer: constant with --loss-scale, else dynamic (--fp16).
    const TrainingConfig& t = c.training;
    MS_ASSIGN_OR_RETURN(GradScaler scaler,
                        agreed(ps.world(), t.dynamic_loss_scaling()
                                               ? GradScaler::dynamic(static_cast<float>(t.initial_loss_scale),
                                                                     static_cast<float>(t.min_loss_scale), 2.0f, 0.5f,
                                                                     static_cast<int64_t>(t.loss_scale_window), t.hysteresis)
                                               : GradScaler::constant(static_cast<float>(t.loss_scale))));
    optimizer.set_grad_scaler(std::move(scaler));
  }
  // Megatron turns the NaN check off under dynamic loss scaling: an overflow is the scaler's
  // signal, and skips the iteration.
  const bool check_for_nan = c.training.check_for_nan_in_loss_and_grad && !c.training.dynamic_loss_scaling();
  if (log_rank0 && c.training.check_for_nan_in_loss_and_grad && !check_for_nan) {
    log_info("WARNING: Setting args.check_for_nan_in_loss_and_grad to False since dynamic loss scaling is being used");
  }
  const CheckpointTarget checkpoint_target{registry, buffer, optimizer, ps};
  if (megatron_ckpt && loads_megatron_optimizer(c, *megatron_ckpt)) {
    MS_RETURN_IF_ERROR(
        agreed(ps.world(), load_megatron_optimizer_state(*megatron_ckpt, checkpoint_target)));
    if (log_rank0) {
      log_info("> loaded the optimizer state of the Megatron-LM checkpoint (Adam step ",
               megatron_ckpt->optimizer_step(), ")");
    }
  }
  // Megatron's load_checkpoint: the tracked iteration of --load (any saving layout), or a
  // warning and random weights when the directory holds no checkpoint yet.
  CheckpointState start = megatron_start;
  if (!c.training.load.empty() && !load_hf && !load_megatron) {
    if (has_checkpoint_tracker(c.training.load) || c.training.ckpt_step >= 0) {
      CheckpointLoadOptions lo;
      lo.load_optimizer = !c.training.no_load_optim;
      lo.finetune = c.training.finetune;
      lo.ckpt_step = c.training.ckpt_step;
      MS_ASSIGN_OR_RETURN(start, load_checkpoint(c.training.load, c, checkpoint_target, lo));
      MS_RETURN_IF_ERROR(agreed(ps.world(), check_weights_finite(model.registry(), backend, alloc, c.training.load)));
      if (log_rank0) {
        log_info("> loaded checkpoint from ", c.training.load, " at iteration ", start.iteration,
                 c.training.finetune ? " (--finetune: weights only, starting at iteration 0)" : "");
      }
    } else if (c.training.exit_on_missing_checkpoint) {
      return agreed(ps.world(), failed_precondition("--load ", c.training.load, " holds no checkpoint (no ",
                                                    "latest_checkpointed_iteration.txt) and "
                                                    "--exit-on-missing-checkpoint is set"));
    } else if (log_rank0) {
      log_warning("could not find the metadata file " + c.training.load +
                  "/latest_checkpointed_iteration.txt; will not load any checkpoints and will start from random");
    }
  }
  if (c.training.exit_signal_handler) install_sigterm_handler();
  // Sample-based training counts the schedule in consumed samples (a ramp-up's batches
  // differ), iteration-based in iterations.
  // A ramp-up with --train-iters counts the schedule in samples too (see validate.cpp).
  const bool sample_based = c.training.train_samples > 0;
  const bool iterations_ramp_up = !sample_based && c.training.rampup_batch_size.has_value();
  const bool lr_counts_samples = sample_based || iterations_ramp_up;
  const LrScheduler scheduler =
      sample_based         ? LrScheduler::for_samples(c.optimizer, c.training.train_samples)
      : iterations_ramp_up ? LrScheduler::for_iterations_in_samples(c.optimizer, c.training.train_iters,
                                                                    c.training.global_batch_size)
                           : LrScheduler(c.optimizer, c.training.train_iters, c.training.global_batch_size);
  if (log_rank0 && iterations_ramp_up) {
    log_info("> --rampup-batch-size with --train-iters (Megatron core_v0.12 asserts against the pair): ",
             c.training.train_iters, " iterations, the batch ramping by consumed samples and the learning rate "
             "counted in samples");
  }
  if (log_rank0 && sample_based) {
    log_info("> setting training iterations to ", c.training.train_iters, " (--train-samples ",
             c.training.train_samples, c.training.rampup_batch_size ? ", with the batch-size ramp-up)" : ")");
  }

  // Data.
  GptDataArgs dargs;
  dargs.data_path = c.data.data_path;
  dargs.train_data_path = c.data.train_data_path;
  dargs.valid_data_path = c.data.valid_data_path;
  dargs.test_data_path = c.data.test_data_path;
  if (!c.data.split.empty()) dargs.split = c.data.split;
  dargs.mock_data = c.data.mock_data;
  dargs.data_cache_path = c.data.data_cache_path;
  dargs.seed = c.training.seed;
  dargs.seq_length = c.model.seq_length;
  dargs.reset_position_ids = c.data.reset_position_ids;
  dargs.reset_attention_mask = c.data.reset_attention_mask;
  dargs.eod_mask_loss = c.data.eod_mask_loss;
  dargs.tokenizer = tokenizer_identity(*tokenizer);
  dargs.eod_token = tokenizer->eod();
  dargs.pad_token = tokenizer->pad().value_or(-1);
  MS_ASSIGN_OR_RETURN(auto dconfig, agreed(ps.world(), gpt_dataset_config_from_args(dargs)));
  MS_ASSIGN_OR_RETURN(auto num_samples,
                      get_train_valid_test_num_samples(c.training.train_iters,
                                                       sample_based ? std::optional<int64_t>(c.training.train_samples)
                                                                    : std::nullopt,
                                                       c.training.eval_interval,
                                                       c.training.eval_iters, c.training.global_batch_size));
  DatasetBuildContext bctx;
  // MindSpeed-LLM's need_to_build_dataset: without a shared file system each node's first
  // tensor-parallel rank 0 builds its own cache (any tensor-parallel rank 0 when TP spans nodes).
  bctx.builds_first =
      !c.data.no_shared_storage
          ? world.rank == 0
          : ps.tp_rank == 0 && (ps.sizes.tensor > world.local_size || world.local_rank == 0);
  bctx.all_ranks_ok = [&ps](bool ok) { return ps.world().all_reduce_scalar(ok ? 1.0 : 0.0, ReduceOp::kMin) > 0.5; };
  LowLevelDatasetFactory factory = [](const std::string& prefix) -> StatusOr<std::shared_ptr<const LowLevelDataset>> {
    MS_ASSIGN_OR_RETURN(std::unique_ptr<IndexedDataset> ds, open_token_dataset(prefix));
    return std::shared_ptr<const LowLevelDataset>(std::move(ds));
  };
  BlendedMegatronDatasetBuilder builder(dconfig, {num_samples[0], num_samples[1], num_samples[2]}, factory, bctx);
  MS_ASSIGN_OR_RETURN(GptDatasets datasets, agreed(ps.world(), builder.build()));
  MS_RETURN_IF_ERROR(agreed(ps.world(), datasets.train() ? ok_status()
                                                          : invalid_argument("no training data (check --split / "
                                                                             "--train-data-path)")));
  const int64_t dp = ps.dp().size();
  MS_ASSIGN_OR_RETURN(GptDataLoader train_loader,
                      agreed(ps.world(),
                             GptDataLoader::create(datasets.train(), start.consumed_train_samples,
                                                   c.training.micro_batch_size, ps.dp_rank, dp)));
  std::unique_ptr<GptDataLoader> valid_loader, test_loader;
  if (datasets.valid() && c.training.eval_iters > 0) {
    MS_ASSIGN_OR_RETURN(GptDataLoader l, agreed(ps.world(), GptDataLoader::create(datasets.valid(),
                                                                                   start.consumed_valid_samples,
                                                                                   c.training.micro_batch_size,
                                                                                   ps.dp_rank, dp)));
    valid_loader = std::make_unique<GptDataLoader>(std::move(l));
  }
  if (datasets.test() && c.training.eval_iters > 0) {
    MS_ASSIGN_OR_RETURN(GptDataLoader l, agreed(ps.world(), GptDataLoader::create(datasets.test(), 0,
                                                                                   c.training.micro_batch_size,
                                                                                   ps.dp_rank, dp)));
    test_loader = std::make_unique<GptDataLoader>(std::move(l));
  }
  if (log_rank0) log_info("> setup done in ", setup_timer.seconds(), " s; training ...");

  ForwardContext ctx;
  ctx.backend = &backend;
  ctx.alloc = &alloc;
  ctx.ps = &ps;
  ctx.seed = static_cast<uint64_t>(c.training.seed);
  ctx.sequence_parallel = c.parallel.sequence_parallel;
  ctx.coc_chunks = c.parallel.coc_chunks();
  ctx.mc2 = c.parallel.use_ascend_mc2;
  ctx.tp_2d_overlap = {.ag_with_matmul = c.parallel.tp_2d_overlap_ag_with_matmul,
                       .matmul_with_rs = c.parallel.tp_2d_overlap_matmul_with_rs,
                       .backward_ag_with_matmul = c.parallel.tp_2d_backward_overlap_ag_with_matmul};
  // --unaligned-linear's uneven sequence split (only where the positions do not divide: an even
  // split keeps the plain path, --variable-seq-lengths included).
  if (c.model.unaligned_linear && c.parallel.sequence_parallel &&
      c.model.seq_length % c.parallel.tensor_model_parallel_size != 0) {
    ctx.unaligned_sequence = c.model.seq_length;
  }
  ctx.gradient_accumulation_fusion = c.parallel.gradient_accumulation_fusion;
  ctx.bf16 = c.training.bf16;
  ctx.fp16 = c.training.fp16;
  ctx.calculate_per_token_loss = c.training.calculate_per_token_loss;
  ctx.cp = c.parallel.cp;
  ctx.hooks = &ddp;
  ctx.swap_tier = c.model.recompute.swap_attention ? swap_tier.get() : nullptr;

  ProfileWindow profile_window(c.training.profile, ps, [&] { ddp.finish_param_sync(); });
  Timer interval;
  double interval_loss = 0.0, interval_flops = 0.0, interval_tokens = 0.0;
  int64_t interval_iters = 0;
  int64_t interval_advanced = 0, interval_skipped = 0, interval_nan = 0;  // Megatron's total_loss_dict counters
  // MoE: the routers' aux and z losses per layer (Megatron's layer-wise tracker).
  MoeAuxLosses moe_losses;
  moe_losses.load_balancing.assign(static_cast<size_t>(c.model.num_layers), 0.0);
  moe_losses.z.assign(static_cast<size_t>(c.model.num_layers), 0.0);
  if (c.model.moe.enabled()) ctx.moe_aux_losses = &moe_losses;
  std::vector<std::pair<std::string, double>> interval_moe;
  double last_grad_norm = 0.0;
  std::vector<MicroBatch> mbs;
  CheckpointState progress = start;
  CheckpointSaver saver(ps, c.training.async_save);
  int64_t async_iteration = -1;  // the save being written in the background
  // Publishes a background save once every rank has written it (wait: now).
  auto finish_async_save = [&](bool wait) -> Status {
    if (!saver.pending()) return ok_status();
    MS_RETURN_IF_ERROR(saver.finish(wait));
    if (!saver.pending() && log_rank0) {
      log_info("  successfully saved checkpoint from iteration ", async_iteration, " to ", c.training.save,
               " (asynchronously)");
    }
    return ok_status();
  };
  auto save = [&](int64_t it) -> Status {
    profiler::CpuScope save_slice("save checkpoint");
    ddp.finish_param_sync();  // the parameters must be final
    progress.iteration = it;
    Timer save_timer;
    MS_RETURN_IF_ERROR(finish_async_save(/*wait=*/true));
    MS_RETURN_IF_ERROR(saver.save(c.training.save, progress, c, checkpoint_target, !c.training.no_save_optim));
    if (c.training.async_save) {
      async_iteration = it;
      if (log_rank0) {
        log_info("  started an asynchronous save of iteration ", it, " to ", c.training.save, " [ snapshot ",
                 save_timer.seconds() * 1000.0, " ms ]");
      }
    } else if (log_rank0) {
      log_info("  successfully saved checkpoint from iteration ", it, " to ", c.training.save, " [ ",
               save_timer.seconds() * 1000.0, " ms ]");
    }
    interval.restart();  // saving time is not training time
    return ok_status();
  };
  // TensorBoard and the metrics file, written by the rank that prints the iteration line.
  MS_ASSIGN_OR_RETURN(std::unique_ptr<TrainingMetrics> metrics,
                      agreed(ps.world(), TrainingMetrics::open(c.logging, log_last)));
  const Timer run_timer;
  int64_t last_saved = -1;
  const char* run_report = std::getenv(kRunReportVariable);
  std::vector<double> iteration_seconds;                 // of each train_step, for the run report
  std::map<std::string, CommStats> traffic_after_first;  // the groups' counters after iteration 1
  // --skip-train: straight to the evaluation at the end (Megatron's evaluation-only run).
  const int64_t last_iteration = c.training.skip_train ? start.iteration : c.training.train_iters;
  for (int64_t it = start.iteration + 1; it <= last_iteration; ++it) {
    MS_RETURN_IF_ERROR(profile_window.before_step(it - start.iteration - 1));
    profiler::Scope iteration_slice(profiler::category::kStep, profiler::Level::kLevel0,
                                    [it] { return "iteration " + std::to_string(it); });
    // This iteration's batch (Megatron's update_num_microbatches before the step): with a
    // ramp-up, a change of the micro-batch count saves a checkpoint first (as Megatron does).
    const int64_t num_micro_before = micro_batches.num_micro_batches();
    MS_RETURN_IF_ERROR(micro_batches.update(progress.consumed_train_samples, /*consistency_check=*/false));
    if (micro_batches.num_micro_batches() != num_micro_before && it != start.iteration + 1 &&
        !c.training.save.empty() && last_saved != it - 1) {
      MS_RETURN_IF_ERROR(save(it - 1));
      last_saved = it - 1;
    }
    MS_RETURN_IF_ERROR(agreed(ps.world(), micro_batches.update(progress.consumed_train_samples, true)));
    const int64_t num_micro = micro_batches.num_micro_batches();
    const int64_t batch = micro_batches.current_running_global_batch_size();
    // The schedule counts the updates made (Megatron's OptimizerParamScheduler steps only after
    // a successful one): skipped iterations and their samples are left out.
    const double lr_now = lr_counts_samples ? scheduler.lr(progress.consumed_train_samples - progress.skipped_samples)
                                       : scheduler.lr(it - 1 - progress.skipped_iterations);
    std::optional<profiler::CpuScope> data_slice(std::in_place, "get batch");
    MS_ASSIGN_OR_RETURN(const bool got, agreed(ps.world(), next_global_batch(train_loader, c, ps, num_micro, ctx, mbs)));
    data_slice.reset();
    MS_RETURN_IF_ERROR(agreed(ps.world(), got ? ok_status()
                                              : failed_precondition("the training data ran out at iteration ", it)));
    ctx.training = true;
    ctx.iteration = it;
    if (hooks.on_iteration) hooks.on_iteration(world.rank, it);
    TrainStepOptions step_options;
    if (hooks.on_forward_step) {
      step_options.on_forward_step = [&hooks, &world, it](int64_t step) { hooks.on_forward_step(world.rank, it, step); };
    }
    const Timer step_timer;
    const TrainStepResult r = train_step(model, buffer, optimizer, &ddp, ctx, mbs, lr_now, step_options);
    if (run_report != nullptr) {
      iteration_seconds.push_back(step_timer.seconds());
      if (iteration_seconds.size() == 1) traffic_after_first = traffic_of(ps);
    }
    // The loss lives on the last pipeline stage (the others add 0).
    const double loss_sum =
        ps.pp().all_reduce_scalar(ps.dp_cp().all_reduce_scalar(r.loss_sum, ReduceOp::kSum), ReduceOp::kSum);
    const double tokens =
        ps.pp().all_reduce_scalar(ps.dp_cp().all_reduce_scalar(r.num_tokens, ReduceOp::kSum), ReduceOp::kSum);
    // Megatron's training_log: a skipped iteration's loss is left out of the average; it is
    // counted as skipped, and as a nan iteration when its loss is not finite.
    const bool skipped = r.optimizer.skipped;
    if (skipped) {
      ++progress.skipped_iterations;
      progress.skipped_samples += batch;
      ++interval_skipped;
      if (!std::isfinite(loss_sum)) ++interval_nan;
    } else {
      interval_loss += tokens > 0.0 ? loss_sum / tokens : 0.0;
      ++interval_advanced;
    }
    const double lr_after =
        lr_counts_samples ? scheduler.lr(progress.consumed_train_samples + batch - progress.skipped_samples)
                     : scheduler.lr(it - progress.skipped_iterations);
    interval_flops += num_floating_point_operations(c.model, batch);
    interval_tokens += static_cast<double>(batch * c.model.seq_length);
    ++interval_iters;
    const std::vector<std::pair<std::string, double>> moe_now = moe_losses_of_iteration(c, ps, num_micro, moe_losses);
    if (interval_moe.empty()) interval_moe = moe_now;
    else
      for (size_t i = 0; i < moe_now.size(); ++i) interval_moe[i].second += moe_now[i].second;
    last_grad_norm = r.optimizer.grad_norm;
    const bool scaler_skipped = skipped && optimizer.grad_scaler().has_value();  // Megatron's grad norm None
    metrics->training_iteration({.iteration = it,
                                 .consumed_train_samples = progress.consumed_train_samples + batch,
                                 .learning_rate = lr_after,
                                 .batch_size = batch,
                                 .lm_loss = tokens > 0.0 ? loss_sum / tokens : 0.0,
                                 .loss_scale = optimizer.loss_scale(),
                                 .grad_norm = last_grad_norm,
                                 .has_grad_norm = !scaler_skipped,
                                 .world_size = world.size,
                                 .allocator = &alloc,
                                 .moe_losses = moe_now});
    if (check_for_nan && (!std::isfinite(loss_sum) || !std::isfinite(last_grad_norm))) {
      return diagnose_non_finite(registry, ps, backend, alloc, it, r.loss_sum);
    }
    if (it % c.training.log_interval == 0 || it == c.training.train_iters) {
      const double seconds = interval.seconds() / static_cast<double>(interval_iters);
      IterationLog l;
      l.iteration = it;
      l.train_iters = c.training.train_iters;
      l.consumed_samples = progress.consumed_train_samples + batch;  // with this iteration
      l.elapsed_ms_per_iteration = seconds * 1000.0;
      l.tflops_per_rank = interval_flops / static_cast<double>(interval_iters) / (seconds * 1e12 * world.size);
      l.learning_rate = lr_after;  // Megatron logs the rate after the scheduler step
      l.global_batch_size = batch;
      l.lm_loss = interval_loss / static_cast<double>(std::max<int64_t>(1, interval_advanced));
      for (auto [name, value] : interval_moe) l.moe_losses.emplace_back(name, value / static_cast<double>(interval_iters));
      l.grad_norm = last_grad_norm;
      l.has_grad_norm = !scaler_skipped;
      l.loss_scale = optimizer.loss_scale();
      l.skipped_iterations = interval_skipped;
      l.nan_iterations = interval_nan;
      // Collectives: every rank logs the same iterations (after this iteration's step).
      // (After an overflow Megatron has no zero count either: the step returned None.)
      if (c.logging.log_num_zeros_in_grad && !scaler_skipped) l.num_zeros = optimizer.count_zero_grads();
      if (c.logging.log_params_norm) l.params_norm = optimizer.params_norm();
      l.tokens_per_second_per_rank = interval_tokens / static_cast<double>(interval_iters) / seconds / world.size;
      if (peak_tflops > 0.0) l.mfu = l.tflops_per_rank / peak_tflops;
      // Time left at this run's pace so far (evaluations and saves included).
      l.time_left_seconds = run_timer.seconds() / static_cast<double>(it - start.iteration) *
                            static_cast<double>(c.training.train_iters - it);
      profiler::CpuScope log_slice("training log");
      if (log_last) log_line(format_iteration_line(l, timestamp_now()));
      metrics->log_line(l);
      // Memory per pipeline stage (stages hold different layers, embedding and head): the
      // last rank, and the first tensor/data-parallel rank of every other stage.
      if (log_last || (ps.sizes.pipeline > 1 && !ps.is_pipeline_last_stage() && ps.tp_rank == 0 && ps.dp_rank == 0 &&
                       ps.cp_rank == 0)) {
        log_line(format_memory_line(world.rank, alloc.stats()));
      }
      interval_loss = 0.0;
      interval_flops = 0.0;
      interval_tokens = 0.0;
      interval_iters = 0;
      interval_advanced = interval_skipped = interval_nan = 0;
      interval_moe.clear();
      interval.restart();
    }
    MS_RETURN_IF_ERROR(finish_async_save(/*wait=*/false));
    progress.consumed_train_samples += batch;
    progress.floating_point_operations_so_far += num_floating_point_operations(c.model, batch);
    if (valid_loader && it % c.training.eval_interval == 0 && it != c.training.train_iters) {
      ddp.finish_param_sync();
      MS_ASSIGN_OR_RETURN(double vl, evaluate(model, ctx, *valid_loader, c, num_micro_full, ps));
      progress.consumed_valid_samples += c.training.eval_iters * c.training.global_batch_size;
      if (log_last) log_line(format_validation_lines("iteration " + std::to_string(it), vl));
      metrics->evaluation("validation", it, progress.consumed_train_samples, vl, /*to_tensorboard=*/true);
      interval.restart();  // evaluation time is not training time
    }
    if (!c.training.save.empty() && c.training.save_interval > 0 && it % c.training.save_interval == 0) {
      MS_RETURN_IF_ERROR(save(it));
      last_saved = it;
    }
    // Megatron's exit conditions, decided together (any rank's signal or clock counts).
    std::string exit_reason;
    if (c.training.exit_interval > 0 && it % c.training.exit_interval == 0) exit_reason = "--exit-interval";
    if (c.training.exit_duration_in_mins > 0.0 &&
        ps.world().all_reduce_scalar(run_timer.seconds() / 60.0, ReduceOp::kMax) > c.training.exit_duration_in_mins) {
      exit_reason = "--exit-duration-in-mins";
    }
    if (c.training.exit_signal_handler &&
        ps.world().all_reduce_scalar(sigterm_received() ? 1.0 : 0.0, ReduceOp::kMax) > 0.5) {
      exit_reason = "SIGTERM (--exit-signal-handler)";
    }
    if (!exit_reason.empty()) {
      if (!c.training.save.empty() && last_saved != it) MS_RETURN_IF_ERROR(save(it));
      MS_RETURN_IF_ERROR(finish_async_save(/*wait=*/true));
      if (log_rank0) log_info("exiting program at iteration ", it, " (", exit_reason, ")");
      return profile_window.finish();
    }
  }
  MS_RETURN_IF_ERROR(profile_window.before_step(last_iteration - start.iteration));  // ends a window at the last step
  MS_RETURN_IF_ERROR(profile_window.finish());
  // Megatron saves the final iteration unless just saved, also when the run started there
  // (resuming with --train-iters at the loaded iteration re-saves it: a format conversion).
  const int64_t final_iteration = std::max(c.training.train_iters, start.iteration);
  if (!c.training.save.empty() && !c.training.skip_train && last_saved != final_iteration &&
      final_iteration != 0) {
    MS_RETURN_IF_ERROR(save(final_iteration));
  }
  MS_RETURN_IF_ERROR(finish_async_save(/*wait=*/true));
  ddp.finish_param_sync();
  if (run_report != nullptr && *run_report != '\0') {
    MS_RETURN_IF_ERROR(
        write_run_report(run_report, ps, alloc.stats(), iteration_seconds, traffic_after_first));
  }
  if (valid_loader) {
    MS_ASSIGN_OR_RETURN(double vl, evaluate(model, ctx, *valid_loader, c, num_micro_full, ps));
    if (log_last) log_line(format_validation_lines("the end of training for val data", vl));
    metrics->evaluation("validation", last_iteration, progress.consumed_train_samples, vl, !c.training.skip_train);
  }
  if (test_loader) {
    MS_ASSIGN_OR_RETURN(double tl, evaluate(model, ctx, *test_loader, c, num_micro_full, ps));
    if (log_last) log_line(format_validation_lines("the end of training for test data", tl));
    metrics->evaluation("test", last_iteration, progress.consumed_train_samples, tl, !c.training.skip_train);
  }
  return ok_status();
}

}  // namespace mindspeed
