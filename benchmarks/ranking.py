"""The default-path ranking on real checkouts: the top kernels per model preset, each with its path, plus the
Aim issue's checks.

    python benchmarks/ranking.py sglang=/path/to/sglang lmdeploy=/path/to/lmdeploy engram=/path/to/DLBlas [--top 15]

Checkouts are fetched by the user and never committed. For each target it prints, per preset, the top kernels with
their hotness and default path, then over all presets the position of every kernel launched only from code for
other hardware (a fallback branch the serving defaults decide against, or a file or class named for another
platform, the words of ``serving.other_platforms``). Ends with the time of a cold and a warm all-preset scan.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smithbot import api  # noqa: E402
from smithbot.types import KernelSite  # noqa: E402


def other_hardware_only(s: KernelSite, words: set[str]) -> bool:
    def foreign(path: str, qual: str) -> bool:
        tokens = set(re.split(r"[/._]", path.lower())) | {t.lower() for t in re.findall(
            r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", qual.split(".")[0])}
        return bool(tokens & words)

    if foreign(s.path, ""):
        return True
    return bool(s.launches) and all(la.fallback_only or foreign(la.path, la.wrapper) for la in s.launches)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("targets", nargs="+", help="NAME=CHECKOUT")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    for arg in args.targets:
        name, _, path = arg.partition("=")
        os.environ["SMITHBOT_HOME"] = tempfile.mkdtemp(prefix="ranking-")
        t0 = time.perf_counter()
        everything = api.scan(name, source=path)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        api.scan(name, source=path)
        warm = time.perf_counter() - t0
        target = everything.target
        print(f"## {name} @ {everything.checkout.commit[:12]}\n")
        for preset in target.models:
            r = api.scan(name, source=path, model=preset.name)
            launched = [s for s in r.sites if s.role == "launched"]
            print(f"### {preset.name} ({preset.architecture}, {preset.layers} layers)\n")
            print("| # | kernel | hotness | default path |\n|---|---|---|---|")
            for i, s in enumerate(launched[:args.top], 1):
                print(f"| {i} | `{s.name}` | {s.hotness:g} | {s.default_path or '-'} |")
            print()
        launched = [s for s in everything.sites if s.role == "launched"]
        words = set(target.serving.other_platforms)
        foreign = [(i, s.name) for i, s in enumerate(launched, 1) if other_hardware_only(s, words)]
        on_path = sum(bool(s.presets) for s in launched)
        print(f"all presets: {len(launched)} launched kernels, {on_path} on a preset's default path; "
              f"other-hardware-only kernels in the top 50: {[x for x in foreign if x[0] <= 50] or 'none'}; "
              f"first at #{foreign[0][0] if foreign else '-'}")
        print(f"all-preset scan: cold {cold:.2f} s, warm {warm:.2f} s on {os.cpu_count()} cores\n")


if __name__ == "__main__":
    main()
