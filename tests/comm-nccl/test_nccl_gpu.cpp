// nccl-ring and nccl-tree on a real GPU with one rank (NCCL refuses two ranks on one device):
// every dtype and op at counts 0, 1, odd and multi-megabyte, broadcast, all_gather, barrier,
// host memory refused, and initialisation of a world whose peer never comes timing out with
// the communicator aborted. Labelled `gpu`; without a device it exits 77, which CTest reports
// as skipped (SKIP_RETURN_CODE), never as passed.
#define BOOST_TEST_MODULE nccl_gpu
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <kiln/dist/memory_store.hpp>
#include <kiln/errors.hpp>
#include <kiln/plugin/registry.hpp>

#include "fake_backends.hpp"
#include "../gpu/cuda_device_skip.hpp"

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// Device memory and one stream for both kinds (the communicator only needs a CUDA stream).
class CudaTestBackend final : public kiln_test::TestBackendBase {
 public:
  CudaTestBackend() {
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CudaTestBackend() override { cudaStreamDestroy(stream_); }
  std::string_view name() const override { return "cuda-test"; }
  kiln::DeviceInfo device() const override { return {"test GPU", kiln::MemoryKind::device, 0, 0, 1, ""}; }
  kiln::Tensor allocate(const kiln::Shape& shape, kiln::DType dtype, kiln::MemoryKind where) override {
    if (where != kiln::MemoryKind::device) return kiln::host_tensor(shape, dtype);
    const std::size_t bytes = std::max<std::size_t>(1, kiln::shape_numel(shape) * kiln::dtype_size(dtype));
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    auto storage = std::make_shared<kiln::Storage>(p, bytes, kiln::MemoryKind::device, [](void* q) { cudaFree(q); });
    return kiln::Tensor(storage, shape, dtype);
  }
  void copy(const kiln::Tensor& src, const kiln::Tensor& dst) override {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    check(cudaMemcpy(dst.data(), src.data(), src.bytes(), cudaMemcpyDefault), "cudaMemcpy");
  }
  void fill(const kiln::Tensor& t, double value) override {
    std::vector<float> host(static_cast<std::size_t>(t.numel()), static_cast<float>(value));
    check(cudaMemcpy(t.data(), host.data(), t.bytes(), cudaMemcpyDefault), "cudaMemcpy fill");
  }
  void synchronize() override { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
  void* native_stream(kiln::StreamKind) override { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

kiln::plugin::Registry& registry() {
  static kiln::plugin::Registry r = [] {
    kiln::plugin::Registry reg({KILN_TEST_PLUGIN_DIR});
    reg.scan();
    return reg;
  }();
  return r;
}

struct Fixture {
  kiln::ParamMap params{"comm"};
  CudaTestBackend backend;
  kiln::dist::MemoryStore store{1};
  Fixture() {
    params.set("nccl_debug", std::string("WARN"), "default");
    params.set("max_ctas", std::int64_t{0}, "default");
  }
  std::shared_ptr<kiln::Communicator> connect(const std::string& name, kiln::RankInfo ranks = {},
                                              std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    kiln::PluginArgs args;
    args.params = &params;
    args.ranks = ranks;
    auto comm = registry().create_communicator(registry().require(KILN_KIND_COMMUNICATOR, name, "comm"), args);
    kiln::CommContext ctx;
    ctx.ranks = ranks;
    ctx.store = &store;
    ctx.backend = &backend;
    ctx.timeout = timeout;
    comm->connect(ctx);
    return comm;
  }
};

/// Random values in [-2, 2] in `dtype`, as raw bytes, plus their exact values as doubles.
std::vector<std::uint8_t> random_bytes(kiln::DType dtype, std::int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> quarter(-8, 8);  // multiples of 0.25: exact in every dtype
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n) * kiln::dtype_size(dtype));
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(quarter(rng)) * 0.25f;
    switch (dtype) {
      case kiln::DType::f32: std::memcpy(&bytes[i * 4], &v, 4); break;
      case kiln::DType::f64: { const double d = v; std::memcpy(&bytes[i * 8], &d, 8); break; }
      case kiln::DType::bf16: {
        std::uint32_t u;
        std::memcpy(&u, &v, 4);
        const std::uint16_t h = static_cast<std::uint16_t>(u >> 16);  // exact for these values
        std::memcpy(&bytes[i * 2], &h, 2);
        break;
      }
      case kiln::DType::f16: {
        // v = k/4 with |k| <= 8: sign, exponent and a 10-bit mantissa built directly.
        std::uint16_t h = 0;
        if (v != 0.0f) {
          int e = 0;
          const float m = std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
          const int mantissa = static_cast<int>((m * 2.0f - 1.0f) * 1024.0f);
          h = static_cast<std::uint16_t>(((e - 1 + 15) << 10) | mantissa);
          if (v < 0) h |= 0x8000;
        }
        std::memcpy(&bytes[i * 2], &h, 2);
        break;
      }
      default: break;
    }
  }
  return bytes;
}

/// Copies `bytes` into device tensor `t` and waits for the copy to land: cudaMemcpy from pageable
/// memory may return before its DMA is done, and the legacy default stream it runs on does not
/// order the backend's and NCCL's non-blocking streams, so a collective could read `t` early (an
/// all_gather on an H200 once returned stale bytes, 2026-12-04).
void upload(kiln::Tensor& t, const std::vector<std::uint8_t>& bytes) {
  check(cudaMemcpy(t.data(), bytes.data(), bytes.size(), cudaMemcpyDefault), "upload");
  check(cudaDeviceSynchronize(), "synchronize after upload");
}

}  // namespace

