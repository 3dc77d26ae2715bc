#!/usr/bin/env bash
# One ResNet-50 step's weight pulls, oneDNN 2.6's reorder against the cpu backend's loop
# (plugins/backend-cpu/ops/plain_to_blocked*.cpp), fp32 and bf16 plans: see weight_pull_bench.cpp.
# usage: bench/weight_pull/run.sh     env: THREADS=1 ROUNDS=7   (-O3 -march=native, as the plugin builds)
# THREADS=1 gives the robust CPU figure on a shared machine (at 2 threads a descheduled OpenMP
# thread makes the other spin, which counts as CPU time of whichever side it hits).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-weight-pull-XXXXXX")
trap 'rm -rf "$out"' EXIT
g++ -O3 -std=c++20 -Wall -Wextra -fopenmp -march=native -I"$root/plugins/backend-cpu" "$here/weight_pull_bench.cpp" \
  "$root/plugins/backend-cpu/ops/plain_to_blocked.cpp" "$root/plugins/backend-cpu/ops/plain_to_blocked_avx512.cpp" -ldnnl -o "$out/bench"
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), ${THREADS:-1} threads, load $(cut -d' ' -f1-3 /proc/loadavg)"
for plan in fp32 bf16; do
  OMP_NUM_THREADS=${THREADS:-1} "$out/bench" "$here/resnet50_$plan.txt" "${ROUNDS:-7}"
done
