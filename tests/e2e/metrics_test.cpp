// End-to-end: pretrain_gpt's TensorBoard event files, metrics file and time left against its
// own log lines, and tools/plot_metrics.sh on the metrics file.
//  - The event file is read by the independent reader (tests/tensorboard_event_reader.h:
//    framing, both CRC-32C checksums, the Event messages); every scalar equals the number of
//    the log line it belongs to (through the metrics file: its unrounded number prints as the
//    log line's text and, as a float, is the TensorBoard value).
//  - Megatron's tags at the iterations Megatron writes them; options switch them on and off;
//    only the last rank writes.
//  - Every metrics line parses as JSON and carries the numbers of its log line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/run_command.h"
#include "scratch_dir.h"
#include "tensorboard_event_reader.h"

namespace {

using mindspeed::testing::read_event_file;
using mindspeed::testing::run_command;
using mindspeed::testing::scalar_series;
using mindspeed::testing::ScratchDir;
using Json = nlohmann::json;
using Series = std::vector<std::pair<int64_t, float>>;

const std::string kBin = MS_PRETRAIN_GPT;
const std::string kMpirun = mindspeed::testing::mpirun_prefix(MS_MPIRUN);
const std::string kTiny =
    " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32"
    " --micro-batch-size 4 --global-batch-size 16 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine"
    " --lr-warmup-iters 2 --mock-data --tokenizer-type NullTokenizer --vocab-size 4096 --seed 1234"
    " --train-iters 6 --eval-interval 3 --eval-iters 1";

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string hms(double seconds) {
  const long long s = std::llround(seconds);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

// The "key: value" fields of each iteration line, in order of iterations.
std::vector<std::map<std::string, std::string>> iteration_lines(const std::string& output) {
  std::vector<std::map<std::string, std::string>> lines;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("] iteration ") == std::string::npos) continue;
    std::map<std::string, std::string> fields;
    size_t start = 0;
    while (start < line.size()) {
      size_t end = line.find('|', start);
      if (end == std::string::npos) end = line.size();
      std::string part = line.substr(start, end - start);
      const size_t colon = part.rfind(": ");
      if (colon != std::string::npos) {
        std::string key = part.substr(0, colon), value = part.substr(colon + 2);
        key.erase(0, key.find_first_not_of(' '));
        value.erase(value.find_last_not_of(' ') + 1);
        value.erase(0, value.find_first_not_of(' '));
        fields[key] = value;
      } else if (const size_t it = part.find("] iteration "); it != std::string::npos) {
        fields["iteration"] = std::to_string(std::stoll(part.substr(it + 12)));
      }
      start = end + 1;
    }
    lines.push_back(fields);
  }
  return lines;
}

// "lm loss value" and "lm loss PPL" of each validation line, in order.
std::vector<std::pair<std::string, std::string>> validation_lines(const std::string& output) {
  std::vector<std::pair<std::string, std::string>> values;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const size_t v = line.find("lm loss value: "), p = line.find("lm loss PPL: ");
    if (v == std::string::npos || p == std::string::npos) continue;
    values.emplace_back(line.substr(v + 15, line.find(' ', v + 15) - v - 15),
                        line.substr(p + 13, line.find(' ', p + 13) - p - 13));
  }
  return values;
}

std::vector<Json> json_lines(const std::string& path) {
  std::vector<Json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << path << ": not JSON: " << line;
    lines.push_back(j);
  }
  return lines;
}

std::vector<Json> of_type(const std::vector<Json>& lines, const std::string& type) {
  std::vector<Json> out;
  for (const Json& j : lines) {
    if (j.value("type", "") == type) out.push_back(j);
  }
  return out;
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> files;
  if (!std::filesystem::is_directory(dir)) return files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e.path());
  }
  return files;
}

