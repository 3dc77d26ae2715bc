#!/usr/bin/env bash
# The GPU check, run ON the lent GPU machine from the repository root with build-gpu carried
# (made here by scripts/pack-gpu-carry.sh; docs/gpu-check.md): a smoke stage, the gpu-labelled
# tests, the cuda backend's op conformance against float64 references, ResNet-50 training on
# synthetic data at batch 256 in fp32/bf16/fp16 (plus a PyTorch peer for the ratio), the MLP on
# Fashion-MNIST, the ImageNet GPU sample on generated JPEGs, then a short table
# (bench/gpu/summarize.py). Everything lands in $OUT.
# ResNet-50 is samples/resnet50-gpu.toml: u8 images normalised on the device, batch-norm through
# cuDNN's Ex calls (the table's `batch-norm` line says how many ran in the persistent mode).
#
# Decisions: a lent machine has about 15 minutes of device time in all and start-up takes 1-2,
# so the whole check is planned for about 6.5 minutes (KILN_GPU_BUDGET_S, default 390 s; call
# it with timeout_s = 450) to leave room for one targeted rerun (KILN_GPU_STAGES). It begins
# with a smoke stage of at most 30 s (every library resolves under ldd, nvidia-smi answers, one
# runtime test passes) and stops there on failure, since nothing after it could work. Every later
# stage has its own `timeout`, bounded by what is left before the deadline; a failing stage is
# recorded and the next one still runs. Each stage's exit status and seconds go into summary.txt
# as it ends, logs are written into $OUT while they grow, and each training run's metrics are
# appended to metrics.jsonl as soon as it finishes, so a check killed by the device tool's
# timeout still returns everything that ran. At most 8 files go to $OUT (the device tool's
# limit): summary.txt, env.txt, ctest-gpu.log, conformance-cuda.log,
# conformance-cuda-benchmark.log, train.log (every run's console output, the PyTorch peer's and
# the imagenet stage's), metrics.jsonl, profile.log. CUDA, cuBLAS, cuDNN and NCCL come from the machine's Python nvidia-*
# packages; everything else from build-gpu/carry-libs. The build's absolute paths (CTest files,
# KILN_TEST_PLUGIN_DIR) are made valid by a symlink when the repository sits elsewhere than where
# build-gpu was configured.
#   bash scripts/gpu-check.sh
#   env: KILN_GPU_STAGES (comma list of ctest,conformance,train,profile,peer,imagenet,variants; default
#        all; the smoke stage always runs), KILN_GPU_STEPS (ResNet steps/epoch, 40),
#        KILN_GPU_VARIANT_STEPS (steps/epoch of the fp32 variants, 20), KILN_GPU_IMAGENET_STEPS
#        (steps/epoch of the JPEG run, 24: that many batches of JPEGs are generated), KILN_GPU_BUDGET_S
#        (390), KILN_GPU_CTEST (a ctest -R regex: only those gpu tests), KILN_GPU_PEER
#        (the PyTorch peer's precisions, "fp32 bf16 fp16 tf32"), KILN_GPU_CTEST_REPEAT (run each
#        test up to N times until it fails, for a flaky one; 1), KILN_GPU_PROFILES and
#        KILN_GPU_VARIANTS (replace the profile and fp32-variant lists, in the formats their
#        stages document, for a targeted rerun), KILN_GPU_TRAIN_RUNS (the same for the train
#        stage's ResNet-50 runs), KILN_GPU_IMAGENET_PRECISIONS (the JPEG runs' precisions, "fp16")
#        and KILN_GPU_IMAGENET_EPOCHS (4)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build-gpu
OUT=${OUT:-$ROOT/gpu-check-out}
WORK=${TMPDIR:-/tmp}/kiln-gpu-check
STEPS=${KILN_GPU_STEPS:-40}
VARIANT_STEPS=${KILN_GPU_VARIANT_STEPS:-20}
IMAGENET_STEPS=${KILN_GPU_IMAGENET_STEPS:-24}
IMAGENET_EPOCHS=${KILN_GPU_IMAGENET_EPOCHS:-4}
STAGES=${KILN_GPU_STAGES:-ctest,conformance,train,profile,peer,imagenet,variants}
CTEST_ONLY=${KILN_GPU_CTEST:-}
PEER_PRECISIONS=${KILN_GPU_PEER:-fp32 bf16 fp16 tf32}
CTEST_REPEAT=${KILN_GPU_CTEST_REPEAT:-1}
BATCH=256
START=$(date +%s)
DEADLINE=$((START + ${KILN_GPU_BUDGET_S:-390}))
mkdir -p "$OUT"
rm -rf "$WORK"
mkdir -p "$WORK/runs"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"

