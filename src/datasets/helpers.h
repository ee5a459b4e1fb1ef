// Index builders of Megatron's C++ dataset helpers.
// Port of megatron/core/datasets/helpers.cpp (build_sample_idx, build_blending_indices,
// build_exhaustive_blending_indices) and helpers.py (the int32/int64 choice of the sample
// index), with the same integer and floating-point arithmetic so the arrays are identical.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/status.h"
#include "datasets/npy_file.h"

namespace mindspeed {

/// The GPT sample index: [num_samples + 1, 2] rows of (position in document_index, token
/// offset inside that document); sample i spans rows i and i+1. The dtype is int32 when
/// max(len(document_index), max(sizes)) <= INT32_MAX, else int64 (helpers.py).
///
/// sizes:          [num_sequences] tokens per sequence of the whole low-level dataset
/// document_index: [num_epochs * split_sequences] shuffled sequence ids
/// Number of samples: (num_epochs * tokens_per_epoch - extra) / seq_length, or with
/// drop_last_partial_sequence false ceil(float32(num_epochs * tokens_per_epoch - extra) /
/// seq_length) (float32 as in helpers.cpp). Consecutive samples overlap by `extra` tokens.
/// force_dtype (kInt32 / kInt64) overrides the dtype rule, for tests.
StatusOr<NpyArray> build_sample_idx(const std::vector<int32_t>& sizes,
                                    const std::vector<int32_t>& document_index,
                                    int32_t seq_length, int32_t num_epochs,
                                    int64_t tokens_per_epoch, bool drop_last_partial_sequence,
                                    int add_extra_token_to_sequence,
                                    std::optional<NpyDtype> force_dtype = std::nullopt);

/// Blending by greedy error: for sample i pick the first dataset with the largest
/// weight[d] * max(i, 1) - count[d]. Returns (dataset_index [size] int16,
/// dataset_sample_index [size] int64).
std::pair<std::vector<int16_t>, std::vector<int64_t>> build_blending_indices(
    const std::vector<double>& weights, int64_t size);

/// Takes exactly sizes[d] samples from each dataset d, interleaved by the same greedy rule
/// over the datasets not yet exhausted (weights sizes[d] / sum(sizes)).
std::pair<std::vector<int16_t>, std::vector<int64_t>> build_exhaustive_blending_indices(
    const std::vector<int64_t>& sizes);

}  // namespace mindspeed
