"""Inductor's code for a fusion task's glue: torch.compile (Inductor) compiles the baseline glue on the GPU
(``compile_glue``), or the output recorded beside the task is read (``recorded``). The ``inductor`` proposer
(``proposers.InductorProposer``) makes it a standalone candidate (``standalone.to_candidate``) that seeds the search;
the evaluator judges it like any other."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from evaluator.task import load_task
from smithbot.evolve.generated import Compiled, InductorError


def _plain_case(cases):  # type: ignore[no-untyped-def]
    """The case to compile on: Dynamo specializes a size of 0 or 1 and guards on sizes that are equal (a slice
    ``[:n]`` with n the whole length), so the code it writes for such a case is wrong for the others. The case
    with the fewest such sizes, the larger on a tie."""
    def score(item):  # type: ignore[no-untyped-def]
        i, c = item
        values = [v for v in c.dims.values() if isinstance(v, int)]
        ones = sum(v in (0, 1) for v in values)
        ties = sum(a == b for j, a in enumerate(values) for b in values[j + 1:])
        return (ones, ties, -i)
    return min(enumerate(cases), key=score)[1]


RECORDED = "inductor.json"  # in a fusion task's folder: Inductor's output for its glue, as compile_glue left it


def read_recording(path: Path) -> Compiled | None:
    """A recorded Inductor output (``compile_glue``'s JSON), or None where there is none or it cannot be read."""
    try:
        d = json.loads(path.read_text())
        return Compiled(d["code"], tuple(d["inputs"]), tuple(d["returns"]), bool(d.get("single")),
                        tuple(d.get("dtypes") or ()), dict(d.get("scalars") or {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def recorded(task_dir: Path) -> Compiled | None:
    """The Inductor output recorded beside a fusion task: by ``compile_glue`` on a GPU, or shipped with it (the
    bundled decode_metadata; the demo's glue, copied in by ``smithbot demo --fusion``). A recording without the
    returned values' dtypes gets them from the glue run on the CPU, where it runs there."""
    found = read_recording(task_dir / RECORDED)
    if found is None or found.dtypes:
        return found
    try:
        fn, harness, case = _glue(task_dir)
        from evaluator.correctness import make_args

        return dataclasses.replace(found, dtypes=dtype_follows(fn, make_args(harness, case, 0, "cpu")))
    except Exception:  # noqa: BLE001 - a glue that needs the GPU: the compile case's dtypes stay
        return found


def _glue(task_dir: Path) -> tuple[Any, Any, Any]:
    """A fusion task's glue function, its harness module and the case Inductor compiles it on."""
    from evaluator.runtime import load_module

    task = load_task(task_dir)
    fn = getattr(load_module(task_dir / "kernel.py", f"{task.id}_baseline", False), task.entry)
    harness = load_module(task_dir / "harness.py", f"{task.id}_harness", False)
    return fn, harness, _plain_case(task.cases)


def seed(task_dir: Path) -> tuple[Compiled, str]:
    """Inductor's output for a fusion task's glue and where it came from: compiled here on a GPU (and recorded beside
    the task), else the recording. Raises InductorError when there is neither."""
    import torch

    if torch.cuda.is_available():
        return compile_glue(task_dir), "compiled here"
    found = recorded(task_dir)
    if found is None:
        raise InductorError("Inductor writes Triton kernels only for a GPU, there is none here, and the task has no "
                            f"recorded Inductor output ({RECORDED})")
    return found, f"recorded in {RECORDED}"


# what a tensor input becomes to see whether a result's dtype follows it: a float input in another float width, an
# integer input in the other index width
_SWAPS = ({"float32": "float64", "float64": "float32", "float16": "float32", "bfloat16": "float32"},
          {"int32": "int64", "int64": "int32"})


def dtype_follows(fn: Any, args: dict[str, Any]) -> tuple[str, ...]:
    """For each value ``fn(**args)`` returns, the parameter whose dtype it takes: run again with one tensor input in
    another width at a time, a result whose dtype moves with it follows it. "" where it keeps its dtype, is no
    tensor, or the glue does not run on the other widths."""
    import torch

    from evaluator.runtime import clone_args

    def run(a: dict[str, Any]) -> tuple[Any, ...]:
        out = fn(**a)
        return out if isinstance(out, tuple) else (out,)

    base = run(clone_args(args))
    follows = [""] * len(base)
    for name, value in args.items():  # one input at a time: several of one dtype would say nothing
        width = str(value.dtype).removeprefix("torch.") if torch.is_tensor(value) else ""
        swap = next((s for s in _SWAPS if width in s), None)
        if swap is None:
            continue
        other = getattr(torch, swap[width])
        try:
            got = run({**clone_args(args), name: value.to(other)})
        except Exception:  # noqa: BLE001 - the glue's own refusal of another width: its dtypes are its own
            continue
        for i, (b, g) in enumerate(zip(base, got)):
            if not follows[i] and torch.is_tensor(b) and torch.is_tensor(g) and b.dtype == value.dtype \
                    and g.dtype == other:
                follows[i] = name
    return tuple(follows)


def _expression(source: str) -> str:
    """A Dynamo source name (``L['seq_lens'].size()[0]``) as Python over the entry's parameters."""
    return re.sub(r"\bL\['(\w+)'\]", r"\1", source)


def compile_glue(task_dir: Path) -> Compiled:
    """Compile the baseline of fusion task ``task_dir`` with ``torch.compile(dynamic=True)`` on its largest GPU case
    and return Inductor's output. Needs a CUDA GPU: Inductor writes Triton only for one."""
    import torch
    import torch.fx.experimental._config as fx_config
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import run_and_get_code

    from evaluator.correctness import make_args

    if not torch.cuda.is_available():
        raise InductorError("Inductor writes Triton kernels only for a GPU, and there is none here")
    fn, harness, case = _glue(task_dir)
    args = make_args(harness, case, 0, "cuda")
    graphs: list[tuple[str, ...]] = []
    outputs: list[Any] = []

    def backend(gm, example_inputs):  # type: ignore[no-untyped-def]
        names = []
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                name = n.meta["grapharg"].source.name  # a method in older torch, a property in newer
                names.append(_expression(name() if callable(name) else name))
        graphs.append(tuple(names))
        compiled = compile_fx(gm, example_inputs)

        def run(*a):  # type: ignore[no-untyped-def]
            out = compiled(*a)
            outputs.append(out)
            return out
        return run

    torch._dynamo.reset()
    try:
        # a symbol of its own for every size: with sizes that happen to be equal in this case sharing one (Dynamo's
        # "duck" shapes), the code would index a [1024, 1024] table by its rows' count, wrong for any other table
        with fx_config.patch(use_duck_shape=False):
            result, codes = run_and_get_code(torch.compile(fn, backend=backend, dynamic=True), **args)
    except Exception as exc:  # noqa: BLE001 - Inductor's own failure, reported as the proposal's
        said = [line for line in str(exc).splitlines() if line.strip() and not line.startswith("Set TORCH")]
        raise InductorError(f"torch.compile failed: {type(exc).__name__}: {(said or [''])[-1].strip()[:300]}"
                            ) from None
    kernels = [c for c in codes if "@triton.jit" in c]
    if len(graphs) != 1 or len(kernels) != 1 or len(outputs) != 1:
        raise InductorError(f"the glue compiles to {len(graphs)} graphs and {len(kernels)} modules of Triton "
                            "kernels (a graph break, or nothing for Triton): one candidate cannot stand for it")
    single = not isinstance(result, tuple)
    returns = []
    for item in (result,) if single else result:  # each returned value: a graph output, a parameter or a constant
        at = next((i for i, o in enumerate(outputs[0]) if o is item), None)
        name = next((k for k, v in args.items() if v is item), None)
        if at is not None:
            returns.append(f"out[{at}]")
        elif name is not None:
            returns.append(name)
        elif isinstance(item, (int, float, bool)) or item is None:
            returns.append(repr(item))
        else:
            raise InductorError(f"the glue returns a {type(item).__name__} that is neither an output of the "
                                "compiled graph nor an input")
    scalars = {k: v for k, v in args.items() if type(v) is int}
    compiled = Compiled(kernels[0], graphs[0], tuple(returns), single, dtype_follows(fn, args), scalars)
    if (task_dir / RECORDED).exists():  # a recording shipped with the task stays as it is
        return compiled
    import triton

    (task_dir / RECORDED).write_text(json.dumps(
        {"torch": torch.__version__, "triton": triton.__version__, "case": case.name, **dataclasses.asdict(compiled)},
        indent=1))
    return compiled
