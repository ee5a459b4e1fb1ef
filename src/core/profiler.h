// The profiler behind MindSpeed's --profile flags (mindspeed/functional/profile; torch's
// profiler with a skip_first/active schedule and one trace per rank): records what a rank
// does during the profiled training steps as Chrome trace events (the JSON that Perfetto
// and chrome://tracing open) and writes <save path>/rank_NNNNN.trace.json.
//
//   level0  iterations, forward/backward per micro-batch and per layer, the optimizer, every
//           collective and send/recv (bytes, group, ranks); asynchronous communication on
//           its own track (the group's communication thread, or async p2p slices)
//   level1  + every kernel (name, FLOPs or bytes moved)
//   level2  + kernel argument shapes (--profile-record-shapes) and native call stacks
//           (--profile-with-stack)
//   --profile-with-cpu     + host-side work that is not model compute (data loading,
//                            checkpoint saving, logging)
//   --profile-with-memory  + counter tracks of the allocator's bytes per category
//
// Off (the default, and outside the profiled steps) every hook is one relaxed atomic load.
// Recording is process-wide and thread-safe; events carry the recording thread's track.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace mindspeed::profiler {

enum class Level : int { kLevel0 = 0, kLevel1 = 1, kLevel2 = 2 };

struct Options {
  bool enabled = false;        ///< --profile
  int64_t step_start = 10;     ///< --profile-step-start: first profiled train step (0-based count)
  int64_t step_end = 12;       ///< --profile-step-end: first step not profiled
  Level level = Level::kLevel0;
  bool with_cpu = false;
  bool with_stack = false;
  bool with_memory = false;
  bool record_shapes = false;
  std::string save_path = "./profile_dir";
  std::vector<int> ranks = {-1};  ///< global ranks; -1 = all
};

/// What kind of event: the trace's "cat" field.
namespace category {
inline constexpr const char* kStep = "step";            ///< a training iteration
inline constexpr const char* kSchedule = "schedule";    ///< forward/backward of a micro-batch
inline constexpr const char* kModule = "module";        ///< a layer's forward/backward
inline constexpr const char* kOptimizer = "optimizer";
inline constexpr const char* kComm = "comm";            ///< collectives and send/recv
inline constexpr const char* kKernel = "kernel";
inline constexpr const char* kCpu = "cpu_op";           ///< host-side work (--profile-with-cpu)
}  // namespace category

namespace internal {
/// The level being recorded now, or -1 (not recording). Read by every hook.
extern std::atomic<int> g_recording;
extern bool g_with_cpu, g_with_stack, g_with_memory, g_record_shapes;
}  // namespace internal

/// True while recording at `level` or above.
inline bool recording(Level level = Level::kLevel0) {
  return internal::g_recording.load(std::memory_order_relaxed) >= static_cast<int>(level);
}
inline bool recording_cpu() { return recording() && internal::g_with_cpu; }
inline bool recording_memory() { return recording() && internal::g_with_memory; }
inline bool recording_shapes() { return recording(Level::kLevel2) && internal::g_record_shapes; }
inline bool recording_stacks() { return recording(Level::kLevel2) && internal::g_with_stack; }

/// Validates MindSpeed's constraints (--profile-with-memory needs --profile-with-cpu, the
/// step window); InvalidArgument naming the flag.
Status validate(const Options& options);
/// Sets up this process (global rank `rank`): whether it is profiled, where it writes.
/// Recording starts at step_begin(step_start). Without options.enabled everything stays off.
void configure(const Options& options, int rank);
/// Whether this rank writes a trace (configured, enabled and selected by --profile-ranks).
bool selected();
/// The train step `step` (0-based count of train steps in this process) begins / ended.
/// Recording covers steps [step_start, step_end); the trace is written when the window ends.
void step_begin(int64_t step);
Status step_end(int64_t step);
/// Writes the trace if the window started but has not ended (e.g. training stopped early).
Status finish();
/// The steady-clock time (microseconds) at which every rank left the same barrier: the
/// merge tool aligns the ranks' clocks on it.
void set_sync_point();
/// Extra top-level metadata for the trace ("rank", "tp_rank", comm counters, ...).
void add_metadata(const std::string& key, const std::string& json_value);
/// Names the calling thread's track ("main", "comm tp", ...).
void set_thread_name(const std::string& name);

/// Microseconds on the steady clock (the trace's time base).
double now_us();

/// Key/value arguments of an event, as a JSON object body built only while recording.
class Args {
 public:
  Args& add(std::string_view key, int64_t value);
  Args& add(std::string_view key, double value);
  Args& add(std::string_view key, std::string_view value);
  const std::string& body() const { return body_; }
  bool empty() const { return body_.empty(); }

 private:
  void key(std::string_view k);
  std::string body_;
};

/// A duration event on the calling thread's track: begin at construction, end at
/// destruction ("B"/"E" pair). Nothing happens unless recording at `level` when built.
class Scope {
 public:
  Scope(const char* category, std::string_view name, Level level = Level::kLevel0, const Args& args = {}) {
    if (recording(level)) begin(category, name, args);
  }
  /// The name built by `make_name()` only when recording.
  template <typename MakeName>
  Scope(const char* category, Level level, MakeName&& make_name) {
    if (recording(level)) begin(category, make_name(), Args{});
  }
  ~Scope() {
    if (active_) end();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  bool active() const { return active_; }
  /// Arguments attached to the end event (e.g. a result known only at the end).
  void add_end_args(const Args& args) { end_args_ = args; }

 private:
  void begin(const char* category, std::string_view name, const Args& args);
  void end();
  bool active_ = false;
  uint64_t window_ = 0;
  const char* category_ = nullptr;
  std::string name_;
  Args end_args_;
};

/// A host-side slice, recorded only with --profile-with-cpu.
class CpuScope {
 public:
  explicit CpuScope(std::string_view name) {
    if (recording_cpu()) scope_.emplace(category::kCpu, name);
  }

 private:
  std::optional<Scope> scope_;
};

/// A complete event [start_us, end_us) on the calling thread's track ("X").
void complete(const char* category, std::string_view name, double start_us, double end_us, const Args& args = {});
/// An asynchronous slice (a non-blocking send/recv from issue to completion): "b"/"e" with
/// an id, drawn on its own track per `track` name.
uint64_t async_begin(const char* category, std::string_view name, std::string_view track, const Args& args = {});
void async_end(const char* category, std::string_view name, std::string_view track, uint64_t id);
/// A counter track sample ("C"): series name -> value.
void counter(std::string_view name, const std::vector<std::pair<std::string, double>>& series);

/// The events recorded so far as a trace JSON document (for tests; the file holds the same).
std::string trace_json();
/// Forgets every event and the configuration (tests).
void reset();

}  // namespace mindspeed::profiler
