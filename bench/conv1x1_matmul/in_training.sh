#!/usr/bin/env bash
# The same comparison inside real training, where operands come cold from memory: `kiln train`
# on samples/resnet50-synthetic.toml (48 samples, batch 8) with backend.conv1x1 = conv and matmul
# alternately, DNNL_VERBOSE=1, and oneDNN's own execution time per primitive summed over steps
# 2-6 (ms per step): the 1x1 stride-1 layers (convolutions in conv mode, matmuls other than the
# classifier's in matmul mode), the other convolutions (the control: the same work in both modes,
# so it shows how much the load moved) and the profile's conv2d rows, whose excess over the
# primitives is the edges (the backend's own loops, not oneDNN primitives) and the op overhead.
# usage (from a build tree's root, after building kiln and the plugins):
#   bench/conv1x1_matmul/in_training.sh        env: PREC=fp32|bf16 PAIRS=3 THREADS=2 KILN=build/bin/kiln
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kiln=${KILN:-$root/build/bin/kiln}
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-conv1x1-training-XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), ${PREC:-fp32}, ${THREADS:-2} threads"
for ((i = 0; i < ${PAIRS:-3}; i++)); do
  for mode in conv matmul; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    DNNL_VERBOSE=1 "$kiln" train --config "$root/samples/resnet50-synthetic.toml" --run-dir "$out/run" \
      --set run.epochs=1 --set data.train.count=48 --set backend.threads="${THREADS:-2}" \
      --set precision.type="${PREC:-fp32}" --set log.progress=never --set checkpoint.every_epochs=0 \
      --set backend.conv1x1=$mode --profile >"$out/log" 2>&1
    rm -rf "$out/run"
    step=$(grep -o '[0-9.]* ms per step' "$out/log" | cut -d' ' -f1)
    rows=$(awk '/^conv2d/ {s += $5} END {printf "%.1f", s}' "$out/log")
    grep '^onednn_verbose,exec' "$out/log" | awk -F, -v mode=$mode -v i=$i -v load="$load" -v step="$step" -v rows="$rows" '
      { n++; line[n] = $0 }
      END {
        start = int(n / 6) + 1  # 6 steps, the first is warm-up
        for (j = start; j <= n; j++) {
          m = split(line[j], f, ","); t = f[m]
          if (f[4] == "matmul") { if (f[m - 1] !~ /1000/) one += t }  # 1000 classes: the classifier
          else if (f[4] == "convolution") { if (line[j] ~ /kh1sh1/) one += t; else other += t }
        }
        printf "%-6s pair %d  1x1 layers %7.1f  other convs %7.1f  profile conv rows %7.1f  step %7.1f ms  (load %s)\n",
               mode, i, one / 5, other / 5, rows, step, load
      }'
  done
done
