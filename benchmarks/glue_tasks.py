"""How many runs of torch glue that ``smithbot scan`` lists become fusion tasks, and how many of those pass their
self-check (the baseline runs on every case): ``smithbot extract TARGET glue:FUNCTION:LINE`` for each run.

    python benchmarks/glue_tasks.py sglang=~/src/sglang lmdeploy=~/src/lmdeploy --keep glue-tasks [--no-check]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smithbot import api  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("targets", nargs="+", help="NAME=CHECKOUT (or a bundled NAME, such as demo)")
    p.add_argument("--keep", type=Path, default=None, help="write the tasks here (default: a temporary folder)")
    p.add_argument("--no-check", dest="check", action="store_false", help="write the tasks without self-checks")
    args = p.parse_args()
    keep = args.keep or Path(tempfile.mkdtemp(prefix="glue-tasks-"))
    for spec in args.targets:
        name, _, source = spec.partition("=")
        t0 = time.perf_counter()
        result = api.scan(name, source or None)
        rows = []
        for i, site in enumerate(result.fusion):
            rows.append(api.extract_glue_site(result, site, keep / name / f"{i:03d}", keep, args.check, 120.0))
            print(f"  {rows[-1].kernel}: {'ok' if rows[-1].checked else rows[-1].why[:160]}", file=sys.stderr)
        made = sum(r.extracted for r in rows)
        passed = sum(r.checked for r in rows)
        why = collections.Counter(r.why.split(": ", 1)[-1].split(" of ", 1)[0][:70] for r in rows if not r.checked)
        print(f"\n{name}: {len(rows)} runs of glue, {made} written as fusion tasks, {passed} passed their self-check "
              f"({time.perf_counter() - t0:.0f} s)")
        for reason, n in why.most_common(8):
            print(f"  {n:3d}  {reason}")


if __name__ == "__main__":
    main()
