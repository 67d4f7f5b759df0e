"""The dims input specs are sized by, and the arithmetic over them: the model dims a case takes from its preset
(``DIMS``), how far the interpreter's small cases cap them, the names a spec reads, and ``size_value``, which every
task's harness embeds (its source is copied in), so it imports nothing."""

from __future__ import annotations

import ast
from typing import Any

from smithbot.errors import SmithbotError
from smithbot.types import LayoutField, TensorSpec, spec_parts

DIMS = ("hidden", "heads", "kv_heads", "head_dim", "v_head_dim", "intermediate", "moe_intermediate", "experts", "top_k",
        "vocab")
SMALL_CAPS = {"heads": 4, "kv_heads": 2, "experts": 16, "top_k": 4, "vocab": 1000, "hidden": 1536,
              "intermediate": 1536, "moe_intermediate": 768}
MOE_INTERPRETER_CAPS = {"hidden": 512, "moe_intermediate": 256}


def size_value(expr, dims):
    """A number, or +, -, *, //, /, **, %, min(), max() and pow2() over the case's dims."""
    if not isinstance(expr, str):
        return expr
    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            return dims[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("min", "max") and n.args:
            return {"min": min, "max": max}[n.func.id](ev(a) for a in n.args)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "pow2" and len(n.args) == 1:
            return 1 << max(int(ev(n.args[0])), 1).bit_length() - 1  # the largest power of two not above it
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
            if type(n.op) in ops:
                return ops[type(n.op)]
            return {ast.FloorDiv: lambda: a // b, ast.Div: lambda: a / b, ast.Pow: lambda: a ** b,
                     ast.Mod: lambda: a % b}[type(n.op)]()
        raise ValueError(f"unsupported expression {expr!r}")
    return ev(ast.parse(expr, mode="eval"))


class InputError(SmithbotError):
    """An input nothing describes or infers, or a spec that cannot be read."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name  # the parameter nothing showed an input for


def names_in(expr: Any) -> set[str]:
    """The dims a typed input spec reads (its shape, init, a layout's sizes, an object's fields), functions left
    out."""
    if isinstance(expr, str) and (expr.startswith(("dtype:", "tldtype:"))
                                  or expr in ("device:", "default:", "regime:decode")):
        return set()
    if isinstance(expr, str):
        try:
            tree = ast.parse(expr, mode="eval")
            called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
            return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}
        except SyntaxError:
            raise InputError(f"not an arithmetic expression: {expr!r}") from None
    out: set[str] = set()
    for part in spec_parts(expr, returns=False):
        if isinstance(part, LayoutField):
            out |= set().union(*[names_in(v) for _, v in part.sizes or ()])
        elif isinstance(part, TensorSpec):
            out |= set().union(*[names_in(s) for s in part.shape], *[
                names_in(p) for p in str(part.init or "").split(":")[1:]])
        elif isinstance(part, str):  # an attribute of an object or an item of a list: a dim
            out |= names_in(part)
    return out
