// Helpers for the tool tests: running a tool, scratch directories, file comparison.
#pragma once

#include <pty.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "scratch_dir.h"

namespace mindspeed::testing {

inline std::string source_path(const std::string& relative) {
  return std::string(MS_SOURCE_DIR) + "/" + relative;
}

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

/// Runs a shell command line as given (redirections included), capturing stdout.
inline RunResult run_shell(const std::string& command) {
  RunResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

/// Runs MS_TOOLS_DIR/<tool> with the arguments, capturing its output and exit code.
inline RunResult run_tool(const std::string& tool, const std::vector<std::string>& args) {
  std::string command = shell_quote(std::string(MS_TOOLS_DIR) + "/" + tool);
  for (const auto& arg : args) {
    command += ' ';
    command += shell_quote(arg);
  }
  return run_shell(command + " 2>&1");
}

/// Runs argv[0] with its arguments on a new pseudo-terminal (stdin, stdout and stderr) whose
/// output post-processing is off (no '\n' -> "\r\n"), capturing what it writes.
inline RunResult run_on_terminal(const std::vector<std::string>& argv) {
  RunResult result;
  termios settings{};
  cfmakeraw(&settings);
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, &settings, nullptr);
  if (pid < 0) return result;
  if (pid == 0) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(master, buffer, sizeof(buffer));
    if (n > 0) {
      result.output.append(buffer, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EIO once the child has closed the terminal
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(master);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace mindspeed::testing
