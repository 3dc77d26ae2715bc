#!/usr/bin/env bash
# Installs Kiln's build and test dependencies from Debian packages (only those missing), on Debian
# 12 or 13, or on Ubuntu 24.04 (its universe component holds oneDNN, Gloo, toml++ and
# Fashion-MNIST; Ubuntu names libjpeg-turbo's package differently and packages no PyTorch).
# Usage: scripts/setup.sh [--tests] [--bench] [--fuzz]
#   --tests also installs what the test suite needs besides the build (python3-torch and
#           python3-torchvision: tests/finetune writes its torchvision reference at test time;
#           python3-jsonschema: tests/config judges `kiln config schema` with it; clang and
#           its OpenMP, libomp-dev: the second-compiler job, scripts/clang-check.sh);
#   --bench also installs what bench/ needs: Debian's python3-torch (the golden-data reference)
#           and the PyPI peers' venv (scripts/bench-venv.sh);
#   --fuzz  also installs clang, its OpenMP and its runtime libraries (libFuzzer, ASan, UBSan:
#           libclang-rt-dev) for scripts/fuzz.sh.
# libomp-dev and libclang-rt-dev are the packages of the distribution's default clang (14 in
# Debian 12, 19 in 13, 18 in Ubuntu 24.04).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libboost-program-options-dev libboost-test-dev libboost-filesystem-dev
  libtomlplusplus-dev libspdlog-dev libfmt-dev
  libdnnl-dev libgloo-dev libopenmpi-dev openmpi-bin
  iproute2  # `ip netns`: tests/rendezvous runs two ranks in two network namespaces
  libturbojpeg0-dev zlib1g-dev
  dataset-fashion-mnist
)
distro=$(. /etc/os-release 2> /dev/null && echo "${ID:-}")
# Debian's PyTorch (1.13 in 12, 2.6 in 13) writes the fine-tuning tests' torchvision reference at
# test time (and made the committed golden data). Ubuntu 24.04 has no python3-torch: there those
# tests report skipped, and -DKILN_REFERENCE_PYTHON=<a python with torch and torchvision> makes
# them run (docs/building.md).
torch=(python3-torch python3-torchvision)
if [[ $distro == ubuntu ]]; then
  packages+=(libjpeg-turbo8-dev)
  torch=()
else
  packages+=(libjpeg62-turbo-dev)
fi
# The PyTorch peer needs an optimised BLAS: without OpenBLAS, Debian's torch falls back to the
# reference BLAS and runs ~15x slower, which would flatter Kiln.
wants_torch=0 bench=0
for arg in "$@"; do
  case "$arg" in
    --tests) packages+=("${torch[@]}" python3-numpy python3-jsonschema clang libomp-dev); wants_torch=1 ;;
    --bench) packages+=("${torch[@]}" python3-numpy libopenblas0-pthread python3-pil time python3-venv); wants_torch=1 bench=1 ;;
    --fuzz) packages+=(clang libomp-dev libclang-rt-dev) ;;
    *) echo "setup: unknown option '$arg' (use --tests, --bench and/or --fuzz)" >&2; exit 2 ;;
  esac
done
if ((wants_torch)) && ((${#torch[@]} == 0)); then
  echo "setup: $distro packages no PyTorch; the tests that compare with it will report skipped"
fi

# install_missing <package>...: apt-get installs those not installed yet.
install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    echo "setup: all packages present"
    return
  fi
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update
  # A package no source offers would otherwise end in apt's "Unable to locate package".
  local unavailable=() candidate
  for p in "${missing[@]}"; do
    # awk reads all of apt-cache's output (grep -q would stop early, and pipefail see a SIGPIPE).
    candidate=$(apt-cache policy "$p" 2> /dev/null | awk '$1 == "Candidate:" { print $2 }')
    [[ -n $candidate && $candidate != "(none)" ]] || unavailable+=("$p")
  done
  if ((${#unavailable[@]})); then
    echo "setup: no apt source of this machine offers ${unavailable[*]}" >&2
    if [[ $distro == ubuntu ]]; then
      echo "setup: on Ubuntu they are in the universe component: sudo add-apt-repository universe" >&2
    fi
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
}

install_missing "${packages[@]}"
if ((bench)); then "$(dirname "$0")/bench-venv.sh"; fi
# The CUDA toolkit, cuDNN and NCCL are expected in /usr/local/cuda when CUDA plugins are built.
