#!/usr/bin/env bash
# Coverage-guided fuzzing of Kiln's parsers (tests/fuzz) with libFuzzer, under ASan and UBSan.
# Usage: scripts/fuzz.sh [--seconds N] [target...]     (default: 60 s for each of all targets)
#
# Builds build-fuzz/ with clang (-DKILN_FUZZ=ON, CUDA off; `scripts/setup.sh --fuzz` installs
# clang and its runtimes), writes each target's seeds to build-fuzz/corpus/<target>/ (the corpus
# grows there from run to run), and runs each target's libFuzzer executable for N seconds on one
# core. A finding stops that target and leaves its input in build-fuzz/findings/<target>/; the
# script then exits 1. Fix the bug, and copy the input into tests/fuzz/regressions/<target>/ so
# that the `fuzz_replay` test keeps it fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
targets=()
while (($#)); do
  case $1 in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    -*) echo "fuzz: unknown option '$1'" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found; run scripts/setup.sh --fuzz" >&2; exit 1; }

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
# Everything is instrumented for coverage (fuzzer-no-link); only the fuzz executables link libFuzzer.
flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_WITH_CUDA=OFF -DKILN_FUZZ=ON \
  "${launcher[@]}" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" -DKILN_TEST_COMPILE_OPTIONS="" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null

if ((${#targets[@]} == 0)); then
  cmake --build build-fuzz --target kiln_fuzz_replay
  mapfile -t targets < <(build-fuzz/tests/kiln_fuzz_replay --list | awk '{print $1}')
fi
cmake --build build-fuzz --target kiln_fuzz_replay "${targets[@]/#/kiln_fuzz_}"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:intercept_tls_get_addr=0"  # scripts/sanitize.sh says why
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
for t in "${targets[@]}"; do
  build-fuzz/tests/kiln_fuzz_replay --target "$t" --write-seeds build-fuzz/corpus
  mkdir -p "build-fuzz/findings/$t"
  echo "fuzz: $t for ${seconds} s"
  # -rss_limit_mb: each parser caps what it allocates far below this; more is a finding.
  if ! build-fuzz/fuzz/kiln_fuzz_"$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="build-fuzz/findings/$t/" -print_final_stats=1 "build-fuzz/corpus/$t" \
      > "build-fuzz/findings/$t.log" 2>&1; then
    echo "fuzz: $t: FINDING, see build-fuzz/findings/$t.log and build-fuzz/findings/$t/" >&2
    status=1
  fi
  grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "build-fuzz/findings/$t.log" | tr '\n' ' '
  echo
done
exit $status
