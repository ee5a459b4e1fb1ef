// Status code names and formatting.
#include "core/status.h"

namespace mindspeed {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kAborted: return "Aborted";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return str_cat(status_code_name(code_), ": ", message_);
}

}  // namespace mindspeed
