#!/usr/bin/env bash
# The data-source sample end to end, as a plugin author would: install this build to a temporary
# prefix, build samples/04_write_a_data_plugin out of tree with find_package(Kiln) (no build type
# given), check it links libkiln_sdk and not libkiln_core, pass the installed `kiln plugins test`
# on a CSV file made from Fashion-MNIST, then train the mlp from such files with the installed
# kiln and check the test accuracy and that `kiln predict` writes the class names it gave and its row ids.
# Usage: build_data_sample.sh <kiln build dir> <kiln source dir>
set -euo pipefail

# shellcheck source=tests/sdk/sdk_test_lib.sh
source "$(dirname "$0")/sdk_test_lib.sh"
sdk_test_start "$1" "$2" data-sample

prefix=$work/prefix
install_kiln "$prefix"
build_plugin "$source_dir/samples/04_write_a_data_plugin" "$work/csv-build" "$prefix"
library=$work/csv-build/libkiln-data-csv.so
[[ -f $library ]] || fail "the sample build did not produce $library"
grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$work/csv-build/CMakeCache.txt" ||
  fail "kiln_add_plugin did not default the build type to Release"
require_sdk_only_links "$library"

step "making CSV files from Fashion-MNIST"
fmnist=/usr/share/datasets/fashion-mnist
python3 "$source_dir/tests/sdk/idx_to_csv.py" "$fmnist/train-images-idx3-ubyte.gz" \
  "$fmnist/train-labels-idx1-ubyte.gz" 12000 "$work/train.csv"
python3 "$source_dir/tests/sdk/idx_to_csv.py" "$fmnist/t10k-images-idx3-ubyte.gz" \
  "$fmnist/t10k-labels-idx1-ubyte.gz" 2000 "$work/test.csv"

kiln=$prefix/bin/kiln
step "kiln plugins test on the built library, reading the test CSV"
passes_plugins_test "$kiln" "$library" 3 "data checks" --set "data.train.path=\"$work/test.csv\"" \
  --set data.train.scale=0.00392156862745098

step "kiln train: mlp on the csv source, 2 epochs of 12000 rows"
config=$work/csv-mlp.toml
cat > "$config" <<TOML
[run]
epochs = 2
seed = 42
[backend]
type = "cpu"
threads = 1
[model]
type = "mlp"
hidden = [128]
[data.train]
type = "csv"
path = "$work/train.csv"
scale = 0.00392156862745098
class_names = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
[data.eval]
type = "csv"
path = "$work/test.csv"
scale = 0.00392156862745098
[loader]
batch = 64
[optimizer]
type = "adam"
lr = 1e-3
TOML
"$kiln" train --config "$config" --plugin-path "$work/csv-build" --run-dir "$work/run" ||
  fail "kiln train with the csv plugin failed"
accuracy=$(final_eval_accuracy "$work/run")
echo "mlp on csv, 2 epochs of 12000 rows: test accuracy $accuracy"
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.78) }' || fail "test accuracy $accuracy is below 0.78"

step "kiln predict names the classes the plugin named (kept in the checkpoint)"
"$kiln" predict --run-dir "$work/run" --plugin-path "$work/csv-build" --output "$work/pred.csv" --top-k 1 ||
  fail "kiln predict failed"
head -1 "$work/pred.csv" | grep -qx 'index,id,label,label_name,top1,top1_name,prob1' ||
  fail "no id and name columns in $work/pred.csv: $(head -1 "$work/pred.csv")"
# The first test row of Fashion-MNIST is an ankle boot (label 9), on line 1 of test.csv (no
# header): the plugin's sample_id names it.
sed -n 2p "$work/pred.csv" | grep -q '^0,test.csv:1,9,Ankle boot,' || fail "row 0 is not named: $(sed -n 2p "$work/pred.csv")"

step "a malformed row is refused at start-up with file:line:column"
printf '3,0,1\n4,0,x\n' > "$work/bad.csv"
if out=$("$kiln" train --config "$config" --plugin-path "$work/csv-build" --run-dir "$work/bad-run" \
           --set data.train.path="$work/bad.csv" 2>&1); then
  fail "training on $work/bad.csv succeeded"
fi
grep -qF "$work/bad.csv:2:5: 'x' is not a finite number" <<< "$out" || { echo "$out"; fail "no file:line:col message"; }
echo "OK"
