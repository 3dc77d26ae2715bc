#!/usr/bin/env bash
# A plugin built against a drifted contract is refused, never loaded. Installs this build, makes
# two copies of the installed SDK -- one with a virtual added to kiln::DataSource, one with a
# virtual removed from it (counters(), which the sample does not override, so both still
# compile) -- builds the CSV data sample out of tree against each, and checks that the installed
# kiln refuses each with the one-sentence message naming the plugin, both contract fingerprints
# and "rebuild it against this Kiln's SDK", and exits non-zero without crashing. Loaded, either
# library would call the wrong vtable slots (with one virtual added, the run used to abort with
# "free(): invalid pointer"; with one removed, segfault).
# Usage: contract_drift.sh <kiln build dir> <kiln source dir>
set -euo pipefail

# shellcheck source=tests/sdk/sdk_test_lib.sh
source "$(dirname "$0")/sdk_test_lib.sh"
sdk_test_start "$1" "$2" drift

prefix=$work/prefix
install_kiln "$prefix"
kiln=$prefix/bin/kiln
host_fingerprint=$("$kiln" plugins show mnist | sed -nE 's/.*contract ([0-9a-f]{16}).*/\1/p')
[[ $host_fingerprint =~ ^[0-9a-f]{16}$ ]] || fail "kiln plugins show mnist gives no contract fingerprint"

# drifted_sdk <name> <python edit of data_source.hpp>: a copy of the prefix with one edit.
drifted_sdk() {
  local name=$1 edit=$2 copy=$work/sdk-$1
  cp -a "$prefix" "$copy"
  python3 - "$copy/include/kiln/data_source.hpp" "$edit" <<'PY'
import sys
path, edit = sys.argv[1], sys.argv[2]
text = open(path).read()
if edit == "add":
    anchor = "  virtual DatasetInfo describe() const = 0;\n"
    new = anchor + "  virtual std::int64_t shard_hint() const { return 0; }\n"
else:
    anchor = "  virtual std::map<std::string, double> counters() const;\n"
    new = ""
if anchor not in text:
    sys.exit(f"{path}: the line to edit is gone; update tests/sdk/contract_drift.sh")
open(path, "w").write(text.replace(anchor, new))
PY
  build_plugin "$source_dir/samples/04_write_a_data_plugin" "$work/build-$name" "$copy"
}

for drift in add remove; do
  drifted_sdk "$drift" "$drift"
  step "the installed kiln refuses the csv plugin built against the SDK with one virtual $([[ $drift == add ]] && echo added || echo removed)"
  status=0
  out=$("$kiln" train --config "$source_dir/samples/fashion-mnist-mlp.toml" --set data.train.type=csv \
          --set data.train.path=/nonexistent.csv --plugin-path "$work/build-$drift" \
          --run-dir "$work/run-$drift" 2>&1) || status=$?
  echo "$out" | tail -3
  ((status != 0)) || fail "kiln train loaded a plugin built against a drifted contract"
  ((status < 128)) || fail "kiln died from signal $((status - 128)) instead of refusing the plugin"
  for expected in "plugin 'csv' ($work/build-$drift/libkiln-data-csv.so) was built against Kiln contract" \
                  "but this kiln's contract is $host_fingerprint" "rebuild it against this Kiln's SDK"; do
    grep -qF -- "$expected" <<< "$out" || fail "the refusal lacks '$expected'"
  done
  plugin_fingerprint=$(sed -nE "s/.*was built against Kiln contract ([0-9a-f]{16}).*/\1/p" <<< "$out" | head -1)
  [[ $plugin_fingerprint != "$host_fingerprint" ]] || fail "the drifted SDK has the host's fingerprint"
done
echo "OK"
