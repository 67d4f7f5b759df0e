"""Hand-written input specs: how many each target YAML still carries, and which of them say nothing extraction
would not say by itself.

    python benchmarks/hand_specs.py                      # entries and keys per bundled target
    python benchmarks/hand_specs.py sglang=/path/to/sglang --redundant

With ``--redundant``, every launcher entry of the target's ``inputs:`` that a launched kernel's task is built from is
extracted once as the YAML stands and once per key without that key (no self-check: the question is only whether
the harness changes). A key whose removal leaves the task's input specs identical (with the entry's other redundant
keys gone too) is redundant: the name rules,
the launcher's defaults, a layout or the inference already give the same input, so the key can go with no change to
any task, and so no loss of coverage. Entries with ``_kernels`` are left as they are: each of those kernels' own
tasks lays its specs over the entry's, so a key the first task does without may be one another task needs.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def counts(name: str) -> tuple[int, int]:
    """(launcher entries, spec keys: their parameters and those of their `_kernels` entries) under ``inputs:``."""
    inputs = yaml.safe_load((ROOT / "targets" / f"{name}.yaml").read_text()).get("inputs") or {}
    keys = 0
    for entry in inputs.values():
        entry = entry or {}
        keys += sum(1 for k in entry if not k.startswith("_"))
        for own in (entry.get("_kernels") or {}).values():
            keys += sum(1 for k in own if not k.startswith("_"))
    return len(inputs), keys


def _spec_line(task: Path) -> str:
    text = (task / "harness.py").read_text()
    return "\n".join(line for line in text.splitlines() if re.match(r"(SPEC|EXTRA_DIMS) = ", line))


def redundant(name: str, source: str) -> list[tuple[str, str]]:
    """(entry, key) of the keys whose removal, together, leaves each task's input specs as they are."""
    from smithbot import api
    from smithbot.extract.build import extract as build, launcher

    result = api.scan(name, source=source)
    target = result.target
    sites: dict[str, dict[str, object]] = {}  # entry -> {launcher's file: a site it launches}
    for site in (s for s in result.sites if s.role == "launched"):
        via = launcher(result.checkout.root, site, result.modules, target.inputs)
        if via is not None:
            key = via[1].replace(".", "_")
            own = f"{via[0]}::{key}"  # an entry for this file's launcher of that name takes the place of the plain one
            entry = own if own in target.inputs else key
            if entry in target.inputs:
                sites.setdefault(entry, {}).setdefault(via[0], site)
    out: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (entry, by_file) in enumerate(sorted(sites.items())):
            def built(inputs: dict, tag: str) -> list[str | None]:
                """The input specs of the task of each launcher the entry serves (None: it does not build)."""
                lines: list[str | None] = []
                for j, site in enumerate(by_file.values()):
                    t = replace(target, inputs=inputs, reach_presets=site.presets, reach_phases=site.phases)
                    dest = Path(tmp) / f"{i}-{j}-{tag}"
                    try:
                        build(result.checkout.root, result.checkout.commit, result.checkout.url, t, site,
                              result.modules, dest, name=f"{i}-{j}-{tag}")
                    except Exception:  # noqa: BLE001 - a launcher that does not build as the YAML stands
                        lines.append(None)
                        continue
                    lines.append(_spec_line(dest))
                return lines

            spec = target.inputs[entry]
            if "_kernels" in spec:  # its kernels' own tasks take the entry's specs under theirs: not tried here
                continue
            base = built(target.inputs, "base")
            if all(b is None for b in base):
                continue
            kept = dict(spec)  # keys go one at a time, each only if the tasks stay as they were without the others
            for key in [k for k in spec if not k.startswith("_")]:
                without = {k: v for k, v in kept.items() if k != key}
                if built({**target.inputs, entry: without}, key) == base:
                    kept = without
                    out.append((entry, key))
                    print(f"  {entry}: {key}", flush=True)
    return out


def drop(name: str, keys: list[tuple[str, str]]) -> int:
    """Remove ``keys`` ((entry, key)) from ``targets/NAME.yaml``'s text, each with its value's continuation lines; a
    key whose line defines a YAML anchor stays (others refer to it). Returns how many went."""
    path = ROOT / "targets" / f"{name}.yaml"
    lines = path.read_text().splitlines(keepends=True)
    gone, entry, skip = 0, None, False
    out = []
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if skip and line.strip() and indent > 4:
            continue  # the dropped key's value goes on
        skip = False
        m = re.match(r"  (['\"]?)([^\s#'\"][^'\"]*?)\1:(\s|$)", line)
        if m and indent == 2:
            entry = m.group(2)
        k = re.match(r"    ([A-Za-z_]\w*):(\s|$)", line)
        if k and indent == 4 and (entry, k.group(1)) in keys and "&" not in line:
            gone, skip = gone + 1, True
            continue
        out.append(line)
    path.write_text("".join(out))
    return gone


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*", help="NAME=CHECKOUT, for --redundant")
    ap.add_argument("--redundant", action="store_true", help="find the keys extraction would give by itself")
    ap.add_argument("--apply", action="store_true", help="with --redundant: remove them from the target YAML")
    args = ap.parse_args()
    print("| target | launcher entries | spec keys |\n|---|---|---|")
    for name in ("sglang", "lmdeploy", "engram"):
        n, k = counts(name)
        print(f"| {name} | {n} | {k} |")
    if args.redundant:
        for arg in args.targets:
            name, _, path = arg.partition("=")
            found = redundant(name, path)
            print(f"{name}: {len(found)} keys say what extraction gives by itself")
            if args.apply:
                print(f"{name}: {drop(name, found)} removed from targets/{name}.yaml")


if __name__ == "__main__":
    main()
