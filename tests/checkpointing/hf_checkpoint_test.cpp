// Hugging Face checkpoint mapping: export followed by import is the identity for both
// families (QKV regrouping, Conv1D transposes, [gate; up], vocabulary padding), and a
// config.json that contradicts the model flags is refused with each mismatch named, and a
// damaged config.json (wrong field types, missing fields, zero or indivisible head counts,
// truncated JSON) is an error naming the file, the field and what was expected.
#include "models/gpt/hf_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "checkpointing/safetensors.h"
#include "core/dtype.h"
#include "distributed/param_and_grad_buffer.h"
#include "scratch_dir.h"

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

INSTANTIATE_TEST_SUITE_P(Families, HfRoundTrip, ::testing::Values("gpt2_tiny", "llama_tiny", "qwen2_scaled"));

// The fixture's parameters after loading `dir`.
// The fixture's parameters after loading `dir` (or why it did not load).
StatusOr<std::map<std::string, std::vector<float>>> loaded_params(const std::string& fixture_name,
                                                                  const std::string& dir) {
  MS_ASSIGN_OR_RETURN(HfModelInfo info, read_hf_config(fixture(fixture_name.c_str())));
  ModelConfig c = info.config;
  c.padded_vocab_size = padded_vocab(c.vocab_size, 128, 1);
  auto ps = ParallelState::single_process();
  Allocator alloc;
  ParameterRegistry registry;
  GPTModel model(c, *ps, registry);
  ParamAndGradBuffer buffer(model.registry(), alloc, BufferOptions{});
  MS_RETURN_IF_ERROR(load_hf_checkpoint(dir, model, *ps));
  std::map<std::string, std::vector<float>> out;
  for (const auto& p : model.registry().params()) out[p->spec.name].assign(p->data.f32(), p->data.f32() + p->local_shape.numel());
  return out;
}

