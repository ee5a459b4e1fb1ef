// The analytic communication volumes of 2D tensor parallelism (linear_2d.h) per micro-batch: the
// bytes each collective of the tp-x and tp-y groups moves (all-gather: the gathered output,
// reduce-scatter: the reduced input, all-reduce: the buffer), as ProcessGroup's CommStats counts
// them. bench/parallel_step.cpp prints them beside the measured ones and tests/mpi/tp_2d_test.cpp
// holds the two equal. Not counted here: the Ulysses all-to-alls of the attention (on the Y x CP
// group) and, once per step, the gradients summed over tp-x (the norm weights and second-linear
// biases: 4 bytes per element of this rank's copies).
#pragma once

#include <cstdint>

#include "config/model_config.h"

namespace mindspeed {

struct Tp2dVolumes {
  double x_all_gather = 0, x_reduce_scatter = 0;  ///< bytes on the tp-x group
  double y_all_gather = 0, y_reduce_scatter = 0, y_all_reduce = 0;  ///< bytes on the tp-y group
};

/// One micro-batch of `tokens` rows (samples x positions of this context-parallel rank) through
/// `layers` layers, forward and backward, on an X x Y grid; `whole_model`: the stage holds the
/// embedding, the final norm and the output layer too (their scatter / gathers and norm).
Tp2dVolumes tp_2d_micro_batch_volumes(const ModelConfig& m, int64_t tokens, int64_t layers, int X, int Y,
                                      bool whole_model);

}  // namespace mindspeed
