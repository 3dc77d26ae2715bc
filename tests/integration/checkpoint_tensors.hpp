// Reading a checkpoint's f32 tensors and comparing two of them, for tests that train the same
// model two ways (sync_bn on 2 ranks vs 1, sync_bn on cuda vs cuDNN's batch-norm) and compare
// what the runs saved. Plain parsing (json_lite), so a test does not depend on the reader it may
// be checking.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace kiln::test {

using F32Tensors = std::map<std::string, std::vector<float>>;

/// Every tensor of a safetensors file (8-byte little-endian header length, JSON header, data);
/// each must be F32.
F32Tensors read_f32_safetensors(const std::filesystem::path& file);

struct Difference {
  double worst = 0;   ///< largest |a - b| / max(|a|, |b|, RMS of the tensor); inf for a non-finite value
  std::string where;  ///< "name[index]" of that element
};

/// Compares every tensor of `a` with the same-named one of `b` (or only those whose name contains
/// `only`); both must hold the same names and sizes.
Difference largest_relative_difference(const F32Tensors& a, const F32Tensors& b, const std::string& only = "");

}  // namespace kiln::test
