// TensorBoard scalars and the metrics file (training_metrics.h).
#include "training/training_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/logging.h"

namespace mindspeed {
namespace {

// A number for the metrics file: non-finite values have no JSON spelling.
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// Megatron's perplexity: exp of the loss, capped at exp(20).
double perplexity(double lm_loss) { return std::exp(std::min(20.0, lm_loss)); }

}  // namespace

StatusOr<std::unique_ptr<TrainingMetrics>> TrainingMetrics::open(const LoggingConfig& config, bool writer_rank) {
  std::unique_ptr<TrainingMetrics> metrics(new TrainingMetrics(config));
  if (!writer_rank) return metrics;
  if (!config.tensorboard_dir.empty()) {
    MS_ASSIGN_OR_RETURN(metrics->tensorboard_, SummaryWriter::create(config.tensorboard_dir,
                                                                     config.tensorboard_queue_size));
  }
  metrics->metrics_path_ = config.metrics_path();
  if (!metrics->metrics_path_.empty()) {
    const std::filesystem::path parent = std::filesystem::path(metrics->metrics_path_).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    // Appended: a resumed run continues the file of the run it resumes.
    metrics->metrics_fd_ = ::open(metrics->metrics_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (metrics->metrics_fd_ < 0) {
      return failed_precondition("metrics file ", metrics->metrics_path_, ": cannot open it for appending (",
                                 std::strerror(errno), ")");
    }
  }
  return metrics;
}

TrainingMetrics::~TrainingMetrics() {
  flush();
  if (metrics_fd_ >= 0) ::close(metrics_fd_);
}

void TrainingMetrics::flush() {
  if (tensorboard_) {
    const Status s = tensorboard_->flush();
    (void)s;  // kept in the writer's status
    warn_once_on_error();
  }
}

void TrainingMetrics::warn_once_on_error() {
  if (!warned_ && tensorboard_ && !tensorboard_->status().ok()) {
    log_warning(tensorboard_->status().message());
    warned_ = true;
  }
}

// One write() per line on an O_APPEND descriptor: a line is either all there or not at all
// after a kill (short writes to a regular file happen only when the disk is full).
void TrainingMetrics::append_line(const std::string& line) {
  if (metrics_fd_ < 0) return;
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(metrics_fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      log_warning(str_cat("writing the metrics file ", metrics_path_, " failed (", std::strerror(errno),
                          "); no more metrics lines are written"));
      ::close(metrics_fd_);
      metrics_fd_ = -1;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

void TrainingMetrics::training_iteration(const IterationScalars& s) {
  if (!tensorboard_) return;
  // MoE: Megatron's track_moe_metrics writes these every iteration.
  for (const auto& [name, value] : s.moe_losses) tensorboard_->add_scalar(name, value, s.iteration);
  if (s.iteration % config_.tensorboard_log_interval != 0) return;
  SummaryWriter& w = *tensorboard_;
  const double now = unix_time_now();
  const int64_t it = s.iteration, samples = s.consumed_train_samples;
  auto both = [&](const std::string& tag, double value) {
    w.add_scalar(tag, value, it, now);
    w.add_scalar(tag + " vs samples", value, samples, now);
  };
  if (config_.log_learning_rate_to_tensorboard) both("learning-rate", s.learning_rate);
  both("batch-size", static_cast<double>(s.batch_size));
  both("lm loss", s.lm_loss);
  if (config_.log_loss_scale_to_tensorboard) both("loss-scale", s.loss_scale);
  if (config_.log_world_size_to_tensorboard) both("world-size", s.world_size);
  if (s.has_grad_norm) both("grad-norm", s.grad_norm);
  if (config_.log_memory_to_tensorboard && s.allocator != nullptr) {
    const MemoryStats m = s.allocator->stats();
    w.add_scalar("mem-reserved-bytes", static_cast<double>(m.total_current + m.cached), it, now);
    w.add_scalar("mem-allocated-bytes", static_cast<double>(m.total_current), it, now);
    w.add_scalar("mem-max-allocated-bytes", static_cast<double>(m.total_peak), it, now);
    w.add_scalar("mem-allocated-count", static_cast<double>(m.live_blocks), it, now);
  }
  warn_once_on_error();
}

void TrainingMetrics::log_line(const IterationLog& l) {
  if (tensorboard_ && config_.log_timers_to_tensorboard) {
    tensorboard_->add_scalar("iteration-time", l.elapsed_ms_per_iteration / 1000.0, l.iteration);
    tensorboard_->add_scalar("throughput", l.tflops_per_rank, l.iteration);
    warn_once_on_error();
  }
  if (metrics_fd_ < 0) return;
  nlohmann::ordered_json j;
  j["type"] = "iteration";
  j["iteration"] = l.iteration;
  j["train_iters"] = l.train_iters;
  j["consumed_samples"] = l.consumed_samples;
  j["elapsed_ms_per_iteration"] = number(l.elapsed_ms_per_iteration);
  j["throughput_tflops_per_gpu"] = number(l.tflops_per_rank);
  j["learning_rate"] = number(l.learning_rate);
  j["global_batch_size"] = l.global_batch_size;
  j["lm_loss"] = number(l.lm_loss);
  for (const auto& [name, value] : l.moe_losses) j[name] = number(value);
  j["loss_scale"] = number(l.loss_scale);
  if (l.has_grad_norm) j["grad_norm"] = number(l.grad_norm);
  j["skipped_iterations"] = l.skipped_iterations;
  j["nan_iterations"] = l.nan_iterations;
  j["tokens_per_second_per_gpu"] = number(l.tokens_per_second_per_rank);
  if (l.mfu >= 0.0) j["mfu"] = number(l.mfu);
  if (l.time_left_seconds >= 0.0) j["time_left_seconds"] = number(l.time_left_seconds);
  j["wall_time"] = unix_time_now();
  append_line(j.dump());
}

void TrainingMetrics::evaluation(std::string_view set, int64_t iteration, int64_t consumed_train_samples,
                                 double lm_loss, bool to_tensorboard) {
  const double ppl = perplexity(lm_loss);
  if (tensorboard_ && to_tensorboard) {
    SummaryWriter& w = *tensorboard_;
    const double now = unix_time_now();
    w.add_scalar("lm loss validation", lm_loss, iteration, now);
    w.add_scalar("lm loss validation vs samples", lm_loss, consumed_train_samples, now);
    if (config_.log_validation_ppl_to_tensorboard) {
      w.add_scalar("lm loss validation ppl", ppl, iteration, now);
      w.add_scalar("lm loss validation ppl vs samples", ppl, consumed_train_samples, now);
    }
    warn_once_on_error();
  }
  if (metrics_fd_ < 0) return;
  nlohmann::ordered_json j;
  j["type"] = "evaluation";
  j["set"] = std::string(set);
  j["iteration"] = iteration;
  j["consumed_samples"] = consumed_train_samples;
  j["lm_loss"] = number(lm_loss);
  j["lm_loss_ppl"] = number(ppl);
  j["wall_time"] = unix_time_now();
  append_line(j.dump());
}

}  // namespace mindspeed
