#!/usr/bin/env bash
# MPI through Kiln vs MPI called directly vs gloo, in one invocation: `mpirun -np N kiln
# bench-comm --comm mpi`, mpi_allreduce.cpp (compiled here with mpicxx) under the same mpirun,
# and `kiln bench-comm --comm gloo --nproc N` (ring, loopback), over the same sizes; busbw side
# by side (bench-comm's in-place column, what the direct program measures) and the ratio
# kiln mpi / direct MPI at 4 MB against the goal (>= 0.95x). The machine may be shared, so the
# direct program and kiln mpi run alternately REPEAT times and each column is the median.
#
# usage: bench/comm_vs_mpi/run.sh [BUILD_DIR]     (default: build)
# env:   NPROC=4 MIN=1M MAX=64M FACTOR=2 ITERS=20 WARMUP=5 REPEAT=5
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
nproc=${NPROC:-4} min=${MIN:-1M} max=${MAX:-64M} factor=${FACTOR:-2}
iters=${ITERS:-20} warmup=${WARMUP:-5} repeat=${REPEAT:-5}
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-comm-vs-mpi-XXXXXX")
trap 'rm -rf "$out"' EXIT
mpirun=(mpirun -np "$nproc" --oversubscribe)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)

# 1. The direct program (rebuilt when its source is newer).
direct=$build/bench/mpi_allreduce
mkdir -p "$build/bench"
if [[ ! -x $direct || $here/mpi_allreduce.cpp -nt $direct ]]; then
  mpicxx -O2 -std=c++17 -Wall -Wextra -DOMPI_SKIP_MPICXX "$here/mpi_allreduce.cpp" -o "$direct"
fi
kiln=("$build/bin/kiln" bench-comm --plugin-path "$build/lib/kiln/plugins"
      -b "$min" -e "$max" -f "$factor" -n "$iters" -w "$warmup" -c 1 --json)

echo "# $(date -u +%FT%TZ) $(hostname): $nproc ranks, sizes $min..$max x$factor, iters $iters, warmup $warmup, median of $repeat"
for ((i = 0; i < repeat; i++)); do
  "${mpirun[@]}" "$direct" -b "$min" -e "$max" -f "$factor" -n "$iters" -w "$warmup" >"$out/direct.$i.txt"
  "${mpirun[@]}" "${kiln[@]}" --comm mpi >"$out/mpi.$i.json" 2>"$out/mpi.$i.log"
done
"${kiln[@]}" --comm gloo --set comm.algorithm=ring --set comm.interface=lo --nproc "$nproc" >"$out/gloo.json" 2>"$out/gloo.log"
echo "# direct: $(head -1 "$out/direct.0.txt" | sed 's/^# //')"

python3 - "$out" "$repeat" <<'PY'
import json, statistics, sys
out, repeat = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(f"{out}/mpi.{i}.json")) for i in range(repeat)]
gloo = json.load(open(f"{out}/gloo.json"))
mpi = runs[0]
direct_runs = {}
for i in range(repeat):
    for line in open(f"{out}/direct.{i}.txt"):
        f = line.split()
        if not line.startswith("#") and len(f) == 5:
            direct_runs.setdefault(int(f[0]), []).append(float(f[4]))
direct = {s: statistics.median(v) for s, v in direct_runs.items()}
kiln = {}
for r in runs:
    for row in r["results"]:
        kiln.setdefault(row["size"], []).append(row["in_place"]["bus_bw"])
g = {row["size"]: row["in_place"]["bus_bw"] for row in gloo["results"]}
first = mpi["results"][0]  # nccl-tests' JSON schema (docs/bench-comm.md); Kiln's own fields under "kiln"
print(f"# kiln mpi: {mpi['kiln']['comm_describe']}; kiln gloo: {gloo['kiln']['comm_describe']}; "
      f"{mpi['kiln']['world_size']} ranks, {first['type']} {first['redop']}")
print(f"{'size(B)':>12}  {'MPI_Allreduce':>14}  {'kiln mpi':>10}  {'kiln gloo':>10}  {'mpi/direct':>10}")
at4 = None
for row in mpi["results"]:
    s = row["size"]
    ip = statistics.median(kiln[s])
    d = direct.get(s)
    ratio = f"{ip / d:.3f}" if d else "-"
    print(f"{s:>12}  {(f'{d:.4f}' if d is not None else '-'):>14}  {ip:>10.4f}  {g.get(s, float('nan')):>10.4f}  {ratio:>10}")
    if s == 4 << 20 and d:
        at4 = ip / d
for name, j in [("mpi", r) for r in runs] + [("gloo", gloo)]:
    if j["out_of_bounds"]["count"]:
        print(f"# kiln bench-comm --comm {name} reported {j['out_of_bounds']['count']} wrong elements")
if at4 is None:
    print("# no 4 MB row (MIN..MAX must include 4M)")
else:
    print(f"# ratio at 4 MB: {at4:.3f}x (goal >= 0.95x): {'met' if at4 >= 0.95 else 'NOT met'}")
PY
