// End-to-end tests of tools/merge_datasets against the datasets of
// tests/datasets/reference (written by an independent Python writer).
#include <gtest/gtest.h>

#include <filesystem>

#include "tools/tools_test_util.h"

namespace mindspeed {
namespace {

using testing::read_file;
using testing::run_tool;
using testing::ScratchDir;
using testing::source_path;
using testing::write_file;

const std::string kReference = source_path("tests/datasets/reference/indexed_");

void copy_dataset(const std::string& name, const ScratchDir& dir, const std::string& as) {
  for (const char* ext : {".bin", ".idx"}) {
    std::filesystem::copy_file(kReference + name + ext, dir.file(as + ext));
  }
}

void expect_same(const std::string& prefix, const std::string& name) {
  for (const char* ext : {".bin", ".idx"}) {
    EXPECT_TRUE(read_file(prefix + ext) == read_file(kReference + name + ext)) << name << ext;
  }
}

TEST(MergeDatasets, MergesInSortedOrder) {
  ScratchDir in("merge_in"), out("merge_out");
  copy_dataset("u16b", in, "x1");  // listed order does not matter: x0 comes first
  copy_dataset("u16", in, "x0");
  const auto r = run_tool("merge_datasets",
                          {"--input", in.file(""), "--output-prefix", out.file("merged")});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same(out.file("merged"), "merged");
  EXPECT_NE(r.output.find("2 datasets, 17 documents"), std::string::npos) << r.output;
}

TEST(MergeDatasets, Multimodal) {
  ScratchDir in("merge_in"), out("merge_out");
  copy_dataset("mm", in, "only");
  const auto r = run_tool("merge_datasets", {"--input", in.file(""), "--output-prefix",
                                             out.file("mm"), "--multimodal"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same(out.file("mm"), "mm");
}

TEST(MergeDatasets, Errors) {
  ScratchDir in("merge_in"), out("merge_out");
  const auto expect_error = [&](const std::string& fragment) {
    const auto r = run_tool("merge_datasets",
                            {"--input", in.file(""), "--output-prefix", out.file("m")});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(fragment), std::string::npos) << fragment << "\n" << r.output;
  };
  expect_error("holds no .bin/.idx pairs");
  copy_dataset("u16", in, "a");
  std::filesystem::remove(in.file("a.idx"));
  expect_error("a.idx' is missing");
  std::filesystem::copy_file(kReference + std::string("u16.idx"), in.file("a.idx"));
  write_file(in.file("README"), "stray");
  expect_error("README.idx' is missing");
  std::filesystem::remove(in.file("README"));
  copy_dataset("i32", in, "b");
  expect_error("dtype");
  std::filesystem::remove(in.file("b.bin"));
  std::filesystem::remove(in.file("b.idx"));
  write_file(in.file("c.idx"), "garbage");
  write_file(in.file("c.bin"), "");
  expect_error("c.idx");
  std::filesystem::remove(in.file("c.bin"));
  std::filesystem::remove(in.file("c.idx"));
  EXPECT_TRUE(out.entries().empty());

  auto r = run_tool("merge_datasets", {"--input", in.file("nope"), "--output-prefix",
                                       out.file("m")});
  EXPECT_NE(r.output.find("is not a directory"), std::string::npos) << r.output;
  r = run_tool("merge_datasets", {"--input", in.file(""), "--output-prefix", in.file("a")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("is one of the inputs"), std::string::npos) << r.output;
  r = run_tool("merge_datasets", {"--input", in.file("")});
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace mindspeed
