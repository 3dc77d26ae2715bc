#!/usr/bin/env bash
# End-to-end check of samples/05_write_a_communicator_plugin (the `star` communicator) against an
# install of this build, as a third-party author would use it: build it with find_package(Kiln),
# pass every check of the installed `kiln plugins test`, measure it with `kiln bench-comm
# --nproc 2` with every element checked, and train the mlp for one epoch of Fashion-MNIST on 2
# ranks with it and with `gloo`: with two ranks every sum is a + b whichever rank adds, so the
# losses and accuracies must agree bit for bit.
# Usage: build_comm_sample.sh <kiln build dir> <kiln source dir>
set -euo pipefail

# shellcheck source=tests/sdk/sdk_test_lib.sh
source "$(dirname "$0")/sdk_test_lib.sh"
sdk_test_start "$1" "$2" sdk-comm
prefix=$work/prefix
sample_build=$work/star-build

install_kiln "$prefix"
build_plugin "$source_dir/samples/05_write_a_communicator_plugin" "$sample_build" "$prefix"
library=$sample_build/libkiln-comm-star.so
[[ -f $library ]] || fail "the sample build did not produce $library"
require_sdk_only_links "$library"
kiln=$prefix/bin/kiln
export -n KILN_PLUGIN_PATH

step "kiln plugins test on the built library"
passes_plugins_test "$kiln" "$library" 11 "communicator checks"

step "kiln bench-comm --comm star --nproc 2, every element checked"
bench=$("$kiln" bench-comm --comm star --plugin-path "$sample_build" --nproc 2 -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 \
        2> "$work/bench.log") || { echo "$bench"; cat "$work/bench.log"; fail "kiln bench-comm --comm star failed"; }
echo "$bench"
grep -q '^# Out of bounds values : 0 OK' <<< "$bench" || fail "bench-comm found wrong elements with star"

step "kiln train --nproc 2, 1 epoch of Fashion-MNIST, with gloo and with star"
for comm in gloo star; do
  "$kiln" train --config "$source_dir/samples/fashion-mnist-mlp.toml" --nproc 2 --set comm.type=$comm \
    --set run.epochs=1 --set log.progress=never --plugin-path "$sample_build" --run-dir "$work/run-$comm" \
    > "$work/train-$comm.log" 2>&1 || { tail -20 "$work/train-$comm.log"; fail "kiln train with comm.type=$comm failed"; }
done
# Each record's loss and accuracy (timings differ).
numbers() { grep -o '"split": *"[a-z]*", "loss": *[^,]*, "accuracy": *[^,]*' "$1/metrics.jsonl"; }
[[ -n $(numbers "$work/run-star") ]] || fail "no loss or accuracy in $work/run-star/metrics.jsonl"
diff <(numbers "$work/run-gloo") <(numbers "$work/run-star") ||
  fail "training with star differs from training with gloo (above)"
numbers "$work/run-star"
echo "OK"
