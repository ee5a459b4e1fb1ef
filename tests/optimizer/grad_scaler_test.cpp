// GradScaler against Megatron-LM's own DynamicGradScaler and ConstantGradScaler
// (reference/grad_scaler_vectors.txt, written by reference/generate_grad_scaler_vectors.py from
// core_v0.12.1's grad_scaler.py): the scale, growth tracker and hysteresis tracker after every
// update of each found-inf sequence (Megatron's start from 2^32, hysteresis, the floor at
// --min-loss-scale, growth after --loss-scale-window good steps, a non-power-of-two scale), and
// the inverse scale bit for bit. Then the refusals of Megatron's asserts.
#include "optimizer/grad_scaler.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "reference_vectors.h"

namespace mindspeed {
namespace {

struct Step {
  bool found_inf = false;
  double scale = 0.0, inv_scale = 0.0;
  int64_t growth_tracker = 0, hysteresis_tracker = 0;
};

struct ScalerCase {
  std::map<std::string, std::string> args;  // key=value of the "case" line ("constant" = "")
  std::vector<Step> steps;
};

std::map<std::string, ScalerCase> reference_cases() {
  std::map<std::string, ScalerCase> out;
  for (const auto& [name, c] : testing::read_reference_cases("tests/optimizer/reference/grad_scaler_vectors.txt")) {
    out[name].args = c.args;
    for (const std::vector<std::string>& row : c.rows) {  // found_inf scale growth hysteresis inv_scale
      if (row.size() != 5) continue;
      out[name].steps.push_back({row[0] == "1", std::strtod(row[1].c_str(), nullptr), std::strtod(row[4].c_str(), nullptr),
                                 std::stoll(row[2]), std::stoll(row[3])});
    }
  }
  return out;
}

float arg(const ScalerCase& c, const std::string& key) {
  return static_cast<float>(std::strtod(c.args.at(key).c_str(), nullptr));
}

TEST(GradScaler, FollowsMegatronsScalersUpdateByUpdate) {
  const auto cases = reference_cases();
  ASSERT_EQ(cases.size(), 7u) << "reference/grad_scaler_vectors.txt is missing cases";
  int grew = 0, halved = 0;
  for (const auto& [name, c] : cases) {
    StatusOr<GradScaler> made =
        c.args.count("constant") ? GradScaler::constant(arg(c, "initial"))
                                 : GradScaler::dynamic(arg(c, "initial"), arg(c, "min"), arg(c, "growth"),
                                                       arg(c, "backoff"), std::stoll(c.args.at("interval")),
                                                       std::stoll(c.args.at("hysteresis")));
    ASSERT_TRUE(made.ok()) << name << ": " << made.status().to_string();
    GradScaler scaler = *made;
    ASSERT_FALSE(c.steps.empty()) << name;
    for (size_t i = 0; i < c.steps.size(); ++i) {
      const Step& want = c.steps[i];
      const float before = scaler.scale();
      scaler.update(want.found_inf);
      ASSERT_EQ(scaler.scale(), want.scale) << name << " update " << i;
      ASSERT_EQ(scaler.inv_scale(), want.inv_scale) << name << " update " << i;
      if (scaler.is_dynamic()) {
        ASSERT_EQ(scaler.state().growth_tracker, want.growth_tracker) << name << " update " << i;
        ASSERT_EQ(scaler.state().hysteresis_tracker, want.hysteresis_tracker) << name << " update " << i;
      }
      grew += scaler.scale() > before ? 1 : 0;
      halved += scaler.scale() < before ? 1 : 0;
    }
  }
  EXPECT_GT(grew, 3) << "the cases must exercise growth";
  EXPECT_GT(halved, 10) << "the cases must exercise backoff";
}

TEST(GradScaler, StateRoundTripsAsACheckpointCarriesIt) {
  GradScaler a = *GradScaler::dynamic(65536.0f, 1.0f, 2.0f, 0.5f, 3, 2);
  for (bool inf : {true, false, true, true, false}) a.update(inf);
  GradScaler b = *GradScaler::dynamic(65536.0f, 1.0f, 2.0f, 0.5f, 3, 2);
  b.load_state(a.state());
  for (bool inf : {false, false, false, true, false, true}) {
    a.update(inf);
    b.update(inf);
    EXPECT_EQ(a.scale(), b.scale());
  }
}

TEST(GradScaler, RefusesWhatMegatronAsserts) {
  EXPECT_FALSE(GradScaler::constant(0.0f).ok());
  EXPECT_FALSE(GradScaler::dynamic(0.0f, 1.0f, 2.0f, 0.5f, 1000, 2).ok());
  EXPECT_FALSE(GradScaler::dynamic(1024.0f, 2048.0f, 2.0f, 0.5f, 1000, 2).ok());  // min above initial
  EXPECT_FALSE(GradScaler::dynamic(1024.0f, 1.0f, 1.0f, 0.5f, 1000, 2).ok());     // no growth
  EXPECT_FALSE(GradScaler::dynamic(1024.0f, 1.0f, 2.0f, 1.0f, 1000, 2).ok());     // no backoff
  EXPECT_FALSE(GradScaler::dynamic(1024.0f, 1.0f, 2.0f, 0.5f, 0, 2).ok());
  EXPECT_FALSE(GradScaler::dynamic(1024.0f, 1.0f, 2.0f, 0.5f, 1000, 0).ok());
  const Status s = GradScaler::dynamic(1024.0f, 2048.0f, 2.0f, 0.5f, 1000, 2).status();
  EXPECT_NE(s.to_string().find("--min-loss-scale"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace mindspeed
