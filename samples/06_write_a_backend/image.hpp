// Image: a 4-D f32 tensor read and written by its logical index (n, c, h, w), whatever its layout.
//
// kiln/backend.hpp lets an image activation sit in memory as row_major (NCHW) or nhwc
// (channels-last), and every op that takes one must honour its layout tag; convolution even
// takes each operand in either layout. Rather than write each loop twice, the image ops index
// through this class: the loops say what the formula says (x(n, c, h, w)) and offset() is the one
// place that knows where that element is. A fast backend would pick a loop order per layout
// instead; here one extra multiply per access does not matter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <kiln/tensor.hpp>

namespace kiln::naive {

class Image {
 public:
  /// `t` must be a 4-D f32 tensor tagged row_major or nhwc (the shared argument checks ensure it).
  explicit Image(const Tensor& t)
      : data_(t.data_as<float>()),
        n_(t.dim(0)),
        c_(t.dim(1)),
        h_(t.dim(2)),
        w_(t.dim(3)),
        channels_last_(t.layout() == Layout::nhwc) {}

  std::int64_t n() const { return n_; }
  std::int64_t c() const { return c_; }
  std::int64_t h() const { return h_; }
  std::int64_t w() const { return w_; }

  /// Element (n, c, h, w).
  float& operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    return data_[offset(n, c, h, w)];
  }

  /// Where element (n, c, h, w) sits in memory, counted in elements from the first.
  std::int64_t offset(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    if (channels_last_) return ((n * h_ + h) * w_ + w) * c_ + c;  // nhwc: channels innermost
    return ((n * c_ + c) * h_ + h) * w_ + w;                        // NCHW: the row-major order
  }

 private:
  float* data_;
  std::int64_t n_, c_, h_, w_;
  bool channels_last_;
};

/// Double accumulators for every element of an Image-shaped output, indexed like it. Ops that
/// sum many products into one element (convolution, pooling's backward) add here and store()
/// once, so each output is rounded to f32 one time, whatever the layout it is written in.
class ImageSums {
 public:
  /// Zeros shaped like `like`; with `start_from_it`, its current values instead (for outputs
  /// that accumulate, Accumulate::yes).
  explicit ImageSums(const Image& like, bool start_from_it = false)
      : n_(like.n()), c_(like.c()), h_(like.h()), w_(like.w()),
        sums_(static_cast<std::size_t>(n_ * c_ * h_ * w_), 0.0) {
    if (!start_from_it) return;
    for_each_index([&](auto n, auto c, auto h, auto w) { (*this)(n, c, h, w) = like(n, c, h, w); });
  }

  double& operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
    return sums_[static_cast<std::size_t>(((n * c_ + c) * h_ + h) * w_ + w)];
  }

  /// Writes every sum, rounded to f32, into `out` (shaped like the one these were made from).
  void store(const Image& out) {
    for_each_index([&](auto n, auto c, auto h, auto w) {
      out(n, c, h, w) = static_cast<float>((*this)(n, c, h, w));  // the one rounding to f32
    });
  }

 private:
  template <class F>
  void for_each_index(F&& f) const {
    for (std::int64_t n = 0; n < n_; ++n) {
      for (std::int64_t c = 0; c < c_; ++c) {
        for (std::int64_t h = 0; h < h_; ++h) {
          for (std::int64_t w = 0; w < w_; ++w) f(n, c, h, w);
        }
      }
    }
  }

  std::int64_t n_, c_, h_, w_;
  std::vector<double> sums_;
};

}  // namespace kiln::naive