// Real checkpoints come as shards (model.safetensors.index.json) and in BF16: both load to
// the same weights as the single fp32 file (BF16 to the rounded values).
TEST(HfImport, ShardedIndexAndBf16Files) {
  testing::ScratchDir dir("hf_shards");
  const std::string src = fixture("llama_tiny");
  auto original = SafetensorsFile::open(src + "/model.safetensors");
  ASSERT_TRUE(original.ok());
  std::vector<SafetensorsTensorToWrite> shard[2];
  nlohmann::json weight_map;
  int i = 0;
  for (const SafetensorsEntry& e : original->entries()) {
    const int k = i++ % 2;
    shard[k].push_back({e.name, e.shape, *original->read_f32(e.name), {}});
    weight_map[e.name] = k == 0 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  std::filesystem::create_directories(dir.file("sharded"));
  std::filesystem::copy_file(src + "/config.json", dir.file("sharded") + "/config.json");
  ASSERT_TRUE(write_safetensors(dir.file("sharded") + "/model-00001-of-00002.safetensors", shard[0]).ok());
  ASSERT_TRUE(write_safetensors(dir.file("sharded") + "/model-00002-of-00002.safetensors", shard[1]).ok());
  std::ofstream(dir.file("sharded") + "/model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump();
  const auto fp32 = loaded_params("llama_tiny", src), sharded = loaded_params("llama_tiny", dir.file("sharded"));
  ASSERT_TRUE(fp32.ok() && sharded.ok()) << sharded.status().to_string();
  EXPECT_EQ(*sharded, *fp32);

  // A shard file name leaving the directory is refused.
  weight_map[original->entries().front().name] = "../elsewhere.safetensors";
  std::ofstream(dir.file("sharded") + "/model.safetensors.index.json")
      << nlohmann::json{{"weight_map", weight_map}}.dump();
  const auto bad = loaded_params("llama_tiny", dir.file("sharded"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not a file name in the same directory"), std::string::npos)
      << bad.status().message();

  // BF16: the same tensors stored as bfloat16 (written by hand: 8-byte header length, JSON
  // header, raw little-endian bf16).
  nlohmann::json header;
  std::string data;
  for (const SafetensorsEntry& e : original->entries()) {
    const std::vector<float> v = *original->read_f32(e.name);
    const int64_t begin = static_cast<int64_t>(data.size());
    for (float x : v) {
      const bf16 b = float_to_bf16(x);
      data.append(reinterpret_cast<const char*>(&b.bits), 2);
    }
    header[e.name] = {{"dtype", "BF16"}, {"shape", e.shape}, {"data_offsets", {begin, static_cast<int64_t>(data.size())}}};
  }
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::filesystem::create_directories(dir.file("bf16"));
  std::filesystem::copy_file(src + "/config.json", dir.file("bf16") + "/config.json");
  std::ofstream out(dir.file("bf16") + "/model.safetensors", std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h << data;
  out.close();
  const auto from_bf16 = loaded_params("llama_tiny", dir.file("bf16"));
  ASSERT_TRUE(from_bf16.ok()) << from_bf16.status().to_string();
  for (const auto& [name, values] : *fp32) {
    for (size_t k = 0; k < values.size(); ++k) {
      ASSERT_EQ(from_bf16->at(name)[k], round_to_bf16(values[k])) << name << " element " << k;
    }
  }
}

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

// ---- damaged config.json

using testing::ScratchDir;
using testing::write_file;

// The fixture's config.json with the fields of `set` replaced (null values are written as
// null, as Hugging Face writes Python None) and the fields in `erase` removed, written to
// `dir`. Returns the directory.
std::string patched_config(const ScratchDir& dir, const char* family, const nlohmann::json& set,
                           const std::vector<std::string>& erase = {}) {
  nlohmann::json j = nlohmann::json::parse(testing::read_file(fixture(family) + "/config.json"));
  for (auto it = set.begin(); it != set.end(); ++it) j[it.key()] = it.value();
  for (const auto& key : erase) j.erase(key);
  write_file(dir.file("config.json"), j.dump());
  return dir.path().string();
}

void expect_config_error(const std::string& dir, StatusCode code, const std::vector<std::string>& fragments) {
  auto info = read_hf_config(dir);
  ASSERT_FALSE(info.ok()) << "accepted " << testing::read_file(dir + "/config.json");
  EXPECT_EQ(info.status().code(), code) << info.status().to_string();
  for (const auto& fragment : fragments) {
    EXPECT_NE(info.status().message().find(fragment), std::string::npos)
        << "'" << fragment << "' not in: " << info.status().message();
  }
}

struct BadField {
  const char* family;
  const char* patch;  // fields replaced in the fixture config
  std::vector<std::string> fragments;
};

// MindSpeed-LLM's --model-type-hf against config.json's model_type.
TEST(HfConfig, ModelTypeHfMustMatchConfigJson) {
  EXPECT_TRUE(check_hf_model_type(fixture("llama_tiny"), "llama2").ok());
  EXPECT_TRUE(check_hf_model_type(fixture("llama_tiny"), "llama").ok());
  EXPECT_TRUE(check_hf_model_type(fixture("qwen2_scaled"), "qwen25").ok());
  EXPECT_TRUE(check_hf_model_type(fixture("mixtral_tiny"), "mixtral").ok());
  EXPECT_TRUE(check_hf_model_type(fixture("gpt2_tiny"), "gpt2").ok());
  const Status s = check_hf_model_type(fixture("llama_tiny"), "mixtral");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--model-type-hf mixtral does not match " + fixture("llama_tiny") +
                             "/config.json, whose model_type is llama"),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(check_hf_model_type(fixture("gpt2_tiny"), "llama2").ok());
}

TEST(HfConfig, FieldsOfTheWrongTypeOrRangeAreNamed) {
  const BadField cases[] = {
      // Each was ignored (n_inner: 4 * n_embd), divided by zero, accepted or thrown by
      // nlohmann::json before the fields were type-checked.
      {"gpt2_tiny", R"({"n_inner": "64"})", {"'n_inner'", "string \"64\"", "expected a positive integer"}},
      {"gpt2_tiny", R"({"n_head": 0})", {"'n_head'", "number 0", "expected a positive integer"}},
      {"gpt2_tiny", R"({"vocab_size": -5})", {"'vocab_size'", "number -5"}},
      {"gpt2_tiny", R"({"n_layer": 18446744073709551615})", {"'n_layer'", "at most 2147483647"}},
      {"gpt2_tiny", R"({"n_layer": 2.0})", {"'n_layer'", "number 2.0", "expected a positive integer"}},
      {"gpt2_tiny", R"({"n_embd": 30})", {"'n_embd' (30) is not divisible by field 'n_head' (4)"}},
      {"gpt2_tiny", R"({"layer_norm_epsilon": "1e-5"})", {"'layer_norm_epsilon'", "expected a positive number"}},
      {"gpt2_tiny", R"({"layer_norm_epsilon": -1e-5})", {"'layer_norm_epsilon'", "expected a positive number"}},
      // Found by tests/fuzz (corpus/hf_config/crash_epsilon_underflows_float): positive as a
      // double, 0 as the float the model uses.
      {"gpt2_tiny", R"({"layer_norm_epsilon": 1e-95})", {"'layer_norm_epsilon'", "number 1e-95", "float32"}},
      {"llama_tiny", R"({"rope_theta": 1e39})", {"'rope_theta'", "expected a positive number"}},
      {"gpt2_tiny", R"({"activation_function": 5})", {"'activation_function'", "number 5", "expected a string"}},
      {"gpt2_tiny", R"({"model_type": 2})", {"'model_type'", "expected a string"}},
      {"gpt2_tiny", R"({"model_type": null})", {"missing field 'model_type'"}},
      {"gpt2_tiny", R"({"n_positions": null})", {"missing field 'n_positions'"}},
      {"gpt2_tiny", R"({"tie_word_embeddings": "yes"})", {"'tie_word_embeddings'", "expected true or false"}},
      {"llama_tiny", R"({"num_attention_heads": 0})", {"'num_attention_heads'", "number 0"}},
      {"llama_tiny", R"({"num_key_value_heads": 0})", {"'num_key_value_heads'", "number 0"}},
      {"llama_tiny", R"({"num_key_value_heads": 3})",
       {"'num_attention_heads' (4) is not divisible by field 'num_key_value_heads' (3)"}},
      {"llama_tiny", R"({"hidden_size": 30})", {"'hidden_size' (30) is not divisible"}},
      {"llama_tiny", R"({"intermediate_size": "64"})", {"'intermediate_size'", "string \"64\""}},
      {"llama_tiny", R"({"rms_norm_eps": "1e-6"})", {"'rms_norm_eps'", "expected a positive number"}},
      {"llama_tiny", R"({"rope_theta": 0})", {"'rope_theta'", "expected a positive number"}},
      {"llama_tiny", R"({"tie_word_embeddings": "false"})", {"'tie_word_embeddings'", "expected true or false"}},
      {"llama_tiny", R"({"attention_bias": 1})", {"'attention_bias'", "number 1", "expected true or false"}},
      {"llama_tiny", R"({"hidden_act": ["silu"]})", {"'hidden_act'", "array", "expected a string"}},
  };
  for (const BadField& c : cases) {
    SCOPED_TRACE(std::string(c.family) + " " + c.patch);
    ScratchDir dir("hf_config");
    const std::string d = patched_config(dir, c.family, nlohmann::json::parse(c.patch));
    std::vector<std::string> fragments = c.fragments;
    fragments.push_back(d + "/config.json");
    expect_config_error(d, StatusCode::kInvalidArgument, fragments);
  }
}

TEST(HfConfig, UnsupportedValuesAreRefusedNotIgnored) {
  ScratchDir dir("hf_config");
  // A GPT-2 with an untied output layer, other rope scalings, or sliding-window attention
  // would train the wrong model if the field were ignored.
  expect_config_error(patched_config(dir, "gpt2_tiny", {{"tie_word_embeddings", false}}),
                      StatusCode::kUnimplemented, {"tie_word_embeddings false"});
  expect_config_error(patched_config(dir, "llama_tiny", {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}}),
                      StatusCode::kUnimplemented, {"rope_scaling type 'yarn'"});
  expect_config_error(patched_config(dir, "llama_tiny", {{"model_type", "mistral"}, {"sliding_window", 16}}),
                      StatusCode::kUnimplemented, {"sliding_window 16", "sliding-window attention"});
  expect_config_error(patched_config(dir, "llama_tiny", {{"model_type", "qwen2"}, {"use_sliding_window", true}}),
                      StatusCode::kUnimplemented, {"use_sliding_window true"});
  expect_config_error(patched_config(dir, "llama_tiny", {{"head_dim", 15}}), StatusCode::kInvalidArgument,
                      {"head_dim 15 must be even"});
}

TEST(HfConfig, Qwen2MistralHeadDimAndRopeScaling) {
  ScratchDir dir("hf_config");
  // head_dim other than hidden / heads is Megatron's --kv-channels.
  auto wide = read_hf_config(patched_config(dir, "llama_tiny", {{"head_dim", 16}}));
  ASSERT_TRUE(wide.ok()) << wide.status().to_string();
  EXPECT_EQ(wide->config.kv_channels, 16);
  // Qwen2: LLaMA names with q/k/v biases; Mistral without a window (or a window covering
  // every position) is LLaMA.
  auto qwen = read_hf_config(patched_config(dir, "llama_tiny", {{"model_type", "qwen2"}}));
  ASSERT_TRUE(qwen.ok()) << qwen.status().to_string();
  EXPECT_EQ(qwen->architecture, HfArchitecture::kQwen2);
  EXPECT_TRUE(qwen->config.add_qkv_bias);
  auto mistral = read_hf_config(patched_config(dir, "llama_tiny", {{"model_type", "mistral"}, {"sliding_window", nullptr}}));
  ASSERT_TRUE(mistral.ok()) << mistral.status().to_string();
  EXPECT_EQ(mistral->architecture, HfArchitecture::kMistral);
  // rope_scaling: llama3 with its four numbers, linear as position interpolation.
  auto llama3 = read_hf_config(patched_config(
      dir, "llama_tiny",
      {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8192}}}}));
  ASSERT_TRUE(llama3.ok()) << llama3.status().to_string();
  EXPECT_EQ(llama3->config.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(llama3->config.rope_scaling_factor, 8.0f);
  EXPECT_EQ(llama3->config.rope_original_max_position_embeddings, 8192);
  auto linear = read_hf_config(patched_config(dir, "llama_tiny", {{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}}));
  ASSERT_TRUE(linear.ok()) << linear.status().to_string();
  EXPECT_EQ(linear->config.rotary_seq_len_interpolation_factor, 2.0f);
  // The model flags must say the same (named when they do not).
  ModelConfig flags = llama3->config;
  flags.rope_scaling = RopeScaling::kNone;
  const Status s = check_hf_config_matches(flags, *llama3);
  EXPECT_NE(s.message().find("--use-rope-scaling"), std::string::npos) << s.message();
}

TEST(HfConfig, NullFieldsKeepTheHuggingFaceDefaults) {
  ScratchDir dir("hf_config");
  // Hugging Face writes Python None as null; "n_inner": null is in every GPT-2 config.json.
  auto gpt2 = read_hf_config(patched_config(
      dir, "gpt2_tiny", {{"n_inner", nullptr}, {"layer_norm_epsilon", nullptr}, {"activation_function", nullptr}}));
  ASSERT_TRUE(gpt2.ok()) << gpt2.status().to_string();  // j.value() threw on a null
  EXPECT_EQ(gpt2->config.ffn_hidden_size, 4 * 32);
  EXPECT_EQ(gpt2->config.norm_epsilon, 1e-5f);
  EXPECT_TRUE(gpt2->config.openai_gelu);
  nlohmann::json nulls;
  for (const char* key : {"num_key_value_heads", "rms_norm_eps", "rope_theta", "rope_scaling", "hidden_act",
                          "tie_word_embeddings", "attention_bias", "head_dim"}) {
    nulls[key] = nullptr;
  }
  auto llama = read_hf_config(patched_config(dir, "llama_tiny", nulls));
  ASSERT_TRUE(llama.ok()) << llama.status().to_string();
  EXPECT_EQ(llama->config.query_groups(), 4);
  EXPECT_EQ(llama->config.norm_epsilon, 1e-6f);
  EXPECT_EQ(llama->config.rotary_base, 10000.0f);
  EXPECT_TRUE(llama->config.untie_embeddings_and_output_weights);
}

// Found with the hf_config fuzz target (corpus/hf_config/crash_deeply_nested_field): a field
// 100000 arrays deep overflowed the stack while the error message printed it (json dump()
// recursed once per level); the message now shows at most 16 levels.
TEST(HfConfig, DeeplyNestedFieldIsNamedWithoutOverflow) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto info = parse_hf_config(R"({"model_type": )" + deep + "}", "deep/config.json");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(info.status().message().find("deep/config.json: field 'model_type' is array " + std::string(16, '[') +
                                         "[...]" + std::string(16, ']') + "; expected a string"),
            std::string::npos)
      << info.status().message();
}

