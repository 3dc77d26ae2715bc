// The naive backend's support table, device description, memory and (trivial) ordering calls.
//
// Memory is plain host memory from malloc: the "device" is the host, so allocate() gives the
// same memory for every MemoryKind (there is nothing to pin), to_device() hands back the tensor
// it is given, and copy() is a memmove. All of these may be called from the data loader's worker
// threads at the same time as the trainer's ops (kiln/backend.hpp); none of them touches state
// of the backend object, so they need no lock.
#include "naive_backend.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include <kiln/errors.hpp>
#include <kiln/sdk/half.hpp>
#include <kiln/sdk/op_support.hpp>

namespace kiln::naive {
namespace {

/// Which dtypes each op of KILN_OPS (kiln/op_table.hpp) takes: one row per op, in its order.
/// supports() answers from this table alone. Every row is f32 because the loops are written
/// for float; a backend that adds bf16 kernels for some ops widens just those rows.
struct OpRow {
  Op op;
  sdk::DTypes dtypes;
};

constexpr sdk::DTypes kF32{DType::f32};

constexpr OpRow kNaiveOps[] = {
    {Op::matmul, kF32},                     // dense.cpp
    {Op::bias_grad, kF32},                  // dense.cpp
    {Op::activation_forward, kF32},         // elementwise.cpp
    {Op::activation_backward, kF32},        // elementwise.cpp
    {Op::add_relu_forward, kF32},           // elementwise.cpp
    {Op::dropout_forward, kF32},            // elementwise.cpp
    {Op::dropout_backward, kF32},           // elementwise.cpp
    {Op::softmax_xent_forward, kF32},       // loss_optim.cpp
    {Op::softmax_xent_backward, kF32},      // loss_optim.cpp
    {Op::add, kF32},                        // elementwise.cpp
    {Op::cast, kF32},                       // elementwise.cpp (f32 -> f32 only: a copy)
    {Op::scale, kF32},                      // elementwise.cpp
    {Op::check_finite, kF32},               // elementwise.cpp
    {Op::sgd_update, kF32},                 // loss_optim.cpp
    {Op::adam_update, kF32},                // loss_optim.cpp
    {Op::conv2d_forward, kF32},             // conv.cpp
    {Op::conv2d_backward_data, kF32},       // conv.cpp
    {Op::conv2d_backward_filter, kF32},     // conv.cpp
    {Op::batchnorm_train_forward, kF32},    // batchnorm.cpp
    {Op::batchnorm_infer_forward, kF32},    // batchnorm.cpp
    {Op::batchnorm_backward, kF32},         // batchnorm.cpp
    {Op::pool2d_forward, kF32},             // pool.cpp
    {Op::pool2d_backward, kF32},            // pool.cpp
    {Op::global_avgpool_forward, kF32},     // pool.cpp
    {Op::global_avgpool_backward, kF32},    // pool.cpp
    {Op::normalize_image, kF32},            // pool.cpp
    {Op::convert_layout, kF32},             // layout.cpp
    {Op::batchnorm_stats, kF32},            // batchnorm.cpp (synchronised batch-norm)
    {Op::batchnorm_backward_reduce, kF32},  // batchnorm.cpp
    {Op::batchnorm_backward_elemt, kF32},   // batchnorm.cpp
    {Op::top_k_hits, kF32},                 // loss_optim.cpp
    {Op::lerp, kF32},                       // elementwise.cpp
};
// An op added to the contract without a row here stops the build instead of being "unsupported".
static_assert(sdk::lists_every_op_once(kNaiveOps),
              "kNaiveOps needs one row per op of KILN_OPS (kiln/op_table.hpp), in its order");

/// The event of a backend whose ops are done when they return: always complete.
class CompleteEvent final : public Event {
 public:
  void synchronize() override {}
};

std::string describe_or_undefined(const Tensor& t) { return t.defined() ? t.describe() : "undefined"; }

/// Every element of `t` set to `value`.
template <class T>
void fill_with(const Tensor& t, T value) {
  T* p = static_cast<T*>(t.data());
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = value;
}

}  // namespace

NaiveBackend::NaiveBackend(const PluginArgs& /*args*/) : done_(std::make_shared<CompleteEvent>()) {}

DeviceInfo NaiveBackend::device() const {
  DeviceInfo info;
  info.name = "host CPU (naive loops)";
  info.memory = MemoryKind::host;
  info.threads = 1;  // every op runs on the calling thread
  info.detail = "f32 only; plain C++ loops, sums accumulated in double";
  return info;
}

bool NaiveBackend::supports(Op op, DType dtype) const {
  const OpRow* row = sdk::op_row(kNaiveOps, op);
  return row != nullptr && row->dtypes.has(dtype);
}

Layout NaiveBackend::activation_layout(DType /*dtype*/) const {
  // NCHW: the order whose index formula readers know. The image ops honour nhwc as well (a layer
  // may hand them either), this is only the layout layers are asked to produce.
  return Layout::row_major;
}

Tensor NaiveBackend::allocate(const Shape& shape, DType dtype, MemoryKind /*where*/) {
  // shape_bytes throws a BackendError for a negative dimension or a size that overflows.
  const std::size_t bytes = shape_bytes(shape, dtype);
  // malloc(0) may return nullptr; an empty tensor still gets a valid (1-byte) block.
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p == nullptr) {
    throw BackendError("naive backend, allocate: out of host memory for a " + std::string(dtype_name(dtype)) +
                       " tensor of shape " + shape_string(shape) + " (" + std::to_string(bytes) +
                       " bytes); reduce the batch size or the model");
  }
  // Recorded as host memory whatever was asked: it is what it is, and nobody should expect
  // pinned (DMA-able) pages from it.
  auto storage = std::make_shared<Storage>(p, bytes, MemoryKind::host, [](void* q) { std::free(q); });
  return Tensor(std::move(storage), shape, dtype);
}

