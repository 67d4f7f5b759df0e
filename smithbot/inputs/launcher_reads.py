"""Readings of a launcher's code that inference asks for beside its facts (``launcher_facts.py``): the views its
parameters arrive in before it rebinds them, the names it uses as axes, the flags that return before the launch, and
whether it tests a name against None."""

from __future__ import annotations

import ast
import copy

from smithbot.inputs.launcher_facts import SAME_SHAPE


def rebound_apart(fn: ast.FunctionDef, params: set[str]) -> ast.FunctionDef:
    """``fn`` with each parameter that a statement rebinds to something else (``x = _unsqueeze_to_3d(x)``,
    ``x = x.view(-1, x.shape[-1])``) renamed from that statement on (``x__rebound``): what the code does with the new
    value says nothing of the shape the parameter arrives in. A rebinding to the same shape (``x = x.contiguous()``)
    keeps the name. Only a rebinding in the function's own body counts: one under a branch
    (``if x.dim() == 2: x = x.view(b, -1, d)``) takes the parameter to the shape it arrives in on the other path."""
    first: dict[str, int] = {}
    for node in fn.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) and getattr(node, "value", None) is not None else []
        for t in targets:
            if not (isinstance(t, ast.Name) and t.id in params):
                continue
            v = getattr(node, "value", None)
            same = isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in SAME_SHAPE \
                and isinstance(v.func.value, ast.Name) and v.func.value.id == t.id
            if not same and not isinstance(node, ast.AugAssign):
                first[t.id] = min(first.get(t.id, node.end_lineno or node.lineno), node.end_lineno or node.lineno)
    if not first:
        return fn

    class Apart(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in first and getattr(node, "lineno", 0) > first[node.id]:
                return ast.copy_location(ast.Name(f"{node.id}__rebound", node.ctx), node)
            return node

    return Apart().visit(copy.deepcopy(fn))


def split_views(fn: ast.FunctionDef, params: set[str]) -> dict[str, tuple[int, list[ast.expr], int]]:
    """Parameters the function's own body rebinds to a view that keeps their leading axes and splits the next one
    (``x = x.view(x.shape[0], x.shape[1], groups, group_dim)``, no ``-1``): ``x`` arrives with one axis past those
    kept, whose size is the product of the rest. Each maps to (the axes kept, the rest, the statement's last line)."""
    found: dict[str, tuple[int, list[ast.expr], int]] = {}
    rebound: set[str] = set()
    for node in fn.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        x, v = node.targets[0].id, node.value
        if x not in params or x in rebound:
            continue
        rebound.add(x)
        if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in ("view", "reshape")
                and isinstance(v.func.value, ast.Name) and v.func.value.id == x and not v.keywords and v.args):
            continue
        args = list(v.args[0].elts) if len(v.args) == 1 and isinstance(v.args[0], (ast.Tuple, ast.List)) else \
            list(v.args)
        kept = 0
        for a in args:
            own = a.slice if isinstance(a, ast.Subscript) and ast.unparse(a.value) == f"{x}.shape" else \
                a.args[0] if isinstance(a, ast.Call) and ast.unparse(a.func) == f"{x}.size" and len(a.args) == 1 \
                else None
            if not (isinstance(own, ast.Constant) and own.value == kept):
                break
            kept += 1
        rest = args[kept:]
        if kept and rest and not any(isinstance(a, ast.Starred) or (isinstance(a, ast.UnaryOp) and isinstance(
                a.op, ast.USub)) or any(isinstance(n, ast.Name) and n.id == x for n in ast.walk(a)) for a in rest):
            found[x] = (kept, rest, node.end_lineno or node.lineno)
    return found


def arriving_views(fn: ast.FunctionDef, split: dict[str, tuple[int, list[ast.expr], int]]) -> ast.FunctionDef:
    """``fn`` read for the shapes its split views' parameters arrive in: after the view, ``x.shape``, ``x.size()``
    and ``x.stride()`` are the view's (``x__view``), while what ``x`` is handed to still sees the tensor (its rows
    are the view's); before the view, ``assert x.shape[k] == groups * group_dim`` states the axis split."""

    class Apart(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            self.generic_visit(node)
            v = node.value
            if isinstance(v, ast.Name) and v.id in split and node.attr in ("shape", "size", "stride", "dim") \
                    and getattr(v, "lineno", 0) > split[v.id][2]:
                node.value = ast.copy_location(ast.Name(f"{v.id}__view", ast.Load()), v)
            return node

    out = Apart().visit(copy.deepcopy(fn))
    body: list[ast.stmt] = []
    for node in out.body:
        for x, (kept, rest, line) in split.items():
            if (node.end_lineno or node.lineno) == line:
                product: ast.expr = copy.deepcopy(rest[0])
                for r in rest[1:]:
                    product = ast.BinOp(product, ast.Mult(), copy.deepcopy(r))
                axis = ast.Subscript(ast.Attribute(ast.Name(x, ast.Load()), "shape", ast.Load()), ast.Constant(kept),
                                     ast.Load())
                body.append(ast.Assert(ast.Compare(axis, [ast.Eq()], [product])))
        body.append(node)
    out.body = body
    return ast.fix_missing_locations(out)


def axis_indexes(fn: ast.FunctionDef) -> set[str]:
    """The names the launcher uses as an axis of a tensor, not a size: ``x.shape[dim]``, ``x.size(dim)``,
    ``x.stride(dim)``, ``x.sum(dim=dim)``, ``-x.ndim <= dim < x.ndim`` (a range check, not ``x.ndim == n``)."""
    out: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and n.value.attr == "shape" \
                and isinstance(n.slice, ast.Name):
            out.add(n.slice.id)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("size", "stride") \
                and len(n.args) == 1 and isinstance(n.args[0], ast.Name):
            out.add(n.args[0].id)
        elif isinstance(n, ast.keyword) and n.arg == "dim" and isinstance(n.value, ast.Name):
            out.add(n.value.id)
        elif isinstance(n, ast.Compare) and all(isinstance(o, (ast.Lt, ast.LtE)) for o in n.ops) and any(
                isinstance(x, ast.Attribute) and x.attr == "ndim" for x in [n.left, *n.comparators]):
            out.update(x.id for x in [n.left, *n.comparators] if isinstance(x, ast.Name))
    return out


def early_outs(fn: ast.FunctionDef) -> set[str]:
    """The tensors whose value alone skips the rest of the launcher: ``if flag.item(): return``."""
    return {n.test.func.value.id for n in ast.walk(fn) if isinstance(n, ast.If)
            and any(isinstance(s, ast.Return) for s in n.body) and all(isinstance(s, (ast.Return, ast.Expr))
                                                                         for s in n.body)
            and isinstance(n.test, ast.Call) and isinstance(n.test.func, ast.Attribute) and n.test.func.attr == "item"
            and isinstance(n.test.func.value, ast.Name)}


def none_tested(fn: ast.FunctionDef, names: set[str]) -> bool:
    """Whether ``fn`` (its decorators too: ``"HAS_BIAS": lambda args: args["bias"] is not None``) compares one of
    ``names`` with None."""
    for c in ast.walk(fn):
        if isinstance(c, ast.Compare) and any(isinstance(o, (ast.Is, ast.IsNot)) for o in c.ops) and any(
                isinstance(e, ast.Constant) and e.value is None for e in c.comparators):
            left = c.left.slice if isinstance(c.left, ast.Subscript) else c.left
            if isinstance(left, ast.Name) and left.id in names or isinstance(
                    left, ast.Constant) and left.value in names:
                return True
    return False
