// The check values of `kiln bench-comm` (see bench_comm_check.hpp).
#include "bench_comm_check.hpp"

#include <algorithm>

#include "kiln/errors.hpp"
#include "kiln/sdk/half.hpp"

namespace kiln::cli {

double check_input_value(int rank, std::int64_t i) { return 1.0 + static_cast<double>((rank + i) % 4); }

double check_expected_value(ReduceOp op, int world, std::int64_t i) {
  double sum = 0, hi = -1e300, lo = 1e300;
  for (int r = 0; r < world; ++r) {
    const double v = check_input_value(r, i);
    sum += v;
    hi = std::max(hi, v);
    lo = std::min(lo, v);
  }
  switch (op) {
    case ReduceOp::sum: return sum;
    case ReduceOp::avg: return sum / world;
    case ReduceOp::max: return hi;
    case ReduceOp::min: return lo;
  }
  return sum;
}

double check_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f16: return 1e-3;
    case DType::bf16: return 8e-3;
    case DType::f32: return 1e-6;
    default: return 1e-12;
  }
}

double load_host_value(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return static_cast<const float*>(t.data())[i];
    case DType::f64: return static_cast<const double*>(t.data())[i];
    case DType::f16: return sdk::f16_to_f32(static_cast<const std::uint16_t*>(t.data())[i]);
    case DType::bf16: return sdk::bf16_to_f32(static_cast<const std::uint16_t*>(t.data())[i]);
    default: throw ConfigError("bench-comm: unsupported dtype");
  }
}

void store_host_value(const Tensor& t, std::int64_t i, double v) {
  switch (t.dtype()) {
    case DType::f32: static_cast<float*>(t.data())[i] = static_cast<float>(v); break;
    case DType::f64: static_cast<double*>(t.data())[i] = v; break;
    case DType::f16: static_cast<std::uint16_t*>(t.data())[i] = sdk::f32_to_f16(static_cast<float>(v)); break;
    case DType::bf16: static_cast<std::uint16_t*>(t.data())[i] = sdk::f32_to_bf16(static_cast<float>(v)); break;
    default: throw ConfigError("bench-comm: unsupported dtype");
  }
}

}  // namespace kiln::cli