void NaiveBackend::copy(const Tensor& src, const Tensor& dst) {
  if (!src.defined() || !dst.defined() || src.memory() == MemoryKind::device ||
      dst.memory() == MemoryKind::device) {
    throw BackendError("naive backend, copy: src " + describe_or_undefined(src) + " and dst " +
                       describe_or_undefined(dst) + " must both be defined host tensors");
  }
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel()) {
    throw BackendError("naive backend, copy: src " + src.describe() + " and dst " + dst.describe() +
                       " must have the same dtype and element count; use cast to convert dtypes");
  }
  // Bytes as they are, whatever the layout tags (convert_layout rearranges). memmove, because
  // two views of one arena may overlap.
  if (src.bytes() > 0) std::memmove(dst.data(), src.data(), src.bytes());
}

void NaiveBackend::fill(const Tensor& t, double value) {
  if (!t.defined() || t.memory() == MemoryKind::device) {
    throw BackendError("naive backend, fill: " + describe_or_undefined(t) + " must be a defined host tensor");
  }
  // fill() is memory handling, not an op of the table: it takes every dtype a tensor can have
  // (the trainer fills i32 flags; `kiln plugins test` checks u8 and bf16 fills too).
  switch (t.dtype()) {
    case DType::f32: fill_with<float>(t, static_cast<float>(value)); break;
    case DType::f64: fill_with<double>(t, value); break;
    case DType::i32: fill_with<std::int32_t>(t, static_cast<std::int32_t>(value)); break;
    case DType::i64: fill_with<std::int64_t>(t, static_cast<std::int64_t>(value)); break;
    case DType::u8: fill_with<std::uint8_t>(t, static_cast<std::uint8_t>(value)); break;
    // The SDK's conversions round to nearest even, as every other backend does.
    case DType::bf16: fill_with<std::uint16_t>(t, sdk::f32_to_bf16(static_cast<float>(value))); break;
    case DType::f16: fill_with<std::uint16_t>(t, sdk::f32_to_f16(static_cast<float>(value))); break;
  }
}

Tensor NaiveBackend::to_device(const Tensor& host) {
  if (!host.defined() || host.memory() == MemoryKind::device) {
    throw BackendError("naive backend, to_device: " + describe_or_undefined(host) +
                       " must be a defined host tensor");
  }
  return host;  // host memory is this backend's device memory: no copy to make
}

std::shared_ptr<Event> NaiveBackend::record_event(StreamKind /*stream*/) { return done_; }

}  // namespace kiln::naive
