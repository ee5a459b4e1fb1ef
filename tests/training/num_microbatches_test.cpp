// NumMicroBatchesCalculator against Megatron-LM's own calculators (reference/rampup_vectors.txt,
// written by reference/generate_rampup_vectors.py from core_v0.12.1's
// num_microbatches_calculator.py): the iteration count of a sample-based run
// (update_train_iters) and, iteration by iteration, the consumed samples, the current and the
// running global batch and the micro-batch count, for constant batches, ramps whose increments
// fall on fractional sample counts, a ramp longer than the run and --decrease-batch-size-if-needed.
// Then the rules: what the ramp and the batch sizes must satisfy, each refused with its reason.
#include "config/num_microbatches_calculator.h"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "reference_vectors.h"

namespace mindspeed {
namespace {

struct RampupCase {
  std::map<std::string, std::string> args;
  int64_t train_iters = 0;
  std::vector<std::array<int64_t, 4>> iterations;  // consumed, current, running, micro-batches
};

std::map<std::string, RampupCase> reference_cases() {
  std::map<std::string, RampupCase> out;
  for (const auto& [name, c] : testing::read_reference_cases("tests/training/reference/rampup_vectors.txt")) {
    out[name].args = c.args;
    for (const std::vector<std::string>& row : c.rows) {
      if (row.size() == 2 && row[0] == "train_iters") {
        out[name].train_iters = std::stoll(row[1]);
      } else if (row.size() == 4) {  // consumed current running micro-batches
        out[name].iterations.push_back({std::stoll(row[0]), std::stoll(row[1]), std::stoll(row[2]), std::stoll(row[3])});
      }
    }
  }
  return out;
}

int64_t arg(const RampupCase& c, const std::string& key) { return std::stoll(c.args.at(key)); }

TEST(NumMicroBatchesCalculator, MatchesMegatronIterationByIteration) {
  const auto cases = reference_cases();
  ASSERT_EQ(cases.size(), 7u) << "reference/rampup_vectors.txt missing or incomplete";
  for (const auto& [name, c] : cases) {
    SCOPED_TRACE(name);
    std::optional<RampupBatchSize> rampup;
    if (c.args.at("rampup") != "none") {
      std::istringstream r(c.args.at("rampup"));
      RampupBatchSize v;
      char comma = 0;
      r >> v.start_global_batch_size >> comma >> v.batch_size_increment >> comma >> v.rampup_samples;
      rampup = v;
    }
    const int64_t mbs = arg(c, "micro_batch_size"), dp = arg(c, "data_parallel_size");
    auto calc = NumMicroBatchesCalculator::create(arg(c, "global_batch_size"), mbs, dp,
                                                  arg(c, "decrease_batch_size_if_needed") != 0, rampup);
    ASSERT_TRUE(calc.ok()) << calc.status().to_string();
    EXPECT_EQ(calc->train_iters_for_samples(arg(c, "train_samples")), c.train_iters);
    int64_t consumed = 0;
    for (size_t i = 0; i < c.iterations.size(); ++i) {
      const auto& want = c.iterations[i];
      ASSERT_TRUE(calc->update(consumed, /*consistency_check=*/true).ok()) << "iteration " << i + 1;
      EXPECT_EQ(consumed, want[0]) << "iteration " << i + 1;
      EXPECT_EQ(calc->current_global_batch_size(), want[1]) << "iteration " << i + 1;
      EXPECT_EQ(calc->current_running_global_batch_size(), want[2]) << "iteration " << i + 1;
      EXPECT_EQ(calc->num_micro_batches(), want[3]) << "iteration " << i + 1;
      consumed += dp * mbs * calc->num_micro_batches();
    }
  }
}

std::string create_error(int64_t gbs, int64_t mbs, int64_t dp, bool decrease, std::optional<RampupBatchSize> r) {
  auto calc = NumMicroBatchesCalculator::create(gbs, mbs, dp, decrease, r);
  return calc.ok() ? "" : calc.status().to_string();
}

TEST(NumMicroBatchesCalculator, RefusesWhatMegatronAsserts) {
  EXPECT_NE(create_error(12, 1, 2, false, RampupBatchSize{4, 3, 40}).find("not divisible by the increment 3"),
            std::string::npos);
  EXPECT_NE(create_error(12, 1, 2, false, RampupBatchSize{12, 2, 40}).find("must be below --global-batch-size"),
            std::string::npos);
  EXPECT_NE(create_error(12, 1, 2, false, RampupBatchSize{4, 2, 0}).find("three positive numbers"), std::string::npos);
  EXPECT_NE(create_error(10, 2, 2, false, std::nullopt).find("add --decrease-batch-size-if-needed"),
            std::string::npos);
  EXPECT_EQ(create_error(10, 2, 2, true, std::nullopt), "");
  EXPECT_NE(create_error(2, 2, 2, true, std::nullopt).find("no micro-batch"), std::string::npos);
  // A ramp through a batch that micro batch x dp does not divide: fine until that batch is used.
  auto calc = NumMicroBatchesCalculator::create(12, 1, 4, false, RampupBatchSize{4, 2, 40});
  ASSERT_TRUE(calc.ok());
  EXPECT_TRUE(calc->update(0, true).ok());
  const Status at_six = calc->update(10, true);  // the batch is 6 from 10 samples on
  EXPECT_NE(at_six.to_string().find("current global batch size (6) is not divisible"), std::string::npos)
      << at_six.to_string();
}

}  // namespace
}  // namespace mindspeed
