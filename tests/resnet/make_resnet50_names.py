#!/usr/bin/python3
# Writes resnet50_names.txt: every parameter and buffer of torchvision's resnet50(num_classes=1000)
# in state_dict order, one per line: "param|buffer <name> <d0>,<d1>,...", then the total parameter
# count. test_resnet checks Kiln's `resnet` model (depth 50) against it name by name.
# num_batches_tracked buffers are left out: Kiln's BN has no such counter (momentum is fixed).
# Run with Debian's python (torch + python3-torchvision):  /usr/bin/python3 make_resnet50_names.py
import os
import sys

import torchvision


def main():
    model = torchvision.models.resnet50(num_classes=1000)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resnet50_names.txt")
    params = dict(model.named_parameters())
    total = 0
    lines = [f"# torchvision {torchvision.__version__} resnet50(num_classes=1000), state_dict order"]
    for name, t in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        kind = "param" if name in params else "buffer"
        if kind == "param":
            total += t.numel()
        lines.append(f"{kind} {name} {','.join(str(d) for d in t.shape)}")
    lines.append(f"total_parameters {total}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}: {total} parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
