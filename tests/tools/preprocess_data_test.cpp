// End-to-end tests of tools/preprocess_data: output bytes against references written without
// our C++ code (tests/tools/reference/make_preprocess_reference.py: npm gpt-3-encoder /
// spm_encode ids, Megatron's document assembly, an independent .idx/.bin writer).
#include <gtest/gtest.h>
#include <zlib.h>

#include <regex>

#include "tools/tools_test_util.h"

namespace mindspeed {
namespace {

using testing::read_file;
using testing::run_tool;
using testing::ScratchDir;
using testing::source_path;
using testing::write_file;

const std::string kData = source_path("tests/tools/data/");
const std::string kReference = source_path("tests/tools/reference/");

std::vector<std::string> gpt2_args(const std::string& input, const std::string& prefix) {
  return {"--input", input, "--output-prefix", prefix, "--tokenizer-type", "GPT2BPETokenizer",
          "--vocab-file", source_path("data/gpt2/gpt2-vocab.json"), "--merge-file",
          source_path("data/gpt2/gpt2-merges.txt")};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Both files of `prefix` equal those of the reference dataset `name`.
void expect_dataset(const std::string& prefix, const std::string& name) {
  for (const char* ext : {".bin", ".idx"}) {
    const std::string got = read_file(prefix + ext);
    const std::string want = read_file(kReference + name + ext);
    ASSERT_FALSE(want.empty()) << name << ext;
    EXPECT_TRUE(got == want) << prefix << ext << " differs from reference " << name << ext << " ("
                             << got.size() << " vs " << want.size() << " bytes)";
  }
}

TEST(PreprocessData, SmallCorpusTwoKeysMatchesReference) {
  ScratchDir dir("pp");
  const auto r = run_tool("preprocess_data", gpt2_args(kData + "small.jsonl", dir.file("out")) +
                                                 std::vector<std::string>{"--json-keys", "text",
                                                                          "title", "--append-eod",
                                                                          "--workers", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Both keys are finalized (Megatron's script finalizes only the last key).
  expect_dataset(dir.file("out_text_document"), "small_text_document");
  expect_dataset(dir.file("out_title_document"), "small_title_document");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"out_text_document.bin",
                                                     "out_text_document.idx",
                                                     "out_title_document.bin",
                                                     "out_title_document.idx"}));
  EXPECT_NE(r.output.find("37 documents"), std::string::npos) << r.output;
}

TEST(PreprocessData, GzipInputAndOneWorker) {
  ScratchDir dir("pp");
  const auto r = run_tool("preprocess_data", gpt2_args(kData + "small.jsonl.gz", dir.file("gz")) +
                                                 std::vector<std::string>{"--append-eod",
                                                                          "--workers", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_dataset(dir.file("gz_text_document"), "small_text_document");
}

TEST(PreprocessData, WithoutAppendEod) {
  ScratchDir dir("pp");
  const auto r = run_tool("preprocess_data", gpt2_args(kData + "small.jsonl", dir.file("o")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_dataset(dir.file("o_text_document"), "small_noeod_text_document");
}

TEST(PreprocessData, PartitionsFollowMegatronOrder) {
  ScratchDir dir("pp");
  auto r = run_tool("preprocess_data", gpt2_args(kData + "small.jsonl", dir.file("p")) +
                                           std::vector<std::string>{"--append-eod", "--workers",
                                                                    "3", "--partitions", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_dataset(dir.file("p_text_document"), "small_p3_text_document");
  EXPECT_EQ(dir.entries(),
            (std::vector<std::string>{"p_text_document.bin", "p_text_document.idx"}));
  r = run_tool("preprocess_data",
               gpt2_args(kData + "small.jsonl", dir.file("s")) +
                   std::vector<std::string>{"--append-eod", "--workers", "2", "--partitions", "2",
                                            "--keep-sequential-samples"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_dataset(dir.file("s_text_document"), "small_text_document");
}

// The whole embedded corpus (many batches, reordered across 2 workers), against the CRC-32s
// of the reference pipeline's files.
TEST(PreprocessData, KjvCorpusMatchesReference) {
  ScratchDir dir("pp");
  const auto r = run_tool("preprocess_data",
                          gpt2_args(source_path("data/corpus/kjv.jsonl.gz"), dir.file("kjv")) +
                              std::vector<std::string>{"--append-eod", "--workers", "2",
                                                       "--log-interval", "500"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Processed 1000 documents ("), std::string::npos) << r.output;
  std::istringstream expected(read_file(kReference + "kjv_expected.txt"));
  std::string ext, crc_hex;
  size_t size = 0;
  int checked = 0;
  while (expected >> ext >> size >> crc_hex) {
    const std::string got = read_file(dir.file("kjv_text_document." + ext));
    EXPECT_EQ(got.size(), size) << ext;
    const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(got.data()),
                            static_cast<uInt>(got.size()));
    char hex[16];
    std::snprintf(hex, sizeof(hex), "%08lx", static_cast<unsigned long>(crc));
    EXPECT_EQ(hex, crc_hex) << ext;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

TEST(PreprocessData, BadLineStopsWithFileAndLine) {
  ScratchDir dir("pp");
  const auto r = run_tool("preprocess_data", gpt2_args(kData + "bad.jsonl", dir.file("b")));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("bad.jsonl:3: invalid JSON"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--skip-bad-lines"), std::string::npos) << r.output;
  EXPECT_TRUE(dir.entries().empty());  // nothing left behind
}

TEST(PreprocessData, SkipBadLinesReportsAndCounts) {
  ScratchDir dir("pp");
  const auto r = run_tool("preprocess_data", gpt2_args(kData + "bad.jsonl", dir.file("b")) +
                                                 std::vector<std::string>{"--append-eod",
                                                                          "--skip-bad-lines"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_dataset(dir.file("b_text_document"), "bad_skip_text_document");
  for (const char* expected :
       {"bad.jsonl:3: invalid JSON", "bad.jsonl:5: no key 'text' (the object has: title",
        "bad.jsonl:6: key 'text' is a number", "bad.jsonl:7: empty line",
        "bad.jsonl:8: expected a JSON object, found a list",
        "bad.jsonl:9: key 'text' is a list holding a number", "bad.jsonl:10: invalid JSON",
        "bad.jsonl:11: invalid JSON", "bad.jsonl:13: invalid JSON",
        "9 bad line(s) skipped", "5 documents from 14 lines"}) {
    EXPECT_NE(r.output.find(expected), std::string::npos) << expected << "\n" << r.output;
  }
  EXPECT_EQ(r.output.find("bad.jsonl:12"), std::string::npos) << r.output;
}

TEST(PreprocessData, NullTokenizer) {
  ScratchDir dir("pp");
  auto r = run_tool("preprocess_data",
                    {"--input", kData + "null.jsonl", "--output-prefix", dir.file("n"),
                     "--tokenizer-type", "NullTokenizer", "--vocab-size", "70000",
                     "--append-eod"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_dataset(dir.file("n_text_document"), "null_text_document");  // int32: 70001 >= 65500
  // With --vocab-size 1000 the dtype is uint16 and id 69999 does not fit: a bad line.
  r = run_tool("preprocess_data",
               {"--input", kData + "null.jsonl", "--output-prefix", dir.file("m"),
                "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("null.jsonl:3: key 'text': token id 69999 does not fit"),
            std::string::npos)
      << r.output;
}

TEST(PreprocessData, Llama2Tokenizer) {
  ScratchDir dir("pp");
  const auto r = run_tool(
      "preprocess_data",
      {"--input", kData + "spm.jsonl", "--output-prefix", dir.file("l"), "--tokenizer-type",
       "Llama2Tokenizer", "--tokenizer-model",
       source_path("tests/tokenizer/reference/spm_bpe.model"), "--append-eod", "--workers", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_dataset(dir.file("l_text_document"), "spm_llama2_text_document");
}

TEST(PreprocessData, RefusesWhatItCannotDo) {
  ScratchDir dir("pp");
  const std::string input = kData + "small.jsonl";
  const auto expect_error = [&](const std::vector<std::string>& args, int code,
                                const std::string& fragment) {
    const auto r = run_tool("preprocess_data", args);
    EXPECT_EQ(r.exit_code, code) << r.output;
    EXPECT_NE(r.output.find(fragment), std::string::npos) << fragment << "\n" << r.output;
  };
  expect_error(gpt2_args(input, dir.file("x")) + std::vector<std::string>{"--split-sentences"}, 2,
               "--split-sentences is not supported");
  expect_error({"--input", input, "--output-prefix", dir.file("x"), "--tokenizer-type",
                "HuggingFaceTokenizer", "--tokenizer-model", "gpt2"},
               1, "HuggingFaceTokenizer is not implemented");
  expect_error(gpt2_args(input, dir.file("x")) +
                   std::vector<std::string>{"--workers", "3", "--partitions", "2"},
               2, "must be divisible by --partitions");
  expect_error(gpt2_args(input, dir.file("x")) + std::vector<std::string>{"--json-keys", "text",
                                                                          "text"},
               2, "twice");
  expect_error(gpt2_args(dir.file("missing.jsonl"), dir.file("x")), 1, "no such file");
  expect_error(gpt2_args(input, dir.file("no/dir/x")), 1, "no/dir/x_text_document.bin");
  expect_error({"--input", input, "--output-prefix", dir.file("x"), "--tokenizer-type",
                "GPT2BPETokenizer", "--vocab-file", source_path("data/gpt2/gpt2-merges.txt"),
                "--merge-file", source_path("data/gpt2/gpt2-merges.txt")},
               1, "gpt2-merges.txt");
  auto r = run_tool("preprocess_data", gpt2_args(input, dir.file("x")) +
                                           std::vector<std::string>{"--no-such-flag"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--no-such-flag"), std::string::npos) << r.output;
  r = run_tool("preprocess_data",
               {"--output-prefix", dir.file("x"), "--tokenizer-type", "GPT2BPETokenizer"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--input"), std::string::npos) << r.output;
  EXPECT_TRUE(dir.entries().empty());
}

// --workers outside 1..1024 is refused before anything starts (100000 threads used to end in
// "terminate called" with a .tmp file left behind).
TEST(PreprocessData, RefusesWorkersOutsideTheirRange) {
  ScratchDir dir("pp");
  for (const char* workers : {"100000", "1025", "0", "-3"}) {
    const auto r = run_tool("preprocess_data", gpt2_args(kData + "small.jsonl", dir.file("w")) +
                                                   std::vector<std::string>{"--workers", workers});
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(std::string("--workers ") + workers + " is outside 1..1024"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("terminate"), std::string::npos) << r.output;
    EXPECT_TRUE(dir.entries().empty());
  }
  const auto r = run_tool("preprocess_data", gpt2_args(kData + "small.jsonl", dir.file("w")) +
                                                 std::vector<std::string>{"--workers", "1024", "--append-eod"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_dataset(dir.file("w_text_document"), "small_text_document");
}

// An error after some datasets were put in place (here: an output name taken by a folder)
// removes them again: no partial output, no temporary files.
TEST(PreprocessData, ErrorAfterFinalizeLeavesNoPartialOutput) {
  ScratchDir dir("pp");
  std::filesystem::create_directory(dir.file("k_title_document.idx"));
  auto r = run_tool("preprocess_data", gpt2_args(kData + "small.jsonl", dir.file("k")) +
                                           std::vector<std::string>{"--json-keys", "text", "title"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("k_title_document.idx"), std::string::npos) << r.output;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"k_title_document.idx"});
  // With --partitions the per-partition datasets are finalized before the merge fails.
  std::filesystem::create_directory(dir.file("p_text_document.bin"));
  r = run_tool("preprocess_data", gpt2_args(kData + "small.jsonl", dir.file("p")) +
                                      std::vector<std::string>{"--workers", "2", "--partitions", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("p_text_document.bin"), std::string::npos) << r.output;
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"k_title_document.idx", "p_text_document.bin"}));
}

TEST(PreprocessData, TruncatedGzip) {
  ScratchDir dir("pp");
  const std::string gz = read_file(kData + "small.jsonl.gz");
  write_file(dir.file("cut.jsonl.gz"), gz.substr(0, gz.size() / 2));
  const auto r = run_tool("preprocess_data", gpt2_args(dir.file("cut.jsonl.gz"), dir.file("c")));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("truncated or corrupt"), std::string::npos) << r.output;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"cut.jsonl.gz"});
}

TEST(PreprocessData, ProgressLines) {
  ScratchDir dir("pp");
  const auto r = run_tool("preprocess_data", gpt2_args(kData + "small.jsonl", dir.file("g")) +
                                                 std::vector<std::string>{"--log-interval", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Processed 10 documents ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Processed 30 documents ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" docs/s, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" MB/s)."), std::string::npos) << r.output;
  // Not a terminal: plain lines, with the share of the input and the time left.
  const std::regex line(
      R"(\nProcessed 30 documents \([0-9.]+ docs/s, [0-9.]+ MB/s\)\. ([0-9.]+)% of the input, time left \d+:\d\d:\d\d\.\n)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  EXPECT_NEAR(std::stod(m[1]), 100.0 * 30 / 37, 10.0) << "30 of 37 similar documents";
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\033[K"), std::string::npos) << r.output;
  // From a pipe the size is unknown: no share, no time left.
  std::string command = "cat " + testing::shell_quote(kData + "small.jsonl") + " | " +
                        testing::shell_quote(std::string(MS_TOOLS_DIR) + "/preprocess_data");
  for (const std::string& a : gpt2_args("/dev/stdin", dir.file("p"))) {
    command += ' ';
    command += testing::shell_quote(a);
  }
  const auto piped = testing::run_shell(command + " --log-interval 10 2>&1");
  EXPECT_NE(piped.output.find("Processed 30 documents ("), std::string::npos) << piped.output;
  EXPECT_EQ(piped.output.find("time left"), std::string::npos) << piped.output;
}

// On a terminal (a pseudo-terminal here, output post-processing off so that every '\r' is
// the tool's): one line redrawn in place with a carriage return and erase-to-end-of-line,
// ended by a newline with the final counts.
TEST(PreprocessData, ProgressOnATerminalIsOneRedrawnLine) {
  ScratchDir dir("pp");
  std::vector<std::string> args = {std::string(MS_TOOLS_DIR) + "/preprocess_data"};
  for (const std::string& a : gpt2_args(kData + "small.jsonl", dir.file("t"))) args.push_back(a);
  const auto r = testing::run_on_terminal(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\rProcessed 1 documents ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\rProcessed 37 documents ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" MB/s). 100.0% of the input, time left 0:00:00.\033[K\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Processed ", r.output.find("Processed 37 documents (") + 1), std::string::npos)
      << "nothing after the final redraw: " << r.output;
}

}  // namespace
}  // namespace mindspeed
