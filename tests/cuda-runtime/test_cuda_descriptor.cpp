// The cuda backend as the loader sees it: the descriptor and its parameters, parameter refusals
// that come before any device work, and — on a machine without a usable GPU, like CI — the
// construction error that tells the user to run on a GPU or pick the cpu backend. On a machine
// with a GPU the last case instead asks for a device that does not exist.
#define BOOST_TEST_MODULE cuda_descriptor
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <string>

#include <kiln/errors.hpp>
#include <kiln/plugin/registry.hpp>

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

kiln::ParamMap params(std::int64_t device = -1, std::int64_t cache_limit_mib = 0) {
  kiln::ParamMap p("backend");
  p.set("device", device, "run.toml:4");
  p.set("allow_tf32", false, "default");
  p.set("nvml", true, "default");
  p.set("cache_limit_mib", cache_limit_mib, "run.toml:5");
  return p;
}

std::shared_ptr<kiln::Backend> make(const kiln::ParamMap& p, kiln::RankInfo ranks = {}) {
  const auto& info = registry().require(KILN_KIND_BACKEND, "cuda", "backend");
  kiln::PluginArgs args;
  args.params = &p;
  args.ranks = ranks;
  return registry().create_backend(info, args);
}

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_library_exports_cuda_with_its_parameters) {
  for (const auto& failure : registry().failures()) BOOST_TEST_MESSAGE(failure.library << ": " << failure.reason);
  const auto* info = registry().find(KILN_KIND_BACKEND, "cuda");
  BOOST_REQUIRE(info != nullptr);
  BOOST_TEST(info->library.filename().string() == "libkiln-backend-cuda.so");
  BOOST_TEST(info->version == "0.1.0");
  BOOST_REQUIRE(info->params.size() == 9u);
  BOOST_TEST(std::string(info->params[0].name) == "device");
  BOOST_TEST(std::string(info->params[0].default_value) == "-1");
  BOOST_TEST(std::string(info->params[1].name) == "allow_tf32");
  BOOST_TEST(info->params[1].type == static_cast<std::uint32_t>(KILN_PARAM_BOOL));
  BOOST_TEST(std::string(info->params[1].default_value) == "false");
  BOOST_TEST(std::string(info->params[2].name) == "nvml");
  BOOST_TEST(std::string(info->params[2].default_value) == "true");
  BOOST_TEST(std::string(info->params[3].name) == "cache_limit_mib");
  BOOST_TEST(std::string(info->params[3].default_value) == "0");
  BOOST_TEST(std::string(info->params[4].name) == "cudnn_benchmark");
  BOOST_TEST(info->params[4].type == static_cast<std::uint32_t>(KILN_PARAM_BOOL));
  BOOST_TEST(std::string(info->params[4].default_value) == "false");
  BOOST_TEST(std::string(info->params[5].name) == "conv_filter_reuse");
  BOOST_TEST(info->params[5].type == static_cast<std::uint32_t>(KILN_PARAM_BOOL));
  BOOST_TEST(std::string(info->params[5].default_value) == "true");
  BOOST_TEST(std::string(info->params[6].name) == "activation_layout");
  BOOST_TEST(info->params[6].type == static_cast<std::uint32_t>(KILN_PARAM_STRING));
  BOOST_TEST(std::string(info->params[6].default_value) == "\"auto\"");
  BOOST_TEST(std::string(info->params[6].choices) == "auto|nhwc|nchw");
  BOOST_TEST(std::string(info->params[7].name) == "conv_transforms");
  BOOST_TEST(info->params[7].type == static_cast<std::uint32_t>(KILN_PARAM_BOOL));
  BOOST_TEST(std::string(info->params[7].default_value) == "true");
  BOOST_TEST(std::string(info->params[8].name) == "conv_workspace_mib");
  BOOST_TEST(info->params[8].type == static_cast<std::uint32_t>(KILN_PARAM_INT));
  BOOST_TEST(std::string(info->params[8].default_value) == "1024");
  BOOST_TEST(std::string(info->params[8].min) == "0");
  BOOST_TEST(std::string(info->params[8].max) == "1048576");
}

BOOST_AUTO_TEST_CASE(bad_parameters_are_config_errors_before_any_device_work) {
  try {
    make(params(-2));
    BOOST_FAIL("expected a ConfigError");
  } catch (const kiln::ConfigError& e) {
    BOOST_TEST(contains(e.what(), "backend.device (run.toml:4) = -2 is not a device; use -1"), e.what());
  }
  try {
    make(params(-1, -5));
    BOOST_FAIL("expected a ConfigError");
  } catch (const kiln::ConfigError& e) {
    BOOST_TEST(contains(e.what(), "backend.cache_limit_mib (run.toml:5) = -5 is negative"), e.what());
  }
  // The config's schema check refuses an unknown choice or an out-of-range size first; the
  // backend's own check is the backstop for a ParamMap built another way.
  for (const std::int64_t mib : {std::int64_t{-1}, std::int64_t{1048577}}) {
    kiln::ParamMap bad_workspace = params();
    bad_workspace.set("conv_workspace_mib", mib, "run.toml:7");
    try {
      make(bad_workspace);
      BOOST_FAIL("expected a ConfigError");
    } catch (const kiln::ConfigError& e) {
      BOOST_TEST(contains(e.what(), "backend.conv_workspace_mib (run.toml:7) = " + std::to_string(mib) +
                                        " is not a workspace size; use 0 to 1048576 MiB"),
                 e.what());
    }
  }
  kiln::ParamMap bad_layout = params();
  bad_layout.set("activation_layout", std::string("nchwc"), "run.toml:6");
  try {
    make(bad_layout);
    BOOST_FAIL("expected a ConfigError");
  } catch (const kiln::ConfigError& e) {
    BOOST_TEST(contains(e.what(), "backend.activation_layout (run.toml:6) = \"nchwc\" is not an activation layout; "
                                  "use \"auto\", \"nhwc\" or \"nchw\""),
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(without_a_usable_gpu_construction_says_what_to_do) {
  if (have_gpu()) {
    BOOST_TEST_MESSAGE("a GPU is present: checking the missing-device message instead");
    try {
      make(params(1000));
      BOOST_FAIL("expected a BackendError");
    } catch (const kiln::BackendError& e) {
      BOOST_TEST(contains(e.what(), "backend 'cuda': backend.device = 1000 asks for CUDA device 1000, but this node has"),
                 e.what());
    }
    return;
  }
  try {
    make(params(), kiln::RankInfo{3, 8, 3, 8, "test"});
    BOOST_FAIL("expected a BackendError");
  } catch (const kiln::UnsupportedError& e) {
    BOOST_FAIL("an UnsupportedError is the wrong type: " << e.what());
  } catch (const kiln::BackendError& e) {
    const std::string msg = e.what();
    BOOST_TEST_MESSAGE(msg);
    BOOST_TEST(contains(msg, "backend plugin 'cuda' ("), msg);  // the registry's prefix
    BOOST_TEST(contains(msg, "backend 'cuda': no usable CUDA device (cudaGetDeviceCount: CUDA driver version is "
                             "insufficient for CUDA runtime version); run on a machine with an NVIDIA GPU or "
                             "use backend.type = \"cpu\""),
               msg);
  }
}
