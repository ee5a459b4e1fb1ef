// Reading torch.save files: the Megatron-LM legacy checkpoint fixture
// (tests/tools/make_megatron_torch_fixture.py) parses to its args namespace and tensors, and
// damaged archives and pickles outside torch.save's subset are errors naming the file, never
// a crash or code execution.
#include "checkpointing/torch_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "scratch_dir.h"

namespace mindspeed {
namespace {

const std::string kFixture = std::string(MS_SOURCE_DIR) +
                             "/tests/tools/data/megatron_torch_llama/iter_0000007/mp_rank_01_001/model_optim_rng.pt";

TEST(TorchCheckpoint, ReadsMegatronsArgsAndTensors) {
  auto f = TorchCheckpointFile::open(kFixture);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const PickleValue* args = f->root().get("args");
  ASSERT_NE(args, nullptr);
  EXPECT_EQ(args->object_class, "argparse.Namespace");
  ASSERT_NE(args->get("num_layers"), nullptr);
  EXPECT_EQ(args->get("num_layers")->i, 2);
  EXPECT_EQ(args->get("normalization")->s, "RMSNorm");
  EXPECT_EQ(args->get("params_dtype")->kind, PickleValue::Kind::kGlobal);  // torch.float32 stays a name
  EXPECT_EQ(args->get("params_dtype")->s, "torch.float32");
  EXPECT_EQ(f->root().get("iteration")->i, 7);
  EXPECT_EQ(f->root().get("checkpoint_version")->f, 3.0);
  const PickleValue* model = f->root().get("model");
  ASSERT_NE(model, nullptr);
  const PickleValue* out = model->get("output_layer.weight");  // last stage, tensor-parallel rank 1
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(out->kind, PickleValue::Kind::kTensor);
  // The vocabulary (100) padded as Megatron pads it at TP2: 256 rows, 128 on each rank.
  EXPECT_EQ(out->tensor->shape, (std::vector<int64_t>{128, 32}));
  auto values = f->read_f32(*out->tensor);
  ASSERT_TRUE(values.ok()) << values.status().to_string();
  EXPECT_EQ(values->size(), 128u * 32u);
}

// A zip archive with stored entries, as torch.save writes it; `zip64` writes the sizes and
// offsets the way archives over 4 GiB must (zip64 extra fields and end records).
std::string zip(const std::vector<std::pair<std::string, std::string>>& entries, bool zip64 = false) {
  std::string out, central;
  auto u16 = [](std::string& s, uint16_t v) { s.append(reinterpret_cast<const char*>(&v), 2); };
  auto u32 = [](std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [](std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); };
  const uint32_t big = 0xffffffffu;
  for (const auto& [name, data] : entries) {
    const uint64_t offset = out.size();
    u32(out, 0x04034b50); u16(out, 20); u16(out, 0); u16(out, 0); u16(out, 0); u16(out, 0);
    u32(out, 0); u32(out, static_cast<uint32_t>(data.size())); u32(out, static_cast<uint32_t>(data.size()));
    u16(out, static_cast<uint16_t>(name.size())); u16(out, 0);
    out += name + data;
    u32(central, 0x02014b50); u16(central, 45); u16(central, 45); u16(central, 0); u16(central, 0);
    u16(central, 0); u16(central, 0); u32(central, 0);
    u32(central, zip64 ? big : static_cast<uint32_t>(data.size()));
    u32(central, zip64 ? big : static_cast<uint32_t>(data.size()));
    u16(central, static_cast<uint16_t>(name.size())); u16(central, zip64 ? 28 : 0); u16(central, 0); u16(central, 0);
    u16(central, 0); u32(central, 0); u32(central, zip64 ? big : static_cast<uint32_t>(offset));
    central += name;
    if (zip64) {
      u16(central, 1); u16(central, 24); u64(central, data.size()); u64(central, data.size()); u64(central, offset);
    }
  }
  const uint64_t cd_offset = out.size();
  out += central;
  if (zip64) {
    const uint64_t record = out.size();
    u32(out, 0x06064b50); u64(out, 44); u16(out, 45); u16(out, 45); u32(out, 0); u32(out, 0);
    u64(out, entries.size()); u64(out, entries.size()); u64(out, central.size()); u64(out, cd_offset);
    u32(out, 0x07064b50); u32(out, 0); u64(out, record); u32(out, 1);
  }
  u32(out, 0x06054b50); u16(out, 0); u16(out, 0);
  u16(out, zip64 ? 0xffff : static_cast<uint16_t>(entries.size()));
  u16(out, zip64 ? 0xffff : static_cast<uint16_t>(entries.size()));
  u32(out, zip64 ? big : static_cast<uint32_t>(central.size()));
  u32(out, zip64 ? big : static_cast<uint32_t>(cd_offset)); u16(out, 0);
  return out;
}

// The pickle torch.save writes for {'x': tensor([1.5, -2.0])} (storage record '0').
std::string tiny_tensor_pickle() {
  auto text = [](const std::string& v) {
    const uint32_t n = static_cast<uint32_t>(v.size());
    return std::string("X") + std::string(reinterpret_cast<const char*>(&n), 4) + v;
  };
  return std::string("\x80\x02}(", 4) + text("x") + "ctorch._utils\n_rebuild_tensor_v2\n((" + text("storage") +
         "ctorch\nFloatStorage\n" + text("0") + text("cpu") + std::string("K\x02tQK\x00K\x02\x85K\x01\x85\x89", 13) +
         "ccollections\nOrderedDict\n)RtRu.";
}

// (The zip64 layout written here was checked once with Python's zipfile, which reads the same
// sizes and offsets from it.)
TEST(TorchCheckpoint, Zip64ArchivesAreRead) {
  testing::ScratchDir dir("torch_zip64");
  const float values[2] = {1.5f, -2.0f};
  const std::string storage(reinterpret_cast<const char*>(values), sizeof values);
  for (bool zip64 : {false, true}) {
    testing::write_file(dir.file("t.pt"), zip({{"t/data.pkl", tiny_tensor_pickle()}, {"t/data/0", storage}}, zip64));
    auto f = TorchCheckpointFile::open(dir.file("t.pt"));
    ASSERT_TRUE(f.ok()) << (zip64 ? "zip64: " : "") << f.status().to_string();
    const PickleValue* x = f->root().get("x");
    ASSERT_NE(x, nullptr);
    ASSERT_EQ(x->kind, PickleValue::Kind::kTensor);
    EXPECT_EQ(*f->read_f32(*x->tensor), (std::vector<float>{1.5f, -2.0f}));
  }
}

TEST(TorchCheckpoint, DamagedArchivesAndForeignPicklesAreRefused) {
  testing::ScratchDir dir("torch_ckpt");
  struct Case {
    const char* what;
    std::string bytes;
    const char* message;
  };
  const Case cases[] = {
      {"not a zip", std::string(100, 'x'), "is not a zip archive"},
      {"no data.pkl", zip({{"a/other", "x"}}), "holds no <name>/data.pkl"},
      {"memo never set", zip({{"a/data.pkl", std::string("\x80\x02}q\x00h\x05.", 8)}}), "memo index 5 was never set"},
      {"INST opcode", zip({{"a/data.pkl", std::string("\x80\x02i", 3)}}), "is not one torch.save writes"},
      {"no STOP", zip({{"a/data.pkl", std::string("\x80\x02}", 3)}}), "no STOP opcode"},
      {"truncated string", zip({{"a/data.pkl", std::string("\x80\x02X\xff\x00\x00\x00" "ab", 9)}}), "truncated"},
      {"SETITEMS without a dict", zip({{"a/data.pkl", std::string("\x80\x02(K\x01K\x02u.", 9)}}), "SETITEMS"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file("case.pt");
    testing::write_file(path, c.bytes);
    auto f = TorchCheckpointFile::open(path);
    ASSERT_FALSE(f.ok()) << c.what;
    EXPECT_NE(f.status().message().find(c.message), std::string::npos) << c.what << ": " << f.status().message();
    EXPECT_NE(f.status().message().find(path), std::string::npos) << c.what << ": the file is named";
  }
  // A truncated copy of the real fixture.
  const std::string real = testing::read_file(kFixture);
  testing::write_file(dir.file("cut.pt"), real.substr(0, real.size() / 2));
  EXPECT_FALSE(TorchCheckpointFile::open(dir.file("cut.pt")).ok());
}

}  // namespace
}  // namespace mindspeed
