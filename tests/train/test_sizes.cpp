// Checked size arithmetic (kiln/sdk/checked_size.hpp) and where it guards an allocation: shape
// element and byte counts, the parameter arena, and shapes read from a safetensors header. Each
// overflow must be an error before anything is allocated, never a product that wraps.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "kiln/errors.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/sdk/checked_size.hpp"
#include "kiln/sdk/nn/parameter_store.hpp"
#include "kiln/tensor.hpp"

namespace fs = std::filesystem;
using kiln::sdk::checked_add;
using kiln::sdk::checked_bytes;
using kiln::sdk::checked_mul;

namespace {

constexpr std::int64_t kMax = INT64_MAX;
constexpr std::int64_t k2to62 = std::int64_t{1} << 62;

template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sizes)

BOOST_AUTO_TEST_CASE(checked_mul_add_and_bytes_refuse_what_does_not_fit) {
  BOOST_TEST(checked_mul(3, 4).value() == 12);
  BOOST_TEST(checked_mul(0, kMax).value() == 0);
  BOOST_TEST(checked_mul(kMax, 1).value() == kMax);
  BOOST_TEST(!checked_mul(k2to62, 2).has_value());  // 2^63: one past INT64_MAX
  BOOST_TEST(!checked_mul(k2to62, 4).has_value());  // 2^64 wraps to 0 unchecked
  BOOST_TEST(!checked_mul(-1, 4).has_value());
  BOOST_TEST(checked_add(kMax - 1, 1).value() == kMax);
  BOOST_TEST(!checked_add(kMax, 1).has_value());
  BOOST_TEST(!checked_add(-1, 1).has_value());
  BOOST_TEST(checked_bytes(k2to62, 2).value() == (std::size_t{1} << 63));
  BOOST_TEST(!checked_bytes(k2to62, 4).has_value());
  BOOST_TEST(!checked_bytes(-1, 4).has_value());
}

BOOST_AUTO_TEST_CASE(mul_or_throw_names_the_quantity_and_what_to_do) {
  const std::string msg = message_of<kiln::ConfigError>(
      [] { (void)kiln::sdk::mul_or_throw(k2to62, 784, "loader.batch x sample", "use a smaller batch"); });
  BOOST_TEST(msg == "loader.batch x sample = 4611686018427387904 x 784 overflows a 64-bit size; use a smaller batch",
             msg);
  BOOST_TEST(kiln::sdk::add_or_throw(2, 3, "x", "y") == 5);
}

BOOST_AUTO_TEST_CASE(shape_counts_are_checked_before_any_allocation) {
  BOOST_TEST(kiln::shape_numel({}) == 1);
  BOOST_TEST(kiln::shape_numel({2, 3, 4}) == 24);
  BOOST_TEST(kiln::shape_bytes({2, 3}, kiln::DType::f64) == 48u);
  const std::string numel = message_of<kiln::BackendError>([] { (void)kiln::shape_numel({k2to62, 4}); });
  BOOST_TEST(numel.find("tensor shape (4611686018427387904, 4) has more elements than fit in 64 bits") == 0, numel);
  // 2^62 elements fit in int64, their f32 bytes do not.
  const std::string bytes =
      message_of<kiln::BackendError>([] { (void)kiln::host_tensor({k2to62}, kiln::DType::f32); });
  BOOST_TEST(bytes.find("tensor f32(4611686018427387904) needs more bytes than fit in 64 bits") == 0, bytes);
  BOOST_TEST(message_of<kiln::BackendError>([] { (void)kiln::shape_numel({2, -1}); }) ==
             "tensor shape (2, -1) has a negative dimension");
}

BOOST_AUTO_TEST_CASE(the_parameter_arena_size_is_checked_when_declared) {
  kiln::nn::ParameterStore store;
  store.declare("w", {k2to62 / 8, 1}, {});
  const std::string msg = message_of<kiln::ConfigError>([&] { store.declare("head.weight", {k2to62, 1}, {}); });
  BOOST_TEST(msg.find("the parameter arena with 'head.weight' (4611686018427387904, 1)") == 0, msg);
  BOOST_TEST(msg.find("a model parameter (a width, depth or class count) is far too large") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(a_safetensors_header_with_a_huge_shape_is_a_data_error) {
  const fs::path file = fs::temp_directory_path() / ("kiln-sizes-" + std::to_string(::getpid()) + ".safetensors");
  // 2^62 x 4 f32 = 2^66 bytes, which wraps to 0 and so "matched" the empty data_offsets before
  // the count was checked; the reader then allocated nothing and wrote past it.
  std::string header = R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  bytes += header;
  std::ofstream(file, std::ios::binary) << bytes;
  const std::string msg = message_of<kiln::DataError>([&] { (void)kiln::io::read_safetensors(file); });
  BOOST_TEST(msg == file.string() + ": tensor 'w': shape (4611686018427387904, 4) has more elements than fit in 64 "
                                    "bits; the file is corrupt or not a checkpoint, use another one",
             msg);
  // A dimension above INT64_MAX is refused before it is turned into a (negative) int64.
  std::string big = R"({"w":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]}})";
  big.append((8 - big.size() % 8) % 8, ' ');
  std::string bytes2;
  for (int i = 0; i < 8; ++i) bytes2.push_back(static_cast<char>((big.size() >> (8 * i)) & 0xFF));
  bytes2 += big;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes2;
  const std::string msg2 = message_of<kiln::DataError>([&] { (void)kiln::io::read_safetensors(file); });
  BOOST_TEST(msg2.find("tensor 'w' has a dimension 18446744073709551615 larger than 2^63 - 1") != std::string::npos,
             msg2);
  fs::remove(file);
}

BOOST_AUTO_TEST_SUITE_END()
