// read_f32_safetensors and largest_relative_difference (contract in checkpoint_tensors.hpp).
#include "checkpoint_tensors.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>

#include "json_lite.hpp"
#include "kiln_process.hpp"

namespace kiln::test {

F32Tensors read_f32_safetensors(const std::filesystem::path& file) {
  const std::string bytes = slurp(file);
  BOOST_TEST_REQUIRE(bytes.size() > 8u, file);
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  BOOST_TEST_REQUIRE(header_len <= bytes.size() - 8, file);
  const auto header = json::parse(std::string_view(bytes).substr(8, header_len));
  F32Tensors out;
  for (const auto& [name, info] : header.members) {
    if (name == "__metadata__") continue;
    BOOST_TEST_REQUIRE(info.at("dtype").string == "F32", name);
    const auto& offsets = info.at("data_offsets").items;
    const auto begin = static_cast<std::size_t>(offsets.at(0).number);
    const auto end = static_cast<std::size_t>(offsets.at(1).number);
    BOOST_TEST_REQUIRE((begin <= end && 8 + header_len + end <= bytes.size()), name);
    std::vector<float> v((end - begin) / sizeof(float));
    std::memcpy(v.data(), bytes.data() + 8 + header_len + begin, end - begin);
    out.emplace(name, std::move(v));
  }
  return out;
}

Difference largest_relative_difference(const F32Tensors& a, const F32Tensors& b, const std::string& only) {
  BOOST_TEST_REQUIRE(a.size() == b.size());
  Difference d;
  for (const auto& [name, va] : a) {
    if (!only.empty() && name.find(only) == std::string::npos) continue;
    const auto it = b.find(name);
    BOOST_TEST_REQUIRE((it != b.end()), name);
    const std::vector<float>& vb = it->second;
    BOOST_TEST_REQUIRE(va.size() == vb.size(), name);
    double sum_sq = 0;
    for (float x : va) sum_sq += double{x} * x;
    const double rms = std::sqrt(sum_sq / static_cast<double>(va.size()));
    for (std::size_t i = 0; i < va.size(); ++i) {
      const double scale = std::max({std::fabs(double{va[i]}), std::fabs(double{vb[i]}), rms, 1e-12});
      const double rel = std::isfinite(va[i]) && std::isfinite(vb[i]) ? std::fabs(double{va[i]} - vb[i]) / scale
                                                                       : std::numeric_limits<double>::infinity();
      if (rel > d.worst) d = Difference{rel, name + "[" + std::to_string(i) + "]"};
    }
  }
  return d;
}

}  // namespace kiln::test
