#!/usr/bin/env bash
# The second-compiler job: the data plugins and their tests (CTest label `data`) built with clang
# into build-clang/ (Release, CUDA off), then those tests run. Two things only a second compiler
# shows:
#   - the JPEG pipeline's output bits are the compiler's no more: test_imagenet_pinned compares
#     clang's samples with the hashes GCC 12 recorded (the resampler writes every rounding out,
#     plugins/data-imagenet/resample_kernels.hpp);
#   - code whose meaning hangs on an order the language leaves open (function arguments): the
#     folder reader once took a buffer's data() before the read that reallocated it, which GCC's
#     right-to-left order hid and clang's left-to-right order turned into a read of freed memory.
# About a minute on 2 cores without ccache. `scripts/setup.sh --tests` installs clang and its
# OpenMP (libomp-dev).
# --all builds the whole tree (CUDA off) and runs every test instead: 63 of 63 passed on
# 2026-12-05, in about 5 minutes without ccache; CI runs the data part only, to stay within its time.
# Usage: scripts/clang-check.sh [--all] [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [[ ${1:-} == --all ]]; then all=1; shift; fi
command -v clang++ > /dev/null || { echo "clang-check: clang++ not found; run scripts/setup.sh --tests" >&2; exit 1; }
start=$(date +%s)
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WITH_CUDA=OFF \
  "${launcher[@]}" > /dev/null
if ((all)); then
  cmake --build build-clang -j "$(nproc)"
  echo "clang-check: built the whole tree with $(clang++ --version | head -n 1) in $(($(date +%s) - start)) s"
  (cd build-clang && ctest --output-on-failure -j "$(nproc)" "$@")
  exit
fi
# The tests labelled `data`, by name (each test is its own target); their plugins come as dependencies.
# Except test_predict_images: it drives the whole kiln binary, whose CLI, cpu backend and model
# would be more than a third of this job's compile (~75 s of CI); test_imagenet reads the same
# unlabeled `files` layout under clang, and `--all` runs test_predict_images too.
skip='^test_predict_images$'
mapfile -t tests < <(ctest --test-dir build-clang -N -L data -E "$skip" | sed -n 's/^ *Test *#[0-9]*: //p')
[[ ${#tests[@]} -gt 0 ]] || { echo "clang-check: no tests labelled 'data' in build-clang" >&2; exit 1; }
cmake --build build-clang -j "$(nproc)" --target data-imagenet data-mnist "${tests[@]}"
echo "clang-check: built ${#tests[@]} tests with $(clang++ --version | head -n 1) in $(($(date +%s) - start)) s"
(cd build-clang && ctest --output-on-failure -j "$(nproc)" -L data -E "$skip" "$@")
