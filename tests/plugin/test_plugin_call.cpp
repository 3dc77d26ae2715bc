// Locating exceptions that escape plugin calls: the message format, types kept or made
// PluginError, no double prefix, core errors passing unchanged, and the decorators that
// `kiln train` puts around plugin objects (fake plugins here; tests/integration runs real ones).
#include <boost/test/unit_test.hpp>

#include <stdexcept>

#include "kiln/errors.hpp"
#include "kiln/plugin/guarded.hpp"
#include "kiln/plugin/plugin_call.hpp"
#include "test_helpers.hpp"

using kiln::plugin::PluginOrigin;
using kiln::plugin::plugin_call;
using kiln_test::message_of;

namespace {

const PluginOrigin kCsv{"data", "csv", "libkiln-data-csv.so"};
const PluginOrigin kCpu{"backend", "cpu", "libkiln-backend-cpu.so"};

class FakeSource final : public kiln::DataSource {
 public:
  std::string_view name() const override { return "csv"; }
  kiln::DatasetInfo describe() const override { throw kiln::DataError("rows.csv: no header"); }
  void read(std::int64_t, std::uint64_t, const kiln::SampleSlot&) const override {
    throw std::out_of_range("vector::at");
  }
};

// A model whose backward() reports one gradient, so the callback's own errors can be tested.
class FakeModel final : public kiln::Model {
 public:
  std::string_view name() const override { return "tiny"; }
  kiln::InputSpec input_spec() const override { return {}; }
  void build(const kiln::ModelBuildContext&) override {}
  std::span<const kiln::Parameter> parameters() const override { return {}; }
  kiln::Tensor forward(const kiln::Tensor&, kiln::Mode, std::uint64_t) override { throw 3.5; }
  void backward(const kiln::Tensor&, const kiln::GradReadyFn& ready) override { ready(0); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(plugin_call_errors)

BOOST_AUTO_TEST_CASE(std_exception_becomes_a_located_plugin_error) {
  BOOST_TEST(message_of<kiln::PluginError>([] {
               plugin_call(kCsv, "read()", [] { throw std::runtime_error("bad row"); });
             }) == "data plugin 'csv' (libkiln-data-csv.so), read(): bad row");
}

BOOST_AUTO_TEST_CASE(kiln_error_keeps_its_type) {
  BOOST_TEST(message_of<kiln::ConfigError>([] {
               plugin_call(kCsv, "describe()", [] { throw kiln::ConfigError("data.delimiter is empty"); });
             }) == "data plugin 'csv' (libkiln-data-csv.so), describe(): data.delimiter is empty");
  BOOST_TEST(message_of<kiln::UnsupportedError>([] {
               plugin_call(kCpu, "matmul()", [] { throw kiln::UnsupportedError("no f16 matmul"); });
             }) == "backend plugin 'cpu' (libkiln-backend-cpu.so), matmul(): no f16 matmul");
}

BOOST_AUTO_TEST_CASE(any_other_type_is_named_in_a_plugin_error) {
  BOOST_TEST(message_of<kiln::PluginError>([] { plugin_call(kCsv, "read()", [] { throw 7; }); }) ==
             "data plugin 'csv' (libkiln-data-csv.so), read(): threw an exception of type 'int', which is not "
             "a std::exception (plugins must throw kiln::Error or std::exception; report this to the plugin's "
             "authors)");
}

BOOST_AUTO_TEST_CASE(a_located_error_is_not_located_twice) {
  const std::string msg = message_of<kiln::DataError>([] {
    plugin_call(kCpu, "outer()", [] {
      plugin_call(kCsv, "read()", [] { throw kiln::DataError("rows.csv:3:1: empty field"); });
    });
  });
  BOOST_TEST(msg == "data plugin 'csv' (libkiln-data-csv.so), read(): rows.csv:3:1: empty field");
}

BOOST_AUTO_TEST_CASE(plugin_or_core_passes_the_cores_own_errors) {
  auto call = [](auto thrower) {
    try {
      thrower();
    } catch (...) {
      kiln::plugin::rethrow_from_plugin_or_core(kCpu, "a call from the trainer");
    }
  };
  BOOST_TEST(message_of<kiln::IoError>([&] { call([] { throw kiln::IoError("disk full"); }); }) == "disk full");
  BOOST_TEST(message_of<kiln::BackendError>([&] { call([] { throw kiln::BackendError("out of memory"); }); }) ==
             "backend plugin 'cpu' (libkiln-backend-cpu.so), a call from the trainer: out of memory");
  BOOST_TEST(message_of<kiln::PluginError>([&] { call([] { throw std::bad_alloc(); }); }) ==
             "backend plugin 'cpu' (libkiln-backend-cpu.so), a call from the trainer: ran out of host memory "
             "(std::bad_alloc); reduce the batch size or the model");
}

BOOST_AUTO_TEST_CASE(guarded_data_source_names_each_method) {
  const auto source = kiln::plugin::guarded(std::make_shared<FakeSource>(), kCsv);
  BOOST_TEST(message_of<kiln::DataError>([&] { source->describe(); }) ==
             "data plugin 'csv' (libkiln-data-csv.so), describe(): rows.csv: no header");
  BOOST_TEST(message_of<kiln::PluginError>([&] { source->read(0, 0, {}); }) ==
             "data plugin 'csv' (libkiln-data-csv.so), read(): vector::at");
  BOOST_TEST(source->name() == "csv");
}

BOOST_AUTO_TEST_CASE(guarded_model_does_not_blame_the_model_for_the_cores_callback) {
  const PluginOrigin tiny{"model", "tiny", "libkiln-model-tiny.so"};
  const auto model = kiln::plugin::guarded(std::make_shared<FakeModel>(), tiny);
  BOOST_TEST(message_of<kiln::PluginError>([&] { model->forward({}, kiln::Mode::train, 0); }) ==
             "model plugin 'tiny' (libkiln-model-tiny.so), forward(): threw an exception of type 'double', which "
             "is not a std::exception (plugins must throw kiln::Error or std::exception; report this to the "
             "plugin's authors)");
  const auto from_core = [](std::size_t) { throw kiln::CommError("all_reduce #3 timed out; rank 1 missing"); };
  BOOST_TEST(message_of<kiln::CommError>([&] { model->backward({}, from_core); }) ==
             "all_reduce #3 timed out; rank 1 missing");
}

BOOST_AUTO_TEST_SUITE_END()
