#!/usr/bin/env bash
# Builds and packs build-gpu/, the folder the device tool carries to a lent GPU machine, where
# scripts/gpu-check.sh runs it (docs/gpu-check.md). Run here, from anywhere in the repository.
#
# Decisions: only what the GPU check runs is built (kiln, the cuda backend, the resnet/mlp/
# synthetic/mnist/imagenet/fp32/bf16/fp16/local/nccl plugins and the gpu-labelled tests, sm_90 only); the
# cpu plugin and oneDNN stay behind (40 MiB). The GPU machine has no Debian libraries, so the
# non-CUDA shared libraries the binaries need (ldd) go into build-gpu/carry-libs; CUDA, cuBLAS,
# cuDNN and NCCL come from that machine's Python packages instead. Fashion-MNIST is copied into
# build-gpu/fashion-mnist. The working tree plus build-gpu must stay under the tool's 64 MiB, so
# object files move to build-gpu-stash/ (ignored, not carried; put back with their times before
# the next build, so nothing recompiles) and the total is checked. Logs go there too.
#   scripts/pack-gpu-carry.sh            # JOBS=2 by default; KILN_GPU_BUILD overrides the folder
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${KILN_GPU_BUILD:-$ROOT/build-gpu}
STASH=$BUILD-stash
JOBS=${JOBS:-2}
LIMIT_MIB=64
PLUGINS=(backend-cuda model-resnet model-mlp data-synthetic data-mnist data-imagenet precision-fp32 precision-bf16
         precision-fp16 comm-local comm-nccl)

die() { echo "pack-gpu-carry: $*" >&2; exit 1; }

command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] ||
  die "no nvcc (expected /usr/local/cuda/bin/nvcc): the cuda backend cannot be built here"
case "$BUILD" in
  "$ROOT"/build*) ;;  # .gitignore's /build*/ covers it and its -stash
  *) die "KILN_GPU_BUILD=$BUILD must be a build* folder in $ROOT (ignored by git, carried by the device tool)";;
esac

mkdir -p "$STASH"
if [[ -f $STASH/objects.tar ]]; then
  mkdir -p "$BUILD"
  tar -C "$BUILD" -xpf "$STASH/objects.tar"  # keeps their times: ninja sees them up to date
  rm -f "$STASH/objects.tar"
fi

plugin_list=$(IFS=';'; echo "${PLUGINS[*]}")
echo "== configure $BUILD (sm_90, plugins: $plugin_list)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DKILN_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKILN_CPU_ARCH=x86-64-v3 \
  "-DKILN_PLUGINS=$plugin_list" >"$STASH/configure.log" 2>&1 ||
  { tail -30 "$STASH/configure.log"; die "cmake failed (full log: $STASH/configure.log)"; }

