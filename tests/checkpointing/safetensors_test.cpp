// Safetensors reader and writer: round trip, dtype conversions, and every kind of damage a
// file can have (truncation, a header length past the end, bad JSON, offsets outside the
// data, sizes that do not match the shape, overlapping tensors, unknown dtypes) is an error
// that names the file and the tensor, never a crash; header fields of the wrong type are
// named, and names the JSON header cannot hold are refused when writing, not thrown.
#include "checkpointing/safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>
#include <unistd.h>

namespace mindspeed {
namespace {

std::string temp_path(const std::string& name) {
  return "/tmp/ms_safetensors_" + std::to_string(getpid()) + "_" + name;
}

void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

TEST(Safetensors, RoundTripAndConversions) {
  const std::string path = temp_path("ok.safetensors");
  ASSERT_TRUE(write_safetensors(path, {{"a", {2, 3}, {1, 2, 3, 4, 5, 6}, {}}, {"ids", {2}, {}, {7, -1}}},
                                {{"format", "pt"}})
                  .ok());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->metadata().at("format"), "pt");
  auto a = f->read_f32("a", {2, 3});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)[5], 6.0f);
  EXPECT_EQ(f->read_i32("ids").value(), (std::vector<int32_t>{7, -1}));
  auto wrong = f->read_f32("a", {3, 2});
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("shape [2,3,] but the model needs [3,2,]"), std::string::npos);
  EXPECT_EQ(f->read_f32("missing").status().code(), StatusCode::kNotFound);
  // bf16 (0x3fc0 = 1.5) and f16 (0x3e00 = 1.5) are widened to fp32.
  const std::string p2 = temp_path("half.safetensors");
  write_raw(p2, R"({"b":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},"h":{"dtype":"F16","shape":[1],"data_offsets":[2,4]}})",
            std::string("\xc0\x3f\x00\x3e", 4));
  auto h = SafetensorsFile::open(p2);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->read_f32("b").value()[0], 1.5f);
  EXPECT_EQ(h->read_f32("h").value()[0], 1.5f);
  std::remove(path.c_str());
  std::remove(p2.c_str());
}

// A rank reads only its shard: rows (stride 1) or, for a transposed layout, columns (stride
// = the row width), converted from the file's dtype; elements past the tensor are refused.
TEST(Safetensors, ElementsAreReadStridedFromTheMapping) {
  const std::string path = temp_path("strided.safetensors");
  ASSERT_TRUE(write_safetensors(path, {{"a", {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {}}}).ok());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<float> out(3, -1.0f);
  ASSERT_TRUE(f->read_f32_elements("a", 2, 3, 4, out.data()).ok());  // column 2
  EXPECT_EQ(out, (std::vector<float>{2, 6, 10}));
  ASSERT_TRUE(f->read_f32_elements("a", 5, 2, 1, out.data()).ok());  // row 1, columns 1..2
  EXPECT_EQ(out[0], 5.0f);
  EXPECT_EQ(out[1], 6.0f);
  for (const auto& [first, count, stride] : {std::tuple{3, 4, 4}, {12, 1, 1}, {-1, 1, 1}, {0, 13, 1}, {0, 2, 0}}) {
    const Status s = f->read_f32_elements("a", first, count, stride, out.data());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << first << " " << count << " " << stride;
    EXPECT_NE(s.message().find("has no elements"), std::string::npos) << s.message();
  }
  EXPECT_EQ(f->read_f32_elements("b", 0, 1, 1, out.data()).code(), StatusCode::kNotFound);
  EXPECT_TRUE(f->check_shape("a", {3, 4}).ok());
  EXPECT_EQ(f->check_shape("a", {4, 3}).code(), StatusCode::kInvalidArgument);
  // Half-precision columns: bf16 1.5, 2.0 / 3.0, 4.0 (rows), column 1 read with stride 2.
  const std::string p2 = temp_path("strided_bf16.safetensors");
  write_raw(p2, R"({"b":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})",
            std::string("\xc0\x3f\x00\x40\x40\x40\x80\x40", 8));
  auto h = SafetensorsFile::open(p2);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  ASSERT_TRUE(h->read_f32_elements("b", 1, 2, 2, out.data()).ok());
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 4.0f);
  std::remove(path.c_str());
  std::remove(p2.c_str());
}

struct Damage {
  const char* name;
  std::string header;
  std::string data;
  const char* message;
};

