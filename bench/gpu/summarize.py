#!/usr/bin/env python3
"""The closing table of scripts/gpu-check.sh: op errors, gpu tests, images/s and GPU memory.

Reads what the check left behind: the conformance suite's log (lines "conformance: <suite>
<case> <tensor...> rel_err <e> tol <t> ok|FAIL" and Boost.Test's skip lines), ctest's log, one
folder per `kiln train` run under --runs (metrics.jsonl, and exit_code written by the check),
and the PyTorch peer's JSON lines. Images/s is samples_per_s of the LAST training epoch
recorded (the first epoch includes cuDNN planning and warm-up); GPU memory is the largest
device_*memory_used* reading, and under each run the caching allocator's peak (what PyTorch's
max_memory_allocated counts). Also writes every run's metrics into one JSON-lines file with a
"run" field (--combined), so they come back as one file.
    python3 bench/gpu/summarize.py --runs /tmp/kiln-gpu --conformance c.log --ctest t.log \
        --peer peer.jsonl --combined metrics.jsonl
"""
import argparse
import json
import re
import sys
from collections import OrderedDict
from pathlib import Path

LINE = re.compile(r"^conformance: (\S+) (\S+) (.*) rel_err (\S+) tol (\S+) (ok|FAIL)$")
SKIP = re.compile(r'Test case "([^"]+)" is skipped because (.*)')
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def conformance(path: Path) -> list:
    if not path.exists():
        return [f"conformance: no log ({path.name} missing)"]
    text = ANSI.sub("", path.read_text(errors="replace"))
    if "SKIPPED: no CUDA device" in text:
        return ["conformance: SKIPPED (no CUDA device)"]
    suites = OrderedDict()
    failed_cases = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        suite, case, what, err, tol, verdict = m.groups()
        s = suites.setdefault(suite, {"checks": 0, "fails": 0, "worst": 0.0, "cases": set()})
        s["checks"] += 1
        s["cases"].add(case)
        err, tol = float(err), float(tol)
        ratio = err / tol if tol > 0 else (0.0 if err == 0 else float("inf"))
        s["worst"] = max(s["worst"], ratio)
        if verdict == "FAIL":
            s["fails"] += 1
            failed_cases.append(f"{suite}/{case}: {what} rel_err {err:.3g} (tol {tol:g})")
    skipped = SKIP.findall(text)
    named = re.search(r"backend conformance suite: backend '([^']+)'", text)
    backend = named.group(1) if named else "?"
    total = sum(s["checks"] for s in suites.values())
    fails = sum(s["fails"] for s in suites.values())
    # --report_level=short prints "Test module ... has passed with:" and no "*** No errors" line.
    passed = "*** No errors detected" in text or re.search(r'Test module "[^"]+" has passed', text)
    verdict = "No errors detected" if passed else "errors detected (see log)"
    out = [f"conformance ({backend} backend vs float64 reference): {total} checks, {fails} FAIL, {len(skipped)} cases skipped; "
           f"Boost.Test: {verdict}",
           f"  {'suite':34} {'cases':>5} {'checks':>6} {'worst err/tol':>13} {'FAIL':>4}"]
    for name, s in suites.items():
        out.append(f"  {name:34} {len(s['cases']):5d} {s['checks']:6d} {s['worst']:13.3f} {s['fails']:4d}")
    out += [f"  FAIL {c}" for c in failed_cases[:20]]
    reasons = OrderedDict()
    for name, why in skipped:
        reasons.setdefault(why, []).append(name)
    out += [f"  skipped {len(names)} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}): {why}"
            for why, names in reasons.items()]
    for line in text.splitlines():
        if "FAILED: cannot make backend" in line or "fatal error" in line:
            out.append("  " + line.strip())
    # gpu-check.sh appends `kiln plugins test libkiln-backend-cuda.so` (memory, events, threads
    # and the same cases, one line per group): its verdict and failed lines.
    _, marker, plugins_test = text.partition("===== kiln plugins test")
    if marker:
        lines = plugins_test.splitlines()
        failed = [l.strip() for l in lines if l.startswith("  FAIL")]
        passed = any(l.strip() == "all checks passed" for l in lines)
        out.append(f"  kiln plugins test (cuda): {'all checks passed' if passed else 'some checks FAILED'}")
        out += [f"    {l}" for l in failed[:10]]
    return out


def ctest(path: Path) -> list:
    if not path.exists():
        return [f"ctest -L gpu: no log ({path.name} missing)"]
    text = path.read_text(errors="replace")
    out = []
    # "N% tests passed, F tests failed out of T", or "100% tests passed out of T" (ctest --repeat).
    m = re.search(r"(\d+)% tests passed(, (\d+) tests failed)? out of (\d+)", text)
    out.append("ctest -L gpu: " + (m.group(0) if m else "no summary line (timed out or did not run?)"))
    for line in text.splitlines():
        if re.search(r"\*\*\*(Failed|Timeout|Exception|Not Run)|\(Failed\)|\(Timeout\)|\(Skipped\)|Not Run", line):
            out.append("  " + line.strip())
    return out


def read_jsonl(path: Path) -> list:
    records = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return records


