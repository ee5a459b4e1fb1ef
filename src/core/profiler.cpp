// The --profile trace recorder (profiler.h).
#include "core/profiler.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

namespace mindspeed::profiler {
namespace internal {
std::atomic<int> g_recording{-1};
bool g_with_cpu = false, g_with_stack = false, g_with_memory = false, g_record_shapes = false;
}  // namespace internal

namespace {

struct Event {
  char ph;
  std::string name;
  const char* category;
  double ts;
  int tid;
  std::string args;  // JSON object body (no braces)
  uint64_t id = 0;   // async events
  double dur = 0.0;  // complete events
};

struct OpenScope {
  std::string name;
  const char* category;
};

struct State {
  std::mutex mutex;
  Options options;
  int rank = 0;
  bool selected = false;
  bool window_open = false, window_done = false;
  uint64_t window = 0;  // generation of the current window (scopes begun in it may end it)
  double sync_point = -1.0;
  double window_start = 0.0, window_end = 0.0;
  std::vector<Event> events;
  std::map<int, std::string> thread_names;
  std::map<int, std::vector<OpenScope>> open_scopes;  // per track
  std::map<uint64_t, std::pair<std::string, const char*>> open_async;  // id -> name, category
  std::vector<std::pair<std::string, std::string>> metadata;
  uint64_t next_async_id = 1;
  int next_tid = 0;
};

State& state() {
  static State* s = new State();  // never destroyed: worker threads may record at exit
  return *s;
}

thread_local int t_tid = -1;
thread_local std::string t_pending_name;

// The calling thread's track (assigned on first use, under the state's mutex).
int track_of_this_thread(State& s) {
  if (t_tid < 0) {
    t_tid = s.next_tid++;
    s.thread_names[t_tid] = !t_pending_name.empty() ? t_pending_name
                            : t_tid == 0            ? "main"
                                                    : "thread " + std::to_string(t_tid);
  }
  return t_tid;
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// The native call stack of the caller (demangled, innermost first), skipping `skip` frames.
std::string native_stack(int skip) {
  void* frames[48];
  const int n = backtrace(frames, 48);
  std::string out;
  for (int i = skip; i < n; ++i) {
    Dl_info info;
    std::string name;
    if (dladdr(frames[i], &info) != 0 && info.dli_sname != nullptr) {
      int status = 0;
      char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
      name = status == 0 && demangled != nullptr ? demangled : info.dli_sname;
      std::free(demangled);
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%p", frames[i]);
      name = buf;
    }
    if (!out.empty()) out += "\n";
    out += name;
  }
  return out;
}

void push_event(State& s, Event e) { s.events.push_back(std::move(e)); }

void close_window(State& s, double end) {
  // Whatever is still open ends with the window, so every begin has its end.
  for (auto& [tid, stack] : s.open_scopes) {
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
      push_event(s, {'E', it->name, it->category, end, tid, "\"truncated\":1"});
    }
    stack.clear();
  }
  for (const auto& [id, what] : s.open_async) {
    push_event(s, {'e', what.first, what.second, end, 0, "\"truncated\":1", id});
  }
  s.open_async.clear();
  s.window_open = false;
  s.window_done = true;
  s.window_end = end;
  internal::g_recording.store(-1, std::memory_order_relaxed);
}

std::string document(const State& s) {
  const double origin = s.sync_point >= 0.0 ? s.sync_point : s.window_start;
  std::string out = "{\"traceEvents\":[\n";
  char num[64];
  auto ts = [&](double t) {
    std::snprintf(num, sizeof num, "%.3f", t - origin);
    return std::string(num);
  };
  const std::string pid = std::to_string(s.rank);
  out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"name\":\"rank " + pid +
         "\"}},\n";
  out += "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"sort_index\":" +
         pid + "}}";
  for (const auto& [tid, name] : s.thread_names) {
    out += ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid) +
           ",\"args\":{\"name\":\"" + escape(name) + "\"}}";
  }
  for (const Event& e : s.events) {
    out += ",\n{\"ph\":\"";
    out += e.ph;
    out += "\",\"name\":\"" + escape(e.name) + "\",\"cat\":\"" + e.category + "\",\"ts\":" + ts(e.ts) +
           ",\"pid\":" + pid + ",\"tid\":" + std::to_string(e.tid);
    if (e.ph == 'X') {
      std::snprintf(num, sizeof num, "%.3f", e.dur);
      out += ",\"dur\":";
      out += num;
    }
    if (e.ph == 'b' || e.ph == 'e') out += ",\"id\":" + std::to_string(e.id);
    if (!e.args.empty()) out += ",\"args\":{" + e.args + "}";
    out += "}";
  }
  out += "\n],\n\"displayTimeUnit\":\"ms\",\n\"metadata\":{\"rank\":" + pid;
  std::snprintf(num, sizeof num, "%.3f", s.window_start - origin);
  out += ",\"window_start_us\":";
  out += num;
  std::snprintf(num, sizeof num, "%.3f", (s.window_done ? s.window_end : now_us()) - origin);
  out += ",\"window_end_us\":";
  out += num;
  out += ",\"profile_step_start\":" + std::to_string(s.options.step_start) +
         ",\"profile_step_end\":" + std::to_string(s.options.step_end) +
         ",\"profile_level\":" + std::to_string(static_cast<int>(s.options.level));
  for (const auto& [key, value] : s.metadata) out += ",\"" + escape(key) + "\":" + value;
  out += "}}\n";
  return out;
}

Status write_trace(const State& s) {
  std::error_code ec;
  std::filesystem::create_directories(s.options.save_path, ec);
  if (ec) {
    return failed_precondition("--profile-save-path '", s.options.save_path, "' cannot be created: ", ec.message());
  }
  char file[64];
  std::snprintf(file, sizeof file, "rank_%05d.trace.json", s.rank);
  const std::string path = s.options.save_path + "/" + file;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << document(s);
    if (!out.flush()) return failed_precondition("cannot write the trace '", tmp, "' (disk full?)");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return failed_precondition("cannot rename the trace into '", path, "': ", ec.message());
  return ok_status();
}

}  // namespace

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Status validate(const Options& o) {
  if (!o.enabled) return ok_status();
  if (o.step_start < 0) return invalid_argument("--profile-step-start ", o.step_start, " must be >= 0");
  if (o.step_end <= o.step_start) {
    return invalid_argument("--profile-step-end ", o.step_end, " must be greater than --profile-step-start ",
                            o.step_start, " (steps [start, end) are profiled)");
  }
  if (o.with_memory && !o.with_cpu) {
    return invalid_argument("--profile-with-memory requires --profile-with-cpu (as in MindSpeed)");
  }
  if (o.save_path.empty()) return invalid_argument("--profile-save-path is empty");
  for (int r : o.ranks) {
    if (r < -1) return invalid_argument("--profile-ranks: ", r, " is not a global rank (or -1 for all)");
  }
  return ok_status();
}

