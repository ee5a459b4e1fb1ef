// NumMicroBatchesCalculator (num_microbatches_calculator.h).
#include "config/num_microbatches_calculator.h"

namespace mindspeed {

StatusOr<NumMicroBatchesCalculator> NumMicroBatchesCalculator::create(int64_t global_batch_size,
                                                                      int64_t micro_batch_size,
                                                                      int64_t data_parallel_size,
                                                                      bool decrease_batch_size_if_needed,
                                                                      std::optional<RampupBatchSize> rampup) {
  NumMicroBatchesCalculator c;
  c.global_batch_size_ = global_batch_size;
  c.micro_batch_size_ = micro_batch_size;
  c.data_parallel_size_ = data_parallel_size;
  c.decrease_batch_size_if_needed_ = decrease_batch_size_if_needed;
  c.rampup_ = rampup;
  if (global_batch_size <= 0 || micro_batch_size <= 0 || data_parallel_size <= 0) {
    return invalid_argument("--global-batch-size (", global_batch_size, "), --micro-batch-size (", micro_batch_size,
                            ") and the data-parallel size (", data_parallel_size, ") must be positive");
  }
  if (rampup) {
    const RampupBatchSize& r = *rampup;
    if (r.start_global_batch_size <= 0 || r.batch_size_increment <= 0 || r.rampup_samples <= 0) {
      return invalid_argument("--rampup-batch-size START INCREMENT SAMPLES needs three positive numbers, got ",
                              r.start_global_batch_size, " ", r.batch_size_increment, " ", r.rampup_samples);
    }
    const int64_t diff = global_batch_size - r.start_global_batch_size;
    if (diff <= 0) {
      return invalid_argument("--rampup-batch-size: the start batch (", r.start_global_batch_size,
                              ") must be below --global-batch-size (", global_batch_size,
                              "); without a ramp leave the flag out");
    }
    if (diff % r.batch_size_increment != 0) {
      return invalid_argument("--rampup-batch-size: the ramp from ", r.start_global_batch_size, " to ",
                              global_batch_size, " (", diff, ") is not divisible by the increment ",
                              r.batch_size_increment);
    }
    c.rampup_samples_per_increment_ =
        static_cast<double>(r.rampup_samples) / static_cast<double>(diff / r.batch_size_increment);
  }
  MS_RETURN_IF_ERROR(c.update(0, /*consistency_check=*/!rampup.has_value()));
  if (c.num_micro_batches_ < 1 && !rampup) {
    return invalid_argument("--global-batch-size ", global_batch_size, " gives no micro-batch of --micro-batch-size ",
                            micro_batch_size, " on ", data_parallel_size, " data-parallel ranks");
  }
  return c;
}

Status NumMicroBatchesCalculator::update(int64_t consumed_samples, bool consistency_check) {
  if (!rampup_) {
    current_global_batch_size_ = global_batch_size_;
  } else if (consumed_samples > rampup_->rampup_samples) {
    current_global_batch_size_ = global_batch_size_;
  } else {
    // Python's int(consumed / per_increment): a float quotient truncated towards zero.
    const auto steps =
        static_cast<int64_t>(static_cast<double>(consumed_samples) / rampup_samples_per_increment_);
    current_global_batch_size_ = rampup_->start_global_batch_size + steps * rampup_->batch_size_increment;
  }
  const int64_t unit = micro_batch_size_ * data_parallel_size_;
  const bool divisible = current_global_batch_size_ % unit == 0;
  // The constant calculator checks at construction, the ramp-up one when asked to.
  if (!divisible && !decrease_batch_size_if_needed_ && (consistency_check || !rampup_)) {
    return invalid_argument("the ", rampup_ ? "current " : "", "global batch size (", current_global_batch_size_,
                            ") is not divisible by --micro-batch-size (", micro_batch_size_,
                            ") times the data-parallel size (", data_parallel_size_,
                            "); change the batch sizes or add --decrease-batch-size-if-needed");
  }
  current_running_global_batch_size_ =
      decrease_batch_size_if_needed_ && !divisible ? current_global_batch_size_ / unit * unit : current_global_batch_size_;
  num_micro_batches_ = current_running_global_batch_size_ / unit;
  if (num_micro_batches_ < 1 && consistency_check) {
    return invalid_argument("the global batch size ", current_global_batch_size_, " rounds down to no micro-batch of ",
                            micro_batch_size_, " x ", data_parallel_size_,
                            " data-parallel ranks (--decrease-batch-size-if-needed)");
  }
  return ok_status();
}

int64_t NumMicroBatchesCalculator::train_iters_for_samples(int64_t train_samples) {
  if (!rampup_) return train_samples / global_batch_size_;
  int64_t iterations = 0, consumed = 0;
  while (consumed <= rampup_->rampup_samples && consumed <= train_samples) {
    (void)update(consumed, /*consistency_check=*/false);
    consumed += current_global_batch_size_;
    ++iterations;
  }
  (void)update(0, /*consistency_check=*/false);
  if (train_samples > consumed) iterations += (train_samples - consumed) / global_batch_size_;
  return iterations;
}

}  // namespace mindspeed
