// fatal() and the check-failure path.
#include "core/check.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace mindspeed {
namespace {
std::atomic<FatalHandler> g_fatal_handler{nullptr};
std::atomic<int> g_log_rank{-1};
}  // namespace

void set_fatal_handler(FatalHandler handler) { g_fatal_handler.store(handler); }
void set_log_rank(int rank) { g_log_rank.store(rank); }
int log_rank() { return g_log_rank.load(); }

void print_fatal(const std::string& message) {
  const int rank = log_rank();
  if (rank >= 0) {
    std::fprintf(stderr, "[rank %d] FATAL: %s\n", rank, message.c_str());
  } else {
    std::fprintf(stderr, "FATAL: %s\n", message.c_str());
  }
  std::fflush(stderr);
  std::fflush(stdout);
}

void fatal(const std::string& message, int exit_code) {
  print_fatal(message);
  if (FatalHandler handler = g_fatal_handler.load()) handler(exit_code);
  std::abort();
}

void check_failed(const char* file, int line, const char* cond, const std::string& message) {
  fatal(str_cat(file, ":", line, ": check failed: ", cond, message.empty() ? "" : ": ", message));
}

}  // namespace mindspeed
