// agree_on_failure (agreement.h).
#include "parallel/agreement.h"

#include <limits>

namespace mindspeed {

Status agree_on_failure(ProcessGroup& group, const Status& local) {
  const double any_failed = group.all_reduce_scalar(local.ok() ? 0.0 : 1.0, ReduceOp::kMax);
  if (any_failed < 0.5) return ok_status();
  const bool own = !local.ok() && local.code() != StatusCode::kAborted;
  constexpr double kNone = std::numeric_limits<double>::max();
  const double reporter = group.all_reduce_scalar(own ? static_cast<double>(group.rank()) : kNone, ReduceOp::kMin);
  if (reporter == kNone) {
    // Only echoes (cannot happen when the failing rank joins): the lowest failing rank reports.
    const double first = group.all_reduce_scalar(local.ok() ? kNone : static_cast<double>(group.rank()),
                                                 ReduceOp::kMin);
    return aborted(first == static_cast<double>(group.rank()) ? local.message() : "");
  }
  return aborted(reporter == static_cast<double>(group.rank()) ? local.to_string() : "");
}

}  // namespace mindspeed
