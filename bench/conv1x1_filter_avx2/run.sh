#!/usr/bin/env bash
# ResNet-50's stride-1 1x1 backward-filters at batch 8: Kiln's AVX2 kernel against oneDNN 2.6's
# backward-weights convolution (+ the reorder to OIHW) and its transposed matmul
# (filter_bench.cpp says how). Runs the binary ROUNDS times per thread count, each printing
# per-layer medians of REPS interleaved repetitions; the first round also checks the results.
# usage: bench/conv1x1_filter_avx2/run.sh        env: THREADS="1 2" ROUNDS=3 REPS=11
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cpu=$(cd "$here/../../plugins/backend-cpu" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-filter-XXXXXX")
trap 'rm -rf "$out"' EXIT
# -O3 as the plugin builds its ops; the kernel picks AVX2 by target attributes, so no -march.
g++ -O3 -std=c++20 -Wall -Wextra -fopenmp -I"$cpu" "$here/filter_bench.cpp" "$cpu/ops/gemm_tn_avx2.cpp" -ldnnl -o "$out/bench"
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
  "(family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs) model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | xargs))," \
  "rounds ${ROUNDS:-3} x reps ${REPS:-11}"
for threads in ${THREADS:-1 2}; do
  for ((i = 0; i < ${ROUNDS:-3}; i++)); do
    echo "## OMP_NUM_THREADS=$threads round $((i + 1)), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    check=()
    [[ $i == 0 ]] && check=(--check)
    OMP_NUM_THREADS=$threads "$out/bench" --reps "${REPS:-11}" "${check[@]}"
  done
done
