// The auto-settings time model (time_model.h).
#include "auto_settings/time_model.h"

#include <algorithm>

#include "auto_settings/candidate.h"
#include "auto_settings/step_simulation.h"
#include "config/pipeline_layout.h"
#include "core/check.h"

namespace mindspeed {
namespace {

struct Sizes {
  double t, cp, pp, dp, world;
  double tokens;  ///< s*b/cp of one micro-batch on one rank
  double h;
  int64_t microbatches;
};

Sizes sizes_of(const Configs& c, int world_size) {
  const ParallelConfig& p = c.parallel;
  Sizes s;
  s.t = p.tensor_model_parallel_size;
  s.cp = p.context_parallel_size;
  s.pp = p.pipeline_model_parallel_size;
  s.world = world_size;
  s.dp = world_size / (s.t * s.cp * s.pp);
  s.tokens = static_cast<double>(c.model.seq_length * c.training.micro_batch_size) / s.cp;
  s.h = static_cast<double>(c.model.hidden_size);
  s.microbatches =
      c.training.global_batch_size / (c.training.micro_batch_size * static_cast<int64_t>(s.dp));
  return s;
}

// Forward FLOPs of one layer for one micro-batch on one rank (Megatron's count, flops.h).
double layer_forward_flops(const Configs& c, const Sizes& s) {
  const ModelConfig& m = c.model;
  const double h = s.h, q = static_cast<double>(m.num_attention_heads * m.kv_channels),
               kv = static_cast<double>(m.query_groups() * m.kv_channels);
  const double seq = static_cast<double>(m.seq_length);
  const double ffn = m.moe.num_experts > 0
                         ? static_cast<double>(m.expert_ffn_hidden_size() * m.moe.router_topk)
                         : static_cast<double>(m.ffn_hidden_size);
  const double gemms = 2.0 * s.tokens * h * (q + 2.0 * kv) + 2.0 * s.tokens * q * h +
                       2.0 * s.tokens * h * ffn * (m.swiglu ? 3.0 : 2.0);
  const double attention = 2.0 * 2.0 * s.tokens * seq * q / 2.0;  // causal: half of QK^T and PV
  return (gemms + attention) / s.t;
}

double attention_forward_flops(const Configs& c, const Sizes& s) {
  const double q = static_cast<double>(c.model.num_attention_heads * c.model.kv_channels);
  return 2.0 * s.tokens * static_cast<double>(c.model.seq_length) * q / s.t;
}

// Bandwidth of a group spanning `span` consecutive ranks.
double bandwidth(const ClusterRates& r, double span) {
  return span <= r.ranks_per_node ? r.intra_node_bytes_per_second : r.inter_node_bytes_per_second;
}

}  // namespace

double layer_param_share(const Configs& c) {
  const ModelConfig& m = c.model;
  const double t = c.parallel.tensor_model_parallel_size, h = static_cast<double>(m.hidden_size);
  const double vocab = static_cast<double>(m.padded_vocab_size);
  const double q = static_cast<double>(m.num_attention_heads * m.kv_channels),
               kv = static_cast<double>(m.query_groups() * m.kv_channels);
  const double ffn = static_cast<double>(
      m.moe.num_experts > 0 ? m.expert_ffn_hidden_size() * m.moe.num_experts : m.ffn_hidden_size);
  const double layer = (h * (q + 2.0 * kv) + q * h + h * ffn * (m.swiglu ? 3.0 : 2.0)) / t;
  double outside = vocab * h / t;  // word embeddings (tied output layer)
  if (m.untie_embeddings_and_output_weights) outside *= 2.0;
  if (m.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
    outside += static_cast<double>(m.max_position_embeddings) * h;
  }
  return layer / (layer + outside);
}

double recompute_fraction(const Configs& c, const LayerTimes& t) {
  const RecomputeConfig& rc = c.model.recompute;
  if (rc.full()) {
    // One more forward (forward ~ 1/3 of forward + backward) of every layer, or by block of the
    // first k of each stage or chunk.
    const ParallelConfig& p = c.parallel;
    const int64_t chunk_layers =
        layers_per_model_chunk(c.model.num_layers, p.pipeline_model_parallel_size,
                               p.num_virtual_stages_per_pipeline_rank, p.dualpipev);
    if (rc.method == RecomputeMethod::kBlock && chunk_layers > 0)
      return std::min(rc.num_layers, chunk_layers) / static_cast<double>(chunk_layers) / 3.0;
    return 1.0 / 3.0;
  }
  if (rc.selective() && t.per_layer_microbatch > 0.0)
    return std::clamp(t.attention_forward / t.per_layer_microbatch, 0.0, 1.0 / 3.0);
  return 0.0;
}

double attention_forward_flops(const Configs& c, int world_size) {
  return attention_forward_flops(c, sizes_of(c, world_size));
}

CommVolumes comm_volumes(const Configs& c, int world_size, const MemoryEstimate& memory) {
  const Sizes s = sizes_of(c, world_size);
  const ParallelConfig& p = c.parallel;
  const ModelConfig& m = c.model;
  const double mb = static_cast<double>(s.microbatches);
  const bool sp = p.sequence_parallel;
  const bool full = m.recompute.full();
  const double row = 4.0 * s.tokens * s.h;  // one whole [N, h] fp32 activation of a micro-batch
  MS_CHECK(!memory.stages.empty(), "comm_volumes needs the stages' memory");
  auto layout = PipelineLayout::build(p, m.num_layers, s.microbatches);
  MS_CHECK(layout.ok(), layout.status().to_string());
  CommVolumes v;
  for (int r = 0; r < layout->pipeline_size; ++r) {
    double layers = 0.0, pp_sends = 0.0;
    bool pre = false, post = false;
    const int last_stage = layout->num_stages() - 1;
    for (const PipelineStage& st : layout->stages_of_rank(r)) {
      layers += static_cast<double>(st.num_layers);
      pre = pre || st.pre_process;
      post = post || st.post_process;
    }
    for (size_t i = 0; i < layout->stages.size(); ++i) {
      const PipelineStage& st = layout->stages[i];
      if (st.rank != r) continue;
      if (static_cast<int>(i) != last_stage) pp_sends += mb;  // its output, forward
      if (i != 0) pp_sends += mb;                             // its input's gradient, backward
    }
    CommVolumes rank;
    if (s.t > 1) {
      // Per layer and micro-batch, as ProcessGroup::stats() counts payloads (the whole [N, h]
      // buffer of each all-reduce, all-gather output and reduce-scatter input): without SP four
      // all-reduces (forward: attention and MLP outputs; backward: their inputs' gradients); with
      // SP six all-gathers (forward two, backward two again for the weight gradients and two as
      // the reduce-scatters' backward) and four reduce-scatters. Full recompute repeats the
      // forward's. Outside the layers: the embedding's and the output layer's pair, and the
      // vocabulary-parallel cross entropy's three [N] all-reduces.
      const double per_layer =
          sp ? (10.0 + (full ? 4.0 : 0.0)) * row : (4.0 + (full ? 2.0 : 0.0)) * row;
      double outside = 0.0;
      if (pre) outside += sp ? 2.0 * row : row;
      if (post) outside += (sp ? 2.0 * row : row) + 3.0 * 4.0 * s.tokens;
      rank["tp"] = mb * (layers * per_layer + outside);
      if (sp) {
        // Once per step: the gradients of the parameters every rank of the group holds whole
        // and applies to its own sequence block (norms, the row-parallel linears' biases, the
        // learned position embeddings) are all-reduced.
        const double norm = m.normalization == Normalization::kRMSNorm ? s.h : 2.0 * s.h;
        double replicated = layers * (2.0 * norm + (m.add_bias_linear ? 2.0 * s.h : 0.0));
        if (post) replicated += norm;
        if (pre && m.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
          replicated += static_cast<double>(m.max_position_embeddings) * s.h;
        }
        rank["tp"] += 4.0 * replicated;
      }
    }
    if (s.pp > 1) rank["pp"] = pp_sends * row / (sp ? s.t : 1.0);
    const StageMemory& stage = memory.stages[static_cast<size_t>(r)];
    if (s.dp * s.cp > 1 && !p.use_custom_fsdp) {
      // The gradient buffer's reduction per step (fp32 gradients): an all-reduce, or with the
      // distributed optimizer a reduce-scatter and the all-gather of the updated parameters.
      // (FSDP's per-module gathers and reductions are not modelled.)
      const double n = static_cast<double>(stage.num_params);
      const double param_bytes = c.training.bf16 || c.training.fp16 ? 2.0 : 4.0;
      rank["dp_cp"] = p.use_distributed_optimizer ? n * (4.0 + param_bytes) : 4.0 * n;
    }
    if (s.pp > 1 && !m.untie_embeddings_and_output_weights && (pre || post)) {
      rank["embedding"] =
          4.0 * static_cast<double>(m.padded_vocab_size) / s.t * s.h;  // the tied gradients
    }
    if (s.cp > 1) {
      const double kv =
          4.0 * s.tokens * static_cast<double>(m.query_groups() * m.kv_channels) / s.t;
      const double q =
          4.0 * s.tokens * static_cast<double>(m.num_attention_heads * m.kv_channels) / s.t;
      // Ulysses: q, k, v in and the output back, forward and backward; ring: the key/value block
      // travels cp - 1 hops in forward, backward sends it and its gradient.
      const double per_layer = p.cp.algo == CpAlgo::kUlysses ? 2.0 * (2.0 * q + 2.0 * kv)
                                                             : (s.cp - 1.0) * (2.0 * kv + 4.0 * kv);
      rank["cp"] = mb * layers * per_layer * (full ? 1.5 : 1.0);
    }
    for (const auto& [group, bytes] : rank) v[group] = std::max(v[group], bytes);
  }
  return v;
}

LayerTimes analytic_layer_times(const Configs& c, int world_size, const ClusterRates& rates) {
  const Sizes s = sizes_of(c, world_size);
  const ParallelConfig& p = c.parallel;
  LayerTimes t;
  const double rate = std::max(rates.flops_per_second, 1.0);
  t.per_layer_microbatch = 3.0 * layer_forward_flops(c, s) / rate;
  t.attention_forward = attention_forward_flops(c, s) / rate;
  const double vocab = static_cast<double>(c.model.padded_vocab_size);
  t.per_microbatch = 3.0 * 2.0 * s.tokens * s.h * vocab / s.t / rate;
  // Communication the engine does not overlap: the tensor- and context-parallel collectives of
  // a layer (CoC/MC2 are not searched), per layer and micro-batch, at their groups' bandwidth;
  // ring collectives move (n-1)/n of the payload per rank (an all-reduce twice that).
  const double row = 4.0 * s.tokens * s.h;
  if (s.t > 1) {
    const double moved =
        p.sequence_parallel ? 10.0 * row * (s.t - 1.0) / s.t : 4.0 * row * 2.0 * (s.t - 1.0) / s.t;
    t.comm_per_layer_microbatch += moved / bandwidth(rates, s.t);
  }
  if (s.cp > 1) {
    const double kv =
        4.0 * s.tokens * static_cast<double>(c.model.query_groups() * c.model.kv_channels) / s.t;
    const double q = 4.0 * s.tokens *
                     static_cast<double>(c.model.num_attention_heads * c.model.kv_channels) / s.t;
    // Ulysses: four all-to-alls each way, (cp-1)/cp of each leaves the rank; ring: cp-1 hops of
    // the key/value block forward, of it and its gradient backward.
    const double moved = p.cp.algo == CpAlgo::kUlysses
                             ? 2.0 * (2.0 * q + 2.0 * kv) * (s.cp - 1.0) / s.cp
                             : (s.cp - 1.0) * 6.0 * kv;
    t.comm_per_layer_microbatch += moved / bandwidth(rates, s.t * s.cp);
  }
  t.per_layer_microbatch += t.comm_per_layer_microbatch;
  if (s.dp * s.cp > 1 && !p.overlap_grad_reduce) {
    const double layer_params = (12.0 * s.h * s.h + 13.0 * s.h) / s.t;
    const double n = s.dp * s.cp;
    const double bytes = 4.0 * layer_params *
                         (p.use_distributed_optimizer ? (n - 1.0) / n * 1.5 : 2.0 * (n - 1.0) / n);
    t.comm_per_layer_step = bytes / bandwidth(rates, s.t * s.cp * s.dp);
    t.per_layer_step = t.comm_per_layer_step;
  }
  return t;
}

StatusOr<StepTime> predict_step_time(const Configs& c, int world_size, const LayerTimes& t,
                                     const CoreSharing& sharing) {
  const Sizes s = sizes_of(c, world_size);
  MS_ASSIGN_OR_RETURN(const PipelineLayout layout,
                      PipelineLayout::build(c.parallel, c.model.num_layers, s.microbatches));
  const double mbs = t.microbatch_scale(c.training.micro_batch_size);
  const double rc = recompute_fraction(c, t);
  // Each stage's micro-batch at a dedicated core (the profile measured every rank busy, sharing
  // the cores): its layers' forward (a third) and backward with the recompute's extra forward,
  // and on the stage holding them the output layer and the loss.
  const double dedicated = 1.0 / std::max(1.0, sharing.oversubscription);
  std::vector<StageCosts> costs;
  std::vector<double> rank_work(static_cast<size_t>(layout.pipeline_size), 0.0),
      rank_recompute(rank_work), rank_layers(rank_work);
  for (const PipelineStage& stage : layout.stages) {
    const double layers = static_cast<double>(stage.num_layers);
    const double work = layers * t.per_layer_microbatch * mbs * dedicated;
    const double outside = stage.post_process ? t.per_microbatch * mbs * dedicated : 0.0;
    StageCosts cost;
    cost.forward = (work + outside) / 3.0;
    cost.backward = 2.0 * (work + outside) / 3.0 + work * rc;
    cost.weight = work / 3.0;
    costs.push_back(cost);
    const auto r = static_cast<size_t>(stage.rank);
    rank_work[r] += cost.forward + cost.backward;
    rank_recompute[r] += work * rc;
    rank_layers[r] += layers;
  }
  const SharedStepSimulation sim = simulate_shared_step(
      layout, s.microbatches, costs, s.world / s.pp,
      sharing.oversubscription > 1.0 ? s.world / sharing.oversubscription : 0.0,
      sharing.waiting_share);
  if (!sim.completes)
    return internal_error("auto settings: the schedule's plan does not complete: ", sim.stuck);
  const auto busiest =
      static_cast<size_t>(std::max_element(sim.busy_seconds.begin(), sim.busy_seconds.end()) -
                          sim.busy_seconds.begin());
  StepTime st;
  st.compute = sim.busy_seconds[busiest];
  st.recompute =
      rank_work[busiest] > 0.0 ? st.compute * rank_recompute[busiest] / rank_work[busiest] : 0.0;
  st.bubble = std::max(0.0, sim.makespan - st.compute);
  const double most_layers = *std::max_element(rank_layers.begin(), rank_layers.end());
  st.per_step = t.per_step + t.per_layer_step * most_layers;
  st.exposed_comm = static_cast<double>(s.microbatches) * rank_layers[busiest] *
                        t.comm_per_layer_microbatch * mbs * (1.0 + rc) +
                    t.comm_per_layer_step * most_layers;
  st.total = st.compute + st.bubble + st.per_step;
  return st;
}

}  // namespace mindspeed
