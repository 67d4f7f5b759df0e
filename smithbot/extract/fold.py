"""Module-level assignments a task takes from the target, rewritten where the evaluator's guard would see state: what
a value is at import time (a release tuple, a stubbed helper's answer, a constant a plain helper computes) is read here
at extraction and written as a literal."""

from __future__ import annotations

import ast
from typing import Any

from evaluator.guard import module_state
from smithbot.extract.constants import Constants, NotConstant, Ref
from smithbot.extract.modules import Module
from smithbot.extract.rewrite import calls_stub, env_pinned, fold_stubs, fold_versions


def _constexpr_of(value: ast.expr) -> bool:
    """``tl.constexpr(expr)``, ``triton.language.constexpr(expr)``: one positional argument and no keywords."""
    return isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "constexpr" \
        and len(value.args) == 1 and not value.keywords


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float)) or type(value) is str


def fold_assignment(builder: Any, mod: Module, node: ast.stmt, source: str, as_name: str
                    ) -> tuple[ast.stmt, str] | None:
    """``node`` (its ``source``) as the task takes it, or None where it became an alias of a ``tl`` function (recorded
    on the builder's closure). ``builder`` is the ``ClosureBuilder`` whose stubs and modules the values come from."""
    parse = {f"{k}.parse" if v == "packaging.version" else k for k, v in mod.imports.items()
             if v in ("packaging.version", "packaging.version.parse")}
    if isinstance(node, ast.Assign) and parse and any(
            isinstance(n, ast.Call) and ast.unparse(n.func) in parse for n in ast.walk(node.value)):
        # `TRITON_VERSION = version.parse(triton.__version__)`: a release tuple, read here at extraction (a
        # module-level call's result is state to the evaluator's guard)
        node = ast.Assign(node.targets, fold_versions(node.value, parse), lineno=node.lineno)
        source = ast.unparse(node) + "  # release numbers, read at extraction\n"
    if isinstance(node, ast.Assign) and calls_stub(node.value, builder.stubs_values):
        # `_is_fnuz = is_fp8_fnuz()`, `dt = A if is_fp8_fnuz() else B`: computed at import time by a stubbed
        # helper, so the stub's value decides it here (`NUM_WARPS = [2, 4] if is_hopper() else [2, 4, 8]`)
        node = ast.Assign(node.targets, fold_stubs(node.value, builder.stubs_values), lineno=node.lineno)
        source = ast.unparse(node) + "\n"
    if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Set)) and all(
            isinstance(e, (ast.Constant, ast.UnaryOp)) or isinstance(e, ast.Call) and ast.unparse(e.func) in (
                "triton.Config", "Config") for e in node.value.elts):
        # `BT_LIST = [8, 16, 32]`, `configs = [triton.Config(...), ...]` read by autotune: a tuple, which no call
        # can grow into a cache
        node = ast.Assign(node.targets, ast.Tuple(node.value.elts, ast.Load()), lineno=node.lineno)
        source = ast.unparse(node) + "\n"
    if isinstance(node, ast.Assign) and not calls_stub(node.value, builder.stubs_values) \
            and module_state(env_pinned(node.value)):
        # `padding_size = get_moe_padding_size(_use_aiter)`, `HAS_GATHER = hasattr(tl, "gather")`: a constant
        # that a plain helper or the installed triton gives at import (a module-level call's result is state to
        # the evaluator's guard), so it is computed here
        try:
            value = Constants(builder, mod).value(node.value)
        except NotConstant:
            value = NotConstant
        if isinstance(value, Ref) and value.startswith("triton.language."):
            builder.c.aliases[as_name] = "tl." + value.removeprefix("triton.language.")  # exp = get_tl_exp()
            builder.c.imports.setdefault("tl", "import triton.language as tl")
            return None
        if _plain(value) or isinstance(value, tuple) and all(_plain(v) for v in value):
            source = f"{ast.unparse(node.targets[0])} = {value!r}  # {ast.unparse(node.value)}, at extraction\n"
            node = ast.parse(source).body[0]
        elif value is NotConstant and _constexpr_of(node.value):
            # `_kAlpha = tl.constexpr(math.sqrt(2.0 / math.pi))`: a kernel constant whose value a plain
            # expression gives; computed here, and kept a constexpr (kernels read only those globals)
            try:
                inner = Constants(builder, mod).value(node.value.args[0])  # type: ignore[attr-defined]
            except NotConstant:
                inner = NotConstant
            if _plain(inner) and inner is not None:
                source = (f"{ast.unparse(node.targets[0])} = {ast.unparse(node.value.func)}({inner!r})"  # type: ignore
                          f"  # {ast.unparse(node.value)}, at extraction\n")
                node = ast.parse(source).body[0]
    return node, source
