#!/usr/bin/env bash
# Builds one of the A/B layer benchmarks that load the cpu backend plugin (SOURCE, a .cpp including
# common/cpu_plugin.hpp) against the build tree's SDK, rebuilt when the source or a shared
# header is newer, and runs it on the build tree's plugin with the remaining arguments.
#
# usage: bench/common/run_plugin_bench.sh SOURCE EXE_NAME [benchmark arguments]   env: BUILD=build
set -euo pipefail

source=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
name=$2
shift 2
common=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$common/../.." && pwd)
build=$(cd "${BUILD:-$root/build}" && pwd)
exe=$build/bench/$name
mkdir -p "$build/bench"
stale=0
for input in "$source" "$common"/*.hpp; do [[ $input -nt $exe ]] && stale=1; done
if [[ ! -x $exe || $stale == 1 ]]; then
  g++ -O2 -std=c++20 -Wall -Wextra -I"$root/interfaces" -I"$root/sdk/include" "$source" \
    -L"$build/lib" -Wl,-rpath,"$build/lib" -lkiln_sdk -lboost_filesystem -ldl -o "$exe"
fi
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
  "$(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | sed 's/^ /family /'), $(nproc) cores"
exec "$exe" --plugin "$build/lib/kiln/plugins/libkiln-backend-cpu.so" "$@"
