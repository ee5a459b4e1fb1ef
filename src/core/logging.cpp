// Line-buffered log output.
#include "core/logging.h"

#include <cstdio>

#include "core/check.h"

namespace mindspeed {

void log_line(const std::string& line) {
  std::string out = line;
  out.push_back('\n');
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

void log_warning(const std::string& message) {
  const int rank = log_rank();
  std::string out = rank >= 0 ? str_cat("[rank ", rank, "] WARNING: ", message, "\n")
                              : str_cat("WARNING: ", message, "\n");
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

}  // namespace mindspeed
