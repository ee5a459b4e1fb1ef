// The auto-settings memory model (memory_model.h).
#include "auto_settings/memory_model.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/str_cat.h"
#include "distributed/param_and_grad_buffer.h"
#include "models/gpt/gpt_model_chunks.h"
#include "parallel/parallel_state.h"
#include "parallel/rank_generator.h"
#include "pipeline_parallel/schedule_plan.h"

namespace mindspeed {
namespace {

// The sizes a layer's activations are counted in, on one rank for one micro-batch.
struct LayerShape {
  double tokens;  ///< N = s*b/cp: the micro-batch's tokens on this context-parallel rank
  double rows;    ///< N / t' (t' = tp with sequence parallelism, else 1): the replicated parts
  double t;       ///< tensor-parallel size
  double d;       ///< bytes of a saved element: 2 with --bf16 / --fp16, else 4
  double h, q_width, kv_width, ffn, ffn_in, heads;
  double norm_stats;  ///< fp32 bytes per row a norm keeps (LayerNorm: mean + rstd; RMSNorm: rstd)
  bool half;
};

LayerShape layer_shape(const Configs& c) {
  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.parallel;
  LayerShape s;
  s.tokens = static_cast<double>(m.seq_length) * static_cast<double>(c.training.micro_batch_size) /
             p.context_parallel_size;
  s.t = p.tensor_model_parallel_size;
  s.rows = p.sequence_parallel ? s.tokens / s.t : s.tokens;
  s.half = c.training.bf16 || c.training.fp16;
  s.d = s.half ? 2.0 : 4.0;
  s.h = static_cast<double>(m.hidden_size);
  s.q_width = static_cast<double>(m.num_attention_heads * m.kv_channels);
  s.kv_width = static_cast<double>(m.query_groups() * m.kv_channels);
  const bool moe = m.moe.num_experts > 0;
  // A routed MoE layer's experts see top-k copies of each token (spread over the experts).
  const double ffn = moe ? static_cast<double>(m.expert_ffn_hidden_size() * m.moe.router_topk)
                         : static_cast<double>(m.ffn_hidden_size);
  s.ffn = ffn;
  s.ffn_in = m.swiglu ? 2.0 * ffn : ffn;
  s.heads = static_cast<double>(m.num_attention_heads);
  s.norm_stats = m.normalization == Normalization::kRMSNorm ? 4.0 : 8.0;
  return s;
}

double layer_bytes(const LayerShape& s, RecomputeGranularity granularity) {
  if (granularity == RecomputeGranularity::kFull) return s.d * s.rows * s.h;  // the layer's input
  // Input, input_layernorm output, the residual mid point, pre_mlp_layernorm output: 4 x [rows, h];
  // q, k, v; the core attention output; fc1's output and the activation: the TP-split parts.
  const double tensors = 4.0 * s.rows * s.h + s.tokens * (s.q_width + 2.0 * s.kv_width) / s.t +
                         s.tokens * s.q_width / s.t + s.tokens * (s.ffn_in + s.ffn) / s.t;
  const double stats = 2.0 * s.norm_stats * s.rows;   // fp32 statistics of both norms
  const double lse = 4.0 * s.heads / s.t * s.tokens;  // flash attention's fp32 log-sum-exp
  double bytes = s.d * tensors + stats + lse;
  // Selective (core_attn): the log-sum-exp and the attention output are rebuilt in backward.
  if (granularity == RecomputeGranularity::kSelective)
    bytes -= lse + s.d * s.tokens * s.q_width / s.t;
  return bytes;
}

// Activations outside the saved layer tensors at the peak (the start of a backward): the fp32
// gradient path through the residual stream and, with 16-bit activations, the widened fp32
// copies of the layer's largest saved tensors. Fitted to this engine's measured peaks
// (bench/README.md's model at TP 1, 2 and 2+SP, bf16 and fp32, to 0.1 MiB).
double outside_layer_bytes(const LayerShape& s) {
  return 12.0 * s.rows * s.h + (s.half ? 1.75 * s.tokens * s.ffn / s.t : 0.0);
}

// Workspace peak of a stage: the largest transient of its modules.
double workspace_bytes(const Configs& c, const LayerShape& s, bool pre_process, bool post_process) {
  const ModelConfig& m = c.model;
  const double vocab_local = static_cast<double>(m.padded_vocab_size) / s.t;
  const double tokens = s.tokens;  // the output layer works on whole rows (gathered under SP)
  // A layer's backward, at the MLP's: the fp32 gradients of the activation and of fc1's output
  // over all rows ([tokens, ffn] and [tokens, ffn_in] split by TP), two fp32 [rows, h] (the
  // incoming gradient and the input's), and with 16-bit parameters a layer's weights' worth of
  // fp32 weight-gradient temporaries. Fitted to the exact peaks of middle pipeline stages (TP1/2,
  // SP, micro-batches of 2-8 samples: within 3 %); the first form, 12 [rows, h] bytes, was half
  // of what they hold.
  const double layer_weights_local =
      s.h * (s.q_width + 2.0 * s.kv_width + s.q_width + s.ffn_in + s.ffn) / s.t;
  const double weight_grads = s.half ? 4.0 * layer_weights_local : 0.0;
  double peak = 4.0 * tokens * (s.ffn + s.ffn_in) / s.t + 8.0 * s.rows * s.h + weight_grads;
  // Or at the attention's backward: the fp32 gradients of q, k, v (fused and per head) and of the
  // core attention's output (attention.cpp), and with context parallelism the algorithm's buffers
  // (the same token x width products on every rank): Ulysses' gathered q, k, v and their
  // gradients; the ring's key/value blocks in flight, their gradient accumulators and the block's
  // query gradient (ring_attention.cpp: 18 [k; v]-halves and one q).
  const ContextParallelConfig& cp = c.parallel.cp;
  const int64_t cp_size = c.parallel.context_parallel_size;
  const int64_t ulysses = cp.algo == CpAlgo::kUlysses  ? cp_size
                          : cp.algo == CpAlgo::kHybrid ? cp.ulysses_degree
                                                       : 1;
  const double q = s.q_width / s.t, kv = s.kv_width / s.t;
  double attention = 4.0 * tokens * (3.0 * q + 4.0 * kv) + weight_grads;
  if (cp_size > 1 && ulysses > 1) attention += 8.0 * tokens * (q + 2.0 * kv);
  if (cp_size / ulysses > 1) attention += 4.0 * tokens * (18.0 * kv + q);
  peak = std::max(peak, attention);
  if (post_process) {
    // OutputLayerLoss::loss_chunk_rows: about 256 MiB of fp32 logits per chunk, at least 64 rows.
    const double chunk_rows = std::min(
        tokens, std::max(64.0, static_cast<double>(int64_t{256} << 20) / (4.0 * vocab_local)));
    double loss =
        4.0 * chunk_rows * vocab_local + 16.0 * tokens;  // logits chunk, labels/mask/scale/losses
    if (s.half)
      loss +=
          4.0 * vocab_local * s.h + 4.0 * tokens * s.h;  // fp32 output weight, widened input grad
    if (c.parallel.sequence_parallel)
      loss += 2.0 * 4.0 * tokens * s.h;  // gathered input and its gradient
    peak = std::max(peak, loss);
  }
  // The embedding's fp32 output rows, and with 16-bit parameters the fp32 copy of its word
  // embeddings (ComputeWeights; one at a time: the first form counted two, 4 MiB too many on the
  // bench's first stages).
  if (pre_process)
    peak = std::max(peak, 4.0 * tokens * s.h + (s.half ? 4.0 * vocab_local * s.h : 0.0));
  return peak;
}

// A ParallelState with one pipeline rank's coordinates and the layout's sizes, groups of one:
// enough for the model code to declare that stage's parameters.
std::unique_ptr<ParallelState> stage_state(const Configs& c, int world_size, int pp_rank) {
  const ParallelLayout l = parallel_layout(c.parallel, world_size);
  auto ps = ParallelState::single_process();
  ps->world_size = world_size;
  ps->sizes.tensor = l.tp;
  ps->sizes.pipeline = l.pp;
  ps->sizes.context = l.cp;
  ps->sizes.data = world_size / (l.tp * l.pp * l.cp);
  ps->sizes.expert = l.ep;
  ps->sizes.expert_tensor = l.etp > 0 ? l.etp : l.tp;
  ps->sizes.expert_data = world_size / (ps->sizes.expert_tensor * l.ep * l.pp);
  ps->pp_rank = pp_rank;
  return ps;
}

int64_t dtype_bytes(bool half) { return half ? 2 : 4; }

// What decides a layout's plan and its stages: the schedule and each stage's place and size.
std::string layout_key(const PipelineLayout& layout) {
  std::string key = str_cat(static_cast<int>(layout.schedule), "/", layout.pipeline_size, "/",
                            layout.chunks_per_rank, "/", layout.microbatch_group_size, "/",
                            layout.dw_detach ? 1 : 0);
  for (const PipelineStage& s : layout.stages)
    key += str_cat("|", s.rank, ",", s.chunk, ",", s.first_layer, ",", s.num_layers);
  return key;
}

// A stage's parameters as the model code declares them, remembered per tensor/expert layout
// and stage (declaring an 80-layer stage builds its rotary tables; the search asks again for
// every micro-batch size, recompute mode and optimizer of the same stage).
ParameterRegistry& stage_parameters(const Configs& c, int world_size, const PipelineLayout& layout,
                                    int pp_rank) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<ParameterRegistry>> cache;
  const ParallelLayout l = parallel_layout(c.parallel, world_size);
  const ModelConfig& m = c.model;
  // The model's shape too (one per search; a test process builds several).
  std::string key =
      str_cat(m.num_layers, ",", m.hidden_size, ",", m.ffn_hidden_size, ",", m.num_attention_heads,
              ",", m.query_groups(), ",", m.kv_channels, ",", m.padded_vocab_size, ",",
              m.max_position_embeddings, ",", m.swiglu, ",", static_cast<int>(m.normalization), ",",
              static_cast<int>(m.position_embedding_type), ",",
              m.untie_embeddings_and_output_weights, ",", m.add_bias_linear, ",", m.add_qkv_bias,
              ",", m.moe.num_experts, ",", m.expert_ffn_hidden_size(), ",",
              m.moe.shared_expert_intermediate_size, ",", m.noop_layers.size());
  key += str_cat("/", l.tp, "/", l.ep, "/", l.etp, "/", c.parallel.sequence_parallel ? 1 : 0, "/",
                 pp_rank, "/", layout_key(layout));
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<ParameterRegistry>& registry = cache[key];
  if (registry == nullptr) {
    registry = std::make_unique<ParameterRegistry>();
    const std::unique_ptr<ParallelState> ps = stage_state(c, world_size, pp_rank);
    const GPTModelChunks chunks(c.model, *ps, *registry, layout, c.parallel.sequence_parallel);
  }
  return *registry;
}

// simulate_plans(layout, num_microbatches) for its live micro-batches, remembered: the planner
// asks for the same plan for many candidates, and a 1024-micro-batch plan over 80 stages is not
// free. Thread-safe.
const PlanSimulation& simulated_plan(const PipelineLayout& layout, int64_t num_microbatches) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<PlanSimulation>> cache;
  const std::string key = str_cat(num_microbatches, "#", layout_key(layout));
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<PlanSimulation>& sim = cache[key];
  if (sim == nullptr)
    sim = std::make_unique<PlanSimulation>(simulate_plans(layout, num_microbatches));
  return *sim;
}

}  // namespace

