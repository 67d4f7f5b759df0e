"""Extraction coverage per repository: launched kernels -> extracted -> self-check passed.

Here (no GPU needed), extraction and the interpreter self-check; the task directories and ``coverage.json`` are kept
under ``--keep DIR`` (default: a temporary directory). Each row is also appended to ``coverage.partial.jsonl`` as its
self-check ends, so a run killed part-way keeps what it had checked:

    python benchmarks/extract_coverage.py demo sglang=/path/to/sglang lmdeploy=/path/to/lmdeploy \\
        engram=/path/to/DLBlas --keep cov

Then, on a GPU machine (torch and triton only), the tasks that the interpreter could not check (fp8 dtypes, block
pointers, ``torch.cuda`` calls in the launcher...) are self-checked on the GPU instead: the evaluator runs the baseline
against itself on every GPU case and must call it correct:

    python benchmarks/extract_coverage.py --gpu-check cov [--jobs 8] [--confirm 10]

(``--confirm N`` also runs N tasks per target that passed the interpreter, to confirm them on the GPU.)

Prints, per target, the counts and the most common reasons a kernel was not extracted or did not pass.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _reasons(rows: list[dict], failed: str) -> None:
    reasons = collections.Counter(re.sub(r"^(error: )?(task \S+: |[^:]*: )", "", r["why"]).split(";")[0][:100]
                                  for r in rows if failed in r and not r[failed])
    for why, count in reasons.most_common(10):
        print(f"  {count:4d}  {why}")


BACKEND_DIRS = {"ascend", "npu", "hip", "rocm", "amd", "musa", "xpu", "mlu", "maca", "camb", "dlinfer"}


def other_backend(path: str) -> bool:
    """A kernel file under a directory named for another accelerator (DLBlas's ``kernels/ascend/``)."""
    return bool(BACKEND_DIRS & set(path.split("/")[:-1]))


def extract(specs: list[str], keep: Path, jobs: int | None, timeout_s: float) -> None:
    from smithbot import api

    for arg in specs:
        name, _, path = arg.partition("=")
        out = keep / name
        t0 = time.perf_counter()
        out.mkdir(parents=True, exist_ok=True)
        partial = out / "coverage.partial.jsonl"
        partial.write_text("")

        def row(r) -> dict:
            return {"kernel": r.kernel, "path": r.path, "extracted": r.extracted, "interpreter": r.checked,
                    "why": r.why, "task": str(r.out.relative_to(out)) if r.out else None}

        def journal(r) -> None:
            with partial.open("a") as f:
                f.write(json.dumps(row(r)) + "\n")

        rows = api.extract(name, None, out=out / "tasks", source=path or None, all_kernels=True, check=True, jobs=jobs,
                           timeout_s=timeout_s, finished_row=journal)
        data = [row(r) for r in rows]
        (out / "coverage.json").write_text(json.dumps(data, indent=1))
        n, ext, ok = len(rows), sum(r.extracted for r in rows), sum(r.checked for r in rows)
        print(f"{name}: {n} launched kernels, {ext} extracted ({ext / max(n, 1):.0%}), {ok} passed the interpreter "
              f"self-check ({ok / max(n, 1):.0%}) in {time.perf_counter() - t0:.0f} s")
        other = [r for r in data if other_backend(r["path"])]
        if other:  # reported beside the totals, never instead of them
            print(f"  of them under another backend's directory (never launched on NVIDIA): {len(other)}, "
                  f"{sum(r['extracted'] for r in other)} extracted, {sum(r['interpreter'] for r in other)} passed")
        _reasons([{**r, "ok": r["interpreter"]} for r in data if not r["extracted"]], "ok")
        print("  -- extracted, not passed:")
        _reasons([r for r in data if r["extracted"]], "interpreter")


def gpu_check(keep: Path, jobs: int, confirm: int, only: list[str]) -> None:
    from evaluator import EvalResult

    for cov in sorted(keep.glob("*/coverage.json")):
        if only and cov.parent.name not in only:
            continue
        rows = json.loads(cov.read_text())
        tasks = sorted({r["task"] for r in rows if r["extracted"] and not r["interpreter"]})
        passed = sorted({r["task"] for r in rows if r["interpreter"]})[:confirm]  # the baseline on the GPU too
        verdict: dict[str, tuple[bool, str]] = {}
        launched: dict[str, tuple[str, ...]] = {}

        def run(task: str) -> None:
            d = cov.parent / task
            try:
                p = subprocess.run([sys.executable, "-m", "evaluator", str(d), str(d / "kernel.py"), "--backend",
                                    "cuda", "--rounds", "3", "--json"], capture_output=True, text=True, timeout=240,
                                   cwd=ROOT)
                if p.stdout.strip():
                    res = EvalResult.from_dict(json.loads(p.stdout.strip().splitlines()[-1]))
                    ok, why = res.correct, res.why
                    launched[task] = res.baseline_kernels
                else:
                    ok, why = False, (p.stderr.strip().splitlines() or ["no output"])[-1][:200]
            except subprocess.TimeoutExpired:
                ok, why = False, "timeout"
            verdict[task] = (ok, why[:300])

        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(run, tasks + passed))
        for r in rows:
            if r["task"] in verdict:
                r["gpu"], r["gpu_why"] = verdict[r["task"]]
                ran = launched.get(r["task"])
                if r["gpu"] and ran and r["kernel"] not in ran:  # a launcher's kernel its task never launches
                    r["gpu"], r["gpu_why"] = False, f"its task's inputs never launch it (they launch {', '.join(ran)})"
        confirmed = [t for t in passed if verdict[t][0]]
        print(f"{cov.parent.name}: {len(confirmed)} of {len(passed)} interpreter-passed tasks also correct on the GPU"
              + "".join(f"\n  not on the GPU: {t}: {verdict[t][1]}" for t in passed if not verdict[t][0]))
        cov.write_text(json.dumps(rows, indent=1))
        n = len(rows)
        interp = sum(r["interpreter"] for r in rows)
        gpu = sum(bool(r.get("gpu")) for r in rows if not r["interpreter"])
        print(f"{cov.parent.name}: {n} launched, {sum(r['extracted'] for r in rows)} extracted, {interp} passed the "
              f"interpreter, {gpu} more passed on the GPU ({len(tasks)} tasks tried there) -> {interp + gpu} "
              f"({(interp + gpu) / max(n, 1):.0%}) in {time.perf_counter() - t0:.0f} s")
        _reasons([{**r, "why": r.get("gpu_why", "")} for r in rows if "gpu" in r and not r["interpreter"]], "gpu")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*", help="NAME or NAME=CHECKOUT (with --gpu-check: the targets to check, "
                                                   "default all)")
    ap.add_argument("--keep", type=Path, help="where the tasks and coverage.json go")
    ap.add_argument("--gpu-check", type=Path, metavar="DIR", help="self-check on the GPU what the interpreter could not")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--check-timeout", type=float, default=300.0, help="seconds one interpreter self-check evaluation "
                                                                      "may take (as smithbot extract --check-timeout)")
    ap.add_argument("--confirm", type=int, default=10, help="with --gpu-check: also run this many interpreter-passed "
                                                            "tasks per target on the GPU")
    args = ap.parse_args()
    if args.gpu_check:
        gpu_check(args.gpu_check, args.jobs or 8, args.confirm, args.targets)
    else:
        extract(args.targets, args.keep or Path(tempfile.mkdtemp(prefix="coverage-")), args.jobs, args.check_timeout)


if __name__ == "__main__":
    main()
