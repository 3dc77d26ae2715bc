// One training or evaluation sample from one JPEG's bytes: the crop is planned on the header,
// only the region it touches is decoded (at the DCT scale it allows), and that region is
// resampled to the output. Shared by ImagenetSource::read() and the fuzz target that feeds it
// hostile images (tests/fuzz/targets_imagenet.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "transform.hpp"

namespace kiln::imagenet {

/// Decodes `image` into `pixels` (options.format, options.size squared) with the randomness of
/// SampleRng(seed). `max_pixels` caps the header's width x height; `decode_scaled` allows DCT
/// scaling; `rgb` is the caller's decode buffer, reused between calls. Throws DataError
/// "<where>: ..." for data that is not a whole, decodable JPEG.
void decode_sample(std::span<const unsigned char> image, const std::string& where, const TransformOptions& options,
                   std::int64_t max_pixels, bool decode_scaled, std::uint64_t seed, std::vector<unsigned char>& rgb,
                   void* pixels);

}  // namespace kiln::imagenet