const StageMemory& MemoryEstimate::largest() const {
  return *std::max_element(
      stages.begin(), stages.end(),
      [](const StageMemory& a, const StageMemory& b) { return a.total() < b.total(); });
}

double layer_activation_bytes(const Configs& c) {
  return layer_bytes(layer_shape(c), c.model.recompute.granularity);
}

StatusOr<MemoryEstimate> estimate_memory(const Configs& c, int world_size,
                                         const MeasuredActivations* measured) {
  const ParallelConfig& p = c.parallel;
  if (p.tp_2d)
    return unimplemented(
        "auto settings: the memory model has no 2D tensor parallelism (--tp-2d) yet");
  const int dp = world_size / (p.tensor_model_parallel_size * p.pipeline_model_parallel_size *
                               p.context_parallel_size);
  const int64_t num_micro = c.training.global_batch_size / (c.training.micro_batch_size * dp);
  MS_ASSIGN_OR_RETURN(const PipelineLayout layout,
                      PipelineLayout::build(p, c.model.num_layers, num_micro));
  const PlanSimulation& sim = simulated_plan(layout, num_micro);
  const LayerShape shape = layer_shape(c);
  const int64_t mbs = c.training.micro_batch_size;
  // Per layer: the measured no-recompute bytes scaled by the modelled recompute ratio.
  const double modelled_none = layer_bytes(shape, RecomputeGranularity::kNone);
  const double modelled_layer = layer_bytes(shape, c.model.recompute.granularity);
  const double per_layer = measured != nullptr
                               ? measured->per_layer_per_sample * static_cast<double>(mbs) *
                                     (modelled_layer / modelled_none)
                               : modelled_layer;
  const double per_layer_none = measured != nullptr
                                    ? measured->per_layer_per_sample * static_cast<double>(mbs)
                                    : modelled_none;
  const bool half_params = c.training.bf16 || c.training.fp16;
  const bool half_grads = c.optimizer.o2_gradient || c.training.fp16_gradients();

  MemoryEstimate estimate;
  for (int r = 0; r < p.pipeline_model_parallel_size; ++r) {
    const std::unique_ptr<ParallelState> ps = stage_state(c, world_size, r);
    ParameterRegistry& registry = stage_parameters(c, world_size, layout, r);
    const BufferLayout buffer = lay_out_buffer(
        registry, buffer_options_of(c, ps->sizes.data * ps->sizes.context, ps->sizes.expert_data));
    StageMemory s;
    s.pp_rank = r;
    s.num_params = registry.num_local_elements();
    int64_t sharded = 0;  // this rank's 1/dp of every bucket (the distributed optimizer's share)
    for (const Bucket& b : buffer.buckets) {
      sharded += b.numel / (b.expert ? ps->sizes.expert_data : ps->sizes.data * ps->sizes.context);
    }
    s.params = (p.shard_parameters() ? sharded : buffer.numel) * dtype_bytes(half_params);
    s.grads = p.shard_gradients() ? sharded * 4 : buffer.numel * dtype_bytes(half_grads);
    const int64_t owned = p.use_distributed_optimizer ? sharded : buffer.numel;
    const OptimizerConfig& o = c.optimizer;
    if (!o.swap_optimizer) {
      s.optimizer = owned * 2 * (o.o2_optimizer ? 2 : 4);  // exp_avg, exp_avg_sq
      if (o.reuse_fp32_param)
        s.optimizer += owned * 2;  // the 16-bit residual of the fp32 master
      else if (half_params)
        s.optimizer += owned * 4;  // fp32 main parameters
      if (o.ema()) s.optimizer += owned * 4;
    }
    // Activations: the layers of every live (micro-batch, chunk) pair; with full recompute one
    // layer's whole activations are rebuilt at a time on top.
    int64_t layers_per_chunk = 0;
    bool pre = false, post = false;
    for (const PipelineStage& st : layout.stages_of_rank(r)) {
      layers_per_chunk = std::max(layers_per_chunk, st.num_layers);
      pre = pre || st.pre_process;
      post = post || st.post_process;
    }
    s.live_microbatch_chunks =
        sim.peak_in_flight.empty() ? 1 : sim.peak_in_flight[static_cast<size_t>(r)];
    // Full recompute rebuilds one layer's whole activations in its backward, beside the gradient
    // path (outside the layers) and after the loss's workspace is gone.
    // Modelled (no profile): with 16-bit activations the rebuilt layer's backward also holds fp32
    // copies of its largest tensors, 1.75x its saved bytes in all (fitted as outside_layer_bytes).
    const RecomputeConfig& rc = c.model.recompute;
    const double widened = measured == nullptr && shape.half ? 1.75 : 1.0;
    const double rebuilt = rc.full() && layers_per_chunk > 0 ? widened * per_layer_none : 0.0;
    // The layers of every live (micro-batch, chunk) pair at the end of a forward; by block, the
    // first k layers of each chunk keep only their input, the others everything, and a rebuilt
    // layer's backward (the first k come last) sees the others of its chunk already freed.
    double chunk = static_cast<double>(layers_per_chunk) * per_layer;
    double recomputed = chunk;  // of one chunk, when its rebuilt layer's backward runs
    if (rc.full() && rc.method == RecomputeMethod::kBlock) {
      const int64_t k = std::min(rc.num_layers, layers_per_chunk);
      recomputed = static_cast<double>(k) * per_layer;
      chunk = recomputed + static_cast<double>(layers_per_chunk - k) * per_layer_none;
    }
    const double live = static_cast<double>(s.live_microbatch_chunks);
    const double at_forward_end = live * chunk;
    const double at_rebuild = (live - 1.0) * chunk + recomputed + rebuilt;
    const double layers_peak = std::max(at_forward_end, at_rebuild);
    const double outside =
        measured != nullptr ? measured->outside_layers.at(mbs) : outside_layer_bytes(shape);
    s.activations = static_cast<int64_t>(layers_peak + outside);
    // The profile is of one stage holding the embedding and the loss: its workspace and what
    // lives at its peak outside the layers are the last stage's (the loss's logits chunk and its
    // fp32 output weight); a stage without the loss has the modelled workspace of its layers
    // (and embedding) instead.
    const double modelled_workspace = workspace_bytes(c, shape, pre, post);
    if (measured == nullptr) {
      s.workspace = static_cast<int64_t>(modelled_workspace);
      s.transient = s.activations + s.workspace;
    } else if (post) {
      s.workspace = static_cast<int64_t>(measured->workspace.at(mbs));
      s.transient = static_cast<int64_t>(std::max(
          at_forward_end + measured->transient_outside_layers.at(mbs), at_rebuild + outside));
    } else {
      s.workspace = static_cast<int64_t>(modelled_workspace);
      s.transient = static_cast<int64_t>(layers_peak + outside + modelled_workspace);
    }
    estimate.stages.push_back(s);
  }
  return estimate;
}

}  // namespace mindspeed