def runs(root: Path, peer: dict, combined) -> list:
    header = (f"{'run':30} {'status':8} {'epochs':>6} {'images/s':>10} {'GPU MiB':>8} {'util%':>6} "
              f"{'loss first->last':>18} {'skip':>4} {'eval acc':>8} {'PyTorch':>9} {'ratio':>6}")
    out = [header]
    if not root.exists():
        return out + ["  (no runs)"]
    def started(run_dir: Path) -> float:  # runs in the order the check made them
        return run_dir.stat().st_ctime

    any_single = False
    for run_dir in sorted((p for p in root.iterdir() if p.is_dir()), key=started):
        records = read_jsonl(run_dir / "metrics.jsonl")
        for r in records:
            if combined is not None:
                combined.write(json.dumps({"run": run_dir.name, **r}) + "\n")
        code_file = run_dir / "exit_code"
        code = code_file.read_text().strip() if code_file.exists() else "?"
        status = {"0": "ok", "124": "timeout", "137": "killed"}.get(code, f"exit {code}")
        train = [r for r in records if r.get("split") == "train"]
        evals = [r for r in records if r.get("split") not in (None, "train")]  # the eval split's name
        if not train:
            out.append(f"{run_dir.name:30} {status:8} {'0':>6}  (no training epoch recorded; see train.log)")
            continue
        last = train[-1]
        mem = max((v for r in records for k, v in r.items()
                   if k.startswith("device_") and "memory_used" in k and isinstance(v, (int, float))), default=None)
        util = [v for r in train for k, v in r.items() if k.startswith("device_") and "util" in k
                and isinstance(v, (int, float))]
        ips = last.get("samples_per_s", 0.0)
        epoch_note = "*" if len(train) == 1 else ""  # only the warm-up epoch: a low estimate
        any_single = any_single or len(train) == 1
        precision = run_dir.name.rsplit("-", 1)[-1]
        peer_ips = peer.get(precision, {}).get("images_per_s") if run_dir.name.startswith("resnet50") else None
        mem_s = f"{mem:.0f}" if mem is not None else "-"
        util_s = f"{max(util):.0f}" if util else "-"
        acc_s = f"{evals[-1].get('accuracy', 0):.4f}" if evals else "-"
        peer_s = f"{peer_ips:.0f}" if peer_ips else "-"
        ratio_s = f"{ips / peer_ips:.2f}" if peer_ips else "-"
        skipped = int(sum(r.get("skipped_steps_epoch", 0) for r in train))
        loss_s = f"{train[0].get('loss', float('nan')):.3f}->{last.get('loss', float('nan')):.3f}"
        out.append(f"{run_dir.name:30} {status:8} {len(train):6d} {ips:9.0f}{epoch_note:1} {mem_s:>8} {util_s:>6} "
                   f"{loss_s:>18} {skipped:4d} {acc_s:>8} {peer_s:>9} {ratio_s:>6}")
        persistent = last.get("device_cudnn_batchnorm_persistent_calls")
        spatial = last.get("device_cudnn_batchnorm_spatial_calls")
        if persistent is not None and (persistent or spatial):
            # Cumulative since the backend started; with f16/bf16 channels-last the fast Ex kernels
            # are the persistent ones (plugins/backend-cuda/ops/batchnorm_ops.cpp).
            out.append(f"{'':30} batch-norm (cuDNN Ex): {persistent:.0f} persistent, {spatial or 0:.0f} spatial calls")
        alloc_peak = last.get("device_allocator_peak_mib")
        if alloc_peak is not None:
            # Like for like with the peer's torch.cuda.max_memory_allocated (live tensors at their
            # peak); the GPU MiB column is NVML's "used", which adds the context and every cache.
            peer_mem = peer.get(precision, {}).get("max_memory_mib") if peer_ips else None
            versus = f" (PyTorch max allocated {peer_mem:.0f} MiB)" if peer_mem else ""
            workspace = last.get("device_workspace_largest_mib")
            workspace_s = f", largest op workspace {workspace:.0f} MiB" if workspace is not None else ""
            out.append(f"{'':30} memory: allocator peak {alloc_peak:.0f} MiB, cached at the end "
                       f"{last.get('device_allocator_cached_mib', 0):.0f} MiB{workspace_s}{versus}")
        if last.get("data_capacity_samples_per_s"):
            out.append(f"{'':30} input capacity {last['data_capacity_samples_per_s']:.0f} samples/s, "
                       f"data wait {last.get('data_wait_ms_per_step', 0):.1f} ms/step")
    if any_single:
        out.append("* only the first epoch (with warm-up) was recorded before the time cap")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--conformance", type=Path, required=True)
    parser.add_argument("--ctest", type=Path, required=True)
    parser.add_argument("--peer", type=Path, required=True)
    parser.add_argument("--combined", type=Path)
    args = parser.parse_args()
    peer = {r["precision"]: r for r in read_jsonl(args.peer) if "precision" in r}
    lines = ctest(args.ctest) + [""] + conformance(args.conformance) + [""]
    combined = args.combined.open("w") if args.combined else None
    try:
        lines += runs(args.runs, peer, combined)
    finally:
        if combined:
            combined.close()
    if peer:
        lines.append("PyTorch peer (torchvision resnet50, channels_last, data on the GPU): " + ", ".join(
            f"{p} {r['images_per_s']:.0f} img/s {r['max_memory_mib']:.0f} MiB" for p, r in peer.items()))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
