// LoggingConfig: where a run's metrics go besides the log lines -- TensorBoard event files
// (Megatron's --tensorboard-dir and its logging options) and mindspeed-cpp's JSON-lines
// metrics file. Megatron's flag names and defaults (megatron/training/arguments.py,
// core_v0.12); the two flags Megatron dropped after core_r0.8 are still taken.
#pragma once

#include <cstdint>
#include <string>

namespace mindspeed {

struct LoggingConfig {
  std::string tensorboard_dir;             ///< --tensorboard-dir; empty = no event files
  int64_t tensorboard_log_interval = 1;    ///< --tensorboard-log-interval (iterations)
  int64_t tensorboard_queue_size = 1000;   ///< --tensorboard-queue-size: events buffered before a write
  bool log_timers_to_tensorboard = false;  ///< --log-timers-to-tensorboard ('iteration-time', 'throughput')
  bool log_memory_to_tensorboard = false;  ///< --log-memory-to-tensorboard ('mem-*' from the allocator)
  bool log_validation_ppl_to_tensorboard = false;  ///< --log-validation-ppl-to-tensorboard
  bool log_world_size_to_tensorboard = false;      ///< --log-world-size-to-tensorboard
  bool log_loss_scale_to_tensorboard = true;       ///< false with --no-log-loss-scale-to-tensorboard
  /// false with --no-log-learnig-rate-to-tensorboard (sic; Megatron up to core_r0.8).
  bool log_learning_rate_to_tensorboard = true;
  /// --log-batch-size-to-tensorboard (Megatron up to core_r0.8); core_v0.12 always writes
  /// 'batch-size', and so do we.
  bool log_batch_size_to_tensorboard = false;
  /// --metrics-file (mindspeed-cpp): JSON lines, one object per logged iteration and per
  /// evaluation. Empty = <tensorboard-dir>/metrics.jsonl with --tensorboard-dir, else none.
  std::string metrics_file;
  bool log_params_norm = false;        ///< --log-params-norm: "params norm" in the iteration line
  bool log_num_zeros_in_grad = false;  ///< --log-num-zeros-in-grad: "num zeros" in the iteration line

  /// The metrics file this run writes ("" = none).
  std::string metrics_path() const {
    if (!metrics_file.empty()) return metrics_file;
    return tensorboard_dir.empty() ? std::string() : tensorboard_dir + "/metrics.jsonl";
  }
};

}  // namespace mindspeed
