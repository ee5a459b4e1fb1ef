// --profile end to end (core/profiler.h, tools/merge_traces): pretrain_gpt runs a few steps
// under mpirun and the test reads the traces back as JSON. Every trace must be a valid
// Chrome trace (required fields, every "B" closed by its "E" in nesting order per thread,
// every async "b" by its "e"), hold exactly the iterations of the step window and nothing
// outside it, hold one file per rank --profile-ranks names, carry what the level asks for
// (kernels from level1 on, shapes and stacks at level2, memory counters with
// --profile-with-memory) and nothing it does not, and its communication events must add up
// to the process groups' own counters for the window.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.h"
#include "scratch_dir.h"

namespace mindspeed::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kBin = MS_PRETRAIN_GPT;
const std::string kMpirun = mpirun_prefix(MS_MPIRUN);
const std::string kTiny =
    " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32"
    " --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --train-iters 4 --mock-data"
    " --tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-iters 1 --eval-interval 100";

CommandResult run_np(int np, const std::string& flags) {
  return run_command(kMpirun + " -np " + std::to_string(np) + " " + kBin + kTiny + flags);
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

// What one trace holds, after its structure was checked.
struct TraceSummary {
  std::vector<std::string> iterations;                  // "iteration N" slices, in order
  std::map<std::string, int> count_by_category;
  std::map<std::string, std::map<std::string, int64_t>> comm_bytes;  // group -> kind -> bytes
  std::map<std::string, std::map<std::string, int64_t>> comm_calls;
  std::set<std::string> thread_names;
  int kernels_with_flops = 0, kernels_with_dims = 0, events_with_stack = 0, memory_samples = 0, async_slices = 0;
};

// Checks the trace's structure and sums it up into `out`. Failures name the event.
void check_trace(const json& trace, int rank, TraceSummary* out) {
  TraceSummary& s = *out;
  EXPECT_TRUE(trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array());
  const json& meta = trace["metadata"];
  EXPECT_EQ(meta.value("rank", -1), rank);
  const double window_start = meta.value("window_start_us", 0.0), window_end = meta.value("window_end_us", 0.0);
  EXPECT_LT(window_start, window_end);
  std::map<int, std::vector<std::string>> open;  // tid -> stack of open "B" names
  std::map<int64_t, std::string> open_async;
  const std::set<std::string> counted_kinds = {"all-reduce", "all-gather", "reduce-scatter", "broadcast", "all-to-all"};
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    ASSERT_FALSE(ph.empty()) << e.dump();
    ASSERT_TRUE(e.contains("name") && e.contains("pid") && e.contains("tid")) << e.dump();
    EXPECT_EQ(e["pid"].get<int>(), rank) << e.dump();
    if (ph == "M") {
      if (e["name"] == "thread_name") s.thread_names.insert(e["args"]["name"].get<std::string>());
      continue;
    }
    ASSERT_TRUE(e.contains("cat") && e.contains("ts")) << e.dump();
    const double ts = e["ts"].get<double>();
    EXPECT_GE(ts, window_start - 0.01) << "event before the profiled steps: " << e.dump();
    EXPECT_LE(ts + e.value("dur", 0.0), window_end + 0.01) << "event after the profiled steps: " << e.dump();
    const std::string name = e["name"], cat = e["cat"];
    const int tid = e["tid"];
    const json args = e.value("args", json::object());
    if (ph == "B") {
      open[tid].push_back(name);
      ++s.count_by_category[cat];
      if (cat == "step") s.iterations.push_back(name);
      if (cat == "kernel" && args.contains("flops")) ++s.kernels_with_flops;
      if (cat == "kernel" && args.contains("dims")) ++s.kernels_with_dims;
      if (args.contains("stack")) ++s.events_with_stack;
    } else if (ph == "E") {
      ASSERT_FALSE(open[tid].empty()) << "an end without a begin on thread " << tid << ": " << e.dump();
      EXPECT_EQ(open[tid].back(), name) << "ends out of nesting order on thread " << tid;
      open[tid].pop_back();
    } else if (ph == "X") {
      EXPECT_GE(e.value("dur", -1.0), 0.0) << e.dump();
      ++s.count_by_category[cat];
    } else if (ph == "b") {
      open_async[e["id"].get<int64_t>()] = name;
      ++s.async_slices;
      ++s.count_by_category[cat];
    } else if (ph == "e") {
      ASSERT_EQ(open_async.count(e["id"].get<int64_t>()), 1u) << "async end without begin: " << e.dump();
      EXPECT_EQ(open_async[e["id"].get<int64_t>()], name);
      open_async.erase(e["id"].get<int64_t>());
    } else if (ph == "C") {
      if (name == "memory (bytes)") ++s.memory_samples;
    } else {
      ADD_FAILURE() << "unexpected phase " << e.dump();
    }
    // Collectives and transfers the counters count (not barriers or scalar reductions).
    if (cat == "comm" && (ph == "X" || ph == "b")) {
      const std::string first_word = name.substr(0, name.find(' '));
      const std::string kind = counted_kinds.count(name)                         ? name
                               : first_word == "send" || first_word == "recv" ? first_word
                                                                                : "";
      if (!kind.empty()) {
        s.comm_bytes[args["group"].get<std::string>()][kind] += args["bytes"].get<int64_t>();
        ++s.comm_calls[args["group"].get<std::string>()][kind];
      }
    }
  }
  for (const auto& [tid, stack] : open) EXPECT_TRUE(stack.empty()) << "unclosed slices on thread " << tid;
  EXPECT_TRUE(open_async.empty()) << "unclosed async slices";
  // The communication events add up to the process groups' counters for the window.
  for (const auto& [group, kinds] : meta["comm_counters"].items()) {
    for (const auto& [kind, counted] : kinds.items()) {
      EXPECT_EQ(s.comm_bytes[group][kind], counted["bytes"].get<int64_t>()) << "rank " << rank << " " << group << " " << kind;
      EXPECT_EQ(s.comm_calls[group][kind], counted["calls"].get<int64_t>()) << "rank " << rank << " " << group << " " << kind;
    }
  }
  for (const auto& [group, kinds] : s.comm_bytes) {
    for (const auto& [kind, bytes] : kinds) {
      EXPECT_TRUE(meta["comm_counters"].contains(group) && meta["comm_counters"][group].contains(kind))
          << "rank " << rank << ": events of " << group << " " << kind << " the counters do not have";
    }
  }
}

