// The cuda backend's runtime on a real GPU, through the loaded plugin: device description,
// device/pinned/host allocation, copies in every direction, fill for every dtype (bit patterns
// checked on the host), to_device keeping the layout, events ordering the communication stream
// after the compute stream, steady-state reuse (no cudaMalloc), and the out-of-memory message.
// Labelled `gpu`; without a device it exits 77, which CTest reports as skipped, never passed.
#define BOOST_TEST_MODULE cuda_runtime_gpu
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <kiln/errors.hpp>
#include <kiln/plugin/registry.hpp>

#include "../gpu/cuda_device_skip.hpp"

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

std::shared_ptr<kiln::Backend>& backend() {
  static std::shared_ptr<kiln::Backend> b = [] {
    static kiln::ParamMap p("backend");
    p.set("device", std::int64_t{-1}, "default");
    p.set("allow_tf32", false, "default");
    p.set("nvml", true, "default");
    p.set("cache_limit_mib", std::int64_t{0}, "default");
    kiln::PluginArgs args;
    args.params = &p;
    return registry().create_backend(registry().require(KILN_KIND_BACKEND, "cuda", "backend"), args);
  }();
  return b;
}

template <class T>
std::vector<T> to_host_vector(const kiln::Tensor& device) {
  kiln::Tensor host = kiln::host_tensor(device.shape(), device.dtype());
  backend()->copy(device, host);
  std::vector<T> out(static_cast<std::size_t>(device.numel()));
  std::memcpy(out.data(), host.data(), host.bytes());
  return out;
}

double counter(const std::string& name) { return backend()->counters().at(name); }

}  // namespace

BOOST_AUTO_TEST_CASE(the_device_is_described_for_the_banner) {
  const kiln::DeviceInfo info = backend()->device();
  BOOST_TEST_MESSAGE(info.name << " | " << info.detail);
  BOOST_TEST(contains(info.name, "NVIDIA"), info.name);
  BOOST_TEST((info.memory == kiln::MemoryKind::device));
  BOOST_TEST(info.total_memory > (std::int64_t{1} << 30));
  BOOST_TEST(contains(info.detail, "compute capability "), info.detail);
  BOOST_TEST(contains(info.detail, "cuDNN 9."), info.detail);
  BOOST_TEST(backend()->name() == "cuda");
  BOOST_TEST((backend()->activation_layout(kiln::DType::bf16) == kiln::Layout::nhwc));
  BOOST_TEST((backend()->activation_layout(kiln::DType::f32) == kiln::Layout::row_major));
  BOOST_TEST(backend()->supports(kiln::Op::conv2d_forward, kiln::DType::f16));
  BOOST_TEST(!backend()->supports(kiln::Op::add, kiln::DType::i32));
}

BOOST_AUTO_TEST_CASE(streams_are_distinct_cuda_streams) {
  void* compute = backend()->native_stream(kiln::StreamKind::compute);
  void* comm = backend()->native_stream(kiln::StreamKind::communication);
  BOOST_TEST(compute != nullptr);
  BOOST_TEST(comm != nullptr);
  BOOST_TEST(compute != comm);
}

BOOST_AUTO_TEST_CASE(fill_writes_every_dtype) {
  auto& b = *backend();
  const kiln::Shape shape{3, 1001};  // odd: exercises the kernel's tail
  auto t32 = b.allocate(shape, kiln::DType::f32, kiln::MemoryKind::device);
  b.fill(t32, 1.5);
  for (float v : to_host_vector<float>(t32)) BOOST_REQUIRE(v == 1.5f);
  b.fill(t32, 0.0);
  for (float v : to_host_vector<float>(t32)) BOOST_REQUIRE(v == 0.0f);
  auto t16 = b.allocate(shape, kiln::DType::f16, kiln::MemoryKind::device);
  b.fill(t16, 1.0);
  for (std::uint16_t v : to_host_vector<std::uint16_t>(t16)) BOOST_REQUIRE(v == 0x3C00u);
  auto tb16 = b.allocate(shape, kiln::DType::bf16, kiln::MemoryKind::device);
  b.fill(tb16, -0.5);
  for (std::uint16_t v : to_host_vector<std::uint16_t>(tb16)) BOOST_REQUIRE(v == 0xBF00u);
  auto ti = b.allocate(shape, kiln::DType::i32, kiln::MemoryKind::device);
  b.fill(ti, -7);
  for (std::int32_t v : to_host_vector<std::int32_t>(ti)) BOOST_REQUIRE(v == -7);
  auto tu = b.allocate(shape, kiln::DType::u8, kiln::MemoryKind::device);
  b.fill(tu, 200);
  for (std::uint8_t v : to_host_vector<std::uint8_t>(tu)) BOOST_REQUIRE(v == 200u);
  auto td = b.allocate(shape, kiln::DType::f64, kiln::MemoryKind::device);
  b.fill(td, 2.25);
  for (double v : to_host_vector<double>(td)) BOOST_REQUIRE(v == 2.25);
  auto pinned = b.allocate(shape, kiln::DType::f32, kiln::MemoryKind::host_pinned);
  b.fill(pinned, 3.0);
  BOOST_TEST(pinned.data_as<float>()[3002] == 3.0f);
}

