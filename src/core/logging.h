// Log output. Each line goes to stdout in one write so lines from several ranks do not
// interleave mid-line; the caller decides which rank logs (Megatron prints the iteration
// line from the last rank and set-up messages from rank 0).
#pragma once

#include <string>

#include "core/str_cat.h"

namespace mindspeed {

/// Writes `line` plus a newline to stdout and flushes.
void log_line(const std::string& line);
/// Writes "WARNING: message" to stderr.
void log_warning(const std::string& message);

/// A duration as "H:MM:SS" (hours unbounded, e.g. "0:04:05", "27:00:00"); "?" when not finite
/// or negative. Used for the time left of a run or a tool.
std::string format_duration(double seconds);

template <typename... Args>
void log_info(const Args&... args) {
  log_line(str_cat(args...));
}

}  // namespace mindspeed
