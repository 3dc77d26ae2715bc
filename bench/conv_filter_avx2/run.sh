#!/usr/bin/env bash
# ResNet-50's convolution backward-filters through the cpu backend plugin, two `conv_filter` modes
# side by side (layer_bench.cpp says how). Compiles layer_bench.cpp against the build tree's SDK
# (rebuilt when the source or the shared header is newer) and runs it with the given arguments.
#
# usage: bench/conv_filter_avx2/run.sh [--a onednn] [--b kiln_avx2] [--batch 8] [--reps 10] [--threads N]
# env:   BUILD=build
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${BUILD:-$root/build}" && pwd)
exe=$build/bench/conv_filter_layer_bench
mkdir -p "$build/bench"
if [[ ! -x $exe || $here/layer_bench.cpp -nt $exe || $here/../common/cpu_plugin.hpp -nt $exe ]]; then
  g++ -O2 -std=c++20 -Wall -Wextra -I"$root/interfaces" -I"$root/sdk/include" "$here/layer_bench.cpp" \
    -L"$build/lib" -Wl,-rpath,"$build/lib" -lkiln_sdk -lboost_filesystem -ldl -o "$exe"
fi
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
  "$(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | sed 's/^ /family /'), $(nproc) cores"
exec "$exe" --plugin "$build/lib/kiln/plugins/libkiln-backend-cpu.so" "$@"
