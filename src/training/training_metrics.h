// Where a run's numbers go besides the log lines: TensorBoard scalars with Megatron's tags,
// written when Megatron writes them (megatron/training/training.py training_log() and
// evaluate_and_print_results(), core_v0.12), and mindspeed-cpp's JSON-lines metrics file.
// Only the rank that prints the iteration line writes (Megatron's tensorboard writer exists
// on the last rank only); on the other ranks every call does nothing.
//
// TensorBoard, every --tensorboard-log-interval iterations (step = iteration; each "X" also
// as "X vs samples" with step = consumed train samples):
//   'learning-rate' (unless --no-log-learnig-rate-to-tensorboard), 'batch-size', 'lm loss'
//   (this iteration's loss, as Megatron's loss_dict), 'loss-scale' (1.0: no fp16 scaler;
//   unless --no-log-loss-scale-to-tensorboard), 'world-size' (--log-world-size-to-tensorboard),
//   'grad-norm'; with --log-memory-to-tensorboard 'mem-reserved-bytes' (allocator bytes in use
//   plus cached), 'mem-allocated-bytes', 'mem-max-allocated-bytes', 'mem-allocated-count'
//   (live blocks) -- no "vs samples" for these, as in Megatron.
// At each log line with --log-timers-to-tensorboard: 'iteration-time' (seconds) and
// 'throughput' (TFLOP/s per GPU). Megatron's per-phase timers ('forward-backward-time', ...)
// are written only at --timing-log-level >= 1, which is not implemented yet, so none are.
// At each evaluation: 'lm loss validation' (+ vs samples), and with
// --log-validation-ppl-to-tensorboard 'lm loss validation ppl' (+ vs samples). As in Megatron,
// the end-of-training test-set evaluation goes under the same tags, and nothing is written at
// the end of a --skip-train run.
//
// The metrics file (--metrics-file, default <tensorboard-dir>/metrics.jsonl) gets one JSON
// object per line, appended with one write() each (a killed run leaves whole lines):
//   {"type":"iteration","iteration":..,"train_iters":..,"consumed_samples":..,
//    "elapsed_ms_per_iteration":..,"throughput_tflops_per_gpu":..,"learning_rate":..,
//    "global_batch_size":..,"lm_loss":..,"loss_scale":..,"grad_norm":..,
//    "skipped_iterations":..,"nan_iterations":..,"tokens_per_second_per_gpu":..,
//    ["mfu":..,] "time_left_seconds":..,"wall_time":..}
//   {"type":"evaluation","set":"validation"|"test","iteration":..,"consumed_samples":..,
//    "lm_loss":..,"lm_loss_ppl":..,"wall_time":..}
// with the unrounded numbers of the log lines (a non-finite number is null).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <string_view>

#include "config/logging_config.h"
#include "core/allocator.h"
#include "core/status.h"
#include "training/summary_writer.h"
#include "training/training_log.h"

namespace mindspeed {

/// One training iteration's numbers (the arguments of Megatron's training_log).
struct IterationScalars {
  int64_t iteration = 0;
  int64_t consumed_train_samples = 0;  ///< including this iteration's batch
  double learning_rate = 0.0;
  int64_t batch_size = 0;
  double lm_loss = 0.0;                ///< this iteration's loss
  double loss_scale = 1.0;
  double grad_norm = 0.0;
  bool has_grad_norm = true;  ///< false: skipped on an overflow (no "grad-norm" scalar, as Megatron)
  int world_size = 1;
  const Allocator* allocator = nullptr;  ///< for --log-memory-to-tensorboard
  /// MoE: this iteration's "load_balancing_loss" / "z_loss" (written every iteration).
  std::vector<std::pair<std::string, double>> moe_losses = {};
};

class TrainingMetrics {
 public:
  /// Opens the event file and the metrics file when `writer_rank` (else a no-op object).
  static StatusOr<std::unique_ptr<TrainingMetrics>> open(const LoggingConfig& config, bool writer_rank);
  ~TrainingMetrics();
  TrainingMetrics(const TrainingMetrics&) = delete;
  TrainingMetrics& operator=(const TrainingMetrics&) = delete;

  /// After every training iteration (TensorBoard at --tensorboard-log-interval).
  void training_iteration(const IterationScalars& s);
  /// With each iteration log line: the metrics-file line and the timer scalars.
  void log_line(const IterationLog& log);
  /// After an evaluation; `set` is "validation" or "test".
  void evaluation(std::string_view set, int64_t iteration, int64_t consumed_train_samples, double lm_loss,
                  bool to_tensorboard);
  /// Writes what is queued (also done on destruction).
  void flush();

  const SummaryWriter* tensorboard() const { return tensorboard_.get(); }

 private:
  explicit TrainingMetrics(const LoggingConfig& config) : config_(config) {}
  void append_line(const std::string& line);
  void warn_once_on_error();

  LoggingConfig config_;
  std::unique_ptr<SummaryWriter> tensorboard_;
  int metrics_fd_ = -1;
  std::string metrics_path_;
  bool warned_ = false;
};

}  // namespace mindspeed
