#!/usr/bin/env bash
# Runs in the Dockerfile's `builder` stage: configures, builds and installs Kiln without its tests,
# then checks that every plugin the image should have is there and loads.
# Usage: build-kiln.sh <source dir> <build dir> <stage dir>   (installs to <stage dir>/usr/local)
# Environment: KILN_CPU_ARCH, CUDA_ARCHITECTURES (from the Dockerfile's build arguments);
#   KILN_PREBUILT=<dir>: take the install tree in <dir> (<dir>/usr/local/...) instead of compiling,
#   then run the same checks. scripts/test-container.sh --from-build makes it from a build done
#   outside the image (CI's own), so that CI does not compile Kiln a second time for the image.
set -euo pipefail
src=$1 build=$2 stage=$3

# CUDA plugins exactly when the toolkit stage brought CUDA: ON makes a missing piece an error.
cuda=OFF
[[ -x /usr/local/cuda/bin/nvcc ]] && cuda=ON

if [[ -n ${KILN_PREBUILT:-} ]]; then
  [[ -x $KILN_PREBUILT/usr/local/bin/kiln ]] || { echo "build-kiln: no usr/local/bin/kiln under KILN_PREBUILT=$KILN_PREBUILT" >&2; exit 1; }
  echo "build-kiln: KILN_WITH_CUDA=$cuda; not compiling: the install tree of a build made outside the image, from $KILN_PREBUILT"
  mkdir -p "$stage"
  cp -a "$KILN_PREBUILT/." "$stage/"
else
  echo "build-kiln: KILN_WITH_CUDA=$cuda, KILN_CPU_ARCH=${KILN_CPU_ARCH}, $(nproc) jobs"
  # The project's RelWithDebInfo optimisation (-O2), without the debug information: the same code
  # that the tests and benchmarks measure, and a smaller image.
  cmake -S "$src" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" \
    -DCMAKE_INSTALL_PREFIX=/usr/local -DKILN_BUILD_TESTS=OFF -DKILN_WITH_CUDA=$cuda \
    -DKILN_CPU_ARCH="${KILN_CPU_ARCH}" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}"
  # The compile's CPU time says what it would take on an idle machine, whatever else runs now.
  TIMEFORMAT="build-kiln: compiled in %R s wall, %U s user + %S s system CPU"
  time cmake --build "$build" -j "$(nproc)"
  # Not --strip: it would drop the section that holds each plugin's descriptor (kilnplug).
  DESTDIR="$stage" cmake --install "$build"
fi

# Every plugin folder of the tree must have produced its library (cuda and nccl only with CUDA),
# and every library must load: no image ships with a plugin quietly missing.
kiln=$stage/usr/local/bin/kiln
plugin_dir=$stage/usr/local/lib/kiln/plugins
missing=()
for dir in "$src"/plugins/*/; do
  name=$(basename "$dir")
  [[ -f $dir/CMakeLists.txt ]] || continue
  [[ $cuda == OFF && ( $name == backend-cuda || $name == comm-nccl ) ]] && continue
  [[ -f $plugin_dir/libkiln-$name.so ]] || missing+=("$name")
done
if ((${#missing[@]})); then
  echo "build-kiln: no library was built for: ${missing[*]}" >&2
  exit 1
fi
LD_LIBRARY_PATH=$stage/usr/local/lib "$kiln" plugins list
if ! LD_LIBRARY_PATH=$stage/usr/local/lib "$kiln" plugins list --json | grep -q '"failures": *\[\]'; then
  echo "build-kiln: some plugin libraries failed to load (see 'kiln plugins list' above)" >&2
  exit 1
fi
