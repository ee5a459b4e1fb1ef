// Megatron's log lines (megatron/training/training.py training_log and
// evaluate_and_print_results), so existing log parsers keep working, plus mindspeed-cpp's
// extra fields appended at the end of the iteration line (tokens per second, MFU and the time
// left to --train-iters) and a
// memory line in the style of Megatron's report_memory.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"

namespace mindspeed {

struct IterationLog {
  int64_t iteration = 0;
  int64_t train_iters = 0;
  int64_t consumed_samples = 0;
  double elapsed_ms_per_iteration = 0.0;
  double tflops_per_rank = 0.0;      ///< Megatron's "throughput per GPU (TFLOP/s/GPU)"
  double learning_rate = 0.0;
  int64_t global_batch_size = 0;
  double lm_loss = 0.0;              ///< averaged over the logged iterations
  /// MoE: "load_balancing_loss", "z_loss" averaged over the logged iterations (Megatron's
  /// track_moe_metrics entries of total_loss_dict; shown when positive).
  std::vector<std::pair<std::string, double>> moe_losses;
  double loss_scale = 1.0;            ///< the loss scaler's scale after this step (1 without one)
  double grad_norm = 0.0;
  bool has_grad_norm = true;          ///< false: the step was skipped on an overflow (Megatron's None)
  double num_zeros = -1.0;    ///< --log-num-zeros-in-grad: zero gradient elements; < 0 = not shown
  double params_norm = -1.0;  ///< --log-params-norm: L2 norm of the parameters; < 0 = not shown
  int64_t skipped_iterations = 0;
  int64_t nan_iterations = 0;
  double tokens_per_second_per_rank = 0.0;
  double mfu = -1.0;                 ///< fraction of --peak-tflops; < 0 = not shown
  double time_left_seconds = -1.0;   ///< estimated time to --train-iters; < 0 = not shown
};

/// " [date time] iteration        N/       T | consumed samples: ... | ... |"
std::string format_iteration_line(const IterationLog& log, const std::string& timestamp);
/// The three validation lines (dashes, text, dashes) joined with newlines; `prefix` is
/// "iteration N" or "the end of training for val data".
std::string format_validation_lines(const std::string& prefix, double lm_loss);
/// "[Rank r] memory (MiB) | params cur/peak | ... | total cur/peak | cached ..."
std::string format_memory_line(int rank, const MemoryStats& stats);
/// Local time as "YYYY-MM-DD HH:MM:SS".
std::string timestamp_now();

}  // namespace mindspeed
