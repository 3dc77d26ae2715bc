// The cpu backend's non-op surface: parameters, DeviceInfo, supports(), memory, events, and the
// base-class refusal for dtypes it does not implement.
#include <boost/test/unit_test.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

BOOST_AUTO_TEST_SUITE(backend)

BOOST_AUTO_TEST_CASE(threads_parameter) {
  ParamMap one("backend");
  one.set("threads", std::int64_t{1}, "run.toml:3");
  BOOST_TEST(test::make_cpu_backend(one)->device().threads == 1);

  ParamMap automatic("backend");
  automatic.set("threads", std::int64_t{0}, "default");
  RankInfo two_local;
  two_local.local_world_size = 2;
  BOOST_TEST(test::make_cpu_backend(automatic, two_local)->device().threads ==
             std::max(1, omp_get_num_procs() / 2));
  BOOST_TEST(test::make_cpu_backend(automatic)->device().threads == omp_get_num_procs());

  ParamMap negative("backend");
  negative.set("threads", std::int64_t{-2}, "run.toml:3");
  const std::string msg =
      test::error_text<ConfigError>([&] { test::make_cpu_backend(negative); });
  BOOST_TEST(msg.find("backend.threads") != std::string::npos, msg);
  BOOST_TEST(msg.find("run.toml:3") != std::string::npos, msg);
  BOOST_TEST(msg.find("-2 is negative") != std::string::npos, msg);
}

// threads = 0 takes OMP_NUM_THREADS where it is a count; a value that is not is ignored and taken
// out of the environment before anything calls into OpenMP (LLVM's libomp, in clang builds,
// reads it lazily and mishandles such values: cpu_backend.cpp, omp_num_threads_env).
BOOST_AUTO_TEST_CASE(omp_num_threads_is_used_when_a_count_and_removed_when_not) {
  ParamMap automatic("backend");
  automatic.set("threads", std::int64_t{0}, "default");

  ::setenv("OMP_NUM_THREADS", "1,1", /*overwrite=*/1);
  BOOST_TEST(test::make_cpu_backend(automatic)->device().threads == 1);
  const char* count = std::getenv("OMP_NUM_THREADS");
  BOOST_TEST((count != nullptr && std::string(count) == "1,1"), "a count stays as the user set it");

  ::setenv("OMP_NUM_THREADS", "many", /*overwrite=*/1);
  BOOST_TEST(test::make_cpu_backend(automatic)->device().threads == omp_get_num_procs());
  BOOST_TEST(std::getenv("OMP_NUM_THREADS") == nullptr, "'many' must not reach an OpenMP runtime");
  ::unsetenv("OMP_NUM_THREADS");
}

BOOST_AUTO_TEST_CASE(device_info) {
  const DeviceInfo info = cpu().device();
  BOOST_TEST(cpu().name() == "cpu");
  BOOST_TEST(!info.name.empty());
  BOOST_TEST((info.memory == MemoryKind::host));
  BOOST_TEST(info.total_memory > 0);
  BOOST_TEST(info.threads >= 1);
  BOOST_TEST(std::regex_search(info.detail, std::regex("^oneDNN [0-9]+\\.[0-9]+\\.[0-9]+, ISA ")), info.detail);
  BOOST_TEST_MESSAGE("device: " << info.name << " | " << info.detail);
}

BOOST_AUTO_TEST_CASE(supports_exactly_what_is_implemented) {
  const Op f32_only[] = {Op::softmax_xent_forward, Op::softmax_xent_backward, Op::sgd_update,
                         Op::adam_update};
  for (Op op : f32_only) {
    BOOST_TEST(cpu().supports(op, DType::f32), op_name(op));
    BOOST_TEST(!cpu().supports(op, DType::bf16), op_name(op));
    BOOST_TEST(!cpu().supports(op, DType::f16), op_name(op));
  }
  // oneDNN primitives: f32, bf16, and f16 stored but computed in f32.
  const Op onednn[] = {Op::matmul, Op::conv2d_forward, Op::conv2d_backward_data,
                       Op::conv2d_backward_filter, Op::batchnorm_train_forward,
                       Op::batchnorm_infer_forward, Op::batchnorm_backward, Op::pool2d_forward,
                       Op::pool2d_backward};
  for (Op op : onednn) {
    BOOST_TEST(cpu().supports(op, DType::f32), op_name(op));
    BOOST_TEST(cpu().supports(op, DType::bf16), op_name(op));
    BOOST_TEST(cpu().supports(op, DType::f16), op_name(op));
    BOOST_TEST(!cpu().supports(op, DType::i32), op_name(op));
  }
  BOOST_TEST((cpu().activation_layout(DType::f32) == kiln::Layout::nhwc));
  // Plain loops over any float storage type.
  const Op loops[] = {Op::cast, Op::check_finite, Op::bias_grad, Op::activation_forward,
                      Op::activation_backward, Op::add_relu_forward, Op::dropout_forward,
                      Op::dropout_backward, Op::add, Op::scale, Op::global_avgpool_forward,
                      Op::global_avgpool_backward, Op::normalize_image, Op::convert_layout};
  for (Op op : loops) {
    for (DType d : {DType::f32, DType::bf16, DType::f16}) BOOST_TEST(cpu().supports(op, d), op_name(op));
    BOOST_TEST(!cpu().supports(op, DType::f64), op_name(op));
  }
  BOOST_TEST(!cpu().supports(Op::add, DType::i32));
}

