// What the backend conformance cases (cases_*.cpp) are written against: the backend under test,
// how a case is declared per dtype and layout, how data reaches the backend and comes back, and
// how results are judged. suite.hpp runs the cases; this header is for writing them.
//
// Decisions: one suite runs on any backend plugin, so data moves only through
// Backend::allocate/copy/to_device and results are read after synchronize(). Outputs are
// poisoned (NaN, or 0xA5 bytes) before every op, so an element an op forgets to write fails.
// Float results are judged by relative norm ||got - want|| / ||want|| against a float64
// reference on the inputs rounded to the op's dtype; masks, flags and casts are judged exactly.
// A judgement never throws: it is recorded in the running case's result (suite.hpp), so one
// wrong output does not hide the others of the same case.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "host_data.hpp"
#include "kiln/backend.hpp"

namespace kiln::conformance {

/// The backend of the case that is running (set by run_variant in suite.cpp; throws outside one).
Backend& backend();

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

/// A group of cases: `body` runs once per variant of `axes`, where the backend supports every
/// op of `ops` in the variant's dtype.
struct CaseSpec {
  std::string suite;  ///< "matmul", "conv2d_3x3_s1_p1"
  std::vector<Op> ops;
  Axes axes = Axes::dtypes;
  std::function<void(const Variant&)> body;
};

/// Where each cases_*.cpp adds its groups (see suite.cpp: explicit calls, no static registration,
/// because the suite lives in a static library whose unreferenced objects the linker drops).
class CaseList {
 public:
  void add(std::string suite, std::vector<Op> ops, Axes axes, std::function<void(const Variant&)> body) {
    specs_.push_back(CaseSpec{std::move(suite), std::move(ops), axes, std::move(body)});
  }
  const std::vector<CaseSpec>& specs() const { return specs_; }

 private:
  std::vector<CaseSpec> specs_;
};

void add_dense_cases(CaseList& cases);
void add_elementwise_cases(CaseList& cases);
void add_loss_optim_cases(CaseList& cases);
void add_conv_cases(CaseList& cases);
void add_norm_pool_cases(CaseList& cases);
void add_norm_sync_cases(CaseList& cases);
void add_layout_cases(CaseList& cases);

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
/// Judges relative_error(got, want) <= tol, naming `what` and the first large mismatches.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what);
/// Judges got == want element for element.
void expect_equal(const std::vector<double>& got, const std::vector<double>& want, const std::string& what);
/// Judges that `call` is refused: it throws, and the message names `op` and contains `part` (the
/// shared argument check's words, kiln/sdk/op_args.hpp). A call that returns fails the judgement.
void expect_refused(const std::function<void()>& call, Op op, const std::string& part, const std::string& what);

}  // namespace kiln::conformance
