#!/usr/bin/env bash
# ResNet-50's 1x1 stride-1 convolutions at batch 8: oneDNN 2.6's convolution plus Kiln's weight
# edges against a plain strided matmul, per direction, f32 and bf16 (conv1x1_bench.cpp says how).
# The binary runs ROUNDS times per thread count; per layer and total it prints the median over
# rounds (each round already the median of REPS interleaved repetitions) and matmul/(conv+edge).
# usage: bench/conv1x1_matmul/run.sh        env: THREADS="1 2" ROUNDS=3 REPS=11 CLOCK=wall|cpu KILN_EDGES=0|1
# CLOCK=cpu times CPU time (the robust figure on a shared machine at THREADS=1); --check (run the
# binary by hand) first verifies that both ways compute the same result. KILN_EDGES=1 times the
# weight edges with the cpu backend's own loops (compiled in, -O3 -march=native as the plugin
# builds) instead of oneDNN's reorders.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-conv1x1-XXXXXX")
trap 'rm -rf "$out"' EXIT
if [[ ${KILN_EDGES:-0} == 1 ]]; then
  cpu=$(cd "$here/../../plugins/backend-cpu" && pwd)
  g++ -O3 -std=c++20 -Wall -Wextra -fopenmp -march=native -DKILN_EDGES -I"$cpu" "$here/conv1x1_bench.cpp" \
    "$cpu/ops/plain_to_blocked.cpp" "$cpu/ops/plain_to_blocked_avx512.cpp" "$cpu/ops/blocked_to_plain.cpp" -ldnnl -o "$out/bench"
else
  g++ -O2 -std=c++17 -Wall -Wextra "$here/conv1x1_bench.cpp" -ldnnl -o "$out/bench"
fi

echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), rounds ${ROUNDS:-3} x reps ${REPS:-11}, ${CLOCK:-wall} clock, KILN_EDGES=${KILN_EDGES:-0}"
for threads in ${THREADS:-1 2}; do
  echo "## OMP_NUM_THREADS=$threads, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((i = 0; i < ${ROUNDS:-3}; i++)); do
    OMP_NUM_THREADS=$threads "$out/bench" --reps "${REPS:-11}" --clock "${CLOCK:-wall}" --layers >"$out/t$threads.$i.txt"
  done
  echo "## load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  python3 - "$out" "$threads" "${ROUNDS:-3}" <<'PY'
import statistics, sys
out, threads, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
layers, totals = {}, {}
for i in range(rounds):
    for line in open(f"{out}/t{threads}.{i}.txt"):
        f = line.split()
        if f and f[0] == "layer":
            name = " ".join(f[2:f.index("conv")])
            vals = [float(f[f.index(k) + 1]) for k in ("conv", "edge", "matmul")]
            layers.setdefault((f[1], name), []).append(vals)
        elif f and f[0] == "total":
            totals.setdefault((f[1], f[2]), []).append([float(x) for x in f[3:6]])
med = lambda rows: [statistics.median(r[j] for r in rows) for j in range(3)]
print(f"{'dtype':5} {'layer x count direction':48} {'conv':>8} {'edge':>7} {'conv+edge':>9} {'matmul':>8} {'mm/(c+e)':>8}  (ms, median)")
for (dt, name), rows in layers.items():
    c, e, m = med(rows)
    print(f"{dt:5} {name:48} {c:8.3f} {e:7.3f} {c + e:9.3f} {m:8.3f} {m / (c + e):8.2f}")
print(f"{'dtype':5} {'total per step (x count)':48} {'conv':>8} {'edge':>7} {'conv+edge':>9} {'matmul':>8} {'mm/(c+e)':>8}")
sums = {}
for (dt, d), rows in totals.items():
    c, e, m = med(rows)
    s = sums.setdefault(dt, [0, 0, 0]); s[0] += c; s[1] += e; s[2] += m
    print(f"{dt:5} {d:48} {c:8.2f} {e:7.2f} {c + e:9.2f} {m:8.2f} {m / (c + e):8.2f}")
for dt, (c, e, m) in sums.items():
    print(f"{dt:5} {'all three directions':48} {c:8.2f} {e:7.2f} {c + e:9.2f} {m:8.2f} {m / (c + e):8.2f}")
PY
  grep '^impl' "$out/t$threads.0.txt" | sed 's/^/# /'
done
