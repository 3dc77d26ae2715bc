// Runs the backend conformance cases (see suite.hpp).
#include "suite.hpp"

#include <exception>
#include <utility>

#include "running.hpp"

namespace kiln::conformance {
namespace {

/// Sets the running variant for the life of one run_variant, and clears it however that ends.
class RunningScope {
 public:
  RunningScope(Backend& backend, VariantResult& result, const CheckObserver& observe) {
    detail::Running& now = detail::running();
    now.backend = &backend;
    now.result = &result;
    now.observe = &observe;
  }
  RunningScope(const RunningScope&) = delete;
  RunningScope& operator=(const RunningScope&) = delete;
  ~RunningScope() {
    detail::Running& now = detail::running();
    now.backend = nullptr;
    now.result = nullptr;
    now.observe = nullptr;
    now.staged.clear();
  }
};

}  // namespace

bool VariantResult::passed() const {
  if (!skipped.empty() || !threw.empty() || checks.empty()) return false;
  for (const CheckResult& check : checks) {
    if (!check.ok) return false;
  }
  return true;
}

const std::vector<CaseSpec>& all_cases() {
  static const std::vector<CaseSpec> cases = [] {
    CaseList list;
    add_dense_cases(list);
    add_elementwise_cases(list);
    add_loss_optim_cases(list);
    add_conv_cases(list);
    add_norm_pool_cases(list);
    add_norm_sync_cases(list);
    add_layout_cases(list);
    return list.specs();
  }();
  return cases;
}

std::vector<Op> covered_ops() {
  std::vector<Op> out;
  for (const CaseSpec& spec : all_cases()) out.insert(out.end(), spec.ops.begin(), spec.ops.end());
  return out;
}

std::vector<Variant> variants_of(const CaseSpec& spec) {
  std::vector<DType> dtypes{DType::f32};
  if (spec.axes != Axes::f32_only) dtypes = {DType::f32, DType::bf16, DType::f16};
  std::vector<Layout> layouts{Layout::row_major};
  if (spec.axes == Axes::dtypes_x_layouts) layouts = {Layout::row_major, Layout::nhwc};
  std::vector<Variant> out;
  for (const DType dtype : dtypes) {
    for (const Layout layout : layouts) out.push_back(Variant{dtype, layout});
  }
  return out;
}

std::string variant_name(const CaseSpec& spec, const Variant& variant) {
  std::string name(dtype_name(variant.dtype));
  if (spec.axes == Axes::dtypes_x_layouts) name += std::string("_") + layout_label(variant.layout);
  return name;
}

std::string unsupported_reason(const Backend& backend, const CaseSpec& spec, const Variant& variant) {
  std::string missing;
  for (const Op op : spec.ops) {
    if (!backend.supports(op, variant.dtype)) missing += (missing.empty() ? "" : ", ") + std::string(op_name(op));
  }
  if (missing.empty()) return "";
  return std::string(backend.name()) + " backend does not support " + missing + " in " +
         std::string(dtype_name(variant.dtype)) + " (supports() is false)";
}

VariantResult run_variant(Backend& backend, const CaseSpec& spec, const Variant& variant,
                          const CheckObserver& observe) {
  VariantResult result;
  result.suite = spec.suite;
  result.name = variant_name(spec, variant);
  result.variant = variant;
  result.skipped = unsupported_reason(backend, spec, variant);
  if (!result.skipped.empty()) return result;
  const RunningScope scope(backend, result, observe);
  // Backend code may throw anything; one variant's exception must not end the suite.
  try {
    spec.body(variant);
    backend.synchronize();  // an asynchronous backend's error surfaces here, in this variant
  } catch (const std::exception& e) {
    result.threw = e.what();
  } catch (...) {
    result.threw = "something that is not a std::exception";
  }
  return result;
}

}  // namespace kiln::conformance
