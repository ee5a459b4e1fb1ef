// Sampling (sampling.h).
#include "inference/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace mindspeed {

Status validate_sampling_params(const SamplingParams& p, int64_t vocab_size) {
  if (!(p.temperature > 0.0f) || !std::isfinite(p.temperature)) {
    return invalid_argument("--temperature ", p.temperature,
                            " must be a positive number (greedy decoding is --top-k 1, the default)");
  }
  if (p.top_k < 0) return invalid_argument("--top-k ", p.top_k, " must be >= 0 (0: no top-k filter, 1: greedy)");
  if (p.top_k > vocab_size) {
    return invalid_argument("--top-k ", p.top_k, " is larger than the vocabulary (", vocab_size, " tokens)");
  }
  if (!(p.top_p >= 0.0f && p.top_p <= 1.0f)) {
    return invalid_argument("--top-p ", p.top_p, " must be in [0, 1] (0: no top-p filter)");
  }
  if (p.top_k == 1 && p.top_p > 0.0f) {
    return invalid_argument("--top-p ", p.top_p,
                            " with --top-k 1 (greedy, the default): pass --top-k 0 to sample with top-p only");
  }
  if (p.top_k == 1 && p.temperature != 1.0f) {
    return invalid_argument("--temperature ", p.temperature,
                            " has no effect with greedy decoding (--top-k 1, the default): pass --top-k 0 or "
                            "--top-k K > 1 to sample");
  }
  if (p.num_tokens_to_generate < 1) {
    return invalid_argument("--out-seq-length ", p.num_tokens_to_generate, " must be at least 1");
  }
  return ok_status();
}

double uniform_double(const RngStream& stream, uint64_t index) {
  const auto w = stream.block(index);
  const uint64_t hi = w[0] >> 5, lo = w[1] >> 6;  // 27 + 26 bits
  return static_cast<double>((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

int32_t sample_from_logits(const float* logits, int64_t vocab_size, const SamplingParams& p, double draw,
                           std::vector<double>* scratch) {
  if (p.top_k == 1) {
    int64_t best = 0;
    for (int64_t i = 1; i < vocab_size; ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    return static_cast<int32_t>(best);
  }
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  std::vector<double>& x = *scratch;
  x.resize(static_cast<size_t>(vocab_size));
  // Temperature in float, as torch divides the fp32 logits.
  for (int64_t i = 0; i < vocab_size; ++i) x[i] = static_cast<double>(logits[i] / p.temperature);
  if (p.top_k > 1) {
    std::vector<double> sorted(x);
    std::nth_element(sorted.begin(), sorted.begin() + (p.top_k - 1), sorted.end(), std::greater<double>());
    const double kth = sorted[static_cast<size_t>(p.top_k - 1)];
    for (double& v : x) {
      if (v < kth) v = kNegInf;
    }
  }
  if (p.top_p > 0.0f) {
    std::vector<int64_t> order(static_cast<size_t>(vocab_size));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
    const double maxv = x[order[0]];
    double total = 0.0;
    for (int64_t i : order) total += x[i] == kNegInf ? 0.0 : std::exp(x[i] - maxv);
    // Dropped: a token whose predecessors' mass already exceeds top_p (the first always stays).
    double before = 0.0;
    for (int64_t i : order) {
      const double prob = x[i] == kNegInf ? 0.0 : std::exp(x[i] - maxv) / total;
      if (before > p.top_p) x[i] = kNegInf;
      before += prob;
    }
  }
  double maxv = kNegInf;
  for (double v : x) maxv = std::max(maxv, v);
  double total = 0.0;
  for (double& v : x) {
    v = v == kNegInf ? 0.0 : std::exp(v - maxv);
    total += v;
  }
  // Inverse CDF in index order; the last candidate catches rounding at the top end.
  const double target = draw * total;
  double cumulative = 0.0;
  int64_t last = 0;
  for (int64_t i = 0; i < vocab_size; ++i) {
    if (x[i] == 0.0) continue;
    last = i;
    cumulative += x[i];
    if (cumulative > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last);
}

}  // namespace mindspeed
