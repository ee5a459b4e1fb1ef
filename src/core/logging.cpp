// Line-buffered log output.
#include "core/logging.h"

#include <cmath>
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

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0.0 || seconds > 1e12) return "?";
  const long long s = std::llround(seconds);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

}  // namespace mindspeed
