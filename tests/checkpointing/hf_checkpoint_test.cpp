// Hugging Face checkpoint mapping: export followed by import is the identity for both
// families (QKV regrouping, Conv1D transposes, [gate; up], vocabulary padding), and a
// config.json that contradicts the model flags is refused with each mismatch named.
#include "models/gpt/hf_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "checkpointing/safetensors.h"
#include "distributed/param_and_grad_buffer.h"

namespace mindspeed {
namespace {

std::string fixture(const char* name) { return std::string(MS_SOURCE_DIR) + "/tests/golden/" + name; }

class HfRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(HfRoundTrip, ExportThenImportIsTheIdentity) {
  auto info = read_hf_config(fixture(GetParam()));
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  ModelConfig c = info->config;
  c.seq_length = 16;
  c.padded_vocab_size = padded_vocab(c.vocab_size, 128, 1);
  auto ps = ParallelState::single_process();
  Allocator alloc;
  ParameterRegistry registry;
  GPTModel model(c, *ps, registry);
  ParamAndGradBuffer buffer(model.registry(), alloc, BufferOptions{});
  initialize_parameters(model.registry(), 3, 0, 1);
  // Padded vocabulary rows are not part of a Hugging Face checkpoint: zero them first.
  for (const auto& p : model.registry().params()) {
    if (p->spec.name == "embedding.word_embeddings.weight" || p->spec.name == "output_layer.weight") {
      std::fill(p->data.f32() + c.vocab_size * c.hidden_size, p->data.f32() + p->local_shape.numel(), 0.0f);
    }
  }
  FullTensors before;
  for (const auto& p : model.registry().params()) before[p->spec.name].assign(p->data.f32(), p->data.f32() + p->local_shape.numel());
  auto hf = export_hf_tensors(c, info->architecture, before);
  ASSERT_TRUE(hf.ok()) << hf.status().to_string();
  const std::string dir = "/tmp/ms_hf_roundtrip_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(fixture(GetParam()) + "/config.json", dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::vector<SafetensorsTensorToWrite> tensors;
  auto original = SafetensorsFile::open(fixture(GetParam()) + "/model.safetensors");
  ASSERT_TRUE(original.ok());
  for (auto& [name, values] : *hf) {
    const SafetensorsEntry* e = original->find(name);
    ASSERT_NE(e, nullptr) << name << " is not a name of the Hugging Face checkpoint";
    tensors.push_back({name, e->shape, values, {}});
  }
  const Status written = write_safetensors(dir + "/model.safetensors", tensors);
  ASSERT_TRUE(written.ok()) << written.to_string();
  for (const auto& p : model.registry().params()) std::fill(p->data.f32(), p->data.f32() + p->local_shape.numel(), -7.0f);
  ASSERT_TRUE(load_hf_checkpoint(dir, model, *ps).ok());
  for (const auto& p : model.registry().params()) {
    EXPECT_EQ(std::vector<float>(p->data.f32(), p->data.f32() + p->local_shape.numel()), before[p->spec.name]) << p->spec.name;
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, HfRoundTrip, ::testing::Values("gpt2_tiny", "llama_tiny"));

TEST(HfConfig, MismatchedFlagsAreNamed) {
  auto info = read_hf_config(fixture("llama_tiny"));
  ASSERT_TRUE(info.ok());
  ModelConfig flags = info->config;
  flags.num_layers = 3;
  flags.swiglu = false;
  const Status s = check_hf_config_matches(flags, *info);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--num-layers is 3 but config.json says 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--swiglu"), std::string::npos) << s.message();
  EXPECT_EQ(read_hf_config("/nonexistent").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace mindspeed
