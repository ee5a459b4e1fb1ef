// The processes a launcher starts, and every process they start in turn. MPI's daemons
// (orted --daemonize) leave their parent's process tree; the launcher makes itself the
// child subreaper (prctl PR_SET_CHILD_SUBREAPER) so they are re-parented to it, and can then
// end the whole tree — daemons and ranks — when the job fails: nothing is left running.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace mindspeed::launch {

/// Makes this process the subreaper of its descendants.
void become_subreaper();
/// Starts argv[0] (searched on PATH) with `argv` and the environment `env` ("NAME=value"
/// entries; empty: this process's) in a process group of its own.
StatusOr<pid_t> spawn(const std::vector<std::string>& argv,
                      const std::vector<std::string>& env = {});
/// Every living descendant of this process (from /proc).
std::vector<pid_t> descendants();
/// Reaps exited children without blocking; returns the exit code (128 + signal when killed)
/// of `watched` if it is among them.
std::optional<int> reap_children(pid_t watched);
/// SIGTERM to every descendant, SIGKILL to those left after `grace_s`; reaps them.
void end_descendants(double grace_s);
/// This process's environment with `unset` names removed and `set` ("NAME=value") added.
std::vector<std::string> environment_with(const std::vector<std::string>& unset,
                                          const std::vector<std::string>& set);

}  // namespace mindspeed::launch
