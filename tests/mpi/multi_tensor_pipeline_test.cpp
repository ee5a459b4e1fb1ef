// Several tensors between pipeline stages (MindSpeed's multi-parameter pipeline, §8.3), with
// and without --variable-seq-lengths, under 1F1B, interleaved 1F1B and DualPipeV: a toy
// two-stream stage (hidden-like stream `a` [n, 3] and a side stream `b` [n, 2] that mix in
// every stage, each stage with its own two weight vectors) run by the real schedules equals
// the same stages chained in one process, in the loss and in every stage's weight gradients.
// The side stream's gradient flows back through every stage (its weights' gradients depend
// on it), and the chained backward matches finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "config/pipeline_layout.h"
#include "core/check.h"
#include "parallel/initialize.h"
#include "pipeline_parallel/schedules.h"
#include "test_mpi.h"

namespace mindspeed::testing {
namespace {

constexpr int64_t kWidthA = 3, kWidthB = 2;

// Stage s: a' = a * (1 + tanh(b.v)/2), b' = b + tanh(a.u)/2 per row; the first stage makes
// a and b from the token ids, the last adds the loss sum(a' c) + sum(b' d).
class TwoStreamStage final : public ModelChunk {
 public:
  struct Saved final : ModelChunk::Saved {
    std::vector<float> a, b, tp, tq;  // inputs and tanh of the row products
    StageTensors loss_grads;          // last stage: d loss / d outputs (folded into forward)
  };

  TwoStreamStage(int stage, bool first, bool last) : first_(first), last_(last) {
    for (int64_t j = 0; j < kWidthA; ++j) u_.push_back(0.3f + 0.1f * stage - 0.05f * j);
    for (int64_t k = 0; k < kWidthB; ++k) v_.push_back(-0.2f + 0.07f * stage + 0.1f * k);
    gu_.assign(kWidthA, 0.0);
    gv_.assign(kWidthB, 0.0);
  }
  bool pre_process() const override { return first_; }
  bool post_process() const override { return last_; }
  std::vector<int64_t> stage_tensor_widths() const override { return {kWidthA, kWidthB}; }

