// The parallel training harness (parallel_harness.h).
#include "parallel_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "context_parallel/cp_split.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/swap_tier.h"
#include "datasets/gpt_dataset.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/param_and_grad_buffer.h"
#include "models/gpt/gpt_model_chunks.h"
#include "module/compute_weights.h"
#include "optimizer/lr_scheduler.h"
#include "optimizer/optimizer.h"
#include "training/train_step.h"

namespace mindspeed::testing {
namespace {

constexpr int64_t kVocab = 500;

// Sample k of the synthetic corpus: tokens follow a pattern a model can learn, a few
// positions are masked out of the loss.
void fill_sample(int64_t k, int64_t T, int32_t* tokens, int32_t* labels, float* mask) {
  const RngStream rng{99, static_cast<uint64_t>(k)};
  const int32_t start = static_cast<int32_t>(rng.block(0)[0] % kVocab);
  const int32_t stride = 1 + static_cast<int32_t>(rng.block(0)[1] % 7);
  for (int64_t t = 0; t < T; ++t) {
    tokens[t] = (start + stride * t) % kVocab;
    labels[t] = (start + stride * (t + 1)) % kVocab;
    mask[t] = rng.uniform(static_cast<uint64_t>(8 + t)) < 0.9f ? 1.0f : 0.0f;
  }
}

constexpr int32_t kEod = 3;

// Packed documents: end-of-document tokens at a few positions of the sample, positions and
// attention restarting after each (the dataset's get_ltor_masks_and_position_ids).
void pack_documents(int64_t k, int64_t T, int32_t* tokens, int32_t* position_ids, int32_t* doc_start) {
  const RngStream rng{77, static_cast<uint64_t>(k)};
  for (int64_t t = 0; t < T; ++t) {
    if (rng.uniform(static_cast<uint64_t>(t)) < 0.15f) tokens[t] = kEod;
  }
  std::vector<float> unused(static_cast<size_t>(T));
  get_ltor_masks_and_position_ids(tokens, T, kEod, /*reset_position_ids=*/true, /*reset_attention_mask=*/true,
                                  /*eod_mask_loss=*/false, unused.data(), position_ids, doc_start, nullptr);
}

// This rank's micro-batches of global batch `step` (MegatronPretrainingSampler slicing), each
// cut to this rank's context-parallel share.
std::vector<MicroBatch> global_batch(int64_t step, int64_t mbs, int64_t gbs, const ParallelState& ps,
                                     const RunOptions& run, const ContextParallelConfig& cp) {
  const int dp = ps.dp().size(), dp_rank = ps.dp_rank;
  const int64_t seq_length = run.model.seq_length;
  const bool variable_lengths = run.variable_lengths;
  std::vector<MicroBatch> out;
  const int64_t num_micro = gbs / (mbs * dp);
  for (int64_t m = 0; m < num_micro; ++m) {
    const int64_t T = variable_lengths ? seq_length - 4 * (m % 3) : seq_length;
    MicroBatch mb;
    mb.B = mbs;
    mb.T = T;
    mb.first_sample = step * gbs + m * mbs * dp + dp_rank * mbs;
    mb.tokens.resize(mbs * T);
    mb.labels.resize(mbs * T);
    mb.loss_mask.resize(mbs * T);
    mb.position_ids.resize(mbs * T);
    if (run.reset_attention_mask) mb.doc_start.resize(mbs * T);
    for (int64_t b = 0; b < mbs; ++b) {
      fill_sample(mb.first_sample + b, T, mb.tokens.data() + b * T, mb.labels.data() + b * T,
                  mb.loss_mask.data() + b * T);
      for (int64_t t = 0; t < T; ++t) mb.position_ids[b * T + t] = static_cast<int32_t>(t);
      if (run.reset_attention_mask) {
        pack_documents(mb.first_sample + b, T, mb.tokens.data() + b * T, mb.position_ids.data() + b * T,
                       mb.doc_start.data() + b * T);
      }
    }
    if (ps.sizes.context > 1) mb = get_batch_on_this_cp_rank(mb, CpSplit(cp, ps.sizes.context, T), ps.cp_rank);
    out.push_back(std::move(mb));
  }
  return out;
}

// One training step of a pipeline stage without a schedule: every micro-batch forward (the
// hidden states received from the previous stage, sent to the next), then every backward
// in the same order (gradients sent back), then the gradient reduction and the step. The
// accumulation order of every gradient equals the single-process run's.
TrainStepResult pipeline_step_by_hand(const GPTModel& model, ParamAndGradBuffer& buffer, Optimizer& optimizer,
                                      DistributedDataParallel& ddp, const ForwardContext& ctx,
                                      const std::vector<MicroBatch>& mbs, double lr) {
  const ParallelState& ps = *ctx.ps;
  ProcessGroup& pipe = ps.pp();
  const int64_t H = model.config().hidden_size;
  buffer.zero_grad(*ctx.backend);
  TrainStepResult result;
  std::vector<std::unique_ptr<ModelChunk::Saved>> saved;
  for (size_t i = 0; i < mbs.size(); ++i) {
    const MicroBatch& mb = mbs[i];
    const int64_t n = ctx.local_rows(mb.B * mb.T);
    StageTensors input;
    if (!model.pre_process()) {
      input.emplace_back(*ctx.alloc, Shape{n, H}, DType::kFloat32, MemoryCategory::kActivations);
      pipe.recv_async(input[0].f32(), n * H, pipe.rank() - 1, static_cast<int>(i))->wait();
    }
    const float scale = loss_scale(ctx, mb, static_cast<int64_t>(mbs.size()));
    ModelChunk::ForwardResult r = model.forward(ctx, mb, std::move(input), scale);
    if (!model.post_process()) pipe.send_async(r.outputs[0].f32(), n * H, pipe.rank() + 1, static_cast<int>(i))->wait();
    result.loss_sum += r.loss.loss_sum;
    result.num_tokens += r.loss.num_tokens;
    saved.push_back(std::move(r.saved));
  }
  for (size_t i = 0; i < mbs.size(); ++i) {
    const MicroBatch& mb = mbs[i];
    const int64_t n = ctx.local_rows(mb.B * mb.T);
    StageTensors grad;
    if (!model.post_process()) {
      grad.emplace_back(*ctx.alloc, Shape{n, H}, DType::kFloat32, MemoryCategory::kActivations);
      pipe.recv_async(grad[0].f32(), n * H, pipe.rank() + 1, 1000 + static_cast<int>(i))->wait();
    }
    StageTensors dinput = model.backward(ctx, mb, std::move(grad), *saved[i]);
    if (!model.pre_process()) {
      pipe.send_async(dinput[0].f32(), n * H, pipe.rank() - 1, 1000 + static_cast<int>(i))->wait();
    }
    saved[i].reset();
  }
  ddp.finish_grad_sync();
  result.optimizer = optimizer.step(lr);
  ddp.start_param_sync();
  return result;
}

// Forward only over the micro-batches on a pipeline stage, by hand (dropout off, as a
// forward-only schedule): hidden states received from the previous stage, sent to the next;
// the loss sums on the last stage (0 elsewhere).
LossSums pipeline_forward_by_hand(const GPTModel& model, const ForwardContext& train_ctx,
                                  const std::vector<MicroBatch>& mbs) {
  ForwardContext ctx = train_ctx;
  ctx.training = false;
  ProcessGroup& pipe = ctx.ps->pp();
  const int64_t H = model.config().hidden_size;
  LossSums sums;
  for (size_t i = 0; i < mbs.size(); ++i) {
    const MicroBatch& mb = mbs[i];
    const int64_t n = ctx.local_rows(mb.B * mb.T);
    StageTensors input;
    if (!model.pre_process()) {
      input.emplace_back(*ctx.alloc, Shape{n, H}, DType::kFloat32, MemoryCategory::kActivations);
      pipe.recv_async(input[0].f32(), n * H, pipe.rank() - 1, 2000 + static_cast<int>(i))->wait();
    }
    ModelChunk::ForwardResult r = model.forward(ctx, mb, std::move(input), 0.0f);
    if (!model.post_process()) {
      pipe.send_async(r.outputs[0].f32(), n * H, pipe.rank() + 1, 2000 + static_cast<int>(i))->wait();
    }
    sums.loss_sum += r.loss.loss_sum;
    sums.num_tokens += r.loss.num_tokens;
  }
  return sums;
}

// Held-out samples: global batches far past any training step.
constexpr int64_t kFirstEvalBatch = 100000;

// Megatron's evaluate() (pretrain.cpp) on this layout: the parameters gathered, then
// eval_iters held-out global batches forward only, each rank its sampler slice; the loss per
// token over the data-parallel group on the last stage, shared over the pipeline.
double evaluate_layout(const GPTModelChunks& model, DistributedDataParallel& ddp, const ForwardContext& train_ctx, bool by_hand,
                       const RunOptions& run) {
  const ParallelState& ps = *train_ctx.ps;
  ddp.finish_param_sync();
  ForwardContext ctx = train_ctx;  // a training context: evaluate_step's schedule runs it forward only
  ctx.hooks = &ddp;
  LossSums sums;
  for (int i = 0; i < run.eval_iters; ++i) {
    const auto mbs = global_batch(kFirstEvalBatch + i, run.micro_batch, run.global_batch, ps, run, ctx.cp);
    const LossSums s = by_hand && ps.sizes.pipeline > 1 ? pipeline_forward_by_hand(model[0], ctx, mbs)
                                                        : evaluate_step(model, ctx, mbs);
    sums.loss_sum += s.loss_sum;
    sums.num_tokens += s.num_tokens;
  }
  return evaluation_loss(ps, sums);  // over data parallelism and the pipeline (other stages add 0)
}

}  // namespace

ModelConfig tiny_gpt_config() {
  ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.num_attention_heads = 4;
  c.kv_channels = 8;
  c.num_query_groups = 4;
  c.ffn_hidden_size = 64;
  c.seq_length = 16;
  c.max_position_embeddings = 16;
  c.openai_gelu = true;
  c.vocab_size = kVocab;
  c.padded_vocab_size = 512;
  c.attention_dropout = 0.1f;
  c.hidden_dropout = 0.1f;
  return c;
}

ModelConfig tiny_llama_config() {
  ModelConfig c = tiny_gpt_config();
  c.normalization = Normalization::kRMSNorm;
  c.swiglu = true;
  c.openai_gelu = false;
  c.position_embedding_type = PositionEmbeddingType::kRope;
  c.untie_embeddings_and_output_weights = true;
  c.add_bias_linear = false;
  c.num_attention_heads = 8;
  c.kv_channels = 4;
  c.group_query_attention = true;
  c.num_query_groups = 4;
  c.norm_epsilon = 1e-6f;
  return c;
}

RunResult train(const RunOptions& run, const LayoutOptions& layout, const MpiWorld& world, bool single) {
  ParallelConfig pc;
  pc.tensor_model_parallel_size = layout.tp;
  pc.pipeline_model_parallel_size = layout.pp;
  pc.num_virtual_stages_per_pipeline_rank = layout.virtual_stages;
  pc.microbatch_group_size_per_vp_stage = layout.microbatch_group_size;
  pc.dualpipev = layout.dualpipev;
  pc.dualpipev_dw_detach = layout.dw_detach;
  pc.decoder_first_pipeline_num_layers = layout.first_stage_layers;
  pc.decoder_last_pipeline_num_layers = layout.last_stage_layers;
  pc.variable_seq_lengths = layout.variable_seq_lengths;
  if (!single) {
    pc.context_parallel_size = layout.cp;
    pc.cp.algo = layout.cp_algo;
    pc.cp.ulysses_degree = layout.cp_algo == CpAlgo::kUlysses ? layout.cp
                           : layout.cp_algo == CpAlgo::kHybrid ? layout.ulysses_degree
                                                                : 1;
    pc.cp.general_mask = layout.general_mask;
    pc.cp.window_size = layout.cp_window;
    pc.cp.send_recv_overlap = layout.cp_overlap;
    pc.cp.ulysses_allgather_kv = layout.allgather_kv;
    pc.expert_model_parallel_size = layout.ep;
    pc.expert_tensor_parallel_size = layout.etp;
    pc.moe_tp_extend_ep = layout.tp_extend_ep;
    pc.tp_2d = layout.tp_x > 0;
    pc.tp_x = layout.tp_x > 0 ? layout.tp_x : 1;
    pc.tp_y = layout.tp_x > 0 ? layout.tp / layout.tp_x : 1;
  }
  std::unique_ptr<ParallelState> ps;
  if (single) {
    ps = ParallelState::single_process();
  } else {
    auto s = initialize_model_parallel(pc, world);
    MS_CHECK_OK(s.status());
    ps = std::move(*s);
  }
  const bool sp = !single && layout.sequence_parallel && layout.tp > 1;
  const Backend backend = select_backend(KernelOptions{.fast = true, .flash_attention = run.flash_attention});
  Allocator alloc;
  ParameterRegistry registry;
  const int pp = ps->sizes.pipeline;
  const int64_t num_micro = run.global_batch / (run.micro_batch * ps->dp().size());
  StatusOr<PipelineLayout> pipeline = single ? PipelineLayout::single(run.model.num_layers)
                                             : PipelineLayout::build(pc, run.model.num_layers, num_micro);
  MS_CHECK_OK(pipeline.status());
  MS_CHECK(!layout.pipeline_by_hand || pipeline->chunks_per_rank == 1, "pipeline_by_hand drives one chunk per rank");
  GPTModelChunks model(run.model, *ps, registry, *pipeline, sp);
  BufferOptions bo;
  bo.param_dtype = layout.bf16 ? DType::kBFloat16 : layout.fp16 ? DType::kFloat16 : DType::kFloat32;
  bo.pad_for_distributed_optimizer = !single && layout.distributed_optimizer;
  bo.data_parallel_size = ps->dp_cp().size();
  bo.expert_data_parallel_size = ps->expert_dp().size();
  bo.bucket_size = single ? 0 : layout.bucket_size;
  // Megatron's custom FSDP: a bucket per module; no_shard is DDP, optim the distributed
  // optimizer, optim_grads also shards the gradients (and overlaps their reduction).
  const bool fsdp = !single && layout.custom_fsdp;
  if (fsdp) {
    bo.bucket_per_module = true;
    bo.pad_for_distributed_optimizer = layout.fsdp_sharding != FsdpShardingStrategy::kNoShard;
    bo.shard_grads = layout.fsdp_sharding == FsdpShardingStrategy::kOptimGrads ||
                     layout.fsdp_sharding == FsdpShardingStrategy::kOptimGradsParams;
  }
  const bool fp16_grads = layout.fp16 && !layout.fp16_fp32_grads;
  if (layout.o2_gradient || fp16_grads) {  // a bucket per module: its transient fp32 gradient
    bo.bucket_per_module = true;
    bo.grad_dtype = layout.o2_gradient ? DType::kBFloat16 : DType::kFloat16;
  }
  ParamAndGradBuffer buffer(model.registry(), alloc, bo);
  initialize_parameters(model.registry(), run.seed, *ps);
  DdpConfig dc;
  dc.use_distributed_optimizer = bo.pad_for_distributed_optimizer;
  dc.shard_grads = bo.shard_grads;
  dc.shard_params = fsdp && layout.fsdp_sharding == FsdpShardingStrategy::kOptimGradsParams;
  dc.overlap_grad_reduce = !single && (layout.overlap_grad_reduce || bo.shard_grads);
  dc.overlap_param_gather = !single && layout.overlap_param_gather;
  dc.half_grads = layout.o2_gradient || fp16_grads;
  dc.calculate_per_token_loss = layout.per_token_loss;
  DistributedDataParallel ddp(buffer, *ps, dc, backend);
  OptimizerConfig oc;
  oc.lr = run.lr;
  oc.min_lr = run.lr / 10;
  oc.lr_warmup_iters = 2;
  oc.lr_decay_style = LrDecayStyle::kCosine;
  oc.weight_decay = 0.1f;
  oc.clip_grad = 1.0f;
  oc.adam_eps = run.adam_eps;
  Optimizer optimizer(oc, buffer, *ps, alloc, backend, dc.use_distributed_optimizer);
  if (layout.fp16) {
    StatusOr<GradScaler> scaler = GradScaler::dynamic(layout.fp16_initial_loss_scale, 1.0f, 2.0f, 0.5f, 1000, 2);
    MS_CHECK(scaler.ok(), scaler.status().to_string());
    optimizer.set_grad_scaler(std::move(*scaler));
  }
  LrScheduler scheduler(oc, run.steps);
  ForwardContext ctx;
  ctx.backend = &backend;
  ctx.alloc = &alloc;
  ctx.ps = ps.get();
  ctx.seed = run.seed;
  ctx.sequence_parallel = sp;
  ctx.coc_chunks = single ? 1 : layout.coc;
  ctx.mc2 = !single && layout.mc2;
  if (!single && layout.tp_2d_overlap) ctx.tp_2d_overlap = {true, true, true};
  if (run.model.unaligned_linear && sp && run.model.seq_length % layout.tp != 0) {
    ctx.unaligned_sequence =
        run.model.seq_length;  // the uneven sequence split of --unaligned-linear
  }
  ctx.gradient_accumulation_fusion = !layout.o2_gradient && (single || layout.gradient_accumulation_fusion);
  ctx.bf16 = layout.bf16;
  ctx.fp16 = layout.fp16;
  ctx.calculate_per_token_loss = layout.per_token_loss;
  ctx.cp = pc.cp;
  std::unique_ptr<FileSwapTier> swap_tier;  // --swap-attention: a file in the temporary directory
  if (run.model.recompute.swap_attention) {
    auto tier = FileSwapTier::open(std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp", alloc);
    MS_CHECK(tier.ok(), tier.status().to_string());
    swap_tier = std::move(*tier);
    ctx.swap_tier = swap_tier.get();
  }
  MoeAuxLosses moe_losses;
  moe_losses.load_balancing.assign(static_cast<size_t>(run.model.num_layers), 0.0);
  moe_losses.z.assign(static_cast<size_t>(run.model.num_layers), 0.0);
  if (run.model.moe.enabled()) ctx.moe_aux_losses = &moe_losses;

  RunResult result;
  for (int step = 0; step < run.steps; ++step) {
    const auto mbs = global_batch(step, run.micro_batch, run.global_batch, *ps, run, ctx.cp);
    ctx.iteration = step + 1;
    ScheduleTrace trace;
    TrainStepOptions options;
    options.trace = &trace;
    const TrainStepResult r =
        layout.pipeline_by_hand && pp > 1
            ? pipeline_step_by_hand(model[0], buffer, optimizer, ddp, ctx, mbs, scheduler.lr(step))
            : train_step(model, buffer, optimizer, &ddp, ctx, mbs, scheduler.lr(step), options);
    result.peak_in_flight = std::max(result.peak_in_flight, trace.peak_in_flight);
    for (const ScheduleEvent& e : trace.events) result.recompute_steps += e.kind == PipelineOpKind::kRecompute ? 1 : 0;
    // The loss lives on the last stage: sum over the pipeline (other stages add 0) and dp.
    const double loss_sum = ps->pp().all_reduce_scalar(r.loss_sum, ReduceOp::kSum);
    const double tokens = ps->pp().all_reduce_scalar(r.num_tokens, ReduceOp::kSum);
    const double loss = ps->dp_cp().all_reduce_scalar(loss_sum, ReduceOp::kSum) /
                        ps->dp_cp().all_reduce_scalar(tokens, ReduceOp::kSum);
    result.losses.push_back(loss);
    result.grad_norms.push_back(r.optimizer.grad_norm);
    result.loss_scales.push_back(optimizer.loss_scale());
    if (run.model.moe.enabled()) {
      // As pretrain logs them (summed over pipeline stages and, for the load-balancing loss,
      // over the sequence partition; per micro-batch, per MoE layer), then averaged over the
      // data-parallel ranks (and the z-loss over the partition) to compare with one process.
      int64_t moe_layers = 0;
      for (int64_t l = 0; l < run.model.num_layers; ++l) moe_layers += run.model.moe.is_moe_layer(l) ? 1 : 0;
      auto logged = [&](const std::vector<double>& v, bool partition) {
        double s = 0.0;
        for (double x : v) s += x;
        s = ps->pp().all_reduce_scalar(s, ReduceOp::kSum);
        s = ps->tp_cp().all_reduce_scalar(s, ReduceOp::kSum);
        if (!partition) s /= ps->tp_cp().size();
        s = ps->dp().all_reduce_scalar(s, ReduceOp::kSum) / ps->dp().size();
        return s / static_cast<double>(mbs.size()) / static_cast<double>(moe_layers);
      };
      result.load_balancing_losses.push_back(logged(moe_losses.load_balancing, true));
      result.z_losses.push_back(logged(moe_losses.z, false));
      moe_losses.clear();
    }
    if (run.eval_interval > 0 && (step + 1) % run.eval_interval == 0) {
      result.eval_losses.push_back(evaluate_layout(model, ddp, ctx, layout.pipeline_by_hand, run));
    }
  }
  ddp.finish_param_sync();
  ddp.gather_all_params();  // FSDP optim_grads_params: the full parameters, to read them
  for (const auto& p : model.registry().params()) {
    if (p->spec.expert_parallel) continue;  // below
    std::vector<float> full(static_cast<size_t>(p->spec.global_shape.numel()), 0.0f);
    const ComputeWeights w(backend, alloc, {p.get()});
    const float* values = p->data.dtype == DType::kFloat32 ? p->data.f32() : w.find(*p);
    const ShardCoords at = shard_coords(p->spec, *ps);
    // Each shard from the rank holding its main copy (2D axis splits are replicated along the other
    // axis).
    if (holds_main_tp_copy(p->spec, *ps) || !p->is_tensor_parallel()) {
      unslice_from_rank(full.data(), values, p->spec, at.rank, at.count);
    }
    if (p->is_tensor_parallel()) ps->tp().all_reduce(full.data(), static_cast<int64_t>(full.size()));
    result.weights[p->spec.name] = std::move(full);
  }
  // Routed experts: every expert of this stage's MoE layers, summed over the expert tensor x
  // expert group from the ranks holding its slices (the others add zeros).
  const MoeConfig& moe = run.model.moe;
  for (const auto& p : model.registry().params()) {
    const std::string& name = p->spec.name;
    if (!name.ends_with(".mlp.router.weight")) continue;
    const std::string layer = name.substr(0, name.size() - std::string("router.weight").size());
    for (int64_t e = 0; e < moe.num_experts; ++e) {
      for (const char* linear : {"linear_fc1", "linear_fc2"}) {
        const std::string expert = layer + "experts.local_experts." + std::to_string(e) + "." + linear + ".weight";
        const int64_t F = run.model.expert_ffn_hidden_size(), h = run.model.hidden_size;
        std::vector<float> full(static_cast<size_t>(F * h * (std::string(linear) == "linear_fc1" && run.model.swiglu ? 2 : 1)),
                                0.0f);
        if (const Parameter* q = model.registry().find(expert)) {
          const ComputeWeights w(backend, alloc, {const_cast<Parameter*>(q)});
          const float* values = q->data.dtype == DType::kFloat32 ? q->data.f32() : w.find(*q);
          const ShardCoords at = shard_coords(q->spec, *ps);
          unslice_from_rank(full.data(), values, q->spec, at.rank, at.count);
        }
        ps->tp_ep().all_reduce(full.data(), static_cast<int64_t>(full.size()));
        result.weights[expert] = std::move(full);
      }
    }
  }
  ddp.release_all_params();
  const MemoryStats stats = alloc.stats();
  result.param_bytes = stats.current_of(MemoryCategory::kParameters);
  result.grad_bytes = stats.current_of(MemoryCategory::kGradients);
  result.optimizer_bytes = stats.current_of(MemoryCategory::kOptimizerState);
  result.activation_peak_bytes = stats.peak_of(MemoryCategory::kActivations);
  result.swapped_peak_bytes = stats.total_swapped_peak;
  result.swap_file_bytes = swap_tier ? swap_tier->file_bytes() : 0;
  result.num_params_local = model.registry().num_local_elements();
  return result;
}

double expect_close_runs(const RunResult& got, const RunResult& want, const Closeness& limits) {
  EXPECT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < std::min(got.losses.size(), want.losses.size()); ++s) {
    EXPECT_NEAR(got.losses[s], want.losses[s], limits.loss * std::fabs(want.losses[s])) << "loss step " << s + 1;
    EXPECT_NEAR(got.grad_norms[s], want.grad_norms[s], limits.grad_norm * std::fabs(want.grad_norms[s]))
        << "norm step " << s + 1;
  }
  EXPECT_EQ(got.eval_losses.size(), want.eval_losses.size());
  for (size_t e = 0; e < std::min(got.eval_losses.size(), want.eval_losses.size()); ++e) {
    EXPECT_NEAR(got.eval_losses[e], want.eval_losses[e], limits.loss * want.eval_losses[e]) << "evaluation " << e;
  }
  EXPECT_EQ(got.weights.size(), want.weights.size());
  double max_gap = 0.0;
  for (const auto& [name, w] : want.weights) {
    const auto it = got.weights.find(name);
    if (it == got.weights.end()) {
      ADD_FAILURE() << name << " missing";
      continue;
    }
    const std::vector<float>& g = it->second;
    if (g.size() != w.size()) {
      ADD_FAILURE() << name << ": " << g.size() << " elements, want " << w.size();
      continue;
    }
    for (size_t i = 0; i < w.size(); ++i) {
      const double gap = std::fabs(static_cast<double>(g[i]) - w[i]);
      if (gap > std::max(limits.weight_abs, limits.weight_rel * std::fabs(w[i]))) {
        ADD_FAILURE() << name << "[" << i << "]: " << g[i] << " against " << w[i];
        break;
      }
      max_gap = std::max(max_gap, gap);
    }
  }
  return max_gap;
}

}  // namespace mindspeed::testing
