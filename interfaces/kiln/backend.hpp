// Backend: the compute device (plugins `cpu` via oneDNN, `cuda` via cuDNN/cuBLAS).
//
// A backend owns memory, orders work on streams and implements the op set layers need. Ops are
// enqueued on the compute stream in call order and may return before the work is done (CUDA);
// anything that reads results on the host calls synchronize() first or uses an op that says it
// synchronizes. The backend chooses physical layouts and caches whatever it needs per shape
// (oneDNN primitive descriptors, cuDNN algorithms) so the steady state allocates and plans
// nothing. Convolution, batch-norm and pooling take an OpPlan made once per layer and shape,
// which also keeps forward workspaces for backward.
//
// Image activations (4-D, logical N, C, H, W) may sit in memory as Layout::row_major (NCHW) or
// Layout::nhwc (channels-last); every op that takes one honours its layout tag. Convolution
// accepts each operand in either layout (the first layer of a model reads NCHW input and writes
// the backend's activation_layout()); batch-norm, pooling and the element-wise ops need all their
// image operands of one call in one layout and say so otherwise. copy() moves bytes as they are
// (no layout conversion; convert_layout rearranges). Weights are always OIHW row-major, the checkpoint layout.
//
// Every op has a default implementation that throws UnsupportedError naming the backend and the
// op; a backend overrides what it implements and reports it through supports(). Models call
// supports() in build() so a missing op is an error before training, never a silent fallback.
//
// Thread-safety: one thread (the trainer) issues ops; allocate(), copy() into host memory and
// supports() may also be called from DataLoader worker threads, and so may Event::synchronize()
// (the loader waits for a batch's upload before refilling its staging slot).
// Errors: BackendError (library failures, with op and shapes), UnsupportedError, and
// BackendError for out-of-memory saying how much was asked and how much is free.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln {

/// What the run banner prints about a device.
struct DeviceInfo {
  std::string name;              ///< "AMD EPYC (avx512_bf16)", "NVIDIA H200"
  MemoryKind memory = MemoryKind::host;  ///< where Backend::allocate(.., device) puts tensors
  int index = 0;                 ///< device ordinal (CUDA) or 0
  std::int64_t total_memory = 0; ///< bytes, 0 if unknown
  int threads = 0;               ///< CPU threads the backend uses
  std::string detail;            ///< compute capability, ISA, library versions
};

/// Which of the backend's queues an op or event refers to.
enum class StreamKind : std::uint8_t { compute = 0, communication = 1 };

/// A point in a stream's work; others can wait for it. Backend-specific.
class Event {
 public:
  virtual ~Event();
  /// Blocks the calling thread until the work before the event is done.
  virtual void synchronize() = 0;
};

/// Backend-specific state for one layer at one shape: primitive descriptors, chosen algorithms,
/// workspaces. Made by Backend::plan_*; only the backend that made it may use it.
class OpPlan {
 public:
  virtual ~OpPlan();
};

class Backend {
 public:
  virtual ~Backend();

  /// Plugin name ("cpu", "cuda").
  virtual std::string_view name() const = 0;
  /// The device this backend computes on (chosen from the local rank before any device call).
  virtual DeviceInfo device() const = 0;
  /// Whether `op` is implemented for `dtype` (the compute dtype of its main operands).
  virtual bool supports(Op op, DType dtype) const = 0;
  /// The layout layers should give image activations computed in `dtype` so the backend's
  /// convolutions read and write them without reordering (cpu: nhwc; cuda: nhwc for f16/bf16).
  /// Default: row_major.
  virtual Layout activation_layout(DType dtype) const;

  /// Device readings to log with each metrics record (utilisation_pct, memory_used_mib, ...); the
  /// trainer writes each as "device_<name>" into metrics.jsonl. Called from the trainer thread
  /// between steps; cheap (a cached sample). Default: none.
  virtual std::map<std::string, double> counters() const;

  // ---- memory ------------------------------------------------------------------------------
  /// Allocates an uninitialised tensor in `where` (device memory, or pinned/plain host memory for
  /// staging). Thread-safe. Throws BackendError on out-of-memory.
  virtual Tensor allocate(const Shape& shape, DType dtype, MemoryKind where) = 0;
  /// Copies src into dst (equal dtype and numel; any memory kinds), ordered on the compute
  /// stream. A copy into host memory is complete when it returns.
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  /// Sets every element of t to `value` (converted to t's dtype).
  virtual void fill(const Tensor& t, double value) = 0;
  /// Returns a tensor usable by this backend's ops with the contents of a host tensor: the same
  /// tensor on a host backend, a device copy otherwise (in which case `host` must stay alive and
  /// unchanged until the next synchronize(), or until an event recorded on the compute stream
  /// after this call has completed: the copy may only be enqueued when this returns).
  virtual Tensor to_device(const Tensor& host) = 0;

