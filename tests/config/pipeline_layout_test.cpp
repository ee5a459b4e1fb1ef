// PipelineLayout: Megatron's layer split (even, uneven first/last stage, virtual stages with
// Megatron's chunk offsets and MindSpeed's example), DualPipeV's V (MindSpeed's chunk-to-layer
// mapping test), and every refused combination with its rule named.
#include "config/pipeline_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace mindspeed {
namespace {

ParallelConfig pipeline(int pp) {
  ParallelConfig p;
  p.pipeline_model_parallel_size = pp;
  return p;
}

// (first_layer, num_layers) of each chunk of `rank`.
std::vector<std::pair<int64_t, int64_t>> chunks_of(const PipelineLayout& layout, int rank) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const PipelineStage& s : layout.stages_of_rank(rank)) out.emplace_back(s.first_layer, s.num_layers);
  return out;
}

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

TEST(PipelineLayout, EvenSplitIsOneChunkPerRankIn1F1B) {
  auto layout = PipelineLayout::build(pipeline(4), 8);
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(layout->schedule, PipelineSchedule::k1F1B);
  ASSERT_EQ(layout->num_stages(), 4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(chunks_of(*layout, r), (Chunks{{2 * r, 2}}));
  EXPECT_TRUE(layout->stages.front().pre_process);
  EXPECT_TRUE(layout->stages.back().post_process);
  EXPECT_FALSE(layout->stages[1].pre_process || layout->stages[1].post_process);
  auto single = PipelineLayout::build(pipeline(1), 3);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->schedule, PipelineSchedule::kNoPipelining);
}

TEST(PipelineLayout, UnevenFirstAndLastStages) {
  ParallelConfig p = pipeline(4);
  p.decoder_first_pipeline_num_layers = 1;
  p.decoder_last_pipeline_num_layers = 3;
  auto layout = PipelineLayout::build(p, 8);
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(chunks_of(*layout, 0), (Chunks{{0, 1}}));
  EXPECT_EQ(chunks_of(*layout, 1), (Chunks{{1, 2}}));
  EXPECT_EQ(chunks_of(*layout, 2), (Chunks{{3, 2}}));
  EXPECT_EQ(chunks_of(*layout, 3), (Chunks{{5, 3}}));
  p = pipeline(2);
  p.decoder_first_pipeline_num_layers = 1;  // the last stage takes the rest
  layout = PipelineLayout::build(p, 5);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(chunks_of(*layout, 1), (Chunks{{1, 4}}));
}

TEST(PipelineLayout, InterleavedChunksFollowMegatronsOffsets) {
  // MindSpeed's example: L=16, PP=4, v=2: device 0 holds layers 0-1 and 8-9.
  ParallelConfig p = pipeline(4);
  p.num_layers_per_virtual_pipeline_stage = 2;
  auto layout = PipelineLayout::build(p, 16, 8);
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(layout->schedule, PipelineSchedule::kInterleaved);
  EXPECT_EQ(layout->chunks_per_rank, 2);
  EXPECT_EQ(layout->microbatch_group_size, 4);  // default: the pipeline size
  EXPECT_EQ(chunks_of(*layout, 0), (Chunks{{0, 2}, {8, 2}}));
  EXPECT_EQ(chunks_of(*layout, 3), (Chunks{{6, 2}, {14, 2}}));
  // Megatron: chunk c of rank r starts at c*(L/v) + r*(L/(P*v)); stage index c*P + r.
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(layout->stages_of_rank(r)[c].first_layer, c * 8 + r * 2);
      EXPECT_EQ(layout->stage_of(r, c), c * 4 + r);
    }
  EXPECT_TRUE(layout->stages_of_rank(0)[0].pre_process);
  EXPECT_TRUE(layout->stages_of_rank(3)[1].post_process);
  // The same layout by chunk count, and uneven stages split per rank into chunks.
  p = pipeline(4);
  p.num_virtual_stages_per_pipeline_rank = 2;
  EXPECT_EQ(chunks_of(*PipelineLayout::build(p, 16), 0), (Chunks{{0, 2}, {8, 2}}));
  p = pipeline(2);
  p.num_virtual_stages_per_pipeline_rank = 2;
  p.decoder_first_pipeline_num_layers = 2;
  layout = PipelineLayout::build(p, 6);
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(chunks_of(*layout, 0), (Chunks{{0, 1}, {3, 1}}));
  EXPECT_EQ(chunks_of(*layout, 1), (Chunks{{1, 2}, {4, 2}}));
}