BOOST_AUTO_TEST_CASE(world_one_collectives_every_dtype_op_and_count) {
  for (const char* name : {"nccl-ring", "nccl-tree"}) {
    Fixture f;
    auto comm = f.connect(name);
    BOOST_TEST(contains(comm->describe(), std::string("algo=") + (name == std::string("nccl-ring") ? "Ring" : "Tree") +
                                              " on cuda:0"),
               comm->describe());
    std::mt19937 rng(7);
    for (kiln::DType dtype : {kiln::DType::f32, kiln::DType::f16, kiln::DType::bf16, kiln::DType::f64}) {
      for (kiln::ReduceOp op : {kiln::ReduceOp::sum, kiln::ReduceOp::avg, kiln::ReduceOp::max, kiln::ReduceOp::min}) {
        for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1001}, std::int64_t{1} << 21}) {
          const auto want = random_bytes(dtype, count, rng);
          kiln::Tensor t = f.backend.allocate({count}, dtype, kiln::MemoryKind::device);
          if (count > 0) upload(t, want);
          comm->all_reduce(t, op)->wait();
          std::vector<std::uint8_t> got(want.size());
          if (count > 0) check(cudaMemcpy(got.data(), t.data(), got.size(), cudaMemcpyDefault), "download");
          // One rank: every op is the identity, bit for bit.
          BOOST_TEST((got == want), name << " " << kiln::dtype_name(dtype) << " op " << static_cast<int>(op)
                                         << " count " << count);
        }
      }
    }
    // broadcast from root 0 and all_gather are the identity too; barrier returns.
    const auto bytes = random_bytes(kiln::DType::f32, 4097, rng);
    kiln::Tensor b = f.backend.allocate({4097}, kiln::DType::f32, kiln::MemoryKind::device);
    upload(b, bytes);
    comm->broadcast(b, 0)->wait();
    kiln::Tensor g = f.backend.allocate({4097}, kiln::DType::f32, kiln::MemoryKind::device);
    comm->all_gather(g, b)->wait();
    std::vector<std::uint8_t> got(bytes.size());
    check(cudaMemcpy(got.data(), g.data(), got.size(), cudaMemcpyDefault), "download");
    BOOST_TEST((got == bytes), name << " broadcast + all_gather");
    comm->barrier();
    BOOST_CHECK_THROW(comm->broadcast(b, 1), kiln::CommError);
  }
}

