// Profiling for the auto-settings white box: scaled-down real runs of this binary on this
// machine, per layer shape (TP, SP, CP and its algorithm, EP; one pipeline stage, no
// recompute): five points of (layers, micro-batches, micro-batch size), each run twice, in two
// rounds over every shape (the step the mean of both) = the corners (1,1,1),
// (L,1,1), (1,M,1), (L,M,1) with L = min(4, the model's layers) and M the most micro-batches
// the shape runs (at most 8), and (L,1,B) with B the largest micro-batch a candidate of the shape
// runs (at most 8; a lever of 2, what one stage could run, left pipelines' 8-sample micro-batches
// 20-40 % cheap; at one layer instead of L, the layers' growth came out low); and (1,1,B) once,
// for its bytes. Their
// exact memory peaks give the memory model's bytes per layer and per sample and what lives outside
// the layers (fixed + per sample); their median iteration times the time model's costs
//   T(l layers, m micro-batches) = a + b*l + c*m + d*l*m
// (a: per step; b: per layer and step -- optimizer and gradient reduction; c: per micro-batch
// outside the layers -- embedding, output layer, loss; d: one layer's forward and backward of
// one micro-batch, its tensor- and context-parallel communication included), and the fraction
// of c and d that does not grow with the micro-batch size (latencies). The same shape with the
// distributed optimizer takes one point more (run twice), for its per-step terms. Fits tried first:
// 2x2 corners at (1..2, 1..2), whose second differences the 20-40 % iteration spread of this
// machine turned negative; a FLOP ratio for c/d, 10x off where latencies dominate; a corner at
// (1,1) with slopes extrapolated to (4, 8), 20-60 % low because a step's cost grows faster than
// linearly in micro-batches here (4 ranks time-sharing 2 cores); the micro-batch scaling from
// sizes 1 and 2, which left f near 1 and an 8-sample micro-batch 6x too cheap. The results are
// cached in --prof-file (JSON) for the command line they were made for.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "auto_settings/candidate.h"
#include "auto_settings/memory_model.h"
#include "auto_settings/run_launcher.h"
#include "auto_settings/time_model.h"
#include "config/configs.h"
#include "core/status.h"

namespace mindspeed {

struct ProfiledShape {
  std::string key;
  MeasuredActivations memory;
  LayerTimes times;
  double spread = 0.0;   ///< the largest iteration spread of its runs ((max - min) / median)
  double seconds = 0.0;  ///< wall time its runs took
};

struct MachineProfile {
  std::string command_line;  ///< the stripped command line the shapes were measured for
  int ranks = 0;             ///< ranks of the profiling runs
  int cores = 0;             ///< this machine's cores
  double gemm_tflops_per_rank =
      0.0;  ///< one rank's dense GEMM rate with `ranks` ranks on `cores` cores
  /// What a rank waiting on its pipeline neighbour still demands of the shared cores, as a
  /// share of a working rank's (CoreSharing); < 0: not measured.
  double waiting_core_share = -1.0;
  std::map<std::string, ProfiledShape> shapes;
};

/// The layer shape a candidate's profile is measured at, as a key
/// ("tp2-sp-cp2-ulysses-ep1-distopt").
std::string profile_key(const Candidate& c);
/// The candidate the profiling runs use for `c`'s shape: pipeline 1, micro-batch 1, no recompute.
Candidate profiled_candidate(const Candidate& c);

/// Reads `path`; a missing file, or one made for another command line or rank count, gives an
/// empty profile for `command_line` (the caller says which).
StatusOr<MachineProfile> load_profile(const std::string& path, const std::string& command_line,
                                      int ranks, bool* reused);
Status save_profile(const std::string& path, const MachineProfile& profile);

/// A layer shape to profile: `candidate` (its profiled_candidate() runs), `configs` it validated
/// (for the fit's parameter share), `largest_micro_batch` of the shape's candidates. A shape with
/// the distributed optimizer takes one point (run twice) for its per-step terms and the rest from
/// its twin without it, which is profiled already or earlier in the same request list.
struct ShapeRequest {
  Candidate candidate;
  Configs configs;
  int64_t largest_micro_batch = 1;
};

/// Profiles `requests` on `options.ranks` ranks (`base`: the stripped command line), each run
/// `iterations` iterations, in two interleaved rounds: a round runs every shape's
/// points once, in turn, and the next round runs them all again, so that the machine's drift
/// over the minutes of profiling (10-15 % here) lands on every shape alike, not on the shapes
/// measured last; a point's step is the mean of its rounds. `cores`: this machine's
/// (MachineProfile::cores, for the flash kernel timed in-process); `known`: the shapes profiled
/// before (twins). The result is in the order of `requests`.
StatusOr<std::vector<ProfiledShape>> profile_shapes(
    const std::vector<std::string>& base, const std::vector<ShapeRequest>& requests, int iterations,
    const LaunchOptions& options, int cores, const std::map<std::string, ProfiledShape>& known);

/// Runs profile_shapes() makes for `request` on `ranks` ranks.
int profiling_runs_of(const ShapeRequest& request, int ranks);

/// The waiting share of this machine (when ranks outnumber cores): `c`'s shape as a pipeline of
/// one layer per stage (`c`: micro-batch 1, no recompute; `pipelined` its validated
/// configuration) and as one stage (`one_stage`: pp 1, the same layers and batch), run five
/// times each, alternating; the share in [0, 1] whose predicted ratio of the two steps
/// (time_model.h, the shape's profiled `times`) is the ratio of the measured medians. A ratio,
/// not the pipeline's step alone, so that the machine's drift between the profile's runs and
/// these (10-15 % here) does not land in the share. Where the output layer and the loss cost a
/// few layers (the usual small-model case) the other stages wait most of each step, so the
/// share moves a 4-stage prediction by a factor of up to 2; with two stages the ratio moved so
/// little that the noise put the share anywhere in 0-0.45.
StatusOr<double> measure_waiting_share(const std::vector<std::string>& base, const Candidate& c,
                                       const Configs& one_stage, const Configs& pipelined,
                                       const LayerTimes& times, double oversubscription,
                                       int iterations, const LaunchOptions& options);

/// The share in [0, 1] at which the predicted step of `pipelined` over that of `one_stage` is
/// `measured_ratio` (0 or 1 where the ratio lies outside their predictions).
StatusOr<double> waiting_share_of_ratio(const Configs& one_stage, const Configs& pipelined,
                                        const LayerTimes& times, double oversubscription, int ranks,
                                        double measured_ratio);

/// `args` with each flag of `replaced` removed (with its value) and then appended with its new
/// value; flags in `removed` (name -> number of values) dropped.
std::vector<std::string> with_flags(
    const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::string>>& replaced,
    const std::map<std::string, int>& removed = {});

/// A measurement run's command line: the user's (`base`, the searched flags stripped) less the
/// flags measurement_run_removed_flags() names, with `layers` layers, a global batch of `batch`,
/// `iterations` iterations and no evaluation, then `layout`'s flags.
std::vector<std::string> measurement_run_args(const std::vector<std::string>& base,
                                              const Candidate& layout, int64_t layers,
                                              int64_t batch, int iterations);

/// The flags a measurement run drops from the user's command line: checkpoints, outputs,
/// evaluation, exits and sample-based schedules (the run sets its own iterations).
const std::map<std::string, int>& measurement_run_removed_flags();

}  // namespace mindspeed
