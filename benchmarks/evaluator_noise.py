"""A/A noise test of the evaluator on the bundled rmsnorm task (7 shape cases), on a GPU.

1. The baseline against an identical copy, evaluated N times: target |median ratio - 1| <= 0.5%, 0 of N promoted.
2. Variants made slower by an extra partial pass: each must be measured slower (interval below 1) in every run.
3. A variant known to be faster (single pass, row in registers): must be promoted.
4. With ``--aa TASK_DIR...``: each further task's baseline against itself, ``--runs`` times (tiny decode kernels,
   where a bias between the sides would show): how many rounds it won by the 2% margin, and 0 promoted.
5. With ``--busy``: step 1 again, each A/A evaluation submitted beside never-compiled variants (one per other worker,
   two at least), so that the other workers compile while it is timed, as they do in a search (checking and timing
   take the GPU in turns).

    python benchmarks/evaluator_noise.py --runs 20 --out results.json [--aa TASK_DIR...]
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

from evaluator import Evaluator, TaskError  # noqa: E402
from variants import BASELINE, FASTER, TASK, fresh, slower, write  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--slow-runs", type=int, default=5)
    p.add_argument("--fractions", type=int, nargs="+", default=[16, 8, 4])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--aa", type=Path, nargs="*", default=[], help="further task directories for the A/A check alone")
    p.add_argument("--busy", action="store_true", help="also the A/A with the other workers compiling beside it")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="noise-"))
    same = write(tmp, "identical", BASELINE)
    report: dict = {"task": "rmsnorm", "runs": args.runs, "rounds": args.rounds}
    t0 = time.time()
    with Evaluator(TASK, backend="cuda", rounds=args.rounds) as ev:
        ev.prepare()
        aa = [ev.submit(same).result() for _ in range(args.runs)]
        report["env"] = aa[0].env
        report["aa"] = [{"speedup": r.speedup, "ci": r.speedup_ci, "status": r.status,
                         "cases": {c["name"]: c["ratio"] for c in r.cases}} for r in aa]
        slow = {}
        for f in args.fractions:
            path = write(tmp, f"slower_1of{f}", slower(f))
            rs = [ev.submit(path).result() for _ in range(args.slow_runs)]
            slow[f] = [{"speedup": r.speedup, "ci": r.speedup_ci, "status": r.status,
                        "detail": r.detail} for r in rs]
        report["slower"] = slow
        if args.busy:
            busy, others = [], []
            for i in range(args.runs):
                busy.append(ev.submit(same))
                others += [ev.submit(write(tmp, f"fresh{i}_{j}", fresh(1000 * int(t0) + 100 * i + j)))
                           for j in range(max(2, ev.capacity - 1))]  # every other worker compiling
            busy = [f.result() for f in busy]
            report["busy_compiled"] = sum(f.result().elapsed_s.get("compile", 0.0) for f in others)
            report["aa_busy"] = [{"speedup": r.speedup, "ci": r.speedup_ci, "status": r.status} for r in busy]
        fast = ev.submit(write(tmp, "faster", FASTER)).result()
        report["faster"] = {"speedup": fast.speedup, "ci": fast.speedup_ci, "status": fast.status,
                            "cases": fast.cases}
    report["more_aa"] = {}
    for task in args.aa:
        try:
            with Evaluator(task, backend="cuda", rounds=args.rounds) as ev:
                ev.prepare()
                rs = [ev.submit(task / "kernel.py").result() for _ in range(args.runs)]
        except TaskError as e:
            print(f"A/A {task.name}: {e}", file=sys.stderr)
            continue
        report["more_aa"][task.name] = [{"speedup": r.speedup, "ci": r.speedup_ci, "status": r.status,
                                         "detail": r.detail} for r in rs]
    report["wall_s"] = time.time() - t0

    ratios = [r["speedup"] for r in report["aa"]]
    med = statistics.median(ratios)
    promoted = sum(r["status"] == "promoted" for r in report["aa"])
    case_devs = {name: statistics.median(r["cases"][name] for r in report["aa"]) - 1 for name in report["aa"][0]["cases"]}
    print(f"A/A: {args.runs} runs, median geomean ratio {med:.4f} (|dev| {abs(med - 1) * 100:.2f}%), "
          f"min {min(ratios):.4f}, max {max(ratios):.4f}, promoted {promoted}/{args.runs}")
    for name, dev in case_devs.items():
        print(f"  A/A per case median deviation {name}: {dev * 100:+.2f}%")
    if "aa_busy" in report:
        busy = [r["speedup"] for r in report["aa_busy"]]
        print(f"A/A beside compiling workers: median geomean ratio {statistics.median(busy):.4f}, min {min(busy):.4f}, "
              f"max {max(busy):.4f}, promoted {sum(r['status'] == 'promoted' for r in report['aa_busy'])}/{len(busy)}")
    for f, rs in slow.items():
        sp = [r["speedup"] for r in rs]
        below = sum(r["ci"] is not None and r["ci"][1] < 1.0 for r in rs)
        print(f"slower 1/{f}: speedups {['%.4f' % s for s in sp if s is not None]}, interval below 1 in {below}/{len(rs)}"
              f" {[r['status'] for r in rs]}")
    print(f"faster: {fast.status} {fast.speedup:.3f}x CI {fast.speedup_ci}")
    for c in fast.cases:
        print(f"  {c['name']}: base {c['base_us']:.2f} us, cand {c['cand_us']:.2f} us, ratio {c['ratio']:.3f}, "
              f"{c['cand_gbps']:.0f} GB/s ({c['cand_bw_fraction']:.0%} of copy), {c['method']}, copies {c['copies']}")
    for name, rs in report["more_aa"].items():
        sp = [r["speedup"] for r in rs if r["speedup"] is not None]
        print(f"A/A {name}: geomeans {min(sp, default=0):.4f}-{max(sp, default=0):.4f}, "
              f"promoted {sum(r['status'] == 'promoted' for r in rs)}/{len(rs)}, statuses "
              f"{sorted(set(r['status'] for r in rs))}; {[r['detail'] for r in rs]}")
    print(f"wall {report['wall_s']:.0f} s; env {json.dumps(report['env'])}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
