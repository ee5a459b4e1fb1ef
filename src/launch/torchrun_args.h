// The command line of PyTorch's torchrun (torch.distributed.run), as the launch scripts of
// Megatron-LM, MindSpeed and MindSpeed-LLM pass it: `torchrun $DISTRIBUTED_ARGS
// pretrain_gpt.py ...` with --nproc_per_node, --nnodes, --node_rank, --master_addr and
// --master_port (dashes or underscores, `--flag value` or `--flag=value`), the c10d / static
// rendezvous flags, and torchrun's PET_<FLAG> environment variables for flags not on the
// line. Under Slurm (one launcher per node, `srun --ntasks-per-node=1 torchrun ...`) the
// node count, node rank and first host of the allocation stand in for flags not given.
// Flags of torchrun this launcher cannot honour (restarts, Python modules, log redirection)
// are refused by name, never ignored.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace mindspeed::launch {

struct LaunchSpec {
  int nnodes = 1;
  int node_rank = 0;  ///< -1: assigned at the rendezvous (c10d without --node-rank)
  int nproc_per_node = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string local_addr;  ///< --local-addr: the address this node is reached at ("" = the route to
                           ///< the master)
  std::string rdzv_backend = "static";
  std::string run_id = "none";
  double join_timeout_s = 600.0;       ///< --rdzv-conf join_timeout (torchrun's default)
  double keep_alive_interval_s = 5.0;  ///< --rdzv-conf keep_alive_interval
  int keep_alive_max_attempt =
      3;  ///< --rdzv-conf keep_alive_max_attempt: a node is lost after interval x attempts
  bool no_python = false;
  std::vector<std::string> program;  ///< the training program and its arguments

  int world_size() const { return nnodes * nproc_per_node; }
};

/// An environment lookup (getenv in the tool; a map in tests). nullopt: not set.
using Environment = std::function<std::optional<std::string>(const std::string&)>;
Environment process_environment();

/// Parses torchrun's arguments (argv without the program name).
StatusOr<LaunchSpec> parse_torchrun_args(const std::vector<std::string>& args,
                                         const Environment& env);

/// Slurm's compressed host list ("node[01-03,7],gpu5") as host names, in order.
StatusOr<std::vector<std::string>> expand_slurm_hostlist(const std::string& list);

}  // namespace mindspeed::launch
