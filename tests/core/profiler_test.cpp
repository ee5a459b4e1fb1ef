// The profiler's window (core/profiler.h) in one process: nothing is recorded before
// --profile-step-start or from --profile-step-end on, a slice still open when the window
// closes is closed with it (every begin keeps its end), async slices likewise, levels and
// the host/memory switches gate what is recorded, the trace is written atomically to the
// save path, and a rank --profile-ranks leaves out records nothing.
#include "core/profiler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "scratch_dir.h"

namespace mindspeed::profiler {
namespace {

using nlohmann::json;

struct Recorded {
  std::vector<std::string> begins, ends;
  int truncated = 0, counters = 0, async_begins = 0, async_ends = 0;
};

Recorded parse(const std::string& text) {
  const json trace = json::parse(text);
  Recorded r;
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "B") r.begins.push_back(e["name"]);
    if (ph == "E") r.ends.push_back(e["name"]);
    if (ph == "C") ++r.counters;
    if (ph == "b") ++r.async_begins;
    if (ph == "e") ++r.async_ends;
    if (e.contains("args") && e["args"].contains("truncated")) ++r.truncated;
  }
  return r;
}

Options window(const std::string& dir, int64_t start, int64_t end) {
  Options o;
  o.enabled = true;
  o.step_start = start;
  o.step_end = end;
  o.save_path = dir;
  return o;
}

TEST(Profiler, RecordsOnlyTheWindowAndClosesWhatIsOpenAtItsEnd) {
  reset();
  testing::ScratchDir scratch;
  configure(window(scratch.file("p"), 1, 2), /*rank=*/0);
  ASSERT_TRUE(selected());
  step_begin(0);
  { Scope before(category::kStep, "step 0"); }  // before the window: not recorded
  EXPECT_FALSE(recording());
  ASSERT_TRUE(step_end(0).ok());
  step_begin(1);
  EXPECT_TRUE(recording());
  EXPECT_FALSE(recording(Level::kLevel1));
  { Scope kernel(category::kKernel, "gemm", Level::kLevel1); }  // above level0: not recorded
  { CpuScope host("get batch"); }                             // without --profile-with-cpu
  const uint64_t id = async_begin(category::kComm, "send to 1", "p2p");
  auto straddling = std::make_unique<Scope>(category::kStep, "step 1");
  { Scope inner(category::kModule, "layer"); }
  ASSERT_TRUE(step_end(1).ok());  // closes the window with "step 1" and the send still open
  EXPECT_FALSE(recording());
  straddling.reset();            // ends after the window: no second end
  async_end(category::kComm, "send to 1", "p2p", id);
  step_begin(2);
  { Scope after(category::kStep, "step 2"); }
  const std::string path = scratch.file("p") + "/rank_00000.trace.json";
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  const Recorded r = parse(text.str());
  EXPECT_EQ(r.begins, (std::vector<std::string>{"step 1", "layer"}));
  EXPECT_EQ(r.ends, (std::vector<std::string>{"layer", "step 1"}));
  EXPECT_EQ(r.truncated, 2);  // "step 1" and the send, closed by the window
  EXPECT_EQ(r.async_begins, 1);
  EXPECT_EQ(r.async_ends, 1);
  EXPECT_EQ(text.str(), trace_json());
  reset();
}

TEST(Profiler, LevelsAndSwitchesGateWhatIsRecorded) {
  reset();
  testing::ScratchDir scratch;
  Options o = window(scratch.file("p"), 0, 1);
  o.level = Level::kLevel2;
  o.with_cpu = o.with_memory = o.record_shapes = true;
  configure(o, 0);
  step_begin(0);
  EXPECT_TRUE(recording(Level::kLevel2) && recording_cpu() && recording_memory() && recording_shapes());
  EXPECT_FALSE(recording_stacks());
  { Scope kernel(category::kKernel, "gemm", Level::kLevel1); }
  { CpuScope host("get batch"); }
  counter("memory (bytes)", {{"params", 64.0}});
  ASSERT_TRUE(step_end(0).ok());
  const Recorded r = parse(trace_json());
  EXPECT_EQ(r.begins, (std::vector<std::string>{"gemm", "get batch"}));
  EXPECT_EQ(r.counters, 1);
  reset();
}

TEST(Profiler, UnselectedRanksRecordNothingAndBadOptionsAreRefused) {
  reset();
  testing::ScratchDir scratch;
  Options o = window(scratch.file("p"), 0, 1);
  o.ranks = {1, 3};
  configure(o, /*rank=*/2);
  EXPECT_FALSE(selected());
  step_begin(0);
  EXPECT_FALSE(recording());
  ASSERT_TRUE(step_end(0).ok());
  EXPECT_FALSE(std::filesystem::exists(scratch.file("p")));
  reset();
  o = window("x", 2, 2);
  EXPECT_NE(validate(o).message().find("--profile-step-end 2 must be greater than --profile-step-start 2"),
            std::string::npos);
  o = window("x", 0, 1);
  o.with_memory = true;
  EXPECT_NE(validate(o).message().find("--profile-with-memory requires --profile-with-cpu"), std::string::npos);
  o.with_memory = false;
  o.ranks = {-2};
  EXPECT_FALSE(validate(o).ok());
  o.enabled = false;  // without --profile nothing is checked
  EXPECT_TRUE(validate(o).ok());
}

}  // namespace
}  // namespace mindspeed::profiler
