// num_floating_point_operations against values worked out by hand from Megatron's formula
// (12 B s L h^2 [(1 + g/n + s/2h) q + (F/h) gamma + V/(2Lh)]), including --kv-channels other
// than hidden / heads (q != 1) with and without GQA.
#include "training/flops.h"

#include <gtest/gtest.h>

namespace mindspeed {
namespace {

TEST(Flops, Gpt2SmallByHand) {
  // GPT-2 124M: L=12, h=768, n=12, F=3072, s=1024, V=50304 (padded), global batch 8.
  ModelConfig c;
  c.num_layers = 12;
  c.hidden_size = 768;
  c.num_attention_heads = 12;
  c.kv_channels = 64;
  c.ffn_hidden_size = 3072;
  c.seq_length = 1024;
  c.padded_vocab_size = 50304;
  // By hand: bracket = (1 + 1 + 1024/1536) * 1 + 4 + 50304/(2*12*768)
  //   = 8/3 + 4 + 131/48 = 451/48;
  // 12 * 8 * 1024 * 12 * 768^2 = 695,784,701,952 -> FLOPs = 6,537,477,095,424.
  EXPECT_NEAR(num_floating_point_operations(c, 8), 6537477095424.0, 1e-9 * 6537477095424.0);
  // The same through the sanity form 72 B s L h^2 (1 + s/(12h) + V/(12 L h)).
  const double B = 8, s = 1024, L = 12, h = 768, V = 50304;
  EXPECT_NEAR(num_floating_point_operations(c, 8),
              72 * B * s * L * h * h * (1 + s / (12 * h) + V / (12 * L * h)), 1.0);
}

TEST(Flops, Llama7bLikeWithGqaAndSwiglu) {
  // L=32, h=4096, n=32, g=8 (GQA), F=11008, SwiGLU, s=4096, V=32000, global batch 1.
  ModelConfig c;
  c.num_layers = 32;
  c.hidden_size = 4096;
  c.num_attention_heads = 32;
  c.group_query_attention = true;
  c.num_query_groups = 8;
  c.kv_channels = 128;
  c.ffn_hidden_size = 11008;
  c.swiglu = true;
  c.seq_length = 4096;
  c.padded_vocab_size = 32000;
  // Bracket: attention (1 + 8/32 + 4096/8192) * 1 = 1.75; MLP (11008/4096) * 1.5 = 4.03125;
  // logits 32000 / (2*32*4096) = 0.1220703125; sum 5.9033203125.
  // 12 * 1 * 4096 * 32 * 4096^2 = 26,388,279,066,624 -> FLOPs = 155,778,463,825,920.
  EXPECT_NEAR(num_floating_point_operations(c, 1), 155778463825920.0, 1e-9 * 155778463825920.0);
}

TEST(Flops, KvChannelsNotHiddenOverHeads) {
  // --kv-channels 32 with h/n = 24: the query projection n*kv = 128 is wider than h = 96.
  // L=2, h=96, n=4, kv=32, no GQA (g = n), F=384, s=128, V=1024, global batch 3.
  ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 96;
  c.num_attention_heads = 4;
  c.kv_channels = 32;
  c.ffn_hidden_size = 384;
  c.seq_length = 128;
  c.padded_vocab_size = 1024;
  // Megatron's transformer_flops(): query_projection_to_hidden_size_ratio q = 32*4/96 = 4/3;
  // self_attn_term = 12 L h^2 (1 + g/n + s/h/2) q = 12*2*9216 * (1 + 1 + 2/3) * 4/3;
  // total = B s (12 L h F + self_attn_term + 6 h V)
  //   = 3*128 * (12*2*96*384 + 221184*32/9 + 6*96*1024) = 384 * (884736 + 786432 + 589824)
  //   = 384 * 2260992 = 868,220,928.
  // Counted GEMM by GEMM (2mnk each; x3 for forward, weight and data gradients), per token and
  // layer: Q 2*96*128 = 24576, K and V 2*2*96*128 = 49152, output 2*128*96 = 24576, scores
  // and scores x V (causal half) 128*128 each = 32768, MLP 2*2*96*384 = 147456; sum 278528,
  // x2 layers + logits 2*96*1024 = 753664; x3 x 384 tokens = 868,220,928.
  EXPECT_NEAR(num_floating_point_operations(c, 3), 868220928.0, 1e-9 * 868220928.0);
}

TEST(Flops, KvChannelsNotHiddenOverHeadsWithGqaAndSwiglu) {
  // L=2, h=96, n=6, g=2 (GQA), kv=32 (h/n = 16), F=256 with SwiGLU, s=64, V=512, global batch 2.
  ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 96;
  c.num_attention_heads = 6;
  c.group_query_attention = true;
  c.num_query_groups = 2;
  c.kv_channels = 32;
  c.ffn_hidden_size = 256;
  c.swiglu = true;
  c.seq_length = 64;
  c.padded_vocab_size = 512;
  // Megatron: q = 32*6/96 = 2; self_attn_term = 12*2*9216 * (1 + 2/6 + 64/96/2) * 2
  //   = 221184 * 10/3 = 737280; MLP 12*2*96*256*3/2 = 884736; logits 6*96*512 = 294912;
  // total = 2*64 * (884736 + 737280 + 294912) = 128 * 1916928 = 245,366,784.
  // GEMM by GEMM per token and layer: Q 2*96*192 = 36864, K and V 2*2*96*64 = 24576, output
  // 2*192*96 = 36864, scores and scores x V 64*192 each = 24576, MLP fc1 2*96*512 = 98304 and
  // fc2 2*256*96 = 49152; sum 270336, x2 layers + logits 2*96*512 = 638976; x3 x 128 tokens.
  EXPECT_NEAR(num_floating_point_operations(c, 2), 245366784.0, 1e-9 * 245366784.0);
}

TEST(Flops, MixtureOfExpertsCountsTheRoutedAndSharedExperts) {
  // Megatron core_v0.12's transformer_flops() with MoE: 4 layers with --moe-layer-freq 2 (layers
  // 0 and 2 MoE), dense F = 512, expert F = 128, top-2, shared experts 256, SwiGLU; h = 64,
  // n = 4 (kv 16, no GQA), s = 32, V = 1024, global batch 2.
  ModelConfig c;
  c.num_layers = 4;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.kv_channels = 16;
  c.ffn_hidden_size = 512;
  c.swiglu = true;
  c.seq_length = 32;
  c.padded_vocab_size = 1024;
  c.moe.num_experts = 8;
  c.moe.router_topk = 2;
  c.moe.ffn_hidden_size = 128;
  c.moe.shared_expert_intermediate_size = 256;
  c.moe.layer_pattern = {1, 0, 1, 0};
  // MLP term: 12 L h [F * 1.5 * (2/4) + 128 * 2 * 1.5 * (2/4) + 256 * 1.5 * (2/4)]
  //   = 12*4*64 * (384 + 192 + 192) = 3072 * 768 = 2,359,296;
  // attention: 12 L h^2 (1 + 1 + 32/64/2) * 1 = 12*4*4096 * 2.25 = 442,368;
  // logits: 6 h V = 6*64*1024 = 393,216; per token 3,194,880; x 2*32 tokens = 204,472,320.
  EXPECT_NEAR(num_floating_point_operations(c, 2), 204472320.0, 1e-9 * 204472320.0);
  // A dense model with F = top-k x expert F + shared has the same FLOPs in its MoE layers.
  c.moe = MoeConfig{};
  c.ffn_hidden_size = 512;
  const double dense = num_floating_point_operations(c, 2);
  EXPECT_NEAR(dense, 2 * 32 * (12.0 * 4 * 64 * 768 + 442368 + 393216), 1.0);
}

}  // namespace
// MindSpeed: with --noop-layers the FLOPs count only the real layers: a 4-layer model with
// layers 0 and 3 as no-ops costs exactly what the 2-layer model does.
TEST(Flops, NoopLayersAreNotCounted) {
  ModelConfig real;
  real.num_layers = 2;
  real.hidden_size = 64;
  real.num_attention_heads = 4;
  real.kv_channels = 16;
  real.num_query_groups = 4;
  real.ffn_hidden_size = 256;
  real.seq_length = 128;
  real.padded_vocab_size = 1024;
  ModelConfig with_noop = real;
  with_noop.num_layers = 4;
  with_noop.noop_layers = {0, 3};
  EXPECT_EQ(num_floating_point_operations(with_noop, 8), num_floating_point_operations(real, 8));
  with_noop.noop_layers = {};
  EXPECT_GT(num_floating_point_operations(with_noop, 8), num_floating_point_operations(real, 8));
}

}  // namespace mindspeed
