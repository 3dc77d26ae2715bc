#!/usr/bin/env bash
# ResNet-50's strided and 7x7 3x3 convolutions, forward and backward-data through the cpu backend
# plugin, two `conv_direct` modes side by side (layer_bench.cpp says how). Builds and runs
# layer_bench.cpp with the given arguments (common/run_plugin_bench.sh).
#
# usage: bench/conv_direct_avx2/run.sh [--a onednn] [--b kiln_avx2] [--batch 8] [--reps 10] [--threads N]
# env:   BUILD=build
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../common/run_plugin_bench.sh" "$here/layer_bench.cpp" conv_direct_layer_bench "$@"
