#!/usr/bin/env bash
# One command for a fresh machine: install what is missing, build, and run the whole test suite
# (CTest; GPU tests report "skipped" without a device). .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
scripts/build.sh
# The container image (docs/container.md): build the CPU image with podman and check it from outside.
if [[ ${KILN_CONTAINER_TEST:-1} == 0 ]]; then
  echo "run-tests: container test left out (KILN_CONTAINER_TEST=0)"
else
  scripts/test-container.sh
fi
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
# The sanitizer job (docs/reliability.md): core, CPU plugins and chosen tests under ASan + UBSan.
cd .. && scripts/sanitize.sh
