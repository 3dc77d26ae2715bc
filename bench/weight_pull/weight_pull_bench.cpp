// One ResNet-50 step's weight pulls (the OIHW -> blocked reorders before each forward and
// backward-data convolution, listed in resnet50_<dtype>.txt) done by oneDNN's reorder and by the
// cpu backend's own loop (plugins/backend-cpu/ops/plain_to_blocked.cpp, compiled in), alternately,
// with the caches flushed before each step as in training (the weights come from memory).
// Layouts without a vector kernel are done by oneDNN in both columns, as the backend does.
// Prints the median and range over --rounds of CPU and wall ms per step. run.sh builds and runs it.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ops/plain_to_blocked.hpp"

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}
double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Pull {
  dnnl::memory src, dst;
  dnnl::reorder onednn;
  kiln::cpu::PlainToBlocked kiln;
};

std::string summary(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  char b[96];
  std::snprintf(b, sizeof b, "%.1f ms (%.1f-%.1f)", x[x.size() / 2], x.front(), x.back());
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: weight_pull_bench LAYOUTS.txt [ROUNDS]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const std::map<std::string, tag> tags = {
      {"ABcd8a16b2a", tag::ABcd8a16b2a}, {"AcdB32a2b", tag::AcdB32a2b},   {"AcdB48a2b", tag::AcdB48a2b},
      {"AcdB64a2b", tag::AcdB64a2b},     {"BAcd8a16b2a", tag::BAcd8a16b2a}, {"ABcd16a16b", tag::ABcd16a16b},
      {"Acdb32a", tag::Acdb32a},         {"Acdb48a", tag::Acdb48a},       {"Acdb64a", tag::Acdb64a},
      {"BAcd16a16b", tag::BAcd16a16b},   {"Acdb16a", tag::Acdb16a},       {"OIhw16i16o", tag::OIhw16i16o},
      {"OIhw8i16o2i", tag::OIhw8i16o2i}};
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::vector<Pull> pulls;
  int vectorised = 0;
  std::ifstream in(argv[1]);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string type, layout, shape;
    fields >> type >> layout >> shape;
    dnnl::memory::dims d;
    std::istringstream dims_in(shape);
    for (std::string x; std::getline(dims_in, x, 'x');) d.push_back(std::stol(x));
    const dt t = type == "bf16" ? dt::bf16 : dt::f32;
    const auto found = tags.find(layout);
    if (found == tags.end()) {
      std::fprintf(stderr, "weight_pull_bench: %s: unknown layout '%s' (add it to the table)\n", argv[1], layout.c_str());
      return 2;
    }
    const dnnl::memory::desc plain(d, t, tag::abcd), blocked(d, t, found->second);
    dnnl::memory src(plain, engine), dst(blocked, engine);
    std::memset(src.get_data_handle(), 0x3f, plain.get_size());
    pulls.push_back({src, dst, dnnl::reorder(dnnl::reorder::primitive_desc(engine, plain, engine, blocked)),
                     kiln::cpu::PlainToBlocked(plain, blocked)});
    vectorised += pulls.back().kiln.vectorised();
  }
  std::vector<char> flush(256 << 20, 1);
  std::vector<double> cpu[2], wall[2];
  for (int r = 0; r < rounds; ++r) {
    for (int kiln = 0; kiln < 2; ++kiln) {
      for (std::size_t j = 0; j < flush.size(); j += 64) ++flush[j];
      const double c0 = cpu_ms(), w0 = wall_ms();
      for (Pull& p : pulls) {
        if (kiln && p.kiln.vectorised()) {
          p.kiln.run(p.src.get_data_handle(), p.dst.get_data_handle());
        } else {
          p.onednn.execute(stream, p.src, p.dst);
          stream.wait();
        }
      }
      cpu[kiln].push_back(cpu_ms() - c0);
      wall[kiln].push_back(wall_ms() - w0);
    }
  }
  std::printf("%s: %zu pulls (%d with a vector kernel), %d rounds\n", argv[1], pulls.size(), vectorised, rounds);
  std::printf("  oneDNN reorder: cpu %s, wall %s\n", summary(cpu[0]).c_str(), summary(wall[0]).c_str());
  std::printf("  Kiln loop:      cpu %s, wall %s\n", summary(cpu[1]).c_str(), summary(wall[1]).c_str());
}
