"""The small facts about a Triton kernel's AST that the cleaning and folding passes share: its statement lists,
how often each name is assigned and which are read, ``name = value`` statements, and a value's shape as far as the
kernel's own statements show it."""

from __future__ import annotations

import ast

# calls that act on memory or the device, which an unread result does not make removable
EFFECTS = ("store", "atomic", "assert", "print", "barrier")


def has_effect(node: ast.AST) -> bool:
    """Whether ``node`` holds a call that acts on memory or the device."""
    return any(isinstance(c, ast.Call) and any(w in ast.unparse(c.func) for w in EFFECTS) for c in ast.walk(node))


def blocks(fn: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list in ``fn``: its body and the bodies of its loops and branches."""
    out = []
    for node in ast.walk(fn):
        for name in ("body", "orelse"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append(block)
    return out


def stores(fn: ast.AST) -> dict[str, int]:
    """How many times each name is assigned (parameters once)."""
    counts: dict[str, int] = {a.arg: 1 for a in fn.args.args} if isinstance(fn, ast.FunctionDef) else {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    return counts


def loads(fn: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def single(s: ast.stmt) -> tuple[str, ast.expr] | None:
    """``name = value`` (or ``name: T = value``): the name and the value."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
        return s.targets[0].id, s.value
    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
        return s.target.id, s.value
    return None


def shape(value: ast.expr, shapes: dict[str, tuple[str, ...] | None]) -> tuple[str, ...] | None:
    """The shape of a kernel value, each dimension as its source text (``("XBLOCK", "R0_BLOCK")``; ``()`` a scalar),
    or None where the expression's shape is not one these rules know."""
    if isinstance(value, ast.Constant):
        return ()
    if isinstance(value, ast.Name):
        return shapes.get(value.id)
    if isinstance(value, (ast.BinOp, ast.Compare, ast.BoolOp)):
        parts = [value.left, value.right] if isinstance(value, ast.BinOp) else \
            [value.left, *value.comparators] if isinstance(value, ast.Compare) else value.values
        return broadcast([shape(p, shapes) for p in parts])
    if isinstance(value, ast.UnaryOp):
        return shape(value.operand, shapes)
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) and value.slice.lower is None \
            and value.slice.upper is None:  # x[:]
        return shape(value.value, shapes)
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Tuple):
        inner = shape(value.value, shapes)
        if inner is None:
            return None
        dims, it = [], iter(inner)
        for e in value.slice.elts:
            if isinstance(e, ast.Constant) and e.value is None:
                dims.append("1")
            elif isinstance(e, ast.Slice) and e.lower is None and e.upper is None:
                dims.append(next(it, "?"))
            else:
                return None
        return tuple(dims) + tuple(it)
    if isinstance(value, ast.Call):
        func = ast.unparse(value.func)
        if func in ("tl.program_id", "tl.num_programs", "float", "int"):
            return ()
        if func == "tl.arange" and len(value.args) == 2 and ast.unparse(value.args[0]) == "0":
            return (ast.unparse(value.args[1]),)
        if func in ("tl.full", "tl.zeros") and value.args and isinstance(value.args[0], (ast.List, ast.Tuple)):
            return tuple(ast.unparse(e) for e in value.args[0].elts)
        if func == "tl.load" and value.args:
            return shape(value.args[0], shapes)
        if func in ("tl.sum", "tl.max", "tl.min", "_inductor_max2", "_inductor_min2") and len(value.args) == 2 and not value.keywords and \
                isinstance(value.args[1], ast.Constant) and isinstance(value.args[1].value, int):
            inner = shape(value.args[0], shapes)
            axis = value.args[1].value
            return None if inner is None or not -len(inner) <= axis < len(inner) else \
                tuple(d for k, d in enumerate(inner) if k != axis % len(inner))
        if func == "tl.where" and len(value.args) == 3:
            return broadcast([shape(a, shapes) for a in value.args])
        if isinstance(value.func, ast.Attribute) and value.func.attr == "to":
            return shape(value.func.value, shapes)
        if func.startswith(("libdevice.", "tl.math.", "tl.exp", "tl.log", "tl.sqrt", "tl.abs")) and len(value.args) == 1:
            return shape(value.args[0], shapes)  # (an elementwise function)
    return None


def broadcast(shapes: list[tuple[str, ...] | None]) -> tuple[str, ...] | None:
    """Numpy's broadcasting of known shapes, dimension by dimension as text; None where one is unknown or two
    dimensions differ and neither is 1."""
    if any(s is None for s in shapes):
        return None
    rank = max(len(s) for s in shapes)  # type: ignore[arg-type]
    out = []
    for k in range(rank):
        dims = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0} - {"1"}  # type: ignore[arg-type]
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else "1")
    return tuple(out)
