#!/bin/sh
# Runs in the Dockerfile's `toolkit` stage, inside BASE_IMAGE: copies the CUDA toolkit, cuDNN and
# NCCL into <out>/usr/local/cuda so that the Debian stages can take them with one COPY, laid out
# as Kiln's CMake expects (headers in include/, libraries in lib64/, like /usr/local/cuda on the
# project's CI machines). A base image without /usr/local/cuda/bin/nvcc leaves <out> empty: a
# CPU-only image. POSIX sh: NVIDIA's images are Ubuntu (dash), a Debian base has dash too.
set -eu
out=${1:?usage: gather-cuda.sh <out dir>}
mkdir -p "$out"
if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "gather-cuda: no /usr/local/cuda/bin/nvcc in the base image: building a CPU-only image"
  exit 0
fi
dest=$out/usr/local/cuda
mkdir -p "$dest"
# /usr/local/cuda is a link to /usr/local/cuda-<version> in NVIDIA's images.
cp -a "$(readlink -f /usr/local/cuda)/." "$dest/"
mkdir -p "$dest/include" "$dest/lib64"

# NVIDIA's images install cuDNN and NCCL as distribution packages: headers in /usr/include (cuDNN
# 9's through update-alternatives links), shared libraries in /usr/lib/<triplet>. Links are
# dereferenced for headers and recreated beside the library they name; static archives stay.
# (No names with spaces here, so the for loops over find are safe; a pipe into `while read`
# would lose found_* in its subshell.)
found_cudnn=no found_nccl=no
# shellcheck disable=SC2044
for header in $(find /usr/include -maxdepth 2 \( -name 'cudnn*.h' -o -name 'nccl*.h' \)); do
  cp -L "$header" "$dest/include/"
done
# shellcheck disable=SC2044
for lib in $(find /usr/lib /usr/lib64 -maxdepth 2 \( -name 'libcudnn*.so*' -o -name 'libnccl*.so*' \) 2>/dev/null); do
  name=$(basename "$lib")
  case $name in libcudnn*) found_cudnn=yes ;; libnccl*) found_nccl=yes ;; esac
  if [ -L "$lib" ]; then
    ln -sf "$(basename "$(readlink -f "$lib")")" "$dest/lib64/$name"
  else
    cp -a "$lib" "$dest/lib64/$name"
  fi
done
# Already inside the toolkit folder in some layouts (e.g. a hand-made base image).
[ -e "$dest/lib64/libcudnn.so" ] && found_cudnn=yes
[ -e "$dest/lib64/libnccl.so" ] && found_nccl=yes
if [ "$found_cudnn" != yes ] || [ "$found_nccl" != yes ]; then
  echo "gather-cuda: the base image has nvcc but cuDNN found: $found_cudnn, NCCL found: $found_nccl;" \
       "use a cudnn-devel image (NCCL comes with NVIDIA's devel images)" >&2
  exit 1
fi
mkdir -p "$out/etc/ld.so.conf.d"
echo /usr/local/cuda/lib64 > "$out/etc/ld.so.conf.d/kiln-cuda.conf"
echo "gather-cuda: $("$dest/bin/nvcc" --version | tail -n 1); cuDNN and NCCL copied to /usr/local/cuda"
