#!/usr/bin/env bash
# What the non-finite loss check costs a multi-rank run: the main job (MLP on Fashion-MNIST) on
# N ranks over gloo, in alternating rounds of three settings of one build -- the check at every
# step (the default: it rides in the gradients' all-reduce, core/train/loss_mark.hpp), at every
# 100th step, and off (run.stop_on_nonfinite_loss = false) -- and, with OLD_BUILD, the default
# of another build (one from before the check moved into the gradients' sum). Prints the median
# samples/s of each setting's last epoch, and its ratio to "off".
#
# usage: bench/loss_check/run.sh [BUILD_DIR]      (default: build)
# env:   WORLDS="2" ROUNDS=5 EPOCHS=3 OLD_BUILD=/path/to/other/build
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
build_dir=$(cd "${1:-$source_dir/build}" && pwd)
worlds=${WORLDS:-2} rounds=${ROUNDS:-5} epochs=${EPOCHS:-3}
old_build=${OLD_BUILD:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-loss-check-XXXXXX")
trap 'rm -rf "$work"' EXIT
export -n KILN_PLUGIN_PATH

settings=(every-step every-100 off)
[[ -n $old_build ]] && settings+=(old-build)

# run SETTING WORLD ROUND -> samples/s of the last epoch
run() {
  local setting=$1 world=$2 round=$3 kiln=$build_dir/bin/kiln extra=()
  case $setting in
    every-100) extra=(--set run.loss_check_every=100) ;;
    off) extra=(--set run.stop_on_nonfinite_loss=false) ;;
    old-build) kiln=$old_build/bin/kiln ;;
  esac
  local dir=$work/$setting-$world-$round
  "$kiln" train --config "$source_dir/samples/fashion-mnist-mlp.toml" --nproc "$world" --run-dir "$dir" \
    --set run.epochs="$epochs" --set 'comm.type="gloo"' --set log.progress=never --set 'log.level="warn"' \
    "${extra[@]}" > "$dir.log" 2>&1 || { cat "$dir.log"; echo "run.sh: $setting on $world ranks failed" >&2; exit 1; }
  python3 -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([r for r in rows if r["split"]=="train"][-1]["samples_per_s"])' "$dir/metrics.jsonl"
}

echo "# $(date -u +%FT%TZ) $(hostname), CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
     "(family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs)"
echo "# main job, $epochs epochs, $rounds alternating rounds; samples/s of the last epoch (median, min-max)"
echo
echo "| ranks | setting | samples/s | min-max | / off |"
echo "|---|---|---|---|---|"
for world in $worlds; do
  for ((round = 0; round < rounds; ++round)); do
    for setting in "${settings[@]}"; do run "$setting" "$world" "$round" >> "$work/$setting-$world.txt"; done
  done
  python3 - "$work" "$world" "${settings[@]}" <<'PY'
import statistics, sys
work, world, settings = sys.argv[1], sys.argv[2], sys.argv[3:]
rates = {s: [float(x) for x in open(f"{work}/{s}-{world}.txt")] for s in settings}
off = statistics.median(rates["off"])
for s in settings:
    r = rates[s]
    print(f"| {world} | {s} | {statistics.median(r):,.0f} | {min(r):,.0f}-{max(r):,.0f} | "
          f"{statistics.median(r) / off:.2f}x |")
PY
done
