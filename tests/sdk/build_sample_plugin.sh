#!/usr/bin/env bash
# End-to-end SDK check: install this build to a temporary prefix, build the out-of-tree sample
# plugin (samples/03_write_a_model_plugin) against it with find_package(Kiln), load it with the
# installed `kiln plugins show`, `check` and `test` (its contract checks must pass), then train it
# with the installed `kiln train` for one epoch of the full Fashion-MNIST in each of fp32, bf16
# and fp16 and require >= 0.80 test accuracy in each: the
# sample has no casts, so this checks that the trainer, not the model, does mixed precision.
# Usage: build_sample_plugin.sh <kiln build dir> <kiln source dir>
# Any failure exits non-zero with the step that failed.
set -euo pipefail

# shellcheck source=tests/sdk/sdk_test_lib.sh
source "$(dirname "$0")/sdk_test_lib.sh"
sdk_test_start "$1" "$2" sdk-test
prefix=$work/prefix
sample_build=$work/sample-build

install_kiln "$prefix"
build_plugin "$source_dir/samples/03_write_a_model_plugin" "$sample_build" "$prefix"
library=$sample_build/libkiln-model-logreg.so
[[ -f $library ]] || fail "the sample build did not produce $library"
require_sdk_only_links "$library"

kiln=$prefix/bin/kiln

step "kiln plugins show logreg"
show=$(env -u KILN_PLUGIN_PATH "$kiln" plugins show logreg --plugin-path "$sample_build") || {
  echo "$show"; fail "kiln plugins show logreg failed"; }
echo "$show"
for expected in "Name        logreg" "Kind        model" "Library     $library" "in_features" \
                "num_classes"; do
  grep -qF -- "$expected" <<< "$show" || fail "'kiln plugins show logreg' lacks '$expected'"
done

step "kiln plugins check and kiln plugins test on the built library"
check=$(env -u KILN_PLUGIN_PATH "$kiln" plugins check "$library" --plugin-path "$sample_build") || {
  echo "$check"; fail "kiln plugins check $library failed"; }
echo "$check"
grep -qF "Found by a run  yes: $sample_build is entry 1" <<< "$check" || fail "'kiln plugins check' does not find it"
passes_plugins_test "$kiln" "$library" 8 "model checks"

step "kiln train with model.type=logreg, 1 epoch of Fashion-MNIST in fp32, bf16 and fp16"
# The MLP sample's [model] table has keys logreg does not take (hidden, activation, dropout) and
# unknown keys are errors, so train from a copy whose [model] keeps only keys both models share.
config=$work/fashion-mnist-logreg.toml
awk '/^\[/ { in_model = ($0 ~ /^\[model\][[:space:]]*$/) }
     !in_model || !/^[[:space:]]*[A-Za-z_]+[[:space:]]*=/ || /^[[:space:]]*(type|num_classes)[[:space:]]*=/' \
  "$source_dir/samples/fashion-mnist-mlp.toml" > "$config"
min_accuracy=0.80

summary="logreg 1 epoch:"
for precision in fp32 bf16 fp16; do
  extra=()
  # The casts, not the speed, are under test: a CPU without native bf16 must run it as well.
  [[ $precision == bf16 ]] && extra=(--set precision.allow_emulated=true)
  run_dir=$work/run-$precision
  "$kiln" train --config "$config" \
    --set model.type=logreg --set run.epochs=1 --set precision.type=$precision "${extra[@]}" \
    --set log.progress=never --plugin-path "$sample_build" --run-dir "$run_dir" \
    || fail "kiln train with the logreg plugin failed under precision.type=$precision"
  [[ -s $run_dir/metrics.jsonl ]] || fail "training under $precision wrote no $run_dir/metrics.jsonl"
  accuracy=$(final_eval_accuracy "$run_dir")
  [[ -n $accuracy ]] || fail "no test accuracy in $run_dir/metrics.jsonl under $precision"
  awk -v a="$accuracy" -v m="$min_accuracy" 'BEGIN { exit !(a >= m) }' ||
    fail "logreg under $precision reached test accuracy $accuracy after 1 epoch, below $min_accuracy"
  summary+=$(printf ' %s %.3f' "$precision" "$accuracy")
done
echo "$summary"
echo "OK"
