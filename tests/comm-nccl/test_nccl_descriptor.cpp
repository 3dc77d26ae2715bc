// The comm-nccl library as the loader sees it, without a GPU: one library exporting `nccl-ring`
// and `nccl-tree` with the same parameters, objects that describe themselves, and connect()'s
// refusals that come before any device work (not a CUDA backend, bad parameters, a local rank
// with no device).
#define BOOST_TEST_MODULE nccl_descriptor
#include <boost/test/unit_test.hpp>

#include <string>

#include <kiln/errors.hpp>
#include <kiln/plugin/registry.hpp>

#include "fake_backends.hpp"

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

kiln::plugin::Registry& registry() {
  static kiln::plugin::Registry r = [] {
    kiln::plugin::Registry reg({KILN_TEST_PLUGIN_DIR});
    reg.scan();
    return reg;
  }();
  return r;
}

kiln::ParamMap default_params(std::int64_t max_ctas = 0) {
  kiln::ParamMap p("comm");
  p.set("nccl_debug", std::string("WARN"), "default");
  p.set("max_ctas", max_ctas, "test.toml:3");
  return p;
}

std::shared_ptr<kiln::Communicator> make(const std::string& name, const kiln::ParamMap& params,
                                         kiln::RankInfo ranks = {}) {
  const auto& info = registry().require(KILN_KIND_COMMUNICATOR, name, "comm");
  kiln::PluginArgs args;
  args.params = &params;
  args.ranks = ranks;
  return registry().create_communicator(info, args);
}

std::string connect_message(kiln::Communicator& comm, kiln::Backend& backend, kiln::RankInfo ranks) {
  kiln::CommContext ctx;
  ctx.ranks = ranks;
  ctx.backend = &backend;
  try {
    comm.connect(ctx);
  } catch (const kiln::CommError& e) {
    return e.what();
  }
  return "(connected)";
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_library_exports_ring_and_tree) {
  for (const auto& failure : registry().failures()) BOOST_TEST_MESSAGE(failure.library << ": " << failure.reason);
  const auto* ring = registry().find(KILN_KIND_COMMUNICATOR, "nccl-ring");
  const auto* tree = registry().find(KILN_KIND_COMMUNICATOR, "nccl-tree");
  BOOST_REQUIRE(ring != nullptr);
  BOOST_REQUIRE(tree != nullptr);
  BOOST_TEST(ring->library == tree->library);
  BOOST_TEST(ring->library.filename().string() == "libkiln-comm-nccl.so");
  BOOST_TEST(contains(ring->summary, "NCCL_ALGO=allreduce:ring"), ring->summary);
  BOOST_TEST(contains(tree->summary, "NCCL_ALGO=allreduce:tree"), tree->summary);
  BOOST_TEST(ring->version == "0.1.0");
}

BOOST_AUTO_TEST_CASE(both_plugins_declare_the_same_parameters) {
  for (const char* name : {"nccl-ring", "nccl-tree"}) {
    const auto& info = registry().require(KILN_KIND_COMMUNICATOR, name, "comm");
    BOOST_REQUIRE(info.params.size() == 2u);
    BOOST_TEST(std::string(info.params[0].name) == "nccl_debug");
    BOOST_TEST(info.params[0].type == static_cast<std::uint32_t>(KILN_PARAM_STRING));
    BOOST_TEST(std::string(info.params[0].default_value) == "\"WARN\"");
    BOOST_TEST(std::string(info.params[0].choices) == "VERSION|WARN|INFO|TRACE");
    BOOST_TEST(std::string(info.params[1].name) == "max_ctas");
    BOOST_TEST(info.params[1].type == static_cast<std::uint32_t>(KILN_PARAM_INT));
    BOOST_TEST(std::string(info.params[1].default_value) == "0");
  }
}

BOOST_AUTO_TEST_CASE(objects_name_and_describe_their_algorithm) {
  const auto params = default_params();
  auto ring = make("nccl-ring", params);
  auto tree = make("nccl-tree", params);
  BOOST_TEST(ring->name() == "nccl-ring");
  BOOST_TEST(tree->name() == "nccl-tree");
  BOOST_TEST(contains(ring->describe(), "algo=Ring (not connected)"));
  BOOST_TEST(contains(tree->describe(), "algo=Tree (not connected)"));
  BOOST_TEST(ring->describe().rfind("nccl 2.", 0) == 0);
  BOOST_TEST(ring->accepts(kiln::MemoryKind::device));
  BOOST_TEST(!ring->accepts(kiln::MemoryKind::host));
  BOOST_TEST(!ring->accepts(kiln::MemoryKind::host_pinned));
  ring->abort();  // before connect: nothing to abort, must not crash
  ring->abort();
}

BOOST_AUTO_TEST_CASE(max_ctas_out_of_range_is_a_config_error) {
  const auto params = default_params(100);
  try {
    make("nccl-ring", params);
    BOOST_FAIL("expected a ConfigError");
  } catch (const kiln::ConfigError& e) {
    BOOST_TEST(contains(e.what(), "comm.max_ctas (test.toml:3) = 100 must be between 0 (NCCL's choice) and 64"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(a_backend_without_cuda_stream_is_refused) {
  const auto params = default_params();
  auto comm = make("nccl-tree", params);
  kiln_test::HostOnlyBackend host;
  const std::string msg = connect_message(*comm, host, {});
  BOOST_TEST(contains(msg, "nccl-tree: backend 'host-test' is not a CUDA backend (it has no CUDA communication stream)"),
             msg);
  BOOST_TEST(contains(msg, "backend.type = \"cuda\""));
}

BOOST_AUTO_TEST_CASE(several_ranks_without_a_store_are_refused) {
  const auto params = default_params();
  auto comm = make("nccl-ring", params);
  kiln_test::FakeStreamBackend backend;
  kiln::RankInfo ranks{1, 2, 1, 2, "test"};
  const std::string msg = connect_message(*comm, backend, ranks);
  BOOST_TEST(contains(msg, "rank 1 of 2 needs a rendezvous store"), msg);
}

BOOST_AUTO_TEST_CASE(the_backends_device_without_a_gpu_is_refused_naming_it) {
  // The communicator uses the backend's device (backend.device may differ from the local rank).
  // Without a GPU cudaGetDeviceCount fails; with one, device 1000 does not exist. Both name the
  // backend's device, not the local rank's.
  const auto params = default_params();
  auto comm = make("nccl-ring", params);
  kiln_test::FakeStreamBackend backend(1000);
  kiln::RankInfo ranks{0, 1, 0, 1, "test"};
  const std::string msg = connect_message(*comm, backend, ranks);
  BOOST_TEST_MESSAGE(msg);
  const bool no_driver =
      contains(msg, "cannot use CUDA device 1000 (backend 'fake-cuda's device; local rank 0): cudaGetDeviceCount failed:");
  const bool too_few = contains(msg, "local rank 0: the backend computes on CUDA device 1000, but this process sees");
  BOOST_TEST((no_driver || too_few), msg);
}

BOOST_AUTO_TEST_CASE(collectives_before_connect_are_refused) {
  const auto params = default_params();
  auto comm = make("nccl-ring", params);
  const kiln::Tensor t = kiln::host_tensor({4}, kiln::DType::f32);
  BOOST_CHECK_EXCEPTION(comm->all_reduce(t, kiln::ReduceOp::sum), kiln::CommError, [](const kiln::CommError& e) {
    return contains(e.what(), "nccl-ring: all_reduce called before connect()");
  });
  BOOST_CHECK_THROW(comm->barrier(), kiln::CommError);
}
