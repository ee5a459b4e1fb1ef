// LrScheduler::lr(k) against the rates Megatron-LM's own OptimizerParamScheduler gives after k
// iterations (reference/lr_vectors.txt, written by reference/generate_lr_vectors.py): linear,
// cosine, inverse-square-root, constant and WSD (exponential, linear, cosine, minus_sqrt
// anneals), warmup by iterations and by fraction, --lr-warmup-init, --lr-decay-iters shorter
// and longer than --train-iters, iterations past the decay end, global batches above one; and
// sample-based schedules (--train-samples) stepped by a batch-size ramp-up.
#include "optimizer/lr_scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "reference_vectors.h"

namespace mindspeed {
namespace {

struct LrCase {
  std::map<std::string, std::string> flags;          // key=value of the "case" line
  std::vector<std::pair<int64_t, double>> expected;  // (iterations, lr)
};

const std::map<std::string, LrCase>& reference_cases() {
  static const std::map<std::string, LrCase> cases = [] {
    std::map<std::string, LrCase> out;
    for (const auto& [name, c] : testing::read_reference_cases("tests/optimizer/reference/lr_vectors.txt")) {
      out[name].flags = c.args;
      for (const std::vector<std::string>& row : c.rows) {  // steps lr
        if (row.size() == 2) out[name].expected.emplace_back(std::stoll(row[0]), std::strtod(row[1].c_str(), nullptr));
      }
    }
    return out;
  }();
  return cases;
}

double number(const LrCase& c, const std::string& key) {
  return std::strtod(c.flags.at(key).c_str(), nullptr);  // decimal or float.hex()
}

float exact_float(const LrCase& c, const std::string& key) {
  const double v = number(c, key);
  EXPECT_EQ(static_cast<double>(static_cast<float>(v)), v) << key << " is not exact in float";
  return static_cast<float>(v);
}

// The rates and decay styles of a case (both units).
OptimizerConfig rates_and_styles(const LrCase& c) {
  OptimizerConfig oc;
  oc.lr = exact_float(c, "lr");
  oc.min_lr = exact_float(c, "min_lr");
  oc.lr_warmup_init = exact_float(c, "lr_warmup_init");
  const std::string style = c.flags.at("lr_decay_style");
  const std::map<std::string, LrDecayStyle> styles = {{"constant", LrDecayStyle::kConstant},
                                                      {"linear", LrDecayStyle::kLinear},
                                                      {"cosine", LrDecayStyle::kCosine},
                                                      {"inverse-square-root", LrDecayStyle::kInverseSquareRoot},
                                                      {"WSD", LrDecayStyle::kWSD}};
  EXPECT_TRUE(styles.count(style)) << style;
  oc.lr_decay_style = styles.at(style);
  const std::string wsd_style = c.flags.at("lr_wsd_decay_style");
  const std::map<std::string, LrWsdDecayStyle> wsd_styles = {{"exponential", LrWsdDecayStyle::kExponential},
                                                             {"linear", LrWsdDecayStyle::kLinear},
                                                             {"cosine", LrWsdDecayStyle::kCosine},
                                                             {"minus_sqrt", LrWsdDecayStyle::kMinusSqrt}};
  EXPECT_TRUE(wsd_styles.count(wsd_style)) << wsd_style;
  oc.lr_wsd_decay_style = wsd_styles.at(wsd_style);
  return oc;
}

class LrSchedulerVsMegatron : public ::testing::TestWithParam<const char*> {};

TEST_P(LrSchedulerVsMegatron, RateAfterEachIteration) {
  const auto& cases = reference_cases();
  ASSERT_TRUE(cases.count(GetParam())) << "case " << GetParam() << " missing from lr_vectors.txt";
  const LrCase& c = cases.at(GetParam());
  ASSERT_GT(c.expected.size(), 10u);

  OptimizerConfig oc = rates_and_styles(c);
  // "none" is Megatron's None: our unset values.
  if (c.flags.at("lr_decay_iters") != "none") oc.lr_decay_iters = std::stoll(c.flags.at("lr_decay_iters"));
  if (c.flags.at("lr_wsd_decay_iters") != "none") {
    oc.lr_wsd_decay_iters = std::stoll(c.flags.at("lr_wsd_decay_iters"));
  }
  if (c.flags.at("lr_warmup_fraction") != "none") oc.lr_warmup_fraction = exact_float(c, "lr_warmup_fraction");
  oc.lr_warmup_iters = std::stoll(c.flags.at("lr_warmup_iters"));
  const int64_t train_iters = std::stoll(c.flags.at("train_iters"));
  const int64_t global_batch = std::stoll(c.flags.at("global_batch_size"));

  const LrScheduler scheduler(oc, train_iters, global_batch);
  // The same flags counted in samples (a ramp-up with --train-iters): after k full batches.
  const LrScheduler in_samples = LrScheduler::for_iterations_in_samples(oc, train_iters, global_batch);
  for (const auto& [k, want] : c.expected) {
    // Same formulas in double; pow/sqrt/cos may round an ulp apart from Python's.
    EXPECT_NEAR(scheduler.lr(k), want, 1e-12 * std::abs(want)) << GetParam() << " after " << k << " iterations";
    EXPECT_NEAR(in_samples.lr(k * global_batch), want, 1e-12 * std::abs(want))
        << GetParam() << " after " << k << " iterations, counted in samples";
  }
}

INSTANTIATE_TEST_SUITE_P(Megatron, LrSchedulerVsMegatron,
                         ::testing::Values("linear_warmup_iters", "linear_no_warmup", "linear_decay_iters_short",
                                         "linear_decay_iters_long", "linear_fraction_batch8", "cosine_warmup_fraction",
                                         "cosine_warmup_init_batch4", "inverse_sqrt_warmup",
                                         "inverse_sqrt_no_warmup_batch8", "inverse_sqrt_fraction_init",
                                         "constant_warmup_init", "constant_no_warmup", "wsd_exponential",
                                         "wsd_linear_fraction", "wsd_cosine_batch2_init", "wsd_minus_sqrt",
                                         "wsd_exponential_default_decay", "wsd_zero_anneal"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// Sample-based training (--train-samples): the rate after each consumed-sample count, the
// scheduler stepped by a ramp-up's uneven batches (2, 2, 2, 4, 4, 6, 6, 8, 8, ...).
class LrSchedulerInSamplesVsMegatron : public ::testing::TestWithParam<const char*> {};

TEST_P(LrSchedulerInSamplesVsMegatron, RateAfterEachConsumedSampleCount) {
  const auto& cases = reference_cases();
  ASSERT_TRUE(cases.count(GetParam())) << "case " << GetParam() << " missing from lr_vectors.txt";
  const LrCase& c = cases.at(GetParam());
  ASSERT_GT(c.expected.size(), 10u);
  OptimizerConfig oc = rates_and_styles(c);
  if (c.flags.at("lr_decay_samples") != "none") oc.lr_decay_samples = std::stoll(c.flags.at("lr_decay_samples"));
  if (c.flags.at("lr_wsd_decay_samples") != "none") {
    oc.lr_wsd_decay_samples = std::stoll(c.flags.at("lr_wsd_decay_samples"));
  }
  if (c.flags.at("lr_warmup_fraction") != "none") oc.lr_warmup_fraction = exact_float(c, "lr_warmup_fraction");
  oc.lr_warmup_samples = std::stoll(c.flags.at("lr_warmup_samples"));
  const LrScheduler scheduler = LrScheduler::for_samples(oc, std::stoll(c.flags.at("train_samples")));
  for (const auto& [samples, want] : c.expected) {
    EXPECT_NEAR(scheduler.lr(samples), want, 1e-12 * std::abs(want)) << GetParam() << " after " << samples << " samples";
  }
}

INSTANTIATE_TEST_SUITE_P(Megatron, LrSchedulerInSamplesVsMegatron,
                         ::testing::Values("samples_linear_warmup", "samples_cosine_fraction_decay",
                                         "samples_inverse_sqrt", "samples_wsd_cosine"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST(LrSchedulerVsMegatron, VectorFileHoldsExactlyTheTestedCases) {
  EXPECT_EQ(reference_cases().size(), 22u);
}

}  // namespace
}  // namespace mindspeed
