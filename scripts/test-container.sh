#!/usr/bin/env bash
# Builds the CPU-only Kiln image (docker/Dockerfile) with podman and checks it from outside:
#   1. kiln and every CPU plugin load in the image (`kiln plugins list`, the entrypoint's default);
#   2. the main job (`kiln train`, MLP on Fashion-MNIST, 10 epochs) reaches the usual accuracy;
#   3. JupyterLab answers its API on the mapped port with the token and refuses without it;
#   4. sshd accepts the given key, refuses another key, and offers no password login;
#   5. the sample notebook (samples/start-here.ipynb) runs from top to bottom, over SSH;
#   6. the out-of-tree plugin samples/03 builds inside against the installed SDK, passes
#      `kiln plugins test`, is found in ~/.local/lib/kiln/plugins (kiln's per-user folder, made
#      group-writable as a umask of 002 makes it: the user's private group passes the trust rule)
#      and trains.
# Needs root on Debian: installs podman, runc and debootstrap (apt), makes a Debian bookworm
# minbase image with debootstrap from the mirror apt uses here and imports it with podman (kept
# as localhost/kiln-debian-base:bookworm and reused by later runs), then builds with
# `--network host`, runc and a containers.conf with `default_ulimits = []`. Nothing here skips:
# a step that cannot run fails the script. scripts/run-tests.sh (CI) calls it.
# Every image the build makes carries the label org.kiln.container-test; on exit the images of
# earlier runs are removed and this run's are kept, tagged $cache_repo:*, as the next run's layer
# cache, so repeated runs hold one build's images instead of adding ~2 GB each.
# Usage: scripts/test-container.sh [--from-build DIR]
#   --from-build DIR  the image's Kiln is the install tree of the build in DIR (CMake's install,
#                     CUDA plugins left out, debug information stripped) instead of a compile in
#                     the image's builder stage; every other stage and check is the same, and the
#                     image's own configuration (tests off, x86-64-v3) is configured here, not
#                     compiled. CI passes its own build: compiling Kiln a second time inside the
#                     image took 446 CPU-seconds of a CI that has to stay under 30 minutes.
# Environment: KILN_CONTAINER_NO_CACHE=1 builds every layer afresh (a cold image);
#              KILN_CONTAINER_KEEP=1 keeps the test image, earlier runs' images and the scratch folder.
set -euo pipefail
cd "$(dirname "$0")/.."
from_build=""
case ${1:-} in
  --from-build) from_build=${2:?"--from-build needs a build directory"}; shift 2 ;;
  "") ;;
  *) echo "usage: $0 [--from-build DIR]" >&2; exit 2 ;;
esac

base_image=localhost/kiln-debian-base:bookworm
image=localhost/kiln:cpu-test
test_label=org.kiln.container-test
cache_repo=localhost/kiln-container-test-cache
min_accuracy=0.87         # README: the main job ends at 0.875-0.882 (seeds 42, 1, 2)
min_plugin_accuracy=0.80  # samples/03: one epoch of logreg, as tests/sdk/build_sample_plugin.sh

passed=0
step() { printf '\n== [%3d s] %s\n' "$SECONDS" "$*"; }
ok() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { echo "test-container: FAILED after $SECONDS s: $*" >&2; exit 1; }

# shellcheck source=scripts/podman-distro.sh
source scripts/podman-distro.sh

step "packages"
podman_debian_packages
python=/usr/bin/python3

work=$(mktemp -d /var/tmp/kiln-container-test-XXXXXX)
container=kiln-test-$$

# keep_only_this_runs_images: a multi-stage build leaves each stage's last image untagged (the
# builder stage alone is ~1.8 GB); podman removes none of them, and they are also what makes the
# next build's layers cached. So: tag this run's untagged stage images (their ids are the "--> id"
# lines of build.log) and its test image as $cache_repo:*, move the tags off the previous run's,
# and prune the untagged images that carry this test's label -- only ever images this script built.
keep_only_this_runs_images() {
  local ref id stage=0
  for ref in $(podman images --filter "reference=$cache_repo" --format '{{.Repository}}:{{.Tag}}'); do
    podman untag "$ref" "$ref" > /dev/null 2>&1 || true
  done
  if [[ -s $work/build.log ]]; then
    for id in $(podman images --filter dangling=true --filter "label=$test_label" --format '{{.ID}}'); do
      if grep -q "^--> ${id:0:11}" "$work/build.log"; then
        stage=$((stage + 1))
        podman tag "$id" "$cache_repo:stage-$stage"
      fi
    done
  fi
  podman tag "$image" "$cache_repo:final" > /dev/null 2>&1 || true
  podman untag "$image" "$image" > /dev/null 2>&1 || true
  podman image prune -f --filter "label=$test_label" > /dev/null || true
}