// (iteration, float(json[key])) for the metrics file's iteration lines.
Series expected(const std::vector<Json>& iterations, const std::string& key, double scale = 1.0) {
  Series s;
  for (const Json& j : iterations) {
    s.emplace_back(j["iteration"].get<int64_t>(), static_cast<float>(j[key].get<double>() / scale));
  }
  return s;
}

TEST(Metrics, TensorboardAndMetricsFileEqualTheLogLines) {
  ScratchDir dir("tb_e2e");
  const std::string tb = dir.file("tb");
  const auto r = run_command(kBin + kTiny + " --log-interval 1 --tensorboard-dir " + tb +
                             " --log-timers-to-tensorboard --log-memory-to-tensorboard"
                             " --log-validation-ppl-to-tensorboard --log-world-size-to-tensorboard");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The metrics file against the log lines.
  const std::vector<Json> lines = json_lines(tb + "/metrics.jsonl");
  const std::vector<Json> iterations = of_type(lines, "iteration"), evaluations = of_type(lines, "evaluation");
  const auto logged = iteration_lines(r.output);
  ASSERT_EQ(logged.size(), 6u) << r.output;
  ASSERT_EQ(iterations.size(), 6u);
  ASSERT_EQ(lines.size(), 9u) << "6 iterations, validation at 3 and at the end, test at the end";
  for (size_t i = 0; i < 6; ++i) {
    const Json& j = iterations[i];
    const auto& log = logged[i];
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    EXPECT_EQ(j["iteration"].get<int64_t>(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(std::to_string(j["iteration"].get<int64_t>()), log.at("iteration"));
    EXPECT_EQ(j["train_iters"], 6);
    EXPECT_EQ(std::to_string(j["consumed_samples"].get<int64_t>()), log.at("consumed samples"));
    EXPECT_EQ(fmt("%.1f", j["elapsed_ms_per_iteration"]), log.at("elapsed time per iteration (ms)"));
    EXPECT_EQ(fmt("%.3f", j["throughput_tflops_per_gpu"]), log.at("throughput per GPU (TFLOP/s/GPU)"));
    EXPECT_EQ(fmt("%.6E", j["learning_rate"]), log.at("learning rate"));
    EXPECT_EQ(std::to_string(j["global_batch_size"].get<int64_t>()), log.at("global batch size"));
    EXPECT_EQ(fmt("%.6E", j["lm_loss"]), log.at("lm loss"));
    EXPECT_EQ(fmt("%.1f", j["loss_scale"]), log.at("loss scale"));
    EXPECT_EQ(fmt("%.3f", j["grad_norm"]), log.at("grad norm"));
    EXPECT_EQ(std::to_string(j["skipped_iterations"].get<int64_t>()), log.at("number of skipped iterations"));
    EXPECT_EQ(std::to_string(j["nan_iterations"].get<int64_t>()), log.at("number of nan iterations"));
    EXPECT_EQ(fmt("%.1f", j["tokens_per_second_per_gpu"]), log.at("tokens per second per GPU"));
    EXPECT_EQ(hms(j["time_left_seconds"].get<double>()), log.at("time left"));
  }
  EXPECT_EQ(logged.back().at("time left"), "0:00:00");
  EXPECT_EQ(iterations.back()["time_left_seconds"].get<double>(), 0.0);
  const auto validation = validation_lines(r.output);
  ASSERT_EQ(validation.size(), 3u) << r.output;
  ASSERT_EQ(evaluations.size(), 3u);
  const std::vector<std::pair<std::string, int64_t>> sets = {{"validation", 3}, {"validation", 6}, {"test", 6}};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(evaluations[i]["set"], sets[i].first);
    EXPECT_EQ(evaluations[i]["iteration"], sets[i].second);
    EXPECT_EQ(evaluations[i]["consumed_samples"], 16 * sets[i].second);
    EXPECT_EQ(fmt("%.6E", evaluations[i]["lm_loss"]), validation[i].first);
    EXPECT_EQ(fmt("%.6E", evaluations[i]["lm_loss_ppl"]), validation[i].second);
  }

  // The event file against the metrics file (and so against the log lines).
  const auto files = event_files(tb);
  ASSERT_EQ(files.size(), 1u);
  const auto file = read_event_file(files[0]);
  ASSERT_EQ(file.error, "") << files[0];
  ASSERT_FALSE(file.events.empty());
  EXPECT_EQ(file.events[0].file_version, "brain.Event:2");
  // The time left is the run's pace so far times the iterations left: the pace from the
  // event file's creation (just before the training loop) to the metrics line's wall time.
  for (size_t i = 0; i < 6; ++i) {
    const double done = static_cast<double>(i + 1), left = 6.0 - done;
    const double elapsed = iterations[i]["wall_time"].get<double>() - file.events[0].wall_time;
    EXPECT_NEAR(iterations[i]["time_left_seconds"].get<double>(), elapsed / done * left, 0.1 * left / done + 0.1)
        << "iteration " << i + 1;
  }
  for (size_t i = 1; i < file.events.size(); ++i) {
    EXPECT_EQ(file.events[i].values.size(), 1u);
    EXPECT_GE(file.events[i].wall_time, file.events[0].wall_time - 1.0);
  }
  // --log-interval 1: the iteration's loss (TensorBoard) is the logged average.
  EXPECT_EQ(scalar_series(file, "lm loss"), expected(iterations, "lm_loss"));
  EXPECT_EQ(scalar_series(file, "learning-rate"), expected(iterations, "learning_rate"));
  EXPECT_EQ(scalar_series(file, "grad-norm"), expected(iterations, "grad_norm"));
  EXPECT_EQ(scalar_series(file, "batch-size"), expected(iterations, "global_batch_size"));
  EXPECT_EQ(scalar_series(file, "loss-scale"), expected(iterations, "loss_scale"));
  EXPECT_EQ(scalar_series(file, "iteration-time"), expected(iterations, "elapsed_ms_per_iteration", 1000.0));
  EXPECT_EQ(scalar_series(file, "throughput"), expected(iterations, "throughput_tflops_per_gpu"));
  Series loss_vs_samples, world;
  for (const Json& j : iterations) {
    loss_vs_samples.emplace_back(j["consumed_samples"].get<int64_t>(), static_cast<float>(j["lm_loss"].get<double>()));
    world.emplace_back(j["iteration"].get<int64_t>(), 1.0f);
  }
  EXPECT_EQ(scalar_series(file, "lm loss vs samples"), loss_vs_samples);
  EXPECT_EQ(scalar_series(file, "world-size"), world);
  Series valid, valid_ppl, valid_vs_samples;
  for (const Json& j : evaluations) {  // Megatron writes the test set under the same tag
    valid.emplace_back(j["iteration"].get<int64_t>(), static_cast<float>(j["lm_loss"].get<double>()));
    valid_ppl.emplace_back(j["iteration"].get<int64_t>(), static_cast<float>(j["lm_loss_ppl"].get<double>()));
    valid_vs_samples.emplace_back(j["consumed_samples"].get<int64_t>(), static_cast<float>(j["lm_loss"].get<double>()));
  }
  EXPECT_EQ(scalar_series(file, "lm loss validation"), valid);
  EXPECT_EQ(scalar_series(file, "lm loss validation ppl"), valid_ppl);
  EXPECT_EQ(scalar_series(file, "lm loss validation vs samples"), valid_vs_samples);
  for (const char* tag : {"mem-reserved-bytes", "mem-allocated-bytes", "mem-max-allocated-bytes",
                          "mem-allocated-count"}) {
    const Series mem = scalar_series(file, tag);
    ASSERT_EQ(mem.size(), 6u) << tag;
    for (const auto& [step, value] : mem) EXPECT_GT(value, 0.0f) << tag << " at " << step;
  }
  const Series allocated = scalar_series(file, "mem-allocated-bytes"), peak = scalar_series(file, "mem-max-allocated-bytes"),
               reserved = scalar_series(file, "mem-reserved-bytes");
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_LE(allocated[i].second, peak[i].second);
    EXPECT_LE(allocated[i].second, reserved[i].second);
  }

  // The picture, where gnuplot is installed (scripts/install_deps.sh installs it).
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  for (const std::string ext : {"png", "svg"}) {
    const std::string out = dir.file("loss." + ext);
    const auto plot = run_command(std::string(MS_SOURCE_DIR) + "/tools/plot_metrics.sh " + tb + "/metrics.jsonl " +
                                  out + " 'tiny run'");
    ASSERT_EQ(plot.exit_code, 0) << plot.output;
    std::ifstream in(out, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_GT(bytes.size(), 10000u) << out;
    if (ext == "png") {
      EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    } else {
      EXPECT_NE(bytes.find("<svg"), std::string::npos);
      EXPECT_NE(bytes.find("lm loss"), std::string::npos);
      EXPECT_NE(bytes.find("validation"), std::string::npos);
    }
  }
  const auto bad = run_command(std::string(MS_SOURCE_DIR) + "/tools/plot_metrics.sh " + tb + "/metrics.jsonl " +
                               dir.file("loss.gif"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

// Two pipeline stages: only the last rank writes; --tensorboard-log-interval, the "no-log"
// options and --metrics-file.
TEST(Metrics, LastRankWritesAtTheTensorboardInterval) {
  ScratchDir dir("tb_e2e");
  const std::string tb = dir.file("tb"), metrics = dir.file("logs/run.jsonl");
  const auto r = run_command(kMpirun + " -np 2 " + kBin + kTiny +
                             " --pipeline-model-parallel-size 2 --log-interval 2 --tensorboard-dir " + tb +
                             " --tensorboard-log-interval 2 --tensorboard-queue-size 5"
                             " --no-log-loss-scale-to-tensorboard --no-log-learnig-rate-to-tensorboard"
                             " --log-batch-size-to-tensorboard --metrics-file " + metrics);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto files = event_files(tb);
  ASSERT_EQ(files.size(), 1u) << "one writer, the last rank";
  EXPECT_FALSE(std::filesystem::exists(tb + "/metrics.jsonl"));
  const auto file = read_event_file(files[0]);
  ASSERT_EQ(file.error, "");
  std::set<std::string> tags;
  std::set<int64_t> steps;
  for (const auto& e : file.events) {
    for (const auto& [tag, v] : e.values) {
      tags.insert(tag);
      if (tag.find("vs samples") == std::string::npos) steps.insert(e.step);
    }
  }
  EXPECT_EQ(tags, (std::set<std::string>{"batch-size", "batch-size vs samples", "lm loss", "lm loss vs samples",
                                         "grad-norm", "grad-norm vs samples", "lm loss validation",
                                         "lm loss validation vs samples"}));
  EXPECT_EQ(steps, (std::set<int64_t>{2, 3, 4, 6})) << "iterations 2, 4, 6 and the evaluation at 3";
  const std::vector<Json> iterations = of_type(json_lines(metrics), "iteration");
  ASSERT_EQ(iterations.size(), 3u);
  // The grad norm of the logged iteration is the log line's.
  EXPECT_EQ(scalar_series(file, "grad-norm"), expected(iterations, "grad_norm"));
  const auto logged = iteration_lines(r.output);
  ASSERT_EQ(logged.size(), 3u) << r.output;
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(fmt("%.6E", iterations[i]["lm_loss"]), logged[i].at("lm loss"));
}

TEST(Metrics, ATensorboardDirThatIsAFileIsRefused) {
  ScratchDir dir("tb_e2e");
  std::ofstream(dir.file("file")) << "x";
  const auto r = run_command(kBin + kTiny + " --tensorboard-dir " + dir.file("file"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--tensorboard-dir " + dir.file("file") + " is a file"), std::string::npos) << r.output;
}

}  // namespace
