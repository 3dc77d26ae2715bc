#!/usr/bin/env bash
# Hostile trials against a built kiln, in a reduced and deterministic form of issue 11's
# campaign: corrupt data files, bad config keys, types and values, killed and stopped ranks,
# corrupt checkpoints, SIGKILL during training and checkpointing, planted plugin libraries and
# oversized requests. Each trial states what must happen (a clean one-line error containing a
# given text, or success) and is classified as
#   clean       the expected outcome (error with the expected text and exit 1, or success)
#   crash       killed by a signal, or "internal error" (exit 70)
#   hang        still running at the trial's limit (killed)
#   silent      exit 0 where an error was expected
#   wrong       an error, but not the expected one (message or status)
#   lost        a file written before the trial was changed or gone, or a resumed run differs
# and the counts per outcome are printed. Exit status 0 only if every trial is clean.
#
# Usage: scripts/fault-inject.sh [--build DIR] [--kill-trials N] [--keep]
#   --build DIR        the build tree (default: build); needs bin/kiln, the cpu, mlp, mnist, local,
#                      gloo and fp32 plugins, and tests/plugin/fixtures for the planted plugins
#   --kill-trials N    SIGKILLs during a checkpointing run, each resumed and compared with an
#                      uninterrupted run (default 4; the issue's full campaign used >= 100)
#   --keep             keep the scratch directory (printed at the end)
# Needs the Fashion-MNIST files (Debian's dataset-fashion-mnist, as for the tests).
set -uo pipefail

build=build
kill_trials=4
keep=0
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --kill-trials) kill_trials=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--build DIR] [--kill-trials N] [--keep]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
build=$(realpath "$build")
kiln="$build/bin/kiln"
fixtures="$build/tests/plugin/fixtures"
mnist=/usr/share/datasets/fashion-mnist
[[ -x "$kiln" ]] || { echo "fault-inject: no $kiln; build first" >&2; exit 2; }
[[ -d "$mnist" ]] || { echo "fault-inject: no $mnist (install dataset-fashion-mnist)" >&2; exit 2; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/kiln-fault-XXXXXX")
cleanup() { ((keep)) || rm -rf "$scratch"; }
trap cleanup EXIT
unset KILN_PLUGIN_PATH KILN_RENDEZVOUS RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
export KILN_NO_USER_PLUGINS=1  # only this build's plugins, not ~/.local/lib/kiln/plugins
export OMP_NUM_THREADS=1

declare -A count=([clean]=0 [crash]=0 [hang]=0 [silent]=0 [wrong]=0 [lost]=0)
trials=0

record() {  # record OUTCOME NAME DETAIL
  count[$1]=$((count[$1] + 1))
  trials=$((trials + 1))
  if [[ $1 == clean ]]; then
    printf '  %-7s %s\n' "$1" "$2"
  else
    printf '  %-7s %s: %s\n' "$1" "$2" "$3"
  fi
}

be32() {  # four big-endian bytes of $1
  local n=$1
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((n >> 24 & 255)) $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))"
}

# A small copy of Fashion-MNIST (raw IDX, first N samples) that trials may damage.
make_data() {  # make_data DIR TRAIN_N TEST_N
  mkdir -p "$1"
  local split n kind
  for split in train t10k; do
    n=$2; [[ $split == t10k ]] && n=$3
    {
      printf '\x00\x00\x08\x03'; be32 "$n"; printf '\x00\x00\x00\x1c\x00\x00\x00\x1c'
      zcat "$mnist/$split-images-idx3-ubyte.gz" | tail -c +17 | head -c $((n * 784))
    } >"$1/$split-images-idx3-ubyte"
    {
      printf '\x00\x00\x08\x01'; be32 "$n"
      zcat "$mnist/$split-labels-idx1-ubyte.gz" | tail -c +9 | head -c "$n"
    } >"$1/$split-labels-idx1-ubyte"
  done
}

data="$scratch/data"
make_data "$data" 512 256
config="$scratch/base.toml"
sed -e "s|/usr/share/datasets/fashion-mnist|$data|" samples/fashion-mnist-mlp.toml >"$config"
quick=(--set run.epochs=2 --set log.progress=never)

