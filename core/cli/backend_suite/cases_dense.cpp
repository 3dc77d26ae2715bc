// Conformance cases of the dense ops: matmul (every transpose pair; alpha, beta and bias as the
// Linear layer uses them) and bias_grad (overwrite and accumulate).
//
// Dtypes as layers use them: a, b, c and bias in the compute dtype for the forward; the weight
// gradient accumulates (beta = 1) into an f32 master gradient c from compute-dtype a and b;
// bias_grad reads a compute-dtype dy into an f32 db.
#include <string>

#include "harness.hpp"
#include "reference.hpp"

namespace kiln::conformance {
namespace {

std::string yes_no(Transpose t) { return t == Transpose::yes ? "T" : "N"; }

void matmul_case(const Variant& v) {
  const DType d = v.dtype;
  const std::int64_t m = 13, n = 17, k = 24;  // odd sizes: no kernel gets a multiple of its tile
  Rng rng(1);
  for (const Transpose ta : {Transpose::no, Transpose::yes}) {
    for (const Transpose tb : {Transpose::no, Transpose::yes}) {
      const Shape a_shape = ta == Transpose::no ? Shape{m, k} : Shape{k, m};
      const Shape b_shape = tb == Transpose::no ? Shape{k, n} : Shape{n, k};
      const auto a = uniform(rng, static_cast<std::size_t>(m * k), -1, 1, d);
      const auto b = uniform(rng, static_cast<std::size_t>(k * n), -1, 1, d);
      const auto bias = uniform(rng, static_cast<std::size_t>(n), -1, 1, d);
      const Tensor a_t = upload(a, a_shape, d), b_t = upload(b, b_shape, d), bias_t = upload(bias, {n}, d);
      const std::string ops = "op " + yes_no(ta) + yes_no(tb);

      // Linear forward: y = x w^T + bias, c not read (beta = 0: c is poisoned).
      for (const float alpha : {1.0f, 0.5f}) {
        const Tensor c = poisoned({m, n}, d);
        backend().matmul(c, a_t, ta, b_t, tb, alpha, 0.0f, bias_t);
        const auto want = ref::matmul(m, n, k, a, ta, b, tb, alpha, 0.0, {}, &bias);
        expect_close(fetch(c), want, tolerance(d), "c " + ops + " alpha " + std::to_string(alpha) + " + bias");
      }
      // Weight gradient: f32 c += alpha op(a) op(b), no bias.
      const auto c0 = uniform(rng, static_cast<std::size_t>(m * n), -1, 1, DType::f32);
      const Tensor c = upload(c0, {m, n}, DType::f32);
      backend().matmul(c, a_t, ta, b_t, tb, 0.5f, 1.0f, Tensor());
      const auto want = ref::matmul(m, n, k, a, ta, b, tb, 0.5, 1.0, c0, nullptr);
      expect_close(fetch(c), want, tolerance(d), "f32 c " + ops + " alpha 0.5 beta 1");
    }
  }
}

void bias_grad_case(const Variant& v) {
  const DType d = v.dtype;
  const std::int64_t m = 33, n = 19;
  Rng rng(2);
  const auto dy = uniform(rng, static_cast<std::size_t>(m * n), -1, 1, d);
  const Tensor dy_t = upload(dy, {m, n}, d);
  const Tensor db = poisoned({n}, DType::f32);
  backend().bias_grad(db, dy_t, Accumulate::no);
  expect_close(fetch(db), ref::bias_grad(m, n, dy, {}, Accumulate::no), tolerance(d), "db (overwrite)");

  const auto db0 = uniform(rng, static_cast<std::size_t>(n), -1, 1, DType::f32);
  const Tensor db_acc = upload(db0, {n}, DType::f32);
  backend().bias_grad(db_acc, dy_t, Accumulate::yes);
  expect_close(fetch(db_acc), ref::bias_grad(m, n, dy, db0, Accumulate::yes), tolerance(d), "db (accumulate)");
}

}  // namespace

void add_dense_cases(CaseList& cases) {
  cases.add("matmul", {Op::matmul}, Axes::dtypes, matmul_case);
  cases.add("bias_grad", {Op::bias_grad}, Axes::dtypes, bias_grad_case);
}

}  // namespace kiln::conformance
