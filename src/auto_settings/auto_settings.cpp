// The --auto-settings planner (auto_settings.h).
#include "auto_settings/auto_settings.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "auto_settings/candidate.h"
#include "auto_settings/memory_model.h"
#include "auto_settings/profile.h"
#include "auto_settings/run_launcher.h"
#include "auto_settings/search_space.h"
#include "auto_settings/time_model.h"
#include "checkpointing/durable_file.h"
#include "cli/arguments.h"
#include "config/validate.h"
#include "core/str_cat.h"
#include "kernels/backend.h"
#include "training/flops.h"
#include "training/pretrain.h"

namespace mindspeed {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct Evaluated {
  const LegalCandidate* legal = nullptr;
  MemoryEstimate memory;
  StepTime step;
  CommVolumes comm;
  bool fits = false;
  double tokens_per_second = 0.0, tflops_per_rank = 0.0, mfu = 0.0;
  std::optional<MeasuredRun> measured;  ///< black / mixed: its first run
  std::vector<double> round_seconds;    ///< a finalist's step in each interleaved round
  std::string run_error;                ///< a measured run that failed
  /// The finalists rank by the median of their rounds, other measured candidates by their run.
  double ranking_seconds() const {
    if (!round_seconds.empty()) return median(round_seconds);
    return measured ? measured->step_seconds : step.total;
  }
};

int refuse(const std::string& message, int code) {
  std::fprintf(stderr, "pretrain_gpt --auto-settings: %s\n", message.c_str());
  return code;
}

std::string join(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) {
    if (!s.empty()) s += ' ';
    const bool plain =
        !a.empty() && a.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos;
    if (plain) {
      s += a;
    } else {
      s += '\'';
      for (char ch : a) s += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      s += '\'';
    }
  }
  return s;
}

double machine_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0.0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemTotal:") return kb * 1024.0;
  }
  return 0.0;
}

// One rank's dense GEMM rate with `ranks` ranks sharing this machine's cores.
double measure_gemm_tflops_per_rank(int ranks, int cores) {
  const Backend backend = select_backend(KernelOptions{}, 1);
  Allocator scratch;
  const double one_core = measure_gemm_tflops(backend, scratch, 1024, 6);
  return one_core * static_cast<double>(cores) / static_cast<double>(std::max(1, ranks));
}

nlohmann::json stage_json(const StageMemory& s) {
  return {{"pp_rank", s.pp_rank},
          {"num_params", s.num_params},
          {"params_bytes", s.params},
          {"grads_bytes", s.grads},
          {"optimizer_bytes", s.optimizer},
          {"activations_bytes", s.activations},
          {"workspace_bytes", s.workspace},
          {"transient_bytes", s.transient},
          {"live_microbatch_chunks", s.live_microbatch_chunks},
          {"total_bytes", s.total()}};
}

nlohmann::json candidate_json(const Candidate& c, int world) {
  return {{"tensor_model_parallel_size", c.tp},
          {"sequence_parallel", c.sp},
          {"pipeline_model_parallel_size", c.pp},
          {"num_virtual_stages_per_pipeline_rank", c.vpp},
          {"dualpipev", c.dualpipev},
          {"context_parallel_size", c.cp},
          {"context_parallel_algo", c.cp > 1 ? cp_algo_flag_value(c.cp_algo) : "none"},
          {"ulysses_degree_in_cp", c.ulysses_degree},
          {"expert_model_parallel_size", c.ep},
          {"data_parallel_size", c.dp(world)},
          {"micro_batch_size", c.mbs},
          {"recompute", recompute_choice_name(c.recompute)},
          {"recompute_block_layers", c.recompute_layers},
          {"use_distributed_optimizer", c.distributed_optimizer}};
}

