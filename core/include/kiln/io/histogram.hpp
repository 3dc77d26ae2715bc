// A histogram of a tensor's values in the form TensorBoard's histograms and distributions
// dashboards read (tensorflow.HistogramProto, summary.proto): count, min, max, sum, sum of
// squares, and bucket counts with each bucket's right edge. Keras writes these for the weights
// with TensorBoard(histogram_freq=N); Kiln with [log] histograms_every_epochs = N.
//
// The buckets are `bins` equal widths between the smallest and the largest value, the last
// edge the largest value itself, as tensorboardX builds them from numpy.histogram: TensorBoard
// reads bucket i as (edge[i-1], edge[i]], the first as [min, edge[0]]. Values that are not
// finite are left out and counted apart (a run stops on a non-finite weight long before it
// gets here, but a histogram must not turn one into garbage edges).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kiln::io {

struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;  ///< right edges, increasing; the last is max
  std::vector<double> bucket;        ///< how many values each bucket holds
  std::int64_t non_finite = 0;       ///< NaN and infinities, not in the counts above
};

/// The histogram of `values` in `bins` (>= 1) equal buckets; no bucket at all when no value is
/// finite, one when every finite value is the same.
Histogram histogram_of(std::span<const float> values, int bins = 30);

}  // namespace kiln::io
