// ComputeWeights: fp32 views of a module's bf16 / fp16 parameters for the duration of one use
// (forward or backward of one module), so that no permanent fp32 copy exists beside the
// optimizer's fp32 main parameters. The converted copies live in workspace owned by this
// object; Parameter records are never written, so two model chunks (or two micro-batches)
// can be in flight at once. fp32 parameters need no conversion: ForwardContext::w() reads
// them straight from the parameter buffer.
#pragma once

#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/backend.h"
#include "module/parameter.h"

namespace mindspeed {

class ComputeWeights {
 public:
  ComputeWeights() = default;
  /// Converts the bf16 / fp16 parameters among `params` (fp32 ones are skipped).
  ComputeWeights(const Backend& backend, Allocator& alloc, const std::vector<Parameter*>& params) {
    convert(backend, alloc, params);
  }
  /// The same, on an empty object.
  void convert(const Backend& backend, Allocator& alloc, const std::vector<Parameter*>& params);
  ComputeWeights(const ComputeWeights&) = delete;
  ComputeWeights& operator=(const ComputeWeights&) = delete;

  /// The fp32 copy of `p`, or null when this scope did not convert it.
  const float* find(const Parameter& p) const;

 private:
  std::vector<std::pair<const Parameter*, const float*>> converted_;
  Tensor storage_;
};

}  // namespace mindspeed