  ForwardResult forward(const ForwardContext& ctx, const MicroBatch& mb, StageTensors inputs,
                        float loss_scale) const override {
    const int64_t n = mb.B * mb.T;
    auto saved = std::make_unique<Saved>();
    saved->a.resize(n * kWidthA);
    saved->b.resize(n * kWidthB);
    if (first_) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < kWidthA; ++j) saved->a[i * kWidthA + j] = std::sin(0.01f * mb.tokens[i] + 0.3f * j);
        for (int64_t k = 0; k < kWidthB; ++k) saved->b[i * kWidthB + k] = std::cos(0.02f * mb.tokens[i] + 0.5f * k);
      }
    } else {
      MS_CHECK(inputs.size() == 2 && inputs[0].shape()[0] == n && inputs[1].shape()[1] == kWidthB, "bad inputs");
      std::copy(inputs[0].f32(), inputs[0].f32() + n * kWidthA, saved->a.begin());
      std::copy(inputs[1].f32(), inputs[1].f32() + n * kWidthB, saved->b.begin());
    }
    ForwardResult result;
    Tensor a_out(*ctx.alloc, Shape{n, kWidthA}, DType::kFloat32, MemoryCategory::kActivations);
    Tensor b_out(*ctx.alloc, Shape{n, kWidthB}, DType::kFloat32, MemoryCategory::kActivations);
    saved->tp.resize(n);
    saved->tq.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      float p = 0.0f, q = 0.0f;
      for (int64_t k = 0; k < kWidthB; ++k) p += saved->b[i * kWidthB + k] * v_[k];
      for (int64_t j = 0; j < kWidthA; ++j) q += saved->a[i * kWidthA + j] * u_[j];
      saved->tp[i] = std::tanh(p);
      saved->tq[i] = std::tanh(q);
      for (int64_t j = 0; j < kWidthA; ++j) a_out.f32()[i * kWidthA + j] = saved->a[i * kWidthA + j] * (1 + 0.5f * saved->tp[i]);
      for (int64_t k = 0; k < kWidthB; ++k) b_out.f32()[i * kWidthB + k] = saved->b[i * kWidthB + k] + 0.5f * saved->tq[i];
    }
    if (last_) {
      Tensor ga(*ctx.alloc, Shape{n, kWidthA}, DType::kFloat32, MemoryCategory::kActivations);
      Tensor gb(*ctx.alloc, Shape{n, kWidthB}, DType::kFloat32, MemoryCategory::kActivations);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < kWidthA; ++j) {
          result.loss.loss_sum += a_out.f32()[i * kWidthA + j] * c(j);
          ga.f32()[i * kWidthA + j] = loss_scale * c(j);
        }
        for (int64_t k = 0; k < kWidthB; ++k) {
          result.loss.loss_sum += b_out.f32()[i * kWidthB + k] * d(k);
          gb.f32()[i * kWidthB + k] = loss_scale * d(k);
        }
      }
      result.loss.num_tokens = static_cast<double>(n);
      saved->loss_grads.push_back(std::move(ga));
      saved->loss_grads.push_back(std::move(gb));
    } else {
      result.outputs.push_back(std::move(a_out));
      result.outputs.push_back(std::move(b_out));
    }
    if (ctx.training) result.saved = std::move(saved);
    return result;
  }

  StageTensors backward(const ForwardContext& ctx, const MicroBatch& mb, StageTensors output_grads,
                        ModelChunk::Saved& saved_base) const override {
    Saved& saved = static_cast<Saved&>(saved_base);
    if (last_) output_grads = std::move(saved.loss_grads);
    MS_CHECK(output_grads.size() == 2, "two output gradients expected");
    const int64_t n = mb.B * mb.T;
    const float* ga_out = output_grads[0].f32();
    const float* gb_out = output_grads[1].f32();
    Tensor ga(*ctx.alloc, Shape{n, kWidthA}, DType::kFloat32, MemoryCategory::kActivations);
    Tensor gb(*ctx.alloc, Shape{n, kWidthB}, DType::kFloat32, MemoryCategory::kActivations);
    for (int64_t i = 0; i < n; ++i) {
      float sum_gb = 0.0f, sum_ga_a = 0.0f;
      for (int64_t k = 0; k < kWidthB; ++k) sum_gb += gb_out[i * kWidthB + k];
      for (int64_t j = 0; j < kWidthA; ++j) sum_ga_a += ga_out[i * kWidthA + j] * saved.a[i * kWidthA + j];
      const float dq = 0.5f * (1 - saved.tq[i] * saved.tq[i]) * sum_gb;    // d loss / d (a.u)
      const float dp = 0.5f * (1 - saved.tp[i] * saved.tp[i]) * sum_ga_a;  // d loss / d (b.v)
      for (int64_t j = 0; j < kWidthA; ++j) {
        ga.f32()[i * kWidthA + j] = ga_out[i * kWidthA + j] * (1 + 0.5f * saved.tp[i]) + dq * u_[j];
        gu_[j] += static_cast<double>(dq) * saved.a[i * kWidthA + j];
      }
      for (int64_t k = 0; k < kWidthB; ++k) {
        gb.f32()[i * kWidthB + k] = gb_out[i * kWidthB + k] + dp * v_[k];
        gv_[k] += static_cast<double>(dp) * saved.b[i * kWidthB + k];
      }
    }
    StageTensors input_grads;
    if (!first_) {
      input_grads.push_back(std::move(ga));
      input_grads.push_back(std::move(gb));
    }
    return input_grads;
  }

  std::vector<float> u_, v_;
  mutable std::vector<double> gu_, gv_;

 private:
  static float c(int64_t j) { return 1.0f + 0.1f * static_cast<float>(j); }
  static float d(int64_t k) { return 0.5f - 0.2f * static_cast<float>(k); }
  bool first_, last_;
};

