// Measurement runs of the auto-settings planner: pretrain_gpt itself (this executable) under
// mpirun on this machine, for a few iterations, with the run report switched on
// (MINDSPEED_AUTO_SETTINGS_REPORT: training/pretrain.cpp writes each rank's exact memory peaks,
// iteration times and per-group traffic). The profiling runs (profile.h) and the black-box
// search both use it. MindSpeed auto_settings launches its profiling the same way (a subprocess
// of the training script with OOTB_OPTIMIZER_PROFILING set).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/status.h"

namespace mindspeed {

struct RankReport {
  int rank = 0, tp_rank = 0, pp_rank = 0, cp_rank = 0, dp_rank = 0;
  std::array<int64_t, kNumMemoryCategories> peak_bytes{};
  int64_t total_peak_bytes = 0;
  std::vector<double> iteration_seconds;
  /// Payload bytes per group ("tp", "pp", "cp", "dp_cp", ...) and collective kind after the
  /// first iteration (iteration_seconds.size() - 1 iterations).
  std::map<std::string, std::map<std::string, int64_t>> traffic_bytes;
};

struct MeasuredRun {
  std::vector<RankReport> ranks;  ///< by world rank
  /// Median over the iterations after the first of the slowest rank's iteration time.
  double step_seconds = 0.0;
  /// The spread of those iterations: (max - min) / median.
  double step_spread = 0.0;
  double wall_seconds = 0.0;  ///< the whole run: launch, set-up, iterations, exit
  const RankReport& largest_memory() const;
};

struct LaunchOptions {
  int ranks = 1;
  std::string work_dir;  ///< the run's log and report files go in work_dir/<name>.*
  std::string name;
  double timeout_seconds = 600.0;
  std::string executable;  ///< default: this process's executable
};

/// Runs `args` (pretrain_gpt's command line, without the program) on `ranks` ranks and reads the
/// reports. A run that fails, times out or leaves no report is an error quoting the log's tail.
StatusOr<MeasuredRun> launch_measured_run(const std::vector<std::string>& args,
                                          const LaunchOptions& options);

/// Reads the per-rank report files of a run (<prefix>.rank<R>.json, R < ranks).
StatusOr<MeasuredRun> read_run_reports(const std::string& prefix, int ranks);

/// The median of `v` (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> v);

/// The path of this process's executable.
std::string self_executable();

}  // namespace mindspeed
