"""The ``tune`` proposer on tasks extracted from real targets, on a GPU: verified speedup, candidates per minute, where
the time went, and each baseline's fraction of the memory roofline.

For each task directory: prepare the evaluator, run the search with a wall-time budget, then verify the best
candidate by evaluating it again, from scratch, on every shape case (the search may skip cases already at the
roofline and screens on a subset). Imports no gitpython or openai, so it runs on a bare GPU host with libcst added.

    python benchmarks/evolve_tune.py TASK_DIR... --time 80 --out results.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator import Evaluator  # noqa: E402
from smithbot.evolve.db import RunDB  # noqa: E402
from smithbot.evolve.proposers import TuneProposer  # noqa: E402
from smithbot.evolve.search import Budget, Search, SearchConfig  # noqa: E402
from smithbot.verify import verify  # noqa: E402


def bench(task_dir: Path, db: RunDB, time_s: float, islands: int, seed: int, workdir: Path, backend: str,
          verify_top: int) -> dict:
    t0 = time.time()
    with Evaluator(task_dir, backend=backend) as ev:
        ev.prepare()
        prep_s = time.time() - t0
        cfg = SearchConfig(proposer="tune", islands=islands, seed=seed, budget=Budget(time_s=time_s), patience=None)
        run = db.create_run(str(task_dir), ev.task.id, {"search": cfg.to_dict(), "backend": backend, "workers": None,
                                                        "config": None, "replay": None}, seed)
        t1 = time.time()
        status = Search(db, run, ev.task, ev, TuneProposer()).run()
        search_s = time.time() - t1
        cands = db.candidates(run.id)
        base = next(c for c in cands if c.proposer == "baseline")
        best = db.best(run.id)
        verified = None
        if best is not None and best.proposer != "baseline":
            path = workdir / f"{run.id}-best.py"
            path.write_text(best.source or "")
            t2 = time.time()
            v = ev.submit(path).result()  # every case, fresh inputs, fresh timing
            verified = {"status": v.status, "speedup": v.speedup, "ci": v.speedup_ci, "seconds": time.time() - t2,
                        "cases": [{"name": c["name"], "ratio": c["ratio"], "ci": c["ratio_ci"], "base_us": c["base_us"],
                                   "cand_us": c["cand_us"]} for c in v.cases]}
    checked = None
    if verify_top:  # smithbot verify: more seeds, extra odd shapes, no case slower beyond its interval
        v = verify(db, run.id, top=verify_top, backend=backend)
        checked = {"winner": v.winner, "verdicts": [(d.candidate, d.accepted, d.reason, d.speedup) for d in v.verdicts]}
    evaluated = [c for c in cands if c.proposer != "baseline" and c.status not in ("pending", "failed_proposal")]
    stages = {k: 0.0 for k in ("compile", "correctness", "timing")}
    for c in evaluated:
        for r in (c.screen_result, c.result):
            for k in stages:
                stages[k] += (r or {}).get("elapsed_s", {}).get(k, 0.0)
    statuses: dict[str, int] = {}
    for c in cands:
        statuses[c.status] = statuses.get(c.status, 0) + 1
    base_cases = (base.result or {}).get("cases", [])
    return {
        "task": run.task_id, "run": run.id, "stop": status.message, "prepare_s": prep_s, "search_s": search_s,
        "evaluated": len(evaluated), "per_minute": len(evaluated) / (search_s / 60), "statuses": statuses,
        "stage_s": stages, "tuned_cases": db.run(run.id).counters.get("cases"),
        "baseline_bw_fraction": {c["name"]: c["cand_bw_fraction"] for c in base_cases},
        "best": None if best is None else {"id": best.id, "search_speedup": best.fitness,
                                           "diff": best.diff, "proposer": best.proposer},
        "verified": verified, "smithbot_verify": checked,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tasks", nargs="+", type=Path)
    p.add_argument("--time", type=float, default=80.0, help="search seconds per task (the budget)")
    p.add_argument("--islands", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--backend", default="cuda", help="cuda for the figures; interpreter only to smoke-test the script")
    p.add_argument("--db", type=Path, default=None, help="keep the run database here (default: a temporary one)")
    p.add_argument("--verify-top", type=int, default=0, help="also run `smithbot verify` on this many best candidates")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="evolve-tune-"))
    rows = []
    with RunDB(args.db or work / "runs.db") as db:
        for task in args.tasks:
            row = bench(task.resolve(), db, args.time, args.islands, args.seed, work, args.backend, args.verify_top)
            rows.append(row)
            v = row["verified"]
            fr = row["baseline_bw_fraction"]
            print(f"{row['task']}: {row['evaluated']} evaluated in {row['search_s']:.0f} s "
                  f"({row['per_minute']:.1f}/min); baseline roofline {min(fr.values()):.0%}..{max(fr.values()):.0%}; "
                  + (f"verified {v['speedup']:.3f}x [{v['ci'][0]:.3f}, {v['ci'][1]:.3f}] ({v['status']})" if v
                     else "tuning found nothing better than the baseline"), flush=True)
            if args.out:
                args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
