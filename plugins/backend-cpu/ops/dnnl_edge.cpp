// Edge and descriptor helpers for the planned oneDNN ops (see dnnl_edge.hpp). The inner memory
// of a non-direct edge is allocated here, once, when the plan builds its primitive.
#include "ops/dnnl_edge.hpp"

#include "ops/bf16_convert.hpp"
#include "ops/f16_convert.hpp"
#include "ops/onednn_compat.hpp"

#include <cstdlib>
#include <new>
#include <stdexcept>

namespace kiln::cpu {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::memory::data_type dnnl_dtype(DType d) {
  switch (d) {
    case DType::f32: return dt::f32;
    case DType::bf16: return dt::bf16;
    case DType::f16: return dt::f16;
    default: return dt::undef;
  }
}

dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims, DType d) {
  switch (dims.size()) {
    case 1: return dnnl::memory::desc(dims, dnnl_dtype(d), tag::a);
    case 2: return dnnl::memory::desc(dims, dnnl_dtype(d), tag::ab);
    case 4: return dnnl::memory::desc(dims, dnnl_dtype(d), tag::abcd);
    default: return dnnl::memory::desc(dims, dnnl_dtype(d), tag::abcde);
  }
}

dnnl::memory::desc user_desc(const dnnl::memory::dims& dims, DType d, Layout layout) {
  if (layout == Layout::nhwc && dims.size() == 4) return dnnl::memory::desc(dims, dnnl_dtype(d), tag::nhwc);
  return plain_desc(dims, d);
}

DType compute_dtype(DType d, bool bf16_primitives) {
  if (d == DType::f16 || (d == DType::bf16 && !bf16_primitives)) return DType::f32;
  return d;
}

void EdgeScratch::Free::operator()(void* p) const noexcept { std::free(p); }

void* EdgeScratch::get(int slot, std::size_t bytes) {
  if (slot < 0) throw std::invalid_argument("EdgeScratch slot must be >= 0");
  if (static_cast<std::size_t>(slot) >= slots_.size()) slots_.resize(static_cast<std::size_t>(slot) + 1);
  Block& b = slots_[static_cast<std::size_t>(slot)];
  if (b.bytes < bytes) {
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) throw std::bad_alloc();
    b.data.reset(p);
    b.bytes = rounded;
  }
  return b.data.get();
}

Edge::Edge(const dnnl::engine& engine, const dnnl::memory::desc& user,
           const dnnl::memory::desc& inner, std::shared_ptr<EdgeScratch> scratch, int slot,
           EdgeSum sum, EdgeRound round)
    : direct_(user == inner && sum == EdgeSum::no), user_(user, engine, nullptr),
      scratch_(std::move(scratch)), slot_(slot) {
  const dt user_type = onednn::data_type(user);
  if (onednn::data_type(inner) == dt::f32) {
    if (user_type == dt::f16) wide_ = EdgeWide::f16;
    if (user_type == dt::bf16) wide_ = EdgeWide::bf16;
    if (user_type == dt::f32 && round == EdgeRound::bf16) wide_ = EdgeWide::f32_as_bf16;
  }
  if (round == EdgeRound::bf16 && (wide_ != EdgeWide::f32_as_bf16 || sum == EdgeSum::yes)) {
    throw std::logic_error("Edge: EdgeRound::bf16 needs an f32 input edge into an f32 primitive");
  }
  if (wide_ != EdgeWide::none) {
    init_widening(engine, user, inner, sum);
    return;
  }
  if (direct_) {
    inner_ = user_;
    return;
  }
  inner_ = dnnl::memory(inner, engine, nullptr);  // bound to scratch_ at each bind()
  init_to_inner(engine, user, inner);
  if (BlockedToPlain::handles(inner, user)) {
    blocked_to_user_.emplace(inner);
    return;
  }
  to_user_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, inner, engine, user));
  if (sum == EdgeSum::yes) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    add_to_user_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, inner, engine, user, attr));
  }
}

void Edge::init_widening(const dnnl::engine& engine, const dnnl::memory::desc& user,
                         const dnnl::memory::desc& inner, EdgeSum sum) {
  direct_ = false;
  // The caller's descriptor with f32 elements: the same dims and strides (plain or nhwc, dense).
  const onednn::Blocking layout = onednn::blocking(user);
  const dnnl::memory::dims strides(layout.strides, layout.strides + layout.ndims);
  const dnnl::memory::desc wide(dnnl::memory::dims(layout.dims, layout.dims + layout.ndims), dt::f32, strides);
  inner_ = dnnl::memory(inner, engine, nullptr);
  wide_is_inner_ = wide == inner && sum == EdgeSum::no;
  if (wide_is_inner_) return;
  wide_mem_ = dnnl::memory(wide, engine, nullptr);
  if (!(wide == inner)) {
    init_to_inner(engine, wide, inner);
    to_user_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, inner, engine, wide));
  }
  if (sum == EdgeSum::yes) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    add_to_user_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, inner, engine, wide, attr));
  }
}

void Edge::init_to_inner(const dnnl::engine& engine, const dnnl::memory::desc& plain, const dnnl::memory::desc& inner) {
  const onednn::Blocking layout = onednn::blocking(inner);
  inner_blocked_ = layout.blocked && layout.inner_nblks > 0;
  if (PlainToBlocked::handles(plain, inner)) {
    PlainToBlocked loop(plain, inner);
    if (loop.vectorised()) {
      plain_to_inner_.emplace(std::move(loop));
      return;
    }
  }
  to_inner_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, plain, engine, inner));
}

