// Log line formatting (training_log.h).
#include "training/training_log.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <string>

#include "core/logging.h"

namespace mindspeed {
namespace {
// printf into a std::string.
template <typename... Args>
std::string fmt(const char* format, Args... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  std::string out(static_cast<size_t>(n), '\0');
  std::snprintf(out.data(), out.size() + 1, format, args...);
  return out;
}
}  // namespace

std::string format_iteration_line(const IterationLog& l, const std::string& timestamp) {
  std::string s = " [" + timestamp + "]";
  s += fmt(" iteration %8lld/%8lld |", static_cast<long long>(l.iteration), static_cast<long long>(l.train_iters));
  s += fmt(" consumed samples: %12lld |", static_cast<long long>(l.consumed_samples));
  s += fmt(" elapsed time per iteration (ms): %.1f |", l.elapsed_ms_per_iteration);
  s += fmt(" throughput per GPU (TFLOP/s/GPU): %.3f |", l.tflops_per_rank);
  s += fmt(" learning rate: %.6E |", l.learning_rate);
  s += fmt(" global batch size: %5lld |", static_cast<long long>(l.global_batch_size));
  s += fmt(" lm loss: %.6E |", l.lm_loss);
  for (const auto& [name, value] : l.moe_losses) {
    if (value > 0.0) s += fmt(" %s: %.6E |", name.c_str(), value);
  }
  s += fmt(" loss scale: %.1f |", l.loss_scale);
  if (l.has_grad_norm) s += fmt(" grad norm: %.3f |", l.grad_norm);
  if (l.num_zeros >= 0.0) s += fmt(" num zeros: %.1f |", l.num_zeros);  // a float in Megatron
  if (l.params_norm >= 0.0) s += fmt(" params norm: %.3f |", l.params_norm);
  s += fmt(" number of skipped iterations: %3lld |", static_cast<long long>(l.skipped_iterations));
  s += fmt(" number of nan iterations: %3lld |", static_cast<long long>(l.nan_iterations));
  s += fmt(" tokens per second per GPU: %.1f |", l.tokens_per_second_per_rank);
  if (l.mfu >= 0.0) s += fmt(" MFU: %.1f%% |", 100.0 * l.mfu);
  if (l.time_left_seconds >= 0.0) s += " time left: " + format_duration(l.time_left_seconds) + " |";
  return s;
}

std::string format_validation_lines(const std::string& prefix, double lm_loss) {
  std::string s = " validation loss at " + prefix + " | ";
  s += fmt("lm loss value: %.6E | ", lm_loss);
  s += fmt("lm loss PPL: %.6E | ", std::exp(std::min(20.0, lm_loss)));
  const std::string dashes(s.size() + 1, '-');
  return dashes + "\n" + s + "\n" + dashes;
}

std::string format_memory_line(int rank, const MemoryStats& stats) {
  return fmt("[Rank %d] memory (MiB) | ", rank) + format_memory_stats(stats) +
         fmt(" | cached %.1f", static_cast<double>(stats.cached) / (1024.0 * 1024.0));
}

std::string timestamp_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace mindspeed
