// Dataset helpers: splits, blends, NumPy-exact normalization (see the header).
#include "datasets/utils.h"

#include <cfenv>
#include <cmath>
#include <cstdlib>

#include "core/check.h"

namespace mindspeed {

const char* split_name(Split split) {
  switch (split) {
    case Split::kTrain: return "train";
    case Split::kValid: return "valid";
    case Split::kTest: return "test";
  }
  return "?";
}

namespace {

// numpy/core/src/umath/loops_utils.h: pairwise_sum (DOUBLE).
double pairwise_sum(const double* a, int64_t n) {
  if (n < 8) {
    double res = 0.;
    for (int64_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

}  // namespace

double numpy_sum(const std::vector<double>& values) {
  return pairwise_sum(values.data(), static_cast<int64_t>(values.size()));
}

std::vector<double> normalize(const std::vector<double>& weights) {
  const double sum = numpy_sum(weights);
  std::vector<double> out(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) out[i] = weights[i] / sum;
  return out;
}

namespace {

/// Python float(str) for the plain decimal forms we accept; false if not a number.
bool parse_python_float(const std::string& s, double* out) {
  if (s.empty()) return false;
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  if (end == begin) return false;
  while (*end == ' ' || *end == '\t' || *end == '\n') ++end;
  if (*end != '\0') return false;
  *out = v;
  return true;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

StatusOr<std::optional<Blend>> get_blend_from_list(const std::vector<std::string>& blend,
                                                   const std::string& flag) {
  if (blend.empty()) return std::optional<Blend>();
  Blend out;
  if (blend.size() % 2 == 0) {
    // Even length: "w1 p1 w2 p2 ..." if every weight parses as a float, else all prefixes.
    std::vector<double> weights;
    bool all_numbers = true;
    for (size_t i = 0; i < blend.size(); i += 2) {
      double w = 0;
      if (!parse_python_float(trim(blend[i]), &w)) {
        all_numbers = false;
        break;
      }
      weights.push_back(w);
    }
    if (all_numbers) {
      for (size_t i = 1; i < blend.size(); i += 2) out.prefixes.push_back(trim(blend[i]));
      for (double w : weights) {
        if (!(w > 0) || !std::isfinite(w)) {
          return invalid_argument(flag, ": blend weights must be positive numbers, got ", w,
                                  " (format: ", flag, " W1 PREFIX1 W2 PREFIX2 ... or ", flag,
                                  " PREFIX1 PREFIX2 ...)");
        }
      }
      out.weights = std::move(weights);
      return std::optional<Blend>(std::move(out));
    }
  }
  for (const auto& p : blend) {
    double ignored = 0;
    if (parse_python_float(trim(p), &ignored)) {
      return invalid_argument(flag, ": '", p, "' looks like a weight, but the list does not ",
                              "alternate weight and prefix (format: ", flag,
                              " W1 PREFIX1 W2 PREFIX2 ... or ", flag, " PREFIX1 PREFIX2 ...)");
    }
    out.prefixes.push_back(trim(p));
  }
  return std::optional<Blend>(std::move(out));
}

StatusOr<std::array<double, kNumSplits>> parse_and_normalize_split(const std::string& split) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("--split \"", split, "\" is invalid: ", why,
                            " (expected up to three non-negative numbers such as \"969,30,1\" "
                            "or \"98,2,0\")");
  };
  // Numbers are runs of [0-9.] (as Megatron's regex); separators are runs of ',', '/' or
  // whitespace. Any other character is an error rather than silently skipped.
  std::vector<double> values;
  std::string token;
  auto flush = [&]() -> bool {
    if (token.empty()) return true;
    double v = 0;
    const bool ok = token.find('.') == token.rfind('.') && parse_python_float(token, &v);
    token.clear();
    if (ok) values.push_back(v);
    return ok;
  };
  // A comma separates two numbers: "98,2," or "98,,2" has an empty field, which Megatron's
  // comma-separated parse (float("")) refuses too.
  bool after_comma = true;  // at the start, a comma would also open an empty field
  for (char c : split) {
    if ((c >= '0' && c <= '9') || c == '.') {
      token.push_back(c);
      after_comma = false;
    } else if (c == ',' || c == '/' || c == ' ' || c == '\t') {
      const bool empty_field = c == ',' && after_comma && token.empty();
      if (!flush()) return bad("malformed number");
      if (empty_field) return bad("an empty field between commas");
      if (c == ',') after_comma = true;
    } else {
      return bad(str_cat("unexpected character '", c, "'"));
    }
  }
  if (!flush()) return bad("malformed number");
  if (after_comma && split.find(',') != std::string::npos) return bad("an empty field after the last comma");
  if (values.empty()) return bad("no numbers");
  if (values.size() > kNumSplits) return bad("more than three numbers");
  while (values.size() < kNumSplits) values.push_back(0.0);
  const double sum = numpy_sum(values);
  if (!(sum > 0) || !std::isfinite(sum)) return bad("the numbers sum to zero");
  std::array<double, kNumSplits> out{};
  for (int i = 0; i < kNumSplits; ++i) out[i] = values[i] / sum;
  return out;
}

SplitMatrix convert_split_vector_to_split_matrix(const std::array<double, kNumSplits>& vector) {
  // expansion = [0, 0 + v0, (0 + v0) + v1, ...]; bookend i = (expansion[i], expansion[i + 1]).
  double expansion[kNumSplits + 1];
  expansion[0] = 0.0;
  for (int i = 0; i < kNumSplits; ++i) expansion[i + 1] = expansion[i] + vector[i];
  SplitMatrix m;
  for (int i = 0; i < kNumSplits; ++i) {
    const double lo = expansion[i], hi = expansion[i + 1];
    if (hi <= lo) {
      m[i] = std::nullopt;
    } else {
      m[i] = std::make_pair(lo, hi);
    }
  }
  return m;
}

std::pair<int64_t, int64_t> split_index_range(const std::pair<double, double>& bookend,
                                              int64_t num_elements) {
  MS_CHECK(std::fegetround() == FE_TONEAREST);
  const double n = static_cast<double>(num_elements);
  // Python's round() on a float rounds half to even, as nearbyint does in FE_TONEAREST.
  return {static_cast<int64_t>(std::nearbyint(bookend.first * n)),
          static_cast<int64_t>(std::nearbyint(bookend.second * n))};
}

}  // namespace mindspeed
