// TensorBoard event files (summary_writer.h).
#include "training/summary_writer.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <type_traits>

#include "core/logging.h"

namespace mindspeed {
namespace {

// CRC-32C, one table lookup per byte.
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protobuf wire format: a field key is (field number << 3) | wire type.
enum WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, WireType type) { put_varint(out, (static_cast<uint64_t>(field) << 3) | type); }
template <typename T>
void put_little_endian(std::string& out, T value) {
  static_assert(std::is_trivially_copyable_v<T>);
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64 and aarch64 are little endian
  out.append(bytes, sizeof(T));
}
void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event fields 1 (wall_time) and 2 (step; proto3 leaves a zero out).
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_key(event, 1, kFixed64);
  put_little_endian(event, wall_time);
  if (step != 0) {
    put_key(event, 2, kVarint);
    put_varint(event, static_cast<uint64_t>(step));  // two's complement, as protobuf's int64
  }
  return event;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string encode_file_version_event(double wall_time, std::string_view file_version) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, 3, file_version);
  return event;
}

std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  put_key(summary_value, 2, kFixed32);
  put_little_endian(summary_value, value);
  std::string summary;
  put_bytes(summary, 1, summary_value);
  std::string event = event_header(wall_time, step);
  put_bytes(event, 5, summary);
  return event;
}

std::string tfrecord_frame(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_little_endian(record, static_cast<uint64_t>(data.size()));
  put_little_endian(record, masked_crc32c(record.data(), 8));
  record.append(data);
  put_little_endian(record, masked_crc32c(data.data(), data.size()));
  return record;
}

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

StatusOr<std::unique_ptr<SummaryWriter>> SummaryWriter::create(const std::string& log_dir, int64_t max_queue) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec || !std::filesystem::is_directory(log_dir)) {
    return failed_precondition("--tensorboard-dir ", log_dir, ": cannot create the directory (",
                               ec ? ec.message() : "not a directory", ")");
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  // torch's name: events.out.tfevents.<%010d time>.<host>.<pid>.<writer number>; the number
  // keeps two writers of one process apart, and "wx" refuses an existing file.
  const double now = unix_time_now();
  for (int n = 0; n < 100; ++n) {
    const std::string path = str_cat(log_dir, "/events.out.tfevents.", std::to_string(static_cast<long long>(now)),
                                      ".", host, ".", static_cast<long long>(getpid()), ".", n);
    std::FILE* file = std::fopen(path.c_str(), "wbx");
    if (file == nullptr && errno == EEXIST) continue;
    if (file == nullptr) {
      return failed_precondition("--tensorboard-dir ", log_dir, ": cannot create ", path, " (", std::strerror(errno),
                                 ")");
    }
    std::unique_ptr<SummaryWriter> writer(new SummaryWriter(file, path, max_queue));
    writer->pending_ = tfrecord_frame(encode_file_version_event(now, "brain.Event:2"));
    writer->pending_events_ = 1;
    MS_RETURN_IF_ERROR(writer->flush());
    return writer;
  }
  return failed_precondition("--tensorboard-dir ", log_dir, ": too many event files of this process");
}

SummaryWriter::SummaryWriter(std::FILE* file, std::string path, int64_t max_queue)
    : file_(file), path_(std::move(path)), max_queue_(max_queue < 1 ? 1 : max_queue),
      last_write_(std::chrono::steady_clock::now()) {}

SummaryWriter::~SummaryWriter() {
  const Status s = flush();
  if (!s.ok()) log_warning(s.message());
  std::fclose(file_);
}

void SummaryWriter::add_scalar(std::string_view tag, double value, int64_t step) {
  add_scalar(tag, value, step, unix_time_now());
}

void SummaryWriter::add_scalar(std::string_view tag, double value, int64_t step, double wall_time) {
  if (!status_.ok()) return;
  pending_ += tfrecord_frame(encode_scalar_event(wall_time, step, tag, static_cast<float>(value)));
  ++pending_events_;
  const double since_write = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_write_).count();
  if (pending_events_ >= max_queue_ || since_write >= kFlushSeconds) {
    const Status s = flush();
    (void)s;  // kept in status_
  }
}

Status SummaryWriter::flush() {
  if (!status_.ok()) return status_;
  if (!pending_.empty() && std::fwrite(pending_.data(), 1, pending_.size(), file_) != pending_.size()) {
    status_ = data_loss("writing the TensorBoard event file ", path_, " failed (", std::strerror(errno),
                        "); no more TensorBoard events are written");
  } else if (std::fflush(file_) != 0) {
    status_ = data_loss("flushing the TensorBoard event file ", path_, " failed (", std::strerror(errno),
                        "); no more TensorBoard events are written");
  }
  pending_.clear();
  pending_events_ = 0;
  last_write_ = std::chrono::steady_clock::now();
  return status_;
}

}  // namespace mindspeed