// Micro-batch m: 2 samples of 8 tokens, or of 8, 6 and 4 tokens in turn (variable lengths).
std::vector<MicroBatch> microbatches(int64_t M, bool variable) {
  std::vector<MicroBatch> out;
  for (int64_t m = 0; m < M; ++m) {
    MicroBatch mb;
    mb.B = 2;
    mb.T = variable ? 8 - 2 * (m % 3) : 8;
    for (int64_t i = 0; i < mb.B * mb.T; ++i) mb.tokens.push_back(static_cast<int32_t>((37 * m + 11 * i) % 500));
    mb.labels = mb.tokens;
    mb.loss_mask.assign(mb.tokens.size(), 1.0f);
    out.push_back(std::move(mb));
  }
  return out;
}

ForwardStep toy_forward_step(const ForwardContext& ctx, DataIterator& data, const ModelChunk& model,
                             StageTensors inputs, int64_t M) {
  ForwardStep step;
  step.microbatch = data.next();
  if (step.microbatch != nullptr) {
    step.result = model.forward(ctx, *step.microbatch, std::move(inputs), 1.0f / static_cast<float>(M));
  }
  return step;
}

// All stages chained in this process: the loss sum, and the stages with their gradients.
double chained(std::vector<std::unique_ptr<TwoStreamStage>>& stages, const std::vector<MicroBatch>& mbs,
               const ForwardContext& ctx) {
  double loss = 0.0;
  for (const MicroBatch& mb : mbs) {
    std::vector<std::unique_ptr<ModelChunk::Saved>> saved;
    StageTensors t;
    for (auto& s : stages) {
      ModelChunk::ForwardResult r = s->forward(ctx, mb, std::move(t), 1.0f / static_cast<float>(mbs.size()));
      t = std::move(r.outputs);
      loss += r.loss.loss_sum;
      saved.push_back(std::move(r.saved));
    }
    StageTensors g;
    for (size_t i = stages.size(); i-- > 0;) g = stages[i]->backward(ctx, mb, std::move(g), *saved[i]);
  }
  return loss;
}

struct Layout {
  const char* name;
  int virtual_stages;
  bool dualpipev;
  bool dw_detach;
};

