// The model as pipeline stages, in one process:
//  * two stages driven by hand (stage 0: embedding + first layers, stage 1: the other layers
//    + final norm + output layer + loss) give exactly the whole model's loss and gradients;
//  * two model chunks of one rank sharing one parameter/gradient buffer train exactly like
//    one model of all the layers (losses, grad norms, weights over optimizer steps);
//  * a last stage without the embedding declares output_layer.weight as a tied copy that
//    starts equal to the word embedding and is left out of the gradient norm;
//  * deferred weight gradients (the B/W split): nothing reaches the weight gradients until
//    the queue is flushed, then they equal the undeferred ones bit for bit, also through
//    train_step and for bf16;
//  * no-op layers (--noop-layers) are the identity: the model equals one without them.
//  * get_forward_backward_func refuses pipeline layouts it does not have yet.
// GPT-2 (tied, LayerNorm, learned positions) and LLaMA (untied, RMSNorm, RoPE, GQA) families,
// dropout on.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "core/rng.h"
#include "distributed/param_and_grad_buffer.h"
#include "models/gpt/gpt_model.h"
#include "module/weight_grad_queue.h"
#include "optimizer/lr_scheduler.h"
#include "optimizer/optimizer.h"
#include "pipeline_parallel/schedules.h"
#include "training/train_step.h"

namespace mindspeed {
namespace {

ModelConfig config(bool llama, int64_t layers = 3) {
  ModelConfig c;
  c.num_layers = layers;
  c.hidden_size = 32;
  c.num_attention_heads = 4;
  c.kv_channels = 8;
  c.num_query_groups = 4;
  c.ffn_hidden_size = 64;
  c.seq_length = 16;
  c.max_position_embeddings = 16;
  c.vocab_size = 250;
  c.padded_vocab_size = 256;
  c.attention_dropout = c.hidden_dropout = 0.1f;
  if (llama) {
    c.normalization = Normalization::kRMSNorm;
    c.swiglu = true;
    c.position_embedding_type = PositionEmbeddingType::kRope;
    c.untie_embeddings_and_output_weights = true;
    c.add_bias_linear = false;
    c.group_query_attention = true;
    c.num_query_groups = 2;
  }
  return c;
}

MicroBatch batch(int64_t first, int64_t B, int64_t T) {
  MicroBatch mb;
  mb.B = B;
  mb.T = T;
  mb.first_sample = first;
  for (int64_t b = 0; b < B; ++b) {
    const RngStream rng{11, static_cast<uint64_t>(first + b)};
    for (int64_t t = 0; t < T; ++t) {
      mb.tokens.push_back(static_cast<int32_t>(rng.block(t)[0] % 250));
      mb.labels.push_back(static_cast<int32_t>(rng.block(t)[1] % 250));
      mb.loss_mask.push_back(rng.block(t)[2] % 10 == 0 ? 0.0f : 1.0f);
      mb.position_ids.push_back(static_cast<int32_t>(t));
    }
  }
  return mb;
}

// One rank's model: its chunks in one registry and one buffer.
struct Rig {
  Allocator alloc;
  std::unique_ptr<ParallelState> ps = ParallelState::single_process();
  Backend backend;
  ParameterRegistry registry;
  std::vector<std::unique_ptr<GPTModel>> chunks;
  std::unique_ptr<ParamAndGradBuffer> buffer;

