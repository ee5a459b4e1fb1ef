// AutoSettingsConfig: MindSpeed's Auto Settings flags (--auto-settings and its companions; the
// planner itself is auto_settings/). The rest of the command line is the run being planned.
#pragma once

#include <cstdint>
#include <string>

namespace mindspeed {

enum class AutoSettingsType {
  kWhite,  ///< memory and time model over profiled rates: no candidate is run
  kBlack,  ///< every candidate that fits is run for a few iterations
  kMixed,  ///< the model proposes, the top candidates are run
};

struct AutoSettingsConfig {
  bool enabled = false;                              ///< --auto-settings
  AutoSettingsType type = AutoSettingsType::kWhite;  ///< --auto-settings-type white|black|mixed
  std::string work_dir;  ///< --auto-settings-work-dir (default: the current directory)
  /// --auto-settings-ranks: ranks this machine gives the profiling and candidate runs (0: the
  /// target world when it is at most nnodes x nproc-per-node, else nnodes x nproc-per-node).
  int ranks = 0;
  std::string log_level = "info";  ///< --auto-settings-log-level warning|info|debug
  int target_nnodes = 0;   ///< --target-nnodes: nodes of the cluster planned for (0: --nnodes)
  int nnodes = 1;          ///< --nnodes: nodes running the profiling runs
  int nproc_per_node = 0;  ///< --nproc-per-node: ranks per node (required)
  int node_rank = 0;       ///< --node-rank (only 0: the planner runs on one node)
  std::string master_addr = "127.0.0.1";  ///< --master-addr
  int master_port = 29500;                ///< --master-port
  std::string prof_file;                  ///< --prof-file: the profiling cache (default <work
                                          ///< dir>/auto_settings_profile.json)
  // The target cluster, where it is not this machine (mindspeed-cpp; 0 = measured here).
  double memory_cap_mb = 0.0;    ///< --auto-settings-memory-cap: MB a rank may use
  double device_tflops = 0.0;    ///< --auto-settings-device-tflops: dense GEMM TFLOP/s per rank
  double intra_node_gbps = 0.0;  ///< --auto-settings-intra-node-bandwidth: GB/s per rank in a node
  double inter_node_gbps =
      0.0;                ///< --auto-settings-inter-node-bandwidth: GB/s per rank across nodes
  /// --auto-settings-top-k: the finalists (>= 3): the mixed search's model's best, the black
  /// search's fastest of its screening run.
  int top_k = 3;
  int rounds = 3;         ///< --auto-settings-rounds: interleaved rounds over the finalists
  int measure_iters = 8;  ///< --auto-settings-iters: iterations of each measured run
};

}  // namespace mindspeed
