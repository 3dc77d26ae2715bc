// Reader of the golden files written by tests/golden/make_*_golden.py: "KILNGLD1", u32 version
// (1), u32 array count, then per array: u32 name length, name, u32 rank, i64 dims, f32 values
// (little-endian). Every length is checked; a truncated or padded file fails the test with the
// generator script to rerun named.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "kiln/tensor.hpp"

namespace kiln::test {

struct GoldenArray {
  Shape shape;
  std::vector<double> values;
};

namespace golden_detail {
template <class T>
T take(const std::string& bytes, std::size_t& pos, const std::string& path) {
  BOOST_TEST_REQUIRE(pos + sizeof(T) <= bytes.size(), path << " is truncated at byte " << pos);
  T v;
  std::memcpy(&v, bytes.data() + pos, sizeof(T));
  pos += sizeof(T);
  return v;
}
}  // namespace golden_detail

/// Loads tests/golden/<file>; `generator` is the script that writes it (named in failures).
inline std::map<std::string, GoldenArray> load_golden(const std::string& file, const std::string& generator) {
  using golden_detail::take;
  const std::string path = std::string(KILN_SOURCE_DIR) + "/tests/golden/" + file;
  std::ifstream in(path, std::ios::binary);
  BOOST_TEST_REQUIRE(in.good(), "cannot open " << path << "; run tests/golden/" << generator);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST_REQUIRE(bytes.compare(0, 8, "KILNGLD1") == 0,
                     path << " does not start with KILNGLD1; HINT: rerun " << generator);
  std::size_t pos = 8;
  const auto version = take<std::uint32_t>(bytes, pos, path);
  BOOST_TEST_REQUIRE(version == 1u, path << " is format version " << version << ", this test reads 1");
  const auto count = take<std::uint32_t>(bytes, pos, path);
  std::map<std::string, GoldenArray> out;
  for (std::uint32_t a = 0; a < count; ++a) {
    const auto len = take<std::uint32_t>(bytes, pos, path);
    BOOST_TEST_REQUIRE(pos + len <= bytes.size(), path << " is truncated in an array name");
    std::string name = bytes.substr(pos, len);
    pos += len;
    GoldenArray arr;
    const auto rank = take<std::uint32_t>(bytes, pos, path);
    for (std::uint32_t d = 0; d < rank; ++d) arr.shape.push_back(take<std::int64_t>(bytes, pos, path));
    const std::int64_t n = shape_numel(arr.shape);
    arr.values.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) arr.values[static_cast<std::size_t>(i)] = take<float>(bytes, pos, path);
    out.emplace(std::move(name), std::move(arr));
  }
  BOOST_TEST_REQUIRE(pos == bytes.size(), path << " has " << bytes.size() - pos << " trailing bytes");
  return out;
}

}  // namespace kiln::test
