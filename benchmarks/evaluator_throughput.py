"""Full-cascade evaluations per GPU-minute, with distinct candidates (launch-config variants, each compiled anew),
three workers sharing one GPU as a search runs them (each prepared before the clock starts, as a search prepares
them). Reports where the time goes.

    python benchmarks/evaluator_throughput.py --out throughput.json            # the bundled rmsnorm
    python benchmarks/evaluator_throughput.py TASK_DIR... --out throughput.json  # extracted tasks
    python benchmarks/evaluator_throughput.py --devices 2 [--backend interpreter]  # one device against two

For an extracted task the candidates are distinct random points of its launch-config knobs (the ``tune`` proposer's
edits). Uniform draws include tiles no search would try twice (act_quant's 1024-row blocks with 16 warps compile for
tens of seconds), so ``--search S`` also measures the rate a search reaches: ``smithbot evolve`` with the ``tune``
proposer for S seconds, counting from its run database the candidates whose evaluation ran to a verdict. A task whose baseline the evaluator finds host-bound is not timed: instead ``smithbot evolve`` is run on it and
the seconds to its verdict are reported, which is what a search spends on it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from evaluator import Evaluator  # noqa: E402
from variants import TASK, launch_variant, write  # noqa: E402


def rmsnorm_variants(tmp: Path) -> list[Path]:
    return [write(tmp, f"b{b}_w{w}", launch_variant(b, w))
            for b in (128, 256, 512, 1024, 2048, 4096) for w in (1, 2, 4, 8) if (b, w) != (256, 4)]


def tune_variants(task: Path, tmp: Path, n: int, seed: int = 0) -> list[Path]:
    """Up to ``n`` distinct random launch configs of the task's knobs, none the baseline's."""
    from smithbot.evolve import tune
    from smithbot.evolve.edits import source_hash

    base = (task / "kernel.py").read_text(encoding="utf-8")
    ks = [k for k in tune.knobs(base) if len(k.values()) > 1]
    rng, seen, out = random.Random(seed), {source_hash(base)}, []
    for _ in range(50 * n):
        if len(out) == n or not ks:
            break
        src = tune.set_knobs(base, {k.id: rng.choice(k.values()) for k in ks if rng.random() < 0.6})
        if source_hash(src) not in seen:
            seen.add(source_hash(src))
            out.append(write(tmp, f"{task.name}_v{len(out)}", src))
    return out


def fresh_cache(tmp: Path, label: str) -> None:
    """Triton's compile cache for what comes next: an empty one, so that no arm finds another's binaries."""
    cache = tmp / f"triton-cache-{label}"
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = str(cache)


def measure(task: Path, paths: list[Path], rounds: int | None, workers: int | None, ahead: bool | None = None,
            backend: str = "cuda", devices: int | None = None) -> dict[str, Any]:
    t_start = time.time()
    with Evaluator(task, backend=backend, rounds=rounds, workers_per_gpu=workers, ahead=ahead,
                   devices=devices) as ev:
        ev.prepare(every_worker=True, host_first=True)  # as a search starts
        prep_s = time.time() - t_start
        row: dict[str, Any] = {"task": task.name, "prepare_s": prep_s, "phases_s": ev.prepare_s, "host": ev.host,
                               "host_bound": ev.host_bound, "workers": ev.capacity, "devices": ev.devices}
        if ev.host_bound:
            return row
        t0 = time.time()
        results = [f.result() for f in [ev.submit(p) for p in paths]]
        wall = time.time() - t0
    stages = {k: sum(r.elapsed_s.get(k, 0.0) for r in results)
              for k in ("ahead", "compile", "correctness", "timing", "total")}
    row.update(candidates=len(results), wall_s=wall, per_minute=len(results) / (wall / 60),
               per_gpu_minute=len(results) / (wall / 60) / ev.devices, stages_s=stages,
               gpu_busy=sum(r.device_s for r in results) / wall / ev.devices,
               busy_by_device={d: sum(r.device_s for r in results if r.device == d) / wall
                               for d in sorted({r.device for r in results} - {""})},
               statuses={s: sum(r.status == s for r in results) for s in {r.status for r in results}},
               speedups=[r.speedup for r in results], env=results[0].env if results else {},
               cases=len(results[0].cases) if results and results[0].cases else 0,
               methods=sorted({r.timing_method for r in results if r.timing_method}),
               median_total_s=statistics.median(r.elapsed_s.get("total", 0.0) for r in results) if results else 0.0)
    return row


def time_to_verdict(task: Path, tmp: Path) -> tuple[float, str]:
    """Seconds ``smithbot evolve`` takes to stop on a host-bound task (its whole call, the workers' start included),
    and why it stopped."""
    from smithbot import api

    t0 = time.time()
    status = api.evolve(task, "tune", iterations=20, backend="cuda", db=tmp / "runs.db")
    return time.time() - t0, status.message


FULL = ("incorrect", "flagged", "correct", "promoted")  # evaluations that ran their whole cascade to a verdict


def search_rate(task: Path, tmp: Path, seconds: float, label: str = "search") -> dict[str, Any]:
    """Run ``smithbot evolve TASK --proposer tune --time SECONDS`` and count, from its database, the evaluations that
    ran to a verdict per minute of the whole call (the workers' start and the baseline included), and per minute from
    the run's start to its last evaluation, with the share of the wall time the GPU was checking and timing."""
    from smithbot import api
    from smithbot.evolve.db import RunDB

    db = tmp / f"{task.name}-{label}.db"
    t0 = time.time()
    status = api.evolve(task, "tune", time_s=seconds, iterations=10**6, patience=10**6, backend="cuda", db=db)
    wall = time.time() - t0
    with RunDB(db) as rdb:
        created = rdb.run(status.run_id).created
        rows = [(c.status, c.evaluated) for c in rdb.candidates(status.run_id)]
    full = [e for s, e in rows if s in FULL]
    counts = collections.Counter(s for s, _ in rows)
    span = (max(full) - created) if full else 0.0
    return {"seconds": seconds, "wall_s": wall, "stop": status.message, "statuses": dict(counts), "full": len(full),
            "gpu_busy": status.gpu_busy,
            "per_minute_whole_call": len(full) / (wall / 60),
            "per_minute_searching": len(full) / (span / 60) if span else 0.0}


def report(task: str, label: str, row: dict[str, Any]) -> None:
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in row["phases_s"].items())
    print(f"{task} [{label}]: {row['workers']} workers; preparation {row['prepare_s']:.1f} s, the first one's "
          f"phases: {phases}")
    if row["host_bound"]:
        print(f"{task}: {row['host_bound']}")
        return
    each = ", ".join(f"{d.rpartition('/')[2]} {b:.0%}" for d, b in row["busy_by_device"].items())
    print(f"{task} [{label}]: {row['candidates']} distinct candidates in {row['wall_s']:.1f} s after a "
          f"{row['prepare_s']:.1f} s preparation on {row['devices']} device(s): {row['per_minute']:.1f} full "
          f"evaluations per minute, {row['per_gpu_minute']:.1f} per device-minute ({row['cases']} cases, "
          f"{', '.join(row['methods'])}; busy {row['gpu_busy']:.0%} on average: {each})")
    for k, v in row["stages_s"].items():
        print(f"  {k:12s} {v:7.1f} s  ({v / row['candidates']:.2f} s per candidate)")
    print("  statuses:", row["statuses"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tasks", type=Path, nargs="*", help="extracted task directories (default: the bundled rmsnorm)")
    p.add_argument("--candidates", type=int, default=None,
                   help="distinct candidates per task (default: 15 for an extracted task, 23 for rmsnorm)")
    p.add_argument("--rounds", type=int, default=None, help="rounds per case at most (default: the evaluator's)")
    p.add_argument("--workers", type=int, default=None, help="workers per GPU (default: the evaluator's)")
    p.add_argument("--seed", type=int, default=0, help="which random launch configs (another seed: other candidates, "
                   "none of them in Triton's compile cache from an earlier run)")
    p.add_argument("--search", type=float, default=0.0, metavar="S",
                   help="also run the tune search for S seconds on each task and count its full evaluations")
    p.add_argument("--compare-ahead", action="store_true",
                   help="measure each task (and search) twice, each arm with an empty Triton cache: GPU workers "
                        "compiling, then CPU workers compiling ahead (evaluator/ahead.py)")
    p.add_argument("--devices", type=int, default=0, metavar="N",
                   help="measure each task twice, on one device and on N (GPUs; on the interpreter, stand-in device "
                        "ids, one worker each), and report the ratio of their rates")
    p.add_argument("--backend", choices=("cuda", "interpreter"), default="cuda",
                   help="interpreter: the CPU's Triton interpreter (with --devices, how the pool spreads work)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="throughput-"))
    rows = []
    for task in args.tasks or [TASK]:
        paths = tune_variants(task, tmp, args.candidates or 15, args.seed) if args.tasks else rmsnorm_variants(tmp)
        if not paths:
            print(f"{task.name}: no launch-config knobs to vary", file=sys.stderr)
            continue
        paths = paths[:args.candidates] if args.candidates else paths
        arms = [("gpu-compiles", False, None), ("ahead", True, None)] if args.compare_ahead \
            else [("1 device", None, 1), (f"{args.devices} devices", None, args.devices)] if args.devices \
            else [("default", None, None)]
        row = {"task": task.name, "arms": {}}
        for label, ahead, devices in arms:
            if args.compare_ahead or args.devices:
                fresh_cache(tmp, f"{task.name}-{label}")
            row["arms"][label] = arm = measure(task, paths, args.rounds, args.workers, ahead, args.backend, devices)
            report(task.name, label, arm)
            if arm["host_bound"]:
                arm["verdict_s"], arm["evolve_stop"] = time_to_verdict(task, tmp)
                print(f"{task.name}: `smithbot evolve` stopped after {arm['verdict_s']:.1f} s: {arm['evolve_stop']}")
            elif args.search:
                if ahead is not None:
                    os.environ["SMITHBOT_COMPILE_AHEAD"] = "1" if ahead else "0"
                    fresh_cache(tmp, f"{task.name}-{label}-search")
                arm["search"] = sr = search_rate(task, tmp, args.search, label)
                print(f"{task.name} [{label}]: `smithbot evolve --time {args.search:g}` took {sr['wall_s']:.1f} s; "
                      f"{sr['full']} evaluations ran to a verdict: {sr['per_minute_whole_call']:.1f} per minute of "
                      f"the whole call, {sr['per_minute_searching']:.1f} per minute of search; GPU busy "
                      f"{sr['gpu_busy'] or 0:.0%}; statuses {sr['statuses']}; stop: {sr['stop']}")
        if args.devices:
            one, many = (row["arms"][label]["per_minute"] for label, _, _ in arms)
            row["scaling"] = many / one
            print(f"{task.name}: {args.devices} devices evaluate {many / one:.2f}x as many candidates a minute as one")
        os.environ.pop("SMITHBOT_COMPILE_AHEAD", None)
        if args.out:  # after every task, so a crash keeps what was measured
            args.out.write_text(json.dumps(rows + [row], indent=1, default=str))
        rows.append(row)


if __name__ == "__main__":
    main()
