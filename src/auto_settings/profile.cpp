// Profiling for the auto-settings white box (profile.h).
#include "auto_settings/profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "checkpointing/durable_file.h"
#include "core/json_util.h"
#include "core/str_cat.h"
#include "kernels/backend.h"

namespace mindspeed {
namespace {
// 2: the micro-batch lever of the candidates' largest micro-batch; the waiting share.
// 3: the core attention's forward seconds. 4: each corner run twice. 5: that forward with the
// model's attention dropout; the micro-batch lever at L layers.
constexpr int kProfileFormat = 5;
constexpr int kRunsPerCorner = 2;
}  // namespace

std::string profile_key(const Candidate& c) {
  std::string key = str_cat("tp", c.tp, c.sp ? "-sp" : "", "-cp", c.cp);
  if (c.cp > 1)
    key += str_cat("-", cp_algo_flag_value(c.cp_algo),
                   c.cp_algo == CpAlgo::kHybrid ? str_cat("-u", c.ulysses_degree) : "");
  key += str_cat("-ep", c.ep, c.distributed_optimizer ? "-distopt" : "");
  return key;
}

Candidate profiled_candidate(const Candidate& c) {
  Candidate p = c;
  p.pp = 1;
  p.vpp = 0;
  p.dualpipev = false;
  p.mbs = 1;
  p.recompute = RecomputeChoice::kNone;
  return p;
}

const std::map<std::string, int>& measurement_run_removed_flags() {
  static const std::map<std::string, int> kRemoved = {
      {"--save", 1},
      {"--load", 1},
      {"--save-interval", 1},
      {"--tensorboard-dir", 1},
      {"--metrics-file", 1},
      {"--eval-interval", 1},
      {"--eval-iters", 1},
      {"--exit-interval", 1},
      {"--exit-duration-in-mins", 1},
      {"--train-samples", 1},
      {"--lr-decay-samples", 1},
      {"--lr-warmup-samples", 1},
      {"--lr-wsd-decay-samples", 1},
      {"--rampup-batch-size", 3},
      {"--profile", 0},
      {"--log-interval", 1},
      {"--train-iters", 1},
      {"--global-batch-size", 1},
      {"--num-layers", 1},
      {"--lr-decay-iters", 1},
      {"--lr-warmup-iters", 1},
      {"--lr-warmup-fraction", 1},
      {"--lr-wsd-decay-iters", 1},
  };
  return kRemoved;
}

std::vector<std::string> with_flags(
    const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::string>>& replaced,
    const std::map<std::string, int>& removed) {
  std::map<std::string, int> drop = removed;
  for (const auto& [flag, value] : replaced) drop.emplace(flag, 1);
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string name = args[i].substr(0, args[i].find('='));
    const auto it = drop.find(name);
    if (it == drop.end()) {
      out.push_back(args[i]);
      continue;
    }
    if (args[i].find('=') == std::string::npos) i += static_cast<size_t>(it->second);
  }
  for (const auto& [flag, value] : replaced) out.insert(out.end(), {flag, value});
  return out;
}

