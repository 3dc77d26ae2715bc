#!/usr/bin/env bash
# One command for a fresh machine: install what is missing, build, and run the whole test suite
# (CTest; GPU tests report "skipped" without a device). .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
# Which CPU this run landed on: the same machine kind comes as several CPU families, and some
# tests take different paths on each (AVX2 or AVX-512 kernels, oneDNN's Winograd, bf16, AMX).
cpu_field() { awk -F': ' -v key="$1" '$1 ~ "^" key "[ \t]*$" { print $2; exit }' /proc/cpuinfo; }
isa=$(grep -m1 -ow -E 'avx2|avx512f|avx512_bf16|avx512_fp16|amx_tile|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ' || true)
echo "run-tests: CPU $(cpu_field 'model name') (family $(cpu_field 'cpu family') model $(cpu_field model)), $(nproc) cores; ${isa:-no AVX2}"
# Each stage's wall time, printed at the end: CI has to stay under 30 minutes on 2 cores, and this
# says which stage to look at when it does not.
stage_times=()
timed() { local name=$1 start=$SECONDS; shift; "$@"; stage_times+=("$name $((SECONDS - start)) s"); }
timed setup scripts/setup.sh --tests
# The CUDA plugins are compiled for the GPUs this machine has (CMake's "native"), or, with none,
# for the oldest and newest architectures Kiln supports, 75 and 90: without a GPU the CUDA code can
# only be compiled and linked, and the two ends check that in 2/5 of the time nvcc takes for all
# five (about 110 CPU seconds less in a clean build: docs/building.md). A build for other
# machines names its own list (scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=...; the container
# image builds all five).
if nvidia-smi -L > /dev/null 2>&1; then cuda_architectures=native; else cuda_architectures="75;90"; fi
# -g1 (line tables, no variables) instead of RelWithDebInfo's -g: the same code, and the core's and
# plugins' sources compiled in 457 CPU s instead of 547-628 (three clean builds, 2026-12-06).
timed build scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES="$cuda_architectures" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
# The container image (docs/container.md): build the CPU image with podman and check it from
# outside. Its Kiln is this build's install (--from-build): the image's stages, packages and checks
# are the same, without compiling Kiln a second time. The sanitizer job's build
# (docs/reliability.md) runs beside it: the image build leaves a core idle while it installs
# packages and JupyterLab and while the checks run. Its output goes to a log, shown if it fails;
# its tests run after the suite, on their own.
asan_log=build/sanitize-build.log
parallel_start=$SECONDS
# setsid: its own process group, so that a failed container test can stop the whole build.
setsid scripts/sanitize.sh --build-only > "$asan_log" 2>&1 &
asan_build=$!
if [[ ${KILN_CONTAINER_TEST:-1} == 0 ]]; then
  echo "run-tests: container test left out (KILN_CONTAINER_TEST=0)"
elif ! scripts/test-container.sh --from-build build; then
  kill -- "-$asan_build" 2> /dev/null || true
  wait "$asan_build" 2> /dev/null || true
  exit 1
fi
if ! wait "$asan_build"; then
  tail -n 60 "$asan_log"
  echo "run-tests: the sanitizer build failed (whole log: $asan_log)" >&2
  exit 1
fi
tail -n 1 "$asan_log"
stage_times+=("container test + sanitizer build $((SECONDS - parallel_start)) s")
# One test more than cores: at -j2 the suite kept 1.3 of 2 cores busy (396 CPU s in 306 s), as
# the hung-plugin checks wait out their timeouts and ranks wait for one another; -j3 took 246 s.
timed ctest ctest --test-dir build --output-on-failure -j "$(($(nproc) + 1))" "$@"
timed "sanitizer tests" scripts/sanitize.sh --test-only
# The data plugins and their tests built with clang: the JPEG pipeline's bits must not depend on
# the compiler, nor its reads on an evaluation order (docs/reliability.md).
timed clang scripts/clang-check.sh
printf -v summary '%s, ' "${stage_times[@]}"
echo "run-tests: passed in $SECONDS s: ${summary%, }"