void configure(const Options& options, int rank) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.options = options;
  s.rank = rank;
  s.selected = false;
  if (options.enabled) {
    for (int r : options.ranks) s.selected = s.selected || r == -1 || r == rank;
  }
  internal::g_with_cpu = options.with_cpu;
  internal::g_with_stack = options.with_stack;
  internal::g_with_memory = options.with_memory;
  internal::g_record_shapes = options.record_shapes;
}

bool selected() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.selected;
}

void step_begin(int64_t step) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.selected || s.window_open || s.window_done || step != s.options.step_start) return;
  s.window_open = true;
  ++s.window;
  s.window_start = now_us();
  internal::g_recording.store(static_cast<int>(s.options.level), std::memory_order_relaxed);
}

Status step_end(int64_t step) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.window_open || step + 1 != s.options.step_end) return ok_status();
  close_window(s, now_us());
  return write_trace(s);
}

Status finish() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.window_open) return ok_status();
  close_window(s, now_us());
  return write_trace(s);
}

void set_sync_point() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.sync_point = now_us();
}

void add_metadata(const std::string& key, const std::string& json_value) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& kv : s.metadata) {
    if (kv.first == key) {
      kv.second = json_value;
      return;
    }
  }
  s.metadata.emplace_back(key, json_value);
}

