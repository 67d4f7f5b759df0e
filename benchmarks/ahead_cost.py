"""What compiling ahead costs a CPU worker per candidate, on one task (no GPU needed):

- building each GPU case's inputs on the CPU, drawn as the GPU worker draws them and with large float draws left
  unfilled (``evaluator.ahead.UnfilledDraws``, what the ahead worker does);
- an ahead worker compiling the task's baseline for the target GPU into an empty Triton cache, then the same again.

    python benchmarks/ahead_cost.py TASK_DIR [--target cuda:90:32]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.ahead import UnfilledDraws  # noqa: E402
from evaluator.correctness import make_args, seed_for  # noqa: E402
from evaluator.process import WorkerProcess  # noqa: E402
from evaluator.runtime import load_module, tensors_of  # noqa: E402
from evaluator.task import load_task  # noqa: E402


def inputs_cost(task_dir: Path) -> dict[str, float]:
    task = load_task(task_dir)
    harness = load_module(task.harness_path, "harness", False)
    total = {"drawn": 0.0, "unfilled": 0.0}
    for i, case in enumerate(task.cases_for("cuda")):
        for label in total:
            t0 = time.perf_counter()
            if label == "unfilled":
                with UnfilledDraws():
                    args = make_args(harness, case, seed_for(i, 0), "cpu")
            else:
                args = make_args(harness, case, seed_for(i, 0), "cpu")
            took = time.perf_counter() - t0
            total[label] += took
            size = sum(t.numel() * t.element_size() for t in tensors_of(args))
            print(f"{case.name:45s} {label:9s} {took:7.2f} s  {size / 2**30:6.2f} GiB", flush=True)
            del args
            gc.collect()
    return total


def compile_cost(task_dir: Path, target: str) -> list[tuple[str, float]]:
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="ahead-cost-")
    w = WorkerProcess("ahead", None, target)
    out = []
    try:
        for _ in range(2):
            t0 = time.perf_counter()
            ans = w.request({"op": "compile", "task": str(task_dir), "candidate": str(task_dir / "kernel.py"),
                             "cases": None}, 900)
            out.append((ans["status"], time.perf_counter() - t0))
    finally:
        w.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", type=Path, help="a task directory")
    p.add_argument("--target", default="cuda:90:32", help="the GPU compiled for (default sm90: H100, H200)")
    args = p.parse_args()
    total = inputs_cost(args.task)
    print(f"inputs of every GPU case: {total['drawn']:.2f} s drawn, {total['unfilled']:.2f} s unfilled")
    (cold_status, cold), (warm_status, warm) = compile_cost(args.task, args.target)
    print(f"ahead compile for {args.target}: {cold_status} in {cold:.2f} s into an empty cache, {warm_status} in "
          f"{warm:.2f} s again")


if __name__ == "__main__":
    main()
