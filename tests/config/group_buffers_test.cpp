// config/group_buffers.h: MindSpeed's per-group buffer formula table (hccl_adaptive_func.py) for
// given (s, b, h, TP, CP, EP, top-k, SP), worked out by hand here, and the --hccl-group-buffer
// parser (unknown keys, malformed pairs and sizes <= 0 refused by name).
#include "config/group_buffers.h"

#include <gtest/gtest.h>

namespace mindspeed {
namespace {

using Sizes = std::map<std::string, int64_t>;

// A dense model: s 4096, b 1, h 4096, 32 heads.
struct DenseModel {
  ModelConfig m;
  ParallelConfig p;
  DenseModel() {
    m.seq_length = 4096;
    m.hidden_size = 4096;
    m.num_attention_heads = 32;
  }
};

TEST(GroupBuffers, DenseTensorAndPipelineParallel) {
  DenseModel x;
  x.p.tensor_model_parallel_size = 8;
  x.p.sequence_parallel = true;
  // s*b*h = 2^24 elements: TP (SP) 2 * 16 = 32 MB; PP under SP: / 8 -> 2 * 2 = 4 MB. The default
  // ring CP (cp 1, no overlap): 2 * (2 * ceil(s*b*h/heads/tp / 2^20)) = 2 * 2 * 1 = 4 MB.
  // Megatron's default dispatcher (allgather) gives tp_exp its 200 MB without a factor.
  const Sizes want = {{"tp", 32},      {"pp", 4},      {"pp_new_stream", 4},
                      {"mp", 10},      {"mp_exp", 10}, {"exp", 200},
                      {"tp_exp", 200}, {"tp_cp", 10},  {"cp", 4}};
  EXPECT_EQ(adaptive_group_buffers(x.m, x.p, 1), want);
  // Without SP the TP all-reduce doubles it and PP moves whole [s, b, h] activations.
  x.p.sequence_parallel = false;
  const Sizes got = adaptive_group_buffers(x.m, x.p, 1);
  EXPECT_EQ(got.at("tp"), 64);
  EXPECT_EQ(got.at("pp"), 32);
  // b = 3: 3 * 2^24 elements -> 2 * 48 MB.
  x.p.sequence_parallel = true;
  EXPECT_EQ(adaptive_group_buffers(x.m, x.p, 3).at("tp"), 96);
}

TEST(GroupBuffers, ContextParallelAlgorithms) {
  DenseModel x;
  x.p.tensor_model_parallel_size = 2;
  x.p.context_parallel_size = 4;
  x.m.group_query_attention = true;
  x.m.num_query_groups = 8;
  // Ulysses: s/cp*b*h/tp = 2^21 elements -> 2 * 2 = 4 MB.
  x.p.cp.algo = CpAlgo::kUlysses;
  EXPECT_EQ(adaptive_group_buffers(x.m, x.p, 1).at("cp"), 4);
  // Ring with GQA: s/cp*b*h/heads*groups/tp = 2^19 elements -> cp2 = 2 * 1 = 2, cp = 2 * 2 = 4;
  // with the send/recv overlap cp2 = cp = 2; a double ring (window 2) adds the intra groups.
  x.p.cp.algo = CpAlgo::kRing;
  EXPECT_EQ(adaptive_group_buffers(x.m, x.p, 1).at("cp"), 4);
  x.p.cp.send_recv_overlap = true;
  x.p.cp.window_size = 2;
  Sizes got = adaptive_group_buffers(x.m, x.p, 1);
  EXPECT_EQ(got.at("cp"), 2);
  EXPECT_EQ(got.at("cp2"), 2);
  EXPECT_EQ(got.at("cp_ring_intra"), 2);
  EXPECT_EQ(got.at("cp_ring_intra_overlap"), 2);
  // Hybrid, Ulysses degree 2 (ring 2): Ulysses s/2*b*h/tp = 2^22 -> 2 * 4 = 8 MB; ring
  // s/2*b*h/heads*groups/tp = 2^20 -> 2 MB, doubled without the overlap; the CP group itself 10.
  x.p.cp.algo = CpAlgo::kHybrid;
  x.p.cp.ulysses_degree = 2;
  x.p.cp.send_recv_overlap = false;
  x.p.cp.window_size = 1;
  got = adaptive_group_buffers(x.m, x.p, 1);
  EXPECT_EQ(got.at("cp_ulysses"), 8);
  EXPECT_EQ(got.at("cp_ring"), 4);
  EXPECT_EQ(got.at("cp"), 10);
  EXPECT_EQ(got.count("cp2"), 0u);
}

TEST(GroupBuffers, ExpertGroupsFollowTheImbalanceFactor) {
  DenseModel x;
  x.p.tensor_model_parallel_size = 2;
  x.p.expert_model_parallel_size = 4;
  x.p.sequence_parallel = true;
  x.m.moe.num_experts = 8;
  x.m.moe.router_topk = 2;
  x.m.moe.dispatcher = MoeDispatcher::kAllToAllSeq;
  // Factor off: 200 MB for the expert groups and the alltoall_seq TP share.
  Sizes got = adaptive_group_buffers(x.m, x.p, 1);
  EXPECT_EQ(got.at("exp"), 200);
  EXPECT_EQ(got.at("tp"), 200);  // max(2 * 16 = 32, 200)
  EXPECT_EQ(got.count("tp_exp"), 0u);
  // Factor 1.5: exp = s/tp*b*h*topk = 2^24 -> 32 (MindSpeed leaves the factor out of exp);
  // tp = max(32, 2 * ceil(1.5 * 2^24 / 2^20) = 48); with TP-extend-EP tp_exp = 48 too.
  x.p.hccl_ep_group_buffer_adaptive_factor = 1.5;
  x.p.moe_tp_extend_ep = true;
  got = adaptive_group_buffers(x.m, x.p, 1);
  EXPECT_EQ(got.at("exp"), 32);
  EXPECT_EQ(got.at("tp"), 48);
  EXPECT_EQ(got.at("tp_exp"), 48);
  // The allgather dispatcher: tp_exp = f*s*b*h*ep = 1.5 * 4 * 2^24 -> 2 * 96 = 192.
  x.m.moe.dispatcher = MoeDispatcher::kAllGather;
  got = adaptive_group_buffers(x.m, x.p, 1);
  EXPECT_EQ(got.at("tp_exp"), 192);
  EXPECT_EQ(got.at("tp"), 32);
}

TEST(GroupBuffers, ParsesMindSpeedsStringsAndRefusesBadOnes) {
  auto parsed = parse_group_buffers("dp:200;tp:300;exp:400");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(*parsed, (Sizes{{"dp", 200}, {"tp", 300}, {"exp", 400}}));
  parsed =
      parse_group_buffers(" dp : 20 , cp_ring:8");  // ',' separates when present; spaces dropped
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(*parsed, (Sizes{{"dp", 20}, {"cp_ring", 8}}));
  auto refused = [](const std::string& text, const std::string& why) {
    const auto s = parse_group_buffers(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.status().message().find(why), std::string::npos) << s.status().message();
  };
  refused("dp:200;xx:3", "unknown group key \"xx\"");
  refused("tp:0", "must be greater than 0");
  refused("tp:-5", "must be greater than 0");
  refused("tp:12MB", "is not a whole number of MB");
  refused("tp=300", "is not a key:MB pair");
  refused("tp:1:2", "is not a key:MB pair");
  refused("", "is not a key:MB pair");
}

TEST(GroupBuffers, ManualEntriesOverrideTheAdaptiveTable) {
  Configs c;
  c.model.seq_length = 4096;
  c.model.hidden_size = 4096;
  c.model.num_attention_heads = 32;
  c.training.micro_batch_size = 1;
  EXPECT_TRUE(group_buffers(c)->empty());
  c.parallel.hccl_group_buffer_adaptive = true;
  c.parallel.hccl_group_buffer = "tp:7;dp:100";
  const auto got = group_buffers(c);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->at("tp"), 7);
  EXPECT_EQ(got->at("dp"), 100);
  EXPECT_EQ(got->at("pp"), 32);  // adaptive, no SP
  c.parallel.hccl_group_buffer = "tp:0";
  EXPECT_FALSE(group_buffers(c).ok());
}

}  // namespace
}  // namespace mindspeed