void Edge::to_inner(dnnl::stream& stream, dnnl::memory& plain) {
  if (plain_to_inner_) {
    plain_to_inner_->run(plain.get_data_handle(), inner_.get_data_handle());
    weight_reorder_counts().kiln_loop.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  to_inner_->execute(stream, plain, inner_);
  if (inner_blocked_) weight_reorder_counts().onednn_reorder.fetch_add(1, std::memory_order_relaxed);
}

void Edge::bind(void* data) {
  user_.set_data_handle(data);
  // A direct edge shares one dnnl::memory handle object between user_ and inner_.
  if (!direct_) inner_.set_data_handle(scratch_->get(slot_, inner_.get_desc().get_size()));
  if (wide_ != EdgeWide::none && !wide_is_inner_) {
    wide_mem_.set_data_handle(scratch_->get(slot_ + kWideSlot, wide_mem_.get_desc().get_size()));
  }
}

namespace {

std::size_t elements(const dnnl::memory& m) {
  return m.get_desc().get_size() / (onednn::data_type(m.get_desc()) == dt::f32 ? sizeof(float) : sizeof(std::uint16_t));
}

/// The caller's data (f16, bf16, or f32 to round) into f32 (Kiln's vector loops).
void widen(EdgeWide kind, const void* user, float* out, std::size_t n) {
  switch (kind) {
    case EdgeWide::f16: f16_to_f32_parallel(static_cast<const std::uint16_t*>(user), out, n); return;
    case EdgeWide::bf16: bf16_to_f32_parallel(static_cast<const std::uint16_t*>(user), out, n); return;
    case EdgeWide::f32_as_bf16: f32_round_to_bf16_parallel(static_cast<const float*>(user), out, n); return;
    case EdgeWide::none: break;
  }
  throw std::logic_error("Edge: widen() on an edge that converts nothing");
}

/// f32 results back into the caller's f16 or bf16 (round to nearest even).
void narrow(EdgeWide kind, const float* in, void* user, std::size_t n) {
  switch (kind) {
    case EdgeWide::f16: f32_to_f16_parallel(in, static_cast<std::uint16_t*>(user), n); return;
    case EdgeWide::bf16: f32_to_bf16_parallel(in, static_cast<std::uint16_t*>(user), n); return;
    case EdgeWide::f32_as_bf16:
    case EdgeWide::none: break;
  }
  throw std::logic_error("Edge: push() on an input-only edge (rounded f32, or no conversion)");
}

}  // namespace

// oneDNN's CPU engine runs a primitive to completion inside execute() (OpenMP runtime, in-order
// stream), so a conversion loop may read or write what a reorder has just written.
void Edge::pull(dnnl::stream& stream) {
  if (wide_ != EdgeWide::none) {
    const dnnl::memory& target = to_inner_ || plain_to_inner_ ? wide_mem_ : inner_;
    widen(wide_, user_.get_data_handle(), static_cast<float*>(target.get_data_handle()), elements(user_));
    if (to_inner_ || plain_to_inner_) to_inner(stream, wide_mem_);
    return;
  }
  if (!direct_) to_inner(stream, user_);
}

void Edge::push(dnnl::stream& stream, Accumulate acc) {
  if (wide_ != EdgeWide::none) {
    void* user = user_.get_data_handle();
    const std::size_t n = elements(user_);
    const dnnl::memory* result = &inner_;
    if (acc == Accumulate::yes) {
      if (!add_to_user_) throw std::logic_error("Edge::push: accumulation into an edge built without EdgeSum::yes");
      // wide = f32(user) + inner, then back into the caller's f16/bf16.
      widen(wide_, user, static_cast<float*>(wide_mem_.get_data_handle()), n);
      add_to_user_->execute(stream, inner_, wide_mem_);
      result = &wide_mem_;
    } else if (to_user_) {
      to_user_->execute(stream, inner_, wide_mem_);
      result = &wide_mem_;
    }
    narrow(wide_, static_cast<const float*>(result->get_data_handle()), user, n);
    return;
  }
  if (direct_) return;
  if (blocked_to_user_) {
    blocked_to_user_->run(static_cast<const float*>(inner_.get_data_handle()),
                          static_cast<float*>(user_.get_data_handle()), acc == Accumulate::yes);
    return;
  }
  if (acc == Accumulate::yes) {
    if (!add_to_user_) throw std::logic_error("Edge::push: accumulation into an edge built without EdgeSum::yes");
    add_to_user_->execute(stream, inner_, user_);
  } else {
    to_user_->execute(stream, inner_, user_);
  }
}

void EdgedPrimitive::run(dnnl::stream& stream, void* a, void* b, void* o, Accumulate acc) {
  e0.bind(a);
  e1.bind(b);
  eo.bind(o);
  e0.pull(stream);
  e1.pull(stream);
  if (acc == Accumulate::yes && with_sum) {
    with_sum->execute(stream, args);
  } else {
    prim.execute(stream, args);
    eo.push(stream, acc);
  }
  stream.wait();
}

}  // namespace kiln::cpu
