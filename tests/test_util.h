// Helpers shared by the tests: seeded random tensors and tolerance comparisons that report
// the worst element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <omp.h>

#include "core/rng.h"
#include "kernels/kernel_types.h"

namespace mindspeed::testing {

/// The kernel context of the kernel tests: the OpenMP threads ctest gives the process.
inline const KernelContext kKc{omp_get_max_threads()};

/// n values, normal(0, std), from Philox stream `stream`.
inline std::vector<float> random_vector(int64_t n, uint64_t stream, float std = 1.0f,
                                        float mean = 0.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_normal(v.data(), n, mean, std, RngStream{1234, stream});
  return v;
}

/// max |a - b| / max |b| over a tensor: the relative error of the tensor as a whole
/// (infinity when the sizes differ).
inline double normwise_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0.0, ref = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    ref = std::max(ref, std::fabs(static_cast<double>(b[i])));
  }
  return diff / std::max(ref, 1e-30);
}

/// Asserts |a - b| <= atol + rtol * |b| element-wise; reports the worst element.
inline ::testing::AssertionResult all_close(const float* a, const float* b, int64_t n,
                                            double rtol, double atol) {
  double worst = 0.0;
  int64_t worst_i = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    const double excess = diff - (atol + rtol * std::fabs(static_cast<double>(b[i])));
    if (!(excess <= 0.0) && (worst_i < 0 || excess > worst || std::isnan(diff))) {
      worst = excess;
      worst_i = i;
    }
  }
  if (worst_i < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_i << " of " << n << ": " << a[worst_i] << " vs expected "
         << b[worst_i] << " (rtol " << rtol << ", atol " << atol << ")";
}

inline ::testing::AssertionResult all_close(const std::vector<float>& a,
                                            const std::vector<float>& b, double rtol,
                                            double atol) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "size " << a.size() << " vs " << b.size();
  return all_close(a.data(), b.data(), static_cast<int64_t>(a.size()), rtol, atol);
}

/// Largest |a-b| / max(|b|, floor) over the elements.
inline double max_relative_error(const float* a, const float* b, int64_t n, double floor = 1e-6) {
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double rel = std::fabs(static_cast<double>(a[i]) - b[i]) /
                       std::max(std::fabs(static_cast<double>(b[i])), floor);
    worst = std::max(worst, rel);
  }
  return worst;
}

}  // namespace mindspeed::testing