TEST(HfConfig, DamagedJsonNamesTheFileAndPosition) {
  ScratchDir dir("hf_config");
  const std::string path = dir.file("config.json");
  const std::string good = testing::read_file(fixture("gpt2_tiny") + "/config.json");
  write_file(path, good.substr(0, good.size() / 2));  // truncated
  expect_config_error(dir.path().string(), StatusCode::kInvalidArgument, {path, "not valid JSON", "line"});
  write_file(path, "[1, 2]");
  expect_config_error(dir.path().string(), StatusCode::kInvalidArgument,
                      {path, "is a JSON array", "expected a JSON object"});
  write_file(path, "");
  expect_config_error(dir.path().string(), StatusCode::kInvalidArgument, {path, "not valid JSON"});
  expect_config_error(patched_config(dir, "llama_tiny", {}, {"vocab_size"}), StatusCode::kInvalidArgument,
                      {path, "missing field 'vocab_size' (expected a positive integer)"});
}

TEST(HfExport, TensorsOfTheWrongSizeAreRefused) {
  auto info = read_hf_config(fixture("llama_tiny"));
  ASSERT_TRUE(info.ok());
  FullTensors tensors;
  tensors["embedding.word_embeddings.weight"].assign(128 * 32, 0.0f);  // padded vocabulary
  // Export reads the tensors in the config's shapes: a short one was read out of bounds (or,
  // copied as is, written as a tensor of the wrong size).
  tensors["decoder.layers.0.input_layernorm.weight"].assign(5, 0.0f);
  auto hf = export_hf_tensors(info->config, info->architecture, tensors);
  ASSERT_FALSE(hf.ok());
  EXPECT_EQ(hf.status().code(), StatusCode::kInvalidArgument) << hf.status().to_string();
  EXPECT_NE(hf.status().message().find("decoder.layers.0.input_layernorm.weight has 5 values but the model "
                                       "config needs 32"),
            std::string::npos)
      << hf.status().message();
}

}  // namespace
}  // namespace mindspeed
