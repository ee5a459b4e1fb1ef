// Port of megatron/core/datasets/helpers.cpp (see the header).
#include "datasets/helpers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/check.h"

namespace mindspeed {
namespace {

template <typename T>
StatusOr<NpyArray> build_sample_idx_impl(const std::vector<int32_t>& sizes,
                                         const std::vector<int32_t>& document_index,
                                         int32_t seq_length, int32_t num_epochs,
                                         int64_t tokens_per_epoch, bool drop_last,
                                         int extra) {
  const int64_t total = static_cast<int64_t>(num_epochs) * tokens_per_epoch - extra;
  int64_t num_samples = 0;
  if (drop_last) {
    num_samples = total / seq_length;
  } else {
    // helpers.cpp: ceil(float(num_epochs * tokens_per_epoch - extra) / seq_length) in float32.
    const float q = static_cast<float>(total) / static_cast<float>(seq_length);
    num_samples = static_cast<int64_t>(std::ceil(q));
  }
  if (num_samples < 0) num_samples = 0;
  std::vector<T> idx(static_cast<size_t>(2 * (num_samples + 1)));
  const auto n_docs = static_cast<int64_t>(document_index.size());

  int64_t row = 0;
  T doc_pos = 0;     // index into document_index
  T doc_offset = 0;  // token offset inside that document
  idx[0] = doc_pos;
  idx[1] = doc_offset;
  ++row;
  while (row <= num_samples) {
    int32_t remaining = seq_length + extra;
    while (remaining != 0) {
      const int32_t seq_id = document_index[static_cast<size_t>(doc_pos)];
      const auto doc_length = static_cast<int64_t>(sizes[static_cast<size_t>(seq_id)]) - doc_offset;
      remaining = static_cast<int32_t>(remaining - doc_length);
      if (remaining <= 0) {
        // The sample ends inside this document; the next one starts `extra` tokens earlier.
        doc_offset = static_cast<T>(doc_offset + (remaining + doc_length - extra));
        remaining = 0;
      } else {
        if (static_cast<int64_t>(doc_pos) == n_docs - 1) {
          // Out of documents: only the last (partial) sample may get here.
          if (row != num_samples) {
            return internal_error("build_sample_idx ran out of documents at sample ", row,
                                  " of ", num_samples);
          }
          doc_offset = static_cast<T>(sizes[static_cast<size_t>(seq_id)] - extra);
          break;
        }
        ++doc_pos;
        doc_offset = 0;
      }
    }
    idx[static_cast<size_t>(2 * row)] = doc_pos;
    idx[static_cast<size_t>(2 * row + 1)] = doc_offset;
    ++row;
  }
  return NpyArray::from_vector(std::move(idx), {num_samples + 1, 2});
}

}  // namespace

StatusOr<NpyArray> build_sample_idx(const std::vector<int32_t>& sizes,
                                    const std::vector<int32_t>& document_index,
                                    int32_t seq_length, int32_t num_epochs,
                                    int64_t tokens_per_epoch, bool drop_last_partial_sequence,
                                    int add_extra_token_to_sequence,
                                    std::optional<NpyDtype> force_dtype) {
  if (seq_length <= 1 || num_epochs <= 0 || tokens_per_epoch <= 1 || document_index.empty()) {
    return internal_error("build_sample_idx: seq_length ", seq_length, ", num_epochs ",
                          num_epochs, ", tokens_per_epoch ", tokens_per_epoch,
                          ", documents ", document_index.size());
  }
  int64_t sizes_max = 0;
  for (int32_t s : sizes) sizes_max = std::max<int64_t>(sizes_max, s);
  const int64_t sample_idx_max = std::max<int64_t>(static_cast<int64_t>(document_index.size()), sizes_max);
  const bool use_int32 = force_dtype ? *force_dtype == NpyDtype::kInt32
                                     : sample_idx_max <= std::numeric_limits<int32_t>::max();
  if (use_int32) {
    return build_sample_idx_impl<int32_t>(sizes, document_index, seq_length, num_epochs,
                                          tokens_per_epoch, drop_last_partial_sequence,
                                          add_extra_token_to_sequence);
  }
  return build_sample_idx_impl<int64_t>(sizes, document_index, seq_length, num_epochs,
                                        tokens_per_epoch, drop_last_partial_sequence,
                                        add_extra_token_to_sequence);
}

std::pair<std::vector<int16_t>, std::vector<int64_t>> build_blending_indices(
    const std::vector<double>& weights, int64_t size) {
  const auto num_datasets = static_cast<int64_t>(weights.size());
  MS_CHECK(num_datasets > 0 && num_datasets < 32767, "build_blending_indices: ", num_datasets,
           " datasets");
  std::vector<int16_t> dataset_index(static_cast<size_t>(size));
  std::vector<int64_t> dataset_sample_index(static_cast<size_t>(size));
  std::vector<int64_t> current(static_cast<size_t>(num_datasets), 0);
  for (int64_t i = 0; i < size; ++i) {
    const double i_double = std::max(static_cast<double>(i), 1.0);
    int64_t best = 0;
    double best_error = weights[0] * i_double - static_cast<double>(current[0]);
    for (int64_t d = 1; d < num_datasets; ++d) {
      const double error = weights[static_cast<size_t>(d)] * i_double - static_cast<double>(current[static_cast<size_t>(d)]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    dataset_index[static_cast<size_t>(i)] = static_cast<int16_t>(best);
    dataset_sample_index[static_cast<size_t>(i)] = current[static_cast<size_t>(best)]++;
  }
  return {std::move(dataset_index), std::move(dataset_sample_index)};
}

std::pair<std::vector<int16_t>, std::vector<int64_t>> build_exhaustive_blending_indices(
    const std::vector<int64_t>& sizes) {
  const auto num_datasets = static_cast<int64_t>(sizes.size());
  MS_CHECK(num_datasets > 0 && num_datasets < 32767);
  int64_t total = 0;
  std::set<int64_t> unspent;
  for (int64_t d = 0; d < num_datasets; ++d) {
    total += sizes[static_cast<size_t>(d)];
    // A dataset that contributes nothing is spent from the start (Megatron asserts > 0).
    if (sizes[static_cast<size_t>(d)] > 0) unspent.insert(d);
  }
  std::vector<double> weights(static_cast<size_t>(num_datasets));
  for (int64_t d = 0; d < num_datasets; ++d) {
    weights[static_cast<size_t>(d)] = static_cast<double>(sizes[static_cast<size_t>(d)]) / static_cast<double>(total);
  }
  std::vector<int16_t> dataset_index(static_cast<size_t>(total));
  std::vector<int64_t> dataset_sample_index(static_cast<size_t>(total));
  std::vector<int64_t> counts(static_cast<size_t>(num_datasets), 0);
  int64_t i = 0;
  while (!unspent.empty()) {
    const double i_double = std::max(static_cast<double>(i), 1.0);
    int64_t best = -1;
    double best_error = std::numeric_limits<double>::lowest();
    for (int64_t d : unspent) {
      const double error = weights[static_cast<size_t>(d)] * i_double - static_cast<double>(counts[static_cast<size_t>(d)]);
      if (error > best_error) {
        best = d;
        best_error = error;
      }
    }
    dataset_index[static_cast<size_t>(i)] = static_cast<int16_t>(best);
    dataset_sample_index[static_cast<size_t>(i)] = counts[static_cast<size_t>(best)]++;
    if (counts[static_cast<size_t>(best)] == sizes[static_cast<size_t>(best)]) unspent.erase(best);
    ++i;
  }
  return {std::move(dataset_index), std::move(dataset_sample_index)};
}

}  // namespace mindspeed
