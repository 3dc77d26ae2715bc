#!/usr/bin/env bash
# Installs Kiln's build and test dependencies from Debian packages (only those missing).
# Usage: scripts/setup.sh [--bench]     --bench also installs python3-torch for bench/.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libboost-program-options-dev libboost-test-dev libboost-filesystem-dev
  libtomlplusplus-dev libspdlog-dev libfmt-dev
  libdnnl-dev libgloo-dev libopenmpi-dev openmpi-bin
  iproute2  # `ip netns`: tests/rendezvous runs two ranks in two network namespaces
  libturbojpeg0-dev libjpeg62-turbo-dev zlib1g-dev
  dataset-fashion-mnist
)
# The PyTorch peer needs an optimised BLAS: without OpenBLAS, Debian's torch falls back to the
# reference BLAS and runs ~15x slower, which would flatter Kiln.
if [[ "${1:-}" == "--bench" ]]; then packages+=(python3-torch python3-numpy libopenblas0-pthread python3-torchvision python3-pil time); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
# The CUDA toolkit, cuDNN and NCCL are expected in /usr/local/cuda when CUDA plugins are built.