say() { echo "$*" | tee -a "$SUMMARY"; }
want() { [[ ",$STAGES," == *",$1,"* ]]; }
# stage_done NAME EXIT STARTED: one line per finished stage, written as it ends.
stage_done() { say "stage $1: exit $2 after $(($(date +%s) - $3)) s (check at $(($(date +%s) - START)) s)"; }
trap 'say "gpu-check: interrupted after $(($(date +%s) - START)) s; the stages above are all that ran"; exit 130' INT TERM
# Seconds a stage may take: its own cap, or what is left before the deadline (less a margin for
# the summary), whichever is smaller; at least 5.
budget() {
  local left=$((DEADLINE - $(date +%s) - 15))
  local cap=$1
  ((left < cap)) && cap=$left
  ((cap < 5)) && cap=5
  echo "$cap"
}

[[ -d $BUILD/bin && -d $BUILD/carry-libs ]] ||
  { say "gpu-check: $BUILD is missing or unpacked: run scripts/pack-gpu-carry.sh here first and carry build-gpu"; exit 2; }

# ---- environment ------------------------------------------------------------------------------
{
  echo "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) in $ROOT"
  git -C "$ROOT" log -1 --format='commit %H %s' 2>/dev/null || echo "commit: (no git metadata)"
  # The host CPU decodes the imagenet stage's JPEGs: its model and core count explain that rate.
  echo "host CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) logical CPUs," \
    "$(lscpu 2>/dev/null | sed -n 's/^Thread(s) per core:[[:space:]]*//p') thread(s) per core"
} | tee -a "$SUMMARY" >"$OUT/env.txt"

# Configured elsewhere? Make that path lead here, so CTest files and compiled-in paths hold.
configured_src=$(sed -n 's/^Kiln_SOURCE_DIR:STATIC=//p' "$BUILD/CMakeCache.txt")
if [[ -n $configured_src && $configured_src != "$ROOT" ]]; then
  if [[ ! -e $configured_src ]]; then
    mkdir -p "$(dirname "$configured_src")" && ln -s "$ROOT" "$configured_src" &&
      say "linked $configured_src -> $ROOT (build-gpu was configured there)"
  elif [[ ! -d $configured_src/build-gpu/bin ]]; then
    say "WARNING: build-gpu was configured in $configured_src, which exists here without build-gpu; tests may not find their files"
  fi
fi

