"""``python -m evaluator TASK_DIR CANDIDATE.py... [--backend cuda|interpreter|auto] [--json]``.

Prints one line per candidate (or JSON with --json). Exit codes: 0 when every candidate was evaluated (whatever its
verdict), 2 for bad input (a missing task, a malformed task.yaml, a candidate that is not Python, a backend that
cannot run here, inputs that do not fit in memory).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evaluator.pool import BackendError, Evaluator
from evaluator.result import EvalResult
from evaluator.task import TaskError, check_candidate_files


def summary_line(r: EvalResult) -> str:
    name = Path(r.candidate).name
    if r.speedup is not None and r.speedup_ci is not None:
        lo, hi = r.speedup_ci
        return f"{name}: {r.status} {r.speedup:.3f}x [{lo:.3f}, {hi:.3f}] {' '.join(r.flags)}".rstrip()
    tail = f" ({r.reason}: {r.detail})" if r.reason or r.detail else ""
    return f"{name}: {r.status}{tail}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evaluator",
                                description="Evaluate candidate kernel.py files against a task's baseline: static "
                                            "guard, compile and run in a child process, correctness on fresh "
                                            "poisoned inputs, then paired GPU timing and a verdict.")
    p.add_argument("task_dir", help="task directory holding task.yaml, kernel.py and harness.py")
    p.add_argument("candidates", nargs="+", help="candidate files: whole kernel.py texts")
    p.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpreter"],
                   help="cuda times on a GPU; interpreter checks correctness on the CPU and times the interpreter, "
                        "which does not predict GPU speed (default: cuda if present)")
    p.add_argument("--json", action="store_true", help="print one JSON EvalResult per line")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per candidate, compile plus run")
    p.add_argument("--rounds", type=int, default=None,
                   help="interleaved timing rounds per case (default: 30 on cuda, 7 on the interpreter)")
    p.add_argument("--min-gain", type=float, default=0.02,
                   help="promotion needs the interval above 1 + this, and each case claimed faster by this much to "
                        "pass its own sign test (corrected for the number of cases)")
    p.add_argument("--workers-per-gpu", type=int, default=None,
                   help="workers sharing each GPU: they compile in parallel and time in turns (default 3)")
    args = p.parse_args(argv)
    try:
        check_candidate_files(args.candidates)
        with Evaluator(args.task_dir, backend=args.backend, workers_per_gpu=args.workers_per_gpu, timeout_s=args.timeout,
                       rounds=args.rounds, min_gain=args.min_gain) as ev:
            for w in ev.prepare():
                print(f"warning: {w}", file=sys.stderr)
            for fut in [ev.submit(c) for c in args.candidates]:
                r = fut.result()
                print(json.dumps(r.to_dict()) if args.json else summary_line(r), flush=True)
    except (TaskError, BackendError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