TEST(MultiTensorPipeline, TwoStreamsEqualTheChainedStages) {
  const MpiWorld& world = mpi_world();
  if (world.size != 2 && world.size != 4) GTEST_SKIP();
  const int P = world.size;
  const int64_t M = 2 * P;
  const Layout layouts[] = {{"1F1B", 0, false, false},
                            {"interleaved", 2, false, false},
                            {"DualPipeV", 0, true, false},
                            {"DualPipeV dw-detach", 0, true, true}};
  Allocator alloc;
  for (const Layout& l : layouts) {
    for (bool variable : {false, true}) {
      SCOPED_TRACE(std::string(l.name) + (variable ? " variable lengths" : ""));
      ParallelConfig pc;
      pc.pipeline_model_parallel_size = P;
      pc.num_virtual_stages_per_pipeline_rank = l.virtual_stages;
      pc.dualpipev = l.dualpipev;
      pc.dualpipev_dw_detach = l.dw_detach;
      pc.variable_seq_lengths = variable;
      const int S = l.dualpipev ? 2 * P : P * std::max(1, l.virtual_stages);
      auto layout = PipelineLayout::build(pc, S, M);
      ASSERT_TRUE(layout.ok()) << layout.status().to_string();
      auto ps = initialize_model_parallel(pc, world);
      ASSERT_TRUE(ps.ok());
      ForwardContext ctx;
      ctx.alloc = &alloc;
      ctx.ps = ps->get();
      ctx.training = true;
      const std::vector<MicroBatch> mbs = microbatches(M, variable);

      // The reference: every stage in this process.
      const std::unique_ptr<ParallelState> single = ParallelState::single_process();
      ForwardContext single_ctx = ctx;
      single_ctx.ps = single.get();
      std::vector<std::unique_ptr<TwoStreamStage>> all;
      for (int s = 0; s < S; ++s) all.push_back(std::make_unique<TwoStreamStage>(s, s == 0, s == S - 1));
      const double want_loss = chained(all, mbs, single_ctx);

      // The pipeline: this rank's stages, run by the layout's schedule.
      std::vector<std::unique_ptr<TwoStreamStage>> mine;
      std::vector<const ModelChunk*> chunks;
      std::vector<int> stage_ids;
      for (int c = 0; c < layout->chunks_per_rank; ++c) {
        const int s = layout->stage_of((*ps)->pp_rank, c);
        mine.push_back(std::make_unique<TwoStreamStage>(s, s == 0, s == S - 1));
        chunks.push_back(mine.back().get());
        stage_ids.push_back(s);
      }
      SpanDataIterator data(mbs);
      ForwardBackwardArgs args;
      args.forward_step_func = toy_forward_step;
      args.data_iterator = &data;
      args.model = chunks;
      args.layout = &*layout;
      args.num_microbatches = M;
      args.variable_seq_lengths = variable;
      const ForwardBackwardResult fb = get_forward_backward_func(*layout)(ctx, args);
      const double got_loss = (*ps)->pp().all_reduce_scalar(fb.total.loss_sum, ReduceOp::kSum);
      EXPECT_NEAR(got_loss, want_loss, 1e-5 * std::fabs(want_loss));
      for (size_t c = 0; c < mine.size(); ++c) {
        const TwoStreamStage& ref = *all[static_cast<size_t>(stage_ids[c])];
        for (int64_t j = 0; j < kWidthA; ++j) {
          EXPECT_NEAR(mine[c]->gu_[j], ref.gu_[j], 1e-5 * std::fabs(ref.gu_[j]) + 1e-9) << "stage " << stage_ids[c];
        }
        for (int64_t k = 0; k < kWidthB; ++k) {
          EXPECT_NEAR(mine[c]->gv_[k], ref.gv_[k], 1e-5 * std::fabs(ref.gv_[k]) + 1e-9) << "stage " << stage_ids[c];
        }
      }
      // The side stream carries gradient into the first stage's weights: v of stage 0 acts
      // on b only, and the loss reaches it through every later stage's b.
      EXPECT_GT(std::fabs(all[0]->gv_[0]), 1e-3);
    }
  }
}

// The chained backward (the reference above) against central differences of the loss.
TEST(MultiTensorPipeline, ChainedBackwardMatchesFiniteDifferences) {
  const MpiWorld& world = mpi_world();
  if (world.rank != 0) return;
  Allocator alloc;
  const std::unique_ptr<ParallelState> single = ParallelState::single_process();
  ForwardContext ctx;
  ctx.alloc = &alloc;
  ctx.ps = single.get();
  ctx.training = true;
  const std::vector<MicroBatch> mbs = microbatches(3, true);
  auto make = [] {
    std::vector<std::unique_ptr<TwoStreamStage>> stages;
    for (int s = 0; s < 4; ++s) stages.push_back(std::make_unique<TwoStreamStage>(s, s == 0, s == 3));
    return stages;
  };
  auto stages = make();
  chained(stages, mbs, ctx);
  const float eps = 1e-2f;
  for (int which : {0, 1}) {  // u (stream a) or v (stream b) of stage 0 and stage 2
    for (int s : {0, 2}) {
      auto plus = make(), minus = make();
      (which == 0 ? plus[s]->u_ : plus[s]->v_)[1] += eps;
      (which == 0 ? minus[s]->u_ : minus[s]->v_)[1] -= eps;
      // chained() sums the loss over micro-batches; the gradients carry 1/M.
      const double fd = (chained(plus, mbs, ctx) - chained(minus, mbs, ctx)) / (2 * eps) / 3.0;
      const double analytic = (which == 0 ? stages[s]->gu_ : stages[s]->gv_)[1];
      EXPECT_NEAR(analytic, fd, 2e-3 * std::fabs(fd) + 1e-4) << (which == 0 ? "u" : "v") << " of stage " << s;
    }
  }
}

}  // namespace
}  // namespace mindspeed::testing