# The gpu-labelled tests, as ctest lists them, and their executables, read from the generated
# CTestTestfile.cmake files (ctest names no command for an executable not built yet); each
# executable is a target of the same name.
mapfile -t GPU_TESTS < <(ctest --test-dir "$BUILD" -N -L gpu --show-only=json-v1 |
  python3 -c 'import json, os, re, sys, pathlib
names = {t["name"] for t in json.load(sys.stdin)["tests"]}
for f in pathlib.Path(sys.argv[1]).rglob("CTestTestfile.cmake"):
    for name, exe in re.findall(r"add_test\(\[=\[(.+?)\]=\] \"([^\"]+)\"", f.read_text()):
        if name in names:
            print(os.path.basename(exe))' "$BUILD" | sort -u)
echo "== gpu-labelled test executables: ${GPU_TESTS[*]:-none}"

# Build only targets that exist (a plugin whose CMakeLists skips itself, e.g. without cuDNN, is
# reported, not fatal: the check will say what is missing).
# (A lookup table, not `printf | grep -q`: under pipefail grep's early exit fails the pipeline.)
declare -A KNOWN=()
while read -r t; do KNOWN[$t]=1; done < <(ninja -C "$BUILD" -t targets all | sed -n 's/^\([^:]*\): .*/\1/p')
targets=()
for t in kiln "${PLUGINS[@]}" "${GPU_TESTS[@]}"; do
  if [[ -n ${KNOWN[$t]:-} ]]; then targets+=("$t"); else echo "   (no target $t: skipped)"; fi
done
echo "== build: ${targets[*]}"
ninja -C "$BUILD" -j"$JOBS" "${targets[@]}" >"$STASH/build.log" 2>&1 ||
  { grep -E "error|FAILED" "$STASH/build.log" | head -30; die "build failed (full log: $STASH/build.log)"; }

# A plugin left over from an earlier configuration (the cpu one above all) must not travel.
declare -A WANTED=()
for p in "${PLUGINS[@]}"; do WANTED[$p]=1; done
for so in "$BUILD"/lib/kiln/plugins/libkiln-*.so; do
  [[ -e $so ]] || continue
  name=$(basename "$so" .so); name=${name#libkiln-}
  [[ -n ${WANTED[$name]:-} ]] || { echo "   removing stale plugin $so"; rm -f "$so"; }
done

echo "== carry-libs (ldd, without glibc, libstdc++ and the CUDA libraries the GPU machine has)"
rm -rf "$BUILD/carry-libs"
mkdir -p "$BUILD/carry-libs"
binaries=("$BUILD/bin/kiln" "$BUILD"/lib/libkiln_core.so* "$BUILD"/lib/kiln/plugins/*.so)
for t in "${GPU_TESTS[@]}"; do [[ -x $BUILD/tests/$t ]] && binaries+=("$BUILD/tests/$t"); done
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libutil|libresolv|libgcc_s|libstdc\+\+|libcuda\.|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink|libnvidia|libdnnl|libkiln)'
for bin in "${binaries[@]}"; do
  [[ -f $bin ]] || continue
  LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  if [[ $soname =~ $skip ]]; then continue; fi
  cp -L "$path" "$BUILD/carry-libs/$soname"
done
ls "$BUILD/carry-libs"

echo "== Fashion-MNIST"
rm -rf "$BUILD/fashion-mnist"
mkdir -p "$BUILD/fashion-mnist"
dpkg -L dataset-fashion-mnist | grep -E 'ubyte(\.gz)?$' | while read -r f; do cp "$f" "$BUILD/fashion-mnist/"; done
[[ -n $(ls "$BUILD/fashion-mnist") ]] || die "no Fashion-MNIST files (apt-get install dataset-fashion-mnist)"

# Object files and precompiled headers (150 MB) are not needed there: stash them outside the
# carried folder.
intermediates=(\( -name '*.o' -o -name '*.a' -o -name '*.gch' \))
(cd "$BUILD" && find . "${intermediates[@]}" -print0 | tar --null -T - -cf "$STASH/objects.tar")
find "$BUILD" "${intermediates[@]}" -delete

build_kib=$(du -sk "$BUILD" | cut -f1)
tree_kib=$(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 du -ck 2>/dev/null | tail -1 | cut -f1)
total_mib=$(( (build_kib + tree_kib + 1023) / 1024 ))
echo "== sizes: build-gpu $((build_kib / 1024)) MiB (carry-libs $(du -sk "$BUILD/carry-libs" | cut -f1) KiB," \
  "fashion-mnist $(du -sk "$BUILD/fashion-mnist" | cut -f1) KiB), working tree $((tree_kib / 1024)) MiB," \
  "total $total_mib MiB of $LIMIT_MIB"
(( total_mib < LIMIT_MIB )) || die "the carry is $total_mib MiB, over the device tool's $LIMIT_MIB MiB"
echo "ready: run scripts/gpu-check.sh on the device with carry [\"$(basename "$BUILD")\"] (docs/gpu-check.md)"