cleanup() {
  podman rm -f "$container" > /dev/null 2>&1 || true
  if [[ ${KILN_CONTAINER_KEEP:-0} == 1 ]]; then
    echo "kept: image $image, scratch $work"
  else
    keep_only_this_runs_images
    rm -rf "$work"
  fi
}
trap cleanup EXIT

podman_debian_config "$work"

step "base image $base_image"
debian_base_image bookworm "$base_image" "$work"

# stage_install_tree <build dir> <out dir>: the build's CMake install under <out dir>/usr/local, as
# the builder stage would install it for a CPU image: without the CUDA plugins (the image has no
# CUDA libraries to load them with) and without debug information (build-kiln.sh compiles without
# -g; --strip-debug keeps the plugins' descriptor section, which a full strip would drop).
stage_install_tree() {
  local build=$1 out=$2
  [[ -f $build/CMakeCache.txt ]] || fail "--from-build $build: not a CMake build directory"
  # Up to date with this tree: a no-op right after CI's own build.
  cmake --build "$build" -j "$(nproc)" > "$work/from-build.log" 2>&1 || { tail -n 30 "$work/from-build.log"; fail "building $build failed"; }
  DESTDIR=$out cmake --install "$build" --prefix /usr/local > "$work/install.log" 2>&1 || { tail -n 30 "$work/install.log"; fail "cmake --install $build failed"; }
  rm -f "$out"/usr/local/lib/kiln/plugins/libkiln-backend-cuda.so "$out"/usr/local/lib/kiln/plugins/libkiln-comm-nccl.so
  find "$out/usr/local/bin" "$out/usr/local/lib" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec strip --strip-debug {} +
  # What the builder stage would configure differently (tests off, the portable -march): its
  # CMake must still configure, though only a build by hand compiles it.
  cmake -S . -B "$work/configure-image" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_TESTS=OFF \
    -DKILN_WITH_CUDA=OFF -DKILN_CPU_ARCH=x86-64-v3 > "$work/configure-image.log" 2>&1 \
    || { tail -n 30 "$work/configure-image.log"; fail "the image's configuration (KILN_BUILD_TESTS=OFF) does not configure"; }
}

step "podman build (CPU-only image) $image"
# --jobs 2: the runtime stage's pip install runs beside the builder's compile.
build_args=(--network host --jobs 2 -f docker/Dockerfile -t "$image" --label "$test_label=1"
            --build-arg BASE_IMAGE="$base_image" --build-arg OS_IMAGE="$base_image")
# JupyterLab comes from PyPI: give pip this host's CA bundle, which also trusts a TLS-intercepting
# proxy's CA where the host has one (a build secret: it is not stored in the image).
[[ -s /etc/ssl/certs/ca-certificates.crt ]] && build_args+=(--secret "id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt")
[[ ${KILN_CONTAINER_NO_CACHE:-0} == 1 ]] && build_args+=(--no-cache)
if [[ -n $from_build ]]; then
  stage_install_tree "$from_build" "$work/prebuilt"
  digest=$(cd "$work/prebuilt" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c 1-16)
  echo "Kiln from $from_build: $(du -sm "$work/prebuilt" | cut -f 1) MB installed, digest $digest; the image's configuration (tests off) configures"
  build_args+=(--volume "$work/prebuilt:/prebuilt:ro" --build-arg KILN_PREBUILT=/prebuilt
               --build-arg KILN_PREBUILT_DIGEST="$digest")
fi
build_start=$SECONDS
podman build "${build_args[@]}" . > "$work/build.log" 2>&1 || { tail -n 60 "$work/build.log"; fail "podman build failed (log above)"; }
build_seconds=$((SECONDS - build_start))
grep -E '^(build-kiln|gather-cuda):' "$work/build.log" || true
echo "image built in $build_seconds s ($(podman image inspect --format '{{.Size}}' "$image" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"

# The image's user (uid 1000) writes the runs; the checks read them from here.
runs=$work/runs
mkdir -p "$runs"
chown 1000:1000 "$runs"

