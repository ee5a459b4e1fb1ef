// Status and StatusOr: error values for user, configuration and input errors.
// Modelled on absl::Status (canonical codes) and cutlass::Status; mindspeed code throws no
// exceptions, so every recoverable failure travels as a [[nodiscard]] Status.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "core/str_cat.h"

namespace mindspeed {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     ///< a flag, file or value the user gave is wrong
  kFailedPrecondition,  ///< the request is valid but the state does not allow it
  kNotFound,            ///< a file, key or tensor is missing
  kUnimplemented,       ///< known (e.g. a Megatron flag) but not implemented yet
  kDataLoss,            ///< a file is truncated or corrupt
  kInternal,            ///< a bug: please report it
  /// The run stops because of a failure the ranks agreed on (parallel/agreement.h): the
  /// message is the failure on the one rank that reports it, empty on the others.
  kAborted,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "InvalidArgument: message"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }

template <typename... Args>
Status invalid_argument(const Args&... args) {
  return Status(StatusCode::kInvalidArgument, str_cat(args...));
}
template <typename... Args>
Status failed_precondition(const Args&... args) {
  return Status(StatusCode::kFailedPrecondition, str_cat(args...));
}
template <typename... Args>
Status not_found(const Args&... args) {
  return Status(StatusCode::kNotFound, str_cat(args...));
}
template <typename... Args>
Status unimplemented(const Args&... args) {
  return Status(StatusCode::kUnimplemented, str_cat(args...));
}
template <typename... Args>
Status data_loss(const Args&... args) {
  return Status(StatusCode::kDataLoss, str_cat(args...));
}
template <typename... Args>
Status aborted(const Args&... args) {
  return Status(StatusCode::kAborted, str_cat(args...));
}
template <typename... Args>
Status internal_error(const Args&... args) {
  return Status(StatusCode::kInternal, str_cat(args...));
}

/// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace mindspeed

#define MS_STATUS_CONCAT_INNER(a, b) a##b
#define MS_STATUS_CONCAT(a, b) MS_STATUS_CONCAT_INNER(a, b)

/// Returns the Status from the enclosing function if `expr` is not OK.
#define MS_RETURN_IF_ERROR(expr)                      \
  do {                                                \
    ::mindspeed::Status ms_status_tmp_ = (expr);      \
    if (!ms_status_tmp_.ok()) return ms_status_tmp_;  \
  } while (0)

/// `MS_ASSIGN_OR_RETURN(auto x, f())`: unwraps a StatusOr or returns its Status.
#define MS_ASSIGN_OR_RETURN(lhs, expr) \
  MS_ASSIGN_OR_RETURN_IMPL(MS_STATUS_CONCAT(ms_statusor_, __LINE__), lhs, expr)
#define MS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
