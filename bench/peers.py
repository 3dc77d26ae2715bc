"""What every benchmark script shares: where the peers (PyTorch, TensorFlow) run, and which
machine a figure was measured on.

The peers run in the virtual environment that `scripts/setup.sh --bench` creates (.venv-bench:
torch 2.15.0, torchvision 0.29.2 and tensorflow-cpu 2.21.0 from PyPI), not Debian's PyTorch 1.13,
which stays the reference for the golden test data only. Every table a script prints or writes
starts with `machine_line()`: the CPU model, the ISA oneDNN dispatches to in Kiln (the cpu
backend's banner) and the one PyTorch dispatches to (torch.backends.cpu.get_cpu_capability()),
so a figure always says where it came from. CPU families get their own tables in
docs/benchmarks.md (`family_key()`).
"""
import json
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("KILN_BENCH_VENV", ROOT / ".venv-bench"))


def peer_python():
    """The bench venv's interpreter; a clear error when setup.sh --bench has not been run."""
    python = VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no benchmark environment at {VENV}: run scripts/setup.sh --bench first "
                         "(or point KILN_BENCH_VENV at one)")
    return str(python)


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def cpu_family_model():
    """"family 25 model 1" from /proc/cpuinfo: what tells a Zen 3 from a Zen 5 EPYC."""
    fields = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("cpu family", "model") and key.strip() not in fields:
            fields[key.strip()] = value.strip()
        if not line.strip():
            break
    return f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"


def cpu_flags():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _amd_zen4(model, flags, family_model):
    """An EPYC of cpuinfo family 25 with AVX-512 is a Zen 4: it runs AVX-512 on 256-bit units,
    so its kernels' speed differs from the Zen 5 (family 26) that first had the "amd-epyc" key."""
    return "epyc" in model and "avx512f" in flags and family_model.startswith("family 25 ")


def _amd_zen2(model, family_model):
    """An EPYC of cpuinfo family 23 (0x17) is a Zen or Zen 2 (Rome: model 49): AVX2 on 256-bit units
    like the Zen 3 (family 25) that first had the "amd-epyc-avx2" key, but another core, cache and
    clock, so it keeps its own tables."""
    return "epyc" in model and family_model.startswith("family 23 ")


def family_key(model=None, flags=None, family_model=None):
    """A stable name for the CPU family, used in docs/benchmarks.md's section markers:
    "amd-epyc" (Zen 5), "amd-epyc-zen4", "amd-epyc-zen2", "intel-xeon", or the model's first two
    words, plus "-avx2" on a CPU without AVX-512 ("amd-epyc-avx2": the Zen 3). The model name alone
    does not tell the families apart: Zen 2 to Zen 5 EPYCs all call themselves "AMD EPYC", and
    oneDNN runs different kernels (or the same kernels at different speeds) on them."""
    model = (model or cpu_model()).lower()
    flags = cpu_flags() if flags is None else flags
    family_model = family_model or cpu_family_model()
    if _amd_zen4(model, flags, family_model):
        return "amd-epyc-zen4"
    if _amd_zen2(model, family_model):
        return "amd-epyc-zen2"
    if "epyc" in model:
        key = "amd-epyc"
    elif "xeon" in model:
        key = "intel-xeon"
    else:
        key = "-".join(re.findall(r"[a-z0-9]+", model)[:2]) or "unknown"
    return key if "avx512f" in flags else key + "-avx2"


def family_title(model=None, flags=None, family_model=None):
    """The heading words for a family's tables: the model, and "AVX2, no AVX-512" or "Zen 4" where
    that holds."""
    model = model or cpu_model()
    flags = cpu_flags() if flags is None else flags
    family_model = family_model or cpu_family_model()
    if _amd_zen4(model.lower(), flags, family_model):
        return f"{model} (Zen 4, AVX-512 on 256-bit units)"
    if _amd_zen2(model.lower(), family_model):
        return f"{model} (Zen 2, AVX2, no AVX-512)"
    return model if "avx512f" in flags else f"{model} (AVX2, no AVX-512)"


_TORCH_INFO = r"""
import json, re, torch
config = torch.__config__.show()
m = re.search(r"oneDNN v([0-9.]+)", config) or re.search(r"MKL-DNN v([0-9.]+)", config)
print(json.dumps({"torch": torch.__version__, "torch_isa": torch.backends.cpu.get_cpu_capability(),
                  "torch_onednn": m.group(1) if m else "?"}))
"""


def torch_info():
    """{"torch": version, "torch_isa": "AVX512", "torch_onednn": "3.x"} of the venv's PyTorch."""
    out = subprocess.run([peer_python(), "-c", _TORCH_INFO], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def tf_version():
    out = subprocess.run([peer_python(), "-c", "import tensorflow as tf; print(tf.__version__)"], check=True,
                         capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).stdout
    return out.strip().splitlines()[-1]


def kiln_device(run_dir):
    """The cpu backend's banner detail from a finished run's log ("... oneDNN 2.6 isa avx512_core_bf16")."""
    log = Path(run_dir) / "logs" / "rank0.log"
    for line in log.read_text().splitlines():
        if "backend " in line and "threads)" in line:
            return line.split("threads)", 1)[1].strip()
    return "?"


def machine_line(kiln_detail, torch=None):
    """One line naming the CPU and each side's ISA, printed above every table."""
    text = f"CPU: {cpu_model()} ({cpu_family_model()}, {os.cpu_count()} CPUs); Kiln: {kiln_detail}"
    if torch:
        text += (f"; PyTorch {torch['torch']} (PyPI, oneDNN {torch['torch_onednn']}): "
                 f"cpu capability {torch['torch_isa']}")
    return text


def read_section(marker):
    """The body between <!-- marker --> and <!-- /marker --> in docs/benchmarks.md, or None."""
    text = (ROOT / "docs/benchmarks.md").read_text()
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    if start not in text or end not in text:
        return None
    return text[text.index(start) + len(start): text.index(end)].strip()


def write_section(marker, title, body, section):
    """Replaces <!-- marker --> ... <!-- /marker --> in docs/benchmarks.md with `body`; when the
    marker is new (a CPU family seen for the first time), adds it under a "### title" heading at
    the end of the "## `section`..." part of the document (at the end of the file if there is none)."""
    doc = ROOT / "docs/benchmarks.md"
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    block = f"{start}\n{body.rstrip()}\n{end}"
    text = doc.read_text()
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        addition = f"### {title}\n\n{block}\n"
        head = text.find(f"\n## {section}")
        following = text.find("\n## ", head + 1) if head >= 0 else -1
        if following >= 0:
            text = text[:following].rstrip() + "\n\n" + addition + text[following:]
        else:
            text = text.rstrip() + "\n\n" + addition
    doc.write_text(text)
    return doc