TEST(PipelineLayout, DualPipeVIsAV) {
  ParallelConfig p = pipeline(4);
  p.dualpipev = true;
  auto layout = PipelineLayout::build(p, 16, 8);
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(layout->schedule, PipelineSchedule::kDualPipeV);
  // MindSpeed's acceptance: chunk 0 offset r*L/(2P), chunk 1 offset L-(r+1)*L/(2P).
  for (int r = 0; r < 4; ++r) EXPECT_EQ(chunks_of(*layout, r), (Chunks{{r * 2, 2}, {16 - (r + 1) * 2, 2}}));
  EXPECT_TRUE(layout->stages_of_rank(0)[0].pre_process);
  EXPECT_TRUE(layout->stages_of_rank(0)[1].post_process);  // rank 0 holds both ends
  EXPECT_EQ(layout->stage_of(3, 0), 3);
  EXPECT_EQ(layout->stage_of(3, 1), 4);  // the turn of the V stays on rank P-1
}

// Each refused configuration and a phrase its message must contain.
struct Refusal {
  const char* name;
  ParallelConfig parallel;
  int64_t num_layers;
  int64_t num_microbatches;
  const char* message;
};

ParallelConfig with(int pp, void (*edit)(ParallelConfig&)) {
  ParallelConfig p = pipeline(pp);
  edit(p);
  return p;
}

