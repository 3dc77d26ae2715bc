#!/usr/bin/python3
"""Writes torchvision reference data for Kiln's fine-tuning tests (tests/finetune) into OUT_DIR.

Run by CTest (fixture `finetune_torchvision_reference`) with KILN_REFERENCE_PYTHON, by default
Debian's python with torch and python3-torchvision (scripts/setup.sh installs them as test
dependencies):
    /usr/bin/python3 tests/finetune/make_torchvision_resnet18.py OUT_DIR [--skip-without-torch]
Nothing it writes is committed: the weights are 45 MB and are made again in a few seconds.

Where that python cannot import torch or torchvision it fails, unless CMake passed
--skip-without-torch (the default python on a distribution that packages no PyTorch, as Ubuntu
24.04): then it writes the reason to OUT_DIR/SKIPPED, which test_finetune reads to report itself
skipped, and exits 77 (CTest: Skipped).

Files:
  resnet18.safetensors   torchvision resnet18(num_classes=10).state_dict() as it is, f32, with its
                         20 int64 num_batches_tracked counters: what a user saves from torchvision.
                         Seeded random init (torch.manual_seed(1234)); every batch norm gets
                         non-trivial gamma, beta, running mean and running variance, so eval-mode
                         logits depend on every tensor of the file.
  reference.safetensors  "input" (4, 3, 64, 64) f32 and "logits" (4, 10): torchvision's eval-mode
                         logits for that input, computed in float64 (the model cast to double) and
                         stored as f32, so Kiln's f32 result is compared with the exact answer
                         rather than with PyTorch's own f32 rounding.
  not-safetensors.pt     torch.save() of a small state dict (a zip of pickles): the file a user
                         might pass by mistake.
  frozen_bn.safetensors  One training-mode step of the same model with FROZEN_BN_PATTERNS frozen and
                         the batch norms they freeze in eval mode ([model] frozen_bn = "eval", as
                         Keras's trainable = False), in float64: "dlogits" (4, 10), the "logits", the
                         gradients of CHECKED_GRADIENTS after logits.backward(dlogits) as
                         "grad.<name>", and three running statistics after the forward as
                         "after.<name>" (a trainable layer's, updated; frozen layers', unchanged).
                         layer3 is frozen between trainable layer2 and layer4, so layer2's gradients
                         have come back through the frozen batch norms' backward.

safetensors is written here by hand (the format: u64 little-endian header length, JSON header
{"name": {"dtype", "shape", "data_offsets"}}, padded with spaces to a multiple of 8, then the
raw little-endian bytes); Debian 12 has no python3-safetensors.
"""
import json
import pathlib
import struct
import sys

SKIP_EXIT_CODE = 77  # SKIP_RETURN_CODE in CMakeLists.txt


def without_torch(out, error):
    """The exit code when torch or torchvision does not import: 77 after writing OUT_DIR/SKIPPED
    where the build allows it (--skip-without-torch), else 1."""
    reason = (f"{sys.executable} cannot import torch and torchvision ({error}), so the torchvision "
              f"reference of the fine-tuning tests cannot be written")
    if "--skip-without-torch" not in sys.argv[2:]:
        print(f"error: {reason}; scripts/setup.sh --tests installs python3-torch and "
              f"python3-torchvision (Debian), or configure with -DKILN_REFERENCE_PYTHON=<a python "
              f"that has both>", file=sys.stderr)
        return 1
    reason += ("; this distribution packages no PyTorch: configure with "
               "-DKILN_REFERENCE_PYTHON=<a python with torch and torchvision> to run these tests")
    out.mkdir(parents=True, exist_ok=True)
    (out / "SKIPPED").write_text(reason + "\n")
    print(f"SKIPPED: {reason}")
    return SKIP_EXIT_CODE


try:
    import torch
    import torchvision
except ImportError as import_error:
    sys.exit(without_torch(pathlib.Path(sys.argv[1]), import_error))

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}


def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


FROZEN_BN_PATTERNS = ("conv1.", "bn1.", "layer1.", "layer3.")  # name prefixes: conv1.*, bn1.*, layer1.*, layer3.*
CHECKED_GRADIENTS = ("layer2.0.conv1.weight", "layer2.0.bn1.weight", "layer2.0.downsample.0.weight",
                     "layer2.1.bn2.bias", "layer4.0.conv1.weight", "layer4.1.bn2.weight", "fc.weight", "fc.bias")
CHECKED_STATISTICS = ("layer2.0.bn1.running_mean", "layer2.0.bn1.running_var", "layer3.0.bn1.running_var")


def write_frozen_bn_step(out, state, x):
    model = torchvision.models.resnet18(num_classes=10)
    model.load_state_dict(state)
    model.double().train()
    for name, p in model.named_parameters():
        p.requires_grad_(not name.startswith(FROZEN_BN_PATTERNS))
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.BatchNorm2d) and not m.weight.requires_grad and not m.bias.requires_grad:
            m.eval()
    dlogits = torch.randn(4, 10)
    logits = model(x.double())
    logits.backward(dlogits.double())
    params, buffers = dict(model.named_parameters()), dict(model.named_buffers())
    tensors = {"dlogits": dlogits, "logits": logits.detach().float()}
    tensors.update({f"grad.{n}": params[n].grad.float() for n in CHECKED_GRADIENTS})
    tensors.update({f"after.{n}": buffers[n].float() for n in CHECKED_STATISTICS})
    write_safetensors(out / "frozen_bn.safetensors", tensors)


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "SKIPPED").unlink(missing_ok=True)  # from a configuration without torch
    torch.manual_seed(1234)
    model = torchvision.models.resnet18(num_classes=10)
    with torch.no_grad():
        for i, m in enumerate(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)):
            m.weight.uniform_(0.6, 1.4)
            m.bias.normal_(0.0, 0.1)
            m.running_mean.normal_(0.0, 0.2)
            m.running_var.uniform_(0.5, 2.0)
            m.num_batches_tracked.fill_(100 + i)
        model.fc.bias.normal_(0.0, 0.1)
    state = model.state_dict()
    assert sum(1 for k in state if k.endswith("num_batches_tracked")) == 20
    write_safetensors(out / "resnet18.safetensors", state, {"format": "pt"})

    x = torch.randn(4, 3, 64, 64)
    write_frozen_bn_step(out, state, x)  # before model.double() below changes the state's tensors
    model.eval()
    with torch.no_grad():
        logits = model.double()(x.double()).float()
    write_safetensors(out / "reference.safetensors", {"input": x, "logits": logits})

    torch.save({"weight": torch.zeros(3)}, out / "not-safetensors.pt")
    print(f"wrote {out}: {len(state)} state-dict entries; logits range "
          f"[{logits.min().item():.3f}, {logits.max().item():.3f}]")


if __name__ == "__main__":
    main()