# expect_error NAME LIMIT_S TEXT -- COMMAND...: the command must fail with exit 1 and a last
# "kiln: error:" line containing TEXT.
expect_error() {
  local name=$1 limit=$2 text=$3
  shift 4
  local err="$scratch/$name.err" status
  timeout -s KILL "$limit" "$@" >"$scratch/$name.out" 2>"$err"
  status=$?
  local line
  line=$(grep -a 'kiln: .*error: ' "$err" | tail -1)
  if ((status == 137)); then record hang "$name" "still running after $limit s"
  elif ((status > 128)) || ((status == 70)) || [[ $line == *"internal error"* ]]; then
    record crash "$name" "status $status: ${line:-$(tail -1 "$err")}"
  elif ((status == 0)); then record silent "$name" "exit 0, expected an error containing '$text'"
  elif ((status != 1)) || [[ $line != *"$text"* ]]; then
    record wrong "$name" "status $status, '${line:-$(tail -1 "$err")}' (expected '$text')"
  else record clean "$name"
  fi
}

# expect_success NAME LIMIT_S -- COMMAND...
expect_success() {
  local name=$1 limit=$2
  shift 3
  local err="$scratch/$name.err" status
  timeout -s KILL "$limit" "$@" >"$scratch/$name.out" 2>"$err"
  status=$?
  if ((status == 137)); then record hang "$name" "still running after $limit s"
  elif ((status == 0)); then record clean "$name"
  elif ((status > 128)) || ((status == 70)); then record crash "$name" "status $status: $(tail -1 "$err")"
  else record wrong "$name" "status $status: $(tail -1 "$err")"
  fi
}

train=("$kiln" train --config "$config" "${quick[@]}")

echo "fault-inject: config and command line"
expect_error unknown-key 60 "unknown key 'hiden'" -- "${train[@]}" --set model.hiden=[64] --run-dir "$scratch/r-key"
expect_error wrong-type 60 "optimizer.lr" -- "${train[@]}" --set 'optimizer.lr="fast"' --run-dir "$scratch/r-type"
expect_error lr-inf 60 "lr" -- "${train[@]}" --set optimizer.lr=inf --run-dir "$scratch/r-inf"
expect_error wd-nan 60 "weight_decay" -- "${train[@]}" --set optimizer.weight_decay=nan --run-dir "$scratch/r-nan"
expect_error negative-batch 60 "loader.batch" -- "${train[@]}" --set loader.batch=-1 --run-dir "$scratch/r-batch"
expect_error huge-classes 60 "num_classes" -- "${train[@]}" --set model.num_classes=4611686018427387904 --run-dir "$scratch/r-cls"
expect_error fifo-config 60 "is a FIFO" -- "$kiln" train --config <(cat "$config") --run-dir "$scratch/r-fifo"
for d in r-key r-type r-inf r-nan r-batch r-cls r-fifo; do
  [[ -e "$scratch/$d" ]] && record lost "$d" "a failed start left a run directory"
done

echo "fault-inject: oversized requests"
expect_error huge-hidden 60 "bytes" -- "${train[@]}" --set model.hidden=[4000000000] --run-dir "$scratch/r-hidden"
expect_error huge-batch 60 "bytes" -- "${train[@]}" --set loader.batch=2000000000 --set loader.last_batch='"partial"' \
  --run-dir "$scratch/r-huge-batch"
expect_error too-many-ranks 60 "--nproc" -- "${train[@]}" --nproc 100000 --run-dir "$scratch/r-nproc"

