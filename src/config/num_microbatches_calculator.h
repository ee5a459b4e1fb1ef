// Port of megatron/core/num_microbatches_calculator.py (ConstantNumMicroBatchesCalculator,
// RampupBatchsizeNumMicroBatchesCalculator) and of training.py's update_train_iters: how many
// micro-batches each iteration runs, from the samples consumed so far.
//  * Constant: global batch / (micro batch x data-parallel size).
//  * --rampup-batch-size START INCREMENT SAMPLES: the global batch starts at START and grows by
//    INCREMENT every SAMPLES / ((global - START) / INCREMENT) consumed samples (a float
//    quotient, truncated as Python's int()), reaching --global-batch-size after SAMPLES.
//  * --decrease-batch-size-if-needed: a global batch that micro batch x dp does not divide
//    runs rounded down (the "running" batch); otherwise such a batch is an error.
#pragma once

#include <cstdint>
#include <optional>

#include "config/training_config.h"
#include "core/status.h"

namespace mindspeed {

class NumMicroBatchesCalculator {
 public:
  /// Checks Megatron's construction rules (positive sizes, increments that divide the ramp,
  /// a divisible constant batch unless decreasing) and sets the batch for 0 consumed samples.
  static StatusOr<NumMicroBatchesCalculator> create(int64_t global_batch_size, int64_t micro_batch_size,
                                                    int64_t data_parallel_size, bool decrease_batch_size_if_needed,
                                                    std::optional<RampupBatchSize> rampup);

  /// The batch for `consumed_samples`; with `consistency_check`, an error when micro batch x dp
  /// does not divide it (unless decreasing).
  Status update(int64_t consumed_samples, bool consistency_check);

  int64_t num_micro_batches() const { return num_micro_batches_; }
  int64_t current_global_batch_size() const { return current_global_batch_size_; }
  /// What this iteration trains on (below the current batch only when decreasing).
  int64_t current_running_global_batch_size() const { return current_running_global_batch_size_; }
  bool ramps_up() const { return rampup_.has_value(); }

  /// training.py update_train_iters for --train-samples: constant batches, train_samples /
  /// global batch; with ramp-up, the ramp stepped through one batch at a time (while the
  /// consumed samples are at most the ramp's and the train samples), then whole global
  /// batches. Leaves the calculator at 0 consumed samples.
  int64_t train_iters_for_samples(int64_t train_samples);

 private:
  NumMicroBatchesCalculator() = default;

  int64_t global_batch_size_ = 0, micro_batch_size_ = 0, data_parallel_size_ = 0;
  bool decrease_batch_size_if_needed_ = false;
  std::optional<RampupBatchSize> rampup_;
  double rampup_samples_per_increment_ = 0.0;
  int64_t current_global_batch_size_ = 0, current_running_global_batch_size_ = 0, num_micro_batches_ = 0;
};

}  // namespace mindspeed