TEST(PipelineLayout, RefusesWhatMegatronAndMindSpeedRefuse) {
  const Refusal refusals[] = {
      {"layers not divisible", pipeline(3), 8, 0, "must be divisible by --pipeline-model-parallel-size"},
      {"uneven rest not divisible", with(4, [](ParallelConfig& p) { p.decoder_first_pipeline_num_layers = 2; }), 9, 0,
       "must split evenly"},
      {"uneven too many", with(2, [](ParallelConfig& p) {
         p.decoder_first_pipeline_num_layers = 3;
         p.decoder_last_pipeline_num_layers = 3;
       }), 4, 0, "must split evenly"},
      {"uneven without pipeline", with(1, [](ParallelConfig& p) { p.decoder_last_pipeline_num_layers = 1; }), 4, 0,
       "need --pipeline-model-parallel-size > 1"},
      {"vpp both flags", with(2, [](ParallelConfig& p) {
         p.num_layers_per_virtual_pipeline_stage = 1;
         p.num_virtual_stages_per_pipeline_rank = 2;
       }), 4, 0, "only one of"},
      {"vpp without pipeline", with(1, [](ParallelConfig& p) { p.num_virtual_stages_per_pipeline_rank = 2; }), 4, 0,
       "needs --pipeline-model-parallel-size > 1"},
      {"vpp layers not divisible", with(2, [](ParallelConfig& p) { p.num_layers_per_virtual_pipeline_stage = 3; }), 8,
       0, "must be divisible by --num-layers-per-virtual-pipeline-stage"},
      {"vpp one chunk", with(2, [](ParallelConfig& p) { p.num_layers_per_virtual_pipeline_stage = 4; }), 8, 0,
       "at least 2 virtual stages"},
      {"vpp rank layers", with(2, [](ParallelConfig& p) { p.num_virtual_stages_per_pipeline_rank = 3; }), 8, 0,
       "not divisible into 3 virtual stages"},
      {"vpp by layers with uneven", with(2, [](ParallelConfig& p) {
         p.num_layers_per_virtual_pipeline_stage = 1;
         p.decoder_first_pipeline_num_layers = 2;
       }), 6, 0, "--num-virtual-stages-per-pipeline-rank"},
      {"vpp group below pipeline", with(4, [](ParallelConfig& p) {
         p.num_virtual_stages_per_pipeline_rank = 2;
         p.microbatch_group_size_per_vp_stage = 3;
       }), 8, 8, "must be at least --pipeline-model-parallel-size"},
      {"vpp too few micro-batches", with(4, [](ParallelConfig& p) { p.num_virtual_stages_per_pipeline_rank = 2; }), 8,
       3, "needs at least 4 micro-batches"},
      {"vpp last group", with(4, [](ParallelConfig& p) { p.num_virtual_stages_per_pipeline_rank = 2; }), 8, 6,
       "the last group of micro-batches"},
      {"group without vpp", with(2, [](ParallelConfig& p) { p.microbatch_group_size_per_vp_stage = 2; }), 4, 0,
       "needs the interleaved schedule"},
      {"dualpipev without pipeline", with(1, [](ParallelConfig& p) { p.dualpipev = true; }), 4, 0,
       "dualpipev needs --pipeline-model-parallel-size > 1"},
      {"dualpipev with vpp", with(2, [](ParallelConfig& p) {
         p.dualpipev = true;
         p.num_virtual_stages_per_pipeline_rank = 2;
       }), 8, 0, "does not work with the virtual pipeline"},
      {"dualpipev layers", with(2, [](ParallelConfig& p) { p.dualpipev = true; }), 6, 0, "multiple of 2 x"},
      {"dualpipev micro-batches", with(2, [](ParallelConfig& p) { p.dualpipev = true; }), 4, 3,
       "at least 2 x --pipeline-model-parallel-size (4) micro-batches"},
      {"dualpipev overlap", with(2, [](ParallelConfig& p) {
         p.dualpipev = true;
         p.overlap_grad_reduce = true;
       }), 4, 0, "--overlap-grad-reduce"},
      {"dualpipev cp", with(2, [](ParallelConfig& p) {
         p.dualpipev = true;
         p.context_parallel_size = 2;
       }), 4, 0, "--context-parallel-size"},
      {"dualpipev uneven", with(2, [](ParallelConfig& p) {
         p.dualpipev = true;
         p.decoder_first_pipeline_num_layers = 1;
       }), 4, 0, "leave out --decoder-first/last-pipeline-num-layers"},
      {"multiparameter without pipeline", with(1, [](ParallelConfig& p) { p.multiparameter_pipeline = true; }), 4, 0,
       "--use-multiparameter-pipeline-model-parallel needs --pipeline-model-parallel-size > 1"},
      {"multiparameter with dualpipev", with(2, [](ParallelConfig& p) {
         p.multiparameter_pipeline = true;
         p.dualpipev = true;
       }), 4, 0, "does not work with --schedules-method dualpipev"},
      {"dw detach alone", with(2, [](ParallelConfig& p) { p.dualpipev_dw_detach = true; }), 4, 0,
       "--dualpipev-dw-detach needs --schedules-method dualpipev"},
  };
  for (const Refusal& r : refusals) {
    auto layout = PipelineLayout::build(r.parallel, r.num_layers, r.num_microbatches);
    ASSERT_FALSE(layout.ok()) << r.name;
    EXPECT_EQ(layout.status().code(), StatusCode::kInvalidArgument) << r.name;
    EXPECT_NE(layout.status().message().find(r.message), std::string::npos)
        << r.name << ": " << layout.status().message();
  }
  // The boundaries themselves are accepted.
  ParallelConfig p = pipeline(2);
  p.dualpipev = true;
  EXPECT_TRUE(PipelineLayout::build(p, 4, 4).ok());
  p = pipeline(4);
  p.num_virtual_stages_per_pipeline_rank = 2;
  EXPECT_TRUE(PipelineLayout::build(p, 8, 4).ok());
  EXPECT_TRUE(PipelineLayout::build(p, 8, 9).status().code() == StatusCode::kInvalidArgument);  // 9 mod 4 = 1 < 4
  p.microbatch_group_size_per_vp_stage = 5;
  EXPECT_TRUE(PipelineLayout::build(p, 8, 9).ok());  // 9 mod 5 = 4 >= 4
}

}  // namespace
}  // namespace mindspeed