std::string format_plan(int index, const Evaluated& e, int world, double cap_bytes,
                        const std::string& command) {
  const Candidate& c = e.legal->candidate;
  const StageMemory& m = e.memory.largest();
  std::string s = str_cat("plan ", index, ": ", candidate_name(c, world), "\n");
  char line[512];
  std::snprintf(line, sizeof(line),
                "  memory per rank (MiB, pipeline rank %d of %zu): params %.1f | grads %.1f | "
                "optimizer %.1f | "
                "activations %.1f | workspace %.1f | peak %.1f of %.1f\n",
                m.pp_rank, e.memory.stages.size(), m.params / kMiB, m.grads / kMiB,
                m.optimizer / kMiB, m.activations / kMiB, m.workspace / kMiB, m.total() / kMiB,
                cap_bytes / kMiB);
  s += line;
  std::snprintf(line, sizeof(line),
                "  step (s): %.4f = compute %.4f (recompute %.4f) + bubble %.4f + per-step %.4f; "
                "exposed communication "
                "in them %.4f | tokens/s %.1f | TFLOP/s per rank %.3f | MFU %.1f%%\n",
                e.step.total, e.step.compute, e.step.recompute, e.step.bubble, e.step.per_step,
                e.step.exposed_comm, e.tokens_per_second, e.tflops_per_rank, 100.0 * e.mfu);
  s += line;
  if (e.measured) {
    const RankReport& peak = e.measured->largest_memory();
    if (e.round_seconds.empty()) {
      std::snprintf(line, sizeof(line),
                    "  measured: step %.4f s (spread %.0f%%), peak %.1f MiB on rank %d\n",
                    e.measured->step_seconds, 100.0 * e.measured->step_spread,
                    peak.total_peak_bytes / kMiB, peak.rank);
    } else {
      const auto [least, most] =
          std::minmax_element(e.round_seconds.begin(), e.round_seconds.end());
      std::snprintf(line, sizeof(line),
                    "  measured: step %.4f s (median of %zu interleaved rounds, %.4f..%.4f), peak "
                    "%.1f MiB on rank %d\n",
                    e.ranking_seconds(), e.round_seconds.size(), *least, *most,
                    peak.total_peak_bytes / kMiB, peak.rank);
    }
    s += line;
  }
  s += "  command: " + command + "\n";
  return s;
}

}  // namespace

bool wants_auto_settings(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--auto-settings") == 0) return true;
  }
  return false;
}

