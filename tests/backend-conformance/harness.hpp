// The conformance harness: which backend is under test, how cases are registered per dtype and
// layout, how data reaches the backend and comes back, and how results are judged.
//
// Decisions: one suite runs on any backend plugin (chosen in main.cpp), so data moves only
// through Backend::allocate/copy/to_device and results are read after synchronize(). Outputs are
// poisoned (NaN, or 0xA5 bytes) before every op, so an element an op forgets to write fails.
// Float results are judged by relative norm ||got - want|| / ||want|| against a float64
// reference on the inputs rounded to the op's dtype; masks, flags and casts are judged exactly.
// Each check prints one line "conformance: <suite> <case> <tensor> rel_err <e> tol <t> ok|FAIL"
// that scripts/gpu-check.sh summarises.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "host_data.hpp"
#include "kiln/backend.hpp"

namespace kiln::conformance {

/// The backend under test (made in main.cpp before any case runs).
Backend& backend();
/// Makes the backend of plugin `name` through the plugin registry with its default parameters
/// (allow_tf32 = false where the plugin has that key: f32 is checked at f32 accuracy). Throws
/// whatever the plugin's factory throws.
void make_backend(const std::string& name);

/// One instance of a case: the compute dtype and, for image ops, the activation layout.
struct Variant {
  DType dtype = DType::f32;
  Layout layout = Layout::row_major;
};

/// What a case runs over.
enum class Axes : std::uint8_t {
  f32_only,          ///< f32 (ops defined over f32 master state: optimizers)
  dtypes,            ///< f32, bf16, f16
  dtypes_x_layouts,  ///< f32, bf16, f16, each in nchw and nhwc (image activations)
};

/// Registers test cases "<suite>/<dtype>_<layout>" at static-initialisation time. A variant
/// runs only where backend().supports(op, dtype) holds for every op in `ops`; otherwise it is
/// reported as skipped with the reason.
struct Register {
  Register(std::string suite, std::vector<Op> ops, Axes axes, std::function<void(const Variant&)> body);
};
/// Adds every registered case to the Boost.Test master suite (called by main.cpp's init).
void add_registered_cases();
/// Every op some registered case exercises (op_table_coverage.cpp requires all of KILN_OPS).
std::vector<Op> registered_ops();

/// Relative-norm tolerance for results computed in `dtype`: f32 1e-5, bf16/f16 2e-2.
double tolerance(DType dtype);

// ---- data movement ---------------------------------------------------------------------------
/// A backend tensor of `shape` x `dtype` tagged `layout`, holding `logical` (already rounded to
/// `dtype` by the caller). Made with allocate + copy.
Tensor upload(const std::vector<double>& logical, const Shape& shape, DType dtype,
              Layout layout = Layout::row_major);
/// Like upload, but through Backend::to_device (the host copy is kept alive until fetch()).
Tensor to_device(const std::vector<double>& logical, const Shape& shape, DType dtype);
/// A backend tensor of `shape` x `dtype` tagged `layout` whose contents are poison.
Tensor poisoned(const Shape& shape, DType dtype, Layout layout = Layout::row_major);
/// Synchronizes, copies `t` back and returns its elements in logical order.
std::vector<double> fetch(const Tensor& t);

// ---- judging ---------------------------------------------------------------------------------
/// ||got - want|| / ||want|| (infinite if any got is not finite while want is).
double relative_error(const std::vector<double>& got, const std::vector<double>& want);
/// Checks relative_error(got, want) <= tol, naming `what` and the first large mismatches.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what);
/// Checks got == want element for element.
void expect_equal(const std::vector<double>& got, const std::vector<double>& want, const std::string& what);

}  // namespace kiln::conformance
