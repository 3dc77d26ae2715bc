// Key functions of the interfaces (out-of-line destructors, so their vtables and typeinfo live
// in libkiln_core) and the Backend's default op implementations, which refuse by name.
#include <fmt/format.h>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/data_source.hpp"
#include "kiln/errors.hpp"
#include "kiln/model.hpp"
#include "kiln/precision_policy.hpp"
#include "kiln/store.hpp"

namespace kiln {

Event::~Event() = default;
OpPlan::~OpPlan() = default;
Backend::~Backend() = default;
Model::~Model() = default;
BatchNormSync::~BatchNormSync() = default;
DataSource::~DataSource() = default;
Store::~Store() = default;
Work::~Work() = default;
Communicator::~Communicator() = default;
PrecisionPolicy::~PrecisionPolicy() = default;

std::span<const ModelBuffer> Model::buffers() const { return {}; }
std::map<std::string, double> DataSource::counters() const { return {}; }
std::string DataSource::sample_id(std::int64_t) const { return {}; }

Layout Backend::activation_layout(DType) const { return Layout::row_major; }
std::map<std::string, double> Backend::counters() const { return {}; }

void Backend::unsupported(Op op, DType dtype) const {
  throw UnsupportedError(fmt::format(
      "backend '{}' does not implement {} for {}; choose a backend that does "
      "(`kiln plugins list` shows them) or another precision",
      name(), op_name(op), dtype_name(dtype)));
}

void Backend::matmul(const Tensor& c, const Tensor&, Transpose, const Tensor&, Transpose, float,
                     float, const Tensor&) {
  unsupported(Op::matmul, c.dtype());
}
void Backend::bias_grad(const Tensor& db, const Tensor&, Accumulate) {
  unsupported(Op::bias_grad, db.dtype());
}
void Backend::activation_forward(const Tensor& y, const Tensor&, Activation) {
  unsupported(Op::activation_forward, y.dtype());
}
void Backend::activation_backward(const Tensor& dx, const Tensor&, const Tensor&, const Tensor&,
                                  Activation, Accumulate) {
  unsupported(Op::activation_backward, dx.dtype());
}
void Backend::add_relu_forward(const Tensor& y, const Tensor&, const Tensor&) {
  unsupported(Op::add_relu_forward, y.dtype());
}
void Backend::dropout_forward(const Tensor& y, const Tensor&, const Tensor&, float, std::uint64_t) {
  unsupported(Op::dropout_forward, y.dtype());
}
void Backend::dropout_backward(const Tensor& dx, const Tensor&, const Tensor&, float) {
  unsupported(Op::dropout_backward, dx.dtype());
}
void Backend::add(const Tensor& c, const Tensor&, const Tensor&) { unsupported(Op::add, c.dtype()); }
void Backend::cast(const Tensor& dst, const Tensor&) { unsupported(Op::cast, dst.dtype()); }
void Backend::convert_layout(const Tensor& dst, const Tensor&) {
  unsupported(Op::convert_layout, dst.dtype());
}
void Backend::scale(const Tensor& t, float) { unsupported(Op::scale, t.dtype()); }
void Backend::check_finite(const Tensor&, const Tensor& t) { unsupported(Op::check_finite, t.dtype()); }
void Backend::softmax_xent_forward(const Tensor&, const Tensor&, const Tensor& logits, const Tensor&,
                                   float) {
  unsupported(Op::softmax_xent_forward, logits.dtype());
}
void Backend::softmax_xent_backward(const Tensor& dlogits, const Tensor&, const Tensor&, float,
                                    float) {
  unsupported(Op::softmax_xent_backward, dlogits.dtype());
}
void Backend::top_k_hits(const Tensor&, const Tensor& logits, const Tensor&, std::int64_t) {
  unsupported(Op::top_k_hits, logits.dtype());
}
void Backend::sgd_update(const Tensor& param, const Tensor&, const Tensor&, const SgdStep&) {
  unsupported(Op::sgd_update, param.dtype());
}
void Backend::adam_update(const Tensor& param, const Tensor&, const Tensor&, const Tensor&,
                          const AdamStep&) {
  unsupported(Op::adam_update, param.dtype());
}
void Backend::lerp(const Tensor& dst, const Tensor&, float) { unsupported(Op::lerp, dst.dtype()); }
std::shared_ptr<OpPlan> Backend::plan_conv2d(const Conv2dDesc& d) { unsupported(Op::conv2d_forward, d.dtype); }
void Backend::conv2d_forward(OpPlan&, const Tensor& y, const Tensor&, const Tensor&) {
  unsupported(Op::conv2d_forward, y.dtype());
}
void Backend::conv2d_backward_data(OpPlan&, const Tensor& dx, const Tensor&, const Tensor&) {
  unsupported(Op::conv2d_backward_data, dx.dtype());
}
void Backend::conv2d_backward_filter(OpPlan&, const Tensor& dw, const Tensor&, const Tensor&,
                                     Accumulate) {
  unsupported(Op::conv2d_backward_filter, dw.dtype());
}
std::shared_ptr<OpPlan> Backend::plan_batchnorm(const BatchNormDesc& d) {
  unsupported(Op::batchnorm_train_forward, d.dtype);
}
void Backend::batchnorm_train_forward(OpPlan&, const Tensor& y, const Tensor&, const Tensor&,
                                      const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                      const Tensor&) {
  unsupported(Op::batchnorm_train_forward, y.dtype());
}
void Backend::batchnorm_infer_forward(OpPlan&, const Tensor& y, const Tensor&, const Tensor&,
                                      const Tensor&, const Tensor&, const Tensor&) {
  unsupported(Op::batchnorm_infer_forward, y.dtype());
}
void Backend::batchnorm_backward(OpPlan&, const Tensor& dx, const Tensor&, const Tensor&,
                                 const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                 const Tensor&) {
  unsupported(Op::batchnorm_backward, dx.dtype());
}
void Backend::batchnorm_stats(OpPlan&, const Tensor&, const Tensor&, const Tensor& x) {
  unsupported(Op::batchnorm_stats, x.dtype());
}
void Backend::batchnorm_backward_reduce(OpPlan&, const Tensor&, const Tensor&, const Tensor& dy, const Tensor&,
                                        const Tensor&, const Tensor&) {
  unsupported(Op::batchnorm_backward_reduce, dy.dtype());
}
void Backend::batchnorm_backward_elemt(OpPlan&, const Tensor& dx, const Tensor&, const Tensor&, const Tensor&,
                                       const Tensor&, const Tensor&, const Tensor&, const Tensor&, std::int64_t) {
  unsupported(Op::batchnorm_backward_elemt, dx.dtype());
}
std::shared_ptr<OpPlan> Backend::plan_pool2d(const Pool2dDesc& d) { unsupported(Op::pool2d_forward, d.dtype); }
void Backend::pool2d_forward(OpPlan&, const Tensor& y, const Tensor&) {
  unsupported(Op::pool2d_forward, y.dtype());
}
void Backend::pool2d_backward(OpPlan&, const Tensor& dx, const Tensor&, const Tensor&, const Tensor&) {
  unsupported(Op::pool2d_backward, dx.dtype());
}
void Backend::global_avgpool_forward(const Tensor& y, const Tensor&) {
  unsupported(Op::global_avgpool_forward, y.dtype());
}
void Backend::global_avgpool_backward(const Tensor& dx, const Tensor&) {
  unsupported(Op::global_avgpool_backward, dx.dtype());
}
void Backend::normalize_image(const Tensor& dst, const Tensor&, const ImageNormalize&) {
  unsupported(Op::normalize_image, dst.dtype());
}

}  // namespace kiln
