"""Aim against a ground truth read from the engines' code: precision of scan's top kernels and top glue runs.

    python benchmarks/aim_truth.py sglang=/path/to/sglang lmdeploy=/path/to/lmdeploy [--top 10] [--glue-top 5]
    python benchmarks/aim_truth.py vllm=/path/to/vllm --per-preset

The ground truth is ``tests/fixtures/default_path/TARGET.yaml``, written by reading each engine's serving code
before the ranking was changed: the Triton kernels a default step launches (``kernels``), those it does not
(``not_default``), and the runs of torch glue a default decode step executes (``glue``), each with its decisive line.
It is a check of method, not a list to fit: nothing in smithbot reads it. For each target this prints scan's top
kernels over all presets and its top glue runs, each marked default / not default / not in the truth, and the
precision (a row not in the truth counts as a miss). With ``--per-preset``, it measures instead the set each preset's
scan decides is default against the truth's kernels for that preset: precision and recall.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smithbot import api  # noqa: E402

TRUTH = ROOT / "tests" / "fixtures" / "default_path"


def _glue_key(module: str, function: str) -> str:
    return f"{module}:{function}"


def glue_verdict(site: dict, truth: dict) -> str:
    """default, if a truth glue entry names the same function and its lines overlap the site's; not default, if a
    not_glue entry does; else unknown."""
    key = _glue_key(site["module"], site["function"])
    first, last = site["lines"]
    for label, rows in (("default", truth.get("glue") or []), ("not default", truth.get("not_glue") or [])):
        for row in rows:
            lines = row.get("lines") or [first, last]
            if row["function"] == key and lines[0] <= last and first <= lines[1]:
                return label
    return "unknown"


def per_preset(name: str, path: str, truth: dict) -> None:
    """For each preset the truth names: the kernels its scan decides are default, against the truth's."""
    presets = sorted({p for k in truth.get("kernels") or [] for p in k["presets"]})
    print(f"\n## {name}: the decided-default set per preset\n")
    print("| preset | decided default | truth | both | precision | recall |\n|---|---|---|---|---|---|")
    for preset in presets:
        want = {k["name"] for k in truth["kernels"] if preset in k["presets"]}
        got = {s.name for s in api.scan(name, source=path, model=preset).sites
               if s.role == "launched" and s.reach == "default"}
        both = want & got
        precision = f"{len(both)}/{len(got)}" if got else "- (none decided)"
        print(f"| {preset} | {', '.join(sorted(got)) or '-'} | {', '.join(sorted(want))} | {len(both)} | {precision} | "
              f"{len(both)}/{len(want)} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("targets", nargs="+", help="NAME=CHECKOUT")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--glue-top", type=int, default=5)
    p.add_argument("--per-preset", action="store_true", help="the decided-default set per preset: precision, recall")
    args = p.parse_args()
    for spec in args.targets:
        name, _, path = spec.partition("=")
        truth = yaml.safe_load((TRUTH / f"{name}.yaml").read_text())
        if args.per_preset:
            per_preset(name, path, truth)
            continue
        default = {k["name"] for k in truth.get("kernels") or []}
        never = {k["name"] for k in truth.get("not_default") or []}
        result = api.scan(name, source=path)
        launched = [s for s in result.sites if s.role == "launched"][: args.top]
        hits = 0
        print(f"\n## {name}: top {args.top} kernels (all presets)\n")
        print("| # | kernel | hotness | reach | truth |\n|---|---|---|---|---|")
        for i, s in enumerate(launched, 1):
            verdict = "default" if s.name in default else ("not default" if s.name in never else "unknown")
            hits += verdict == "default"
            print(f"| {i} | `{s.name}` | {s.hotness} | {s.reach} | {verdict} |")
        print(f"\nprecision@{args.top}: {hits}/{len(launched)}")
        glue = [f.to_dict() for f in result.fusion[: args.glue_top]]
        ghits = 0
        print(f"\n## {name}: top {args.glue_top} glue runs\n")
        print("| # | glue | reach | launches/step | truth |\n|---|---|---|---|---|")
        for i, g in enumerate(glue, 1):
            verdict = glue_verdict(g, truth)
            ghits += verdict == "default"
            print(f"| {i} | `{g['function']}` {g['lines'][0]}-{g['lines'][1]} | {g['reach']} | "
                  f"{g['launches_per_step']} | {verdict} |")
        print(f"\nglue precision@{args.glue_top}: {ghits}/{len(glue)}")


if __name__ == "__main__":
    main()
