// Finite-difference gradient checking for the CNN layer tests (the nn area's method, with a
// kink rule that works without knowing where the kinks are).
//
// L = sum(r * y) is evaluated in double from f32 outputs. Each element gets a central
// difference with step h and one with h/2: on a smooth piece both agree to O(h^2); when the
// interval straddles a ReLU/max-pool kink they disagree, and the element is skipped (the kink
// band). A check fails if any kept element disagrees with the analytic gradient, or if more
// than `max_skipped_fraction` of the elements (rounded up) had to be skipped.
#pragma once

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/tensor.hpp"
#include "nn_fixture.hpp"

namespace kiln::test {

/// n values uniform in [lo, hi) from a generator seeded with `seed` (reproducible test inputs).
inline std::vector<double> random_values(std::size_t n, std::uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  return uniform(n, rng, lo, hi);
}

struct GradCheckOptions {
  double step = 1e-2;
  double rtol = 1e-2;
  double atol = 1e-3;
  double max_skipped_fraction = 0.0;  ///< 0: kinks are not expected (smooth layers)
};

inline double central_difference(const Tensor& t, std::vector<double>& v, std::size_t i, double base,
                                 double h, const std::function<double()>& loss) {
  const double up = static_cast<float>(base + h);
  const double down = static_cast<float>(base - h);
  v[i] = up;
  write(t, v);
  const double l_up = loss();
  v[i] = down;
  write(t, v);
  const double l_down = loss();
  v[i] = base;
  return (l_up - l_down) / (up - down);
}

/// Compares `analytic` (dL/dt per element of device f32 tensor t) with central differences.
inline void check_gradient(const std::string& what, const Tensor& t, const std::vector<double>& analytic,
                           const std::function<double()>& loss, const GradCheckOptions& opt = {}) {
  std::vector<double> base = read(t);
  BOOST_TEST_REQUIRE(base.size() == analytic.size());
  std::vector<double> v = base;
  int bad = 0, checked = 0, skipped = 0;
  std::ostringstream report;
  for (std::size_t i = 0; i < base.size(); ++i) {
    const double numeric = central_difference(t, v, i, base[i], opt.step, loss);
    const double tol = opt.atol + opt.rtol * std::max(std::abs(numeric), std::abs(analytic[i]));
    if (opt.max_skipped_fraction > 0) {
      const double half = central_difference(t, v, i, base[i], opt.step / 2, loss);
      if (std::abs(half - numeric) > tol) {
        ++skipped;
        continue;
      }
    }
    if (!(std::abs(numeric - analytic[i]) <= tol)) {
      if (bad < 5) report << " [" << i << "] analytic " << analytic[i] << " numeric " << numeric << ";";
      ++bad;
    }
    ++checked;
  }
  write(t, base);
  BOOST_TEST(checked > 0, what << ": no element checked");
  BOOST_TEST(skipped <= std::ceil(opt.max_skipped_fraction * static_cast<double>(base.size())),
             what << ": " << skipped << " of " << base.size() << " elements sit on a kink");
  BOOST_TEST(bad == 0, what << ": " << bad << " of " << checked << " elements disagree:" << report.str());
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace kiln::test
