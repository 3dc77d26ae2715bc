// Edge and descriptor helpers for the planned oneDNN ops (see dnnl_edge.hpp). The inner memory
// of a non-direct edge is allocated here, once, when the plan builds its primitive.
#include "ops/dnnl_edge.hpp"

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

DType compute_dtype(DType d) { return d == DType::f16 ? DType::f32 : d; }

Edge::Edge(const dnnl::engine& engine, const dnnl::memory::desc& user,
           const dnnl::memory::desc& inner, EdgeSum sum)
    : direct_(user == inner && sum == EdgeSum::no), user_(user, engine, nullptr) {
  if (direct_) {
    inner_ = user_;
    return;
  }
  inner_ = dnnl::memory(inner, engine);  // owned scratch, lives as long as the plan
  to_inner_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, user, engine, inner));
  to_user_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, inner, engine, user));
  if (sum == EdgeSum::yes) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    add_to_user_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, inner, engine, user, attr));
  }
}

void Edge::bind(void* data) {
  user_.set_data_handle(data);
  // A direct edge shares one dnnl::memory handle object between user_ and inner_.
}

void Edge::pull(dnnl::stream& stream) {
  if (!direct_) to_inner_->execute(stream, user_, inner_);
}

void Edge::push(dnnl::stream& stream, Accumulate acc) {
  if (direct_) return;
  if (acc == Accumulate::yes) {
    add_to_user_->execute(stream, inner_, user_);
  } else {
    to_user_->execute(stream, inner_, user_);
  }
}

}  // namespace kiln::cpu
