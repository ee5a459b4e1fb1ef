// Command-line parsing and validation: Megatron spellings and defaults, refusal of known
// but unimplemented flags and of unknown ones, cross-flag rules with the flags named.
#include "cli/arguments.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "config/parallel_config.h"
#include "config/validate.h"

namespace mindspeed {
namespace {

std::vector<std::string> base_args() {
  return {"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
          "--max-position-embeddings", "32", "--micro-batch-size", "2", "--train-iters", "10",
          "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};
}

StatusOr<ParsedArguments> parse_with(std::vector<std::string> extra) {
  auto args = base_args();
  args.insert(args.end(), extra.begin(), extra.end());
  return parse_arguments(args);
}

TEST(Arguments, ParsesMegatronFlagsAndKeepsDefaults) {
  auto parsed = parse_with({"--normalization=RMSNorm", "--swiglu", "--disable-bias-linear",
                            "--position-embedding-type", "rope", "--lr-decay-style", "cosine",
                            "--data-cache-path", "/tmp/x"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  const Configs& c = parsed->configs;
  EXPECT_EQ(c.model.num_layers, 2);
  EXPECT_EQ(c.model.normalization, Normalization::kRMSNorm);
  EXPECT_TRUE(c.model.swiglu);
  EXPECT_FALSE(c.model.add_bias_linear);
  EXPECT_EQ(c.model.position_embedding_type, PositionEmbeddingType::kRope);
  EXPECT_EQ(c.optimizer.lr_decay_style, LrDecayStyle::kCosine);
  EXPECT_FLOAT_EQ(c.optimizer.lr, 1e-3f);
  // Megatron defaults.
  EXPECT_FLOAT_EQ(c.optimizer.weight_decay, 0.01f);
  EXPECT_FLOAT_EQ(c.optimizer.adam_beta2, 0.999f);
  EXPECT_FLOAT_EQ(c.optimizer.clip_grad, 1.0f);
  EXPECT_EQ(c.training.seed, 1234);
  EXPECT_EQ(c.training.log_interval, 100);
  EXPECT_FLOAT_EQ(c.model.attention_dropout, 0.1f);
  EXPECT_EQ(c.training.optimization_level, 2);
}

TEST(Arguments, RepeatedFlagKeepsTheLastValueAndListsTakeSeveral) {
  auto parsed = parse_with({"--seed", "1", "--seed", "7"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->configs.training.seed, 7);
  auto blend = parse_arguments({"--data-path", "0.3", "a", "0.7", "b", "--train-iters", "1"});
  ASSERT_TRUE(blend.ok()) << blend.status().to_string();
  EXPECT_EQ(blend->configs.data.data_path, (std::vector<std::string>{"0.3", "a", "0.7", "b"}));
}

TEST(Arguments, RefusesKnownButUnimplementedFlags) {
  auto parsed = parse_with({"--use-torch-fsdp2"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(parsed.status().message().find("--use-torch-fsdp2 is a Megatron-LM flag"), std::string::npos)
      << parsed.status().message();
  auto adaptive = parse_with({"--adaptive-recompute-device-swap"});
  ASSERT_FALSE(adaptive.ok());
  EXPECT_NE(adaptive.status().message().find("MindSpeed"), std::string::npos) << adaptive.status().message();
}

TEST(Arguments, RefusesUnknownFlagsWithASuggestion) {
  auto parsed = parse_with({"--num-layer", "3"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("did you mean --num-layers"), std::string::npos)
      << parsed.status().message();
  EXPECT_FALSE(parse_with({"stray"}).ok());
}

TEST(Arguments, RejectsBadValues) {
  EXPECT_FALSE(parse_with({"--normalization", "BatchNorm"}).ok());
  EXPECT_FALSE(parse_with({"--num-layers", "two"}).ok());
}

TEST(Arguments, IntegerFlagsAreCheckedOnTheirText) {
  // CLI11 alone saturated the first to INT64_MAX and read "" as 0 and "0x10" as 16.
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--num-layers", "99999999999999999999"},
       "--num-layers: '99999999999999999999' is outside the range -9223372036854775808..9223372036854775807"},
      {{"--num-layers", ""}, "--num-layers: '' is not an integer"},
      {{"--num-layers", "0x10"}, "--num-layers: '0x10' is not an integer"},
      {{"--num-layers", "two"}, "--num-layers: 'two' is not an integer"},
      {{"--tensor-model-parallel-size", "4294967297"},
       "--tensor-model-parallel-size: '4294967297' is outside the range -2147483648..2147483647"},
  };
  for (const auto& [extra, message] : cases) {
    auto parsed = parse_with(extra);
    ASSERT_FALSE(parsed.ok()) << extra[1] << " accepted as " << parsed->configs.model.num_layers;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(message), std::string::npos) << parsed.status().message();
  }
  // What Python's int() accepts still parses (a negative --seed is outside its domain: NumPy
  // seeds are in [0, 2^32)).
  auto parsed = parse_with({"--num-layers", " +7", "--seed", "0"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->configs.model.num_layers, 7);
}

TEST(Arguments, NoopLayersAndWsd) {
  auto parsed = parse_with({"--num-layers", "4", "--noop-layers", "0,3"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->configs.model.noop_layers, (std::vector<int64_t>{0, 3}));
  for (const char* bad : {"0,4", "1,1", "x", "0,", "0,1,2,3"}) {
    auto r = parse_with({"--num-layers", "4", "--noop-layers", bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--noop-layers"), std::string::npos) << r.status().message();
  }
  // WSD needs the length of its anneal.
  parsed = parse_with({"--lr-decay-style", "WSD"});
  ASSERT_TRUE(parsed.ok());
  Configs c = parsed->configs;
  Status s = validate_configs(c, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--lr-wsd-decay-iters"), std::string::npos) << s.message();
  parsed = parse_with({"--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "3", "--lr-wsd-decay-style", "cosine"});
  ASSERT_TRUE(parsed.ok());
  c = parsed->configs;
  EXPECT_TRUE(validate_configs(c, 1).ok());
  EXPECT_EQ(c.optimizer.lr_decay_style, LrDecayStyle::kWSD);
  EXPECT_EQ(c.optimizer.lr_wsd_decay_style, LrWsdDecayStyle::kCosine);
}

TEST(Arguments, PipelineScheduleFlags) {
  auto parsed = parse_with({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                            "--microbatch-group-size-per-virtual-pipeline-stage", "3",
                            "--decoder-first-pipeline-num-layers", "1", "--decoder-last-pipeline-num-layers", "1"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  const ParallelConfig& p = parsed->configs.parallel;
  EXPECT_EQ(p.num_layers_per_virtual_pipeline_stage, 1);
  EXPECT_EQ(p.microbatch_group_size_per_vp_stage, 3);
  EXPECT_EQ(p.decoder_first_pipeline_num_layers, 1);
  EXPECT_EQ(p.decoder_last_pipeline_num_layers, 1);
  auto v = parse_with({"--schedules-method", "dualpipev", "--dualpipev-dw-detach", "--num-virtual-stages-per-pipeline-rank", "2"});
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v->configs.parallel.dualpipev);
  EXPECT_TRUE(v->configs.parallel.dualpipev_dw_detach);
  EXPECT_EQ(v->configs.parallel.num_virtual_stages_per_pipeline_rank, 2);
  EXPECT_FALSE(parse_with({"--schedules-method", "zbv"}).ok());
  auto m = parse_with({"--use-multiparameter-pipeline-model-parallel", "--variable-seq-lengths"});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_TRUE(m->configs.parallel.multiparameter_pipeline);
  EXPECT_TRUE(m->configs.parallel.variable_seq_lengths);
}

TEST(Validate, PipelineRules) {
  // Uneven layers with the first/last counts, and every layout rule of PipelineLayout.
  auto parsed = parse_with({"--num-layers", "3", "--pipeline-model-parallel-size", "2", "--global-batch-size", "8"});
  ASSERT_TRUE(parsed.ok());
  Configs c = parsed->configs;
  Status s = validate_configs(c, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--decoder-first-pipeline-num-layers"), std::string::npos) << s.message();
  c = parsed->configs;
  c.parallel.decoder_first_pipeline_num_layers = 1;
  EXPECT_TRUE(validate_configs(c, 2).ok());
  // DualPipeV: untied embeddings, and 2P micro-batches per data-parallel rank.
  auto v = parse_with({"--num-layers", "4", "--pipeline-model-parallel-size", "2", "--schedules-method", "dualpipev",
                       "--global-batch-size", "8"});
  ASSERT_TRUE(v.ok());
  c = v->configs;
  s = validate_configs(c, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--untie-embeddings-and-output-weights"), std::string::npos) << s.message();
  c = v->configs;
  c.model.untie_embeddings_and_output_weights = true;
  EXPECT_TRUE(validate_configs(c, 2).ok());  // 4 micro-batches of 2 samples
  c = v->configs;
  c.model.untie_embeddings_and_output_weights = true;
  c.training.global_batch_size = 6;
  s = validate_configs(c, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("micro-batches per data-parallel rank, got 3"), std::string::npos) << s.message();
}

TEST(Arguments, HelpIsReported) {
  auto parsed = parse_arguments({"--help"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->help_requested);
  EXPECT_NE(parsed->help_text.find("--tensor-model-parallel-size"), std::string::npos);
}

TEST(Validate, DerivesMegatronDefaults) {
  auto parsed = parse_with({"--swiglu", "--hidden-size", "96", "--num-attention-heads", "4"});
  ASSERT_TRUE(parsed.ok());
  Configs c = parsed->configs;
  ASSERT_TRUE(validate_configs(c, 2).ok());
  EXPECT_EQ(c.model.ffn_hidden_size, 256);  // int((4*96*2/3)/64)*64
  EXPECT_EQ(c.model.kv_channels, 24);
  EXPECT_EQ(c.model.query_groups(), 4);
  EXPECT_EQ(c.training.global_batch_size, 4);  // micro 2 x dp 2
  EXPECT_EQ(c.model.padded_vocab_size, 0);  // not known before the tokenizer
  Configs with_vocab = parsed->configs;
  ASSERT_TRUE(validate_configs(with_vocab, 2, 50257).ok());
  EXPECT_EQ(with_vocab.model.vocab_size, 50257);
  EXPECT_EQ(with_vocab.model.padded_vocab_size, 50304);
}

TEST(Validate, NamesTheFlagsOfABrokenRule) {
  auto parsed = parse_with({"--tensor-model-parallel-size", "3"});
  ASSERT_TRUE(parsed.ok());
  Configs c = parsed->configs;
  Status s = validate_configs(c, 6);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--num-attention-heads (4) must be divisible by --tensor-model-parallel-size (3)"),
            std::string::npos)
      << s.message();
  c = parsed->configs;
  c.parallel.tensor_model_parallel_size = 2;
  s = validate_configs(c, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("world size (3)"), std::string::npos) << s.message();
  // A zero parallel size divided the head count (SIGFPE) before the sizes were checked.
  // (The command line refuses 0 already, flag_domains_test.cpp; configs can also come from code.)
  for (const char* flag : {"--tensor-model-parallel-size", "--context-parallel-size"}) {
    EXPECT_FALSE(parse_with({flag, "0"}).ok()) << flag;
    c = parsed->configs;
    c.parallel.tensor_model_parallel_size = 1;
    (std::string(flag) == "--tensor-model-parallel-size" ? c.parallel.tensor_model_parallel_size
                                                         : c.parallel.context_parallel_size) = 0;
    s = validate_configs(c, 2);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(std::string(flag) + " must be at least 1 (got 0)"), std::string::npos)
        << s.message();
  }
  c = parse_with({"--global-batch-size", "3"})->configs;
  EXPECT_FALSE(validate_configs(c, 1).ok());
  c = parse_with({"--lr-warmup-iters", "10"})->configs;
  EXPECT_FALSE(validate_configs(c, 1).ok());  // warmup not shorter than the decay
  c = parse_with({"--pipeline-model-parallel-size", "2"})->configs;
  EXPECT_TRUE(validate_configs(c, 2).ok());  // 1F1B
  c = parse_with({"--pipeline-model-parallel-size", "4"})->configs;
  s = validate_configs(c, 4);  // 2 layers over 4 stages
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--num-layers (2) must be divisible by --pipeline-model-parallel-size (4)"),
            std::string::npos)
      << s.message();
}

// Validation of configs parsed from `extra` on `world` ranks: the message, or "" when valid.
std::string validation_error(std::vector<std::string> extra, int world) {
  auto parsed = parse_with(std::move(extra));
  if (!parsed.ok()) return parsed.status().to_string();
  Configs c = parsed->configs;
  const Status s = validate_configs(c, world);
  return s.ok() ? "" : s.message();
}

// MindSpeed-LLM's checkpoint flags: --ckpt-format torch (Megatron's legacy files beside this
// engine's state) and its limits named; Megatron's distributed formats refused with the way out;
// --enable-hf2mg-convert needs a Hugging Face --load; --model-type-hf names a family the importer
// reads.
TEST(Arguments, CheckpointFormatAndHuggingFaceLoadFlags) {
  auto parsed = parse_with({"--ckpt-format", "torch"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_TRUE(parsed->configs.training.ckpt_format_torch);
  EXPECT_FALSE(parse_with({})->configs.training.ckpt_format_torch);
  EXPECT_EQ(validation_error({"--ckpt-format", "torch"}, 1), "");
  const auto refused = parse_with({"--ckpt-format", "torch_dist"});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "--ckpt-format torch_dist (Megatron's distributed checkpoint) is not "
                "written yet: use --ckpt-format torch"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(
      validation_error({"--ckpt-format", "torch", "--num-experts", "4", "--disable-bias-linear"}, 1)
          .find("--ckpt-format torch with a mixture-of-experts model"),
      std::string::npos);
  EXPECT_NE(
      validation_error({"--ckpt-format", "torch", "--num-layers", "4",
                        "--pipeline-model-parallel-size", "2", "--schedules-method", "dualpipev",
                        "--untie-embeddings-and-output-weights", "--global-batch-size", "8"},
                       2)
          .find("--ckpt-format torch with DualPipeV"),
      std::string::npos);
  EXPECT_NE(validation_error({"--enable-hf2mg-convert"}, 1)
                .find("--enable-hf2mg-convert needs --load to be a Hugging Face model directory "
                      "(config.json and "
                      "*.safetensors); --load is not given"),
            std::string::npos);
  const std::string golden = std::string(MS_SOURCE_DIR) + "/tests/golden/llama_tiny";
  EXPECT_EQ(validation_error(
                {"--enable-hf2mg-convert", "--load", golden, "--model-type-hf", "llama2"}, 1),
            "");
  EXPECT_NE(validation_error(
                {"--enable-hf2mg-convert", "--load", std::string(MS_SOURCE_DIR) + "/tests"}, 1)
                .find("is not one"),
            std::string::npos);
  EXPECT_NE(validation_error({"--model-type-hf", "deepseek3"}, 1)
                .find("--model-type-hf deepseek3: the Hugging Face importer reads llama2"),
            std::string::npos);
}

TEST(Arguments, ContextParallelFlags) {
  auto parsed = parse_with({"--context-parallel-size", "4", "--context-parallel-algo", "hybrid_cp_algo",
                            "--ulysses-degree-in-cp", "2", "--attention-mask-type", "general", "--cp-window-size", "1",
                            "--use-cp-send-recv-overlap", "--use-ulysses-allgather-kv",
                            "--use-fused-ring-attention-update"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  const ContextParallelConfig& cp = parsed->configs.parallel.cp;
  EXPECT_EQ(cp.algo, CpAlgo::kHybrid);
  EXPECT_EQ(cp.ulysses_degree, 2);
  EXPECT_TRUE(cp.general_mask);
  EXPECT_TRUE(cp.send_recv_overlap);
  EXPECT_TRUE(cp.ulysses_allgather_kv);
  EXPECT_TRUE(parsed->configs.training.use_fused_ring_attention_update);
  const ContextParallelConfig defaults = parse_with({})->configs.parallel.cp;
  EXPECT_EQ(defaults.algo, CpAlgo::kRing);  // MindSpeed's feature default megatron_cp_algo
  EXPECT_FALSE(defaults.general_mask);
  EXPECT_FALSE(parse_with({"--context-parallel-algo", "star"}).ok());
  EXPECT_FALSE(parse_with({"--attention-mask-type", "padding"}).ok());
}

TEST(Arguments, MixtureOfExpertsFlags) {
  auto parsed = parse_with({"--num-experts", "8", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "48",
                            "--moe-layer-freq", "[1,0]", "--moe-router-score-function", "sigmoid",
                            "--moe-router-num-groups", "4", "--moe-router-group-topk", "2",
                            "--moe-router-topk-scaling-factor", "2.5", "--moe-router-load-balancing-type",
                            "seq_aux_loss", "--moe-aux-loss-coeff", "0.01", "--moe-z-loss-coeff", "0.001",
                            "--moe-expert-capacity-factor", "1.25", "--moe-pad-expert-input-to-capacity",
                            "--moe-token-drop-policy", "position", "--moe-input-jitter-eps", "0.01",
                            "--moe-token-dispatcher-type", "alltoall", "--moe-grouped-gemm",
                            "--gemm-gradient-accumulation-fusion", "--use-fused-moe-token-permute-and-unpermute",
                            "--n-shared-experts", "2", "--shared-expert-gate", "--moe-shared-expert-overlap",
                            "--expert-model-parallel-size", "2", "--expert-tensor-parallel-size", "1",
                            "--moe-permutation-async-comm", "--moe-router-dtype", "fp32"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  const MoeConfig& m = parsed->configs.model.moe;
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.router_topk, 2);
  EXPECT_EQ(m.layer_pattern, (std::vector<int>{1, 0}));
  EXPECT_TRUE(m.is_moe_layer(0));
  EXPECT_FALSE(m.is_moe_layer(1));
  EXPECT_EQ(m.score_function, MoeScoreFunction::kSigmoid);
  EXPECT_EQ(m.router_num_groups, 4);
  EXPECT_EQ(m.router_group_topk, 2);
  EXPECT_FLOAT_EQ(m.router_topk_scaling_factor, 2.5f);
  EXPECT_EQ(m.load_balancing, MoeLoadBalancing::kSeqAuxLoss);
  EXPECT_FLOAT_EQ(m.aux_loss_coeff, 0.01f);
  EXPECT_FLOAT_EQ(m.z_loss_coeff, 0.001f);
  EXPECT_FLOAT_EQ(m.expert_capacity_factor, 1.25f);
  EXPECT_TRUE(m.pad_expert_input_to_capacity);
  EXPECT_EQ(m.drop_policy, MoeDropPolicy::kPosition);
  EXPECT_EQ(m.dispatcher, MoeDispatcher::kAllToAll);
  EXPECT_TRUE(m.grouped_gemm && m.gemm_gradient_accumulation_fusion && m.permute_fusion);
  // MindSpeed's --n-shared-experts k: k x the expert FFN size.
  EXPECT_EQ(m.shared_expert_intermediate_size, 96);
  EXPECT_TRUE(m.shared_expert_gate && m.shared_expert_overlap && m.permutation_async_comm);
  EXPECT_EQ(parsed->configs.parallel.expert_model_parallel_size, 2);
  EXPECT_EQ(parsed->configs.parallel.expert_tensor_parallel_size, 1);
  // --moe-layer-freq N: layers 0, N, 2N, ...
  auto every = parse_with({"--num-experts", "4", "--num-layers", "5", "--moe-layer-freq", "2"});
  ASSERT_TRUE(every.ok());
  EXPECT_EQ(every->configs.model.moe.layer_pattern, (std::vector<int>{1, 0, 1, 0, 1}));
  // The conversion both ways must agree.
  auto disagree = parse_with({"--num-experts", "4", "--moe-ffn-hidden-size", "48", "--n-shared-experts", "2",
                              "--moe-shared-expert-intermediate-size", "64"});
  ASSERT_FALSE(disagree.ok());
  EXPECT_NE(disagree.status().message().find("--n-shared-experts 2 means --moe-shared-expert-intermediate-size 96"),
            std::string::npos)
      << disagree.status().message();
  EXPECT_FALSE(parse_with({"--moe-layer-freq", "[1,2]", "--num-experts", "4"}).ok());
  EXPECT_FALSE(parse_with({"--moe-token-dispatcher-type", "flex"}).ok());
  EXPECT_FALSE(parse_with({"--gemm-gradient-accumulation-fusion"}).ok()) << "needs --moe-grouped-gemm";
}

TEST(Validate, MixtureOfExpertsRules) {
  const std::vector<std::string> moe = {"--num-experts", "4", "--disable-bias-linear", "--moe-token-dispatcher-type",
                                        "alltoall"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = moe;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  auto refused = [&](std::vector<std::string> extra, int world, const std::string& text) {
    const std::string e = validation_error(with(std::move(extra)), world);
    EXPECT_NE(e.find(text), std::string::npos) << "got: " << e;
  };
  EXPECT_EQ(validation_error(with({}), 1), "");
  EXPECT_EQ(validation_error(with({"--expert-model-parallel-size", "4"}), 4), "");
  EXPECT_EQ(validation_error(with({"--tensor-model-parallel-size", "2", "--sequence-parallel", "--expert-model-parallel-size",
                                   "2", "--moe-tp-extend-ep", "--moe-permutation-async-comm", "--moe-grouped-gemm",
                                   "--moe-token-dispatcher-type", "alltoall_seq"}),
                              4),
            "");
  refused({"--expert-model-parallel-size", "3"}, 3, "--num-experts (4) must be a multiple of --expert-model-parallel-size (3)");
  refused({"--tensor-model-parallel-size", "2"}, 2, "needs --sequence-parallel");
  refused({"--moe-router-topk", "5"}, 1, "--moe-router-topk (5) must be in [1, --num-experts (4)]");
  refused({"--moe-router-topk", "1"}, 1, "needs --moe-router-pre-softmax");
  EXPECT_NE(validation_error({"--num-experts", "4"}, 1).find("add --disable-bias-linear"), std::string::npos);
  refused({"--moe-router-group-topk", "2"}, 1, "needs both --moe-router-num-groups and --moe-router-group-topk");
  refused({"--moe-router-num-groups", "3", "--moe-router-group-topk", "1"}, 1, "divisible by --moe-router-num-groups (3)");
  refused({"--moe-router-load-balancing-type", "sinkhorn", "--moe-aux-loss-coeff", "0.1"}, 1, "sinkhorn does not take");
  refused({"--moe-expert-capacity-factor", "1", "--moe-token-dispatcher-type", "allgather"}, 1,
          "--moe-expert-capacity-factor needs --moe-token-dispatcher-type alltoall");
  refused({"--moe-pad-expert-input-to-capacity"}, 1, "needs --moe-expert-capacity-factor");
  refused({"--moe-shared-expert-overlap"}, 1, "--moe-shared-expert-overlap needs shared experts");
  refused({"--moe-shared-expert-intermediate-size", "32", "--moe-shared-expert-overlap", "--moe-token-dispatcher-type",
           "allgather"},
          1, "only works with --moe-token-dispatcher-type alltoall");
  EXPECT_EQ(validation_error(with({"--moe-router-enable-expert-bias", "--moe-router-score-function", "sigmoid"}), 1), "");
  refused({"--moe-router-enable-expert-bias"}, 1, "needs --moe-router-score-function sigmoid");
  // MindSpeed's feature rules.
  refused({"--tensor-model-parallel-size", "2", "--sequence-parallel", "--expert-model-parallel-size", "2",
           "--moe-tp-extend-ep"},
          4, "--moe-tp-extend-ep needs --moe-permutation-async-comm, --moe-grouped-gemm");
  refused({"--moe-alltoall-overlap-comm"}, 1, "--moe-alltoall-overlap-comm needs --expert-model-parallel-size > 1");
  refused({"--moe-allgather-overlap-comm", "--expert-model-parallel-size", "2", "--moe-grouped-gemm"}, 2,
          "--moe-allgather-overlap-comm needs --moe-token-dispatcher-type allgather");
  refused({"--moe-token-dispatcher-type", "alltoall_seq", "--moe-permute-fusion"}, 1,
          "--moe-permute-fusion does not work with the alltoall_seq dispatcher");
  EXPECT_NE(validation_error({"--expert-model-parallel-size", "2"}, 2).find("needs --num-experts"), std::string::npos);
  refused({"--moe-layer-freq", "[1,0,1]"}, 1, "--moe-layer-freq lists 3 layers but --num-layers is 2");
}

TEST(Arguments, RecomputeFlags) {
  auto full = parse_with({"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers",
                          "1", "--recompute-activation-function", "--recompute-activation-function-num-layers", "1",
                          "--recompute-norm"});
  ASSERT_TRUE(full.ok()) << full.status().message();
  const RecomputeConfig& rc = full->configs.model.recompute;
  EXPECT_TRUE(rc.full());
  EXPECT_EQ(rc.method, RecomputeMethod::kBlock);
  EXPECT_EQ(rc.num_layers, 1);
  EXPECT_TRUE(rc.activation_function);
  EXPECT_EQ(rc.activation_function_num_layers, 1);
  EXPECT_TRUE(rc.norm);
  EXPECT_EQ(rc.norm_num_layers, -1);
  // --recompute-activations is selective, and core_attn is the default module.
  auto sel = parse_with({"--recompute-activations"});
  ASSERT_TRUE(sel.ok()) << sel.status().message();
  EXPECT_TRUE(sel->configs.model.recompute.selective());
  EXPECT_TRUE(sel->configs.model.recompute.modules.core_attn);
  EXPECT_FALSE(sel->configs.model.recompute.modules.mlp);
  auto mods = parse_with({"--recompute-granularity", "selective", "--recompute-modules", "layernorm", "mlp"});
  ASSERT_TRUE(mods.ok()) << mods.status().message();
  EXPECT_FALSE(mods->configs.model.recompute.modules.core_attn);
  EXPECT_TRUE(mods->configs.model.recompute.modules.layernorm);
  EXPECT_TRUE(mods->configs.model.recompute.modules.mlp);
  // Megatron's deprecated --moe-layer-recompute: selective + moe.
  auto moe = parse_with({"--moe-layer-recompute"});
  ASSERT_TRUE(moe.ok()) << moe.status().message();
  EXPECT_TRUE(moe->configs.model.recompute.selective());
  EXPECT_TRUE(moe->configs.model.recompute.modules.moe);
  auto message = [](std::vector<std::string> extra) {
    auto p = parse_with(std::move(extra));
    return p.ok() ? std::string() : p.status().message();
  };
  EXPECT_NE(message({"--recompute-granularity", "partial"}).find("--recompute-granularity"), std::string::npos);
  EXPECT_NE(message({"--recompute-granularity", "selective", "--recompute-modules", "attn"})
                .find("'attn' is not a module; choose from core_attn"),
            std::string::npos);
  EXPECT_NE(message({"--recompute-granularity", "selective", "--recompute-modules", "mla_up_proj"})
                .find("multi-latent attention"),
            std::string::npos);
  EXPECT_NE(message({"--recompute-modules", "mlp"}).find("needs --recompute-granularity selective"),
            std::string::npos);
  EXPECT_NE(message({"--recompute-granularity", "full", "--moe-layer-recompute"})
                .find("Do not set --moe-layer-recompute with full"),
            std::string::npos);
  auto ripipe = parse_with({"--recompute-in-bubble"});
  ASSERT_TRUE(ripipe.ok()) << ripipe.status().message();
  EXPECT_TRUE(ripipe->configs.model.recompute.in_bubble);
}

TEST(Validate, RecomputeRules) {
  auto refused = [&](std::vector<std::string> extra, int world, const std::string& text) {
    const std::string e = validation_error(std::move(extra), world);
    EXPECT_NE(e.find(text), std::string::npos) << "got: " << e;
  };
  EXPECT_EQ(validation_error({"--recompute-granularity", "full", "--recompute-method", "uniform",
                              "--recompute-num-layers", "1"},
                             1),
            "");
  EXPECT_EQ(validation_error({"--tensor-model-parallel-size", "2", "--recompute-granularity", "full",
                              "--recompute-method", "block", "--recompute-num-layers", "1",
                              "--distribute-saved-activations"},
                             2),
            "");
  refused({"--recompute-granularity", "full"}, 1, "needs --recompute-method block or uniform (Megatron's rule)");
  refused({"--recompute-granularity", "full", "--recompute-method", "block"}, 1, "needs --recompute-num-layers");
  refused({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "0"}, 1,
          "uniform needs --recompute-num-layers >= 1");
  refused({"--recompute-activations", "--recompute-method", "block"}, 1,
          "--recompute-method is not supported with selective");
  refused({"--recompute-activations", "--recompute-num-layers", "1"}, 1,
          "--recompute-num-layers must not be given with selective");
  refused({"--recompute-method", "block"}, 1, "--recompute-method needs --recompute-granularity full");
  refused({"--recompute-num-layers", "1"}, 1, "--recompute-num-layers needs --recompute-granularity full");
  refused({"--recompute-granularity", "selective", "--recompute-modules", "moe_act"}, 1,
          "moe_act is only supported with --moe-grouped-gemm");
  refused({"--recompute-granularity", "selective", "--recompute-modules", "moe"}, 1,
          "need a mixture-of-experts model");
  refused({"--context-parallel-size", "2", "--recompute-activations"}, 2, "core_attn with --context-parallel-size");
  refused({"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "1",
           "--distribute-saved-activations"},
          1, "needs --tensor-model-parallel-size > 1");
  refused({"--tensor-model-parallel-size", "2", "--recompute-activations", "--distribute-saved-activations"}, 2,
          "only for full recompute granularity");
  refused({"--tensor-model-parallel-size", "2", "--sequence-parallel", "--recompute-granularity", "full",
           "--recompute-method", "block", "--recompute-num-layers", "1", "--distribute-saved-activations"},
          2, "must be off with --sequence-parallel");
  refused({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1",
           "--enable-recompute-layers-per-pp-rank"},
          1, "--enable-recompute-layers-per-pp-rank needs --recompute-granularity full --recompute-method block");
  refused({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1",
           "--recompute-activation-function"},
          1, "--recompute-activation-function can be combined with full recompute only with --recompute-method block");
  refused({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1",
           "--recompute-norm"},
          1, "--recompute-norm can be combined with full recompute only with --recompute-method block");
  refused({"--recompute-norm-num-layers", "1"}, 1, "--recompute-norm-num-layers needs --recompute-norm");
  // MindSpeed's ripipe: virtual stages; in advance needs full block recompute, in the bubble none.
  const std::vector<std::string> vpp = {"--num-layers", "4", "--pipeline-model-parallel-size", "2",
                                        "--num-layers-per-virtual-pipeline-stage", "1", "--global-batch-size", "8"};
  auto vpp_with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = vpp;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  EXPECT_EQ(validation_error(vpp_with({"--recompute-in-bubble"}), 2), "");
  EXPECT_EQ(validation_error(vpp_with({"--recompute-in-advance", "--recompute-granularity", "full", "--recompute-method",
                                       "block", "--recompute-num-layers", "1"}),
                             2),
            "");
  refused({"--recompute-in-bubble"}, 1, "--recompute-in-bubble needs the interleaved schedule");
  refused(vpp_with({"--recompute-in-advance"}), 2, "--recompute-in-advance needs full recompute with --recompute-method block");
  refused(vpp_with({"--recompute-in-advance", "--recompute-granularity", "full", "--recompute-method", "uniform",
                    "--recompute-num-layers", "1"}),
          2, "--recompute-in-advance needs full recompute with --recompute-method block");
  refused(vpp_with({"--recompute-in-bubble", "--recompute-activations"}), 2,
          "--recompute-in-bubble recomputes in the bubbles by itself");
  refused(vpp_with({"--recompute-in-bubble", "--recompute-in-advance"}), 2, "cannot both be on");
  // MindSpeed's --swap-attention: with flash attention; --recompute-num-layers is then its MLP count.
  EXPECT_EQ(validation_error({"--use-flash-attn", "--swap-attention", "--recompute-num-layers", "1"}, 1), "");
  EXPECT_EQ(validation_error({"--use-flash-attn", "--swap-attention", "--swap-modules", "self_attention"}, 1), "");
  refused({"--swap-attention"}, 1, "--swap-attention needs --use-flash-attn");
  refused({"--use-flash-attn", "--swap-attention", "--recompute-granularity", "full", "--recompute-method", "block",
           "--recompute-num-layers", "1"},
          1, "--swap-attention replaces full recompute");
  refused({"--use-flash-attn", "--swap-attention", "--swap-modules", "attention"}, 1,
          "--swap-modules: 'attention' is not a module");
  refused({"--recompute-activation-function", "--recompute-activation-function-num-layers", "3"}, 1,
          "-num-layers 3 is more than --num-layers 2");
}

TEST(Validate, CustomFsdpRules) {
  auto refused = [&](std::vector<std::string> extra, int world, const std::string& text) {
    const std::string e = validation_error(std::move(extra), world);
    EXPECT_NE(e.find(text), std::string::npos) << "got: " << e;
  };
  const std::vector<std::string> zero2 = {"--use-custom-fsdp", "--use-distributed-optimizer",
                                          "--data-parallel-sharding-strategy", "optim_grads",
                                          "--no-gradient-accumulation-fusion"};
  EXPECT_EQ(validation_error(zero2, 2), "");
  {  // optim_grads turns the overlapped reduction on; no_shard turns the optimizer sharding off.
    auto parsed = parse_with(zero2);
    ASSERT_TRUE(parsed.ok());
    Configs c = parsed->configs;
    ASSERT_TRUE(validate_configs(c, 2).ok());
    EXPECT_TRUE(c.parallel.overlap_grad_reduce);
    EXPECT_TRUE(c.parallel.shard_gradients());
    auto no_shard = parse_with({"--use-custom-fsdp", "--use-distributed-optimizer"});
    ASSERT_TRUE(no_shard.ok());
    Configs d = no_shard->configs;
    ASSERT_TRUE(validate_configs(d, 2).ok());
    EXPECT_FALSE(d.parallel.use_distributed_optimizer);
    EXPECT_FALSE(d.parallel.shard_gradients());
  }
  refused({"--use-custom-fsdp"}, 2, "only supported with distributed optimizer");
  refused({"--data-parallel-sharding-strategy", "optim"}, 2, "needs --use-custom-fsdp");
  refused({"--use-custom-fsdp", "--use-distributed-optimizer", "--data-parallel-sharding-strategy", "optim_grads"}, 2,
          "add --no-gradient-accumulation-fusion");
  {  // optim_grads_params: parameters sharded too, gathers overlapped.
    auto parsed = parse_with({"--use-custom-fsdp", "--use-distributed-optimizer", "--data-parallel-sharding-strategy",
                              "optim_grads_params", "--no-gradient-accumulation-fusion"});
    ASSERT_TRUE(parsed.ok());
    Configs c = parsed->configs;
    ASSERT_TRUE(validate_configs(c, 2).ok());
    EXPECT_TRUE(c.parallel.shard_parameters());
    EXPECT_TRUE(c.parallel.shard_gradients());
    EXPECT_TRUE(c.parallel.overlap_param_gather);
  }
  refused({"--use-custom-fsdp", "--use-distributed-optimizer", "--data-parallel-sharding-strategy",
           "optim_grads_params"},
          2, "add --no-gradient-accumulation-fusion");
  refused({"--use-custom-fsdp", "--use-distributed-optimizer", "--pipeline-model-parallel-size", "2"}, 2,
          "does not work with pipeline parallelism");
}

TEST(Validate, OptimizerMemoryRules) {
  auto refused = [&](std::vector<std::string> extra, int world, const std::string& text) {
    const std::string e = validation_error(std::move(extra), world);
    EXPECT_NE(e.find(text), std::string::npos) << "got: " << e;
  };
  EXPECT_EQ(validation_error({"--bf16", "--reuse-fp32-param", "--o2-optimizer"}, 1), "");
  EXPECT_EQ(validation_error({"--bf16", "--use-distributed-optimizer", "--swap-optimizer", "--swap-optimizer-times", "4"}, 2),
            "");
  EXPECT_EQ(validation_error({"--optimizer-selection", "fused_ema_adamw", "--ema-decay", "0.99"}, 1), "");
  {  // The flags reach the optimizer's config.
    auto parsed = parse_with({"--bf16", "--use-distributed-optimizer", "--swap-optimizer", "--swap-optimizer-times", "4"});
    ASSERT_TRUE(parsed.ok());
    EXPECT_TRUE(parsed->configs.optimizer.swap_optimizer);
    EXPECT_EQ(parsed->configs.optimizer.swap_optimizer_times, 4);
    auto ema = parse_with({"--optimizer-selection", "fused_ema_adamw", "--ema-decay", "0.99"});
    ASSERT_TRUE(ema.ok());
    EXPECT_TRUE(ema->configs.optimizer.ema());
    EXPECT_FLOAT_EQ(ema->configs.optimizer.ema_decay, 0.99f);
  }
  refused({"--reuse-fp32-param"}, 1, "--reuse-fp32-param needs --bf16");
  refused({"--o2-optimizer"}, 1, "--o2-optimizer needs --bf16");
  refused({"--bf16", "--reuse-fp32-param", "--optimizer-selection", "fused_ema_adamw"}, 1, "fused_ema_adamw");
  refused({"--bf16", "--reuse-fp32-param", "--use-distributed-optimizer", "--swap-optimizer"}, 2,
          "--reuse-fp32-param does not work with --swap-optimizer");
  refused({"--bf16", "--reuse-fp32-param", "--use-custom-fsdp", "--use-distributed-optimizer"}, 2, "--use-custom-fsdp");
  refused({"--swap-optimizer"}, 1, "--swap-optimizer needs --use-distributed-optimizer");
  refused({"--use-distributed-optimizer", "--swap-optimizer", "--optimizer-selection", "fused_ema_adamw"}, 2,
          "needs --optimizer-selection fused_adamw");
  refused({"--bf16", "--use-distributed-optimizer", "--swap-optimizer", "--o2-optimizer"}, 2, "use one of them");
  refused({"--optimizer-selection", "adamw"}, 1, "--optimizer-selection");
  EXPECT_EQ(validation_error({"--bf16", "--no-gradient-accumulation-fusion", "--o2-gradient", "--o2-optimizer"}, 1), "");
  {
    auto parsed = parse_with({"--bf16", "--no-gradient-accumulation-fusion", "--o2-gradient"});
    ASSERT_TRUE(parsed.ok());
    EXPECT_TRUE(parsed->configs.optimizer.o2_gradient);
  }
  refused({"--o2-gradient", "--no-gradient-accumulation-fusion"}, 1, "--o2-gradient needs --bf16");
  refused({"--bf16", "--o2-gradient"}, 1, "--o2-gradient needs --no-gradient-accumulation-fusion");
  refused({"--bf16", "--no-gradient-accumulation-fusion", "--o2-gradient", "--use-custom-fsdp",
           "--use-distributed-optimizer"},
          2, "--o2-gradient does not work with --use-custom-fsdp");
}

// The memory check's lower bound counts the swap optimizer's resident slices: up to three of
// its T slices of fp32 master + moments (12 bytes per parameter). A model of about M/12
// parameters on this machine's M bytes fits with 1024 slices (6 + 36/1024 bytes per
// parameter) and is refused with 1 slice (6 + 36).
TEST(Validate, MemoryCheckCountsTheSwapOptimizersResidentSlices) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) GTEST_SKIP() << "no physical memory size on this system";
  const int64_t memory = static_cast<int64_t>(pages) * page;
  const int64_t h = 4096, per_layer = h * 3 * h + h * h + 2 * h * 4 * h;  // qkv, proj, fc1 + fc2
  const int64_t layers = memory / (12 * per_layer) + 1;
  auto run = [&](const char* slices) {
    return validation_error({"--num-layers", std::to_string(layers), "--hidden-size", std::to_string(h),
                             "--num-attention-heads", "32", "--bf16", "--use-distributed-optimizer",
                             "--swap-optimizer", "--swap-optimizer-times", slices},
                            1);
  };
  EXPECT_EQ(run("1024"), "");
  EXPECT_NE(run("1").find("this model needs at least"), std::string::npos) << run("1");
}

TEST(Validate, ContextParallelRules) {
  // seq 32, 4 heads (base_args).
  EXPECT_EQ(validation_error({"--context-parallel-size", "2"}, 2), "");
  EXPECT_EQ(validation_error({"--context-parallel-size", "4", "--context-parallel-algo", "ulysses_cp_algo"}, 4), "");
  EXPECT_EQ(validation_error({"--context-parallel-size", "4", "--context-parallel-algo", "hybrid_cp_algo",
                              "--ulysses-degree-in-cp", "2", "--cp-window-size", "1"},
                             8),
            "");
  EXPECT_NE(validation_error({"--context-parallel-size", "4", "--seq-length", "20", "--max-position-embeddings", "20"}, 4)
                .find("--seq-length (20) must be divisible by 2 x --context-parallel-size (8)"),
            std::string::npos);
  // Unaligned Ulysses takes any length; the all-gather of keys and values needs equal shares.
  EXPECT_EQ(validation_error({"--context-parallel-size", "4", "--context-parallel-algo", "ulysses_cp_algo",
                              "--seq-length", "30", "--max-position-embeddings", "30"},
                             4),
            "");
  EXPECT_NE(validation_error({"--context-parallel-size", "4", "--context-parallel-algo", "ulysses_cp_algo",
                              "--use-ulysses-allgather-kv", "--seq-length", "30", "--max-position-embeddings", "30"},
                             4)
                .find("--use-ulysses-allgather-kv needs --seq-length (30) divisible"),
            std::string::npos);
  EXPECT_NE(validation_error({"--context-parallel-size", "8", "--context-parallel-algo", "ulysses_cp_algo",
                              "--seq-length", "64", "--max-position-embeddings", "64"},
                             8)
                .find("--num-attention-heads (4) must be divisible by --tensor-model-parallel-size x the Ulysses "
                      "degree (1 x 8)"),
            std::string::npos);
  EXPECT_NE(validation_error({"--context-parallel-size", "4", "--context-parallel-algo", "hybrid_cp_algo",
                              "--ulysses-degree-in-cp", "4"},
                             4)
                .find("hybrid_cp_algo needs"),
            std::string::npos);
  EXPECT_NE(validation_error({"--context-parallel-size", "4", "--cp-window-size", "3"}, 4).find("--cp-window-size (3)"),
            std::string::npos);
  EXPECT_NE(validation_error({"--context-parallel-size", "4", "--cp-window-size", "4"}, 4).find("--cp-window-size (4)"),
            std::string::npos);
  EXPECT_NE(validation_error({"--context-parallel-size", "2", "--ulysses-degree-in-cp", "2"}, 2)
                .find("--ulysses-degree-in-cp is for --context-parallel-algo hybrid_cp_algo"),
            std::string::npos);
  EXPECT_NE(validation_error({"--context-parallel-size", "2", "--use-ulysses-allgather-kv"}, 2)
                .find("--use-ulysses-allgather-kv is for ulysses_cp_algo or hybrid_cp_algo"),
            std::string::npos);
  EXPECT_NE(validation_error({"--context-parallel-size", "2", "--tensor-model-parallel-size", "2",
                              "--sequence-parallel", "--seq-length", "34", "--max-position-embeddings", "34",
                              "--attention-mask-type", "general"},
                             4)
                .find("divisible by --context-parallel-size x --tensor-model-parallel-size (4)"),
            std::string::npos);
}

TEST(Arguments, AlibiFlags) {
  auto parsed = parse_with({"--position-embedding-type", "alibi", "--alibi-fusion-attn-type", "0",
                            "--alibi-diagonal-opposite"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  const Configs& c = parsed->configs;
  EXPECT_EQ(c.model.position_embedding_type, PositionEmbeddingType::kAlibi);
  EXPECT_EQ(c.model.alibi_fusion_attn_type, 0);
  EXPECT_TRUE(c.model.alibi_diagonal_opposite);
  EXPECT_TRUE(c.training.use_flash_attn);  // the fusion type forces fusion attention v2 = flash
  EXPECT_TRUE(parse_with({"--use-fusion-attn-v2"})->configs.training.use_flash_attn);
  EXPECT_EQ(validation_error({"--position-embedding-type", "alibi", "--square-alibi-mask", "--fill-neg-inf"}, 1), "");
  EXPECT_NE(validation_error({"--alibi-fusion-attn-type", "2"}, 1).find("need --position-embedding-type alibi"),
            std::string::npos);
  EXPECT_NE(validation_error({"--position-embedding-type", "alibi", "--alibi-fusion-attn-type", "1"}, 1)
                .find("--alibi-fusion-attn-type 1 is not released"),
            std::string::npos);
}

TEST(Arguments, AttentionWindowFlags) {
  EXPECT_EQ(parse_with({})->configs.model.attention_window, 0);
  EXPECT_EQ(parse_with({"--sparse-mode", "2", "--pre-tockens", "8"})->configs.model.attention_window, 0);
  EXPECT_EQ(parse_with({"--sparse-mode", "0", "--pre-tockens", "8"})->configs.model.attention_window, 8);
  EXPECT_EQ(parse_with({"--sparse-mode", "0"})->configs.model.attention_window, 65536);  // MindSpeed's default
  EXPECT_EQ(parse_with({"--window-size", "16"})->configs.model.attention_window, 16);
  EXPECT_EQ(parse_with({"--window-size", "(16, 0)"})->configs.model.attention_window, 16);
  auto refused = [](std::vector<std::string> extra, const std::string& says) {
    auto parsed = parse_with(std::move(extra));
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.status().message().find(says), std::string::npos) << parsed.status().message();
  };
  refused({"--sparse-mode", "3"}, "--sparse-mode 3: the model's flash attention takes 0");
  refused({"--sparse-mode", "0", "--next-tockens", "4"}, "--next-tockens 4 would let a token see later tokens");
  refused({"--window-size", "16,4"}, "the GPT model is causal");
  refused({"--window-size", "many"}, "--window-size \"many\"");
  refused({"--window-size", "16", "--sparse-mode", "0", "--pre-tockens", "8"}, "give one");
}

}  // namespace
}  // namespace mindspeed

namespace mindspeed {
namespace {

// Sample-based training: the base arguments with --train-samples instead of --train-iters.
std::string sample_validation_error(std::vector<std::string> extra, int world, Configs* out = nullptr) {
  std::vector<std::string> args = base_args();
  const auto at = std::find(args.begin(), args.end(), "--train-iters");
  args.erase(at, at + 2);
  args.insert(args.end(), extra.begin(), extra.end());
  auto parsed = parse_arguments(args);
  if (!parsed.ok()) return parsed.status().to_string();
  Configs c = parsed->configs;
  const Status s = validate_configs(c, world);
  if (out != nullptr) *out = c;
  return s.ok() ? "" : s.message();
}

// Megatron's rules for iteration- against sample-based training (arguments.py), and the
// iteration count derived from --train-samples (training.py update_train_iters).
TEST(Validate, SampleBasedTrainingRules) {
  Configs c;
  EXPECT_EQ(sample_validation_error({"--train-samples", "100", "--global-batch-size", "8"}, 2, &c), "");
  EXPECT_EQ(c.training.train_iters, 12);  // 100 // 8
  EXPECT_EQ(sample_validation_error({"--train-samples", "100", "--global-batch-size", "12", "--micro-batch-size", "1",
                                     "--rampup-batch-size", "4", "2", "40", "--lr-warmup-samples", "8",
                                     "--lr-decay-samples", "90"},
                                    2, &c),
            "");
  EXPECT_EQ(c.training.train_iters, 11);  // Megatron's calculator (rampup_vectors.txt, even_increments)
  ASSERT_TRUE(c.training.rampup_batch_size.has_value());
  EXPECT_EQ(c.training.rampup_batch_size->rampup_samples, 40);
  EXPECT_EQ(c.optimizer.lr_warmup_samples, 8);
  EXPECT_EQ(c.optimizer.lr_decay_samples, 90);
  auto refused = [](const std::string& error, const std::string& text) {
    EXPECT_NE(error.find(text), std::string::npos) << "got: " << error;
  };
  refused(sample_validation_error({}, 1), "--train-iters or --train-samples is required");
  refused(validation_error({"--train-samples", "100"}, 1), "give --train-iters or --train-samples, not both");
  refused(validation_error({"--lr-decay-samples", "100"}, 1), "--lr-decay-samples is for sample-based training");
  refused(validation_error({"--lr-warmup-samples", "4"}, 1), "--lr-warmup-samples is for sample-based training");
  // Megatron core_v0.12 asserts against a ramp-up with --train-iters; its GPT-3 example script
  // combines them, and here they run (the batch ramps by consumed samples).
  EXPECT_EQ(validation_error({"--rampup-batch-size", "2", "2", "10", "--global-batch-size", "8"}, 1), "");
  refused(validation_error({"--rampup-batch-size", "3", "2", "10", "--global-batch-size", "8"}, 1), "--rampup-batch-size");
  refused(sample_validation_error({"--train-samples", "100", "--lr-decay-iters", "5"}, 1),
          "--lr-decay-iters is for iteration-based training");
  refused(sample_validation_error({"--train-samples", "100", "--lr-warmup-iters", "2"}, 1),
          "--lr-warmup-iters is for iteration-based training");
  refused(sample_validation_error({"--train-samples", "100", "--lr-warmup-samples", "4", "--lr-warmup-fraction", "0.1"}, 1),
          "give --lr-warmup-fraction or --lr-warmup-samples, not both");
  refused(sample_validation_error({"--train-samples", "100", "--lr-warmup-samples", "100"}, 1),
          "must be shorter than --lr-decay-samples");
  refused(sample_validation_error({"--train-samples", "100", "--lr-decay-style", "WSD"}, 1),
          "needs --lr-wsd-decay-samples");
  refused(sample_validation_error({"--train-samples", "1", "--global-batch-size", "4"}, 1),
          "less than one global batch");
  refused(sample_validation_error({"--train-samples", "100", "--rampup-batch-size", "4", "2"}, 1),
          "--rampup-batch-size takes three numbers");
  refused(sample_validation_error({"--train-samples", "100", "--global-batch-size", "8", "--rampup-batch-size", "4",
                                   "3", "40"},
                                  1),
          "is not divisible by the increment 3");
  // --decrease-batch-size-if-needed: a batch micro x dp does not divide runs rounded down.
  refused(validation_error({"--global-batch-size", "6", "--micro-batch-size", "4"}, 1), "must be divisible");
  EXPECT_EQ(validation_error({"--global-batch-size", "6", "--micro-batch-size", "4", "--decrease-batch-size-if-needed"},
                             1),
            "");
  refused(validation_error({"--global-batch-size", "1", "--micro-batch-size", "2", "--decrease-batch-size-if-needed"},
                           1),
          "no micro-batch");
}

}  // namespace
}  // namespace mindspeed

namespace mindspeed {
namespace {

// Megatron's implementation selectors and launch-environment flags (issue 15): each mapped onto
// this engine's kernels, or refused with the rule.
TEST(Arguments, MegatronSelectorsAndLaunchFlags) {
  auto parsed = parse_with({"--attention-backend", "fused", "--no-bias-gelu-fusion", "--no-bias-swiglu-fusion",
                            "--no-bias-dropout-fusion", "--no-rope-fusion", "--no-masked-softmax-fusion",
                            "--no-persist-layer-norm", "--distributed-backend", "gloo", "--ai-framework", "mindspore",
                            "--num-workers", "8", "--timing-log-level", "0", "--log-params-norm",
                            "--log-num-zeros-in-grad", "--position-embedding-type", "rope", "--no-position-embedding"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  const Configs& c = parsed->configs;
  EXPECT_EQ(c.training.attention_backend, AttentionBackend::kFused);
  EXPECT_TRUE(c.training.use_flash_attn);  // fused attention is the flash kernel here
  EXPECT_FALSE(c.training.fusion.bias_gelu);
  EXPECT_FALSE(c.training.fusion.bias_swiglu);
  EXPECT_FALSE(c.training.fusion.bias_dropout);
  EXPECT_FALSE(c.training.fusion.rope);
  EXPECT_FALSE(c.training.fusion.masked_softmax);
  EXPECT_FALSE(c.training.fusion.persist_layer_norm);
  EXPECT_TRUE(c.logging.log_params_norm);
  EXPECT_TRUE(c.logging.log_num_zeros_in_grad);
  EXPECT_EQ(c.model.position_embedding_type, PositionEmbeddingType::kRope);
  // What the launch flags mean here is logged at start.
  ASSERT_EQ(parsed->notes.size(), 3u);
  EXPECT_NE(parsed->notes[0].find("--distributed-backend gloo: MPI carries"), std::string::npos);
  EXPECT_NE(parsed->notes[1].find("--ai-framework mindspore"), std::string::npos);
  EXPECT_NE(parsed->notes[2].find("--num-workers 8"), std::string::npos);
  EXPECT_TRUE(parse_with({})->notes.empty());
  const Configs defaults = parse_with({})->configs;
  EXPECT_EQ(defaults.training.attention_backend, AttentionBackend::kUnset);
  EXPECT_TRUE(defaults.training.fusion.bias_gelu && defaults.training.fusion.masked_softmax);
  EXPECT_EQ(parse_with({"--attention-backend", "unfused"})->configs.training.attention_backend,
            AttentionBackend::kUnfused);
  EXPECT_TRUE(parse_with({"--attention-backend", "auto"})->configs.training.use_flash_attn);

  auto refused = [](std::vector<std::string> extra, const std::string& text) {
    auto p = parse_with(std::move(extra));
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_NE(p.status().to_string().find(text), std::string::npos) << p.status().to_string();
  };
  refused({"--attention-backend", "local"}, "only supported with --spec local");
  refused({"--attention-backend", "unfused", "--use-flash-attn"}, "contradicts --use-flash-attn");
  refused({"--attention-backend", "unfused", "--context-parallel-size", "2"}, "does not work with --context-parallel");
  refused({"--attention-backend", "sdpa"}, "--attention-backend");
  refused({"--no-bias-swiglu-fusion", "--use-fused-swiglu"}, "contradicts --use-fused-swiglu");
  refused({"--no-rope-fusion", "--use-fused-rotary-pos-emb"}, "contradicts --use-fused-rotary-pos-emb");
  refused({"--no-position-embedding"}, "--no-position-embedding is deprecated, use --position-embedding-type");
  refused({"--timing-log-level", "1"}, "--timing-log-level 1");
  refused({"--distributed-backend", "mpi"}, "--distributed-backend");
  refused({"--ai-framework", "jax"}, "--ai-framework");
}

// MindSpeed's CoC (--use-ascend-coc, script mode): the chunk count the layers get, MindSpeed's
// mode rules, its choices and constraints refused by name, and what the flags do logged at start;
// MC2's (--use-ascend-mc2) constraints.
TEST(Validate, ComputeCommunicationOverlapRules) {
  auto chunks = [](std::vector<std::string> extra, int world) {
    auto parsed = parse_with(std::move(extra));
    EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();
    Configs c = parsed->configs;
    const Status s = validate_configs(c, world);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return c.parallel.coc_chunks();
  };
  const std::vector<std::string> tp2 = {"--tensor-model-parallel-size", "2"};
  auto with_tp2 = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = tp2;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  EXPECT_EQ(chunks(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "4"}), 2), 4);
  EXPECT_EQ(
      chunks(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "8", "--sequence-parallel"}), 2),
      8);
  EXPECT_EQ(chunks(with_tp2({"--coc-parallel-num", "4"}), 2),
            1);  // without --use-ascend-coc: nothing
  EXPECT_EQ(chunks(with_tp2({"--use-ascend-coc"}), 2),
            1);  // auto mode, one chunk: the original layers
  EXPECT_EQ(chunks(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "4", "--coc-mode", "0"}), 2),
            1);
  EXPECT_EQ(chunks(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "4", "--coc-mode", "1"}), 2),
            1);
  EXPECT_EQ(chunks(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "2", "--coc-mode", "2"}), 2),
            2);
  EXPECT_EQ(chunks({"--use-ascend-coc", "--coc-parallel-num", "4"}, 1),
            1);  // one tensor-parallel rank

  auto refused = [&](std::vector<std::string> extra, int world, const std::string& text) {
    const std::string e = validation_error(std::move(extra), world);
    EXPECT_NE(e.find(text), std::string::npos) << "got: " << e;
  };
  refused(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "3"}), 2,
          "--coc-parallel-num must be 1, 2, 4 or 8");
  refused(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "16"}), 2, "--coc-parallel-num");
  refused(with_tp2({"--use-ascend-coc", "--coc-mode", "3"}), 2, "--coc-mode");
  // M = 32 tokens x 2 samples / 2 ranks = 32 rows divide into 8 chunks; with --micro-batch-size 1
  // and --seq-length 12, 12 / 2 = 6 rows do not divide into 4.
  refused(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "4", "--sequence-parallel",
                    "--seq-length", "12", "--max-position-embeddings", "12", "--micro-batch-size",
                    "1"}),
          2, "= 6) into --coc-parallel-num 4 chunks: M must be divisible by it");
  refused(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "2", "--num-experts", "4",
                    "--disable-bias-linear", "--sequence-parallel", "--moe-token-dispatcher-type",
                    "alltoall"}),
          2, "--use-ascend-coc does not apply to MoE models");
  refused(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "2", "--variable-seq-lengths"}), 2,
          "not with --variable-seq-lengths");
  // MC2: sequence-parallel tensor parallelism only, not with CoC or MoE.
  EXPECT_EQ(validation_error(with_tp2({"--use-ascend-mc2", "--sequence-parallel"}), 2), "");
  refused(with_tp2({"--use-ascend-mc2"}), 2,
          "--use-ascend-mc2 needs --tensor-model-parallel-size > 1 and --sequence-parallel");
  refused({"--use-ascend-mc2", "--sequence-parallel"}, 1, "--use-ascend-mc2 needs");
  refused(with_tp2({"--use-ascend-mc2", "--sequence-parallel", "--use-ascend-coc"}), 2,
          "exclude each other");
  refused(with_tp2({"--use-ascend-mc2", "--sequence-parallel", "--num-experts", "4",
                    "--disable-bias-linear", "--moe-token-dispatcher-type", "alltoall"}),
          2, "--use-ascend-mc2 does not apply to MoE models");
  // 2D tensor parallelism: the grid must be the tp group, the shapes must cut, MindSpeed's
  // exclusions are named; --tp-x / --tp-y alone change nothing.
  const std::vector<std::string> grid = {
      "--tensor-model-parallel-size", "4", "--tp-2d", "--tp-x", "2", "--tp-y", "2"};
  auto with_grid = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = grid;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  EXPECT_EQ(validation_error(with_grid({}), 4), "");
  EXPECT_EQ(validation_error(
                with_grid({"--enable-overlap-ag-with-matmul", "--enable-overlap-matmul-with-rs",
                           "--enable-backward-overlap-ag-with-matmul"}),
                4),
            "");
  // 4 heads: 2 per X rank do not divide over Y = 4.
  refused({"--tensor-model-parallel-size", "8", "--tp-2d", "--tp-x", "2", "--tp-y", "4"}, 8,
          "heads must divide over the --tp-y x --context-parallel-size = 4 ranks");
  refused({"--tensor-model-parallel-size", "4", "--tp-2d", "--tp-x", "2", "--tp-y", "4"}, 4,
          "--tp-2d needs --tp-x (2) x --tp-y (4) = --tensor-model-parallel-size (4)");
  refused(with_grid({"--sequence-parallel"}), 4, "--tp-2d does not work with --sequence-parallel");
  refused(with_grid({"--use-ascend-coc", "--coc-parallel-num", "2"}), 4,
          "--tp-2d does not work with --use-ascend-coc");
  refused(with_grid({"--use-ascend-mc2"}), 4, "--use-ascend-mc2");
  refused(with_grid({"--num-experts", "4", "--disable-bias-linear", "--moe-token-dispatcher-type",
                     "alltoall"}),
          4, "--tp-2d does not work with MoE models");
  refused(with_grid({"--unaligned-linear"}), 4, "--unaligned-linear");
  refused(with_grid({"--recompute-activations"}), 4,
          "with --tp-2d and --tp-y > 1 is not implemented yet");
  refused(with_grid({"--use-fused-rmsnorm", "--normalization", "RMSNorm"}), 4,
          "--use-fused-rmsnorm");
  refused(
      with_grid({"--context-parallel-size", "2", "--context-parallel-algo", "megatron_cp_algo"}), 8,
      "--context-parallel-algo other than ulysses_cp_algo");
  EXPECT_EQ(validation_error(with_grid({"--context-parallel-size", "2", "--context-parallel-algo",
                                        "ulysses_cp_algo", "--num-attention-heads", "8"}),
                             8),
            "");
  refused(with_grid({"--ffn-hidden-size", "65"}), 4, "--ffn-hidden-size (65) by --tp-x (2)");
  refused({"--tensor-model-parallel-size", "4", "--tp-2d", "--tp-x", "4", "--tp-y", "1",
           "--seq-length", "30", "--max-position-embeddings", "30"},
          4, "--seq-length (30) / --context-parallel-size (1) must divide by --tp-x (4)");
  EXPECT_EQ(validation_error({"--tp-x", "2", "--tp-y", "2"}, 1), "");  // no effect without --tp-2d
  // Per-group communication buffers: the string is checked before anything runs.
  EXPECT_EQ(
      validation_error(
          with_tp2({"--hccl-group-buffer", "dp:200;tp:300", "--hccl-group-buffer-adaptive"}), 2),
      "");
  refused(with_tp2({"--hccl-group-buffer", "tp:0"}), 2,
          "--hccl-group-buffer: 0 MB for key \"tp\" must be greater than 0");
  refused(with_tp2({"--hccl-group-buffer", "dp:200;gpu:3"}), 2, "unknown group key \"gpu\"");
  auto parse_refused = [](std::vector<std::string> extra, const std::string& text) {
    auto p = parse_with(std::move(extra));
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_NE(p.status().to_string().find(text), std::string::npos) << p.status().to_string();
  };
  parse_refused(with_tp2({"--use-ascend-coc", "--coc-fused-kernel"}), "--coc-fused-kernel");