  // ---- ordering ----------------------------------------------------------------------------
  /// Blocks until all work enqueued on every stream is done.
  virtual void synchronize() = 0;
  /// Records an event after the work enqueued so far on `stream`.
  virtual std::shared_ptr<Event> record_event(StreamKind stream) = 0;
  /// Makes later work on `stream` wait for `event` (does not block the host).
  virtual void wait_event(StreamKind stream, const Event& event) = 0;
  /// The native stream handle (cudaStream_t) for communicators that enqueue on it; nullptr on
  /// backends without streams.
  virtual void* native_stream(StreamKind stream) = 0;

  // ---- dense layers ------------------------------------------------------------------------
  /// c(M, N) = alpha * op(a) * op(b) + beta * c [+ bias(N) broadcast over rows].
  /// op(a) is (M, K), op(b) is (K, N). a, b, c row-major 2-D; bias may be undefined.
  virtual void matmul(const Tensor& c, const Tensor& a, Transpose ta, const Tensor& b,
                      Transpose tb, float alpha, float beta, const Tensor& bias);
  /// db(N) (+)= sum over rows of dy(M, N).
  virtual void bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc);

  // ---- element-wise ------------------------------------------------------------------------
  /// y = act(x). x, y same shape (may alias).
  virtual void activation_forward(const Tensor& y, const Tensor& x, Activation act);
  /// dx (+)= dy * act'(x), given x and y = act(x).
  virtual void activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x,
                                   const Tensor& y, Activation act, Accumulate acc);
  /// y = relu(x + residual) (the residual block's tail).
  virtual void add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual);
  /// y = x * mask / (1 - p), mask[i] = (unit_float(derive_seed(seed, i)) >= p), mask stored u8.
  virtual void dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p,
                               std::uint64_t seed);
  /// dx = dy * mask / (1 - p).
  virtual void dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p);
  /// c = a + b (c may alias a or b).
  virtual void add(const Tensor& c, const Tensor& a, const Tensor& b);
  /// dst = src converted to dst's dtype (f32 <-> bf16/f16).
  virtual void cast(const Tensor& dst, const Tensor& src);
  /// dst = src with the same logical (N, C, H, W) elements rearranged into dst's layout tag
  /// (row_major NCHW <-> nhwc; an equal layout is a plain copy). Same dtype (f32, bf16, f16) and
  /// shape; no aliasing. How a layer hands an activation to code that needs one order, e.g.
  /// Flatten's PyTorch (C, H, W) feature order after a channels-last convolution.
  virtual void convert_layout(const Tensor& dst, const Tensor& src);
  /// t *= factor, in place.
  virtual void scale(const Tensor& t, float factor);
  /// flag (i32, 1 element, same memory as t) is set to 1 if any element of t is inf or NaN,
  /// and left unchanged otherwise (so several tensors can share one flag).
  virtual void check_finite(const Tensor& flag, const Tensor& t);

  // ---- loss ----------------------------------------------------------------------------------
  /// Softmax cross-entropy with label smoothing over logits (B, K) and labels (B) i32:
  /// probs (B, K) f32 receives the softmax; stats (2) f32 is accumulated with
  /// [sum of per-sample losses, number of rows whose argmax equals the label].
  /// Target distribution: (1 - smoothing) * onehot + smoothing / K.
  virtual void softmax_xent_forward(const Tensor& probs, const Tensor& stats, const Tensor& logits,
                                    const Tensor& labels, float label_smoothing);
  /// dlogits = scale * (probs - target), the gradient of scale * sum of losses.
  virtual void softmax_xent_backward(const Tensor& dlogits, const Tensor& probs,
                                     const Tensor& labels, float label_smoothing, float scale);
  /// Top-k accuracy's numerator (ImageNet's Acc@5 for k = 5), counted where the logits are:
  /// count (1) f32 += the rows of logits (B, K) f32 whose label (labels (B) i32) is among the k
  /// highest logits, k >= 1. Ties rank as argmax does: a class ranks above the label when its
  /// logit is greater, or equal with a lower index; so a row counts when fewer than k classes
  /// rank above its label (k = 1 counts what softmax_xent_forward's argmax counts), and a row
  /// whose label's logit is NaN never counts. A label outside [0, K) is an error where the
  /// backend can see it (cpu) and a row that does not count where it cannot (cuda).
  virtual void top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels, std::int64_t k);

  // ---- optimizers (fused over flat buffers) --------------------------------------------------
  /// One SGD step over param/grad/momentum of equal shape (momentum undefined if momentum == 0).
  virtual void sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad,
                          const SgdStep& step);
  /// One Adam/AdamW step over param/grad/m/v of equal shape.
  virtual void adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                           const Tensor& grad, const AdamStep& step);
  /// dst += weight * (src - dst) over dst and src f32 of one shape, row-major, weight in [0, 1]:
  /// PyTorch's in-place torch.lerp, and how [ema] keeps its moving average of the weights
  /// (weight = 1 - decay). Computed as PyTorch does, dst + weight * (src - dst) for weight < 0.5
  /// and src - (src - dst) * (1 - weight) otherwise, each rounded once per operation or fused
  /// (a backend may contract a * b + c into one fma), so weight 0 leaves dst and weight 1 gives src
  /// (finite values; as in PyTorch a zero may change sign, and an inf difference gives NaN).
  virtual void lerp(const Tensor& dst, const Tensor& src, float weight);

  // ---- convolution, normalisation, pooling (ResNet) ------------------------------------------
  // What the trainer guarantees, so a backend may cache data derived from a convolution's
  // weights: between a plan's conv2d_forward and the backward calls that follow it in the same
  // step, nothing writes that layer's weights (the optimizer, the precision policy's casts,
  // checkpoint and init loads and the communicators' broadcasts all run outside that window).
  // Across steps there is no such guarantee; a cache kept longer would go stale. A backend that
  // relies on the window still checks the weight's address, size, dtype and layout before reuse.
  virtual std::shared_ptr<OpPlan> plan_conv2d(const Conv2dDesc& desc);
  /// y (N, K, P, Q) = conv(x (N, C, H, W), w (K, C/g, R, S)).
  virtual void conv2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& w);
  virtual void conv2d_backward_data(OpPlan& plan, const Tensor& dx, const Tensor& dy,
                                    const Tensor& w);
  virtual void conv2d_backward_filter(OpPlan& plan, const Tensor& dw, const Tensor& dy,
                                      const Tensor& x, Accumulate acc);

  virtual std::shared_ptr<OpPlan> plan_batchnorm(const BatchNormDesc& desc);
  /// Training forward: normalises with batch statistics, saves mean and 1/sqrt(var + eps) (C, f32)
  /// and updates running mean/var (unbiased variance, PyTorch momentum rule).
  virtual void batchnorm_train_forward(OpPlan& plan, const Tensor& y, const Tensor& save_mean,
                                       const Tensor& save_invstd, const Tensor& x,
                                       const Tensor& gamma, const Tensor& beta,
                                       const Tensor& running_mean, const Tensor& running_var);
  virtual void batchnorm_infer_forward(OpPlan& plan, const Tensor& y, const Tensor& x,
                                       const Tensor& gamma, const Tensor& beta,
                                       const Tensor& running_mean, const Tensor& running_var);
  /// dx = ...; dgamma, dbeta accumulated (parameter gradients).
  virtual void batchnorm_backward(OpPlan& plan, const Tensor& dx, const Tensor& dgamma,
                                  const Tensor& dbeta, const Tensor& dy, const Tensor& x,
                                  const Tensor& gamma, const Tensor& save_mean,
                                  const Tensor& save_invstd);
  // Synchronised batch-norm (model.hpp, BatchNormSync) splits the training forward and backward
  // around cross-rank sums, as PyTorch's SyncBatchNorm does; the caller combines the per-rank
  // results and normalises with batchnorm_infer_forward, passing the global statistics.
  /// The batch's per-channel mean and BIASED variance over (N, H, W) (f32, C), two-pass.
  virtual void batchnorm_stats(OpPlan& plan, const Tensor& mean, const Tensor& var, const Tensor& x);
  /// sum_dy = sum(dy), sum_dy_xhat = sum(dy * (x - mean) * invstd) per channel (f32, C; overwritten).
  virtual void batchnorm_backward_reduce(OpPlan& plan, const Tensor& sum_dy, const Tensor& sum_dy_xhat,
                                         const Tensor& dy, const Tensor& x, const Tensor& save_mean,
                                         const Tensor& save_invstd);
  /// dx = gamma * invstd * (dy - sum_dy / count - xhat * sum_dy_xhat / count), xhat = (x - mean) *
  /// invstd, with the sums (f32, C) and count (values per channel) taken over every rank's batch.
  virtual void batchnorm_backward_elemt(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                        const Tensor& gamma, const Tensor& save_mean,
                                        const Tensor& save_invstd, const Tensor& sum_dy,
                                        const Tensor& sum_dy_xhat, std::int64_t count);

  virtual std::shared_ptr<OpPlan> plan_pool2d(const Pool2dDesc& desc);
  virtual void pool2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x);
  /// dx = pooling backward of dy; x and y are the forward's input and output (max pooling needs
  /// both to find the argmax; average pooling may pass undefined tensors).
  virtual void pool2d_backward(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                               const Tensor& y);
  /// y (N, C) = mean over (H, W) of x (N, C, H, W).
  virtual void global_avgpool_forward(const Tensor& y, const Tensor& x);
  virtual void global_avgpool_backward(const Tensor& dx, const Tensor& dy);

  // ---- input -----------------------------------------------------------------------------------
  /// dst (N, 3, H, W) in the compute dtype = normalised src (N, H, W, 3) u8.
  virtual void normalize_image(const Tensor& dst, const Tensor& src, const ImageNormalize& norm);

 protected:
  /// Throws UnsupportedError("backend 'cpu' does not implement conv2d_forward for bf16 ...").
  [[noreturn]] void unsupported(Op op, DType dtype) const;
};

}  // namespace kiln