echo "fault-inject: corrupt data files"
corrupt_data() {  # corrupt_data NAME TEXT EDIT...: a copy of the data, damaged by EDIT, must be refused
  local name=$1 text=$2
  shift 2
  local dir="$scratch/data-$name"
  cp -r "$data" "$dir"
  (cd "$dir" && eval "$*")
  expect_error "data-$name" 60 "$text" -- "${train[@]}" --set "data.train.path=\"$dir\"" --set "data.eval.path=\"$dir\"" \
    --run-dir "$scratch/r-data-$name"
}
corrupt_data truncated "train-images-idx3-ubyte" 'truncate -s 100000 train-images-idx3-ubyte'
corrupt_data bad-magic "train-images-idx3-ubyte" 'printf "\x01\x02\x03\x04" | dd of=train-images-idx3-ubyte conv=notrunc status=none'
corrupt_data huge-count "train-labels-idx1-ubyte" 'printf "\x7f\xff\xff\xff" | dd of=train-labels-idx1-ubyte bs=1 seek=4 conv=notrunc status=none'
corrupt_data bad-label "label" 'printf "\xff" | dd of=train-labels-idx1-ubyte bs=1 seek=20 conv=notrunc status=none'
corrupt_data missing "train-images" 'rm train-images-idx3-ubyte'

echo "fault-inject: corrupt checkpoints"
run="$scratch/r-ckpt"
expect_success ckpt-baseline 120 -- "${train[@]}" --run-dir "$run"
if [[ -d "$run/checkpoints" ]]; then
  sums_before=$(cd "$run" && find . -type f ! -path './logs/*' ! -path './tb/*' -print0 | sort -z | xargs -0 sha256sum)
  corrupt_checkpoint() {  # corrupt_checkpoint NAME TEXT EDIT: a damaged copy of the run must be refused on resume
    local name=$1 text=$2 edit=$3
    local copy="$scratch/r-ckpt-$name"
    cp -r "$run" "$copy"
    (cd "$copy/checkpoints/epoch-0002" && eval "$edit")
    expect_error "ckpt-$name" 120 "$text" -- "${train[@]}" --run-dir "$copy" --resume "$copy/checkpoints/epoch-0002" \
      --set run.epochs=3
  }
  corrupt_checkpoint flipped-tensor "model.safetensors" \
    'size=$(stat -c %s model.safetensors); printf "\x55" | dd of=model.safetensors bs=1 seek=$((size - 9)) conv=notrunc status=none'
  corrupt_checkpoint truncated "model.safetensors" 'truncate -s 1000 model.safetensors'
  corrupt_checkpoint header "model.safetensors" 'printf "\xff\xff\xff\xff\xff\xff\xff\x7f" | dd of=model.safetensors conv=notrunc status=none'
  corrupt_checkpoint trainer "trainer.safetensors" 'truncate -s 64 trainer.safetensors'
  # Another run's files (a different model) in this run's checkpoint directory.
  other="$scratch/r-ckpt-b"
  if "${train[@]}" --set 'model.hidden=[32]' --run-dir "$other" >/dev/null 2>&1; then
    corrupt_checkpoint other-run "model.hidden" "cp \"$other\"/checkpoints/epoch-0002/* ."
  else
    record wrong ckpt-other-run "the second run failed"
  fi
  # This run's own checkpoint, resumed under a different model.
  cp -r "$run" "$scratch/r-ckpt-identity"
  expect_error ckpt-identity 120 "model.hidden" -- "${train[@]}" --run-dir "$scratch/r-ckpt-identity" \
    --resume "$scratch/r-ckpt-identity/checkpoints/epoch-0002" --set run.epochs=3 --set 'model.hidden=[32]'
  sums_after=$(cd "$run" && find . -type f ! -path './logs/*' ! -path './tb/*' -print0 | sort -z | xargs -0 sha256sum)
  [[ "$sums_before" == "$sums_after" ]] || record lost ckpt-originals "the undamaged run changed"
fi

echo "fault-inject: SIGKILL during training and checkpointing ($kill_trials trials)"
# epoch, step, loss and accuracy of every test record (the timing fields differ run to run)
test_figures() {
  grep '"split": "test"' "$1/metrics.jsonl" | grep -o '"epoch": [0-9]*\|"step": [0-9]*\|"loss": [^,]*\|"accuracy": [^,]*'
}
reference="$scratch/r-reference"
# The real training split (epochs of ~0.3 s and more), so a kill 0-0.29 s after a checkpoint lands
# in the next epoch or checkpoint rather than after the end.
long=(--set run.epochs=4 --set checkpoint.every_epochs=1 --set "data.train.path=\"$mnist\""
      --set "data.eval.path=\"$mnist\"" --set data.eval.limit=1024)
