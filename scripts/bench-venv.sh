#!/usr/bin/env bash
# Creates (or checks) the benchmark peers' virtual environment, .venv-bench (KILN_BENCH_VENV
# overrides), from PyPI: torch 2.15.0, torchvision 0.29.2, tensorflow-cpu 2.21.0. Called by
# `scripts/setup.sh --bench`; bench/peers.py runs the peers from it. Debian's python3-torch
# (1.13) is not touched: it stays the reference for the golden test data.
#
# Why torch is installed --no-deps: PyPI has no CPU-only torch for x86-64 Linux (the "+cpu" wheels
# live on PyTorch's own index, which this project cannot reach), and the PyPI wheel declares the
# whole CUDA stack plus triton (~5 GB). Its libraries link only part of it, and torch cannot be
# imported without those parts, so exactly they are installed: the CUDA runtime pieces that
# libtorch_cuda/libtorch_cpu/libtorch_python name in DT_NEEDED (cudart, cublas, cufft, cufile,
# cupti, cusparse and its nvjitlink, nvrtc, cudnn, cusparselt, nccl, nvshmem). Left out: triton
# and cuda-bindings (Python packages only GPU code paths import), cusolver (loaded lazily, by GPU
# linear algebra only) and nvtx. None of these libraries runs a CPU op; they only have to load.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv=${KILN_BENCH_VENV:-$root/.venv-bench}
torch_version=2.15.0
torchvision_version=0.29.2
tf_version=2.21.0

check() {
  "$venv/bin/python" - "$torch_version" "$torchvision_version" "$tf_version" <<'PY' 2>/dev/null
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import torch, torchvision, tensorflow as tf
want = sys.argv[1:]
have = [torch.__version__.split("+")[0], torchvision.__version__.split("+")[0], tf.__version__]
assert have == want, f"have {have}, want {want}"
torch.nn.functional.conv2d(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 3, 3))  # a CPU op really runs
PY
}

if [[ -x "$venv/bin/python" ]] && check; then
  echo "setup: bench venv $venv present (torch $torch_version, torchvision $torchvision_version, tensorflow-cpu $tf_version)"
  exit 0
fi

echo "setup: creating the bench venv $venv from PyPI (about 3 GB; see scripts/bench-venv.sh for why)"
[[ -x "$venv/bin/python" ]] || /usr/bin/python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --no-deps "torch==$torch_version" "torchvision==$torchvision_version"
"${pip[@]}" filelock "typing-extensions>=4.13.0" "sympy>=1.13.3" "networkx>=2.5.1" jinja2 "fsspec>=0.8.5" numpy pillow
"${pip[@]}" "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,cusparse,nvjitlink,nvrtc]==13.2.2" \
  nvidia-cudnn-cu13==9.26.0.51 nvidia-cusparselt-cu13==0.8.1 nvidia-nccl-cu13==2.30.7 nvidia-nvshmem-cu13==3.7.2
"${pip[@]}" "tensorflow-cpu==$tf_version"
if ! check; then
  echo "setup: the bench venv $venv was installed but torch/torchvision/tensorflow do not import; run" >&2
  echo "       $venv/bin/python -c 'import torch, torchvision, tensorflow' to see why" >&2
  exit 1
fi
echo "setup: bench venv ready: $venv"
