#!/usr/bin/env bash
# End-to-end check of samples/06_write_a_backend (the `naive` backend) against an install of this
# build, as a third-party author would use it: build it with find_package(Kiln), pass every line
# of the installed `kiln plugins test` (6 backend checks and 30 op groups in f32, with the bf16
# and f16 variants reported as not supported, not run), then train the mlp for one epoch of
# Fashion-MNIST on it and on the `cpu` backend and compare the two runs.
#
# Why the runs agree only within a tolerance: both see the same batches and drop the same
# elements (the loader and the dropout masks are functions of the seed alone, kiln/rng.hpp), but
# their f32 results differ in rounding: oneDNN sums in f32 in its own blocked order, the naive
# backend sums in double and rounds once. That is ~1e-7 per op; Adam then divides each gradient
# by its running RMS, which can turn tiny differences in near-zero gradient entries into
# full-size differences in their updates, so the weights drift apart over the epoch's 937 steps.
# Measured (2-core machine): the 100-step windows' train losses identical for the first 300
# steps, then up to 0.3% apart; the epoch's train loss 0.03% apart, the test loss 0.7%, the test
# accuracy 0.2 points. The limits below are 2% per train loss, 3% for the test loss and 1 point
# (100 of 10,000 images) for the test accuracy: loose enough for rounding, far tighter than a
# run that does not learn or learns from wrong data.
# Every op is held to the float64 reference by `kiln plugins test` itself; this checks that the
# backend works in a real run (the loader's threads, the trainer's ordering, the model's layers).
# Usage: build_backend_sample.sh <kiln build dir> <kiln source dir>
set -euo pipefail

# shellcheck source=tests/sdk/sdk_test_lib.sh
source "$(dirname "$0")/sdk_test_lib.sh"
sdk_test_start "$1" "$2" sdk-backend
prefix=$work/prefix
sample_build=$work/naive-build

install_kiln "$prefix"
build_plugin "$source_dir/samples/06_write_a_backend" "$sample_build" "$prefix"
library=$sample_build/libkiln-backend-naive.so
[[ -f $library ]] || fail "the sample build did not produce $library"
require_sdk_only_links "$library"
kiln=$prefix/bin/kiln
export -n KILN_PLUGIN_PATH

step "kiln plugins test on the built library"
# 6 checks (make, device, ops, memory, events, threads) and one line per op group.
passes_plugins_test "$kiln" "$library" 36 "backend lines"
grep -q 'all 32 ops in f32; 0 of 32 in bf16; 0 of 32 in f16' <<< "$tested" ||
  fail "the ops line does not say every op in f32 and none in bf16 or f16"
# Every op group that has 16-bit variants (25 of the 30) ran in f32 alone and lists them as not
# run (none run, none failed).
not_run=$(grep -c '^  ok    [a-z0-9_]* *f32[_a-z0-9, ]*: .*; not supported, not run: bf16.*f16' <<< "$tested" || true)
[[ $not_run == 25 ]] ||
  fail "expected 25 op groups that ran in f32 only, each with bf16/f16 'not supported, not run' (found $not_run)"

step "kiln train, 1 epoch of Fashion-MNIST (mlp), on naive and on cpu"
# cpu runs the sample config as it is; naive the same less the cpu backend's `threads` key,
# which naive does not declare (the core refuses such a key), with backend.type set.
sample_config=$source_dir/samples/fashion-mnist-mlp.toml
sed -e '/^threads = /d' "$sample_config" > "$work/mlp-naive.toml"
for backend in naive cpu; do
  config=$sample_config
  [[ $backend == naive ]] && config=$work/mlp-naive.toml
  "$kiln" train --config "$config" --set backend.type=$backend --set run.epochs=1 --set log.progress=never \
    --set log.every_steps=100 --set checkpoint.every_epochs=0 --plugin-path "$sample_build" \
    --run-dir "$work/run-$backend" > "$work/train-$backend.log" 2>&1 ||
    { tail -20 "$work/train-$backend.log"; fail "kiln train with backend.type=$backend failed"; }
  grep -F 'epoch   1/1' "$work/train-$backend.log" | sed "s/^/$backend: /"
done

# field <run> <split> <name>: that field of every record of `split` in metrics.jsonl, one a line.
field() {
  grep "\"split\": *\"$2\"" "$work/run-$1/metrics.jsonl" | sed -E "s/.*\"$3\": *([0-9.eE+-]+).*/\\1/"
}
# within <a> <b> <relative limit>: |a - b| <= limit * |b|.
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * (b < 0 ? -b : b)) }'; }

naive_steps=$(field naive train_step loss)
cpu_steps=$(field cpu train_step loss)
[[ $(wc -l <<< "$naive_steps") == 9 ]] || fail "expected 9 train_step records (every 100 of 937 steps) from naive"
first=$(head -1 <<< "$naive_steps")
last=$(tail -1 <<< "$naive_steps")
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.6 * f) }' ||
  fail "naive: the train loss did not drop (steps 1-100: $first, steps 801-900: $last)"
paste <(echo "$naive_steps") <(echo "$cpu_steps") | while read -r n c; do
  within "$n" "$c" 0.02 || fail "a 100-step train loss differs by more than 2%: naive $n, cpu $c"
done

train_naive=$(field naive train loss) train_cpu=$(field cpu train loss)
test_naive=$(field naive test loss) test_cpu=$(field cpu test loss)
acc_naive=$(field naive test accuracy) acc_cpu=$(field cpu test accuracy)
echo "train loss: naive $train_naive, cpu $train_cpu"
echo "test loss:  naive $test_naive, cpu $test_cpu"
echo "test accuracy: naive $acc_naive, cpu $acc_cpu"
within "$train_naive" "$train_cpu" 0.02 || fail "the epoch's train loss differs by more than 2%"
within "$test_naive" "$test_cpu" 0.03 || fail "the test loss differs by more than 3%"
awk -v a="$acc_naive" -v b="$acc_cpu" 'BEGIN { d = a - b; exit !(d <= 0.01 && d >= -0.01) }' ||
  fail "the test accuracy differs by more than 1 point"
awk -v a="$acc_naive" 'BEGIN { exit !(a >= 0.80) }' || fail "naive: test accuracy $acc_naive is below 0.80"

seconds_naive=$(field naive train time_s) seconds_cpu=$(field cpu train time_s)
awk -v n="$seconds_naive" -v c="$seconds_cpu" \
  'BEGIN { printf "epoch time: naive %.1f s, cpu %.2f s (naive %.0fx slower)\n", n, c, n / c }'
echo "OK"
