#!/usr/bin/env bash
# Gloo through Kiln vs Gloo called directly, in one invocation: `kiln bench-comm --comm gloo
# --nproc N` and gloo_allreduce.cpp (compiled here with g++) over the same sizes, busbw side by
# side, and the ratio at 64 MB against the goal (>= 0.95x). Compares bench-comm's in-place
# column (what the direct program measures); out-of-place adds a copy and is shown for context.
#
# usage: bench/comm_vs_gloo/run.sh [BUILD_DIR]     (default: build)
# env:   NPROC=4 MIN=8 MAX=64M FACTOR=2 ITERS=20 WARMUP=5 IFACE=lo ALGO=ring
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
nproc=${NPROC:-4} min=${MIN:-8} max=${MAX:-64M} factor=${FACTOR:-2}
iters=${ITERS:-20} warmup=${WARMUP:-5} iface=${IFACE:-lo} algo=${ALGO:-ring}
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-comm-vs-gloo-XXXXXX")
trap 'rm -rf "$out"' EXIT

# 1. The direct program (rebuilt when its source is newer).
direct=$build/bench/gloo_allreduce
mkdir -p "$build/bench"
if [[ ! -x $direct || $here/gloo_allreduce.cpp -nt $direct ]]; then
  g++ -O2 -std=c++17 -Wall -Wextra "$here/gloo_allreduce.cpp" -lgloo -pthread -o "$direct"
fi

# 2. kiln bench-comm (--json); before `bench-comm` is dispatched by kiln itself, the test driver built
#    from the same source (tests/bench_comm_driver) stands in.
if "$build/bin/kiln" bench-comm --help >/dev/null 2>&1; then
  bench=("$build/bin/kiln" bench-comm)
elif [[ -x $build/tests/bench_comm_driver ]]; then
  bench=("$build/tests/bench_comm_driver" bench-comm)
else
  echo "run.sh: neither '$build/bin/kiln bench-comm' nor $build/tests/bench_comm_driver exists; build kiln first" >&2
  exit 2
fi
echo "# $(date -u +%FT%TZ) $(hostname): $nproc ranks, sizes $min..$max x$factor, iters $iters, warmup $warmup"
echo "# kiln:   ${bench[*]} --comm gloo --set comm.algorithm=$algo --set comm.interface=$iface --nproc $nproc"
"${bench[@]}" --comm gloo --set "comm.algorithm=$algo" --set "comm.interface=$iface" --nproc "$nproc" \
  -b "$min" -e "$max" -f "$factor" -n "$iters" -w "$warmup" -c 1 --json --plugin-path "$build/lib/kiln/plugins" \
  >"$out/kiln.json"

# 3. The direct program, one process per rank, file rendezvous.
mkdir -p "$out/store"
pids=()
for ((r = 0; r < nproc; r++)); do
  RANK=$r WORLD_SIZE=$nproc OMP_NUM_THREADS=1 "$direct" --store "$out/store" --iface "$iface" \
    -b "$min" -e "$max" -f "$factor" -n "$iters" -w "$warmup" >"$out/direct.$r.txt" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "# direct: $(head -1 "$out/direct.0.txt" | sed 's/^# //')"

# 4. Side by side (sizes in bytes); ratio = kiln in-place busbw / direct busbw. The JSON output
#    (nccl-tests' -J schema, docs/bench-comm.md) carries 6 decimals where the table has 2.
python3 - "$out/kiln.json" "$out/direct.0.txt" <<'PY'
import json, sys
kiln = json.load(open(sys.argv[1]))
direct = {}
for line in open(sys.argv[2]):
    f = line.split()
    if line.startswith("#") or len(f) != 5:
        continue
    direct[int(f[0])] = float(f[4])
k, first = kiln["kiln"], (kiln["results"] or [{}])[0]
print(f"# kiln: {k['comm_describe']}, {k['world_size']} ranks, {first.get('type')} {first.get('redop')}")
print(f"{'size(B)':>12}  {'kiln oop busbw':>14}  {'kiln ip busbw':>14}  {'direct busbw':>14}  {'ratio':>7}")
at64 = None
for row in kiln["results"]:
    s, ip, oop = row["size"], row["in_place"]["bus_bw"], row["out_of_place"]["bus_bw"]
    d = direct.get(s)
    ratio = f"{ip / d:.3f}" if d else "-"
    print(f"{s:>12}  {oop:>14.4f}  {ip:>14.4f}  {(f'{d:.4f}' if d is not None else '-'):>14}  {ratio:>7}")
    if s == 64 << 20 and d:
        at64 = ip / d
if kiln["out_of_bounds"]["count"]:
    print(f"# kiln bench-comm reported {kiln['out_of_bounds']['count']} wrong elements")
if at64 is None:
    print("# no 64 MB row (set MAX=64M or more to get the ratio the goal is stated at)")
else:
    print(f"# ratio at 64 MB: {at64:.3f}x (goal >= 0.95x): {'met' if at64 >= 0.95 else 'NOT met'}")
PY