if timeout 300 "$kiln" train --config "$config" --set log.progress=never "${long[@]}" --run-dir "$reference" \
  >/dev/null 2>"$scratch/reference.err"; then
  want=$(test_figures "$reference")
  declare -A landed=([early]=0 [resumed]=0 [finished]=0)
  for ((i = 0; i < kill_trials; i++)); do
    dir="$scratch/r-kill-$i"
    "$kiln" train --config "$config" --set log.progress=never "${long[@]}" --run-dir "$dir" >/dev/null 2>&1 &
    pid=$!
    # Deterministic kill points: once checkpoint k (1..3) is on disk, 0 to 0.29 s later, so the
    # kills land in the next epoch's training or in the middle of writing checkpoint k + 1.
    k=$((1 + i % 3))
    for ((w = 0; w < 6000; w++)); do
      [[ -d "$dir/checkpoints/epoch-000$k" ]] || ! kill -0 "$pid" 2>/dev/null && break
      sleep 0.01
    done
    sleep "$(awk -v i="$i" 'BEGIN { printf "%.3f", ((i * 37) % 30) / 100 }')"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    finished=$?
    if ((finished == 0)); then
      resume=()  # it finished before the kill: its own result is compared
      landed[finished]=$((landed[finished] + 1))
    elif [[ -d "$dir/checkpoints" ]] && ls "$dir/checkpoints" | grep -q epoch; then
      resume=(--resume auto)
      landed[resumed]=$((landed[resumed] + 1))
    else
      rm -rf "$dir"; resume=()  # killed before the first checkpoint: nothing to resume, start again
      landed[early]=$((landed[early] + 1))
    fi
    if ((finished != 0)) && ! timeout 300 "$kiln" train --config "$config" --set log.progress=never "${long[@]}" --run-dir "$dir" \
      "${resume[@]}" >/dev/null 2>"$scratch/kill-$i.err"; then
      st=$?
      if ((st == 124)); then record hang "kill-$i" "resume did not finish"
      elif ((st > 128 || st == 70)); then record crash "kill-$i" "$(tail -1 "$scratch/kill-$i.err")"
      else record lost "kill-$i" "resume failed: $(tail -1 "$scratch/kill-$i.err")"; fi
      continue
    fi
    got=$(test_figures "$dir")
    lines=$(grep -c '"split": "test"' "$dir/metrics.jsonl")
    if [[ "$got" != "$want" ]]; then record lost "kill-$i" "final test record differs from the uninterrupted run"
    elif ((lines != 4)); then record lost "kill-$i" "$lines test records in metrics.jsonl, expected 4"
    else record clean "kill-$i"
    fi
  done
  echo "  kills: ${landed[early]} before the first checkpoint, ${landed[resumed]} after one (resumed with --resume auto)," \
    "${landed[finished]} after the run had finished"
else
  record wrong kill-reference "the uninterrupted reference run failed: $(tail -1 "$scratch/reference.err")"
fi

echo "fault-inject: killed and stopped ranks"
# The full training split: an epoch of 60000 samples in batches of 16 takes many seconds.
ranks=(--set run.epochs=3 --set 'comm.type="gloo"' --set loader.batch=16 --set dist.timeout_s=3
       --set "data.train.path=\"$mnist\"" --set "data.eval.path=\"$mnist\"")
