// The launcher's one bootstrap path: torchrun's roles over TCP, MPI's processes and transport.
//
// Each node runs one launcher (tools/torchrun; under Slurm one per node through srun). Node 0
// listens at --master-addr:--master-port; the others connect there (retrying until the join
// timeout) and introduce themselves: node rank, node count, processes per node, run id, host
// name and the address they are reached at. Node 0 checks that they agree (a wrong node count,
// a node rank claimed twice, a node missing at the timeout end every launcher with a message
// naming the node and the cause), then starts `mpirun` over the nodes' addresses, ranks
// numbered node-major as torchrun numbers them (rank = node_rank x nproc_per_node +
// local_rank). mpirun reaches the other nodes through this launcher instead of ssh: its remote
// shell agent (plm_rsh_agent) is this binary in agent mode, which hands MPI's daemon command to
// the launcher of that node over the same TCP connection scheme; that launcher runs it. The
// ranks then form one world over MPI's TCP transport — no home-made collectives.
//
// While the job runs, node 0 and each node exchange keep-alives every keep_alive_interval; a
// node silent for keep_alive_interval x keep_alive_max_attempt (its link cut, the host gone)
// or whose launcher ends is named, and every launcher ends its whole process tree (MPI's
// daemons and the ranks, see process_tree.h): no rank is left hanging in a collective. When
// mpirun ends, every launcher exits with its exit code.
#pragma once

#include <string>
#include <vector>

#include "launch/torchrun_args.h"

namespace mindspeed::launch {

/// Runs this node's part of the job; returns the process exit code. `program` is the resolved
/// training command (absolute path first).
int run_node(const LaunchSpec& spec, const std::vector<std::string>& program);

/// mpirun's remote shell agent: `args` = host, then the command words mpirun would give ssh.
/// Runs the command on that host through its launcher; returns the command's exit code (255
/// when the host cannot be reached, as ssh does).
int run_rsh_agent(const std::vector<std::string>& args);

/// The flag that puts the launcher binary in agent mode.
inline constexpr const char* kRshAgentFlag = "--mindspeed-rsh-agent";

}  // namespace mindspeed::launch