int auto_settings_main(int argc, const char* const* argv) {
  const auto started = std::chrono::steady_clock::now();
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::atoi(v) > 1) {
      return refuse(str_cat("run --auto-settings as one process, not under a launcher (", var, "=",
                            v, "): it launches its own profiling and candidate runs"),
                    2);
    }
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = parse_arguments(args);
  if (!parsed.ok()) return refuse("error: " + parsed.status().to_string(), 2);
  const AutoSettingsConfig a = parsed->configs.auto_settings;
  if (Status s = validate_auto_settings(a, parsed->configs.training); !s.ok())
    return refuse("error: " + s.to_string(), 2);
  const std::vector<std::string> stripped = strip_searched_flags(args);
  auto base_parsed = parse_arguments(stripped);
  if (!base_parsed.ok()) return refuse("error: " + base_parsed.status().to_string(), 2);
  const Configs& base = base_parsed->configs;
  if (base.training.global_batch_size <= 0) {
    return refuse(
        "error: --auto-settings needs --global-batch-size: every candidate trains the same batch",
        2);
  }
  if (base.model.num_layers <= 0)
    return refuse("error: --auto-settings needs the model's --num-layers", 2);
  auto tokenizer = build_tokenizer_from_config(base.data);
  if (!tokenizer.ok()) return refuse("error: " + tokenizer.status().to_string(), 2);
  const int64_t vocab = (*tokenizer)->vocab_size();

  const int nodes = a.target_nnodes > 0 ? a.target_nnodes : a.nnodes;
  const int world = nodes * a.nproc_per_node;
  const int here = std::min(world, a.ranks > 0 ? a.ranks : a.nnodes * a.nproc_per_node);
  const bool measured_mode = here == world;
  const bool quiet = a.log_level == "warning", debug = a.log_level == "debug";
  if (!measured_mode && a.type != AutoSettingsType::kWhite) {
    return refuse(
        str_cat("error: --auto-settings-type ",
                a.type == AutoSettingsType::kBlack ? "black" : "mixed",
                " runs the candidates on this machine, and the target has ", world, " ranks (",
                nodes, " nodes x ", a.nproc_per_node, ") where ", here,
                " are given here (--auto-settings-ranks); plan it with --auto-settings-type white"),
        2);
  }
  const int cores = static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
  double cap = a.memory_cap_mb * kMiB;
  if (cap <= 0.0) {
    if (!measured_mode) {
      return refuse(
          str_cat("error: a target larger than this machine (", world,
                  " ranks) needs --auto-settings-memory-cap (MiB one rank of it may use)"),
          2);
    }
    cap = 0.9 * machine_memory_bytes() / here;
  }
  if (!measured_mode && (a.device_tflops <= 0.0 || a.intra_node_gbps <= 0.0)) {
    return refuse(
        str_cat(
            "error: a target larger than this machine (", world, " ranks, ", here,
            " here) is planned from FLOPs and bandwidths: give --auto-settings-device-tflops and "
            "--auto-settings-intra-node-bandwidth (and --auto-settings-inter-node-bandwidth for ",
            "several nodes)"),
        2);
  }
  const std::string work_dir = a.work_dir.empty() ? std::string(".") : a.work_dir;
  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);
  if (ec)
    return refuse(str_cat("error: --auto-settings-work-dir ", work_dir, ": ", ec.message()), 2);
  const std::string prof_file =
      a.prof_file.empty() ? work_dir + "/auto_settings_profile.json" : a.prof_file;

  // The search space: every candidate the engine accepts for the target.
  SearchLimits limits;
  limits.world_size = world;
  limits.ranks_per_node = a.nproc_per_node;
  const SearchSpace space = enumerate_candidates(base, vocab, limits);
  if (!quiet) {
    std::printf(
        "auto settings: %lld layouts considered for %d ranks (%d node(s) x %d), %zu accepted by "
        "the engine\n",
        static_cast<long long>(space.considered), world, nodes, a.nproc_per_node,
        space.legal.size());
  }
  if (space.legal.empty()) {
    std::string reasons;
    for (const auto& [reason, count] : space.refusals)
      reasons += str_cat("\n  ", count, " x ", reason);
    return refuse(
        "no layout of this model is accepted for " + std::to_string(world) + " ranks:" + reasons,
        1);
  }

  // The rates: profiled here, or the target's.
  MachineProfile profile;
  bool reused = false;
  if (measured_mode && a.type != AutoSettingsType::kBlack) {
    auto loaded = load_profile(prof_file, join(stripped), here, &reused);
    if (!loaded.ok()) return refuse("error: " + loaded.status().to_string(), 2);
    profile = *std::move(loaded);
  }
  profile.cores = cores;
  if (profile.gemm_tflops_per_rank <= 0.0)
    profile.gemm_tflops_per_rank = measure_gemm_tflops_per_rank(here, cores);
  const double peak_tflops = a.device_tflops > 0.0 ? a.device_tflops : profile.gemm_tflops_per_rank;
  ClusterRates rates;
  rates.flops_per_second = peak_tflops * 1e12;
  rates.intra_node_bytes_per_second = a.intra_node_gbps * 1e9;
  rates.inter_node_bytes_per_second =
      (a.inter_node_gbps > 0.0 ? a.inter_node_gbps : a.intra_node_gbps) * 1e9;
  rates.ranks_per_node = a.nproc_per_node;
  const double oversubscription = std::max(1.0, static_cast<double>(here) / cores);
  LaunchOptions launch;
  launch.ranks = here;
  launch.work_dir = work_dir + "/runs";
  const int iterations = a.measure_iters;

  // The white box over every legal candidate (profiling each layer shape once).
  double profiling_seconds = 0.0;
  const bool profiling = measured_mode && a.type != AutoSettingsType::kBlack;
  // Every layer shape the profile lacks, measured in interleaved rounds (profile.h); shapes
  // without the distributed optimizer first: a twin with it takes one point more.
  if (profiling) {
    std::vector<ShapeRequest> requests;
    int runs = 0;
    for (const bool twins : {false, true}) {
      for (const LegalCandidate& lc : space.legal) {
        if (twins && !lc.candidate.distributed_optimizer) continue;
        ShapeRequest r{profiled_candidate(lc.candidate), lc.configs, 1};
        r.candidate.distributed_optimizer = twins;
        const std::string key = profile_key(r.candidate);
        const bool listed =
            std::any_of(requests.begin(), requests.end(),
                        [&](const ShapeRequest& q) { return profile_key(q.candidate) == key; });
        if (profile.shapes.contains(key) || listed) continue;
        for (const LegalCandidate& other : space.legal) {
          if (profile_key(profiled_candidate(other.candidate)) == key)
            r.largest_micro_batch = std::max(r.largest_micro_batch, other.candidate.mbs);
        }
        runs += profiling_runs_of(r, here);
        requests.push_back(std::move(r));
      }
    }
    if (!requests.empty()) {
      if (!quiet) {
        std::printf(
            "auto settings: profiling %zu layer shape(s): %d runs of %d iterations, in "
            "interleaved rounds\n",
            requests.size(), runs, iterations);
        std::fflush(stdout);
      }
      auto measured = profile_shapes(stripped, requests, iterations, launch, cores, profile.shapes);
      if (!measured.ok()) return refuse("profiling failed: " + measured.status().to_string(), 1);
      for (ProfiledShape& shape : *measured) {
        profiling_seconds += shape.seconds;
        if (debug) {
          std::printf("auto settings: profiled %s (spread %.0f%%)\n", shape.key.c_str(),
                      100.0 * shape.spread);
        }
        std::string key = shape.key;
        profile.shapes[key] = std::move(shape);
      }
      if (Status st = save_profile(prof_file, profile); !st.ok())
        return refuse("error: " + st.to_string(), 1);
    }
  }
  // Pipelines on shared cores: what a waiting rank still takes of them, measured once on the
  // shape of the first 1F1B candidate with the most stages, one layer per stage, as a pipeline
  // and as one stage (the most stages: where the share moves the step most).
  CoreSharing sharing{oversubscription, 0.0};
  if (profiling && oversubscription > 1.0) {
    int most_stages = 1;
    for (const LegalCandidate& lc : space.legal) {
      if (lc.candidate.vpp == 0 && !lc.candidate.dualpipev)
        most_stages = std::max(most_stages, lc.candidate.pp);
    }
    for (const LegalCandidate& lc : space.legal) {
      if (profile.waiting_core_share >= 0.0) break;
      if (lc.candidate.pp != most_stages || most_stages == 1 || lc.candidate.vpp > 0 ||
          lc.candidate.dualpipev)
        continue;
      Candidate q = profiled_candidate(lc.candidate);
      q.pp = most_stages;
      q.distributed_optimizer = false;
      const int dp = q.dp(here);
      const int64_t batch = dp * std::clamp<int64_t>(base.training.global_batch_size / dp, 2, 8);
      Configs stages[2] = {base, base};  // one stage, the pipeline
      bool valid = true;
      for (int i : {0, 1}) {
        Candidate layout = q;
        layout.pp = i == 0 ? 1 : most_stages;
        apply_candidate(layout, stages[i]);
        stages[i].model.num_layers = most_stages;
        stages[i].training.global_batch_size = batch;
        valid = valid && validate_configs(stages[i], here, vocab).ok();
      }
      if (!valid) continue;
      if (!quiet) {
        std::printf("auto settings: profiling how pipeline ranks share the cores (%s, 10 runs)\n",
                    profile_key(q).c_str());
        std::fflush(stdout);
      }
      const auto start = std::chrono::steady_clock::now();
      auto share = measure_waiting_share(stripped, q, stages[0], stages[1],
                                         profile.shapes.at(profile_key(q)).times, oversubscription,
                                         iterations, launch);
      if (!share.ok()) return refuse("profiling failed: " + share.status().to_string(), 1);
      profiling_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      profile.waiting_core_share = *share;
      if (Status s = save_profile(prof_file, profile); !s.ok())
        return refuse("error: " + s.to_string(), 1);
    }
    sharing.waiting_share = std::max(0.0, profile.waiting_core_share);
    if (debug) {
      std::printf(
          "auto settings: a rank waiting on its pipeline neighbour demands %.2f of a "
          "working rank's share of the cores\n",
          sharing.waiting_share);
    }
  }
  std::vector<Evaluated> all;
  all.reserve(space.legal.size());
  const double flops_per_step = num_floating_point_operations(space.legal.front().configs.model,
                                                              base.training.global_batch_size);
  for (const LegalCandidate& lc : space.legal) {
    Evaluated e;
    e.legal = &lc;
    const ProfiledShape* shape =
        profiling ? &profile.shapes.at(profile_key(profiled_candidate(lc.candidate))) : nullptr;
    auto memory = estimate_memory(lc.configs, world, shape != nullptr ? &shape->memory : nullptr);
    if (!memory.ok()) return refuse("memory model: " + memory.status().to_string(), 1);
    e.memory = *std::move(memory);
    const LayerTimes times =
        shape != nullptr ? shape->times : analytic_layer_times(lc.configs, world, rates);
    auto step =
        predict_step_time(lc.configs, world, times, shape != nullptr ? sharing : CoreSharing{});
    if (!step.ok()) return refuse("time model: " + step.status().to_string(), 1);
    e.step = *step;
    e.comm = comm_volumes(lc.configs, world, e.memory);
    e.fits = static_cast<double>(e.memory.largest().total()) <= cap;
    all.push_back(std::move(e));
  }
  std::vector<Evaluated*> fitting;
  for (Evaluated& e : all) {
    if (e.fits) fitting.push_back(&e);
  }
  auto by_prediction = [](const Evaluated* x, const Evaluated* y) {
    return x->step.total < y->step.total;
  };
  std::stable_sort(fitting.begin(), fitting.end(), by_prediction);
  if (fitting.empty()) {
    const Evaluated& least =
        *std::min_element(all.begin(), all.end(), [](const Evaluated& x, const Evaluated& y) {
          return x.memory.largest().total() < y.memory.largest().total();
        });
    return refuse(str_cat("no layout fits in ", cap / kMiB, " MiB per rank; the smallest, ",
                          candidate_name(least.legal->candidate, world), ", needs ",
                          least.memory.largest().total() / kMiB, " MiB"),
                  1);
  }

  // Black box: every fitting candidate once (the screening), then its fastest top_k again;
  // mixed: the model's best top_k. These finalists run in `rounds` interleaved rounds (a round
  // runs each once, in turn) and rank by the median of their rounds: one run's median iteration
  // moves by 5-10 % from run to run here, and more as the machine drifts, and the fastest of
  // many single runs is the luckiest one (so black's screening run is not among its rounds).
  if (a.type != AutoSettingsType::kWhite) {
    // One run of `e`: the user's model and batch, a few iterations, no outputs. False when it
    // failed or its peak exceeds the cap (e.run_error says which); a finalist round's step goes
    // to e.round_seconds. The first run is kept for its memory peaks.
    auto measure = [&](Evaluated& e, const std::string& name, const std::string& progress,
                       bool finalist_round) {
      const std::vector<std::string> run_args =
          measurement_run_args(stripped, e.legal->candidate, base.model.num_layers,
                               base.training.global_batch_size, iterations);
      LaunchOptions o = launch;
      o.name = name;
      if (!quiet) {
        std::printf("auto settings: running %s %s\n", progress.c_str(),
                    candidate_name(e.legal->candidate, world).c_str());
        std::fflush(stdout);
      }
      auto run = launch_measured_run(run_args, o);
      if (!run.ok()) {
        e.run_error = run.status().message();
        if (!quiet)
          std::printf("auto settings:   failed: %s\n", e.run_error.substr(0, 300).c_str());
        return false;
      }
      if (static_cast<double>(run->largest_memory().total_peak_bytes) > cap) {
        e.run_error = str_cat("its measured peak, ", run->largest_memory().total_peak_bytes / kMiB,
                              " MiB, exceeds the cap");
      }
      if (finalist_round) e.round_seconds.push_back(run->step_seconds);
      if (!e.measured) e.measured = *std::move(run);
      return e.run_error.empty();
    };
    auto by_measurement = [](const Evaluated* x, const Evaluated* y) {
      return x->ranking_seconds() < y->ranking_seconds();
    };
    std::vector<Evaluated*> finalists, screened;
    if (a.type == AutoSettingsType::kBlack) {
      for (size_t i = 0; i < fitting.size(); ++i) {
        if (measure(*fitting[i], str_cat("candidate-", i), str_cat(i + 1, "/", fitting.size()),
                    false))
          screened.push_back(fitting[i]);
      }
      std::stable_sort(screened.begin(), screened.end(), by_measurement);
      const size_t k = std::min(screened.size(), static_cast<size_t>(a.top_k));
      finalists.assign(screened.begin(), screened.begin() + static_cast<std::ptrdiff_t>(k));
      screened.erase(screened.begin(), screened.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const size_t k = std::min(fitting.size(), static_cast<size_t>(a.top_k));
      finalists.assign(fitting.begin(), fitting.begin() + static_cast<std::ptrdiff_t>(k));
    }
    for (int round = 0; round < a.rounds; ++round) {
      for (size_t i = 0; i < finalists.size(); ++i) {
        if (!finalists[i]->run_error.empty()) continue;  // failed in an earlier round
        measure(*finalists[i], str_cat("finalist-", i, "-round-", round),
                str_cat("finalist ", i + 1, "/", finalists.size(), " (round ", round + 1, " of ",
                        a.rounds, ")"),
                true);
      }
    }
    // The finalists that ran every round, by their median; then the other screened ones, by
    // their one run; then the rest in predicted order.
    std::vector<Evaluated*> order;
    for (Evaluated* e : finalists) {
      if (e->run_error.empty()) order.push_back(e);
    }
    std::stable_sort(order.begin(), order.end(), by_measurement);
    order.insert(order.end(), screened.begin(), screened.end());
    if (order.empty())
      return refuse("every candidate run failed; see the logs under " + launch.work_dir, 1);
    for (Evaluated* e : fitting) {
      if (std::find(order.begin(), order.end(), e) == order.end()) order.push_back(e);
    }
    fitting = order;
  }
  for (Evaluated* e : fitting) {
    const double seconds = e->ranking_seconds();
    e->tokens_per_second =
        static_cast<double>(base.training.global_batch_size * base.model.seq_length) / seconds;
    e->tflops_per_rank = flops_per_step / seconds / world / 1e12;
    e->mfu = peak_tflops > 0.0 ? e->tflops_per_rank / peak_tflops : 0.0;
  }

  // The plan: the top 3 on stdout, every fitting candidate in the JSON.
  const std::string program = self_executable();
  // A plan's pretrain_gpt arguments: the user's command line with the candidate's flags.
  auto args_of = [&](const Evaluated& e) {
    std::vector<std::string> full = stripped;
    const std::vector<std::string> flags = candidate_flags(e.legal->candidate);
    full.insert(full.end(), flags.begin(), flags.end());
    return full;
  };
  auto command_of = [&](const Evaluated& e) {
    const std::vector<std::string> full = args_of(e);
    if (nodes == 1) return str_cat("mpirun -np ", world, " ", join({program}), " ", join(full));
    return str_cat("torchrun --nproc_per_node ", a.nproc_per_node, " --nnodes ", nodes,
                   " --node_rank $NODE_RANK", " --master_addr ", a.master_addr, " --master_port ",
                   a.master_port, " pretrain_gpt.py ", join(full));
  };
  const double search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const char* type_name = a.type == AutoSettingsType::kBlack   ? "black"
                          : a.type == AutoSettingsType::kMixed ? "mixed"
                                                               : "white";
  nlohmann::json plan;
  plan["type"] = type_name;
  plan["mode"] =
      measured_mode ? "profiled on this machine" : "analytic (target larger than this machine)";
  plan["world_size"] = world;
  plan["nodes"] = nodes;
  plan["ranks_per_node"] = a.nproc_per_node;
  plan["ranks_here"] = here;
  plan["cores_here"] = cores;
  plan["memory_cap_bytes"] = cap;
  plan["peak_tflops_per_rank"] = peak_tflops;
  plan["considered"] = space.considered;
  plan["legal"] = space.legal.size();
  plan["fitting"] = fitting.size();
  plan["search_seconds"] = search_seconds;
  plan["profiling_seconds"] = profiling_seconds;
  plan["profile_reused"] = reused;
  plan["refusals"] = space.refusals;
  nlohmann::json plans = nlohmann::json::array();
  for (size_t i = 0; i < fitting.size(); ++i) {
    const Evaluated& e = *fitting[i];
    nlohmann::json p;
    p["rank"] = i + 1;
    p["name"] = candidate_name(e.legal->candidate, world);
    p["layout"] = candidate_json(e.legal->candidate, world);
    p["args"] = args_of(e);
    p["command"] = command_of(e);
    nlohmann::json stages = nlohmann::json::array();
    for (const StageMemory& s : e.memory.stages) stages.push_back(stage_json(s));
    p["memory"] = {{"stages", stages}, {"largest_total_bytes", e.memory.largest().total()}};
    p["step_seconds"] = {{"total", e.step.total},         {"compute", e.step.compute},
                         {"recompute", e.step.recompute}, {"bubble", e.step.bubble},
                         {"per_step", e.step.per_step},   {"exposed_comm", e.step.exposed_comm}};
    p["tokens_per_second"] = e.tokens_per_second;
    p["tflops_per_rank"] = e.tflops_per_rank;
    p["mfu"] = e.mfu;
    p["comm_bytes_per_step"] = e.comm;
    if (e.measured) {
      nlohmann::json peaks = nlohmann::json::array();
      for (const RankReport& r : e.measured->ranks) {
        peaks.push_back({{"rank", r.rank},
                         {"pp_rank", r.pp_rank},
                         {"total_peak_bytes", r.total_peak_bytes},
                         {"traffic_bytes", r.traffic_bytes},
                         {"iterations", r.iteration_seconds.size()}});
      }
      p["measured"] = {{"step_seconds", e.ranking_seconds()},
                       {"first_run_step_seconds", e.measured->step_seconds},
                       {"round_step_seconds", e.round_seconds},
                       {"spread", e.measured->step_spread},
                       {"wall_seconds", e.measured->wall_seconds},
                       {"ranks", peaks}};
    }
    if (!e.run_error.empty()) p["run_error"] = e.run_error;
    plans.push_back(std::move(p));
  }
  plan["plans"] = std::move(plans);
  const std::string plan_path = work_dir + "/auto_settings_plan.json";
  if (Status st = write_file_atomically(plan_path, plan.dump(2) + "\n"); !st.ok()) {
    return refuse("error: " + st.to_string(), 1);
  }

  std::printf(
      "auto settings (%s box, %s): %zu of %zu layouts fit in %.1f MiB per rank; search %.1f s "
      "(profiling %.1f s%s)\n",
      type_name, measured_mode ? "profiled here" : "analytic", fitting.size(), space.legal.size(),
      cap / kMiB, search_seconds, profiling_seconds, reused ? ", profile reused" : "");
  // The top 3; every fitting layout at --auto-settings-log-level debug.
  for (size_t i = 0; i < std::min<size_t>(debug ? fitting.size() : 3, fitting.size()); ++i) {
    std::printf(
        "%s", format_plan(static_cast<int>(i) + 1, *fitting[i], world, cap, command_of(*fitting[i]))
                  .c_str());
  }
  std::printf("auto settings: the plan with every fitting layout: %s\n", plan_path.c_str());
  return 0;
}

}  // namespace mindspeed
