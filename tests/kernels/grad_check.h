// Finite-difference gradient check: L(x) = sum_i dout_i * f(x)_i evaluated in double from
// the kernel's float outputs; central differences at a sample of coordinates are compared
// with the analytic gradient (the backward kernel's output for `dout`).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

namespace mindspeed::testing {

using ForwardFn = std::function<std::vector<float>(const std::vector<float>&)>;

inline double weighted_sum(const std::vector<float>& out, const std::vector<float>& dout) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * dout[i];
  return s;
}

/// Checks `analytic` (dL/dx) against central differences of `forward` at up to
/// `max_coords` coordinates spread over x.
inline ::testing::AssertionResult check_gradient(const ForwardFn& forward, std::vector<float> x,
                                                 const std::vector<float>& dout,
                                                 const std::vector<float>& analytic,
                                                 double h = 1e-2, double rtol = 2e-2,
                                                 double atol = 2e-3, size_t max_coords = 64) {
  const size_t step = std::max<size_t>(1, x.size() / max_coords);
  for (size_t i = 0; i < x.size(); i += step) {
    const float saved = x[i];
    x[i] = static_cast<float>(saved + h);
    const double up = weighted_sum(forward(x), dout);
    x[i] = static_cast<float>(saved - h);
    const double down = weighted_sum(forward(x), dout);
    x[i] = saved;
    const double numeric = (up - down) / (2.0 * h);
    if (std::fabs(numeric - analytic[i]) > atol + rtol * std::fabs(numeric)) {
      return ::testing::AssertionFailure() << "coordinate " << i << ": analytic " << analytic[i]
                                           << " vs finite difference " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mindspeed::testing
