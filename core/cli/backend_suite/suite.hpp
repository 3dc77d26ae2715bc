// The backend conformance suite: every op of kiln/backend.hpp checked against float64
// references (cases_*.cpp), in f32, bf16 and f16 and both image layouts, on any backend.
//
// Two callers run it: `kiln plugins test libkiln-backend-x.so` (conformance_backend.cpp, one
// line per case group) and test_backend_conformance (tests/backend-conformance, one Boost test
// case per variant, for Kiln's own cpu and cuda backends). Both see the same results: each
// judgement of a variant, or what the variant threw, or why it was skipped.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"

namespace kiln::conformance {

/// One judgement: an output of a case against its reference.
struct CheckResult {
  std::string what;        ///< "c op NT alpha 0.5 + bias" ("(exact)" appended for exact ones)
  double error = 0.0;      ///< relative error, or the count of differing elements when exact
  double tolerance = 0.0;  ///< 0 when exact
  bool ok = false;
  std::string message;     ///< on a failure: the error and the first far-off elements
  bool refusal = false;    ///< a call that must be refused (expect_refused), not an output
};

/// What one variant of a case group did.
struct VariantResult {
  std::string suite;  ///< the group's name
  std::string name;   ///< "f32", "bf16_nhwc"
  Variant variant;
  std::string skipped;  ///< why it did not run (an op the backend does not support); empty if it ran
  std::string threw;    ///< what the case threw (a BackendError, a wrong shape); empty if nothing
  std::vector<CheckResult> checks;

  /// Ran, threw nothing, made at least one judgement, and every judgement passed.
  bool passed() const;
};

/// Every case group of the suite, in a fixed order.
const std::vector<CaseSpec>& all_cases();
/// Every op some case exercises (each op of KILN_OPS must be: tests/backend-conformance checks).
std::vector<Op> covered_ops();
/// The variants of `spec`: its dtypes, times both layouts for image ops.
std::vector<Variant> variants_of(const CaseSpec& spec);
/// "f32", or "f32_nchw" / "f32_nhwc" for image ops.
std::string variant_name(const CaseSpec& spec, const Variant& variant);
/// Why `backend` cannot run `variant` of `spec` (the ops supports() refuses), or empty.
std::string unsupported_reason(const Backend& backend, const CaseSpec& spec, const Variant& variant);

/// Called with each judgement as it is made (the test prints scripts/gpu-check.sh's lines).
using CheckObserver = std::function<void(const VariantResult& running, const CheckResult& check)>;

/// Runs `variant` of `spec` on `backend`, or reports it skipped where supports() says no. Not
/// reentrant: one variant runs at a time in a process (cases reach the backend via backend()).
VariantResult run_variant(Backend& backend, const CaseSpec& spec, const Variant& variant,
                          const CheckObserver& observe = {});

}  // namespace kiln::conformance