  auto note = [](std::vector<std::string> extra) {
    auto p = parse_with(std::move(extra));
    EXPECT_TRUE(p.ok());
    return p->notes.size() == 1 ? p->notes[0]
                                : std::string("notes: ") + std::to_string(p->notes.size());
  };
  EXPECT_NE(note(with_tp2({"--use-ascend-coc", "--coc-parallel-num", "4", "--sequence-parallel"}))
                .find("split their tokens into 4 chunks; each chunk's all-gather / reduce-scatter"),
            std::string::npos);
  EXPECT_NE(note(with_tp2({"--coc-parallel-num", "4"})).find("no effect without --use-ascend-coc"),
            std::string::npos);
  EXPECT_NE(note({"--disable-gloo-group"}).find("no Gloo group is created here"),
            std::string::npos);
  EXPECT_NE(note({"--disable-gloo-process-groups"}).find("no Gloo group is created here"),
            std::string::npos);
  EXPECT_NE(note({"--hccl-ep-group-buffer-adaptive-factor", "2"})
                .find("no effect without --hccl-group-buffer-adaptive"),
            std::string::npos);
  EXPECT_NE(note({"--use-ascend-coc", "--coc-parallel-num", "4"}).find("one tensor-parallel rank"),
            std::string::npos);
  EXPECT_NE(
      note(with_tp2({"--use-ascend-mc2", "--sequence-parallel"})).find("fused all-gather + GEMM"),
      std::string::npos);
  EXPECT_NE(note(with_tp2({"--use-ascend-coc", "--coc-mode", "1", "--coc-parallel-num", "4"}))
                .find("the original linear layers"),
            std::string::npos);
}

// MindSpeed's --unaligned-linear: heads (by query group) and FFN channels that do not divide the
// tensor-parallel size are accepted with it and refused without; its exclusions named.
TEST(Validate, UnalignedLinearRules) {
  const std::vector<std::string> five = {"--tensor-model-parallel-size",
                                         "4",
                                         "--num-attention-heads",
                                         "5",
                                         "--kv-channels",
                                         "16",
                                         "--ffn-hidden-size",
                                         "70"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = five;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  EXPECT_EQ(validation_error(with({"--unaligned-linear"}), 4), "");
  EXPECT_EQ(validation_error(with({"--unaligned-linear", "--sequence-parallel"}), 4),
            "");  // s = 32 splits evenly
  EXPECT_NE(validation_error(with({}), 4).find("--num-attention-heads (5) must be divisible by"),
            std::string::npos);
  auto refused = [&](std::vector<std::string> extra, int world, const std::string& text) {
    const std::string e = validation_error(with(std::move(extra)), world);
    EXPECT_NE(e.find(text), std::string::npos) << "got: " << e;
  };
  refused({"--unaligned-linear", "--context-parallel-size", "2"}, 8,
          "does not work with context parallelism");
  refused({"--unaligned-linear", "--sequence-parallel", "--use-ascend-mc2"}, 4,
          "does not work with --use-ascend-mc2");
  refused({"--unaligned-linear", "--use-ascend-coc", "--coc-parallel-num", "2"}, 4,
          "does not work with --use-ascend-coc");
  refused({"--unaligned-linear", "--num-experts", "4", "--disable-bias-linear",
           "--sequence-parallel", "--moe-token-dispatcher-type", "alltoall"},
          4, "does not work with MoE models");
  refused({"--unaligned-linear", "--num-attention-heads", "3"}, 4,
          "needs a query group per tensor-parallel rank");
  // MindSpeed's s = 1026 at TP4 (257, 257, 256, 256 positions) is accepted; not with variable
  // lengths.
  EXPECT_EQ(validation_error(with({"--unaligned-linear", "--sequence-parallel", "--seq-length",
                                   "1026", "--max-position-embeddings", "1026"}),
                             4),
            "");
  EXPECT_NE(validation_error({"--tensor-model-parallel-size", "4", "--sequence-parallel",
                              "--seq-length", "30", "--max-position-embeddings", "30"},
                             4)
                .find("--sequence-parallel needs --seq-length (30) divisible by"),
            std::string::npos);
  refused({"--unaligned-linear", "--sequence-parallel", "--seq-length", "30",
           "--max-position-embeddings", "30", "--variable-seq-lengths"},
          4, "not with --variable-seq-lengths");
  refused({"--unaligned-linear", "--ckpt-format", "torch"}, 4,
          "--unaligned-linear (Megatron's files hold even");
}

// MindSpeed-LLM's --padded-vocab-size (taken as is, but it must hold the vocabulary and split
// over tp), Megatron's --persistent-save-interval alias, --vocab-extra-ids passed on (a start-up
// note where the tokenizer type adds none).
TEST(Arguments, PaddedVocabSizeSaveIntervalAliasAndExtraIds) {
  auto validated = [](std::vector<std::string> extra, int64_t vocab, Configs* out) {
    auto parsed = parse_with(std::move(extra));
    if (!parsed.ok()) return parsed.status().to_string();
    *out = parsed->configs;
    const Status s = validate_configs(*out, 2, vocab);
    return s.ok() ? std::string() : s.message();
  };
  Configs c;
  EXPECT_EQ(validated({"--padded-vocab-size", "151936", "--tensor-model-parallel-size", "2"}, 151665, &c), "");
  EXPECT_EQ(c.model.padded_vocab_size, 151936);
  EXPECT_EQ(validated({}, 151665, &c), "");
  EXPECT_EQ(c.model.padded_vocab_size, 151680);  // Megatron's padding to a multiple of 128
  EXPECT_NE(validated({"--padded-vocab-size", "1000"}, 151665, &c).find("smaller than the tokenizer's vocabulary"),
            std::string::npos);
  EXPECT_NE(validated({"--padded-vocab-size", "151937", "--tensor-model-parallel-size", "2"}, 151665, &c)
                .find("divisible by --tensor-model-parallel-size 2"),
            std::string::npos);
  EXPECT_EQ(parse_with({"--persistent-save-interval", "7"})->configs.training.save_interval, 7);
  auto extra = parse_with({"--vocab-extra-ids", "3"});
  EXPECT_EQ(extra->configs.data.vocab_extra_ids, 3);
  ASSERT_EQ(extra->notes.size(), 1u);
  EXPECT_NE(extra->notes[0].find("adds no extra ids"), std::string::npos) << extra->notes[0];
}

// --fp16 and its loss scaler: Megatron's defaults, which scaler each combination gets, the
// fp16 gradient buffer unless --accumulate-allreduce-grads-in-fp32, and Megatron's refusals.
TEST(Arguments, Fp16AndLossScalingFlags) {
  const Configs defaults = parse_with({"--fp16"})->configs;
  const TrainingConfig& d = defaults.training;
  EXPECT_TRUE(d.fp16);
  EXPECT_EQ(d.initial_loss_scale, 4294967296.0);  // 2^32
  EXPECT_EQ(d.min_loss_scale, 1.0);
  EXPECT_EQ(d.loss_scale_window, 1000.0);
  EXPECT_EQ(d.hysteresis, 2);
  EXPECT_TRUE(d.has_loss_scaler() && d.dynamic_loss_scaling() && d.fp16_gradients());
  const TrainingConfig fixed = parse_with({"--fp16", "--loss-scale", "1024", "--accumulate-allreduce-grads-in-fp32"})
                                   ->configs.training;
  EXPECT_TRUE(fixed.has_loss_scaler());
  EXPECT_FALSE(fixed.dynamic_loss_scaling() || fixed.fp16_gradients());
  // Megatron gives bf16 a constant scaler with --loss-scale, fp32 none.
  EXPECT_TRUE(parse_with({"--bf16", "--loss-scale", "8"})->configs.training.has_loss_scaler());
  auto fp32 = parse_with({"--loss-scale", "8", "--attention-softmax-in-fp32"});
  EXPECT_FALSE(fp32->configs.training.has_loss_scaler());
  ASSERT_EQ(fp32->notes.size(), 2u);
  EXPECT_NE(fp32->notes[0].find("no loss scaler in an fp32 run"), std::string::npos);
  EXPECT_NE(fp32->notes[1].find("computed in fp32"), std::string::npos);
  EXPECT_TRUE(parse_with({"--apply-query-key-layer-scaling"})->configs.training.apply_query_key_layer_scaling);

  EXPECT_NE(parse_with({"--fp16", "--bf16"}).status().to_string().find("excludes"), std::string::npos);
  EXPECT_EQ(validation_error({"--fp16", "--initial-loss-scale", "65536", "--loss-scale-window", "4", "--hysteresis",
                              "1"},
                             1),
            "");
  EXPECT_NE(validation_error({"--fp16", "--initial-loss-scale", "8", "--min-loss-scale", "16"}, 1).find("--min-loss-scale"),
            std::string::npos);
  EXPECT_NE(validation_error({"--fp16", "--loss-scale-window", "2.5"}, 1).find("whole number"), std::string::npos);
  EXPECT_NE(validation_error({"--fp16", "--use-custom-fsdp", "--use-distributed-optimizer"}, 2)
                .find("add --accumulate-allreduce-grads-in-fp32"),
            std::string::npos);
}

}  // namespace
}  // namespace mindspeed
