#!/usr/bin/env bash
# Every ResNet-50 convolution shape, three directions, with the cpu backend's defaults: ms and
# GFLOP/s per shape and the per-step totals (layer_bench.cpp says how). Builds and runs
# layer_bench.cpp with the given arguments (common/run_plugin_bench.sh).
#
# usage: bench/conv_census/run.sh [--a CONV_DIRECT_MODE] [--batch 8] [--reps 10] [--threads N]
# env:   BUILD=build
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../common/run_plugin_bench.sh" "$here/layer_bench.cpp" conv_census_bench "$@"
