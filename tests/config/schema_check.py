"""`kiln config schema` checked with an independent JSON Schema validator (Debian's
python3-jsonschema, draft-04 as Taplo reads it): every sample config is valid against it, and
each kind of mistake `kiln train` refuses (unknown key, wrong type, out of range, not a choice,
a key of another plugin, an unknown plugin, a plugin table without its type) is invalid.

Usage: schema_check.py <kiln binary> <samples dir>
"""
import copy
import json
import pathlib
import subprocess
import sys
import tomllib

import jsonschema


def main() -> int:
    kiln, samples = sys.argv[1], pathlib.Path(sys.argv[2])
    text = subprocess.run([kiln, "config", "schema"], check=True, capture_output=True, text=True).stdout
    schema = json.loads(text)
    jsonschema.Draft4Validator.check_schema(schema)
    validator = jsonschema.Draft4Validator(schema)
    failures = []

    configs = sorted(samples.glob("*.toml"))
    if not configs:
        failures.append(f"no sample configs in {samples}")
    # The schema lists the plugins this kiln found: a build without CUDA has no `cuda` backend and
    # no `nccl-*` communicator, and refuses the GPU samples rightly. Those are skipped, by name.
    built = {kind: set(schema["properties"][kind]["properties"]["type"]["enum"]) for kind in ("backend", "comm")}
    checked = 0
    for path in configs:
        with open(path, "rb") as f:
            config = tomllib.load(f)
        missing = [f"{kind} '{config[kind]['type']}'" for kind in built
                   if "type" in config.get(kind, {}) and config[kind]["type"] not in built[kind]]
        if missing:
            print(f"skipped {path.name}: needs {', '.join(missing)}, not built here")
            continue
        checked += 1
        errors = [e.message for e in validator.iter_errors(config)]
        if errors:
            failures.append(f"{path.name} is a valid config but the schema refuses it: {errors[:3]}")
    print(f"{checked} sample configs valid against the schema")

    with open(samples / "fashion-mnist-mlp.toml", "rb") as f:
        base = tomllib.load(f)

    def edited(edit):
        c = copy.deepcopy(base)
        edit(c)
        return c

    valid = {
        "the optimizer's default type (adam) with an adam key": edited(
            lambda c: c.update(optimizer={"lr": 0.01, "beta1": 0.8})),
        "the backend's default type (cpu) with a cpu key": edited(lambda c: c.update(backend={"threads": 1})),
        "the host's freeze key in [model]": edited(lambda c: c["model"].update(freeze=["layers.0.*"])),
        "a plateau schedule with its own keys": edited(
            lambda c: c.update(schedule={"type": "plateau", "metric": "eval_accuracy", "patience": 2, "min_lr": 1e-5})),
        "a moving average of the weights": edited(lambda c: c.update(ema={"decay": 0.999, "every_steps": 4})),
    }
    invalid = {
        "an unknown key in [model]": edited(lambda c: c["model"].update(hiden=[64])),
        "an unknown table": edited(lambda c: c.update(trainer={"epochs": 1})),
        "a string where an integer goes": edited(lambda c: c["run"].update(epochs="ten")),
        "run.epochs below its minimum": edited(lambda c: c["run"].update(epochs=0)),
        "loader.last_batch not one of its choices": edited(lambda c: c["loader"].update(last_batch="dropp")),
        "an adam key in an sgd [optimizer]": edited(
            lambda c: c.update(optimizer={"type": "sgd", "lr": 0.1, "beta1": 0.9})),
        "a step key in a cosine [schedule]": edited(lambda c: c.update(schedule={"type": "cosine", "gamma": 0.5})),
        "a plateau key in the default (constant) [schedule]": edited(lambda c: c.update(schedule={"patience": 3})),
        "an [ema] decay of 1 (outside [0, 1))": edited(lambda c: c.update(ema={"decay": 1.0})),
        "an unknown key in [ema]": edited(lambda c: c.update(ema={"decay": 0.999, "warmup": 10})),
        "a backend no plugin provides": edited(lambda c: c.update(backend={"type": "tpu"})),
        "a data table without its type": edited(lambda c: c["data"]["train"].pop("type")),
        "a cpu key on the cuda backend": edited(lambda c: c.update(backend={"type": "cuda", "conv3x3": "auto"})),
    }
    for what, config in valid.items():
        errors = [e.message for e in validator.iter_errors(config)]
        if errors:
            failures.append(f"{what}: valid, but the schema refuses it: {errors[:3]}")
    for what, config in invalid.items():
        if validator.is_valid(config):
            failures.append(f"{what}: kiln train refuses it, but the schema accepts it")
    print(f"{len(valid)} valid and {len(invalid)} invalid edits judged")

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
