// TensorBoard event files: CRC-32C against the standard check value and a bitwise
// implementation, the Event encoding against bytes made by protoc (Google's own encoder), and
// files written by SummaryWriter / TrainingMetrics read back by the independent reader
// (tests/tensorboard_event_reader.h: framing, both checksums, the messages), including which
// of Megatron's tags each option writes and when, and the queue.
#include "training/summary_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>

#include "scratch_dir.h"
#include "tensorboard_event_reader.h"
#include "training/training_metrics.h"

namespace mindspeed {
namespace {

using testing::read_event_file;
using testing::scalar_series;
using testing::ScratchDir;

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(entry.path());
  }
  return files;
}

TEST(SummaryWriter, Crc32cCheckValueAndBitwiseImplementation) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  std::mt19937 rng(7);
  for (size_t n : {1u, 3u, 8u, 255u, 4099u}) {
    std::string data(n, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    const auto* p = reinterpret_cast<const uint8_t*>(data.data());
    EXPECT_EQ(crc32c(data.data(), n), testing::crc32c_bitwise(p, n)) << n;
    EXPECT_EQ(masked_crc32c(data.data(), n), testing::tfrecord_mask(testing::crc32c_bitwise(p, n))) << n;
  }
}

// The expected bytes come from protoc 3.21 (Debian's protobuf-compiler) with a .proto holding
// the three messages' fields as tensorboard/compat/proto/{event,summary}.proto declare them:
//   printf 'wall_time: 1700000000.25\nstep: 300\nsummary { value { tag: "lm loss" simple_value: 5.5 } }\n' |
//     protoc --encode=tensorboard.Event event.proto | xxd -p
TEST(SummaryWriter, EventEncodingEqualsProtoc) {
  EXPECT_EQ(hex(encode_scalar_event(1700000000.25, 300, "lm loss", 5.5f)),
            "0900001040fc54d94110ac022a100a0e0a076c6d206c6f7373150000b040");
  EXPECT_EQ(hex(encode_file_version_event(1700000000.25, "brain.Event:2")),
            "0900001040fc54d9411a0d627261696e2e4576656e743a32");
  EXPECT_EQ(hex(encode_scalar_event(1.5, -2, "x", -0.125f)),
            "09000000000000f83f10feffffffffffffffff012a0a0a080a017815000000be");
}

TEST(SummaryWriter, FramesAreReadBackByAnIndependentReader) {
  ScratchDir dir("tb");
  std::string path;
  {
    auto writer = SummaryWriter::create(dir.file("run"), 1000);
    ASSERT_TRUE(writer.ok()) << writer.status().to_string();
    path = (*writer)->path();
    for (int i = 1; i <= 5; ++i) (*writer)->add_scalar("lm loss", 10.0 / i, i, 100.0 + i);
    (*writer)->add_scalar("lm loss vs samples", 2.5, 1ll << 40, 200.0);
  }
  const std::regex name(R"(events\.out\.tfevents\.\d{10}\.[^./]+.*\.\d+\.\d+)");
  EXPECT_TRUE(std::regex_match(std::filesystem::path(path).filename().string(), name)) << path;
  const testing::TbFile file = read_event_file(path);
  ASSERT_EQ(file.error, "");
  ASSERT_EQ(file.events.size(), 7u);
  EXPECT_EQ(file.events[0].file_version, "brain.Event:2");
  EXPECT_FALSE(file.events[0].has_summary);
  EXPECT_GT(file.events[0].wall_time, 1.6e9);
  const auto loss = scalar_series(file, "lm loss");
  ASSERT_EQ(loss.size(), 5u);
  for (int i = 1; i <= 5; ++i) {
    EXPECT_EQ(loss[i - 1].first, i);
    EXPECT_EQ(loss[i - 1].second, static_cast<float>(10.0 / i));
    EXPECT_EQ(file.events[static_cast<size_t>(i)].wall_time, 100.0 + i);
  }
  EXPECT_EQ(scalar_series(file, "lm loss vs samples"), (std::vector<std::pair<int64_t, float>>{{1ll << 40, 2.5f}}));

  // A flipped bit anywhere is caught by a checksum (or the framing).
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (size_t at : {size_t{3}, size_t{9}, size_t{20}, bytes.size() - 1}) {
    std::string broken = bytes;
    broken[at] = static_cast<char>(broken[at] ^ 0x10);
    std::ofstream(dir.file("broken"), std::ios::binary) << broken;
    EXPECT_NE(read_event_file(dir.file("broken")).error, "") << "bit flipped at byte " << at;
  }
}