std::vector<std::string> measurement_run_args(const std::vector<std::string>& base,
                                              const Candidate& layout, int64_t layers,
                                              int64_t batch, int iterations) {
  std::vector<std::string> args = with_flags(base,
                                             {{"--num-layers", std::to_string(layers)},
                                              {"--global-batch-size", std::to_string(batch)},
                                              {"--train-iters", std::to_string(iterations)},
                                              {"--log-interval", std::to_string(iterations)},
                                              {"--eval-iters", "0"}},
                                             measurement_run_removed_flags());
  const std::vector<std::string> flags = candidate_flags(layout);
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

namespace {

// One layer's core attention forward for a micro-batch of 1 on one rank of `configs`' layout:
// the flash kernel timed here on one thread at full size (heads split by TP), at the speed a
// rank has with `ranks` ranks sharing this machine's `cores` (single-thread time x ranks /
// cores), its 1/cp share.
double attention_forward_seconds(const Configs& configs, int ranks, int cores) {
  const ModelConfig& m = configs.model;
  const ParallelConfig& p = configs.parallel;
  KernelOptions options;
  options.flash_attention = true;
  const Backend backend = select_backend(options, 1);
  Allocator scratch;
  AttentionDims d;
  d.B = 1;
  d.T = m.seq_length;
  d.NQ = std::max<int64_t>(1, m.num_attention_heads / p.tensor_model_parallel_size);
  d.NKV = std::max<int64_t>(1, m.query_groups() / p.tensor_model_parallel_size);
  d.D = m.kv_channels;
  d.scale = 1.0f / std::sqrt(static_cast<float>(m.kv_channels));
  d.num_heads_total = m.num_attention_heads;
  return measure_flash_attention_forward_seconds(backend, scratch, d, m.attention_dropout, 3) *
         static_cast<double>(ranks) / static_cast<double>(std::max(1, cores)) /
         static_cast<double>(p.context_parallel_size);
}

// Bytes of a run's peaks: activations, workspace, and the total less what is held all along.
struct RunBytes {
  double activations, workspace, transient;
};

RunBytes bytes_of(const MeasuredRun& run) {
  const RankReport& r = run.largest_memory();
  auto peak = [&](MemoryCategory k) {
    return static_cast<double>(r.peak_bytes[static_cast<size_t>(k)]);
  };
  const double held = peak(MemoryCategory::kParameters) + peak(MemoryCategory::kGradients) +
                      peak(MemoryCategory::kOptimizerState);
  return {peak(MemoryCategory::kActivations), peak(MemoryCategory::kWorkspace),
          static_cast<double>(r.total_peak_bytes) - held};
}

// A profiling run's point: `layers` layers, `micro` micro-batches of `mbs` samples per
// data-parallel rank; `timed`: run in every round for its step (else once, for its bytes).
struct Point {
  int layers, micro, mbs;
  bool timed = true;
};

// A shape's points: its twin's one point, or the four corners of (layers, micro-batches) in
// [1, L] x [1, M] and the micro-batch levers (L, 1, B) for the step and (1, 1, B) for the
// bytes.
struct ShapePlan {
  int L = 1, M = 1, B = 1;
  std::vector<Point> points;
};

ShapePlan plan_of(const ShapeRequest& r, int ranks) {
  ShapePlan plan;
  if (r.candidate.distributed_optimizer) {
    plan.points = {{1, 1, 1}};
    return plan;
  }
  // L = min(4, the model's layers), M = the most micro-batches a one-stage layout of this
  // shape runs (micro-batch 1), at most 8. Candidates then interpolate rather than
  // extrapolate, and the differences are taken over long lever arms (the iterations of this
  // machine spread by tens of percent).
  const Candidate p = profiled_candidate(r.candidate);
  const int dp = ranks / (p.tp * p.cp);
  plan.L = static_cast<int>(std::clamp<int64_t>(r.configs.model.num_layers, 2, 4));
  plan.M = static_cast<int>(std::clamp<int64_t>(r.configs.training.global_batch_size / dp, 2, 8));
  // The micro-batch size's lever: the largest micro-batch a candidate of this shape runs (a
  // pipeline's, where fewer data-parallel replicas share the batch; the profile's own batch
  // grows to it), at most 8.
  plan.B = static_cast<int>(std::clamp<int64_t>(r.largest_micro_batch, 2, 8));
  plan.points = {{1, 1, 1},           {plan.L, 1, 1},      {1, plan.M, 1},
                 {plan.L, plan.M, 1}, {plan.L, 1, plan.B}, {1, 1, plan.B, false}};
  return plan;
}

// A point's runs as one: the first run's exact bytes, the mean of the steps.
MeasuredRun mean_of(const std::vector<MeasuredRun>& runs) {
  MeasuredRun r = runs.front();
  double seconds = 0.0;
  for (const MeasuredRun& run : runs) seconds += run.step_seconds;
  r.step_seconds = seconds / static_cast<double>(runs.size());
  return r;
}

// The shape's costs and bytes from its points' runs (`runs[i]`: point i of `plan`); `twin`: the
// profile of the same shape without the distributed optimizer, for a shape with it.
ProfiledShape fit_shape(const ShapeRequest& request, const ShapePlan& plan,
                        const std::vector<MeasuredRun>& runs, const ProfiledShape* twin, int ranks,
                        int cores) {
  ProfiledShape shape;
  shape.key = profile_key(profiled_candidate(request.candidate));
  const double t111 = runs[0].step_seconds;
  const double rb = layer_param_share(request.configs);
  if (twin != nullptr) {
    // The distributed optimizer changes only the per-step work (sharded optimizer, reduce-scatter
    // and all-gather): the layer's costs and bytes are its twin's, the per-step terms this run's.
    shape.memory = twin->memory;
    shape.times = twin->times;
    const double y =
        std::max(0.0, t111 - shape.times.per_microbatch - shape.times.per_layer_microbatch);
    shape.times.per_layer_step = rb * y;
    shape.times.per_step = (1.0 - rb) * y;
    return shape;
  }
  const int L = plan.L, M = plan.M, B = plan.B;
  const MeasuredRun &r111 = runs[0], &rL11 = runs[1], &r1M1 = runs[2], &rLM1 = runs[3],
                    &rL1B = runs[4], &r11B = runs[5];
  // T(l, m) = a + b l + c m + d l m through the corners; a term the noise makes negative is 0.
  const double tL1 = rL11.step_seconds, t1M = r1M1.step_seconds, tLM = rLM1.step_seconds;
  const double d = std::max(0.0, (tLM - tL1 - t1M + t111) / ((L - 1.0) * (M - 1.0)));
  const double b = std::max(0.0, (tL1 - t111) / (L - 1.0) - d);
  const double cc = std::max(0.0, (t1M - t111) / (M - 1.0) - d);
  const double a = std::max(0.0, t111 - b - cc - d);
  shape.times.per_layer_microbatch = d;
  shape.times.attention_forward = attention_forward_seconds(request.configs, ranks, cores);
  shape.times.per_microbatch = cc;
  shape.times.per_layer_step = b;
  shape.times.per_step = a;
  // The micro-batch of B samples: c + d l grows to (f + B (1 - f)) (c + d l), taken at l = L
  // (a one-stage candidate's micro-batch of B, measured; from one layer, where the output
  // layer and the loss dominate, the layers' growth came out low: TP1 CP4 Ulysses with
  // 8-sample micro-batches was predicted 9 % fast, and chosen, at 6.5 % from the best).
  const double cd = cc + d * L;
  const double grown = cd > 0.0 ? (rL1B.step_seconds - a - b * L) / cd : static_cast<double>(B);
  shape.times.fixed_fraction = std::clamp((B - grown) / (B - 1.0), 0.0, 1.0);
  // Memory: a layer's bytes from 1 and L layers; the rest as fixed + per sample from
  // micro-batches of 1 and B.
  const RunBytes b111 = bytes_of(r111), bL11 = bytes_of(rL11), b11B = bytes_of(r11B);
  const double layer = std::max(0.0, (bL11.activations - b111.activations) / (L - 1));
  shape.memory.per_layer_per_sample = layer;
  auto affine = [B](double at1, double atB) {
    AffineBytes a;
    a.per_sample = std::max(0.0, (atB - at1) / (B - 1.0));
    a.fixed = std::max(0.0, at1 - a.per_sample);
    return a;
  };
  shape.memory.outside_layers = affine(b111.activations - layer, b11B.activations - B * layer);
  shape.memory.transient_outside_layers =
      affine(b111.transient - layer, b11B.transient - B * layer);
  shape.memory.workspace = affine(std::max(b111.workspace, bL11.workspace), b11B.workspace);
  return shape;
}

}  // namespace

int profiling_runs_of(const ShapeRequest& request, int ranks) {
  int runs = 0;
  for (const Point& point : plan_of(request, ranks).points)
    runs += point.timed ? kRunsPerCorner : 1;
  return runs;
}

StatusOr<std::vector<ProfiledShape>> profile_shapes(
    const std::vector<std::string>& base, const std::vector<ShapeRequest>& requests, int iterations,
    const LaunchOptions& options, int cores, const std::map<std::string, ProfiledShape>& known) {
  std::vector<ShapePlan> plans;
  for (const ShapeRequest& r : requests) plans.push_back(plan_of(r, options.ranks));
  // runs[s][i]: shape s's point i, a run per round.
  std::vector<std::vector<std::vector<MeasuredRun>>> runs(requests.size());
  std::vector<double> spread(requests.size(), 0.0), seconds(requests.size(), 0.0);
  for (size_t s = 0; s < requests.size(); ++s) runs[s].resize(plans[s].points.size());
  for (int round = 0; round < kRunsPerCorner; ++round) {
    for (size_t s = 0; s < requests.size(); ++s) {
      const Candidate p = profiled_candidate(requests[s].candidate);
      const int dp = options.ranks / (p.tp * p.cp);
      for (size_t i = 0; i < plans[s].points.size(); ++i) {
        const Point& point = plans[s].points[i];
        if (round > 0 && !point.timed) continue;
        Candidate q = p;
        q.mbs = point.mbs;
        const std::vector<std::string> args =
            measurement_run_args(base, q, point.layers, dp * point.micro * point.mbs, iterations);
        LaunchOptions o = options;
        o.name = str_cat("profile-", profile_key(p), "-L", point.layers, "-m", point.micro, "-b",
                         point.mbs, "-", round);
        MS_ASSIGN_OR_RETURN(MeasuredRun run, launch_measured_run(args, o));
        spread[s] = std::max(spread[s], run.step_spread);
        seconds[s] += run.wall_seconds;
        runs[s][i].push_back(std::move(run));
      }
    }
  }
  // The fits: shapes without the distributed optimizer first (their twins read them).
  std::map<std::string, ProfiledShape> fitted = known;
  std::vector<ProfiledShape> shapes(requests.size());
  for (const bool twins : {false, true}) {
    for (size_t s = 0; s < requests.size(); ++s) {
      if (requests[s].candidate.distributed_optimizer != twins) continue;
      std::vector<MeasuredRun> points;
      for (const std::vector<MeasuredRun>& point : runs[s]) points.push_back(mean_of(point));
      const ProfiledShape* twin = nullptr;
      if (twins) {
        Candidate plain = profiled_candidate(requests[s].candidate);
        plain.distributed_optimizer = false;
        const auto it = fitted.find(profile_key(plain));
        if (it == fitted.end()) {
          return internal_error("profile of ", profile_key(requests[s].candidate),
                                " needs its twin ", profile_key(plain), " profiled first");
        }
        twin = &it->second;
      }
      shapes[s] = fit_shape(requests[s], plans[s], points, twin, options.ranks, cores);
      shapes[s].spread = spread[s];
      shapes[s].seconds = seconds[s];
      fitted[shapes[s].key] = shapes[s];
    }
  }
  return shapes;
}

StatusOr<double> measure_waiting_share(const std::vector<std::string>& base, const Candidate& c,
                                       const Configs& one_stage, const Configs& pipelined,
                                       const LayerTimes& times, double oversubscription,
                                       int iterations, const LaunchOptions& options) {
  Candidate one = c;
  one.pp = 1;
  // Both layouts five times, alternating, so that the ratio of their medians sees the same
  // machine.
  std::vector<double> seconds[2];
  for (int round = 0; round < 5; ++round) {
    for (const Candidate& q : {one, c}) {
      const std::vector<std::string> args = measurement_run_args(
          base, q, pipelined.model.num_layers, pipelined.training.global_batch_size, iterations);
      LaunchOptions o = options;
      o.name = str_cat("profile-waiting-share-", profile_key(q), "-pp", q.pp, "-", round);
      MS_ASSIGN_OR_RETURN(const MeasuredRun run, launch_measured_run(args, o));
      seconds[q.pp == 1 ? 0 : 1].push_back(run.step_seconds);
    }
  }
  return waiting_share_of_ratio(one_stage, pipelined, times, oversubscription, options.ranks,
                                median(seconds[1]) / median(seconds[0]));
}

StatusOr<double> waiting_share_of_ratio(const Configs& one_stage, const Configs& pipelined,
                                        const LayerTimes& times, double oversubscription, int ranks,
                                        double measured_ratio) {
  MS_ASSIGN_OR_RETURN(const StepTime reference,
                      predict_step_time(one_stage, ranks, times, {oversubscription, 0.0}));
  auto predicted = [&](double share) -> StatusOr<double> {
    MS_ASSIGN_OR_RETURN(const StepTime st,
                        predict_step_time(pipelined, ranks, times, {oversubscription, share}));
    return st.total / reference.total;
  };
  // The predicted ratio grows with the share: bisect for the measured one.
  double lo = 0.0, hi = 1.0;
  MS_ASSIGN_OR_RETURN(const double at_lo, predicted(lo));
  MS_ASSIGN_OR_RETURN(const double at_hi, predicted(hi));
  if (measured_ratio <= at_lo) return lo;
  if (measured_ratio >= at_hi) return hi;
  for (int i = 0; i < 40; ++i) {
    const double mid = 0.5 * (lo + hi);
    MS_ASSIGN_OR_RETURN(const double at_mid, predicted(mid));
    (at_mid < measured_ratio ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

StatusOr<MachineProfile> load_profile(const std::string& path, const std::string& command_line,
                                      int ranks, bool* reused) {
  MachineProfile profile;
  profile.command_line = command_line;
  profile.ranks = ranks;
  *reused = false;
  std::ifstream in(path);
  if (!in) return profile;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string error;
  const std::optional<nlohmann::json> parsed = try_parse_json(ss.str(), &error);
  if (!parsed.has_value() || !parsed->is_object()) {
    return data_loss("--prof-file ", path, " is not a profile written by --auto-settings (", error,
                     "); delete it or name another file");
  }
  const nlohmann::json& j = *parsed;
  const auto text = [&](const nlohmann::json& o, const char* key) {
    const auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const auto number = [&](const nlohmann::json& o, const char* key) {
    const auto it = o.find(key);
    return it != o.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  // A profile of another command line, rank count or method (kProfileFormat) is measured anew.
  if (text(j, "command_line") != command_line || static_cast<int>(number(j, "ranks")) != ranks ||
      static_cast<int>(number(j, "format")) != kProfileFormat)
    return profile;
  profile.cores = static_cast<int>(number(j, "cores"));
  profile.gemm_tflops_per_rank = number(j, "gemm_tflops_per_rank");
  if (const auto it = j.find("waiting_core_share"); it != j.end() && it->is_number())
    profile.waiting_core_share = it->get<double>();
  if (const auto shapes = j.find("shapes"); shapes != j.end() && shapes->is_object()) {
    for (const auto& [key, s] : shapes->items()) {
      if (!s.is_object()) continue;
      ProfiledShape shape;
      shape.key = key;
      shape.memory.per_layer_per_sample = number(s, "activation_bytes_per_layer_per_sample");
      const auto affine = [&](const char* key) {
        AffineBytes a;
        const auto it = s.find(key);
        if (it != s.end() && it->is_object()) {
          a.fixed = number(*it, "fixed");
          a.per_sample = number(*it, "per_sample");
        }
        return a;
      };
      shape.memory.outside_layers = affine("activation_bytes_outside_layers");
      shape.memory.workspace = affine("workspace_bytes");
      shape.memory.transient_outside_layers = affine("transient_bytes_outside_layers");
      shape.times.per_step = number(s, "seconds_per_step");
      shape.times.per_layer_step = number(s, "seconds_per_layer_step");
      shape.times.per_microbatch = number(s, "seconds_per_microbatch");
      shape.times.per_layer_microbatch = number(s, "seconds_per_layer_microbatch");
      shape.times.fixed_fraction = number(s, "fixed_fraction");
      shape.times.attention_forward = number(s, "seconds_attention_forward");
      shape.spread = number(s, "spread");
      shape.seconds = number(s, "profiling_seconds");
      profile.shapes[key] = shape;
    }
  }
  *reused = true;
  return profile;
}

Status save_profile(const std::string& path, const MachineProfile& profile) {
  nlohmann::json j;
  j["format"] = kProfileFormat;
  j["command_line"] = profile.command_line;
  j["ranks"] = profile.ranks;
  j["cores"] = profile.cores;
  j["gemm_tflops_per_rank"] = profile.gemm_tflops_per_rank;
  if (profile.waiting_core_share >= 0.0) j["waiting_core_share"] = profile.waiting_core_share;
  nlohmann::json shapes = nlohmann::json::object();
  for (const auto& [key, s] : profile.shapes) {
    const auto affine = [](const AffineBytes& a) {
      return nlohmann::json{{"fixed", a.fixed}, {"per_sample", a.per_sample}};
    };
    shapes[key] = {{"activation_bytes_per_layer_per_sample", s.memory.per_layer_per_sample},
                   {"activation_bytes_outside_layers", affine(s.memory.outside_layers)},
                   {"workspace_bytes", affine(s.memory.workspace)},
                   {"transient_bytes_outside_layers", affine(s.memory.transient_outside_layers)},
                   {"seconds_per_step", s.times.per_step},
                   {"seconds_per_layer_step", s.times.per_layer_step},
                   {"seconds_per_microbatch", s.times.per_microbatch},
                   {"seconds_per_layer_microbatch", s.times.per_layer_microbatch},
                   {"fixed_fraction", s.times.fixed_fraction},
                   {"seconds_attention_forward", s.times.attention_forward},
                   {"spread", s.spread},
                   {"profiling_seconds", s.seconds}};
  }
  j["shapes"] = shapes;
  return write_file_atomically(path, j.dump(2) + "\n");
}

}  // namespace mindspeed
