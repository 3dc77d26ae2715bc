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
timed build scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES="$cuda_architectures"
# The container image (docs/container.md): build the CPU image with podman and check it from
# outside. Its Kiln is this build's install (--from-build): the image's stages, packages and checks
# are the same, without compiling Kiln a second time. The builds of the sanitizer job
# (docs/reliability.md) and the second-compiler job run beside it: the image build leaves the
# cores idle while it installs packages and JupyterLab and while the checks run. Their output goes
# to logs, shown if they fail; their tests run after the suite, on their own.
parallel_start=$SECONDS
background_builds=()
# start_build <name> <log> <command...>: setsid gives it its own process group, so that a failed
# container test can stop the whole build.
start_build() {
  local name=$1 log=$2
  shift 2
  setsid "$@" > "$log" 2>&1 &
  background_builds+=("$name:$!:$log")
}
start_build "sanitizer build" build/sanitize-build.log scripts/sanitize.sh --build-only
start_build "clang build" build/clang-build.log scripts/clang-check.sh --build-only
stop_builds() {
  local entry
  for entry in "${background_builds[@]}"; do
    IFS=: read -r _ pid _ <<< "$entry"
    kill -- "-$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
  done
}
if [[ ${KILN_CONTAINER_TEST:-1} == 0 ]]; then
  echo "run-tests: container test left out (KILN_CONTAINER_TEST=0)"
elif ! scripts/test-container.sh --from-build build; then
  stop_builds
  exit 1
fi
for entry in "${background_builds[@]}"; do
  IFS=: read -r name pid log <<< "$entry"
  if ! wait "$pid"; then
    tail -n 60 "$log"
    echo "run-tests: the $name failed (whole log: $log)" >&2
    stop_builds
    exit 1
  fi
  tail -n 1 "$log"
done
stage_times+=("container test + sanitizer and clang builds $((SECONDS - parallel_start)) s")
# One test more than cores: a fifth of the suite's test time is waiting (the hung-plugin checks
# wait out their timeouts, ranks wait for each other), which left a core idle a third of the time.
timed ctest bash -c 'cd build && ctest --output-on-failure -j "$(($(nproc) + 1))" "$@"' ctest "$@"
timed "sanitizer tests" scripts/sanitize.sh --test-only
# The data plugins and their tests built with clang: the JPEG pipeline's bits must not depend on
# the compiler, nor its reads on an evaluation order (docs/reliability.md).
timed "clang tests" scripts/clang-check.sh --test-only
printf -v summary '%s, ' "${stage_times[@]}"
echo "run-tests: passed in $SECONDS s: ${summary%, }"
