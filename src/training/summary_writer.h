// TensorBoard event files: the part of torch.utils.tensorboard.SummaryWriter that Megatron's
// training_log() uses (add_scalar), written without TensorFlow or libprotobuf.
//
// File format (what TensorBoard's reader expects), one file per writer,
// <log_dir>/events.out.tfevents.<10-digit unix time>.<host>.<pid>.<n>:
//   TFRecord frames, each:  uint64 length | uint32 masked_crc32c(length bytes) |
//                           data[length]  | uint32 masked_crc32c(data)          (little endian)
//   masked_crc32c(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8, crc = CRC-32C (Castagnoli).
//   data is a serialized tensorboard.Event (tensorboard/compat/proto/event.proto):
//     Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//     Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
//   The first event carries file_version "brain.Event:2"; each add_scalar is one Event with
//   one Summary.Value (tag, simple_value), its wall time and step.
// The three messages are encoded by hand (a dozen lines of protobuf wire format) rather than
// through libprotobuf and generated code, which would add a build step and a library for
// three fixed messages.
//
// Like torch's writer, events are queued and written when --tensorboard-queue-size events
// are pending, when 120 s have passed since the last write, and at flush()/destruction.
// A write error is kept (status()) and stops further writing; training goes on.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace mindspeed {

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78); crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
/// TFRecord's masked CRC-32C of `data`.
uint32_t masked_crc32c(const void* data, size_t size);

/// A serialized Event with file_version (the first record of every event file).
std::string encode_file_version_event(double wall_time, std::string_view file_version);
/// A serialized Event holding one scalar: Summary{Value{tag, simple_value}}.
std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value);
/// `data` framed as one TFRecord.
std::string tfrecord_frame(std::string_view data);

class SummaryWriter {
 public:
  static constexpr double kFlushSeconds = 120.0;  ///< torch's SummaryWriter flush_secs default

  /// Creates `log_dir` (with parents) and a new event file in it holding the file_version
  /// event. `max_queue`: events kept in memory before they are written (>= 1).
  static StatusOr<std::unique_ptr<SummaryWriter>> create(const std::string& log_dir, int64_t max_queue);
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  /// Queues a scalar (stored as a float, as TensorBoard's simple_value); wall time = now.
  void add_scalar(std::string_view tag, double value, int64_t step);
  void add_scalar(std::string_view tag, double value, int64_t step, double wall_time);
  /// Writes the queued events and flushes the file.
  Status flush();
  /// OK, or the first write error (after which nothing more is written).
  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }

 private:
  SummaryWriter(std::FILE* file, std::string path, int64_t max_queue);

  std::FILE* file_;
  std::string path_;
  int64_t max_queue_;
  std::string pending_;  // framed records not yet written
  int64_t pending_events_ = 0;
  std::chrono::steady_clock::time_point last_write_;
  Status status_;
};

/// Seconds since the Unix epoch (an event's wall_time).
double unix_time_now();

}  // namespace mindspeed