TEST(SummaryWriter, EventsWaitInTheQueueUntilItIsFull) {
  ScratchDir dir("tb");
  auto writer = SummaryWriter::create(dir.path(), 3);
  ASSERT_TRUE(writer.ok());
  SummaryWriter& w = **writer;
  EXPECT_EQ(read_event_file(w.path()).events.size(), 1u);  // file_version, written at once
  w.add_scalar("a", 1, 1);
  w.add_scalar("a", 2, 2);
  EXPECT_EQ(read_event_file(w.path()).events.size(), 1u);
  w.add_scalar("a", 3, 3);  // the third queued event writes the queue
  EXPECT_EQ(read_event_file(w.path()).events.size(), 4u);
  w.add_scalar("a", 4, 4);
  ASSERT_TRUE(w.flush().ok());
  EXPECT_EQ(read_event_file(w.path()).events.size(), 5u);
  EXPECT_TRUE(w.status().ok());
}

TEST(SummaryWriter, UncreatableDirectoryIsAnError) {
  ScratchDir dir("tb");
  std::ofstream(dir.file("file")) << "x";
  const auto writer = SummaryWriter::create(dir.file("file") + "/sub", 10);
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("--tensorboard-dir"), std::string::npos) << writer.status().to_string();
}

IterationScalars scalars(int64_t it) {
  IterationScalars s;
  s.iteration = it;
  s.consumed_train_samples = 16 * it;
  s.learning_rate = 1e-3 / static_cast<double>(it);
  s.batch_size = 16;
  s.lm_loss = 8.0 - 0.1 * static_cast<double>(it);
  s.grad_norm = 2.0 + static_cast<double>(it);
  s.world_size = 4;
  return s;
}

std::set<std::string> tags_at(const testing::TbFile& file, int64_t step) {
  std::set<std::string> tags;
  for (const auto& e : file.events) {
    if (e.step != step) continue;
    for (const auto& [tag, v] : e.values) tags.insert(tag);
  }
  return tags;
}

// Megatron's tags and when each is written, per option (training.py training_log and
// evaluate_and_print_results, core_v0.12).
TEST(TrainingMetrics, MegatronTagsPerOption) {
  ScratchDir dir("tb");
  Allocator alloc;
  void* block = alloc.allocate(4096, MemoryCategory::kActivations);
  {
    LoggingConfig config;
    config.tensorboard_dir = dir.file("defaults");
    auto metrics = TrainingMetrics::open(config, true);
    ASSERT_TRUE(metrics.ok());
    (*metrics)->training_iteration(scalars(1));
    (*metrics)->evaluation("validation", 1, 16, 3.0, true);
    (*metrics)->evaluation("test", 1, 16, 3.5, false);  // --skip-train: not written
  }
  testing::TbFile file = read_event_file(event_files(dir.file("defaults")).at(0));
  ASSERT_EQ(file.error, "");
  EXPECT_EQ(tags_at(file, 1), (std::set<std::string>{"learning-rate", "batch-size", "lm loss", "loss-scale",
                                                     "grad-norm", "lm loss validation"}));
  EXPECT_EQ(tags_at(file, 16), (std::set<std::string>{"learning-rate vs samples", "batch-size vs samples",
                                                      "lm loss vs samples", "loss-scale vs samples",
                                                      "grad-norm vs samples", "lm loss validation vs samples"}));
  EXPECT_EQ(scalar_series(file, "lm loss validation"), (std::vector<std::pair<int64_t, float>>{{1, 3.0f}}));
  EXPECT_EQ(scalar_series(file, "learning-rate"), (std::vector<std::pair<int64_t, float>>{{1, 1e-3f}}));
  EXPECT_EQ(scalar_series(file, "grad-norm"), (std::vector<std::pair<int64_t, float>>{{1, 3.0f}}));
  EXPECT_TRUE(std::filesystem::exists(dir.file("defaults/metrics.jsonl")));

  {
    LoggingConfig config;
    config.tensorboard_dir = dir.file("all");
    config.tensorboard_log_interval = 2;
    config.log_timers_to_tensorboard = true;
    config.log_memory_to_tensorboard = true;
    config.log_validation_ppl_to_tensorboard = true;
    config.log_world_size_to_tensorboard = true;
    config.log_loss_scale_to_tensorboard = false;
    config.log_learning_rate_to_tensorboard = false;
    auto metrics = TrainingMetrics::open(config, true);
    ASSERT_TRUE(metrics.ok());
    for (int64_t it = 1; it <= 4; ++it) {
      IterationScalars s = scalars(it);
      s.allocator = &alloc;
      (*metrics)->training_iteration(s);
    }
    IterationLog log;
    log.iteration = 4;
    log.elapsed_ms_per_iteration = 250.0;
    log.tflops_per_rank = 1.5;
    (*metrics)->log_line(log);
    (*metrics)->evaluation("validation", 4, 64, 25.0, true);
  }
  file = read_event_file(event_files(dir.file("all")).at(0));
  ASSERT_EQ(file.error, "");
  EXPECT_EQ(tags_at(file, 1), std::set<std::string>{}) << "only every --tensorboard-log-interval iterations";
  EXPECT_EQ(tags_at(file, 3), std::set<std::string>{});
  EXPECT_EQ(tags_at(file, 2), (std::set<std::string>{"batch-size", "lm loss", "world-size", "grad-norm",
                                                     "mem-reserved-bytes", "mem-allocated-bytes",
                                                     "mem-max-allocated-bytes", "mem-allocated-count"}));
  EXPECT_EQ(scalar_series(file, "world-size"), (std::vector<std::pair<int64_t, float>>{{2, 4.0f}, {4, 4.0f}}));
  EXPECT_EQ(scalar_series(file, "mem-allocated-count"), (std::vector<std::pair<int64_t, float>>{{2, 1.0f}, {4, 1.0f}}));
  EXPECT_EQ(scalar_series(file, "mem-allocated-bytes").at(0).second, 4096.0f);
  EXPECT_EQ(scalar_series(file, "iteration-time"), (std::vector<std::pair<int64_t, float>>{{4, 0.25f}}));
  EXPECT_EQ(scalar_series(file, "throughput"), (std::vector<std::pair<int64_t, float>>{{4, 1.5f}}));
  // Megatron's perplexity: exp(min(20, loss)).
  EXPECT_EQ(scalar_series(file, "lm loss validation ppl"),
            (std::vector<std::pair<int64_t, float>>{{4, static_cast<float>(std::exp(20.0))}}));
  EXPECT_EQ(scalar_series(file, "lm loss validation ppl vs samples").size(), 1u);
  alloc.deallocate(block);
}

