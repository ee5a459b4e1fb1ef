// Megatron's check_for_nan_in_loss_and_grad (on by default, off with
// --no-check-for-nan-in-loss-and-grad), with the diagnosis users ask for: which iteration,
// which rank(s), the first parameter (Megatron name) whose gradient is not finite, and
// whether the weights (already non-finite before the iteration), the forward pass (the loss)
// or the backward pass (the gradients) produced it. Input token ids are checked when the
// batch is made, so they are never the cause here. Also: non-finite weights in a loaded
// checkpoint are refused by tensor name.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "kernels/backend.h"
#include "module/parameter.h"
#include "parallel/parallel_state.h"

namespace mindspeed {

/// Collective over ps.world(): call on every rank after an iteration whose loss or gradient
/// norm is not finite. `local_loss_sum` is this rank's loss sum before any reduction. Returns
/// kAborted on every rank; the message (on the one reporting rank) is the diagnosis.
Status diagnose_non_finite(const ParameterRegistry& registry, const ParallelState& ps, const Backend& backend,
                           Allocator& alloc, int64_t iteration, double local_loss_sum);

/// InvalidArgument naming the first parameter of `registry` holding a NaN or infinity
/// (`source`: where the weights came from, e.g. the checkpoint directory).
Status check_weights_finite(const ParameterRegistry& registry, const Backend& backend, Allocator& alloc,
                            const std::string& source);

}  // namespace mindspeed
