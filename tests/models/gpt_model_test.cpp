// Model-level properties: samples of a micro-batch do not interact (the loss of a batch of 4
// equals that of 4 batches of 1), and the fast kernels give the reference kernels' loss and
// gradients, for the GPT-2 and LLaMA families, core and flash attention; also with 320 tokens
// (flash attention over two key blocks of 256) and hidden size 36 (the norm kernels' vector
// tails, parameters moved off their initial values), with and without dropout.
#include "models/gpt/gpt_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "datasets/gpt_dataset.h"
#include "distributed/param_and_grad_buffer.h"

namespace mindspeed {
namespace {

ModelConfig config(bool llama) {
  ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.kv_channels = 16;
  c.num_query_groups = 4;
  c.ffn_hidden_size = 256;
  c.seq_length = 64;
  c.max_position_embeddings = 64;
  c.vocab_size = 1001;
  c.padded_vocab_size = 1024;
  c.attention_dropout = c.hidden_dropout = 0.0f;
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

// Sequence 320 (flash attention: five query blocks of 64, two key blocks of 256) and hidden
// and FFN sizes that are not multiples of 8 (36 = 4 x 8 + 4, 44 = 5 x 8 + 4).
ModelConfig long_odd_config(bool llama, float dropout) {
  ModelConfig c = config(llama);
  c.hidden_size = 36;
  c.num_attention_heads = llama ? 6 : 4;
  c.kv_channels = llama ? 6 : 9;  // rotary needs an even head size
  c.num_query_groups = llama ? 2 : 4;
  c.ffn_hidden_size = 44;
  c.seq_length = 320;
  c.max_position_embeddings = 320;
  c.attention_dropout = c.hidden_dropout = dropout;
  return c;
}

MicroBatch batch(int64_t first, int64_t B, int64_t T) {
  MicroBatch mb;
  mb.B = B;
  mb.T = T;
  mb.first_sample = first;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const RngStream rng{5, static_cast<uint64_t>(first + b)};
      mb.tokens.push_back(static_cast<int32_t>(rng.block(t)[0] % 1001));
      mb.labels.push_back(static_cast<int32_t>(rng.block(t)[1] % 1001));
      mb.loss_mask.push_back(1.0f);
      mb.position_ids.push_back(static_cast<int32_t>(t));
    }
  }
  return mb;
}

struct ModelRig {
  Allocator alloc;
  std::unique_ptr<ParallelState> ps = ParallelState::single_process();
  Backend backend;
  ParameterRegistry registry;
  std::unique_ptr<GPTModel> model;
  std::unique_ptr<ParamAndGradBuffer> buffer;
  ModelRig(bool llama, KernelOptions k) : ModelRig(config(llama), k) {}
  ModelRig(const ModelConfig& c, KernelOptions k) : backend(select_backend(k)) {
    model = std::make_unique<GPTModel>(c, *ps, registry);
    buffer = std::make_unique<ParamAndGradBuffer>(model->registry(), alloc, BufferOptions{});
    initialize_parameters(model->registry(), 7, 0, 1);
  }
  ForwardContext ctx() {
    ForwardContext c;
    c.backend = &backend;
    c.alloc = &alloc;
    c.ps = ps.get();
    return c;
  }
  // Loss over the micro-batches, gradients accumulated with weight 1/tokens overall.
  double run(const std::vector<MicroBatch>& mbs) {
    buffer->zero_grad(backend);
    double tokens = 0.0, sum = 0.0;
    for (const auto& mb : mbs)
      for (float m : mb.loss_mask) tokens += m;
    for (const auto& mb : mbs) {
      GPTModel::Saved saved;
      sum += model->forward(ctx(), mb, static_cast<float>(1.0 / tokens), saved).loss_sum;
      model->backward(ctx(), mb, saved);
    }
    return sum / tokens;
  }
  std::vector<float> grads() const {
    return std::vector<float>(buffer->grad_data(), buffer->grad_data() + buffer->numel());
  }
};

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    r = std::max(r, std::fabs(static_cast<double>(b[i])));
  }
  return d / r;
}

class GptModelTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GptModelTest, SamplesInAMicroBatchDoNotInteract) {
  const auto [llama, flash] = GetParam();
  ModelRig s(llama, KernelOptions{.fast = false, .flash_attention = false});
  (void)flash;
  const double together = s.run({batch(0, 4, 64)});
  const auto g1 = s.grads();
  const double apart = s.run({batch(0, 1, 64), batch(1, 1, 64), batch(2, 1, 64), batch(3, 1, 64)});
  EXPECT_NEAR(together, apart, 1e-6 * together);
  EXPECT_LE(rel(s.grads(), g1), 1e-5);
}

TEST_P(GptModelTest, FastKernelsMatchReferenceKernels) {
  const auto [llama, flash] = GetParam();
  ModelRig ref(llama, KernelOptions{.fast = false});
  ModelRig fast(llama, KernelOptions{.fast = true, .flash_attention = flash});
  const std::vector<MicroBatch> mbs = {batch(0, 4, 64), batch(4, 2, 64)};
  const double a = ref.run(mbs), b = fast.run(mbs);
  EXPECT_NEAR(b, a, 1e-6 * a);
  EXPECT_LE(rel(fast.grads(), ref.grads()), 1e-5);
}

// Moves every parameter off its initial value (norm weights start at 1, biases at 0, where a
// wrong vector tail could go unseen), the same way in every rig.
void perturb_parameters(ModelRig& rig) {
  uint64_t stream = 0;
  for (const auto& p : rig.model->registry().params()) {
    const RngStream rng{13, stream++};
    float* w = p->data.f32();
    for (int64_t i = 0; i < p->local_shape.numel(); ++i) w[i] += 0.2f * (rng.uniform(static_cast<uint64_t>(i)) - 0.5f);
  }
}

TEST_P(GptModelTest, LongSequenceAndOddHiddenFastKernelsMatchReference) {
  const auto [llama, flash] = GetParam();
  for (const float dropout : {0.0f, 0.1f}) {
    const ModelConfig c = long_odd_config(llama, dropout);
    ModelRig ref(c, KernelOptions{.fast = false});
    ModelRig fast(c, KernelOptions{.fast = true, .flash_attention = flash});
    perturb_parameters(ref);
    perturb_parameters(fast);
    const std::vector<MicroBatch> mbs = {batch(0, 2, 320), batch(2, 1, 320)};
    const double a = ref.run(mbs), b = fast.run(mbs);
    EXPECT_NEAR(b, a, 1e-6 * a) << "dropout " << dropout;
    EXPECT_LE(rel(fast.grads(), ref.grads()), 1e-5) << "dropout " << dropout;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GptModelTest, ::testing::Combine(::testing::Bool(), ::testing::Bool()));

}  // namespace
}  // namespace mindspeed

