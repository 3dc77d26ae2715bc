// The ops of one training step of the main job's MLP (784 -> 128 -> 10, batch 64, Adam) timed one
// by one through the cpu backend plugin itself, on the shapes the step passes: both layers'
// matmuls (forward with the bias, weight gradient, input gradient), the dropout mask and the Adam
// update over all 101,770 parameters, and the gradient arena's zeroing. `kiln train --profile`
// gives the same ops summed over a run; this splits the matmuls by shape and times each op in a
// loop of its own, warm in cache, so a change to one op can be compared on its own.
//
// Output: "<op> <us per call> [<GFLOP/s>]" per op (median of --reps batches of 200 calls), then
// the sum: one step's worth.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../common/bench_clock.hpp"
#include "../common/cpu_plugin.hpp"

using kiln::Tensor;
using kiln::Transpose;

int main(int argc, char** argv) {
  const auto options = kiln_bench::parse_ab_options(argc, argv, {"", "", "", 64, 15, 1});
  if (!options) return 2;
  const std::int64_t batch = options->batch, threads = options->threads;
  const kiln_bench::Plugin p(options->plugin_path);
  // conv_direct is irrelevant here: any option of the plugin's makes a backend with its defaults.
  kiln_bench::Made made = kiln_bench::make_backend(p, "conv_direct", "auto", threads);
  kiln::Backend& be = *made.backend;
  std::printf("# %s\n# batch %ld, %ld threads, %ld reps of 200 calls; us per call (median)\n",
              be.device().detail.c_str(), static_cast<long>(batch), static_cast<long>(threads),
              static_cast<long>(options->reps));
  const auto tensor = [&](kiln::Shape shape, kiln::DType dtype = kiln::DType::f32) {
    Tensor t = be.allocate(shape, dtype, kiln::MemoryKind::device);
    be.fill(t, 0.01);
    return t;
  };
  const std::int64_t params = 128 * 784 + 128 + 10 * 128 + 10;
  Tensor x = tensor({batch, 784}), w1 = tensor({128, 784}), b1 = tensor({128}), h = tensor({batch, 128});
  Tensor w2 = tensor({10, 128}), b2 = tensor({10}), logits = tensor({batch, 10});
  Tensor gw1 = tensor({128, 784}), gw2 = tensor({10, 128}), dh = tensor({batch, 128}), dropped = tensor({batch, 128});
  Tensor mask = tensor({batch, 128}, kiln::DType::u8);
  Tensor param = tensor({params}), m = tensor({params}), v = tensor({params}), grad = tensor({params});
  const double b = static_cast<double>(batch);
  struct Op {
    const char* name;
    std::function<void()> run;
    double flop;
  };
  kiln::AdamStep adam;
  adam.step = 10;
  const std::vector<Op> ops = {
      {"layer 1 forward (x W1^T + b1)", [&] { be.matmul(h, x, Transpose::no, w1, Transpose::yes, 1, 0, b1); },
       2 * b * 784 * 128},
      {"layer 1 weight gradient (+= dy^T x)", [&] { be.matmul(gw1, h, Transpose::yes, x, Transpose::no, 1, 1, Tensor()); },
       2 * b * 784 * 128},
      {"dropout forward (mask + scale)", [&] { be.dropout_forward(dropped, mask, h, 0.2f, 42); }, 0},
      {"layer 2 forward (h W2^T + b2)", [&] { be.matmul(logits, h, Transpose::no, w2, Transpose::yes, 1, 0, b2); },
       2 * b * 128 * 10},
      {"layer 2 weight gradient", [&] { be.matmul(gw2, logits, Transpose::yes, h, Transpose::no, 1, 1, Tensor()); },
       2 * b * 128 * 10},
      {"layer 2 input gradient (dy W2)", [&] { be.matmul(dh, logits, Transpose::no, w2, Transpose::no, 1, 0, Tensor()); },
       2 * b * 128 * 10},
      {"adam update, all parameters", [&] { be.adam_update(param, m, v, grad, adam); }, 0},
      {"zero the gradients (fill)", [&] { be.fill(grad, 0.0); }, 0},
  };
  double step = 0;
  for (const Op& op : ops) {
    for (int i = 0; i < 50; ++i) op.run();
    std::vector<double> per_call;
    for (std::int64_t r = 0; r < options->reps; ++r) {
      const double t0 = kiln_bench::now_ms(false);
      for (int i = 0; i < 200; ++i) op.run();
      per_call.push_back((kiln_bench::now_ms(false) - t0) / 200);
    }
    const double ms = kiln_bench::median(per_call);
    step += ms;
    if (op.flop > 0) std::printf("%-38s %8.2f us %7.1f GFLOP/s\n", op.name, ms * 1e3, op.flop / ms / 1e6);
    else std::printf("%-38s %8.2f us\n", op.name, ms * 1e3);
  }
  std::printf("%-38s %8.2f us\n", "sum (one step's worth)", step * 1e3);
  return 0;
}
