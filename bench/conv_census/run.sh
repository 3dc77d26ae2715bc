#!/usr/bin/env bash
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../common/run_plugin_bench.sh" "$here/layer_bench.cpp" conv_census_bench "$@"
