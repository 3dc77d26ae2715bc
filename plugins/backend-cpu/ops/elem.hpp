// Storage types of the element-wise loops: every loop reads and writes through Elem<D>::load /
// store and computes in f32, so one template body serves f32, bf16 and f16 tensors (bf16/f16
// round to nearest even on store, as the cast op does). with_float_dtype() turns a run-time
// DType into that compile-time tag; the f32 instantiation is the plain float loop it was before.
#pragma once

#include <cstdint>

#include "kiln/tensor.hpp"
#include "ops/half.hpp"

namespace kiln::cpu {

template <DType D>
struct Elem;

template <>
struct Elem<DType::f32> {
  using T = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};

template <>
struct Elem<DType::bf16> {
  using T = std::uint16_t;
  static float load(std::uint16_t v) { return bf16_to_f32(v); }
  static std::uint16_t store(float v) { return f32_to_bf16(v); }
};

template <>
struct Elem<DType::f16> {
  using T = std::uint16_t;
  static float load(std::uint16_t v) { return f16_to_f32(v); }
  static std::uint16_t store(float v) { return f32_to_f16(v); }
};

/// True for the dtypes the element-wise loops handle.
inline bool is_float_dtype(DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; }

/// Calls body(Elem<d>{}) for a float dtype; the caller has validated d with is_float_dtype.
template <class Body>
void with_float_dtype(DType d, Body&& body) {
  switch (d) {
    case DType::bf16: body(Elem<DType::bf16>{}); return;
    case DType::f16: body(Elem<DType::f16>{}); return;
    default: body(Elem<DType::f32>{}); return;
  }
}

}  // namespace kiln::cpu
