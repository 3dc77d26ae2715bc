#!/usr/bin/env bash
# One command for a fresh machine: install what is missing, build what the main job needs, and
# run it (the MLP on Fashion-MNIST, 10 epochs on the CPU). Extra arguments go to `kiln train`.
# Only `kiln` and the CPU plugins the README's first examples load are built (about 40% of the
# tree without CUDA, and none of the CUDA plugins); scripts/run-tests.sh builds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
KILN_BUILD_TARGETS="kiln backend-cpu model-mlp data-mnist comm-local comm-gloo precision-fp32 precision-bf16 precision-fp16" \
  scripts/build.sh
exec build/bin/kiln train --config samples/fashion-mnist-mlp.toml "$@"