void set_thread_name(const std::string& name) {
  t_pending_name = name;
  if (t_tid >= 0) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.thread_names[t_tid] = name;
  }
}

Args& Args::add(std::string_view k, int64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}
Args& Args::add(std::string_view k, double value) {
  key(k);
  char num[32];
  std::snprintf(num, sizeof num, "%.15g", value);
  body_ += num;
  return *this;
}
Args& Args::add(std::string_view k, std::string_view value) {
  key(k);
  body_ += '"';
  body_ += escape(value);
  body_ += '"';
  return *this;
}
void Args::key(std::string_view k) {
  if (!body_.empty()) body_ += ',';
  body_ += '"';
  body_ += escape(k);
  body_ += "\":";
}

void Scope::begin(const char* category, std::string_view name, const Args& args) {
  std::string body = args.body();
  if (recording_stacks()) {
    if (!body.empty()) body += ",";
    body += Args{}.add("stack", native_stack(3)).body();
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.window_open) return;
  const int tid = track_of_this_thread(s);
  category_ = category;
  name_ = std::string(name);
  active_ = true;
  window_ = s.window;
  s.open_scopes[tid].push_back({name_, category});
  push_event(s, {'B', name_, category, now_us(), tid, std::move(body)});
}

void Scope::end() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.window_open || s.window != window_) return;  // the window closed it already
  const int tid = track_of_this_thread(s);
  auto& stack = s.open_scopes[tid];
  if (!stack.empty()) stack.pop_back();
  push_event(s, {'E', name_, category_, now_us(), tid, end_args_.body()});
}

void complete(const char* category, std::string_view name, double start_us, double end_us, const Args& args) {
  if (!recording()) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.window_open || start_us < s.window_start) return;  // only what lies inside the window
  Event e{'X', std::string(name), category, start_us, track_of_this_thread(s), args.body()};
  e.dur = end_us - start_us;
  push_event(s, std::move(e));
}

uint64_t async_begin(const char* category, std::string_view name, std::string_view track, const Args& args) {
  if (!recording()) return 0;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.window_open) return 0;
  const uint64_t id = s.next_async_id++;
  std::string body = args.body();
  if (!body.empty()) body += ",";
  body += Args{}.add("track", track).body();
  s.open_async[id] = {std::string(name), category};
  push_event(s, {'b', std::string(name), category, now_us(), track_of_this_thread(s), std::move(body), id});
  return id;
}

void async_end(const char* category, std::string_view name, std::string_view track, uint64_t id) {
  if (id == 0) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.open_async.erase(id) == 0) return;  // closed with the window
  (void)track;
  push_event(s, {'e', std::string(name), category, now_us(), track_of_this_thread(s), "", id});
}

void counter(std::string_view name, const std::vector<std::pair<std::string, double>>& series) {
  if (!recording()) return;
  Args args;
  for (const auto& [k, v] : series) args.add(k, v);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.window_open) return;
  push_event(s, {'C', std::string(name), category::kCpu, now_us(), track_of_this_thread(s), args.body()});
}

std::string trace_json() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return document(s);
}

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  internal::g_recording.store(-1, std::memory_order_relaxed);
  const int next_tid = s.next_tid;
  auto names = s.thread_names;
  s.events.clear();
  s.open_scopes.clear();
  s.open_async.clear();
  s.metadata.clear();
  s.options = Options{};
  s.selected = s.window_open = s.window_done = false;
  s.sync_point = -1.0;
  s.next_tid = next_tid;  // threads keep their tracks
  s.thread_names = names;
  internal::g_with_cpu = internal::g_with_stack = internal::g_with_memory = internal::g_record_shapes = false;
}

}  // namespace mindspeed::profiler
