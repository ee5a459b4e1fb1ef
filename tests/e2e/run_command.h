// Runs a shell command (a binary, or mpirun with one), capturing stdout and stderr together,
// the exit code and the wall time: the end-to-end tests' way of launching pretrain_gpt.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace mindspeed::testing {

struct CommandResult {
  int exit_code = -1;  ///< -1 when killed by a signal
  std::string output;  ///< stdout and stderr
  double seconds = 0.0;
};

/// `mpirun` (the path a test target defines as MS_MPIRUN) with the flags every test launch
/// uses: oversubscribed cores, root allowed, one OpenMP thread per rank that sleeps when idle.
inline std::string mpirun_prefix(const char* mpirun) {
  return std::string(mpirun) +
         " --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE";
}

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace mindspeed::testing
