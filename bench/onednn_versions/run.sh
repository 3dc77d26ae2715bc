#!/usr/bin/env bash
# Debian's oneDNN 2.6 against a newer oneDNN (and optionally PyTorch's) on ResNet-50's
# convolutions at batch 8, in one invocation: conv_bench.cpp is compiled once against the system
# oneDNN and once against the headers and library under NEW (a prefix with include/ and lib/,
# e.g. a venv with PyPI's onednn-devel-cpu-gomp installed), and the two binaries run alternately
# ROUNDS times so that the load of a shared machine hits both alike. Per dtype and direction it
# prints the median total (ms per training step's worth of that direction) and new/old.
#
# usage: bench/onednn_versions/run.sh                         (NEW defaults to /tmp/onednn-venv)
# env:   NEW=/path/prefix ROUNDS=5 REPS=5 THREADS=2 CLOCK=wall|cpu ARGS="--edge" TORCH_PYTHON=/path/to/python
#        TORCH_ARGS="--dtype f32" (flags for torch_conv.py; pass the same --dtype as in ARGS)
#        CLOCK=cpu times CPU time instead of wall time (the robust figure on a shared machine: use
#        it with THREADS=1, or with OMP_WAIT_POLICY=passive so that waiting threads do not spin).
# setup: python3 -m venv /tmp/onednn-venv && /tmp/onednn-venv/bin/pip install onednn-devel-cpu-gomp==2023.2.0
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
new=${NEW:-/tmp/onednn-venv}
rounds=${ROUNDS:-5} reps=${REPS:-5} threads=${THREADS:-2} clock=${CLOCK:-wall} args=${ARGS:-}
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-onednn-versions-XXXXXX")
trap 'rm -rf "$out"' EXIT

if [[ ! -f $new/include/oneapi/dnnl/dnnl.hpp ]]; then
  echo "run.sh: no oneDNN headers under NEW=$new (install onednn-devel-cpu-gomp there, see the header)" >&2
  exit 2
fi
g++ -O2 -std=c++17 -Wall -Wextra "$here/conv_bench.cpp" -ldnnl -o "$out/old"
g++ -O2 -std=c++17 -Wall -Wextra -I"$new/include" "$here/conv_bench.cpp" -L"$new/lib" \
  -Wl,-rpath,"$new/lib" -ldnnl -o "$out/new"

echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $threads threads, $clock clock, $rounds rounds x $reps reps, args '$args'"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 0; i < rounds; i++)); do
  # shellcheck disable=SC2086  # ARGS is a list of flags
  OMP_NUM_THREADS=$threads "$out/old" --reps "$reps" --clock "$clock" $args >"$out/old.$i.txt"
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=$threads "$out/new" --reps "$reps" --clock "$clock" $args >"$out/new.$i.txt"
  if [[ -n ${TORCH_PYTHON:-} ]]; then
    # shellcheck disable=SC2086  # TORCH_ARGS is a list of flags
    "$TORCH_PYTHON" "$here/torch_conv.py" --reps "$reps" --threads "$threads" --clock "$clock" ${TORCH_ARGS:-} >"$out/torch.$i.txt"
  fi
done
echo "# load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
head -1 "$out/old.0.txt" | sed 's/^/# old: /'
head -1 "$out/new.0.txt" | sed 's/^/# new: /'
[[ -n ${TORCH_PYTHON:-} ]] && head -1 "$out/torch.0.txt" | sed 's/^/# torch: /'

python3 - "$out" "$rounds" "${TORCH_PYTHON:+torch}" <<'PY'
import statistics, sys
out, rounds, torch = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "torch"
def totals(kind):
    runs = {}
    for i in range(rounds):
        for line in open(f"{out}/{kind}.{i}.txt"):
            f = line.split()
            if f and f[0] == "total":
                runs.setdefault((f[1], f[2]), []).append(float(f[3]))
    return {k: (statistics.median(v), min(v), max(v)) for k, v in runs.items()}
old, new = totals("old"), totals("new")
tor = totals("torch") if torch else {}
head = f"{'dtype':5} {'direction':12} {'2.6 ms (min-max)':>22} {'new ms (min-max)':>22} {'new/2.6':>8}"
if torch: head += f" {'torch ms':>10} {'torch/2.6':>9}"
print(head)
for key in old:
    o, n = old[key], new[key]
    row = f"{key[0]:5} {key[1]:12} {o[0]:8.1f} ({o[1]:5.1f}-{o[2]:5.1f}) {n[0]:8.1f} ({n[1]:5.1f}-{n[2]:5.1f}) {n[0] / o[0]:8.2f}"
    if torch and key in tor:
        row += f" {tor[key][0]:10.1f} {tor[key][0] / o[0]:9.2f}"
    print(row)
PY
echo "# implementations (old):"; grep '^impl' "$out/old.0.txt" | sed 's/^/#   /'
echo "# implementations (new):"; grep '^impl' "$out/new.0.txt" | sed 's/^/#   /'