namespace mindspeed {
namespace {

// EOD reset (--reset-position-ids --reset-attention-mask): a sample packing two documents
// has the loss and the gradients of the two documents run on their own, each with its own
// positions from 0, for learned positions and rotary, core and flash attention.
class EodResetTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(EodResetTest, PackedDocumentsEqualSeparateDocuments) {
  const auto [llama, flash] = GetParam();
  constexpr int32_t kEod = 1000;
  const int64_t T = 48, split = 17;  // document A = positions [0, 17) ending in EOD, B = the rest
  MicroBatch packed = batch(0, 1, T);
  packed.tokens[split - 1] = kEod;
  packed.position_ids.assign(T, 0);
  packed.doc_start.assign(T, 0);
  std::vector<float> mask(T);
  get_ltor_masks_and_position_ids(packed.tokens.data(), T, kEod, /*reset_position_ids=*/true,
                                  /*reset_attention_mask=*/true, /*eod_mask_loss=*/false, mask.data(),
                                  packed.position_ids.data(), packed.doc_start.data(), nullptr);
  ASSERT_EQ(packed.position_ids[split], 0);
  ASSERT_EQ(packed.doc_start[T - 1], split);
  auto piece = [&](int64_t begin, int64_t end) {
    MicroBatch mb;
    mb.B = 1;
    mb.T = end - begin;
    mb.tokens.assign(packed.tokens.begin() + begin, packed.tokens.begin() + end);
    mb.labels.assign(packed.labels.begin() + begin, packed.labels.begin() + end);
    mb.loss_mask.assign(mb.T, 1.0f);
    for (int64_t t = 0; t < mb.T; ++t) mb.position_ids.push_back(static_cast<int32_t>(t));
    return mb;
  };
  ModelRig rig(llama, KernelOptions{.fast = true, .flash_attention = flash});
  const double packed_loss = rig.run({packed});
  const auto packed_grads = rig.grads();
  const double separate_loss = rig.run({piece(0, split), piece(split, T)});
  EXPECT_NEAR(packed_loss, separate_loss, 1e-5 * separate_loss);
  EXPECT_LE(rel(packed_grads, rig.grads()), 1e-5);
  // Without the reset the documents see each other and the loss differs.
  MicroBatch plain = packed;
  plain.doc_start.clear();
  for (int64_t t = 0; t < T; ++t) plain.position_ids[t] = static_cast<int32_t>(t);
  EXPECT_GT(std::fabs(rig.run({plain}) - separate_loss), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Families, EodResetTest, ::testing::Combine(::testing::Bool(), ::testing::Bool()));

}  // namespace
}  // namespace mindspeed

namespace mindspeed {
namespace {

// MindSpeed's mask normalization (§3.3): the attention mask is one description (causal, a
// sliding window, document starts), never an s x s tensor per layer or micro-batch. A whole
// training step (two layers, two micro-batches, forward and backward) with flash attention
// stays below the bytes of one s x s boolean mask, with document starts and a sliding
// window too; core attention, which does hold s x s probabilities, goes over the same bound
// (the check sees such tensors).
int64_t step_peak_bytes(int64_t S, bool flash, int64_t window, bool documents) {
  ModelConfig c = config(false);
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.kv_channels = 8;
  c.num_query_groups = 2;
  c.ffn_hidden_size = 32;
  c.vocab_size = c.padded_vocab_size = 128;
  c.seq_length = c.max_position_embeddings = S;
  c.attention_window = window;
  ModelRig rig(c, KernelOptions{.fast = true, .flash_attention = flash});
  std::vector<MicroBatch> mbs;
  for (int64_t m = 0; m < 2; ++m) {
    MicroBatch mb;
    mb.B = 1;
    mb.T = S;
    mb.first_sample = m;
    for (int64_t t = 0; t < S; ++t) {
      mb.tokens.push_back(static_cast<int32_t>((t * 31 + m) % 128));
      mb.labels.push_back(static_cast<int32_t>((t * 17 + m) % 128));
      mb.loss_mask.push_back(1.0f);
      mb.position_ids.push_back(static_cast<int32_t>(documents ? t % 1000 : t));
      if (documents) mb.doc_start.push_back(static_cast<int32_t>(t / 1000 * 1000));
    }
    mbs.push_back(std::move(mb));
  }
  rig.alloc.reset_peaks();
  const double loss = rig.run(mbs);
  EXPECT_TRUE(std::isfinite(loss));
  return rig.alloc.stats().total_peak;
}

TEST(MaskNormalization, NoSequenceSquaredTensorIsAllocated) {
  const int64_t S = 8192;
  for (const auto& [window, documents] : {std::pair<int64_t, bool>{0, false}, {0, true}, {500, true}}) {
    EXPECT_LT(step_peak_bytes(S, /*flash=*/true, window, documents), S * S)
        << "window " << window << ", documents " << documents;
  }
  EXPECT_GT(step_peak_bytes(1024, /*flash=*/false, 0, false), 1024 * 1024);
}

}  // namespace
}  // namespace mindspeed