site=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)
nvlibs=""
if [[ -n $site ]]; then
  nvlibs=$(find "$site/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
fi
BASE_LD=${LD_LIBRARY_PATH:-}  # for Python (PyTorch brings its own CUDA; our carried zlib must not shadow its)
export LD_LIBRARY_PATH="$BUILD/lib:$BUILD/carry-libs${nvlibs:+:$nvlibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  echo "python nvidia packages: ${site:-not found}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "--- unresolved libraries (ldd), none expected:"
  for f in "$BUILD/bin/kiln" "$BUILD"/lib/kiln/plugins/*.so "$BUILD"/tests/test_*; do
    [[ -f $f ]] && ldd "$f" 2>&1 | grep 'not found' | sed "s|^|$(basename "$f"): |"
  done
  echo "--- carried plugins:"
  ls "$BUILD/lib/kiln/plugins"
} >>"$OUT/env.txt" 2>&1
say "stages: smoke,$STAGES; budget $((DEADLINE - START)) s"

# ---- smoke (<= 30 s): stop at once if the basics fail ----------------------------------------------
say ""
say "==== smoke: libraries, nvidia-smi, one runtime test"
t0=$START  # the environment set-up above counts towards the smoke stage's 30 s
smoke_fail=""
unresolved=$(grep -A100 '^--- unresolved' "$OUT/env.txt" | grep 'not found')
if [[ -n $unresolved ]]; then
  echo "$unresolved" | tee -a "$SUMMARY"
  smoke_fail+=" unresolved-libraries"
fi
timeout 10 nvidia-smi 2>&1 | tee -a "$SUMMARY"
((PIPESTATUS[0] == 0)) || smoke_fail+=" nvidia-smi"
timeout 5 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tee -a "$SUMMARY"
# Plugin load, device choice and banner, and one kernel per dtype (sm_90 code present). 77 means
# the test saw no device: a failure here.
(cd "$BUILD/tests" && timeout 15 ./test_cuda_runtime_gpu --run_test=the_device_is_described_for_the_banner,fill_writes_every_dtype \
  --report_level=short --color_output=no) >"$WORK/smoke-runtime.log" 2>&1
smoke_rc=$?
tail -n 5 "$WORK/smoke-runtime.log" | tee -a "$SUMMARY"
((smoke_rc == 0)) || smoke_fail+=" test_cuda_runtime_gpu(exit $smoke_rc)"
stage_done smoke "${smoke_fail:-0}" "$t0"
if [[ -n $smoke_fail ]]; then
  cat "$WORK/smoke-runtime.log" >>"$OUT/env.txt"
  say "SMOKE FAILED:$smoke_fail -- stopping here (env.txt has the library list and the test output)"
  exit 3
fi

# ---- tests ------------------------------------------------------------------------------------
if want ctest; then
  # In parallel (one GPU is plenty for these): the stage takes as long as the slowest test.
  say ""
  say "==== ctest -L gpu -j4 (without the conformance suite, run next on its own)"
  t0=$(date +%s)
  timeout "$(budget 110)" ctest --test-dir "$BUILD" -L gpu -E '^test_backend_conformance_cuda$' ${CTEST_ONLY:+-R "$CTEST_ONLY"} -j4 \
    --repeat until-fail:"$CTEST_REPEAT" \
    --output-on-failure --timeout 100 >"$OUT/ctest-gpu.log" 2>&1
  rc=$?
  grep -E 'tests passed|Failed|Not Run|Timeout|\*\*\*Skipped' "$OUT/ctest-gpu.log" | tail -n 8 | tee -a "$SUMMARY"
  stage_done ctest $rc "$t0"
fi

if want conformance; then
  say "==== cuda backend conformance"
  t0=$(date +%s)
  (cd "$BUILD/tests" && timeout "$(budget 60)" ./test_backend_conformance --log_level=test_suite \
    --report_level=short --color_output=no -- cuda) >"$OUT/conformance-cuda.log" 2>&1
  rc=$?
  # The convolution cases again with algorithms chosen by timing ([backend] cudnn_benchmark, which
  # may pick algorithms the heuristics never rank first), then with f32 Winograd/FFT refused
  # (conv_transforms = false, the strict direct/GEMM path): both logs in one file.
  : >"$OUT/conformance-cuda-benchmark.log"
  for params in "cudnn_benchmark=true" "cudnn_benchmark=true conv_transforms=false"; do
    echo "===== KILN_CONFORMANCE_PARAMS=\"$params\"" >>"$OUT/conformance-cuda-benchmark.log"
    (cd "$BUILD/tests" && KILN_CONFORMANCE_PARAMS="$params" timeout "$(budget 30)" ./test_backend_conformance \
      --run_test='conv2d*' --log_level=test_suite --report_level=short --color_output=no -- cuda) \
      >>"$OUT/conformance-cuda-benchmark.log" 2>&1 || rc=$?
  done
  # What a third-party backend author runs: the same op suite one line per case group, after the
  # memory, event and threads checks (pinned copies from four threads during matmuls).
  echo "===== kiln plugins test libkiln-backend-cuda.so" >>"$OUT/conformance-cuda.log"
  timeout "$(budget 30)" "$BUILD/bin/kiln" plugins test "$BUILD/lib/kiln/plugins/libkiln-backend-cuda.so" \
    >>"$OUT/conformance-cuda.log" 2>&1 || rc=$?
  # `kiln doctor` on NCCL (bench-comm over nccl-ring, one rank per GPU, results checked): its
  # NCCL path had only scripted tests before a GPU ran it.
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  ((ngpu >= 1)) || ngpu=1
  echo "===== kiln doctor --comm nccl-ring --nproc $ngpu" >>"$OUT/conformance-cuda.log"
  timeout "$(budget 40)" "$BUILD/bin/kiln" doctor --comm nccl-ring --nproc "$ngpu" --timeout 10 \
    >>"$OUT/conformance-cuda.log" 2>&1 || rc=$?
  grep -E '^  FAIL|checks passed|checks FAILED|^ok: an all-reduce|^failed: an all-reduce' "$OUT/conformance-cuda.log" |
    tail -n 8 | tee -a "$SUMMARY"
  stage_done conformance $rc "$t0"
fi

# ---- training runs ----------------------------------------------------------------------------
# Configs from the samples: ResNet-50 is samples/resnet50-gpu.toml (already cuda, u8 input); the
# MLP's gets backend cuda (the cpu-only `threads` key dropped) and data paths into the carried
# Fashion-MNIST. No checkpoints (ResNet-50's would be 200 MB per epoch).
cuda_config() {
  sed -e 's/^type = "cpu"/type = "cuda"/' -e '/^threads = /d' \
      -e "s|/usr/share/datasets/fashion-mnist|$BUILD/fashion-mnist|g" "$1"
}
# "key=value,key=value" (a list entry's last field) -> extra_sets=(--set key=value --set key=value).
extra_set_options() {
  local pairs pair
  extra_sets=()
  IFS=, read -ra pairs <<<"$1"
  for pair in "${pairs[@]}"; do extra_sets+=(--set "$pair"); done
}
train() {  # train NAME CAP CONFIG [--set ...]
  local name=$1 cap=$2 config=$3
  shift 3
  local dir=$WORK/runs/$name t0
  t0=$(date +%s)
  mkdir -p "$dir"
  say "==== kiln train $name (cap ${cap}s)"
  {
    echo "===== $name: kiln train --config $config $*"
    timeout --kill-after=5 "$(budget "$cap")" "$BUILD/bin/kiln" train --config "$config" --run-dir "$dir" \
      --set checkpoint.every_epochs=0 "$@" 2>&1
    echo $? >"$dir/exit_code"
    echo "===== $name: exit $(cat "$dir/exit_code")"
  } >>"$OUT/train.log" 2>&1
  tail -n 3 "$OUT/train.log" | tee -a "$SUMMARY"
  # This run's records now, so a check cut short keeps them (the summary rewrites the file whole).
  find "$dir" -name metrics.jsonl -exec sed "s/^{/{\"run\": \"$name\", /" {} + >>"$OUT/metrics.jsonl" 2>/dev/null
  stage_done "train:$name" "$(cat "$dir/exit_code")" "$t0"
}

# ResNet-50 trains the GPU sample as it is (cuda backend, synthetic u8 images normalised on the
# device by backend.normalize_image), so the runs measure the u8 input path users get.
cp "$ROOT/samples/resnet50-gpu.toml" "$WORK/resnet50.toml"
cuda_config "$ROOT/samples/fashion-mnist-mlp.toml" >"$WORK/mlp.toml"
: >"$OUT/metrics.jsonl"
if want train; then
  # name:precision[:key=value,...] (extra --set options, e.g. bf16-checked:bf16:precision.check_finite=true);
  # a name ending in fp32/bf16/fp16 gets the PyTorch peer's ratio in the table.
  for run in ${KILN_GPU_TRAIN_RUNS:-fp32:fp32 bf16:bf16 fp16:fp16}; do
    IFS=: read -r name precision extra <<<"$run"
    extra_set_options "$extra"
    # Three epochs of STEPS steps: the first pays for cuDNN planning and warm-up, the last is the
    # steady-state figure. lr 0.1 is the batch-256 ImageNet recipe.
    train "resnet50-b$BATCH-$name" 50 "$WORK/resnet50.toml" \
      --set precision.type="$precision" --set loader.batch=$BATCH --set data.train.count=$((BATCH * STEPS)) \
      --set run.epochs=3 --set loader.workers=12 --set loader.prefetch=4 --set optimizer.lr=0.1 \
      "${extra_sets[@]}"
  done
  train "mlp-fashion-mnist-fp32" 25 "$WORK/mlp.toml" --set run.epochs=2
fi

# ---- per-op profile ------------------------------------------------------------------------------
# kiln train --profile (docs/profiling.md) on 8 steps of ResNet-50 per precision (bf16 also with
# cudnn_benchmark, fp32 also strict), 2 unprofiled first: which ops each precision spends
# its step in. Every op is followed by a synchronize while profiled, so the step is slower than
# in the train stage; the shares are what to read.
if want profile; then
  : >"$OUT/profile.log"
  # name:precision:cudnn_benchmark:activation_layout[:conv_transforms (default true)[:key=value,...
  # (extra --set options)]]. The second bf16 run says what timing-chosen algorithms change,
  # fp32-strict what Winograd/FFT save in f32.
  for variant in ${KILN_GPU_PROFILES:-bf16:bf16:false:auto bf16-cudnn-benchmark:bf16:true:auto \
                 fp32:fp32:false:auto fp32-strict:fp32:false:auto:false fp16:fp16:false:auto}; do
    IFS=: read -r name precision benchmark layout transforms extra <<<"$variant"
    extra_set_options "$extra"
    say "==== kiln train --profile resnet50-b$BATCH-$name"
    t0=$(date +%s)
    dir=$WORK/runs-profile/$name
    mkdir -p "$dir"
    timeout --kill-after=5 "$(budget 40)" "$BUILD/bin/kiln" train --config "$WORK/resnet50.toml" --run-dir "$dir" \
      --set checkpoint.every_epochs=0 --set precision.type="$precision" --set loader.batch=$BATCH \
      --set data.train.count=$((BATCH * 10)) --set run.epochs=1 --set loader.workers=12 \
      --set backend.cudnn_benchmark="$benchmark" --set backend.activation_layout="$layout" \
      --set backend.conv_transforms="${transforms:-true}" "${extra_sets[@]}" --profile --profile-warmup 2 \
      >"$dir/console.log" 2>&1
    rc=$?
    {
      echo "===== resnet50-b$BATCH-$name (exit $rc)"
      grep -E '\[cuda\]|error' "$dir/console.log"
      find "$dir" -name profile.txt -exec cat {} + 2>/dev/null || tail -n 20 "$dir/console.log"
      # Which algorithm each convolution shape runs (the cuda backend's debug lines, always in the
      # run's log file), and with cudnn_benchmark what cuDNN measured for it: the comparison
      # between two runs' tables says whether a slower run chose differently.
      echo "--- convolution algorithms (logs/rank0.log)"
      grep -ho 'conv algo: .*' "$dir/logs/rank0.log" 2>/dev/null
    } >>"$OUT/profile.log"
    find "$dir" -name profile.txt -exec head -n 1 {} + 2>/dev/null | tee -a "$SUMMARY"
    stage_done "profile:$name" $rc "$t0"
  done
fi

# ---- PyTorch peer -------------------------------------------------------------------------------
: >"$WORK/peer.jsonl"
if want peer; then
  say "==== PyTorch peer (bench/gpu/pytorch_resnet50.py)"
  t0=$(date +%s)
  # Unbuffered, so a peer cut short by its cap still leaves the precisions it finished.
  echo "===== PyTorch peer: bench/gpu/pytorch_resnet50.py --batch $BATCH" >>"$OUT/train.log"
  # About 100 s for fp32 and bf16 on an H200 (import, cudnn.benchmark's search, warm-up); tf32
  # (fp32 with TF32 allowed) last, so a peer cut short has the three precisions first.
  # shellcheck disable=SC2086  # the precisions are words
  LD_LIBRARY_PATH=$BASE_LD PYTHONUNBUFFERED=1 timeout "$(budget 200)" python3 "$ROOT/bench/gpu/pytorch_resnet50.py" \
    --batch $BATCH --steps 30 --time-cap 10 --precisions $PEER_PRECISIONS >"$WORK/peer.jsonl" 2>>"$OUT/train.log"
  stage_done peer $? "$t0"
  cat "$WORK/peer.jsonl" >>"$OUT/train.log"
fi

# ---- ImageNet JPEG pipeline ----------------------------------------------------------------------
# samples/imagenet-resnet50-gpu.toml as users run it (JPEG decode, RandomResizedCrop and flip on
# the host's decode threads into u8, normalised on the device; fp16; NCCL with one rank) on
# ImageNet-like JPEGs generated here (bench/jpeg_dataset.py; about ImageNet's bytes per pixel):
# whether the host keeps one GPU fed. Each class has its own colour cast, so the training
# accuracy climbing above chance (0.1) says the labels reach the loss through the pipeline. The
# input pipeline alone first (`kiln bench-data`, the sample's 12 decode threads), then
# IMAGENET_EPOCHS epochs of IMAGENET_STEPS steps with a val split, in the sample's fp16 (and any
# other KILN_GPU_IMAGENET_PRECISIONS). The runs' names do not end in a precision, so the table
# gives them no PyTorch ratio (the peer reads no JPEGs).
if want imagenet; then
  say ""
  say "==== ImageNet JPEG pipeline (samples/imagenet-resnet50-gpu.toml on generated JPEGs)"
  t0=$(date +%s)
  data=$WORK/imagenet
  # The machine's Python (PyTorch's numpy and Pillow); our carried libraries must not shadow its.
  LD_LIBRARY_PATH=$BASE_LD timeout "$(budget 60)" python3 "$ROOT/bench/jpeg_dataset.py" --root "$data" \
    --train $((BATCH * IMAGENET_STEPS)) --val $((BATCH * 2)) --workers "$(nproc)" >>"$OUT/train.log" 2>&1
  rc=$?
  if ((rc == 0)); then
    tail -n 1 "$OUT/train.log" | tee -a "$SUMMARY"
    imagenet_sets=(--set data.train.root="$data" --set data.eval.root="$data")
    echo "===== kiln bench-data --config samples/imagenet-resnet50-gpu.toml" >>"$OUT/train.log"
    timeout "$(budget 40)" "$BUILD/bin/kiln" bench-data --config "$ROOT/samples/imagenet-resnet50-gpu.toml" \
      "${imagenet_sets[@]}" -n 20 -w 3 >"$WORK/bench-data.log" 2>&1
    rc=$?
    tee -a "$SUMMARY" <"$WORK/bench-data.log" >>"$OUT/train.log"
    stage_done imagenet:bench-data $rc "$t0"
    for precision in ${KILN_GPU_IMAGENET_PRECISIONS:-fp16}; do
      name=imagenet-jpeg-resnet50-b$BATCH
      [[ $precision == fp16 ]] || name=imagenet-jpeg-$precision-resnet50-b$BATCH
      train "$name" 60 "$ROOT/samples/imagenet-resnet50-gpu.toml" "${imagenet_sets[@]}" \
        --set precision.type="$precision" --set run.epochs="$IMAGENET_EPOCHS"
    done
  else
    say "imagenet: generating the JPEGs failed (exit $rc; python3 with numpy and Pillow?); train.log has its output"
    stage_done imagenet $rc "$t0"
  fi
fi

# ---- fp32 variants -------------------------------------------------------------------------------
# ResNet-50 in f32 under the settings that decided its defaults on an H200 (2026-12-04; the full
# sweep is in docs/benchmarks.md): the strict path (NCHW, heuristics, no Winograd/FFT: 0.74x
# PyTorch), the fastest TF32-off path (Winograd allowed and cudnn_benchmark: 0.96x) and TF32
# under the auto layout (channels-last: 1.00x). Two epochs of VARIANT_STEPS steps each; names end
# in the peer precision they compare with: "fp32" (TF32 off on both sides) or "tf32" (on both).
# Last of the stages: cudnn_benchmark's search makes these the slowest runs, and a check that
# runs out of time should lose them rather than the tests, the profiles or the peer.
if want variants; then
  # name:activation_layout:cudnn_benchmark:allow_tf32:conv_transforms
  for variant in ${KILN_GPU_VARIANTS:-strict-fp32:auto:false:false:false bench-fp32:auto:true:false:true \
                 tf32:auto:false:true:true}; do
    IFS=: read -r name layout benchmark tf32 transforms <<<"$variant"
    train "resnet50-b$BATCH-$name" 45 "$WORK/resnet50.toml" \
      --set precision.type=fp32 --set loader.batch=$BATCH --set data.train.count=$((BATCH * VARIANT_STEPS)) \
      --set run.epochs=2 --set loader.workers=12 --set loader.prefetch=4 --set optimizer.lr=0.1 \
      --set backend.activation_layout="$layout" --set backend.cudnn_benchmark="$benchmark" \
      --set backend.allow_tf32="$tf32" --set backend.conv_transforms="$transforms"
  done
fi

# ---- table --------------------------------------------------------------------------------------
say ""
say "==== summary ($(($(date +%s) - START)) s)"
LD_LIBRARY_PATH=$BASE_LD python3 "$ROOT/bench/gpu/summarize.py" --runs "$WORK/runs" --conformance "$OUT/conformance-cuda.log" \
  --ctest "$OUT/ctest-gpu.log" --peer "$WORK/peer.jsonl" --combined "$OUT/metrics.jsonl" 2>&1 | tee -a "$SUMMARY"
