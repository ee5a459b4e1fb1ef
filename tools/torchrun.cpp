// torchrun for mindspeed-cpp: takes PyTorch torchrun's command line (`torchrun
// $DISTRIBUTED_ARGS pretrain_gpt.py ...`, one launcher per node, or one per node under Slurm
// through srun) and runs the engine's binary on every rank of every node (launch/rendezvous.h:
// a TCP rendezvous at --master-addr:--master-port, then mpirun over the joined nodes, its
// daemons started through the launchers instead of ssh). A training script named by its
// Python file (pretrain_gpt.py) runs the engine's binary of that name.
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "launch/rendezvous.h"
#include "launch/torchrun_args.h"

namespace fs = std::filesystem;
using namespace mindspeed;

namespace {

// The binary for the program torchrun was given: pretrain_gpt.py -> the engine's pretrain_gpt
// (next to this launcher, in ../apps, or on PATH); a binary is taken as given. Absolute, since
// every node starts it by path.
StatusOr<std::string> resolve_program(const std::string& program, bool no_python) {
  std::string name = program;
  const bool python = !no_python && fs::path(program).extension() == ".py";
  if (python) name = fs::path(program).stem().string();
  std::vector<fs::path> candidates;
  if (python || name.find('/') == std::string::npos) {
    const fs::path self = fs::read_symlink("/proc/self/exe").parent_path();
    candidates = {self / name, self.parent_path() / "apps" / name};
    if (const char* path = std::getenv("PATH")) {
      std::string p = path;
      for (size_t start = 0; start <= p.size();) {
        size_t end = p.find(':', start);
        if (end == std::string::npos) end = p.size();
        if (end > start) candidates.push_back(fs::path(p.substr(start, end - start)) / name);
        start = end + 1;
      }
    }
  }
  if (!python && name.find('/') != std::string::npos) candidates = {fs::path(name)};
  for (const fs::path& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec) && access(c.c_str(), X_OK) == 0)
      return fs::absolute(c).lexically_normal().string();
  }
  if (python) {
    return not_found("torchrun: ", program,
                     " is a Python script; this launcher runs the engine's binary '", name,
                     "', found neither next to torchrun, in ../apps, nor on PATH");
  }
  return not_found("torchrun: the program '", program,
                   "' is not an executable file here or on PATH");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args.front() == launch::kRshAgentFlag) {
    return launch::run_rsh_agent(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (!args.empty() && (args.front() == "-h" || args.front() == "--help")) {
    std::cout
        << "usage: torchrun [--nnodes N] [--nproc-per-node N] [--node-rank R] [--master-addr A]\n"
           "                [--master-port P] [--rdzv-backend static|c10d] [--rdzv-endpoint A:P]\n"
           "                [--rdzv-id ID] [--rdzv-conf join_timeout=S,keep_alive_interval=S,\n"
           "                keep_alive_max_attempt=N] [--local-addr A] [--standalone] "
           "[--no-python]\n"
           "                program.py|binary [args...]\n"
           "One launcher per node (under Slurm: srun --ntasks-per-node=1 torchrun ...).\n";
    return 0;
  }
  StatusOr<launch::LaunchSpec> spec =
      launch::parse_torchrun_args(args, launch::process_environment());
  if (!spec.ok()) {
    std::cerr << spec.status().message() << "\n";
    return 2;
  }
  StatusOr<std::string> program = resolve_program(spec->program.front(), spec->no_python);
  if (!program.ok()) {
    std::cerr << program.status().message() << "\n";
    return 2;
  }
  std::vector<std::string> command = spec->program;
  command.front() = *program;
  return launch::run_node(*spec, command);
}
