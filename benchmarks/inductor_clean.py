"""What the cleaning and folding passes do to Inductor's seed for a fusion task: its kernels' lines and the Inductor
names left in them, raw, folded with each row read in one pass, and folded with Inductor's loops kept, beside a
hand-written kernel for the same glue; each timed against the glue in one evaluator session (verification effort),
so that the folded seed is shown to be no slower than the raw one. Needs a CUDA GPU (Inductor writes Triton only
there).

    python benchmarks/inductor_clean.py decode_metadata=smithbot/tasks/decode_metadata/candidates/fused.py \
        WORKSPACE/tasks/renormalize_glue_601=benchmarks/handwritten/renorm.py

Each argument is a fusion task directory or a bundled task's name, and after ``=`` a hand-written candidate: a whole
``kernel.py``, or the functions of its EVOLVE-BLOCK with the entry named ``ENTRY`` (its imports are the baseline's). Prints one Markdown row a form.
"""

from __future__ import annotations

import ast
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator import Evaluator, load_task  # noqa: E402
from evaluator.task import EVOLVE_END, EVOLVE_START, split_evolve  # noqa: E402
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


def handwritten(path: Path, baseline: str, entry: str) -> str:
    """The hand-written candidate at ``path`` as a ``kernel.py`` for the task whose baseline is ``baseline``."""
    text = path.read_text()
    if EVOLVE_START in text:
        return text
    head, _, tail = split_evolve(baseline)  # type: ignore[misc]
    body = "\n".join(line for line in text.splitlines() if not line.startswith(("import ", "from ")))  # (the head's)
    return f"{head}{EVOLVE_START}\n\n{body.replace('ENTRY', entry)}\n\n{EVOLVE_END}{tail}"


def main() -> None:
    print("| task | form | kernel lines | Inductor names | vs glue |")
    print("|---|---|---|---|---|")
    for arg in sys.argv[1:]:
        name, _, hand = arg.partition("=")
        task_dir = resolve_task(name)
        task = load_task(task_dir)
        compiled = compile_glue(task_dir)
        baseline = (task_dir / "kernel.py").read_text()
        forms = {"raw": to_candidate(baseline, task.entry, compiled, clean=False),
                 "folded, one pass": to_candidate(baseline, task.entry, compiled),
                 "folded, loops": to_candidate(baseline, task.entry, compiled, one_row=False)}
        if hand:
            forms["hand-written"] = handwritten(Path(hand), baseline, task.entry)
        with tempfile.TemporaryDirectory() as tmp, Evaluator(task_dir, backend="cuda", workers_per_gpu=1) as ev:
            for i, (form, text) in enumerate(forms.items()):
                (Path(tmp) / f"{i}.py").write_text(text)
                r = ev.submit(Path(tmp) / f"{i}.py", effort="verify").result()
                timed = (f"{r.speedup:.3f}× [{r.speedup_ci[0]:.3f}, {r.speedup_ci[1]:.3f}]" if r.speedup
                         else f"{r.status}: {r.why[:80]}")
                lines, names = kernel_lines(text)
                print(f"| {task.id} | {form} | {lines} | {names} | {timed} |", flush=True)


if __name__ == "__main__":
    main()
