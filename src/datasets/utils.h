// Shared dataset helpers. Port of megatron/core/datasets/utils.py (Split, normalize,
// get_blend_from_list) and the split parsing of blended_megatron_dataset_config.py
// (parse_and_normalize_split, convert_split_vector_to_split_matrix).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace mindspeed {

enum class Split { kTrain = 0, kValid = 1, kTest = 2 };
constexpr int kNumSplits = 3;
/// "train", "valid", "test" (Megatron's Split.name).
const char* split_name(Split split);

/// numpy.sum of a float64 vector (NumPy's pairwise summation: blocks of 8 partial sums up to
/// 128 elements, recursive halving above), so normalized weights equal Megatron's bit for bit.
double numpy_sum(const std::vector<double>& values);
/// utils.normalize: w / numpy.sum(w) in float64.
std::vector<double> normalize(const std::vector<double>& weights);

/// A data blend: dataset path prefixes and optional weights (Megatron's (prefixes, weights)).
struct Blend {
  std::vector<std::string> prefixes;
  std::optional<std::vector<double>> weights;  ///< as given, not normalized
};

/// utils.get_blend_from_list: "--data-path w1 p1 w2 p2 ..." (even length, weights parse as
/// floats) or "--data-path p1 p2 ..." (prefixes only). Empty list -> nullopt. `flag` names
/// the option in error messages.
StatusOr<std::optional<Blend>> get_blend_from_list(const std::vector<std::string>& blend,
                                                   const std::string& flag = "--data-path");

/// Per-split [begin, end) fractions of the low-level dataset; nullopt = no such split.
/// (Megatron's split_matrix; the first bookend's begin is the Python int 0.)
using SplitMatrix = std::array<std::optional<std::pair<double, double>>, kNumSplits>;

/// parse_and_normalize_split: "969,30,1" -> {0.969, 0.03, 0.001}. Numbers are runs of [0-9.]
/// as in Megatron's re.findall("[.0-9]+"), separated by ',', '/' or whitespace; padded with 0
/// to three and normalized by their float64 sum. Other characters (letters, signs: Megatron
/// silently skips them), malformed numbers, more than three numbers or an all-zero split are
/// an InvalidArgument naming --split and the value.
StatusOr<std::array<double, kNumSplits>> parse_and_normalize_split(const std::string& split);

/// convert_split_vector_to_split_matrix(vector): cumulative bookends [(0, a), (a, a+b),
/// (a+b, a+b+c)] summed left to right in float64; an empty bookend becomes nullopt.
SplitMatrix convert_split_vector_to_split_matrix(const std::array<double, kNumSplits>& vector);

/// The sequence ids [begin, end) of split `i` of a low-level dataset with `num_elements`
/// sequences: round(bookend * num_elements) with Python's round-half-to-even.
std::pair<int64_t, int64_t> split_index_range(const std::pair<double, double>& bookend,
                                              int64_t num_elements);

}  // namespace mindspeed