BOOST_AUTO_TEST_CASE(copies_round_trip_through_every_memory_kind) {
  auto& b = *backend();
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  const kiln::Shape shape{517, 333};
  auto src = kiln::host_tensor(shape, kiln::DType::f32);
  for (std::int64_t i = 0; i < src.numel(); ++i) src.data_as<float>()[i] = dist(rng);
  auto pinned = b.allocate(shape, kiln::DType::f32, kiln::MemoryKind::host_pinned);
  BOOST_TEST((pinned.memory() == kiln::MemoryKind::host_pinned));
  auto d1 = b.allocate(shape, kiln::DType::f32, kiln::MemoryKind::device);
  auto d2 = b.allocate(shape, kiln::DType::f32, kiln::MemoryKind::device);
  auto back = b.allocate(shape, kiln::DType::f32, kiln::MemoryKind::host);
  b.fill(back, -1.0);
  b.copy(src, pinned);   // host -> pinned
  b.copy(pinned, d1);    // pinned -> device (async)
  b.copy(d1, d2);        // device -> device
  b.copy(d2, back);      // device -> host: complete on return
  BOOST_TEST(std::memcmp(src.data(), back.data(), src.bytes()) == 0);

  auto nhwc = kiln::host_tensor({2, 3, 4, 5}, kiln::DType::f32).with_layout(kiln::Layout::nhwc);
  for (int i = 0; i < 120; ++i) nhwc.data_as<float>()[i] = static_cast<float>(i);
  auto on_device = b.to_device(nhwc);
  BOOST_TEST((on_device.memory() == kiln::MemoryKind::device));
  BOOST_TEST((on_device.layout() == kiln::Layout::nhwc));
  const auto values = to_host_vector<float>(on_device.with_layout(kiln::Layout::row_major));
  for (int i = 0; i < 120; ++i) BOOST_REQUIRE(values[i] == static_cast<float>(i));
  BOOST_TEST(b.to_device(on_device).data() == on_device.data());  // already on the device
  BOOST_CHECK_THROW(b.copy(d1, b.allocate({7}, kiln::DType::f32, kiln::MemoryKind::device)), kiln::BackendError);
}

BOOST_AUTO_TEST_CASE(events_order_the_communication_stream_after_compute) {
  auto& b = *backend();
  const std::int64_t n = std::int64_t{64} << 20;  // 256 MiB of f32: the fill takes a while
  auto big = b.allocate({n}, kiln::DType::f32, kiln::MemoryKind::device);
  auto copy = b.allocate({n}, kiln::DType::f32, kiln::MemoryKind::device);
  b.fill(copy, 0.0);
  b.synchronize();
  b.fill(big, 4.0);
  auto done = b.record_event(kiln::StreamKind::compute);
  b.wait_event(kiln::StreamKind::communication, *done);
  auto comm = static_cast<cudaStream_t>(b.native_stream(kiln::StreamKind::communication));
  BOOST_REQUIRE(cudaMemcpyAsync(copy.data(), big.data(), big.bytes(), cudaMemcpyDeviceToDevice, comm) == cudaSuccess);
  auto copied = b.record_event(kiln::StreamKind::communication);
  copied->synchronize();
  const auto values = to_host_vector<float>(copy);
  std::size_t wrong = 0;
  for (float v : values) wrong += v != 4.0f;
  BOOST_TEST(wrong == 0u);
  b.synchronize();
}

BOOST_AUTO_TEST_CASE(the_steady_state_never_calls_cudamalloc) {
  auto& b = *backend();
  BOOST_TEST(counter("allocator_allocated_mib") >= 4.0);  // cuBLAS's workspace came from the allocator
  auto step = [&] {
    auto a = b.allocate({256, 64, 56, 56}, kiln::DType::f16, kiln::MemoryKind::device);
    auto w = b.allocate({1000}, kiln::DType::f32, kiln::MemoryKind::device);
    auto p = b.allocate({256, 224, 224, 3}, kiln::DType::u8, kiln::MemoryKind::host_pinned);
    b.fill(a, 1.0);
  };
  step();
  b.synchronize();
  const double mallocs = counter("allocator_cuda_mallocs");
  for (int i = 0; i < 20; ++i) step();
  b.synchronize();
  BOOST_TEST(counter("allocator_cuda_mallocs") == mallocs);
  BOOST_TEST(counter("allocator_peak_mib") >= 98.0);  // the f16 activation: 98 MiB
  for (const auto& [name, value] : b.counters()) BOOST_TEST_MESSAGE(name << " = " << value);
}

BOOST_AUTO_TEST_CASE(out_of_memory_says_how_much_was_asked_and_what_to_do) {
  try {
    backend()->allocate({std::int64_t{1} << 48}, kiln::DType::f32, kiln::MemoryKind::device);  // 1 PiB
    BOOST_FAIL("expected an out-of-memory BackendError");
  } catch (const kiln::BackendError& e) {
    const std::string msg = e.what();
    BOOST_TEST_MESSAGE(msg);
    BOOST_TEST(contains(msg, "backend 'cuda', allocate f32(281474976710656): out of GPU memory asking for "
                             "1073741824.0 MiB on device 0 ("),
               msg);
    BOOST_TEST(contains(msg, "use a smaller per-rank batch (data.batch_size)"), msg);
  }
  // The backend is still usable afterwards.
  auto t = backend()->allocate({4}, kiln::DType::f32, kiln::MemoryKind::device);
  backend()->fill(t, 2.0);
  BOOST_TEST(to_host_vector<float>(t)[3] == 2.0f);
}

int main(int argc, char** argv) {
  if (const int skip = kiln::test::skip_without_cuda_device("the cuda runtime gpu test")) return skip;
  const int rc = boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
  backend().reset();
  return rc;
}
