// Backend under test, case registration, data movement and judging (see harness.hpp).
#include "harness.hpp"

#include <boost/test/unit_test.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <variant>

#include "../nn/nn_fixture.hpp"
#include "kiln/errors.hpp"

namespace kiln::conformance {
namespace {

std::shared_ptr<Backend>*& backend_slot() {
  static std::shared_ptr<Backend>* slot = nullptr;  // never destroyed, like the registry
  return slot;
}

struct Spec {
  std::string suite;
  std::vector<Op> ops;
  Axes axes;
  std::function<void(const Variant&)> body;
};

std::vector<Spec>& specs() {
  static std::vector<Spec> all;
  return all;
}

/// "<suite> <case>" of the running case, for the one-line results.
std::string& current_case() {
  static std::string name;
  return name;
}

/// Host copies handed to Backend::to_device, alive until the next fetch() synchronizes.
std::vector<Tensor>& staged() {
  static std::vector<Tensor> hosts;
  return hosts;
}

/// The same bytes tagged row_major: copies move bytes, whatever layout the operand has.
Tensor bytes_of(const Tensor& t) { return t.layout() == Layout::row_major ? t : t.with_layout(Layout::row_major); }

void report(const std::string& what, double err, double tol, bool ok) {
  std::cout << "conformance: " << current_case() << ' ' << what << " rel_err " << err << " tol " << tol
            << (ok ? " ok" : " FAIL") << '\n';
}

/// KILN_CONFORMANCE_PARAMS="key=value ...": backend parameters to run the suite under. Each key
/// must be one of the backend's parameters; its value is read as the type of that parameter.
void set_from_environment(ParamMap& params, const std::string& backend_name) {
  const char* env = std::getenv("KILN_CONFORMANCE_PARAMS");
  if (env == nullptr) return;
  std::istringstream words(env);
  std::string word;
  while (words >> word) {
    const std::size_t eq = word.find('=');
    const std::string key = word.substr(0, eq), text = eq == std::string::npos ? "" : word.substr(eq + 1);
    const auto found = params.entries().find(key);
    if (eq == std::string::npos || found == params.entries().end()) {
      throw Error("conformance: KILN_CONFORMANCE_PARAMS: '" + word + "' is not key=value with a parameter of backend '" +
                  backend_name + "'");
    }
    const ParamValue& current = found->second.value;
    ParamValue value;
    std::int64_t number = 0;
    const auto [end, parse] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (std::holds_alternative<bool>(current) && (text == "true" || text == "false")) {
      value = text == "true";
    } else if (std::holds_alternative<std::int64_t>(current) && !text.empty() && parse == std::errc() &&
               end == text.data() + text.size()) {
      value = number;
    } else if (std::holds_alternative<std::string>(current)) {
      value = text;
    } else {
      throw Error("conformance: KILN_CONFORMANCE_PARAMS: " + word + " does not fit the type of backend '" +
                  backend_name + "''s parameter " + key);
    }
    params.set(key, value, "KILN_CONFORMANCE_PARAMS");
  }
}

}  // namespace

Backend& backend() {
  if (backend_slot() == nullptr) throw Error("conformance: no backend was made (main.cpp makes it first)");
  return **backend_slot();
}

void make_backend(const std::string& name) {
  ParamMap params = test::plugin_params(KILN_KIND_BACKEND, name, "");
  if (params.contains("allow_tf32")) params.set("allow_tf32", false, "conformance suite (f32 accuracy)");
  // scripts/gpu-check.sh reruns the convolution cases with algorithms chosen by timing
  // (cudnn_benchmark: cudnnFind* may pick algorithms the heuristics never rank first) and with
  // f32 Winograd/FFT refused (conv_transforms = false); the default allows them, and they must
  // meet the f32 tolerance either way.
  set_from_environment(params, name);
  static ParamMap kept("backend");  // PluginArgs holds a pointer: keep the map for the backend's life
  kept = params;
  PluginArgs args;
  args.params = &kept;
  const auto& info = test::registry().require(KILN_KIND_BACKEND, name, "backend");
  backend_slot() = new std::shared_ptr<Backend>(test::registry().create_backend(info, args));
}

Register::Register(std::string suite, std::vector<Op> ops, Axes axes,
                   std::function<void(const Variant&)> body) {
  specs().push_back(Spec{std::move(suite), std::move(ops), axes, std::move(body)});
}

std::vector<Op> registered_ops() {
  std::vector<Op> out;
  for (const Spec& spec : specs()) out.insert(out.end(), spec.ops.begin(), spec.ops.end());
  return out;
}

void add_registered_cases() {
  namespace ut = boost::unit_test;
  for (const Spec& spec : specs()) {
    ut::test_suite* suite = BOOST_TEST_SUITE(spec.suite);
    std::vector<DType> dtypes{DType::f32};
    if (spec.axes != Axes::f32_only) dtypes = {DType::f32, DType::bf16, DType::f16};
    std::vector<Layout> layouts{Layout::row_major};
    if (spec.axes == Axes::dtypes_x_layouts) layouts = {Layout::row_major, Layout::nhwc};
    for (const DType dtype : dtypes) {
      for (const Layout layout : layouts) {
        std::string name(dtype_name(dtype));
        if (spec.axes == Axes::dtypes_x_layouts) name += std::string("_") + layout_label(layout);
        const Variant variant{dtype, layout};
        const std::string label = spec.suite + " " + name;
        const auto& body = spec.body;
        ut::test_case* tc = ut::make_test_case(
            [label, variant, &body] {
              current_case() = label;
              body(variant);
            },
            name, __FILE__, __LINE__);
        std::string missing;
        for (const Op op : spec.ops) {
          if (!backend().supports(op, dtype)) {
            missing += (missing.empty() ? "" : ", ") + std::string(op_name(op));
          }
        }
        if (!missing.empty()) {
          const std::string reason = std::string(backend().name()) + " backend does not support " + missing +
                                     " in " + std::string(dtype_name(dtype)) + " (supports() is false)";
          tc->add_precondition([reason](ut::test_unit_id) {
            boost::test_tools::assertion_result r(false);
            r.message() << reason;
            return r;
          });
        }
        suite->add(tc);
      }
    }
    ut::framework::master_test_suite().add(suite);
  }
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
  staged().push_back(host);
  return backend().to_device(host);
}

Tensor poisoned(const Shape& shape, DType dtype, Layout layout) {
  Tensor dev = backend().allocate(shape, dtype, MemoryKind::device);
  backend().copy(poison_image(shape, dtype), bytes_of(dev));
  return layout == Layout::row_major ? dev : dev.with_layout(layout);
}

std::vector<double> fetch(const Tensor& t) {
  backend().synchronize();
  staged().clear();
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
  report(what, err, tol, ok);
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
  BOOST_TEST(ok, what << ": relative error " << err << " exceeds " << tol << " (" << got.size()
                      << " elements; first far-off ones:" << detail.str() << ")");
}

void expect_equal(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  std::size_t bad = 0;
  std::ostringstream detail;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!(got[i] == want[i])) {
      if (bad < 5) detail << " [" << i << "] got " << got[i] << " want " << want[i] << ";";
      ++bad;
    }
  }
  const bool ok = bad == 0 && got.size() == want.size();
  report(what + " (exact)", static_cast<double>(bad), 0.0, ok);
  BOOST_TEST(ok, what << ": " << bad << " of " << want.size() << " elements differ (got " << got.size()
                      << " elements):" << detail.str());
}

}  // namespace kiln::conformance
