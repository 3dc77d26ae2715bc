#!/usr/bin/env bash
# Issue 13's CPU measurements in one go, for a session that lands on a CPU family
# docs/benchmarks.md has no figures for, or old ones (the family list at the top of that file).
# Runs, one after the other so that none disturbs another's timing:
#   1. the MLP against PyTorch and TensorFlow, 1 thread (--write: replaces this family's table)
#      and its step op by op (bench/mlp_ops)
#   2. the JPEG train transform against torchvision, one core
#   3. fp16 against fp32: ResNet-50 second-epoch times, two alternating pairs
#   4. `kiln train --profile` of one fp32 and one bf16 ResNet-50 epoch (the per-op tables)
#   5. ResNet-50's stride-1 3x3 layers, direct against Kiln's Winograd (bench/conv3x3_winograd)
#   6. ResNet-50 against PyTorch and TensorFlow, fp32 and bf16, ROUNDS rounds (--write)
#   7. ResNet-50's backward-filters outside Winograd, oneDNN's against Kiln's AVX2 kernel (bench/conv_filter_avx2)
#   8. ResNet-50's strided and 7x7 3x3s, oneDNN's against Kiln's AVX2 direct convolution
#      (bench/conv_direct_avx2), then every convolution shape with the defaults (bench/conv_census)
#   9. ResNet-50 fine-tuning with frozen layers against PyTorch, ROUNDS rounds (--write;
#      bench/finetune_vs_pytorch.py, ~12 minutes; not in the default set)
# Every output goes under OUT, one log per step; the script ends by printing where. Steps 2-5,
# 7 and 8 are for writing up by hand (docs/benchmarks.md says what each section records).
#
# Takes, on 2 cores: about 16 minutes plus step 6, which is ~10 minutes on a CPU with bf16
# kernels and ~50 with ROUNDS=3 on an AVX2-only one (PyTorch's autocast bf16 runs there at ~0.4
# img/s). Needs the build (scripts/build.sh) and the bench venv (scripts/setup.sh --bench).
#
# usage: bench/cpu_family_sweep.sh        env: OUT=dir ROUNDS=3 STEPS="1 2 3 4 5 6 7 8" (9 on request)
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
py=$root/.venv-bench/bin/python
kiln=$root/build/bin/kiln
for need in "$py" "$kiln"; do
  [[ -x $need ]] || { echo "cpu_family_sweep: $need is missing; run scripts/setup.sh --bench and scripts/build.sh" >&2; exit 2; }
done
family=$(cd bench && "$py" -c 'import peers; print(peers.family_key())')
out=${OUT:-/tmp/kiln-sweep-$family-$(date -u +%Y%m%dT%H%M%SZ)}
rounds=${ROUNDS:-3}
steps=${STEPS:-1 2 3 4 5 6 7 8}
mkdir -p "$out"
echo "cpu_family_sweep: family $family ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), logs in $out"

failed=()
# step NAME COMMAND...: runs COMMAND with its output in $out/NAME.log, timing it.
step() {
  local name=$1
  shift
  local start=$SECONDS
  echo "== $name: $*"
  if "$@" >"$out/$name.log" 2>&1; then
    echo "   done in $((SECONDS - start)) s"
  else
    echo "   FAILED after $((SECONDS - start)) s (see $out/$name.log)"
    failed+=("$name")
  fi
}

# One ResNet-50 epoch on synthetic data; prints the second epoch's line when there are two.
resnet_epochs() {
  local precision=$1 epochs=$2 count=$3
  shift 3
  local dir
  dir=$(mktemp -d)
  "$kiln" train --config samples/resnet50-synthetic.toml --run-dir "$dir/run" --set run.epochs="$epochs" \
    --set data.train.count="$count" --set backend.threads=2 --set precision.type="$precision" \
    --set log.progress=never --set checkpoint.every_epochs=0 "$@"
  local rc=$?
  rm -rf "$dir"
  return $rc
}

fp16_pairs() {
  for pair in 1 2; do
    for precision in fp32 fp16; do
      echo -n "pair $pair $precision: "
      resnet_epochs "$precision" 2 48 2>&1 | grep "epoch   2/2" || return 1
    done
  done
}

profiles() {
  resnet_epochs fp32 1 64 --profile || return 1
  # bf16 without bf16 kernels is emulation, which the bf16 policy runs only when allowed.
  resnet_epochs bf16 1 64 --profile --set precision.allow_emulated=true
}

for s in $steps; do
  case $s in
    1) step mlp "$py" bench/mlp_vs_pytorch.py --threads 1 --epochs 5 --write && step mlp_ops bench/mlp_ops/run.sh ;;
    2) step jpeg env KILN_BENCH_VENV="$root/.venv-bench" "$py" bench/imagenet_transform/run.py --build build --images 1000 ;;
    3) step fp16_vs_fp32 fp16_pairs ;;
    4) step profiles profiles ;;
    5) step conv3x3_winograd bench/conv3x3_winograd/run.sh --reps 7 ;;
    6) step resnet50 "$py" bench/resnet50_vs_pytorch.py --threads 2 --steps 10 --rounds "$rounds" --write ;;
    7) step conv_filter_avx2 bench/conv_filter_avx2/run.sh --reps 7 ;;
    8) step conv_direct_avx2 bench/conv_direct_avx2/run.sh --reps 7 && step conv_census bench/conv_census/run.sh --reps 5 ;;
    9) step finetune "$py" bench/finetune_vs_pytorch.py --threads 2 --steps 10 --rounds "$rounds" --write ;;
    *) echo "cpu_family_sweep: no step $s (steps are 1-9)" >&2; exit 2 ;;
  esac
done

echo "cpu_family_sweep: logs in $out"
if ((${#failed[@]})); then
  echo "cpu_family_sweep: failed: ${failed[*]}" >&2
  exit 1
fi
