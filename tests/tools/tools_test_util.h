// Helpers for the tool tests: running a tool, scratch directories, file comparison.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

/// Runs MS_TOOLS_DIR/<tool> with the arguments, capturing its output and exit code.
inline RunResult run_tool(const std::string& tool, const std::vector<std::string>& args) {
  std::string command = shell_quote(std::string(MS_TOOLS_DIR) + "/" + tool);
  for (const auto& arg : args) {
    command += ' ';
    command += shell_quote(arg);
  }
  command += " 2>&1";
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


}  // namespace mindspeed::testing
