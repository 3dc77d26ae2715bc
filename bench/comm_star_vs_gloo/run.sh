#!/usr/bin/env bash
# Kiln's `gloo` (its default: small all-reduces through a star to rank 0, larger ones on Gloo's
# ring), `gloo` with the star path off (Gloo's ring for every size), the sample communicator
# `star` (samples/05_write_a_communicator_plugin) and PyTorch's gloo, in one invocation on one
# machine: all-reduce time per size (kiln bench-comm's in-place column; PyTorch timed the same
# way by pytorch_gloo.py), then the MLP on Fashion-MNIST trained on 2 ranks with each of Kiln's
# three (samples per second of the last epoch). The sample is built out of tree against an
# install of the build, as its README does.
#
# usage: bench/comm_star_vs_gloo/run.sh [BUILD_DIR]     (default: build)
# env:   WORLDS="2 4" MIN=1K MAX=64M FACTOR=8 ITERS=20 WARMUP=5 EPOCHS=3
#        PYTHON=.venv-bench/bin/python (PyTorch's column is left out without torch)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
build_dir=$(cd "${1:-$source_dir/build}" && pwd)
worlds=${WORLDS:-"2 4"} min=${MIN:-1K} max=${MAX:-64M} factor=${FACTOR:-8}
iters=${ITERS:-20} warmup=${WARMUP:-5} epochs=${EPOCHS:-3}
python=${PYTHON:-$source_dir/.venv-bench/bin/python}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-star-vs-gloo-XXXXXX")
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/sdk/sdk_test_lib.sh"  # install_kiln, build_plugin

install_kiln "$work/prefix" > /dev/null
build_plugin "$source_dir/samples/05_write_a_communicator_plugin" "$work/star" "$work/prefix" > /dev/null
kiln=$work/prefix/bin/kiln
export -n KILN_PLUGIN_PATH
have_torch=0
[[ -x $python ]] && "$python" -c 'import torch.distributed' 2> /dev/null && have_torch=1

echo "# $(date -u +%FT%TZ) $(hostname), CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
     "(family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs)"
echo "# all-reduce, float sum, in-place time per call (us); iters $iters, warmup $warmup; loopback TCP"
for world in $worlds; do
  for variant in gloo gloo-ring star; do
    comm=${variant%-ring}
    extra=()
    [[ $variant == gloo-ring ]] && extra=(--set comm.star_max_bytes=0)
    "$kiln" bench-comm --comm "$comm" "${extra[@]}" --plugin-path "$work/star" --nproc "$world" -b "$min" -e "$max" \
      -f "$factor" -n "$iters" -w "$warmup" -c 1 --json > "$work/$variant-$world.json" 2> "$work/$variant-$world.log" ||
      { cat "$work/$variant-$world.log"; echo "run.sh: bench-comm --comm $variant failed" >&2; exit 1; }
  done
  read -r -a sizes <<< "$(python3 -c 'import json,sys; print(" ".join(str(r["size"]) for r in json.load(open(sys.argv[1]))["results"]))' \
                          "$work/gloo-$world.json")"
  : > "$work/torch-$world.txt"
  if ((have_torch)); then
    port=$((29500 + RANDOM % 1000))
    pids=()
    for ((r = 0; r < world; r++)); do
      RANK=$r WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
        "$python" "$here/pytorch_gloo.py" "${sizes[@]}" --iters "$iters" --warmup "$warmup" \
        > "$work/torch-$world.$r.txt" 2> /dev/null &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    cp "$work/torch-$world.0.txt" "$work/torch-$world.txt"
  fi
  python3 - "$world" "$work/gloo-$world.json" "$work/gloo-ring-$world.json" "$work/star-$world.json" \
    "$work/torch-$world.txt" <<'PY'
import json, sys
world = sys.argv[1]
gloo, ring, star = (json.load(open(p)) for p in sys.argv[2:5])
torch = dict(tuple(map(float, line.split())) for line in open(sys.argv[5]) if line.strip())
wrong = sum(r["out_of_bounds"]["count"] for r in (gloo, ring, star))
print(f"\n## {world} ranks: kiln gloo ({gloo['kiln']['comm_describe']}); gloo ring only; sample star")
print("| size (B) | Kiln gloo (us) | Kiln gloo, ring only (us) | sample star (us) | PyTorch gloo (us) | "
      "ring only / gloo | PyTorch gloo / Kiln gloo |")
print("|---|---|---|---|---|---|---|")
for g, r, s in zip(gloo["results"], ring["results"], star["results"]):
    gt, rt, st = g["in_place"]["time"], r["in_place"]["time"], s["in_place"]["time"]
    pt = torch.get(float(g["size"]))
    print(f"| {g['size']} | {gt:.1f} | {rt:.1f} | {st:.1f} | {f'{pt:.1f}' if pt is not None else '-'} | "
          f"{rt / gt:.2f}x | {(f'{pt / gt:.2f}x' if pt else '-')} |")
if wrong:
    print(f"# {wrong} wrong elements reported (-c 1)")
PY
done

echo
echo "## the MLP on Fashion-MNIST, 2 ranks (--nproc 2), $epochs epochs: samples/s of the last epoch"
echo "| communicator | samples/s | exposed communication (ms per step) | test accuracy |"
echo "|---|---|---|---|"
for variant in gloo gloo-ring star; do
  comm=${variant%-ring}
  extra=()
  [[ $variant == gloo-ring ]] && extra=(--set comm.star_max_bytes=0)
  "$kiln" train --config "$source_dir/samples/fashion-mnist-mlp.toml" --nproc 2 --set comm.type=$comm "${extra[@]}" \
    --set run.epochs="$epochs" --set log.progress=never --plugin-path "$work/star" --run-dir "$work/run-$variant" \
    > "$work/train-$variant.log" 2>&1 || { tail "$work/train-$variant.log"; echo "run.sh: training with $variant failed" >&2; exit 1; }
  python3 - "$variant" "$work/run-$variant/metrics.jsonl" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[2])]
train = [r for r in records if r["split"] == "train"][-1]
test = [r for r in records if r["split"] != "train"][-1]
print(f"| {sys.argv[1]} | {train['samples_per_s']:,.0f} | {train['exposed_comm_ms_per_step']:.2f} | {test['accuracy']:.4f} |")
PY
done
