"""Full-cascade evaluations per GPU-minute on the bundled rmsnorm task, with distinct candidates (launch-config
variants, each compiled anew), one worker on one GPU. Reports where the time goes.

    python benchmarks/evaluator_throughput.py --out throughput.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from evaluator import Evaluator  # noqa: E402
from variants import TASK, launch_variant, write  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="throughput-"))
    paths = [write(tmp, f"b{b}_w{w}", launch_variant(b, w))
             for b in (128, 256, 512, 1024, 2048, 4096) for w in (1, 2, 4, 8) if (b, w) != (256, 4)]
    with Evaluator(TASK, backend="cuda", rounds=args.rounds) as ev:
        t_prep = time.time()
        ev.prepare()
        t0 = time.time()
        prep_s = t0 - t_prep
        results = [f.result() for f in [ev.submit(p) for p in paths]]
        wall = time.time() - t0
    stages = {k: sum(r.elapsed_s.get(k, 0.0) for r in results) for k in ("compile", "correctness", "timing", "total")}
    per_min = len(results) / (wall / 60)
    print(f"{len(results)} distinct candidates in {wall:.1f} s after a {prep_s:.1f} s task preparation: "
          f"{per_min:.1f} full-cascade evaluations per GPU-minute")
    for k, v in stages.items():
        print(f"  {k:12s} {v:7.1f} s  ({v / len(results):.2f} s per candidate)")
    print("  statuses:", {s: sum(r.status == s for r in results) for s in {r.status for r in results}})
    print("  speedups:", [f"{r.speedup:.2f}" if r.speedup else r.status for r in results])
    if args.out:
        args.out.write_text(json.dumps({"candidates": len(results), "wall_s": wall, "prepare_s": prep_s,
                                        "per_gpu_minute": per_min, "stages_s": stages,
                                        "median_total_s": statistics.median(r.elapsed_s["total"] for r in results),
                                        "env": results[0].env, "results": [r.to_dict() for r in results]},
                                       indent=1, default=str))


if __name__ == "__main__":
    main()
