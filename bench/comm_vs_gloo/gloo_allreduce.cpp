// The reference for `kiln bench-comm --comm gloo`: Gloo called directly, nothing of Kiln.
// Same measurement as bench-comm's in-place half: float sum all-reduce with Gloo's ring
// algorithm (gloo::allreduce, AllreduceOptions::RING, as the gloo plugin's `ring`), TCP
// transport, rendezvous through gloo::rendezvous::FileStore, a barrier before each timed loop,
// each collective complete before the next, time averaged over ranks,
// busbw = algbw * 2(n-1)/n. Rank 0 prints one line per size.
//
// usage: gloo_allreduce --rank R --size N --store DIR [-b 8] [-e 64M] [-f 2] [-n 20] [-w 5]
//                       [--iface lo]   (rank/size default to RANK/WORLD_SIZE)
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Options {
  int rank = -1;
  int size = -1;
  std::string store;
  std::string iface = "lo";
  std::int64_t min_bytes = 8;
  std::int64_t max_bytes = 64 << 20;
  std::int64_t factor = 2;
  int iters = 20;
  int warmup = 5;
};

std::int64_t parse_size(const std::string& text) {
  std::string s = text;
  std::int64_t mult = 1;
  if (!s.empty()) {
    const char c = s.back();
    if (c == 'K' || c == 'k') mult = 1LL << 10;
    if (c == 'M' || c == 'm') mult = 1LL << 20;
    if (c == 'G' || c == 'g') mult = 1LL << 30;
    if (mult != 1) s.pop_back();
  }
  std::size_t used = 0;
  const long long v = std::stoll(s, &used);
  if (used != s.size() || v < 0) throw std::runtime_error("not a size: " + text);
  return v * mult;
}

Options parse(int argc, char** argv) {
  Options o;
  if (const char* r = std::getenv("RANK")) o.rank = std::atoi(r);
  if (const char* w = std::getenv("WORLD_SIZE")) o.size = std::atoi(w);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--rank") o.rank = std::stoi(v);
    else if (a == "--size") o.size = std::stoi(v);
    else if (a == "--store") o.store = v;
    else if (a == "--iface") o.iface = v;
    else if (a == "-b") o.min_bytes = parse_size(v);
    else if (a == "-e") o.max_bytes = parse_size(v);
    else if (a == "-f") o.factor = std::stoll(v);
    else if (a == "-n") o.iters = std::stoi(v);
    else if (a == "-w") o.warmup = std::stoi(v);
    else throw std::runtime_error("unknown option " + a);
  }
  if (o.rank < 0 || o.size < 1 || o.rank >= o.size) throw std::runtime_error("need --rank R --size N (0 <= R < N)");
  if (o.store.empty()) throw std::runtime_error("need --store DIR (a directory every rank can see)");
  if (o.factor < 2 || o.iters < 1 || o.warmup < 0) throw std::runtime_error("need -f >= 2, -n >= 1, -w >= 0");
  return o;
}

void allreduce_ring(const std::shared_ptr<gloo::Context>& ctx, float* data, std::size_t count) {
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setOutput(data, count);
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  gloo::allreduce(opts);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    gloo::transport::tcp::attr attr;
    attr.iface = o.iface;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(o.store);
    gloo::rendezvous::PrefixStore store("gloo-direct", file_store);
    auto context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
    context->setTimeout(std::chrono::seconds(300));
    context->connectFullMesh(store, device);

    std::vector<float> data(static_cast<std::size_t>(o.max_bytes / 4 + 1));
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(1 + (o.rank + i) % 4);
    if (o.rank == 0) {
      std::printf("# gloo direct: ring all-reduce (gloo::allreduce RING), float sum, tcp on %s, %d ranks, "
                  "warmup %d iters %d\n", o.iface.c_str(), o.size, o.warmup, o.iters);
      std::printf("# %10s  %12s  %9s  %8s  %8s\n", "size(B)", "count", "time(us)", "algbw", "busbw");
    }
    for (std::int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
      const std::size_t count = static_cast<std::size_t>(bytes / 4);
      if (count == 0) continue;
      for (int i = 0; i < o.warmup; ++i) allreduce_ring(context, data.data(), count);
      gloo::BarrierOptions barrier(context);
      gloo::barrier(barrier);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iters; ++i) allreduce_ring(context, data.data(), count);
      const auto end = std::chrono::steady_clock::now();
      float t = static_cast<float>(std::chrono::duration<double, std::micro>(end - start).count() / o.iters);
      allreduce_ring(context, &t, 1);  // mean over ranks, as bench-comm does
      const double us = static_cast<double>(t) / o.size;
      const double algbw = static_cast<double>(count * 4) / (us * 1e-6) / 1e9;
      const double busbw = algbw * 2.0 * (o.size - 1) / o.size;
      if (o.rank == 0) {
        std::printf("  %10lld  %12zu  %9.1f  %8.4f  %8.4f\n", static_cast<long long>(count * 4), count, us, algbw, busbw);
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce: %s\n", e.what());
    return 1;
  }
}
