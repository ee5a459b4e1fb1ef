// convert_checkpoint: Hugging Face -> mindspeed-cpp checkpoint -> Hugging Face gives back the
// same tensors byte for byte (GPT-2 and LLaMA fixtures), the checkpoint in between carries
// the model's arguments, and the unsupported directions are refused by name.
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpointing/safetensors.h"
#include "models/gpt/hf_checkpoint.h"
#include "scratch_dir.h"
#include "tools/tools_test_util.h"
#include "training/checkpointing.h"
#include "training/megatron_torch_checkpoint.h"

namespace mindspeed {
namespace {

using testing::run_tool;
using testing::source_path;

// The Hugging Face directory `got` holds the same tensors as `want`, byte for byte (names,
// dtypes, shapes, values).
void expect_same_hf_tensors(const std::string& want_dir, const std::string& got_dir) {
  auto want = SafetensorsFile::open(want_dir + "/model.safetensors");
  auto got = SafetensorsFile::open(got_dir + "/model.safetensors");
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().to_string();
  ASSERT_EQ(want->entries().size(), got->entries().size());
  for (const SafetensorsEntry& e : want->entries()) {
    const SafetensorsEntry* g = got->find(e.name);
    ASSERT_NE(g, nullptr) << e.name;
    EXPECT_EQ(g->dtype, e.dtype) << e.name;
    EXPECT_EQ(g->shape, e.shape) << e.name;
    EXPECT_EQ(*got->read_f32(e.name), *want->read_f32(e.name)) << e.name;
  }
}

// The config.json of `got_dir` reads back as the architecture of `want_dir`'s.
void expect_same_architecture(const std::string& want_dir, const std::string& got_dir) {
  auto a = read_hf_config(want_dir);
  auto b = read_hf_config(got_dir);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().to_string();
  const Status same = check_hf_config_matches(a->config, *b);
  EXPECT_TRUE(same.ok()) << same.to_string();
}

TEST(ConvertCheckpoint, HfToMgToHfIsByteIdentical) {
  for (const char* model : {"gpt2_tiny", "llama_tiny", "qwen2_scaled"}) {
    SCOPED_TRACE(model);
    testing::ScratchDir dir;
    const std::string hf = source_path(std::string("tests/golden/") + model);
    auto r = run_tool("convert_checkpoint", {"--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", hf,
                                             "--save-dir", dir.file("mg"), "--target-tensor-parallel-size", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto config = checkpoint_model_config(checkpoint_iteration_dir(dir.file("mg"), 0));
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    EXPECT_EQ(config->num_layers, 2);
    r = run_tool("convert_checkpoint", {"--load-model-type", "mg", "--save-model-type", "hf", "--load-dir",
                                        dir.file("mg"), "--save-dir", dir.file("hf")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_same_hf_tensors(hf, dir.file("hf"));
    // The written config.json reads back as the same architecture.
    expect_same_architecture(hf, dir.file("hf"));
  }
}

// Megatron-LM's legacy checkpoint of the tiny LLaMA at TP2 x PP2 (made by
// make_megatron_torch_fixture.py from tests/golden/llama_tiny with Megatron's layouts) imports
// to exactly the Hugging Face fixture's tensors, and into this engine's format.
TEST(ConvertCheckpoint, MegatronTorchImportsToTheSameWeightsAsHuggingFace) {
  testing::ScratchDir dir;
  const std::string megatron = source_path("tests/tools/data/megatron_torch_llama");
  auto r = run_tool("convert_checkpoint", {"--load-model-type", "mg-torch", "--save-model-type", "hf", "--load-dir",
                                           megatron, "--save-dir", dir.file("hf")});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_hf_tensors(source_path("tests/golden/llama_tiny"), dir.file("hf"));
  r = run_tool("convert_checkpoint", {"--load-model-type", "mg-torch", "--save-model-type", "mg", "--load-dir",
                                      megatron, "--save-dir", dir.file("mg")});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto tensors = read_checkpoint_tensors(checkpoint_iteration_dir(dir.file("mg"), 0));
  ASSERT_TRUE(tensors.ok()) << tensors.status().to_string();
  EXPECT_EQ(tensors->size(), 2u * 6u + 3u);  // 6 tensors per layer, embedding, final norm, output layer
}

// Hugging Face -> Megatron-LM legacy files at TP2 x PP2 -> Hugging Face: the same tensors and
// architecture (GPT-2 with its tied output layer copied to the last stage, LLaMA, Qwen2-style
// with rope scaling). The written files load with torch.load (tests/tools/
// check_megatron_torch_export.py; CI has no PyTorch).
TEST(ConvertCheckpoint, HfToMegatronTorchToHfIsByteIdentical) {
  for (const char* model : {"gpt2_tiny", "llama_tiny", "qwen2_scaled"}) {
    SCOPED_TRACE(model);
    testing::ScratchDir dir;
    const std::string hf = source_path(std::string("tests/golden/") + model);
    auto r = run_tool("convert_checkpoint", {"--load-model-type", "hf", "--save-model-type", "mg-torch", "--load-dir",
                                             hf, "--save-dir", dir.file("mt"), "--target-tensor-parallel-size", "2",
                                             "--target-pipeline-parallel-size", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(testing::read_file(dir.file("mt") + "/latest_checkpointed_iteration.txt"), "release");
    EXPECT_TRUE(std::filesystem::exists(dir.file("mt") + "/release/mp_rank_01_001/model_optim_rng.pt"));
    // Megatron pads the vocabulary (100) to a multiple of 128 x the tensor-parallel size: a
    // Megatron run at TP2 builds 256 rows (128 per rank) and refuses any other count.
    auto written = MegatronTorchCheckpoint::open(dir.file("mt"));
    ASSERT_TRUE(written.ok()) << written.status().to_string();
    EXPECT_EQ(written->model_config().padded_vocab_size, 256);
    ParameterSpec embedding{.name = "embedding.word_embeddings.weight", .global_shape = Shape{256, 32},
                            .split = TensorParallelSplit::kRows};
    auto rows = written->full_tensor(embedding);
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    EXPECT_EQ((*rows)[255 * 32], 0.0f);  // a padding row
    r = run_tool("convert_checkpoint", {"--load-model-type", "mg-torch", "--save-model-type", "hf", "--load-dir",
                                        dir.file("mt"), "--save-dir", dir.file("back"), "--model-type-hf",
                                        std::string(model) == "gpt2_tiny" ? "gpt2" : "llama"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_same_hf_tensors(hf, dir.file("back"));
    expect_same_architecture(hf, dir.file("back"));
  }
  testing::ScratchDir dir;
  auto r = run_tool("convert_checkpoint", {"--load-model-type", "hf", "--save-model-type", "mg-torch", "--load-dir",
                                           source_path("tests/golden/llama_tiny"), "--save-dir", dir.file("mt"),
                                           "--target-tensor-parallel-size", "3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--target-tensor-parallel-size 3 does not divide"), std::string::npos) << r.output;
}

TEST(ConvertCheckpoint, UnsupportedDirectionsAreRefused) {
  testing::ScratchDir dir;
  auto r = run_tool("convert_checkpoint", {"--load-model-type", "mg", "--save-model-type", "mg", "--load-dir",
                                      dir.file("x"), "--save-dir", dir.file("y")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("loads at any parallel layout"), std::string::npos) << r.output;
  r = run_tool("convert_checkpoint", {"--load-model-type", "mg", "--save-model-type", "hf", "--load-dir",
                                      dir.file("missing"), "--save-dir", dir.file("y")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("latest_checkpointed_iteration.txt' does not exist"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mindspeed