TEST(TrainingMetrics, OtherRanksWriteNothing) {
  ScratchDir dir("tb");
  LoggingConfig config;
  config.tensorboard_dir = dir.file("tb");
  auto metrics = TrainingMetrics::open(config, false);
  ASSERT_TRUE(metrics.ok());
  (*metrics)->training_iteration(scalars(1));
  (*metrics)->log_line(IterationLog{});
  EXPECT_FALSE(std::filesystem::exists(dir.file("tb")));
}

TEST(TrainingMetrics, MetricsFileLinesAreJsonWithTheLogNumbers) {
  ScratchDir dir("tb");
  LoggingConfig config;
  config.metrics_file = dir.file("sub/m.jsonl");  // without --tensorboard-dir
  {
    auto metrics = TrainingMetrics::open(config, true);
    ASSERT_TRUE(metrics.ok());
    EXPECT_EQ((*metrics)->tensorboard(), nullptr);
    IterationLog l;
    l.iteration = 10;
    l.train_iters = 20;
    l.consumed_samples = 160;
    l.lm_loss = 1.0 / 3.0;
    l.learning_rate = 0.1;
    l.grad_norm = std::nan("");
    l.time_left_seconds = 12.5;
    (*metrics)->log_line(l);
    (*metrics)->evaluation("test", 20, 320, 2.0, true);
  }
  std::ifstream in(dir.file("sub/m.jsonl"));
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["type"], "iteration");
  EXPECT_EQ(lines[0]["iteration"], 10);
  EXPECT_EQ(lines[0]["consumed_samples"], 160);
  EXPECT_EQ(lines[0]["lm_loss"].get<double>(), 1.0 / 3.0) << "full precision";
  EXPECT_TRUE(lines[0]["grad_norm"].is_null()) << "a non-finite number is null";
  EXPECT_EQ(lines[0]["time_left_seconds"], 12.5);
  EXPECT_FALSE(lines[0].contains("mfu"));
  EXPECT_EQ(lines[1]["type"], "evaluation");
  EXPECT_EQ(lines[1]["set"], "test");
  EXPECT_EQ(lines[1]["lm_loss_ppl"].get<double>(), std::exp(2.0));
  // Appended by a resumed run.
  {
    auto metrics = TrainingMetrics::open(config, true);
    ASSERT_TRUE(metrics.ok());
    (*metrics)->evaluation("validation", 30, 480, 1.5, true);
  }
  std::ifstream again(dir.file("sub/m.jsonl"));
  int count = 0;
  while (std::getline(again, line)) ++count;
  EXPECT_EQ(count, 3);
}

}  // namespace
}  // namespace mindspeed
