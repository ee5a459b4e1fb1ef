// convert_checkpoint: Hugging Face -> mindspeed-cpp checkpoint -> Hugging Face gives back the
// same tensors byte for byte (GPT-2, LLaMA, Qwen2 and Mixtral fixtures), the checkpoint in between carries
// the model's arguments, and the unsupported directions are refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "checkpointing/safetensors.h"
#include "checkpointing/torch_checkpoint.h"
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
  for (const char* model : {"gpt2_tiny", "llama_tiny", "qwen2_scaled", "mixtral_tiny"}) {
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

// Virtual-pipeline Megatron-LM checkpoints (each rank file holds model0, model1, ..., layers
// numbered from 0 in each chunk; made by make_megatron_torch_fixture.py from the 6-layer
// tests/tools/data/llama6_hf with Megatron's chunk offsets): TP2 x PP2 x 3 virtual stages,
// TP1 x PP2 x 2 with an uneven first stage (2 layers), and TP1 x PP2 x 2 with the embedding
// and the loss counted as layers. Each imports to exactly the Hugging Face source's tensors
// (every layer holds different values, so a layer read from the wrong chunk shows).
TEST(ConvertCheckpoint, MegatronTorchVirtualPipelineImportsToTheSameWeights) {
  const std::string hf = source_path("tests/tools/data/llama6_hf");
  for (const char* fixture : {"megatron_torch_llama6_vpp", "megatron_torch_llama6_uneven_vpp",
                              "megatron_torch_llama6_vpp_ends"}) {
    SCOPED_TRACE(fixture);
    testing::ScratchDir dir;
    auto r = run_tool("convert_checkpoint", {"--load-model-type", "mg-torch", "--save-model-type", "hf", "--load-dir",
                                             source_path(std::string("tests/tools/data/") + fixture), "--save-dir",
                                             dir.file("hf")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_same_hf_tensors(hf, dir.file("hf"));
    expect_same_architecture(hf, dir.file("hf"));
  }
}

// Rewrites the torch.save file `path` with `edit` applied to its root (tensors copied).
void rewrite_torch_file(const std::string& path, const std::function<void(PickleValue&)>& edit) {
  auto f = TorchCheckpointFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<TorchSaveTensor> tensors;
  std::function<std::shared_ptr<PickleValue>(const PickleValue&)> copy = [&](const PickleValue& v) {
    auto out = std::make_shared<PickleValue>(v);
    if (v.kind == PickleValue::Kind::kTensor) {
      auto values = f->read_f32(*v.tensor);
      EXPECT_TRUE(values.ok());
      out->tensor = std::make_shared<TorchTensorRef>();
      out->tensor->key = std::to_string(tensors.size());
      tensors.push_back({v.tensor->shape, values.ok() ? *values : std::vector<float>{}});
    }
    for (auto& [key, value] : out->dict) value = copy(*value);
    return out;
  };
  std::shared_ptr<PickleValue> root = copy(f->root());
  edit(*root);
  ASSERT_TRUE(write_torch_save(path, "model_optim_rng", *root, tensors).ok());
}

// A damaged virtual-pipeline checkpoint is refused with the rank file named: a rank file
// without one of its chunks (model1), and args asking for a split this importer has no
// layout for (MindSpeed's no-op layers).
TEST(ConvertCheckpoint, DamagedVirtualPipelineCheckpointIsRefusedByFile) {
  testing::ScratchDir dir;
  const std::string copy = dir.file("vpp");
  std::filesystem::copy(source_path("tests/tools/data/megatron_torch_llama6_vpp"), copy,
                        std::filesystem::copy_options::recursive);
  auto convert = [&] {
    return run_tool("convert_checkpoint", {"--load-model-type", "mg-torch", "--save-model-type", "hf", "--load-dir",
                                           copy, "--save-dir", dir.file("hf")});
  };
  const std::string damaged = copy + "/iter_0000007/mp_rank_01_001/model_optim_rng.pt";
  rewrite_torch_file(damaged, [](PickleValue& root) {
    std::erase_if(root.dict, [](const auto& kv) { return kv.first->s == "model1"; });
  });
  auto r = convert();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(damaged + ": no 'model1' dict, though args.virtual_pipeline_model_parallel_size is 3"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("hf") + "/model.safetensors"));

  std::filesystem::remove_all(copy);
  std::filesystem::copy(source_path("tests/tools/data/megatron_torch_llama6_vpp"), copy,
                        std::filesystem::copy_options::recursive);
  const std::string first = copy + "/iter_0000007/mp_rank_00_000/model_optim_rng.pt";
  rewrite_torch_file(first, [](PickleValue& root) {
    for (auto& [key, value] : root.dict) {
      if (key->s == "args") value->dict.emplace_back(pickle_string("noop_layers"), pickle_string("1"));
    }
  });
  r = convert();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(first + ": args.noop_layers (MindSpeed's no-op layers) is set"), std::string::npos)
      << r.output;
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

// --num-layers-per-virtual-pipeline-stage writes Megatron's interleaved layout: the TP2 x PP2 x
// 3-virtual-stage fixture read and written again at that layout gives rank files with the same
// chunks (model0..model2), keys in the same order and the same values as the fixture
// make_megatron_torch_fixture.py wrote from Megatron's rules; they import to the Hugging Face
// source's tensors; a virtual size the stages cannot split into is refused by flag.
TEST(ConvertCheckpoint, WritesVirtualPipelineMegatronTorchAsMegatron) {
  testing::ScratchDir dir;
  const std::string fixture = source_path("tests/tools/data/megatron_torch_llama6_vpp");
  auto r = run_tool("convert_checkpoint", {"--load-model-type", "mg-torch", "--save-model-type", "mg-torch",
                                           "--load-dir", fixture, "--save-dir", dir.file("mt"),
                                           "--target-tensor-parallel-size", "2", "--target-pipeline-parallel-size",
                                           "2", "--num-layers-per-virtual-pipeline-stage", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* rank : {"mp_rank_00_000", "mp_rank_00_001", "mp_rank_01_000", "mp_rank_01_001"}) {
    SCOPED_TRACE(rank);
    auto want = TorchCheckpointFile::open(fixture + "/iter_0000007/" + rank + "/model_optim_rng.pt");
    auto got = TorchCheckpointFile::open(dir.file("mt") + "/release/" + rank + "/model_optim_rng.pt");
    ASSERT_TRUE(want.ok() && got.ok()) << got.status().to_string();
    EXPECT_EQ(got->root().get("model"), nullptr);
    EXPECT_EQ(got->root().get("args")->get("virtual_pipeline_model_parallel_size")->i, 3);
    for (const char* chunk : {"model0", "model1", "model2"}) {
      const PickleValue* w = want->root().get(chunk);
      const PickleValue* g = got->root().get(chunk);
      ASSERT_TRUE(w != nullptr && g != nullptr) << chunk;
      ASSERT_EQ(g->dict.size(), w->dict.size()) << chunk;
      for (size_t i = 0; i < w->dict.size(); ++i) {
        const std::string& name = w->dict[i].first->s;
        EXPECT_EQ(g->dict[i].first->s, name) << chunk;
        EXPECT_EQ(g->dict[i].second->tensor->shape, w->dict[i].second->tensor->shape) << chunk << " " << name;
        EXPECT_EQ(*got->read_f32(*g->dict[i].second->tensor), *want->read_f32(*w->dict[i].second->tensor))
            << chunk << " " << name;
      }
    }
  }
  r = run_tool("convert_checkpoint", {"--load-model-type", "mg-torch", "--save-model-type", "hf", "--load-dir",
                                      dir.file("mt"), "--save-dir", dir.file("hf")});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_hf_tensors(source_path("tests/tools/data/llama6_hf"), dir.file("hf"));
  r = run_tool("convert_checkpoint", {"--load-model-type", "mg-torch", "--save-model-type", "mg-torch", "--load-dir",
                                      fixture, "--save-dir", dir.file("bad"), "--target-pipeline-parallel-size", "2",
                                      "--num-layers-per-virtual-pipeline-stage", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--num-layers-per-virtual-pipeline-stage 2 with --target-pipeline-parallel-size 2: "),
            std::string::npos)
      << r.output;
}

TEST(ConvertCheckpoint, UnsupportedDirectionsAreRefused) {
  testing::ScratchDir dir;
  // A target layout for an output that has none is said, not silently dropped.
  auto note = run_tool("convert_checkpoint", {"--load-model-type", "hf", "--save-model-type", "mg", "--load-dir",
                                              source_path("tests/golden/llama_tiny"), "--save-dir", dir.file("mg"),
                                              "--target-tensor-parallel-size", "2"});
  EXPECT_EQ(note.exit_code, 0) << note.output;
  EXPECT_NE(note.output.find("--target-tensor-parallel-size only lays out mg-torch output"), std::string::npos)
      << note.output;
  auto r = run_tool("convert_checkpoint", {"--load-model-type", "mg", "--save-model-type", "mg", "--load-dir",
                                      dir.file("x"), "--save-dir", dir.file("y")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("loads at any parallel layout"), std::string::npos) << r.output;
  r = run_tool("convert_checkpoint", {"--load-model-type", "mg", "--save-model-type", "hf", "--load-dir",
                                      dir.file("missing"), "--save-dir", dir.file("y")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("latest_checkpointed_iteration.txt' does not exist"), std::string::npos) << r.output;
  // A mixture-of-experts model as a Megatron torch checkpoint, or as a dense family.
  const std::string mixtral = source_path("tests/golden/mixtral_tiny");
  r = run_tool("convert_checkpoint", {"--load-model-type", "hf", "--save-model-type", "mg-torch", "--load-dir", mixtral,
                                      "--save-dir", dir.file("moe_torch")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("mixture-of-experts model as a Megatron torch checkpoint"), std::string::npos) << r.output;
  r = run_tool("convert_checkpoint", {"--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", mixtral,
                                      "--save-dir", dir.file("moe_mg")});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_tool("convert_checkpoint", {"--load-model-type", "mg", "--save-model-type", "hf", "--load-dir",
                                      dir.file("moe_mg"), "--save-dir", dir.file("moe_llama"), "--model-type-hf", "llama"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("a mixture-of-experts model: use mixtral"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mindspeed
