"""The task's harness.py: its input plan (``smithbot.types.InputPlan``), kept as the literals ``SPEC``, ``EXTRA_DIMS``
and ``GATHERED`` for the tools that read or grow it (``plan_of``), and a ``make_inputs(case, generator)`` written out
from it as plain code (``code.py``), the same code the generated test carries. A task directory needs nothing of
smithbot to make its inputs."""

from __future__ import annotations

import ast
from typing import Any

from smithbot.inputs.code import make_inputs_code
from smithbot.types import InputPlan

HARNESS = '''"""Inputs for {wrapper}, written by smithbot extract ({how})."""

{imports}

inf = float("inf")  # as repr writes an infinite literal (dt_limit=(0.0, inf))
# each parameter's input spec (smithbot/inputs/specs.py): make_inputs below is written from it
SPEC = {spec!r}
EXTRA_DIMS = {extra!r}
GATHERED = {gathered!r}  # inputs read only through an index: their size is not what a call moves


{code}'''


def harness_source(wrapper: str, plan: InputPlan, how: str) -> str:
    imports, code = make_inputs_code(plan, device="gen.device")
    std = [i for i in imports if not i.startswith("import triton")]
    lines = std + [""] * bool(std) + ["import torch"] + [i for i in imports if i.startswith("import triton")]
    return HARNESS.format(wrapper=wrapper, how=how, spec=plan.literal(), extra=plan.dims, gathered=plan.gathered,
                          imports="\n".join(lines), code=code)


def literal(text: str, name: str) -> Any:
    """The value of the harness ``text``'s line ``NAME = ...`` (``SPEC``, ``EXTRA_DIMS``, ``GATHERED``), or None."""
    line = next((ln for ln in text.splitlines() if ln.startswith(f"{name} = ")), None)
    if line is None:
        return None
    value = ast.Expression(ast.parse(line).body[0].value)  # type: ignore[attr-defined]  # a comment after it is no part
    return eval(compile(value, "<harness>", "eval"), {"__builtins__": {}, "inf": float("inf")})  # noqa: S307 (ours)


def plan_of(text: str) -> InputPlan | None:
    """The input plan a harness ``text`` keeps; None for a hand-written one (a ``make_inputs`` with no ``SPEC``)."""
    spec = literal(text, "SPEC")
    if spec is None:
        return None
    return InputPlan.read(spec, literal(text, "EXTRA_DIMS") or {}, tuple(literal(text, "GATHERED") or ()))


def respec(text: str, plan: InputPlan) -> str:
    """The harness ``text`` with ``plan`` in place of its own, and its ``make_inputs`` written again from it; the
    first line (what wrote it, and why) is kept."""
    new = harness_source("", plan, "")
    return text.split("\n", 1)[0] + "\n" + new.split("\n", 1)[1]


def layouts_of(text: str) -> set[str]:
    """The layouts the inputs of the harness ``text`` come from (none for a hand-written one)."""
    plan = plan_of(text)
    return plan.layouts() if plan is not None else set()