TEST(Safetensors, DamagedFilesAreErrorsNamingTheProblem) {
  const std::string good_data(8, '\0');
  const Damage cases[] = {
      {"offsets_past_end", R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", good_data, "fall outside"},
      {"size_mismatch", R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", good_data, "need 12"},
      {"overlap", R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       good_data, "overlap"},
      {"bad_json", R"({"x":{"dtype":"F32",)", good_data, "not a JSON object"},
      {"unknown_dtype", R"({"x":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", good_data, "unknown dtype"},
      {"missing_fields", R"({"x":{"dtype":"F32"}})", good_data, "needs dtype, shape and data_offsets"},
  };
  for (const Damage& d : cases) {
    const std::string path = temp_path(d.name);
    write_raw(path, d.header, d.data);
    auto f = SafetensorsFile::open(path);
    ASSERT_FALSE(f.ok()) << d.name;
    EXPECT_NE(f.status().message().find(d.message), std::string::npos) << d.name << ": " << f.status().message();
    EXPECT_NE(f.status().message().find(path), std::string::npos) << d.name;
    std::remove(path.c_str());
  }
  // Header length beyond the file, and a file shorter than the length field.
  const std::string p = temp_path("trunc");
  {
    std::ofstream out(p, std::ios::binary);
    const uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  EXPECT_EQ(SafetensorsFile::open(p).status().code(), StatusCode::kDataLoss);
  {
    std::ofstream out(p, std::ios::binary);
    out << "abc";
  }
  EXPECT_EQ(SafetensorsFile::open(p).status().code(), StatusCode::kDataLoss);
  std::remove(p.c_str());
  EXPECT_EQ(SafetensorsFile::open(temp_path("absent")).status().code(), StatusCode::kNotFound);
}

TEST(Safetensors, HeaderFieldsOfTheWrongTypeAreNamed) {
  const Damage cases[] = {
      // 2^32 x 2^32 elements wrapped around to 0 and passed the size check.
      {"wrapping_shape", R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", "",
       "more elements than the 0-byte data section holds"},
      {"huge_shape", R"({"x":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]}})",
       std::string(8, '\0'), "bad shape entry number 18446744073709551615 (expected a non-negative integer)"},
      {"string_shape", R"({"x":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", std::string(8, '\0'),
       "bad shape entry string \"2\""},
      {"huge_offset", R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})",
       std::string(8, '\0'), "data_offsets array [0,18446744073709551615] (expected two non-negative integers)"},
      {"truncated_json", R"({"x":{"dtype":"F32","sha)", "", "parse error at line 1, column"},
      {"array_header", R"([1,2])", "", "not a JSON object but a JSON array"},
  };
  for (const Damage& d : cases) {
    const std::string path = temp_path(d.name);
    write_raw(path, d.header, d.data);
    auto f = SafetensorsFile::open(path);
    ASSERT_FALSE(f.ok()) << d.name << " was accepted";
    EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << d.name;
    EXPECT_NE(f.status().message().find(d.message), std::string::npos) << d.name << ": " << f.status().message();
    EXPECT_NE(f.status().message().find(path), std::string::npos) << d.name;
    std::remove(path.c_str());
  }
}

TEST(Safetensors, NamesTheHeaderCannotHoldAreRefused) {
  const std::string path = temp_path("names.safetensors");
  // nlohmann::json::dump() throws on invalid UTF-8; a repeated name or "__metadata__" was
  // written into a header that lost a tensor.
  const std::string bad_utf8 = "w\xff";
  Status s = write_safetensors(path, {{bad_utf8, {1}, {1.0f}, {}}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("is not valid UTF-8"), std::string::npos) << s.message();
  s = write_safetensors(path, {{"a", {1}, {1.0f}, {}}}, {{"format", bad_utf8}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("metadata entry 'format' is not valid UTF-8"), std::string::npos) << s.message();
  s = write_safetensors(path, {{"a", {1}, {1.0f}, {}}, {"a", {1}, {2.0f}, {}}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("tensor name 'a' is used twice"), std::string::npos) << s.message();
  s = write_safetensors(path, {{"__metadata__", {1}, {1.0f}, {}}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("reserved for the metadata"), std::string::npos) << s.message();
  std::remove(path.c_str());
}

// Found by tests/fuzz (corpus/safetensors/crash_empty_tensor_memcpy): reading a tensor with
// no elements passed a null pointer to memcpy (undefined behaviour).
TEST(Safetensors, EmptyTensorsRead) {
  const std::string path = temp_path("empty.safetensors");
  write_raw(path,
            R"({"f":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},)"
            R"("i":{"dtype":"I32","shape":[0],"data_offsets":[0,0]}})",
            "");
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto floats = f->read_f32("f", {0, 4});
  ASSERT_TRUE(floats.ok()) << floats.status().to_string();
  EXPECT_TRUE(floats->empty());
  auto ints = f->read_i32("i");
  ASSERT_TRUE(ints.ok()) << ints.status().to_string();
  EXPECT_TRUE(ints->empty());
}

// An I64 value outside int32 is refused instead of wrapping (2^32 + 5 would read as 5).
TEST(Safetensors, I64ValuesOutsideInt32AreRefused) {
  const std::string path = temp_path("i64.safetensors");
  const int64_t values[2] = {7, (int64_t{1} << 32) + 5};
  write_raw(path, R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
            std::string(reinterpret_cast<const char*>(values), 16));
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto ids = f->read_i32("ids");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ids.status().message().find(
                "i64.safetensors: tensor 'ids' element 1 is 4294967301, which does not fit int32"),
            std::string::npos)
      << ids.status().message();
}

// A header value 100000 arrays deep overflowed the stack while the error message printed it
// (corpus/safetensors/crash_deeply_nested_shape).
TEST(Safetensors, DeeplyNestedHeaderValueIsNamedWithoutOverflow) {
  const std::string path = temp_path("deep.safetensors");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  write_raw(path, R"({"t":{"dtype":"F32","shape":[)" + deep + R"(],"data_offsets":[0,0]}})", "");
  auto f = SafetensorsFile::open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("tensor 't' has a bad shape entry array [[[[[[[[[[[[[[[[[...]]]]"),
            std::string::npos)
      << f.status().message();
}

TEST(Safetensors, WriteIsAtomic) {
  // Writing into a directory that does not exist fails cleanly and leaves nothing behind.
  const Status s = write_safetensors("/nonexistent_dir_ms/x.safetensors", {{"a", {1}, {1.0f}, {}}});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot create"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace mindspeed
