// Max / average pooling forward and backward through cuDNN, planned once per layer and shape.
//
// Decisions: max pooling is CUDNN_POOLING_MAX_DETERMINISTIC (the backward recomputes the argmax
// from x and y, so it needs both, which the layers pass; NaN propagates, as in PyTorch).
// Average pooling counts the padding in the divisor (CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING),
// the cpu backend's and PyTorch's AvgPool2d default. cuDNN floors the output size with symmetric
// padding exactly as Pool2dDesc::out_h/out_w do (the plan checks it), so windows never reach past
// the cpu backend's far padding. Data is in the plan's dtype; each call runs in the layout of its
// main input (x forward, dy backward) and stages tensors in the other layout.
#include <array>
#include <memory>

#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "kiln/sdk/op_args.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "dnn/cudnn_desc.hpp"
#include "dnn/dnn_check.hpp"
#include "dnn/staging.hpp"

namespace kiln::cuda {
namespace {

using sdk::describe;  // the shared wording (kiln/sdk/op_descs.hpp)

class PoolPlan final : public OpPlan {
 public:
  PoolPlan(const DnnCheck& check, const Pool2dDesc& d)
      : desc(d), in{d.n, d.c, d.h, d.w}, out{d.n, d.c, d.out_h(), d.out_w()} {
    const cudnnPoolingMode_t mode = d.kind == Pool2dDesc::Kind::max
                                        ? CUDNN_POOLING_MAX_DETERMINISTIC
                                        : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    check.cudnn(cudnnSetPooling2dDescriptor(pool.get(), mode, CUDNN_PROPAGATE_NAN,
                                            static_cast<int>(d.kernel_h), static_cast<int>(d.kernel_w),
                                            static_cast<int>(d.pad_h), static_cast<int>(d.pad_w),
                                            static_cast<int>(d.stride_h), static_cast<int>(d.stride_w)),
                [&] { return "cudnnSetPooling2dDescriptor for " + describe(d); });
  }

  struct Setup {
    TensorDesc x, y;
  };

  Setup& setup(const DnnCheck& check, Layout layout) {
    auto& slot = setups_[layout == Layout::nhwc ? 1 : 0];
    if (slot) return *slot;
    auto s = std::make_unique<Setup>();
    s->x.set(check, in, desc.dtype, layout);
    s->y.set(check, out, desc.dtype, layout);
    int n = 0, c = 0, h = 0, w = 0;
    check.cudnn(cudnnGetPooling2dForwardOutputDim(pool.get(), s->x.get(), &n, &c, &h, &w),
                [&] { return "cudnnGetPooling2dForwardOutputDim for " + describe(desc); });
    if (n != out.n || c != out.c || h != out.h || w != out.w) {
      check.fail_library(fmt::format("cuDNN computes a ({}, {}, {}, {}) output for {} but "
                                     "Pool2dDesc gives ({}, {}, {}, {}); report this as a bug",
                                     n, c, h, w, describe(desc), out.n, out.c, out.h, out.w));
    }
    slot = std::move(s);
    return *slot;
  }

  const Pool2dDesc desc;
  const Dims4 in, out;
  PoolDesc pool;

 private:
  std::array<std::unique_ptr<Setup>, 2> setups_;
};

PoolPlan& pool_plan(const DnnCheck& check, OpPlan& plan) {
  auto* p = dynamic_cast<PoolPlan*>(&plan);
  if (p == nullptr) {
    check.fail("the plan passed was not made by the cuda backend's plan_pool2d; pass the plan "
               "this layer got from plan_pool2d for the same shapes");
  }
  return *p;
}

}  // namespace

std::shared_ptr<OpPlan> CudaBackend::plan_pool2d(const Pool2dDesc& d) {
  // The op table (op_table.hpp) decides which dtypes get a plan; anything else is the base refusal.
  if (!supports(Op::pool2d_forward, d.dtype)) unsupported(Op::pool2d_forward, d.dtype);
  const DnnCheck check(Op::pool2d_forward);
  sdk::check_pool2d_desc(check, d);
  auto plan = std::make_shared<PoolPlan>(check, d);
  plan->setup(check, activation_layout(d.dtype));
  return plan;
}

void CudaBackend::pool2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x) {
  const DnnCheck check(Op::pool2d_forward);
  PoolPlan& p = pool_plan(check, plan);
  const Pool2dDesc& d = p.desc;
  sdk::check_pool2d_forward(check, d, sdk::MixedLayouts::accepted, y, x);
  const Layout L = x.layout();
  PoolPlan::Setup& s = p.setup(check, L);
  Staged ys = Staged::output(*this, check, y, y.layout(), p.out, d.dtype, L);
  const float one = 1.0f, zero = 0.0f;
  check.cudnn(cudnnPoolingForward(cudnn(), p.pool.get(), &one, s.x.get(), x.data(), &zero, s.y.get(),
                                  ys.data()),
              [&] {
                return fmt::format("cudnnPoolingForward for {} with y {}, x {} in {}", describe(d),
                                   y.describe(), x.describe(), layout_word(L));
              });
  ys.finish(Accumulate::no);
}

void CudaBackend::pool2d_backward(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                  const Tensor& y) {
  const DnnCheck check(Op::pool2d_backward);
  PoolPlan& p = pool_plan(check, plan);
  const Pool2dDesc& d = p.desc;
  sdk::check_pool2d_backward(check, d, sdk::MixedLayouts::accepted, dx, dy, x, y);
  const Layout L = dy.layout();
  PoolPlan::Setup& s = p.setup(check, L);
  const Staged dys = Staged::input(*this, check, dy, dy.layout(), p.out, d.dtype, L);
  Staged dxs = Staged::output(*this, check, dx, dx.layout(), p.in, d.dtype, L);
  // Average pooling does not read x or y; when the caller gave none, dy and dx stand in (same
  // shapes and descriptors) so cuDNN gets valid pointers.
  const Staged xs = x.defined() ? Staged::input(*this, check, x, x.layout(), p.in, d.dtype, L)
                                : Staged::input(*this, check, dx, L, p.in, d.dtype, L);
  const Staged ys = y.defined() ? Staged::input(*this, check, y, y.layout(), p.out, d.dtype, L)
                                : Staged::input(*this, check, dy, L, p.out, d.dtype, L);
  const float one = 1.0f, zero = 0.0f;
  check.cudnn(cudnnPoolingBackward(cudnn(), p.pool.get(), &one, s.y.get(), ys.data(), s.y.get(),
                                   dys.data(), s.x.get(), xs.data(), &zero, s.x.get(), dxs.data()),
              [&] {
                return fmt::format("cudnnPoolingBackward for {} with dx {}, dy {} in {}",
                                   describe(d), dx.describe(), dy.describe(), layout_word(L));
              });
  dxs.finish(Accumulate::no);
}

}  // namespace kiln::cuda
