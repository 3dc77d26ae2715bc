#!/usr/bin/env bash
# Configures and builds Kiln into build/ (Release with debug info). Extra arguments go to CMake.
# KILN_BUILD_TARGETS="a b c" builds only those targets (and what they need) instead of everything:
# scripts/run-main.sh uses it so the first command does not compile every test and CUDA plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
if [[ -n "${KILN_BUILD_TARGETS:-}" ]]; then
  # shellcheck disable=SC2086  # the list is split on purpose
  cmake --build build -j "$jobs" --target ${KILN_BUILD_TARGETS}
else
  cmake --build build -j "$jobs"
fi