// Completion events come from a pool (plugins/comm-nccl/handle_pool.hpp): many collectives in
// flight at once each get their own event and complete, waits in any order work, the pool's events
// are reused across rounds, and a Work dropped after its communicator still gives its event back.
BOOST_AUTO_TEST_CASE(pooled_completion_events_in_flight_and_after_the_communicator) {
  Fixture f;
  auto comm = f.connect("nccl-ring");
  std::mt19937 rng(9);
  const std::int64_t count = 1 << 16;
  std::vector<kiln::Tensor> ins, outs;
  std::vector<std::vector<std::uint8_t>> want;
  for (int i = 0; i < 8; ++i) {
    want.push_back(random_bytes(kiln::DType::f32, count, rng));
    ins.push_back(f.backend.allocate({count}, kiln::DType::f32, kiln::MemoryKind::device));
    outs.push_back(f.backend.allocate({count}, kiln::DType::f32, kiln::MemoryKind::device));
    upload(ins.back(), want.back());
  }
  for (int round = 0; round < 3; ++round) {
    std::vector<std::unique_ptr<kiln::Work>> in_flight;
    for (int i = 0; i < 8; ++i) {
      check(cudaMemset(outs[static_cast<std::size_t>(i)].data(), 0xff, outs[static_cast<std::size_t>(i)].bytes()),
            "poison");
      check(cudaDeviceSynchronize(), "synchronize after poison");  // as upload(): the memset is async
      in_flight.push_back(comm->all_gather(outs[static_cast<std::size_t>(i)], ins[static_cast<std::size_t>(i)]));
    }
    for (int i = 7; i >= 0; --i) in_flight[static_cast<std::size_t>(i)]->wait();  // in reverse order
    for (std::size_t i = 0; i < 8; ++i) {
      std::vector<std::uint8_t> got(want[i].size());
      check(cudaMemcpy(got.data(), outs[i].data(), got.size(), cudaMemcpyDefault), "download");
      BOOST_TEST((got == want[i]), "round " << round << " collective " << i);
    }
  }
  std::unique_ptr<kiln::Work> last = comm->all_gather(outs[0], ins[0]);
  last->wait();
  comm.reset();  // the communicator goes first; the Work still holds a pooled event
  last.reset();  // gives it back to the pool it keeps alive, which then destroys its events
  check(cudaGetLastError(), "after the pool went");
}

BOOST_AUTO_TEST_CASE(host_memory_is_refused_naming_the_op) {
  Fixture f;
  auto comm = f.connect("nccl-ring");
  const kiln::Tensor h = kiln::host_tensor({16}, kiln::DType::f32);
  try {
    comm->all_reduce(h, kiln::ReduceOp::sum);
    BOOST_FAIL("expected a CommError");
  } catch (const kiln::CommError& e) {
    BOOST_TEST(contains(e.what(), "nccl-ring all_reduce #1 (f32 x 16, sum): the input tensor f32(16) is in host memory"),
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(nccl_algo_is_restored_after_connect) {
  ::setenv("NCCL_ALGO", "CollnetDirect", 1);
  {
    Fixture f;
    auto comm = f.connect("nccl-tree");
    BOOST_TEST(std::string(std::getenv("NCCL_ALGO")) == "CollnetDirect");
  }
  ::unsetenv("NCCL_ALGO");
}

BOOST_AUTO_TEST_CASE(init_times_out_when_a_peer_never_joins) {
  Fixture f;
  kiln::RankInfo ranks{0, 2, 0, 1, "test"};  // rank 1 is never started
  try {
    f.connect("nccl-ring", ranks, std::chrono::seconds(3));
    BOOST_FAIL("expected a CommError");
  } catch (const kiln::CommError& e) {
    BOOST_TEST(contains(e.what(), "NCCL initialisation did not finish within 3000 ms on rank 0 of 2"), e.what());
  }
}

int main(int argc, char** argv) {
  if (const int skip = kiln::test::skip_without_cuda_device("the nccl gpu test")) return skip;
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
