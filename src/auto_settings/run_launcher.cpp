// Measurement runs (run_launcher.h).
#include "auto_settings/run_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "core/json_util.h"
#include "core/str_cat.h"

namespace mindspeed {
namespace {

constexpr const char* kReportVariable = "MINDSPEED_AUTO_SETTINGS_REPORT";

std::string tail_of_file(const std::string& path, size_t max_chars) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() <= max_chars ? s : s.substr(s.size() - max_chars);
}

StatusOr<RankReport> read_rank_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("no run report ", path, " (the run ended before writing it)");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string error;
  const std::optional<nlohmann::json> parsed = try_parse_json(ss.str(), &error);
  if (!parsed.has_value() || !parsed->is_object())
    return data_loss("run report ", path, ": ", error);
  const nlohmann::json& j = *parsed;
  RankReport r;
  auto integer = [&](const nlohmann::json& o, const char* key) -> int64_t {
    const auto it = o.find(key);
    return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  r.rank = static_cast<int>(integer(j, "rank"));
  r.tp_rank = static_cast<int>(integer(j, "tp_rank"));
  r.pp_rank = static_cast<int>(integer(j, "pp_rank"));
  r.cp_rank = static_cast<int>(integer(j, "cp_rank"));
  r.dp_rank = static_cast<int>(integer(j, "dp_rank"));
  r.total_peak_bytes = integer(j, "total_peak_bytes");
  if (const auto peaks = j.find("peak_bytes"); peaks != j.end() && peaks->is_object()) {
    for (int k = 0; k < kNumMemoryCategories; ++k) {
      r.peak_bytes[static_cast<size_t>(k)] =
          integer(*peaks, memory_category_name(static_cast<MemoryCategory>(k)));
    }
  }
  if (const auto it = j.find("iteration_seconds"); it != j.end() && it->is_array()) {
    for (const auto& v : *it) {
      if (v.is_number()) r.iteration_seconds.push_back(v.get<double>());
    }
  }
  if (const auto t = j.find("traffic_bytes"); t != j.end() && t->is_object()) {
    for (const auto& [group, kinds] : t->items()) {
      if (!kinds.is_object()) continue;
      for (const auto& [kind, bytes] : kinds.items()) {
        if (bytes.is_number_integer()) r.traffic_bytes[group][kind] = bytes.get<int64_t>();
      }
    }
  }
  return r;
}

}  // namespace

const RankReport& MeasuredRun::largest_memory() const {
  return *std::max_element(ranks.begin(), ranks.end(),
                           [](const RankReport& a, const RankReport& b) {
                             return a.total_peak_bytes < b.total_peak_bytes;
                           });
}

std::string self_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("pretrain_gpt") : p.string();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

StatusOr<MeasuredRun> read_run_reports(const std::string& prefix, int ranks) {
  MeasuredRun run;
  for (int r = 0; r < ranks; ++r) {
    MS_ASSIGN_OR_RETURN(RankReport report, read_rank_report(str_cat(prefix, ".rank", r, ".json")));
    run.ranks.push_back(std::move(report));
  }
  // Each iteration's time is its slowest rank's; the first iteration is warm-up.
  std::vector<double> steps;
  const size_t iterations = run.ranks.empty() ? 0 : run.ranks.front().iteration_seconds.size();
  for (size_t i = 1; i < iterations; ++i) {
    double slowest = 0.0;
    for (const RankReport& r : run.ranks) {
      if (i < r.iteration_seconds.size()) slowest = std::max(slowest, r.iteration_seconds[i]);
    }
    steps.push_back(slowest);
  }
  if (steps.empty())
    return failed_precondition("run report ", prefix, ": fewer than two iterations");
  run.step_seconds = median(steps);
  const auto [lo, hi] = std::minmax_element(steps.begin(), steps.end());
  run.step_spread = run.step_seconds > 0.0 ? (*hi - *lo) / run.step_seconds : 0.0;
  return run;
}

StatusOr<MeasuredRun> launch_measured_run(const std::vector<std::string>& args,
                                          const LaunchOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(options.work_dir, ec);
  if (ec)
    return invalid_argument("auto settings: cannot create the work directory ", options.work_dir,
                            ": ", ec.message());
  const std::string prefix = options.work_dir + "/" + options.name;
  const std::string log = prefix + ".log";
  for (int r = 0; r < options.ranks; ++r)
    std::filesystem::remove(str_cat(prefix, ".rank", r, ".json"), ec);

  std::vector<std::string> argv = {"mpirun",
                                   "-np",
                                   std::to_string(options.ranks),
                                   "--oversubscribe",
                                   "--bind-to",
                                   "none",
                                   "-x",
                                   kReportVariable};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.push_back(options.executable.empty() ? self_executable() : options.executable);
  argv.insert(argv.end(), args.begin(), args.end());
  {
    std::ofstream cmd(prefix + ".cmd");
    for (const std::string& a : argv) cmd << a << ' ';
    cmd << '\n';
  }
  const pid_t pid = fork();
  if (pid < 0) return internal_error("auto settings: fork failed");
  if (pid == 0) {
    setpgid(0, 0);  // its own process group: a timeout ends mpirun and every rank
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    setenv(kReportVariable, prefix.c_str(), 1);
    // More ranks than cores: ranks that wait yield the core (the engine's own advice, README).
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
    std::vector<char*> cargv;
    for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execvp(cargv[0], cargv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0) return internal_error("auto settings: waitpid failed for run ", options.name);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > options.timeout_seconds) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return aborted("auto settings: run ", options.name, " took over ", options.timeout_seconds,
                     " s and was stopped; its log: ", log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return failed_precondition(
        "auto settings: run ", options.name, " failed (",
        WIFEXITED(status) ? str_cat("exit code ", WEXITSTATUS(status)) : std::string("killed"),
        "); the end of its log ", log, ":\n", tail_of_file(log, 1500));
  }
  MS_ASSIGN_OR_RETURN(MeasuredRun run, read_run_reports(prefix, options.ranks));
  run.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace mindspeed
