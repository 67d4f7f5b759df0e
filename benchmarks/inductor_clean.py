"""What the cleaning pass does to Inductor's seed for a fusion task: its kernels' lines and the Inductor names left
in them, raw and cleaned, and both timed against the glue in one evaluator session (verification effort), so that
the cleaned seed is shown to be no slower than the raw one. Needs a CUDA GPU (Inductor writes Triton only there).

    python benchmarks/inductor_clean.py decode_metadata ~/.smithbot/workspaces/lmdeploy/tasks/*glue*

Each argument is a fusion task directory or a bundled task's name. Prints one Markdown row a task.
"""

from __future__ import annotations

import ast
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator import Evaluator, load_task  # noqa: E402
from smithbot.api import resolve_task  # noqa: E402
from smithbot.evolve.inductor import compile_glue  # noqa: E402
from smithbot.evolve.standalone import to_candidate  # noqa: E402

# Inductor's own names: serial temporaries, buffers, index bookkeeping, size symbols
INDUCTOR_NAMES = re.compile(r"\b(_?tmp\d+|buf\d+|[xyr]0?_?(index|offset|mask|numel|base)|r0_\d+|x\d+|ks\d+|"
                            r"[XYR]0?_?BLOCK|in_ptr\d+|out_ptr\d+|arg\d+_\d+)\b")


def kernel_lines(source: str) -> tuple[int, int]:
    """(lines in the bodies of the @triton.jit functions, Inductor names left in them)."""
    lines = names = 0
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            body = "\n".join(ast.unparse(s) for s in node.body)
            lines += len(body.splitlines())
            names += len(INDUCTOR_NAMES.findall(ast.unparse(node)))
    return lines, names


def main() -> None:
    print("| task | raw: kernel lines / Inductor names | cleaned | raw seed vs glue | cleaned seed vs glue |")
    print("|---|---|---|---|---|")
    for arg in sys.argv[1:]:
        task_dir = resolve_task(arg)
        task = load_task(task_dir)
        compiled = compile_glue(task_dir)
        baseline = (task_dir / "kernel.py").read_text()
        seeds = {kind: to_candidate(baseline, task.entry, compiled, clean=(kind == "cleaned"))
                 for kind in ("raw", "cleaned")}
        with tempfile.TemporaryDirectory() as tmp, Evaluator(task_dir, backend="cuda", workers_per_gpu=1) as ev:
            timed = {}
            for kind, text in seeds.items():
                (Path(tmp) / f"{kind}.py").write_text(text)
                r = ev.submit(Path(tmp) / f"{kind}.py", effort="verify").result()
                timed[kind] = (f"{r.speedup:.3f}× [{r.speedup_ci[0]:.3f}, {r.speedup_ci[1]:.3f}]" if r.speedup
                               else f"{r.status}: {r.why[:80]}")
        (rl, rn), (cl, cn) = kernel_lines(seeds["raw"]), kernel_lines(seeds["cleaned"])
        print(f"| {task.id} | {rl} / {rn} | {cl} / {cn} | {timed['raw']} | {timed['cleaned']} |", flush=True)


if __name__ == "__main__":
    main()