BOOST_AUTO_TEST_CASE(unsupported_dtypes_throw_the_base_class_error) {
  Conv2dDesc conv;
  conv.n = 1, conv.c = 3, conv.h = 8, conv.w = 8, conv.k = 4, conv.r = 3, conv.s = 3;
  conv.dtype = DType::f64;
  std::string msg = test::error_text<UnsupportedError>([&] { cpu().plan_conv2d(conv); });
  BOOST_TEST(msg.find("backend 'cpu' does not implement conv2d_forward for f64") !=
             std::string::npos, msg);
  BatchNormDesc bn;
  bn.n = 2, bn.c = 3, bn.dtype = DType::f64;
  msg = test::error_text<UnsupportedError>([&] { cpu().plan_batchnorm(bn); });
  BOOST_TEST(msg.find("batchnorm_train_forward for f64") != std::string::npos, msg);
  Pool2dDesc pool;
  pool.n = 1, pool.c = 1, pool.h = 4, pool.w = 4, pool.dtype = DType::f64;
  msg = test::error_text<UnsupportedError>([&] { cpu().plan_pool2d(pool); });
  BOOST_TEST(msg.find("pool2d_forward for f64") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(allocate_is_aligned_host_memory) {
  for (MemoryKind kind : {MemoryKind::host, MemoryKind::host_pinned, MemoryKind::device}) {
    Tensor t = cpu().allocate({3, 5}, DType::f32, kind);
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0u);
    BOOST_TEST((t.memory() == MemoryKind::host));
    BOOST_TEST(t.describe() == "f32(3, 5)");
  }
  Tensor empty = cpu().allocate({0, 7}, DType::u8, MemoryKind::host);
  BOOST_TEST(empty.numel() == 0);
  const std::string msg = test::error_text<BackendError>(
      [&] { cpu().allocate({4, -1}, DType::f32, MemoryKind::host); });
  BOOST_TEST(msg.find("dimension 1 of shape (4, -1) is negative") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(fill_copy_and_to_device) {
  Tensor f = cpu().allocate({5}, DType::f32, MemoryKind::host);
  cpu().fill(f, 2.5);
  for (int i = 0; i < 5; ++i) BOOST_TEST(f.data_as<float>()[i] == 2.5f);
  Tensor i32 = cpu().allocate({3}, DType::i32, MemoryKind::host);
  cpu().fill(i32, -7);
  BOOST_TEST(i32.data_as<std::int32_t>()[2] == -7);
  Tensor bf = cpu().allocate({4}, DType::bf16, MemoryKind::host);
  cpu().fill(bf, 1.0);
  BOOST_TEST(static_cast<std::uint16_t*>(bf.data())[3] == 0x3f80);
  Tensor h = cpu().allocate({4}, DType::f16, MemoryKind::host);
  cpu().fill(h, -2.0);
  BOOST_TEST(static_cast<std::uint16_t*>(h.data())[0] == 0xc000);

  Tensor g = test::poisoned({5});
  cpu().copy(f, g);
  for (int i = 0; i < 5; ++i) BOOST_TEST(g.data_as<float>()[i] == 2.5f);
  Tensor wrong = host_tensor({4}, DType::f32);
  const std::string msg = test::error_text<BackendError>([&] { cpu().copy(f, wrong); });
  BOOST_TEST(msg.find("src f32(5) and dst f32(4)") != std::string::npos, msg);

  Tensor same = cpu().to_device(f);
  BOOST_TEST(same.data() == f.data());
}

BOOST_AUTO_TEST_CASE(large_fill_and_copy_cover_every_element) {
  // From 1 MiB up fill and copy split the buffer across the backend's threads; an odd element
  // count leaves uneven slices, and the last element and the first are where a slice bound slips.
  const std::int64_t n = (3 << 20) / 4 + 7;  // 3 MiB of f32 and a little
  Tensor f = cpu().allocate({n}, DType::f32, MemoryKind::host);
  cpu().fill(f, -1.5);
  const float* fp = f.data_as<float>();
  BOOST_TEST((std::count(fp, fp + n, -1.5f) == n));
  Tensor bf = cpu().allocate({n}, DType::bf16, MemoryKind::host);
  cpu().fill(bf, 1.0);
  const auto* bp = static_cast<const std::uint16_t*>(bf.data());
  BOOST_TEST((std::count(bp, bp + n, std::uint16_t{0x3f80}) == n));

  for (std::int64_t i = 0; i < n; ++i) f.data_as<float>()[i] = static_cast<float>(i);
  Tensor g = test::poisoned({n});
  cpu().copy(f, g);
  BOOST_TEST(std::memcmp(f.data(), g.data(), f.bytes()) == 0);

  // Overlapping views of one buffer keep memmove's meaning: dst = the old src, shifted by 5.
  Tensor whole = cpu().allocate({n + 5}, DType::f32, MemoryKind::host);
  for (std::int64_t i = 0; i < n + 5; ++i) whole.data_as<float>()[i] = static_cast<float>(i);
  cpu().copy(whole.view(0, {n}), whole.view(5, {n}));
  const float* w = whole.data_as<float>();
  BOOST_TEST(w[4] == 4.0f);
  BOOST_TEST(w[5] == 0.0f);
  BOOST_TEST(w[n + 4] == static_cast<float>(n - 1));
  std::int64_t wrong = 0;
  for (std::int64_t i = 5; i < n + 5; ++i) wrong += w[i] != static_cast<float>(i - 5);
  BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_CASE(streams_are_no_ops) {
  auto e = cpu().record_event(StreamKind::compute);
  BOOST_TEST_REQUIRE(e != nullptr);
  e->synchronize();
  cpu().wait_event(StreamKind::communication, *e);
  cpu().synchronize();
  BOOST_TEST(cpu().native_stream(StreamKind::compute) == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
