#!/usr/bin/env bash
# The main job's MLP step op by op through the cpu backend plugin (ops_bench.cpp says how): us
# per call and GFLOP/s. Builds and runs ops_bench.cpp (common/run_plugin_bench.sh).
#
# usage: bench/mlp_ops/run.sh [--threads 1] [--batch 64] [--reps 15]    env: BUILD=build
# To compare two plugin builds, copy each over build/lib/kiln/plugins/ in turn.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../common/run_plugin_bench.sh" "$here/ops_bench.cpp" mlp_ops_bench "$@"
