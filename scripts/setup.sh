#!/usr/bin/env bash
# Installs Kiln's build and test dependencies from Debian packages (only those missing).
# Usage: scripts/setup.sh [--tests] [--bench] [--fuzz]
#   --tests also installs what the test suite needs besides the build (python3-torch and
#           python3-torchvision: tests/finetune writes its torchvision reference at test time;
#           python3-jsonschema: tests/config judges `kiln config schema` with it; clang: the
#           second-compiler job, scripts/clang-check.sh);
#   --bench also installs what bench/ needs: Debian's python3-torch (the golden-data reference)
#           and the PyPI peers' venv (scripts/bench-venv.sh);
#   --fuzz  also installs clang and its runtime libraries (libFuzzer, ASan, UBSan) for scripts/fuzz.sh.
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
for arg in "$@"; do
  case "$arg" in
    --tests) packages+=(python3-torch python3-numpy python3-torchvision python3-jsonschema clang) ;;
    --bench) packages+=(python3-torch python3-numpy libopenblas0-pthread python3-torchvision python3-pil time python3-venv) ;;
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    *) echo "setup: unknown option '$arg' (use --tests, --bench and/or --fuzz)" >&2; exit 2 ;;
  esac
done

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
bench=0
for arg in "$@"; do [[ "$arg" == "--bench" ]] && bench=1; done
if ((bench)); then "$(dirname "$0")/bench-venv.sh"; fi
# The CUDA toolkit, cuDNN and NCCL are expected in /usr/local/cuda when CUDA plugins are built.
