#!/usr/bin/env bash
# ResNet-50's stride-1 3x3 convolutions through the cpu backend plugin, two `conv3x3` modes side
# by side (layer_bench.cpp says how). Builds and runs layer_bench.cpp with the given arguments
# (common/run_plugin_bench.sh).
#
# usage: bench/conv3x3_winograd/run.sh [--a direct] [--b kiln_winograd] [--batch 8] [--reps 10] [--threads N]
# env:   BUILD=build
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../common/run_plugin_bench.sh" "$here/layer_bench.cpp" conv3x3_layer_bench "$@"
