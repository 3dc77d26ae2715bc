#!/usr/bin/env bash
# What the collective flight recorder adds to each collective (record_cost.cpp says how), in ns.
# Compiled here with g++ against the build tree's libkiln_core.
#
# usage: bench/collective_record/run.sh [N per round] [rounds]      env: BUILD=build
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${BUILD:-$root/build}" && pwd)
exe=$build/bench/collective_record_cost
mkdir -p "$build/bench"
if [[ ! -x $exe || $here/record_cost.cpp -nt $exe || $build/lib/libkiln_core.so -nt $exe ]]; then
  g++ -O2 -std=c++20 -I"$root/core/include" -I"$root/interfaces" -I"$root/sdk/include" -I"$build/generated" \
    "$here/record_cost.cpp" -L"$build/lib" -lkiln_core -lkiln_sdk -lfmt -Wl,-rpath,"$build/lib" -o "$exe"
fi
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$exe" "$@"