children_of() {  # pids whose parent is $1 (read from /proc: pgrep is not in every image)
  local stat rest fields
  for stat in /proc/[0-9]*/stat; do
    { read -r rest <"$stat"; } 2>/dev/null || continue
    rest=${rest##*) }             # after "pid (comm) ": the command name may hold spaces
    read -r -a fields <<<"$rest"  # state, ppid, ...
    if [[ ${fields[1]} == "$1" ]]; then stat=${stat#/proc/}; echo "${stat%/stat}"; fi
  done
}
# rank_fault NAME SIGNAL TEXT: start 2 ranks, send SIGNAL to rank 1 once training runs; the job
# must end with exit 1 naming rank 1.
rank_fault() {
  local name=$1 sig=$2 text=$3 err="$scratch/$1.err"
  "$kiln" train --config "$config" --set log.progress=never "${ranks[@]}" --nproc 2 --run-dir "$scratch/r-$name" \
    >/dev/null 2>"$err" &
  local sup=$! rank1="" i
  i=0
  while [[ -z "$rank1" ]] && ((i++ < 600)); do
    sleep 0.1
    grep -q "steps per epoch" "$err" 2>/dev/null || continue
    for p in $(children_of "$sup"); do
      tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'RANK=1' && rank1=$p
    done
  done
  if [[ -z "$rank1" ]]; then
    kill -KILL "$sup" 2>/dev/null; wait "$sup" 2>/dev/null
    record wrong "$name" "training never started: $(tail -1 "$err")"
    return
  fi
  kill "-$sig" "$rank1"
  local waited=0
  while kill -0 "$sup" 2>/dev/null && ((waited < 600)); do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 "$sup" 2>/dev/null; then
    kill -KILL "$sup" "$rank1" 2>/dev/null; wait "$sup" 2>/dev/null
    record hang "$name" "still running 60 s after SIG$sig"
    return
  fi
  wait "$sup"
  local status=$? line
  line=$(grep -a 'kiln: error: ' "$err" | tail -1)
  if kill -0 "$rank1" 2>/dev/null; then kill -KILL "$rank1"; record lost "$name" "rank 1 outlived the job"
  elif ((status != 1)) || [[ $line != *"$text"* ]]; then record wrong "$name" "status $status, '$line'"
  elif [[ ! -f "$scratch/r-$name/config.toml" ]]; then record lost "$name" "the run directory is gone"
  else record clean "$name"
  fi
}
rank_fault rank-killed KILL "was killed by signal 9 (SIGKILL)"
rank_fault rank-stopped STOP "was stopped by signal 19 (SIGSTOP)"

echo "fault-inject: planted plugins"
if [[ -d "$fixtures/exits" ]]; then
  planted="$scratch/planted"
  mkdir -p "$planted"
  cp "$fixtures/exits/libkiln-fixture-exits.so" "$planted/libkiln-evil.so"
  cp "$fixtures/crashes/libkiln-fixture-crashes.so" "$planted/libkiln-crash.so"
  printf 'not a library' >"$planted/libkiln-garbage.so"
  # Not loaded at all by a run that names its own plugins: the run trains normally.
  expect_success planted-ignored 120 -- "${train[@]}" --plugin-path "$planted" --run-dir "$scratch/r-planted"
  # Asked for a plugin only a planted library could provide: every library is probed, the run fails.
  expect_error planted-exit 60 "ended the loading process with exit status 0" -- \
    "${train[@]}" --plugin-path "$planted" --set 'precision.type="evil"' --run-dir "$scratch/r-planted-2"
  mkdir -p "$scratch/open/plugins"
  chmod 0777 "$scratch/open"
  cp "$fixtures/good/libkiln-fixture-good.so" "$scratch/open/plugins/"
  expect_error planted-open-parent 60 "which is world-writable" -- \
    "${train[@]}" --plugin-path "$scratch/open/plugins" --set 'precision.type="fixture-fp32"' --run-dir "$scratch/r-open"
  ln -s loop "$scratch/loop"
  expect_error planted-loop 60 "no precision plugin named 'nothing'" -- \
    "${train[@]}" --plugin-path "$scratch/loop" --set 'precision.type="nothing"' --run-dir "$scratch/r-loop"
  expect_error relative-path 60 "is a relative path" -- env KILN_PLUGIN_PATH=plugins "$kiln" train --config "$config" \
    --run-dir "$scratch/r-rel"
else
  echo "  (skipped: no $fixtures; build the plugin test fixtures)"
fi

echo
printf 'fault-inject: %d trials: ' "$trials"
for k in clean crash hang silent wrong lost; do printf '%s %d  ' "$k" "${count[$k]}"; done
echo
((keep)) && echo "fault-inject: scratch kept in $scratch"
((count[clean] == trials))
