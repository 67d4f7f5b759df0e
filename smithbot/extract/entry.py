"""Which function a kernel's task is built around: its launcher, or, when the launcher takes tables the engine builds
inside an op (the sorted ids and per-expert offsets of a MoE routing, which no layout of ``smithbot/inputs`` makes),
the nearest caller whose inputs are model tensors (hidden states, weights, top-k ids). The torch glue and the other
kernels between them are then inside the task, computed the engine's own way."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from smithbot.inputs.plan import bind_layouts

# tables an op derives from the routing before it launches the grouped GEMM: never a model's input
INTERNAL = re.compile(r"^(sorted_(token_)?(ids?|idx)|exp(ert)?_(start|end)s?|block_(end|expert_ids)|"
                      r"num_tokens_post_pad(ded)?)$")
MAX_DEPTH = 3  # callers of callers of callers, at most


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]


def internal_params(fn: ast.FunctionDef, given: dict[str, Any]) -> list[str]:
    """The parameters of launcher ``fn`` that are an op's internal tables: named so, and neither bound to a layout
    nor given a spec by the target YAML (``given``)."""
    params = _params(fn)
    bound = bind_layouts(params, given)
    return [p for p in params if INTERNAL.match(p) and p not in given and p not in bound]


def _callers(root: Path, paths: list[str], path: str, name: str) -> list[tuple[str, ast.FunctionDef]]:
    """Module-level functions that call ``name`` (as ``name(...)`` or ``mod.name(...)``), or a module-level alias of
    it in ``path`` (``_get_sorted_idx = _get_sorted_idx_triton``): those of ``path`` first, then of the other files
    that mention it, in path order."""
    try:
        own = ast.parse((root / path).read_text(encoding="utf-8-sig"))
    except (OSError, SyntaxError):
        own = ast.Module(body=[], type_ignores=[])
    names = {name} | {t.id for node in own.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
                      and node.value.id == name for t in node.targets if isinstance(t, ast.Name)}
    out = []
    for rel in [path] + sorted(p for p in paths if p != path):
        try:
            text = (root / rel).read_text(encoding="utf-8-sig")
        except OSError:
            continue
        if not any(n in text for n in names):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name not in names and any(
                    isinstance(c, ast.Call) and (isinstance(c.func, ast.Name) and c.func.id in names or
                                                 isinstance(c.func, ast.Attribute) and c.func.attr in names)
                    for c in ast.walk(node)):
                out.append((rel, node))
    return out


def op_entry(root: Path, paths: list[str], path: str, fn: ast.FunctionDef, inputs: dict[str, dict[str, Any]],
             any_launcher: bool = False) -> tuple[str, str, ast.FunctionDef] | None:
    """(path, name, def) of the op to build the task around when launcher ``fn`` (in ``path``) takes internal tables
    (with ``any_launcher``, whatever it takes: its own outputs are not comparable, a routing's order that follows its
    atomics): the nearest module-level caller, breadth first up to ``MAX_DEPTH`` calls away, that takes none and that
    the target YAML gives no internal table to either. None when the launcher takes none, or no caller qualifies."""
    if not any_launcher and not internal_params(fn, inputs.get(fn.name, {})):
        return None
    frontier, seen = [(path, fn.name)], {(path, fn.name)}
    for _ in range(MAX_DEPTH):
        nxt = []
        for p, name in frontier:
            for cpath, caller in _callers(root, paths, p, name):
                if (cpath, caller.name) in seen:
                    continue
                seen.add((cpath, caller.name))
                if not internal_params(caller, inputs.get(caller.name, {})):
                    return cpath, caller.name, caller
                nxt.append((cpath, caller.name))
        frontier = nxt
    return None
