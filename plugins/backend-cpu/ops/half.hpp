// The SDK's f32 <-> bf16 / f16 conversions (kiln/sdk/half.hpp) under the names the cpu kernels use.
#pragma once

#include <kiln/sdk/half.hpp>

namespace kiln::cpu {

using sdk::bf16_to_f32;
using sdk::f16_to_f32;
using sdk::f32_to_bf16;
using sdk::f32_to_f16;

}  // namespace kiln::cpu