# final_test_accuracy <run dir>: the accuracy of the last "test" record of metrics.jsonl.
final_test_accuracy() {
  "$python" - "$1/metrics.jsonl" << 'PY'
import json, sys
tests = [r for r in map(json.loads, filter(str.strip, open(sys.argv[1]))) if r.get("split") == "test"]
print(tests[-1]["accuracy"] if tests else "")
PY
}
at_least() { awk -v a="$1" -v m="$2" 'BEGIN { exit !(a >= m) }'; }

step "1. kiln and its plugins, as the entrypoint's default command"
plugins=$(podman run --rm "$image" plugins list --json) || fail "'kiln plugins list' failed in the image"
for dir in plugins/*/; do
  name=$(basename "$dir")
  [[ -f $dir/CMakeLists.txt && $name != backend-cuda && $name != comm-nccl ]] || continue
  grep -q "libkiln-$name.so" <<< "$plugins" || fail "plugin $name is not in the image ('kiln plugins list')"
done
grep -q '"failures": *\[\]' <<< "$plugins" || fail "plugins failed to load in the image: $plugins"
ok "every CPU plugin of plugins/ loads in the image"

step "2. the main job: kiln train --config samples/fashion-mnist-mlp.toml (10 epochs)"
podman run --rm -v "$runs:/runs" "$image" \
  train --config samples/fashion-mnist-mlp.toml --run-dir /runs/main --set log.progress=never \
  || fail "kiln train (the main job) failed in the container"
accuracy=$(final_test_accuracy "$runs/main")
[[ -n $accuracy ]] || fail "the main job wrote no test record to $runs/main/metrics.jsonl"
at_least "$accuracy" "$min_accuracy" || fail "the main job reached test accuracy $accuracy, below $min_accuracy"
ok "main job test accuracy $accuracy (>= $min_accuracy)"

step "3. JupyterLab and sshd (the image's default: no arguments)"
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
jupyter_port=$(free_port)
ssh_port=$(free_port)
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
ssh-keygen -q -t ed25519 -N '' -C kiln-test -f "$work/key"
ssh-keygen -q -t ed25519 -N '' -C not-authorized -f "$work/other-key"
podman run -d --name "$container" -v "$runs:/runs" \
  -p "127.0.0.1:$jupyter_port:8888" -p "127.0.0.1:$ssh_port:2222" \
  -e JUPYTER_TOKEN="$token" -e SSH_AUTHORIZED_KEYS="$(cat "$work/key.pub")" "$image" > /dev/null \
  || fail "the services container did not start"
api_status() { curl -s -o /dev/null -w '%{http_code}' "$@" "http://127.0.0.1:$jupyter_port/api/status" || true; }
deadline=$((SECONDS + 120))
until [[ $(api_status -H "Authorization: token $token") == 200 ]]; do
  if [[ $(podman inspect -f '{{.State.Running}}' "$container" 2> /dev/null) != true ]]; then
    podman logs "$container" 2>&1 | tail -n 30
    fail "the services container stopped"
  fi
  ((SECONDS < deadline)) || { podman logs "$container" 2>&1 | tail -n 30; fail "JupyterLab did not answer on port $jupyter_port within 120 s"; }
  sleep 1
done
ok "JupyterLab answers /api/status with the token (200) on the mapped port $jupyter_port"
code=$(api_status)
[[ $code == 403 ]] || fail "JupyterLab answered /api/status without a token: HTTP $code, expected 403"
code=$(api_status -H "Authorization: token wrong$token")
[[ $code == 403 ]] || fail "JupyterLab answered /api/status with a wrong token: HTTP $code, expected 403"
ok "JupyterLab refuses /api/status without the token and with a wrong one (403)"

step "4. sshd: the given key, another key, a password"
ssh_opts=(-p "$ssh_port" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes
          -o ConnectTimeout=10 -o LogLevel=ERROR)
kssh() { ssh "${ssh_opts[@]}" -i "$work/key" -o IdentitiesOnly=yes kiln@127.0.0.1 "$@"; }
deadline=$((SECONDS + 60))
until version=$(kssh kiln --version 2> "$work/ssh.err"); do
  ((SECONDS < deadline)) || { cat "$work/ssh.err"; podman logs "$container" 2>&1 | tail -n 30; fail "no SSH login with the given key within 60 s"; }
  sleep 1
done
ok "sshd accepts the given key: $version"
if ssh "${ssh_opts[@]}" -i "$work/other-key" -o IdentitiesOnly=yes kiln@127.0.0.1 true 2> /dev/null; then
  fail "sshd accepted a key that was not given"
fi
# The methods the server offers after the user name: only publickey, so no password is asked.
methods=$(ssh "${ssh_opts[@]}" -v -o PubkeyAuthentication=no -o PreferredAuthentications=password,keyboard-interactive \
  kiln@127.0.0.1 true 2>&1 | tr -d '\r' | awk -F': ' '/Authentications that can continue/ { print $NF; exit }') || true
[[ $methods == publickey ]] || fail "sshd offers '$methods' after the user name, expected only 'publickey'"
if ssh "${ssh_opts[@]}" -o PubkeyAuthentication=no kiln@127.0.0.1 true 2> /dev/null; then
  fail "sshd let a login through without a key"
fi
ok "sshd refuses another key and offers no password login (methods: $methods)"

step "5. samples/start-here.ipynb, executed over SSH"
kssh 'cd samples && jupyter nbconvert --to notebook --execute start-here.ipynb --output /tmp/start-here.out.ipynb' \
  || fail "the sample notebook failed (jupyter nbconvert --execute)"
notebook_run=$(find "$runs" -maxdepth 1 -name 'notebook-*' | sort | tail -n 1)
[[ -n $notebook_run && -f $notebook_run/curves.png ]] || fail "the notebook made no run with curves.png in /runs"
ls "$notebook_run"/tb/events.out.tfevents.* > /dev/null || fail "the notebook's run has no TensorBoard event file"
accuracy=$(final_test_accuracy "$notebook_run")
at_least "$accuracy" "$min_accuracy" || fail "the notebook's run reached test accuracy $accuracy, below $min_accuracy"
ok "the notebook trained (test accuracy $accuracy), plotted $(basename "$notebook_run")/curves.png and found its event file"

step "6. samples/03_write_a_model_plugin, built inside against the installed SDK"
podman exec "$container" bash -euo pipefail -c '
  cmake -S samples/03_write_a_model_plugin -B /tmp/logreg-build -G Ninja > /tmp/logreg-configure.log
  cmake --build /tmp/logreg-build
  kiln plugins test /tmp/logreg-build/libkiln-model-logreg.so
  # Found through kiln'"'"'s own per-user folder: the image sets no KILN_PLUGIN_PATH.
  [[ -z ${KILN_PLUGIN_PATH:-} ]] || { echo "the image sets KILN_PLUGIN_PATH=$KILN_PLUGIN_PATH"; exit 1; }
  # Made as Ubuntu'"'"'s umask 002 makes it: group-writable by the user'"'"'s own group (kiln, gid 1000,
  # no other member), which the trust rule accepts.
  (umask 002 && mkdir -p ~/.local/lib/kiln/plugins)
  [[ $(stat -c %a ~/.local/lib/kiln/plugins) == 775 ]] || { echo "umask 002 did not make the folder 775"; exit 1; }
  cp /tmp/logreg-build/libkiln-model-logreg.so ~/.local/lib/kiln/plugins/
  kiln plugins check ~/.local/lib/kiln/plugins/libkiln-model-logreg.so | grep -F "Found by a run  yes: "
  kiln plugins show logreg
  sed "/^hidden\|^activation\|^dropout/d" samples/fashion-mnist-mlp.toml > /tmp/logreg.toml
  kiln train --config /tmp/logreg.toml --set model.type=logreg --set run.epochs=1 \
    --set log.progress=never --run-dir /runs/logreg' \
  || fail "the out-of-tree plugin did not build, load, pass kiln plugins test or train inside the container"
accuracy=$(final_test_accuracy "$runs/logreg")
at_least "$accuracy" "$min_plugin_accuracy" || fail "logreg reached test accuracy $accuracy after 1 epoch, below $min_plugin_accuracy"
ok "samples/03 builds against the installed SDK, passes kiln plugins test, is found in ~/.local/lib/kiln/plugins (made with umask 002) without --plugin-path and trains (1 epoch: test accuracy $accuracy)"

echo
echo "test-container: all $passed checks passed in $SECONDS s (the image build took $build_seconds s of it${from_build:+; Kiln from $from_build, not compiled in the image})"
