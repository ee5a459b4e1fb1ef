// Candidate (candidate.h).
#include "auto_settings/candidate.h"

#include <map>

#include "core/str_cat.h"

namespace mindspeed {

const char* recompute_choice_name(RecomputeChoice r) {
  switch (r) {
    case RecomputeChoice::kNone:
      return "none";
    case RecomputeChoice::kSelective:
      return "selective";
    case RecomputeChoice::kFull:
      return "full";
  }
  return "?";
}

const char* cp_algo_flag_value(CpAlgo algo) {
  switch (algo) {
    case CpAlgo::kUlysses:
      return "ulysses_cp_algo";
    case CpAlgo::kHybrid:
      return "hybrid_cp_algo";
    case CpAlgo::kRing:
      break;
  }
  return "megatron_cp_algo";
}

std::vector<std::string> candidate_flags(const Candidate& c) {
  std::vector<std::string> f = {"--tensor-model-parallel-size", std::to_string(c.tp),
                                "--pipeline-model-parallel-size", std::to_string(c.pp)};
  if (c.sp) f.push_back("--sequence-parallel");
  if (c.vpp > 0) {
    f.insert(f.end(), {"--num-virtual-stages-per-pipeline-rank", std::to_string(c.vpp)});
  }
  if (c.dualpipev) f.insert(f.end(), {"--schedules-method", "dualpipev"});
  if (c.cp > 1) {
    f.insert(f.end(), {"--context-parallel-size", std::to_string(c.cp), "--context-parallel-algo",
                       cp_algo_flag_value(c.cp_algo)});
    if (c.cp_algo == CpAlgo::kHybrid)
      f.insert(f.end(), {"--ulysses-degree-in-cp", std::to_string(c.ulysses_degree)});
  }
  if (c.ep > 1) f.insert(f.end(), {"--expert-model-parallel-size", std::to_string(c.ep)});
  f.insert(f.end(), {"--micro-batch-size", std::to_string(c.mbs)});
  if (c.recompute == RecomputeChoice::kSelective)
    f.insert(f.end(), {"--recompute-granularity", "selective"});
  if (c.recompute == RecomputeChoice::kFull) {
    f.insert(f.end(), {"--recompute-granularity", "full", "--recompute-method",
                       c.recompute_layers > 0 ? "block" : "uniform", "--recompute-num-layers",
                       std::to_string(c.recompute_layers > 0 ? c.recompute_layers : 1)});
  }
  if (c.distributed_optimizer) f.push_back("--use-distributed-optimizer");
  return f;
}

void apply_candidate(const Candidate& c, Configs& configs) {
  ParallelConfig& p = configs.parallel;
  p.tensor_model_parallel_size = c.tp;
  p.sequence_parallel = c.sp;
  p.pipeline_model_parallel_size = c.pp;
  p.num_virtual_stages_per_pipeline_rank = c.vpp;
  p.num_layers_per_virtual_pipeline_stage = 0;
  p.dualpipev = c.dualpipev;
  p.context_parallel_size = c.cp;
  p.cp.algo = c.cp > 1 ? c.cp_algo : CpAlgo::kRing;
  p.cp.ulysses_degree = c.cp > 1 && c.cp_algo == CpAlgo::kHybrid ? c.ulysses_degree : 1;
  p.expert_model_parallel_size = c.ep;
  p.use_distributed_optimizer = c.distributed_optimizer;
  configs.training.micro_batch_size = c.mbs;
  RecomputeConfig& rc = configs.model.recompute;
  rc.granularity = c.recompute == RecomputeChoice::kFull        ? RecomputeGranularity::kFull
                   : c.recompute == RecomputeChoice::kSelective ? RecomputeGranularity::kSelective
                                                                : RecomputeGranularity::kNone;
  const bool full = c.recompute == RecomputeChoice::kFull;
  rc.method = !full                    ? RecomputeMethod::kNone
              : c.recompute_layers > 0 ? RecomputeMethod::kBlock
                                       : RecomputeMethod::kUniform;
  rc.num_layers = !full ? -1 : c.recompute_layers > 0 ? c.recompute_layers : 1;
}

std::string candidate_name(const Candidate& c, int world_size) {
  std::string s = str_cat("TP", c.tp, c.sp ? "+SP" : "", " PP", c.pp);
  if (c.vpp > 0) s += str_cat(" VPP", c.vpp);
  if (c.dualpipev) s += " DualPipeV";
  s += str_cat(" CP", c.cp);
  if (c.cp > 1) {
    s += c.cp_algo == CpAlgo::kUlysses  ? "(ulysses)"
         : c.cp_algo == CpAlgo::kHybrid ? str_cat("(hybrid u", c.ulysses_degree, ")")
                                        : "(ring)";
  }
  if (c.ep > 1) s += str_cat(" EP", c.ep);
  s += str_cat(" DP", c.dp(world_size), " mbs", c.mbs,
               " recompute=", recompute_choice_name(c.recompute));
  if (c.recompute == RecomputeChoice::kFull && c.recompute_layers > 0)
    s += str_cat("(block ", c.recompute_layers, ")");
  if (c.distributed_optimizer) s += " distopt";
  return s;
}

std::vector<std::string> strip_searched_flags(const std::vector<std::string>& args) {
  // Each searched or planner flag with the number of values it takes.
  static const std::map<std::string, int> kStripped = {
      {"--tensor-model-parallel-size", 1},
      {"--pipeline-model-parallel-size", 1},
      {"--sequence-parallel", 0},
      {"--num-layers-per-virtual-pipeline-stage", 1},
      {"--num-virtual-stages-per-pipeline-rank", 1},
      {"--schedules-method", 1},
      {"--context-parallel-size", 1},
      {"--context-parallel-algo", 1},
      {"--ulysses-degree-in-cp", 1},
      {"--expert-model-parallel-size", 1},
      {"--micro-batch-size", 1},
      {"--recompute-granularity", 1},
      {"--recompute-method", 1},
      {"--recompute-num-layers", 1},
      {"--recompute-activations", 0},
      {"--use-distributed-optimizer", 0},
      {"--auto-settings", 0},
      {"--auto-settings-type", 1},
      {"--auto-settings-work-dir", 1},
      {"--auto-settings-ranks", 1},
      {"--auto-settings-log-level", 1},
      {"--target-nnodes", 1},
      {"--nnodes", 1},
      {"--nproc-per-node", 1},
      {"--node-rank", 1},
      {"--master-addr", 1},
      {"--master-port", 1},
      {"--prof-file", 1},
      {"--auto-settings-memory-cap", 1},
      {"--auto-settings-device-tflops", 1},
      {"--auto-settings-intra-node-bandwidth", 1},
      {"--auto-settings-inter-node-bandwidth", 1},
      {"--auto-settings-top-k", 1},
      {"--auto-settings-rounds", 1},
      {"--auto-settings-iters", 1},
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::string name = a.substr(0, a.find('='));
    const auto it = kStripped.find(name);
    if (it == kStripped.end()) {
      out.push_back(a);
      continue;
    }
    if (a.find('=') == std::string::npos) i += static_cast<size_t>(it->second);
  }
  return out;
}

}  // namespace mindspeed
