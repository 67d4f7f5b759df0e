"""The ``inductor`` proposer: torch.compile (Inductor) compiles a fusion task's baseline glue on the GPU, and its
generated Triton code becomes a standalone candidate (``to_candidate``): the kernels with readable names and plain
``@triton.jit``, the Inductor helpers they use inlined, no ``torch._inductor`` import, and a launcher with the task's
entry signature. The candidate seeds the search; the evaluator judges it like any other."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


class InductorError(Exception):
    """Inductor could not compile the glue, or its output is not one a candidate can be made from. One line."""


@dataclass(frozen=True)
class Compiled:
    """Inductor's output module for one graph, and each graph input as an expression over the entry's parameters
    (``seq_lens``, ``seq_lens.size()[0]``, ``max_seq_len``)."""

    code: str
    inputs: tuple[str, ...]


def _expression(source: str) -> str:
    """A Dynamo source name (``L['seq_lens'].size()[0]``) as Python over the entry's parameters."""
    return re.sub(r"\bL\['(\w+)'\]", r"\1", source)


def compile_glue(task_dir: Path) -> Compiled:
    """Compile the baseline of fusion task ``task_dir`` with ``torch.compile(dynamic=True)`` on its largest GPU case
    and return Inductor's output. Needs a CUDA GPU: Inductor writes Triton only for one."""
    import torch
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import run_and_get_code

    from evaluator.correctness import make_args
    from evaluator.runtime import load_module
    from evaluator.task import load_task

    if not torch.cuda.is_available():
        raise InductorError("Inductor writes Triton kernels only for a GPU, and there is none here")
    task = load_task(task_dir)
    fn = getattr(load_module(task_dir / "kernel.py", f"{task.id}_baseline", False), task.entry)
    harness = load_module(task_dir / "harness.py", f"{task.id}_harness", False)
    gpu = [c for c in task.cases if not c.interpreter] or list(task.cases)
    args = make_args(harness, gpu[-1], 0, "cuda")
    graphs: list[tuple[str, ...]] = []

    def backend(gm, example_inputs):  # type: ignore[no-untyped-def]
        graphs.append(tuple(_expression(n.meta["grapharg"].source.name()) for n in gm.graph.nodes
                            if n.op == "placeholder"))
        return compile_fx(gm, example_inputs)

    torch._dynamo.reset()
    try:
        _, codes = run_and_get_code(torch.compile(fn, backend=backend, dynamic=True), **args)
    except Exception as exc:  # noqa: BLE001 - Inductor's own failure, reported as the proposal's
        raise InductorError(f"torch.compile failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                            ) from None
    kernels = [c for c in codes if "@triton.jit" in c]
    if len(graphs) != 1 or len(kernels) != 1:
        raise InductorError(f"the glue compiles to {len(graphs)} graphs and {len(kernels)} modules of Triton "
                            "kernels (a graph break, or nothing for Triton): one candidate cannot stand for it")
    return Compiled(kernels[0], graphs[0])
