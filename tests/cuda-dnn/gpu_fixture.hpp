// Helpers of test_cuda_dnn_gpu: the real `cuda` backend made through the plugin registry with
// its schema defaults, and host <-> device transfers of logical-order float64 values in any
// float dtype and image layout, so references stay simple NCHW loops whatever the op's layout.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kiln/backend.hpp"

namespace kiln::cuda_test {

using Values = std::vector<double>;

/// The process-wide `cuda` backend (allow_tf32 off: f32 results are checked at 1e-5).
Backend& gpu();
/// Another `cuda` backend on the same device, its [backend] table the defaults plus `extra_toml`
/// ("conv_filter_reuse = false"). Its ops run on its own streams: synchronize between the two.
std::shared_ptr<Backend> make_gpu_backend(const std::string& extra_toml);

/// `v` rounded to what `dtype` can hold (round to nearest even), as doubles.
Values rounded(const Values& v, DType dtype);
/// Uniform random values in [lo, hi), rounded to `dtype`.
Values random_values(std::size_t count, std::mt19937& rng, DType dtype, double lo = -1.0,
                     double hi = 1.0);

/// A device tensor of `shape` in `dtype` tagged `layout` (4-D only for nhwc) holding `v`
/// (logical order; exactly representable in dtype).
Tensor upload(const Values& v, const Shape& shape, DType dtype, Layout layout = Layout::row_major);
/// A device tensor filled with NaN.
Tensor poisoned(const Shape& shape, DType dtype, Layout layout = Layout::row_major);
/// The values of a device tensor in logical order (synchronizes).
Values download(const Tensor& t);

/// ||got - want|| / ||want|| (infinity if got has a NaN).
double relative_error(const Values& got, const Values& want);
/// The tolerance for results computed in `dtype` (1e-5 f32, 1e-2 f16/bf16).
double tolerance(DType dtype);

std::string layout_name(Layout l);

}  // namespace kiln::cuda_test