TraceSummary summarize(const json& trace, int rank) {
  TraceSummary s;
  check_trace(trace, rank, &s);
  return s;
}

// TP2 x DP2 with the distributed optimizer and overlapped gradient reduction, level1 with
// host work and memory, two of the four ranks, steps 1 and 2 (log iterations 2 and 3).
TEST(Profile, Level1TraceOfTheSelectedRanksAndStepsOnly) {
  ScratchDir scratch;
  const std::string dir = scratch.file("profile");
  const CommandResult r = run_np(4, " --tensor-model-parallel-size 2 --use-distributed-optimizer --overlap-grad-reduce"
                                    " --profile --profile-step-start 1 --profile-step-end 3 --profile-level level1"
                                    " --profile-with-cpu --profile-with-memory --profile-ranks 1 3 --profile-save-path " +
                                    dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"rank_00001.trace.json", "rank_00003.trace.json"}));
  for (int rank : {1, 3}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    char name[64];
    std::snprintf(name, sizeof name, "/rank_%05d.trace.json", rank);
    const json trace = read_json(dir + name);
    ASSERT_FALSE(trace.is_discarded()) << "not valid JSON";
    const TraceSummary s = summarize(trace, rank);
    EXPECT_EQ(s.iterations, (std::vector<std::string>{"iteration 2", "iteration 3"}));
    EXPECT_GT(s.count_by_category.at("kernel"), 0);
    EXPECT_GT(s.kernels_with_flops, 0);
    EXPECT_EQ(s.kernels_with_dims, 0) << "shapes belong to level2 with --profile-record-shapes";
    EXPECT_GT(s.count_by_category.at("schedule"), 0);
    EXPECT_GT(s.count_by_category.at("module"), 0);
    EXPECT_GT(s.count_by_category.at("optimizer"), 0);
    EXPECT_GT(s.count_by_category.at("cpu_op"), 0);
    EXPECT_GT(s.memory_samples, 0);
    EXPECT_GT(s.comm_bytes.at("tp").at("all-reduce"), 0);
    EXPECT_GT(s.comm_bytes.at("dp-cp").at("reduce-scatter"), 0);
    // Asynchronous collectives run on the group's own track.
    EXPECT_TRUE(s.thread_names.count("comm tp") && s.thread_names.count("comm dp-cp")) << trace.dump().substr(0, 400);
  }
  // One timeline: the merge tool names each process by its rank and coordinates.
  const std::string merged = scratch.file("merged.json");
  const CommandResult m = run_command(std::string(MS_MERGE_TRACES) + " --input " + dir + " --output " + merged);
  ASSERT_EQ(m.exit_code, 0) << m.output;
  const json all = read_json(merged);
  ASSERT_FALSE(all.is_discarded());
  std::set<int> pids;
  std::set<std::string> labels;
  for (const json& e : all["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["name"] == "process_name") labels.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_EQ(pids, (std::set<int>{1, 3}));
  EXPECT_EQ(labels, (std::set<std::string>{"rank 1 (tp 1, pp 0, dp 0, cp 0)", "rank 3 (tp 1, pp 0, dp 1, cp 0)"}));
  EXPECT_EQ(all["metadata"]["ranks"].size(), 2u);
  const CommandResult none = run_command(std::string(MS_MERGE_TRACES) + " --input " + scratch.file("nothing") +
                                         " --output " + merged);
  EXPECT_NE(none.exit_code, 0);
}

// Two pipeline stages at level2: point-to-point transfers are asynchronous slices, kernels
// carry their dimensions and every slice its native call stack; every rank by default.
TEST(Profile, Level2PipelineTraceWithShapesAndStacks) {
  ScratchDir scratch;
  const std::string dir = scratch.file("profile");
  const CommandResult r = run_np(2, " --pipeline-model-parallel-size 2 --profile --profile-step-start 0"
                                    " --profile-step-end 1 --profile-level level2 --profile-record-shapes"
                                    " --profile-with-stack --profile-save-path " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    char name[64];
    std::snprintf(name, sizeof name, "/rank_%05d.trace.json", rank);
    const json trace = read_json(dir + name);
    ASSERT_FALSE(trace.is_discarded());
    const TraceSummary s = summarize(trace, rank);
    EXPECT_EQ(s.iterations, (std::vector<std::string>{"iteration 1"}));
    EXPECT_GT(s.async_slices, 0) << "pipeline sends and receives";
    EXPECT_GT(s.comm_bytes.at("pp").at(rank == 0 ? "send" : "recv"), 0);
    EXPECT_GT(s.kernels_with_dims, 0);
    EXPECT_GT(s.events_with_stack, 0);
    EXPECT_EQ(s.memory_samples, 0);
    EXPECT_EQ(s.count_by_category.count("cpu_op"), 0u) << "host work needs --profile-with-cpu";
  }
}

// level0 holds no kernels; without --profile nothing is written; MindSpeed's constraints
// are refused by flag.
TEST(Profile, Level0AndOffAndRefusals) {
  ScratchDir scratch;
  const std::string dir = scratch.file("profile");
  CommandResult r = run_np(1, " --profile --profile-step-start 2 --profile-step-end 3 --profile-with-stack"
                              " --profile-save-path " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Stacks belong to level2: said, not silently dropped.
  EXPECT_NE(r.output.find("at this --profile-level they record nothing"), std::string::npos) << r.output;
  const TraceSummary s = summarize(read_json(dir + "/rank_00000.trace.json"), 0);
  EXPECT_EQ(s.events_with_stack, 0);
  EXPECT_EQ(s.iterations, (std::vector<std::string>{"iteration 3"}));
  EXPECT_EQ(s.count_by_category.count("kernel"), 0u);
  // 4 micro-batches (global batch 8 of micro-batches of 2) x 2 layers x forward and backward.
  EXPECT_EQ(s.count_by_category.at("module"), 16);
  r = run_np(1, " --profile-save-path " + scratch.file("off"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(scratch.file("off")));
  r = run_np(1, " --profile --profile-with-memory");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--profile-with-memory requires --profile-with-cpu"), std::string::npos) << r.output;
  r = run_np(1, " --profile --profile-step-start 3 --profile-step-end 3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--profile-step-end 3 must be greater than --profile-step-start 3"), std::string::npos)
      << r.output;
  r = run_np(1, " --profile --profile-ranks x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--profile-ranks: 'x'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mindspeed::testing
