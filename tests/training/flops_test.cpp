// num_floating_point_operations against values worked out by hand from Megatron's formula
// (12 B s L h^2 [(1 + g/n + s/2h) q + (F/h) gamma + V/(2Lh)]).
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

}  // namespace
}  // namespace mindspeed
