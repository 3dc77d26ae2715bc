#!/usr/bin/env bash
# Builds Kiln and runs its test suite inside a container of a distribution other than the one CI
# runs on (Debian 12, bookworm): Debian 13 (trixie, the default: GCC 14, Boost 1.83, oneDNN 3.7,
# OpenMPI 5, Python 3.13 with PyTorch 2.6 for the golden data) or Ubuntu 24.04 (noble: GCC 13,
# Boost 1.83, oneDNN 3.1, OpenMPI 4.1, and no PyTorch package). From a copy of this checkout's
# committed tree (HEAD, as CI's clean clone), in a debootstrap minbase image of the release
# (scripts/podman-distro.sh; kept as localhost/kiln-<distro>-base:<suite>): `scripts/setup.sh
# --tests`, a build without CUDA (the image has no toolkit), `ctest`, then the main job
# (scripts/run-main.sh); it prints the test summary, the compiler warnings counted and the main
# job's last line.
# Usage: scripts/test-distro.sh [debian:]<suite> | ubuntu:<suite>     (default debian:trixie;
#        as root on a Debian host: podman, debootstrap)
# Environment: KILN_DISTRO_KEEP=1 keeps the scratch folder (source copy, logs).
# The container runs --privileged: tests/rendezvous makes network namespaces (`ip netns`).
set -euo pipefail
cd "$(dirname "$0")/.."

release=${1:-debian:trixie}
[[ $release == *:* ]] || release=debian:$release
distro=${release%%:*} suite=${release#*:}
case $distro in
  debian | ubuntu) ;;
  *) echo "test-distro: unknown distribution '$distro' in '$1' (debian:<suite> or ubuntu:<suite>)" >&2; exit 2 ;;
esac
image=localhost/kiln-$distro-base:$suite
step() { printf '\n== [%4d s] %s\n' "$SECONDS" "$*"; }
fail() { echo "test-distro: FAILED after $SECONDS s: $*" >&2; exit 1; }

# shellcheck source=scripts/podman-distro.sh
source scripts/podman-distro.sh

step "packages"
podman_debian_packages

work=$(mktemp -d "/var/tmp/kiln-$distro-$suite-XXXXXX")
cleanup() {
  if [[ ${KILN_DISTRO_KEEP:-0} == 1 ]]; then echo "kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
podman_debian_config "$work"

step "base image $image"
"${distro}_base_image" "$suite" "$image" "$work"

step "source: HEAD $(git rev-parse --short HEAD)"
mkdir "$work/src"
git archive HEAD | tar -x -C "$work/src"

step "setup, build and test in $release (log: $work/run.log)"
# shellcheck disable=SC2016  # expanded inside the container
podman run --rm --privileged --network host -v "$work/src:/src" -w /src "$image" bash -c '
  set -euo pipefail
  . /etc/os-release && echo "$PRETTY_NAME"
  scripts/setup.sh --tests
  echo "gcc $(gcc -dumpfullversion), cmake $(cmake --version | head -1 | cut -d" " -f3)"
  start=$SECONDS
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WITH_CUDA=OFF
  cmake --build build -j "$(nproc)" -- -k 0   # every compile error in one go
  echo "built in $((SECONDS - start)) s"
  ctest --test-dir build -j "$(nproc)" --output-on-failure
  echo "main job (scripts/run-main.sh, the README'"'"'s first command):"
  scripts/run-main.sh --run-dir /tmp/main-job 2>&1 | tail -n 1
' > "$work/run.log" 2>&1 || { tail -n 80 "$work/run.log"; fail "setup, the build, the tests or the main job failed in $release (log above)"; }
grep -E '^(Debian|Ubuntu|gcc |-- oneDNN|built in)|tests passed|\(Skipped\)|^SKIPPED' "$work/run.log"
# A compiler's warnings start with file:line:column (not apt's or a test's "warning:" lines).
warnings=$(grep -E '^[^ :]+:[0-9]+:[0-9]+: warning:' "$work/run.log" | sort -u || true)
echo "compiler warnings: $(grep -c . <<< "$warnings" || true)"
[[ -z $warnings ]] || head -n 5 <<< "$warnings"
grep -A1 '^main job' "$work/run.log"
step "$release: built and passed"
