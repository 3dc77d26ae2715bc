// Data movement and judging for the backend conformance cases (see harness.hpp).
#include "harness.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "kiln/errors.hpp"
#include "running.hpp"

namespace kiln::conformance {
namespace detail {

Running& running() {
  static Running state;
  return state;
}

}  // namespace detail

namespace {

/// The same bytes tagged row_major: copies move bytes, whatever layout the operand has.
Tensor bytes_of(const Tensor& t) { return t.layout() == Layout::row_major ? t : t.with_layout(Layout::row_major); }

/// Records one judgement in the running variant's result.
void record(CheckResult check) {
  detail::Running& now = detail::running();
  if (now.result == nullptr) throw Error("conformance: a judgement outside run_variant (suite.cpp runs cases)");
  now.result->checks.push_back(std::move(check));
  if (now.observe != nullptr && *now.observe) (*now.observe)(*now.result, now.result->checks.back());
}

}  // namespace

Backend& backend() {
  Backend* b = detail::running().backend;
  if (b == nullptr) throw Error("conformance: backend() outside run_variant (suite.cpp runs cases)");
  return *b;
}

double tolerance(DType dtype) {
  // bf16 keeps 8 significant bits (rounding error 2^-9 = 2e-3 per element): 2e-2 leaves room for
  // a rounded output plus f32 accumulation order, and still catches a wrong formula.
  return dtype == DType::f32 ? 1e-5 : 2e-2;
}

Tensor upload(const std::vector<double>& logical, const Shape& shape, DType dtype, Layout layout) {
  Tensor host = encode(logical, shape, dtype, layout);
  Tensor dev = backend().allocate(shape, dtype, MemoryKind::device);
  backend().copy(host, bytes_of(dev));
  return layout == Layout::row_major ? dev : dev.with_layout(layout);
}

Tensor to_device(const std::vector<double>& logical, const Shape& shape, DType dtype) {
  Tensor host = encode(logical, shape, dtype, Layout::row_major);
  detail::running().staged.push_back(host);
  return backend().to_device(host);
}

Tensor poisoned(const Shape& shape, DType dtype, Layout layout) {
  Tensor dev = backend().allocate(shape, dtype, MemoryKind::device);
  backend().copy(poison_image(shape, dtype), bytes_of(dev));
  return layout == Layout::row_major ? dev : dev.with_layout(layout);
}

std::vector<double> fetch(const Tensor& t) {
  backend().synchronize();
  detail::running().staged.clear();
  Tensor host = host_tensor(t.shape(), t.dtype());
  backend().copy(bytes_of(t), host);
  return decode(host, t.shape(), t.layout());
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) && std::isfinite(want[i])) return INFINITY;
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  if (norm == 0.0) return std::sqrt(diff);  // an all-zero reference: absolute error
  return std::sqrt(diff / norm);
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  const double err = relative_error(got, want);
  const bool ok = err <= tol;
  std::ostringstream detail;
  if (!ok) {
    int shown = 0;
    double scale = 0.0;
    for (const double w : want) scale = std::max(scale, std::abs(w));
    for (std::size_t i = 0; i < got.size() && i < want.size() && shown < 5; ++i) {
      if (!(std::abs(got[i] - want[i]) <= tol * scale)) {
        detail << " [" << i << "] got " << got[i] << " want " << want[i] << ";";
        ++shown;
      }
    }
  }
  CheckResult check{what, err, tol, ok, ""};
  if (!ok) {
    std::ostringstream message;
    message << what << ": relative error " << err << " exceeds " << tol << " (" << got.size()
            << " elements; first far-off ones:" << detail.str() << ")";
    check.message = message.str();
  }
  record(std::move(check));
}

void expect_equal(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  std::size_t bad = 0;
  std::ostringstream detail;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!(got[i] == want[i])) {
      // fmt's shortest round-trip form: a one-ulp miss must not print as two equal numbers.
      if (bad < 5) detail << fmt::format(" [{}] got {} want {};", i, got[i], want[i]);
      ++bad;
    }
  }
  const bool ok = bad == 0 && got.size() == want.size();
  CheckResult check{what + " (exact)", static_cast<double>(bad), 0.0, ok, ""};
  if (!ok) {
    std::ostringstream message;
    message << what << ": " << bad << " of " << want.size() << " elements differ (got " << got.size()
            << " elements):" << detail.str();
    check.message = message.str();
  }
  record(std::move(check));
}

void expect_refused(const std::function<void()>& call, Op op, const std::string& part, const std::string& what) {
  bool threw = false;
  std::string said;
  try {
    call();
  } catch (const std::exception& e) {
    threw = true;
    said = e.what();
  }
  const std::string name(op_name(op));
  const bool ok = threw && said.find(name) != std::string::npos && said.find(part) != std::string::npos;
  CheckResult check{what + " (refused)", ok ? 0.0 : 1.0, 0.0, ok, "", true};
  if (!ok) {
    check.message = threw ? what + ": the error must name " + name + " and say '" + part + "', but said: " + said
                          : what + ": the call returned, but must be refused with an error naming " + name;
  }
  record(std::move(check));
}

}  // namespace kiln::conformance
