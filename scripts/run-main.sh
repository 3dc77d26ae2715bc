#!/usr/bin/env bash
# One command for a fresh machine: install what is missing, build, and run the main job
# (the MLP on Fashion-MNIST, 10 epochs on the CPU). Extra arguments go to `kiln train`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec build/bin/kiln train --config samples/fashion-mnist-mlp.toml "$@"
