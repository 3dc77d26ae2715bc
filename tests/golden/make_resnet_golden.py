#!/usr/bin/python3
"""Writes tests/golden/resnet_golden.bin: a PyTorch reference for one SGD training step of a
width-reduced ResNet-50 v1.5 (Kiln's `resnet` model with depth 50, width 0.03125, 10 classes,
96x96 inputs). The reference is computed in float64 and stored as f32, so a Kiln f32 run is
measured against the exact answer, not against PyTorch's own f32 rounding (which, in a network
this narrow, is itself ~1e-4 off in places). 96x96 keeps the last stage's batch norms over 3x3
positions: at 32x32 they normalise 4 values and the gradients become ill-conditioned.

Run with Debian's python, torch 1.13 and python3-torchvision:
    /usr/bin/python3 tests/golden/make_resnet_golden.py
The output is committed; test_resnet_golden.cpp compares Kiln against it. Regenerate only when
the reference itself must change.

The network is defined here (Bottleneck, ResNet with a width multiplier applied to the stage
widths 64/128/256/512, rounded, as Kiln's `width`). Before writing anything the script checks
that this definition at width 1.0 IS torchvision's resnet50: same state_dict names and shapes,
and the same logits (eval and train mode) with torchvision's weights loaded.

Step: x (4, 3, 96, 96), labels (4); train-mode forward; loss = mean cross entropy; backward;
torch.optim.SGD(lr 0.1, momentum 0.9, weight_decay 1e-4 on conv and fc weights only; BN
parameters and fc.bias in a group with weight_decay 0, Kiln's rule). BN gammas/betas are
randomised first so every gradient path is exercised.

File format: as make_mlp_golden.py (b"KILNGLD1", u32 version 1, u32 N, then N named f32 arrays).
Arrays: input, labels (as f32), logits, loss (1), <param> (initial), grad.<param>,
sgd.<param> (after the step), <bn>.running_mean / <bn>.running_var (after the forward).
"""
import pathlib
import struct

import torch
import torch.nn as nn
import torchvision

MAGIC = b"KILNGLD1"
VERSION = 1
WIDTH, CLASSES, BATCH, SIZE = 0.03125, 10, 4, 96


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)  # v1.5
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != planes * 4:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(planes * 4))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = self.downsample(x) if self.downsample is not None else x
        return self.relu(out + identity)


class ResNet50(nn.Module):
    def __init__(self, width, num_classes):
        super().__init__()
        w = lambda base: max(1, int(round(base * width)))
        self.conv1 = nn.Conv2d(3, w(64), 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(w(64))
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        inplanes = w(64)
        for i, (base, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
            layers = []
            for j in range(blocks):
                layers.append(Bottleneck(inplanes, w(base), 2 if (i > 0 and j == 0) else 1))
                inplanes = w(base) * 4
            setattr(self, f"layer{i + 1}", nn.Sequential(*layers))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def check_against_torchvision():
    torch.manual_seed(1)
    ref = torchvision.models.resnet50(num_classes=1000)
    ours = ResNet50(1.0, 1000)
    a, b = ref.state_dict(), ours.state_dict()
    assert list(a.keys()) == list(b.keys()), "state_dict names differ from torchvision's resnet50"
    for k in a:
        assert a[k].shape == b[k].shape, f"{k}: {tuple(b[k].shape)} vs torchvision {tuple(a[k].shape)}"
    ours.load_state_dict(a)
    x = torch.randn(2, 3, 64, 64)
    for mode in ("eval", "train"):
        getattr(ref, mode)()
        getattr(ours, mode)()
        with torch.no_grad():
            assert torch.allclose(ref(x), ours(x), rtol=1e-5, atol=1e-5), f"logits differ ({mode} mode)"


def make_case():
    """The golden case: the float64 model with its initial weights, the input batch and labels
    (also used by measure_resnet_mixed.py, so both scripts see the same numbers)."""
    torch.manual_seed(20240612)
    model = ResNet50(WIDTH, CLASSES).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".bn" in name or name.startswith("bn1.") or "downsample.1." in name:
                if name.endswith(".weight"):
                    p.uniform_(0.5, 1.5)
                else:
                    p.uniform_(-0.5, 0.5)
        for p in model.parameters():
            p.copy_(p.float().double())  # start from values Kiln's f32 weights hold exactly
    x = torch.randn(BATCH, 3, SIZE, SIZE).float().double()  # exactly representable in f32
    labels = torch.tensor([3, 7, 0, 7])
    return model, x, labels


def sgd(params):
    """Kiln's optimizer rule: weight decay 1e-4 on conv and fc weights only."""
    decay = [p for n, p in params.items() if p.dim() > 1]
    no_decay = [p for n, p in params.items() if p.dim() <= 1]
    return torch.optim.SGD([{"params": decay, "weight_decay": 1e-4}, {"params": no_decay, "weight_decay": 0.0}],
                           lr=0.1, momentum=0.9)


def main():
    check_against_torchvision()
    model, x, labels = make_case()
    params = dict(model.named_parameters())
    initial = {n: p.detach().clone() for n, p in params.items()}

    model.train()
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, labels)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in params.items()}
    stats = {n: b.detach().clone() for n, b in model.named_buffers() if not n.endswith("num_batches_tracked")}

    sgd(params).step()

    arrays = [("input", x), ("labels", labels.to(torch.float32)), ("logits", logits.detach()),
              ("loss", loss.detach().reshape(1))]
    arrays += list(initial.items())
    arrays += [("grad." + n, g) for n, g in grads.items()]
    arrays += [("sgd." + n, p.detach()) for n, p in params.items()]
    arrays += list(stats.items())

    out = bytearray(MAGIC + struct.pack("<II", VERSION, len(arrays)))
    for name, t in arrays:
        t = t.detach().to(torch.float32).contiguous()
        encoded = name.encode("ascii")
        out += struct.pack("<I", len(encoded)) + encoded
        out += struct.pack("<I", t.dim()) + struct.pack("<%dq" % t.dim(), *t.shape)
        out += struct.pack("<%df" % t.numel(), *t.flatten().tolist())
    path = pathlib.Path(__file__).with_name("resnet_golden.bin")
    path.write_bytes(bytes(out))
    print(f"wrote {path} ({len(out)} bytes, {len(arrays)} arrays, loss {loss.item():.6f})")


if __name__ == "__main__":
    main()
