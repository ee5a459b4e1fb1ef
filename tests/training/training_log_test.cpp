// The iteration and validation lines parse with the regular expressions Megatron log
// parsers use, and carry the values given.
#include "training/training_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "core/logging.h"

namespace mindspeed {
namespace {

TEST(TrainingLog, IterationLineMatchesMegatronFormat) {
  IterationLog l;
  l.iteration = 10;
  l.train_iters = 100;
  l.consumed_samples = 80;
  l.elapsed_ms_per_iteration = 1234.56;
  l.tflops_per_rank = 0.081;
  l.learning_rate = 1.5e-4;
  l.global_batch_size = 8;
  l.lm_loss = 10.81558;
  l.grad_norm = 5.1234;
  l.tokens_per_second_per_rank = 3300.2;
  l.mfu = 0.65;
  const std::string line = format_iteration_line(l, "2026-12-02 10:00:00");
  EXPECT_EQ(line.rfind(" [2026-12-02 10:00:00] iteration       10/     100 |", 0), 0u) << line;
  const std::regex loss(R"(lm loss: ([0-9.]+E[+-][0-9]+))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, loss)) << line;
  EXPECT_NEAR(std::stod(m[1]), 10.81558, 1e-5);
  EXPECT_NE(line.find("| consumed samples:           80 |"), std::string::npos) << line;
  EXPECT_NE(line.find("| elapsed time per iteration (ms): 1234.6 |"), std::string::npos) << line;
  EXPECT_NE(line.find("| throughput per GPU (TFLOP/s/GPU): 0.081 |"), std::string::npos) << line;
  EXPECT_NE(line.find("| learning rate: 1.500000E-04 |"), std::string::npos) << line;
  EXPECT_NE(line.find("| global batch size:     8 |"), std::string::npos) << line;
  EXPECT_NE(line.find("| grad norm: 5.123 |"), std::string::npos) << line;
  EXPECT_NE(line.find("| number of skipped iterations:   0 |"), std::string::npos) << line;
  EXPECT_NE(line.find("| MFU: 65.0% |"), std::string::npos) << line;
  EXPECT_EQ(line.find("time left"), std::string::npos) << "not shown unless set";
}

// The time left to --train-iters is appended after Megatron's fields (and after MFU), so
// parsers of Megatron's fields keep working.
TEST(TrainingLog, TimeLeftIsTheLastField) {
  IterationLog l;
  l.iteration = 10;
  l.train_iters = 100;
  l.mfu = 0.5;
  l.time_left_seconds = 3725.4;
  const std::string line = format_iteration_line(l, "2026-12-02 10:00:00");
  const size_t mfu = line.find("| MFU: 50.0% |");
  ASSERT_NE(mfu, std::string::npos) << line;
  EXPECT_EQ(line.substr(mfu), "| MFU: 50.0% | time left: 1:02:05 |") << line;
  l.time_left_seconds = 0.0;
  EXPECT_NE(format_iteration_line(l, "x").find("| time left: 0:00:00 |"), std::string::npos);
  EXPECT_EQ(format_duration(27 * 3600.0), "27:00:00");
  EXPECT_EQ(format_duration(59.6), "0:01:00");
  EXPECT_EQ(format_duration(-1.0), "?");
  EXPECT_EQ(format_duration(std::nan("")), "?");
}

TEST(TrainingLog, ValidationLinesMatchMegatronFormat) {
  const std::string text = format_validation_lines("iteration 20", 2.0);
  EXPECT_NE(text.find(" validation loss at iteration 20 | lm loss value: 2.000000E+00 | lm loss PPL: 7.389056E+00 | "),
            std::string::npos)
      << text;
  EXPECT_EQ(text.front(), '-');
}

}  // namespace
}  // namespace mindspeed