  /// `splits` are the first layers of chunks 1, 2, ... (empty: one whole model).
  Rig(const ModelConfig& c, std::vector<int64_t> splits, bool bf16 = false)
      : backend(select_backend(KernelOptions{.fast = true, .flash_attention = true})) {
    splits.insert(splits.begin(), 0);
    splits.push_back(c.num_layers);
    for (size_t i = 0; i + 1 < splits.size(); ++i) {
      chunks.push_back(std::make_unique<GPTModel>(
          c, *ps, registry,
          GPTModelOptions{.first_layer = splits[i],
                          .num_layers = splits[i + 1] - splits[i],
                          .pre_process = i == 0,
                          .post_process = i + 2 == splits.size()}));
    }
    buffer = std::make_unique<ParamAndGradBuffer>(
        registry, alloc, BufferOptions{.param_dtype = bf16 ? DType::kBFloat16 : DType::kFloat32});
    initialize_parameters(registry, 42, 0, 1);
  }
  ForwardContext ctx(int64_t iteration = 1) {
    ForwardContext c;
    c.backend = &backend;
    c.alloc = &alloc;
    c.ps = ps.get();
    c.iteration = iteration;
    c.bf16 = buffer->param_dtype() == DType::kBFloat16;
    return c;
  }
  // Forward through every chunk, then backward through them in reverse (what a pipeline
  // does across ranks, here by hand); returns the loss sums.
  LossSums forward_backward(const ForwardContext& c, const MicroBatch& mb, float loss_scale) {
    std::vector<std::unique_ptr<ModelChunk::Saved>> saved;
    StageTensors hidden;
    LossSums loss;
    for (const auto& chunk : chunks) {
      ModelChunk::ForwardResult r = chunk->forward(c, mb, std::move(hidden), loss_scale);
      hidden = std::move(r.outputs);
      loss = r.loss;
      saved.push_back(std::move(r.saved));
    }
    EXPECT_TRUE(hidden.empty()) << "the last stage returns the loss, not hidden states";
    StageTensors grad;
    for (size_t i = chunks.size(); i-- > 0;) grad = chunks[i]->backward(c, mb, std::move(grad), *saved[i]);
    EXPECT_TRUE(grad.empty()) << "the first stage has no input gradient";
    return loss;
  }
  std::map<std::string, std::vector<float>> grads() const {
    std::map<std::string, std::vector<float>> out;
    for (const auto& p : registry.params()) out[p->spec.name].assign(p->g(), p->g() + p->local_shape.numel());
    return out;
  }
  std::map<std::string, std::vector<float>> weights() const {
    std::map<std::string, std::vector<float>> out;
    for (const auto& p : registry.params()) {
      std::vector<float> w(static_cast<size_t>(p->local_shape.numel()));
      for (int64_t i = 0; i < p->local_shape.numel(); ++i) {
        w[i] = p->data.dtype == DType::kFloat32 ? p->data.f32()[i] : bf16_to_float(p->data.bf()[i]);
      }
      out[p->spec.name] = std::move(w);
    }
    return out;
  }
};

class ModelChunks : public ::testing::TestWithParam<bool> {};

TEST_P(ModelChunks, TwoStagesByHandEqualTheWholeModel) {
  const ModelConfig c = config(GetParam());
  Rig whole(c, {});
  Rig staged(c, {1});
  ASSERT_EQ(staged.chunks.size(), 2u);
  EXPECT_TRUE(staged.chunks[0]->pre_process() && !staged.chunks[0]->post_process());
  EXPECT_TRUE(!staged.chunks[1]->pre_process() && staged.chunks[1]->post_process());
  // Same parameters, same names, one tied embedding (no copy on this rank).
  ASSERT_EQ(staged.registry.params().size(), whole.registry.params().size());
  EXPECT_EQ(staged.registry.find("output_layer.weight") != nullptr, c.untie_embeddings_and_output_weights);
  for (const MicroBatch& mb : {batch(0, 2, 16), batch(2, 3, 16)}) {
    whole.buffer->zero_grad(whole.backend);
    staged.buffer->zero_grad(staged.backend);
    GPTModel::Saved saved;
    const LossSums want = whole.chunks[0]->forward(whole.ctx(), mb, 0.01f, saved);
    whole.chunks[0]->backward(whole.ctx(), mb, saved);
    const LossSums got = staged.forward_backward(staged.ctx(), mb, 0.01f);
    EXPECT_EQ(got.loss_sum, want.loss_sum);
    EXPECT_EQ(got.num_tokens, want.num_tokens);
    const auto want_grads = whole.grads();
    for (const auto& [name, g] : staged.grads()) EXPECT_EQ(g, want_grads.at(name)) << name;
  }
}

TEST_P(ModelChunks, TwoChunksOnOneRankTrainLikeOneModel) {
  const ModelConfig c = config(GetParam(), 4);
  Rig whole(c, {});
  Rig chunked(c, {2});
  OptimizerConfig oc;
  oc.lr = 1e-3f;
  oc.lr_warmup_iters = 1;
  oc.weight_decay = 0.1f;
  oc.clip_grad = 1.0f;
  Optimizer opt_whole(oc, *whole.buffer, *whole.ps, whole.alloc, whole.backend, false);
  Optimizer opt_chunked(oc, *chunked.buffer, *chunked.ps, chunked.alloc, chunked.backend, false);
  LrScheduler lr(oc, 3);
  for (int64_t step = 0; step < 3; ++step) {
    const std::vector<MicroBatch> mbs = {batch(4 * step, 2, 16), batch(4 * step + 2, 2, 16)};
    const TrainStepResult want =
        train_step(*whole.chunks[0], *whole.buffer, opt_whole, nullptr, whole.ctx(step + 1), mbs, lr.lr(step));
    chunked.buffer->zero_grad(chunked.backend);
    LossSums got;
    for (const MicroBatch& mb : mbs) {
      double tokens = 0.0;
      for (float m : mb.loss_mask) tokens += m;
      const LossSums l = chunked.forward_backward(chunked.ctx(step + 1), mb, static_cast<float>(1.0 / (tokens * 2.0)));
      got.loss_sum += l.loss_sum;
      got.num_tokens += l.num_tokens;
    }
    const Optimizer::StepResult r = opt_chunked.step(lr.lr(step));
    EXPECT_EQ(got.loss_sum, want.loss_sum) << "step " << step;
    EXPECT_EQ(r.grad_norm, want.optimizer.grad_norm) << "step " << step;
  }
  const auto want_weights = whole.weights();
  for (const auto& [name, w] : chunked.weights()) EXPECT_EQ(w, want_weights.at(name)) << name;
}

TEST_P(ModelChunks, DeferredWeightGradientsWaitForTheFlushThenMatchBitForBit) {
  const ModelConfig c = config(GetParam());
  Rig rig(c, {});
  const MicroBatch mb = batch(0, 2, 16);
  GPTModel::Saved saved;
  rig.buffer->zero_grad(rig.backend);
  rig.chunks[0]->forward(rig.ctx(), mb, 0.02f, saved);
  rig.chunks[0]->backward(rig.ctx(), mb, saved);
  const auto want = rig.grads();

  rig.buffer->zero_grad(rig.backend);
  WeightGradQueue queue;
  ForwardContext deferred = rig.ctx();
  deferred.wgrad_queue = &queue;
  GPTModel::Saved saved2;
  rig.chunks[0]->forward(deferred, mb, 0.02f, saved2);
  rig.chunks[0]->backward(deferred, mb, saved2);
  // Linear weights (and the output layer and embedding) have nothing yet; norms do.
  const auto before = rig.grads();
  for (const auto& [name, g] : before) {
    const bool is_linear = name.ends_with("linear_qkv.weight") || name.ends_with("linear_proj.weight") ||
                           name.ends_with("linear_fc1.weight") || name.ends_with("linear_fc2.weight") ||
                           name == "output_layer.weight" || name == "embedding.word_embeddings.weight";
    double sum = 0.0;
    for (float v : g) sum += std::fabs(v);
    if (is_linear) {
      EXPECT_EQ(sum, 0.0) << name << " was computed before the flush";
    }
    if (name.ends_with("layernorm.weight")) {
      EXPECT_GT(sum, 0.0) << name;
    }
  }
  EXPECT_GT(queue.size(), 4u * static_cast<size_t>(c.num_layers));
  queue.flush(rig.ctx());
  EXPECT_TRUE(queue.empty());
  for (const auto& [name, g] : rig.grads()) EXPECT_EQ(g, want.at(name)) << name;
}

TEST_P(ModelChunks, TrainStepWithDeferredWeightGradientsIsBitIdentical) {
  const ModelConfig c = config(GetParam());
  for (bool bf16 : {false, true}) {
    Rig plain(c, {}, bf16), deferred(c, {}, bf16);
    OptimizerConfig oc;
    oc.lr = 1e-3f;
    Optimizer opt_plain(oc, *plain.buffer, *plain.ps, plain.alloc, plain.backend, false);
    Optimizer opt_deferred(oc, *deferred.buffer, *deferred.ps, deferred.alloc, deferred.backend, false);
    for (int64_t step = 0; step < 2; ++step) {
      const std::vector<MicroBatch> mbs = {batch(4 * step, 2, 16), batch(4 * step + 2, 2, 16)};
      TrainStepOptions deferred_options;
      deferred_options.defer_weight_grad = true;
      const TrainStepResult a = train_step(*plain.chunks[0], *plain.buffer, opt_plain, nullptr, plain.ctx(step + 1),
                                           mbs, 1e-3);
      const TrainStepResult b = train_step(*deferred.chunks[0], *deferred.buffer, opt_deferred, nullptr,
                                           deferred.ctx(step + 1), mbs, 1e-3, deferred_options);
      EXPECT_EQ(a.loss_sum, b.loss_sum) << "bf16 " << bf16;
      EXPECT_EQ(a.optimizer.grad_norm, b.optimizer.grad_norm) << "bf16 " << bf16;
    }
    const auto want = plain.weights();
    for (const auto& [name, w] : deferred.weights()) EXPECT_EQ(w, want.at(name)) << name << " bf16 " << bf16;
  }
}

TEST_P(ModelChunks, LastStageWithoutTheEmbeddingHoldsATiedCopy) {
  const ModelConfig c = config(GetParam());
  Rig whole(c, {});
  // The last stage alone (another rank's view in a 2-stage pipeline).
  Rig last_only(c, {});
  ParameterRegistry registry;
  GPTModel last(c, *last_only.ps, registry,
                GPTModelOptions{.first_layer = 1, .num_layers = 2, .pre_process = false, .post_process = true});
  EXPECT_EQ(registry.find("embedding.word_embeddings.weight"), nullptr);
  Parameter* out = registry.find("output_layer.weight");
  ASSERT_NE(out, nullptr);
  Allocator alloc;
  ParamAndGradBuffer buffer(registry, alloc, BufferOptions{});
  initialize_parameters(registry, 42, 0, 1);
  Optimizer opt(OptimizerConfig{}, buffer, *last_only.ps, alloc, last_only.backend, false);
  bool found = false;
  for (const auto& seg : opt.segments()) {
    if (seg.begin == out->buffer_offset) {
      found = true;
      EXPECT_EQ(seg.in_grad_norm, c.untie_embeddings_and_output_weights)
          << "a tied copy counts in the gradient norm only on the stage owning the original";
    }
  }
  EXPECT_TRUE(found);
  if (!c.untie_embeddings_and_output_weights) {
    EXPECT_TRUE(out->is_tied_copy());
    EXPECT_TRUE(out->spec.shared_embedding);
    const Parameter* original = whole.registry.find("embedding.word_embeddings.weight");
    EXPECT_EQ(std::vector<float>(out->data.f32(), out->data.f32() + out->local_shape.numel()),
              std::vector<float>(original->data.f32(), original->data.f32() + original->local_shape.numel()))
        << "the copies start equal";
  } else {
    EXPECT_FALSE(out->is_tied_copy());
  }
}

TEST_P(ModelChunks, NoopLayersAreTheIdentity) {
  ModelConfig with_noop = config(GetParam(), 4);
  with_noop.noop_layers = {0, 2};
  with_noop.attention_dropout = with_noop.hidden_dropout = 0.0f;  // masks are keyed by layer index
  ModelConfig plain = config(GetParam(), 2);
  plain.attention_dropout = plain.hidden_dropout = 0.0f;
  Rig a(with_noop, {}), b(plain, {});
  // The no-op layers have no parameters; real layers 1 and 3 take plain layers 0 and 1.
  EXPECT_EQ(a.registry.num_local_elements(), b.registry.num_local_elements());
  for (const auto& p : a.registry.params()) {
    std::string name = p->spec.name;
    if (name.starts_with("decoder.layers.1.")) name.replace(15, 1, "0");
    if (name.starts_with("decoder.layers.3.")) name.replace(15, 1, "1");
    ASSERT_FALSE(p->spec.name.starts_with("decoder.layers.0.") || p->spec.name.starts_with("decoder.layers.2."))
        << p->spec.name;
    const Parameter* q = b.registry.find(name);
    ASSERT_NE(q, nullptr) << name;
    std::copy(q->data.f32(), q->data.f32() + q->local_shape.numel(), p->data.f32());
  }
  const MicroBatch mb = batch(0, 2, 16);
  a.buffer->zero_grad(a.backend);
  b.buffer->zero_grad(b.backend);
  EXPECT_EQ(a.forward_backward(a.ctx(), mb, 0.05f).loss_sum, b.forward_backward(b.ctx(), mb, 0.05f).loss_sum);
}

INSTANTIATE_TEST_SUITE_P(Families, ModelChunks, ::testing::Values(false, true),
                         [](const auto& info) { return std::string(info.param ? "llama" : "gpt"); });

}  // namespace
}  // namespace mindspeed
