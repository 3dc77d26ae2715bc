// Kiln's AVX2 Winograd F(4x4, 3x3) convolution (see winograd3x3.hpp).
#include "ops/winograd3x3.hpp"

#include <cstdint>
#include <utility>

#include "ops/bf16_convert.hpp"
#include "ops/f16_convert.hpp"
#include "ops/onednn_compat.hpp"

namespace kiln::cpu {

using dims = dnnl::memory::dims;
namespace wg = winograd;

// The f16 loops' own check is exactly what the transforms need: AVX2, FMA and F16C.
bool cpu_runs_kiln_winograd() { return f16_paths::has_avx2_f16c(); }

namespace {

bool stored_float(const Tensor& t) {
  return t.dtype() == DType::f32 || t.dtype() == DType::f16 || t.dtype() == DType::bf16;
}

/// Calls read(p) with the data of the activation input `t` as the transforms' load type for it:
/// float, f16 bits, Bf16, or for an f32 input of a bf16 plan F32AsBf16 (read rounded to bf16, as
/// the direct path's edges round it: EdgeRound::bf16 in dnnl_edge.hpp).
template <class Read>
void read_as_stored(const Tensor& t, bool bf16_plan, Read&& read) {
  switch (t.dtype()) {
    case DType::f16: return read(static_cast<const std::uint16_t*>(t.data()));
    case DType::bf16: return read(static_cast<const wg::Bf16*>(t.data()));
    default:
      if (bf16_plan) return read(static_cast<const wg::F32AsBf16*>(t.data()));
      return read(static_cast<const float*>(t.data()));
  }
}

/// Calls write(p) with the data of the output `t` as the transforms' store type for it.
template <class Write>
void write_as_stored(const Tensor& t, Write&& write) {
  switch (t.dtype()) {
    case DType::f16: return write(static_cast<std::uint16_t*>(t.data()));
    case DType::bf16: return write(static_cast<wg::Bf16*>(t.data()));
    default: return write(static_cast<float*>(t.data()));
  }
}

}  // namespace

bool Winograd3x3::fits(const Conv2dDesc& d) {
  return d.r == 3 && d.s == 3 && d.stride_h == 1 && d.stride_w == 1 && d.dilation_h == 1 && d.dilation_w == 1 &&
         d.groups == 1 && d.pad_h == d.pad_w && d.pad_h >= 0 && d.pad_h <= 2 && d.c % 8 == 0 && d.k % 8 == 0 &&
         d.out_h() > 0 && d.out_w() > 0;
}

bool Winograd3x3::takes(const Tensor& activation_a, const Tensor& activation_b, const Tensor& weights) {
  return stored_float(activation_a) && stored_float(activation_b) && stored_float(weights) &&
         activation_a.layout() == Layout::nhwc &&
         activation_b.layout() == Layout::nhwc && weights.layout() == Layout::row_major;
}

Winograd3x3::Winograd3x3(const Conv2dDesc& d, const dnnl::engine& engine, std::shared_ptr<EdgeScratch> scratch)
    : desc_(d), engine_(engine), scratch_(std::move(scratch)),
      forward_grid_{d.n, d.h, d.w, d.out_h(), d.out_w(), d.pad_h},
      // Backward-data reads dy (out_h x out_w) and writes dx (h x w): padding 2 - pad gives back h.
      backward_data_grid_{d.n, d.out_h(), d.out_w(), d.h, d.w, 2 - d.pad_h} {}

Winograd3x3::Matmul Winograd3x3::make_matmul(std::int64_t m, std::int64_t kk, std::int64_t n, bool a_transposed) const {
  const auto f32 = dnnl::memory::data_type::f32;
  const dims a_strides = a_transposed ? dims{kk * m, 1, m} : dims{m * kk, kk, 1};
  const dnnl::memory::desc a(dims{wg::kPoints, m, kk}, f32, a_strides);
  const dnnl::memory::desc b(dims{wg::kPoints, kk, n}, f32, dims{kk * n, n, 1});
  const dnnl::memory::desc out(dims{wg::kPoints, m, n}, f32, dims{m * n, n, 1});
  const auto pd = onednn::matmul(engine_, a, b, {}, out);
  return {dnnl::matmul(pd), dnnl::memory(a, engine_, nullptr), dnnl::memory(b, engine_, nullptr),
          dnnl::memory(out, engine_, nullptr)};
}

void Winograd3x3::run(dnnl::stream& stream, Matmul& mm, const float* a, const float* b, float* out) {
  // oneDNN's memory handles are non-const; the matmul only reads its source and weights.
  mm.a.set_data_handle(const_cast<float*>(a));
  mm.b.set_data_handle(const_cast<float*>(b));
  mm.out.set_data_handle(out);
  mm.primitive.execute(stream, {{DNNL_ARG_SRC, mm.a}, {DNNL_ARG_WEIGHTS, mm.b}, {DNNL_ARG_DST, mm.out}});
  stream.wait();
}

float* Winograd3x3::scratch(int which, std::int64_t floats) {
  return static_cast<float*>(scratch_->get(kScratchSlot + which, static_cast<std::size_t>(floats) * sizeof(float)));
}

const float* Winograd3x3::f32_weights(const Tensor& w) {
  const auto n = static_cast<std::size_t>(w.numel());
  float* const wide = scratch(3, w.numel());
  switch (w.dtype()) {
    case DType::f16: f16_to_f32_parallel(static_cast<const std::uint16_t*>(w.data()), wide, n); return wide;
    case DType::bf16: bf16_to_f32_parallel(static_cast<const std::uint16_t*>(w.data()), wide, n); return wide;
    default:
      if (!bf16_plan()) return static_cast<const float*>(w.data());
      // f32 master weights of a bf16 plan: read at bf16 precision, as by the direct path.
      f32_round_to_bf16_parallel(static_cast<const float*>(w.data()), wide, n);
      return wide;
  }
}

void Winograd3x3::correlate(dnnl::stream& stream, std::optional<Matmul>& slot, const wg::TileGrid& grid,
                            std::int64_t in_channels, std::int64_t out_channels, const Tensor& in,
                            const float* filters, const Tensor& out) {
  const std::int64_t tiles = grid.tiles();
  if (!slot) slot.emplace(make_matmul(tiles, in_channels, out_channels, false));
  float* v = scratch(0, wg::kPoints * tiles * in_channels);
  float* m = scratch(2, wg::kPoints * tiles * out_channels);
  read_as_stored(in, bf16_plan(), [&](const auto* data) { wg::input_tiles(data, in_channels, grid, v); });
  run(stream, *slot, v, filters, m);
  write_as_stored(out, [&](auto* data) { wg::output_tiles(m, out_channels, grid, data); });
}

void Winograd3x3::forward(dnnl::stream& stream, const Tensor& y, const Tensor& x, const Tensor& w) {
  float* u = scratch(1, wg::kPoints * desc_.c * desc_.k);
  wg::forward_filters(f32_weights(w), desc_.k, desc_.c, u);
  correlate(stream, fwd_, forward_grid_, desc_.c, desc_.k, x, u, y);
}

void Winograd3x3::backward_data(dnnl::stream& stream, const Tensor& dx, const Tensor& dy, const Tensor& w) {
  float* u = scratch(1, wg::kPoints * desc_.k * desc_.c);
  wg::backward_data_filters(f32_weights(w), desc_.k, desc_.c, u);
  correlate(stream, bwd_data_, backward_data_grid_, desc_.k, desc_.c, dy, u, dx);
}

void Winograd3x3::backward_filter(dnnl::stream& stream, const Tensor& dw, const Tensor& dy, const Tensor& x,
                                  Accumulate acc) {
  const std::int64_t tiles = forward_grid_.tiles(), c = desc_.c, k = desc_.k;
  if (!bwd_filter_) bwd_filter_.emplace(make_matmul(c, tiles, k, true));
  float* v = scratch(0, wg::kPoints * tiles * c);
  float* dm = scratch(2, wg::kPoints * tiles * k);
  float* du = scratch(1, wg::kPoints * c * k);
  read_as_stored(x, bf16_plan(), [&](const auto* data) { wg::input_tiles(data, c, forward_grid_, v); });
  read_as_stored(dy, bf16_plan(), [&](const auto* data) { wg::output_tiles_adjoint(data, k, forward_grid_, dm); });
  run(stream, *bwd_filter_, v, dm, du);
  const bool accumulate = acc == Accumulate::yes;
  if (dw.dtype() == DType::f32) return wg::filter_gradients(du, k, c, static_cast<float*>(dw.data()), accumulate);
  // An f16 or bf16 gradient: computed (and added to) in f32, then rounded once.
  const auto n = static_cast<std::size_t>(dw.numel());
  auto* half = static_cast<std::uint16_t*>(dw.data());
  float* wide = scratch(3, dw.numel());
  const bool bf16 = dw.dtype() == DType::bf16;
  if (accumulate) (bf16 ? bf16_to_f32_parallel : f16_to_f32_parallel)(half, wide, n);
  wg::filter_gradients(du, k, c, wide, accumulate);
  (bf16 ? f32_to_bf16_parallel : f32_to_f16_parallel)(wide, half, n);
}

}  // namespace kiln::cpu
