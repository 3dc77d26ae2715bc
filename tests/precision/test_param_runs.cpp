// Parameter runs: one flat view per arena, split where storages or element layouts differ, and
// aliased compute copies (f32 compute) left out of the casts.
#include <boost/test/unit_test.hpp>

#include "kiln/sdk/param_runs.hpp"
#include "precision_fixture.hpp"

using kiln::DType;
using kiln::Parameter;

BOOST_AUTO_TEST_SUITE(param_runs)

BOOST_AUTO_TEST_CASE(one_run_per_parameter_store_arena) {
  const auto store = kiln::test::make_store(DType::f16);
  const auto params = store->parameters();
  const auto casts = kiln::sdk::cast_runs(params);
  BOOST_TEST_REQUIRE(casts.size() == 1u);
  // a: 15 elements padded to 16, b: 7 padded to 16, c: 4 -> 16 + 16 + 4.
  BOOST_TEST(casts[0].value.numel() == 36);
  BOOST_TEST(casts[0].compute.numel() == 36);
  BOOST_TEST((casts[0].compute.dtype() == DType::f16));
  BOOST_TEST(casts[0].value.data() == params[0].value.data());
  BOOST_TEST(casts[0].compute.data() == params[0].compute.data());
  const auto grads = kiln::sdk::grad_runs(params);
  BOOST_TEST_REQUIRE(grads.size() == 1u);
  BOOST_TEST(grads[0].numel() == 36);
  BOOST_TEST(grads[0].data() == params[0].grad.data());
}

BOOST_AUTO_TEST_CASE(aliased_compute_copies_are_not_cast) {
  const auto store = kiln::test::make_store(DType::f32);
  BOOST_TEST(kiln::sdk::cast_runs(store->parameters()).empty());
  BOOST_TEST(kiln::sdk::grad_runs(store->parameters()).size() == 1u);
}

BOOST_AUTO_TEST_CASE(runs_split_at_storage_and_order_changes) {
  const auto s1 = kiln::test::make_store(DType::bf16);
  const auto s2 = kiln::test::make_store(DType::bf16);
  // s1.a, s1.b, s2.a, s1.c: three runs (the storage changes twice).
  std::vector<Parameter> mixed{(*s1)[0], (*s1)[1], (*s2)[0], (*s1)[2]};
  BOOST_TEST(kiln::sdk::cast_runs(mixed).size() == 3u);
  BOOST_TEST(kiln::sdk::grad_runs(mixed).size() == 3u);
  // Backwards order in one arena: every parameter is its own run.
  std::vector<Parameter> reversed{(*s1)[2], (*s1)[1], (*s1)[0]};
  const auto runs = kiln::sdk::cast_runs(reversed);
  BOOST_TEST_REQUIRE(runs.size() == 3u);
  BOOST_TEST(runs[0].value.numel() == 4);
  BOOST_TEST(runs[1].value.numel() == 7);
  BOOST_TEST(runs[2].value.numel() == 15);
  // Compute copies at a different element distance than the masters (a skipped parameter in
  // the compute arena only) split the run.
  std::vector<Parameter> shifted{(*s1)[0], (*s1)[1]};
  shifted[1].compute = (*s1)[2].compute;
  BOOST_TEST(kiln::sdk::cast_runs(shifted).size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
