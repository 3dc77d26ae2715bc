// The `bf16` plugin on the real cpu backend: check_backend's native-bf16 rule (real device and a
// pretend CPU without avx512_bf16/AMX), bf16 compute copies equal to the rounded masters (one
// cast per arena), no loss scaling, the optional finite check naming the parameter, and no state (an fp16
// checkpoint's loss-scale state is dropped on resume).
#include <boost/test/unit_test.hpp>

#include <limits>

#include "kiln/errors.hpp"
#include "precision_fixture.hpp"

using kiln::DType;
using kiln::Op;
using kiln::StepDecision;
namespace t = kiln::test;

namespace {

kiln::DeviceInfo old_cpu() {
  kiln::DeviceInfo d;
  d.name = "Intel Xeon Gold 6130";
  d.detail = "oneDNN 2.6.0, ISA avx512_core, 2 OpenMP threads";
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bf16_policy)

BOOST_AUTO_TEST_CASE(describes_itself) {
  const auto p = t::make_policy("bf16", "");
  BOOST_TEST(p->name() == "bf16");
  BOOST_TEST((p->param_dtype() == DType::f32));
  BOOST_TEST((p->compute_dtype() == DType::bf16));
  BOOST_TEST(p->loss_scale() == 1.0f);
  BOOST_TEST(p->metrics().empty());
  BOOST_TEST(p->state().empty());
}

BOOST_AUTO_TEST_CASE(the_real_cpu_is_accepted_exactly_when_it_has_native_bf16) {
  const auto p = t::make_policy("bf16", "");
  const kiln::DeviceInfo d = t::cpu().device();
  const bool native = d.name.find("avx512_bf16") != std::string::npos ||
                      d.detail.find("avx512_core_bf16") != std::string::npos ||
                      d.detail.find("amx") != std::string::npos;
  BOOST_TEST_MESSAGE("cpu device: " << d.name << " (" << d.detail << "), native bf16: " << native);
  if (native) {
    BOOST_CHECK_NO_THROW(p->check_backend(t::cpu()));
  } else {
    BOOST_CHECK_THROW(p->check_backend(t::cpu()), kiln::UnsupportedError);
  }
}

BOOST_AUTO_TEST_CASE(a_cpu_without_native_bf16_is_refused_unless_emulation_is_allowed) {
  t::PolicyWatchBackend backend(t::cpu());
  backend.device_override = old_cpu();
  const auto p = t::make_policy("bf16", "");
  BOOST_TEST(t::error_text<kiln::UnsupportedError>([&] { p->check_backend(backend); }) ==
             "backend 'cpu' runs on 'Intel Xeon Gold 6130' (oneDNN 2.6.0, ISA avx512_core, 2 OpenMP threads), "
             "which has no native bf16 arithmetic (avx512_bf16 or AMX); bf16 would be emulated and slower than "
             "f32. Use precision.type = \"fp32\", or set precision.allow_emulated = true to accept the emulation");
  const auto emulated = t::make_policy("bf16", "allow_emulated = true");
  BOOST_CHECK_NO_THROW(emulated->check_backend(backend));
  // An AMX machine is native even when the name does not say avx512_bf16.
  kiln::DeviceInfo amx = old_cpu();
  amx.detail = "oneDNN 2.6.0, ISA avx512_core_amx, 2 OpenMP threads";
  backend.device_override = amx;
  BOOST_CHECK_NO_THROW(p->check_backend(backend));
  // A device backend (GPU) is trusted on supports() alone.
  kiln::DeviceInfo gpu = old_cpu();
  gpu.memory = kiln::MemoryKind::device;
  backend.device_override = gpu;
  BOOST_CHECK_NO_THROW(p->check_backend(backend));
}

BOOST_AUTO_TEST_CASE(before_forward_casts_every_master_to_bf16_in_one_op) {
  const auto store = t::make_store(DType::bf16);
  const auto params = store->parameters();
  const auto p = t::make_policy("bf16", "");
  t::PolicyWatchBackend backend(t::cpu());
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::vector<double> v(static_cast<std::size_t>(params[i].value.numel()));
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = (static_cast<double>(k) - 3.0) / 7.0 + 100.0 * static_cast<double>(i);
    t::write(params[i].value, v);
  }
  p->before_forward(backend, params);
  BOOST_TEST(backend.casts == 1);
  for (const auto& param : params) {
    const auto master = t::read(param.value);
    const auto compute = t::read(param.compute);
    for (std::size_t k = 0; k < master.size(); ++k) {
      BOOST_TEST(compute[k] == t::round_to_bits(master[k], 8), param.name << "[" << k << "]");
    }
  }
}

BOOST_AUTO_TEST_CASE(gradients_are_applied_unscaled_and_unchecked_by_default) {
  const auto store = t::make_store(DType::bf16);
  const auto params = store->parameters();
  const auto p = t::make_policy("bf16", "");
  t::PolicyWatchBackend backend(t::cpu());
  t::write(params[1].grad, {0.5, 1, std::numeric_limits<double>::infinity(), 2, 3, 4, 5});
  BOOST_TEST((p->after_allreduce(backend, params) == StepDecision::apply));
  BOOST_TEST(backend.finite_checks == 0);
  BOOST_TEST(backend.scales == 0);
  BOOST_TEST(t::read(params[1].grad)[0] == 0.5);
}

BOOST_AUTO_TEST_CASE(check_finite_names_the_parameter) {
  const auto store = t::make_store(DType::bf16);
  const auto params = store->parameters();
  const auto p = t::make_policy("bf16", "check_finite = true");
  t::PolicyWatchBackend backend(t::cpu());
  BOOST_TEST((p->after_allreduce(backend, params) == StepDecision::apply));
  BOOST_TEST(backend.finite_checks == 1);  // one check over the whole gradient arena
  t::write(params[1].grad, {0.5, 1, std::numeric_limits<double>::quiet_NaN(), 2, 3, 4, 5});
  BOOST_TEST(t::error_text<kiln::NumericError>([&] { p->after_allreduce(backend, params); }) ==
             "gradient of 'b' is not finite (inf or NaN) after the all-reduce; lower the learning rate or "
             "check the input data");
}

BOOST_AUTO_TEST_CASE(fp16_state_is_dropped_on_resume) {
  const auto p = t::make_policy("bf16", "");
  BOOST_CHECK_NO_THROW(p->load_state({{"scale", 65536.0}, {"steps", 12.0}}));
  BOOST_TEST(p->state().empty());
  BOOST_TEST(p->loss_scale() == 1.0f);
}

BOOST_AUTO_TEST_SUITE_END()
