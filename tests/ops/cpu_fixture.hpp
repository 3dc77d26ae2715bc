// Shared helpers of test_cpu_ops: loading the real `cpu` plugin and comparing against references.
//
// The plugin library is loaded directly with Boost.DLL (not through the core registry) so these
// tests depend only on the descriptor ABI. The library stays loaded until exit, as the core
// promises, so backends never outlive their code. Outputs are poisoned with NaN before each op,
// so an op that forgets to write an element fails the comparison.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/params.hpp"
#include "kiln/plugin_args.hpp"
#include "../support/error_text.hpp"

namespace kiln::test {

struct BackendDeleter {
  void operator()(Backend* b) const;
};
using BackendPtr = std::unique_ptr<Backend, BackendDeleter>;

/// A new cpu backend made by the plugin's factory with these parameters and ranks.
BackendPtr make_cpu_backend(const ParamMap& params, const RankInfo& ranks = {});
/// A new cpu backend (threads = 0) with one string parameter set, e.g. ("conv_layout", "blocked").
BackendPtr make_cpu_backend_with(const std::string& key, const std::string& value);
/// The same with several string options, e.g. {{"conv3x3", "direct"}, {"conv_layout", "blocked"}}.
BackendPtr make_cpu_backend_with(std::initializer_list<std::pair<std::string, std::string>> options);
/// The process-wide backend the op tests share (threads = 0, one local rank).
Backend& cpu();

/// Host f32 tensor with uniform values in [lo, hi).
Tensor random_f32(const Shape& shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f);
/// Host tensor filled with NaN (float dtypes) or 0xA5 bytes (others).
Tensor poisoned(const Shape& shape, DType dtype = DType::f32);
/// Host f32 tensor with these values.
Tensor f32_tensor(const Shape& shape, const std::vector<float>& values);
/// The elements of an f32 tensor as doubles.
std::vector<double> values(const Tensor& t);

/// `t` (f32) converted to `dtype` by the backend's cast (round to nearest even), same layout;
/// f32 returns t.
Tensor to_dtype(const Tensor& t, DType dtype);
/// `t` (f32, bf16 or f16) converted to a new f32 tensor in the same layout (exact).
Tensor to_f32(const Tensor& t);
/// `t` (f32) rounded through `dtype` and back, so references see exactly what the op reads.
Tensor rounded(const Tensor& t, DType dtype);

/// A host copy of an NCHW f32 tensor stored channels-last (Layout::nhwc, same logical values).
Tensor to_channels_last(const Tensor& t);
/// The logical (NCHW-order) values of an f32 tensor in either layout.
std::vector<double> logical_values(const Tensor& t);

/// Largest |a - b| over the largest |b|, on the logical values (either may be f32, bf16 or f16,
/// widened exactly; either layout); infinity if either holds a NaN. For two paths that sum in
/// different orders and so agree to rounding, not bit for bit.
double relative_difference(const Tensor& a, const Tensor& b);

/// Bytes of heap memory in use (glibc mallinfo2): equal before and after a repeated op means the
/// op's steady state keeps nothing new (temporaries freed again are not seen).
std::size_t heap_in_use();

/// Checks that `step` (a plan's ops, called again and again) reaches a steady state that keeps no
/// new heap memory: 20 calls to warm up, then 20 more with the heap in use exactly as before.
/// The warm-up is long because the OpenMP runtime and oneDNN grow per-thread state over the first
/// calls (oneDNN 3.2 on a Zen 4: 768 bytes, once, between the 6th and 11th call).
void check_heap_steady(const std::function<void()>& step);

/// Checks |got - want| <= atol + rtol * |scale| element-wise (scale defaults to |want|); reports
/// the first mismatches with index and values. NaN in `got` always fails. `got` may be f32, bf16
/// or f16 (compared after an exact widening).
void check_close(const Tensor& got, const std::vector<double>& want, double rtol, double atol,
                 const std::string& what, const std::vector<double>* scale = nullptr);

/// Convolution calls per "direction/path" ("forward/onednn", "backward_filter/kiln_avx2", ...) that
/// a backend made by this fixture has run so far, every pair listed (the plugin's exported
/// kiln_cpu_conv_paths; the names are plugins/backend-cpu/ops/conv_paths.hpp's).
using ConvPathCounts = std::map<std::string, std::uint64_t>;
ConvPathCounts conv_path_counts(const Backend& backend);
/// The pairs whose count grew from `before` to `after`, by how much.
ConvPathCounts conv_paths_since(const ConvPathCounts& before, const ConvPathCounts& after);
/// The path every counted call of `direction` ("forward", "backward_data", "backward_filter") in
/// `paths` ran ("onednn", "kiln_avx2", ...); several joined by "+" where its calls took different
/// paths, "" where none ran.
std::string path_of(const ConvPathCounts& paths, const std::string& direction);

}  // namespace kiln::test
