// Histograms of tensor values for TensorBoard (see the header).
#include "kiln/io/histogram.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kiln::io {

Histogram histogram_of(std::span<const float> values, int bins) {
  if (bins < 1) throw std::invalid_argument("histogram_of: bins must be at least 1");
  Histogram h;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const float f : values) {
    if (!std::isfinite(f)) {
      ++h.non_finite;
      continue;
    }
    const double v = f;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  if (h.num == 0) return h;
  h.min = lo;
  h.max = hi;
  if (lo == hi) {  // one value: one bucket holding all of it
    h.bucket_limit = {hi};
    h.bucket = {h.num};
    return h;
  }
  const double width = (hi - lo) / bins;
  h.bucket.assign(static_cast<std::size_t>(bins), 0.0);
  for (int b = 0; b < bins; ++b) h.bucket_limit.push_back(b + 1 == bins ? hi : lo + width * (b + 1));
  for (const float f : values) {
    if (!std::isfinite(f)) continue;
    // The bucket whose (left, right] holds the value; the smallest value goes to the first.
    auto b = static_cast<std::ptrdiff_t>(std::ceil((static_cast<double>(f) - lo) / width)) - 1;
    b = std::clamp<std::ptrdiff_t>(b, 0, bins - 1);
    // Rounding in the division may land a value one bucket off its edges: move it to the bucket
    // whose edges hold it, so the counts agree with the edges TensorBoard is given.
    while (b > 0 && static_cast<double>(f) <= h.bucket_limit[static_cast<std::size_t>(b - 1)]) --b;
    while (b + 1 < bins && static_cast<double>(f) > h.bucket_limit[static_cast<std::size_t>(b)]) ++b;
    h.bucket[static_cast<std::size_t>(b)] += 1;
  }
  return h;
}

}  // namespace kiln::io
