"""Folding passes for the kernels Inductor generates: the same computation in about the statements a person would
write, where the cleaning pass (``clean.py``) only takes bookkeeping out.

- ``one_pass``: a looped reduction (``for r0_offset in tl.range(0, r0_numel, R0_BLOCK)``, once per pass over the
  row) becomes straight-line code that reads the row once; its launcher makes ``R0_BLOCK`` cover the row
  (``triton.next_power_of_2``), so each loop ran exactly once, at offset 0.
- ``fold``, one rule at a time until none applies: comparisons of constants, a ``tl.where`` on a constant, ``0 +
  x``, a cast to the type a value already has; an accumulator that starts at its operation's identity
  (``acc = tl.full(.., 0, ..)``; ``acc = tl.where(m, acc + x, acc)``) becomes ``tl.where(m, x, 0)``, and that
  where goes when ``x`` was loaded under ``m`` with ``other=0``; a value computed again with nothing it reads
  changed between (the second pass's load of the same row) is the first one; a value overwritten before anything
  reads it goes.
- ``cumsum``: an ``associative_scan`` whose combine function adds is ``tl.cumsum``.
- ``inline``: a temporary read once, in the next statements of its block, is written where it is read while the
  line stays short (a load only into the store that copies it: a loaded value keeps its tensor's name).

Each rule keeps the computation; the candidate is checked against the glue like any other, and ``standalone``
offers the looped form too, so the search keeps whichever is faster."""

from __future__ import annotations

import ast
import copy
import operator
from collections.abc import Callable

from smithbot.evolve.kernel_ast import broadcast, has_effect, loads, shape, single, stores

# the identity of each way Inductor combines a loop-carried accumulator with the step's value
_IDENTITY = {"add": ("0", "0.0"), "_inductor_maximum": ("float('-inf')", "-float('inf')"),
             "_inductor_minimum": ("float('inf')",), "mul": ("1", "1.0")}
_ROW_SIZES, _ROW_BLOCKS = ("r0_numel", "rnumel"), ("R0_BLOCK", "RBLOCK")
# calls an inlined expression may hold besides loads: they have no effect
_PURE = ("tl.arange", "tl.program_id", "tl.num_programs", "tl.where", "tl.full", "tl.zeros", "tl.broadcast_to",
         "tl.sum", "tl.max", "tl.min", "tl.cumsum")
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Eq: operator.eq,
            ast.NotEq: operator.ne}
LINE = 116  # the longest statement ``inline`` makes: 4 spaces in, within the 120 columns the targets' linters allow


def one_pass(fn: ast.FunctionDef) -> bool:
    """Each top-level loop over the reduced axis replaced by its body at offset 0; whether there was one."""
    body: list[ast.stmt] = []
    for s in fn.body:
        if isinstance(s, ast.For) and isinstance(s.target, ast.Name) and not s.orelse and _over_row(s.iter):
            body += [substitute(copy.deepcopy(b), s.target.id, ast.Constant(0)) for b in s.body]
        else:
            body.append(s)
    changed = len(body) != len(fn.body) or any(a is not b for a, b in zip(body, fn.body))
    fn.body[:] = body
    if changed:
        renumber(fn)
    return changed


def _over_row(it: ast.expr) -> bool:
    return isinstance(it, ast.Call) and ast.unparse(it.func) in ("tl.range", "range") and len(it.args) >= 3 \
        and ast.unparse(it.args[0]) == "0" and ast.unparse(it.args[1]) in _ROW_SIZES \
        and ast.unparse(it.args[2]) in _ROW_BLOCKS


def substitute(node: ast.AST, name: str, value: ast.expr) -> ast.AST:
    """``node`` (changed in place, and returned) with each read of ``name`` replaced by a copy of ``value``."""
    class Sub(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.AST:
            return copy.deepcopy(value) if n.id == name and isinstance(n.ctx, ast.Load) else n

    return Sub().visit(node)


def fold(fn: ast.FunctionDef) -> bool:
    """One folding rule applied (see the module); whether one was."""
    rules: tuple[Callable[[ast.FunctionDef], bool], ...] = (_fold_expressions, _identity_accumulators,
                                                            _same_values, _overwritten)
    if any(rule(fn) for rule in rules):
        renumber(fn)
        return True
    return False


def renumber(fn: ast.FunctionDef) -> None:
    """``fn`` parsed again from its text, so that every node has the line and column the other passes order by
    (after statements were copied or made)."""
    again = ast.parse(ast.unparse(fn)).body[0]
    assert isinstance(again, ast.FunctionDef)
    fn.args, fn.body = again.args, again.body


def _defs(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    """The value of each name assigned once."""
    counts = stores(fn)
    out = {}
    for node in ast.walk(fn):
        got = single(node) if isinstance(node, ast.stmt) else None
        if got is not None and counts.get(got[0]) == 1:
            out[got[0]] = got[1]
    return out


def shapes_of(fn: ast.FunctionDef) -> dict[str, tuple[str, ...] | None]:
    """Each name's shape as far as the statements show it (None where it is assigned values of several shapes or
    one the rules do not know); a scan's outputs have its input's shape."""
    shapes: dict[str, tuple[str, ...] | None] = {a.arg: () for a in fn.args.args}
    for node in ast.walk(fn):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            shapes[node.target.id] = ()
        got = single(node) if isinstance(node, ast.stmt) else None
        pairs: list[tuple[str, tuple[str, ...] | None]] = []
        if got is not None:
            pairs = [(got[0], shape(got[1], shapes))]
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and _scan_of(node.value):
            inputs = node.value.args[0].elts  # type: ignore[attr-defined]
            pairs = [(t.id, shape(v, shapes)) for t, v in zip(node.targets[0].elts, inputs) if isinstance(t, ast.Name)]
        for name, made in pairs:
            shapes[name] = made if shapes.get(name, made) == made else None
    return shapes


def _scan_of(value: ast.expr) -> bool:
    return isinstance(value, ast.Call) and ast.unparse(value.func) == "tl.associative_scan" and len(value.args) == 3 \
        and isinstance(value.args[0], ast.Tuple)


def _fold_expressions(fn: ast.FunctionDef) -> bool:
    folder = _Fold(fn)
    fn.body = [folder.visit(s) for s in fn.body]
    return folder.changed


class _Fold(ast.NodeTransformer):
    """The expression rules of ``fold`` over one kernel; ``changed`` says whether one applied."""

    def __init__(self, fn: ast.FunctionDef) -> None:
        self.shapes, self.defs = shapes_of(fn), _defs(fn)
        self.sizes = {a.arg for a in fn.args.args if a.annotation is None and not a.arg.endswith("_ptr")
                      and not a.arg.startswith(("in_ptr", "out_ptr", "in_out_ptr"))}
        self.changed = False

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        parts = [node.left, *node.comparators]
        for k, part in enumerate(parts):
            rest = broadcast([shape(p, self.shapes) for j, p in enumerate(parts) if j != k])
            number = _full_number(part, rest, False, self.defs)
            if number is not None:
                parts[k], self.changed = number, True
        node.left, node.comparators = parts[0], parts[1:]
        if len(node.ops) == 1 and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Sub) \
                and _int(node.left.right) is not None and _int(node.comparators[0]) is not None:
            # (offsets - 1 >= 0: offsets >= 1)
            bound = _int(node.comparators[0]) + _int(node.left.right)  # type: ignore[operator]
            node.left, node.comparators, self.changed = node.left.left, [ast.Constant(bound)], True
        if all(isinstance(p, ast.Constant) and type(p.value) is int for p in parts):
            self.changed = True
            values = [p.value for p in parts]  # type: ignore[attr-defined]
            truth = all(_COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, values, values[1:]))
            return ast.copy_location(ast.Constant(truth), node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        for side in ("left", "right"):
            other = node.right if side == "left" else node.left
            number = _full_number(getattr(node, side), shape(other, self.shapes), True, self.defs)
            if number is not None:
                setattr(node, side, number)
                self.changed = True
        if isinstance(node.op, ast.Add):
            whole = _split_again(node, self.defs, self.sizes)
            if whole is not None:  # (x % m + x // m * m: x)
                self.changed = True
                return whole
            for number, other in ((node.left, node.right), (node.right, node.left)):
                value = _int(number)
                if value == 0:
                    self.changed = True
                    return other
                if value is not None and value < 0:  # (-1 + offsets: offsets - 1)
                    self.changed = True
                    return ast.copy_location(ast.BinOp(other, ast.Sub(), ast.Constant(-value)), node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.slice, ast.Slice) and node.slice.lower is node.slice.upper is node.slice.step is None:
            self.changed = True  # (x[:] of a vector is x)
            return node.value
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = ast.unparse(node.func)
        if func == "_inductor_div_floor_integer" and len(node.args) == 2 and _counts_up(node.args[0], self.defs) \
                and isinstance(node.args[1], ast.Name) and node.args[1].id in self.sizes:
            self.changed = True  # (floor and truncation agree on an index over a size)
            return ast.copy_location(ast.BinOp(node.args[0], ast.FloorDiv(), node.args[1]), node)
        if func in ("tl.load", "tl.store") and node.args:
            pointer = ast.unparse(node.args[0])
            node.args[0] = _Strides().visit(node.args[0])
            self.changed = self.changed or ast.unparse(node.args[0]) != pointer
        if func == "tl.where" and len(node.args) == 3 and not node.keywords:
            cond, a, b = node.args
            if isinstance(cond, ast.Constant) and type(cond.value) is bool:
                chosen = a if cond.value else b
                both = [shape(a, self.shapes), shape(b, self.shapes)]
                if None not in both and shape(chosen, self.shapes) == broadcast(both):
                    self.changed = True
                    return chosen
            if _masked_load(a, self.defs) == (ast.unparse(cond), _number(b)) and _number(b) is not None:
                self.changed = True  # (the value is already `other` wherever the mask is off)
                return a
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to" and len(node.args) == 1 \
                and not node.keywords:
            inner = node.func.value
            made = self.defs.get(inner.id) if isinstance(inner, ast.Name) else inner
            if made is not None and _cast(made) == ast.unparse(node.args[0]):
                self.changed = True  # (a cast to the type the value was cast to already)
                return inner
        return node


def _full_number(value: ast.expr, other: tuple[str, ...] | None, arithmetic: bool,
                 defs: dict[str, ast.expr]) -> ast.Constant | None:
    """The number a ``tl.full([1, ...], c, dtype)`` (or a name assigned one) holds, where the value it meets (of shape ``other``) is at least
    as wide, so the plain number broadcasts the same; in arithmetic only for the types a Python number has in
    Triton (int32, float32), where the result's type is the same too."""
    if isinstance(value, ast.Name) and value.id in defs:
        value = defs[value.id]
    if not (isinstance(value, ast.Call) and ast.unparse(value.func) == "tl.full" and len(value.args) == 3
            and isinstance(value.args[0], (ast.List, ast.Tuple)) and isinstance(value.args[1], ast.Constant)
            and other is not None and len(other) >= len(value.args[0].elts)
            and all(ast.unparse(e) == "1" for e in value.args[0].elts)):
        return None
    number, dtype = value.args[1].value, ast.unparse(value.args[2])
    if type(number) not in (int, float) or arithmetic and (dtype, type(number)) not in (("tl.int32", int),
                                                                                       ("tl.float32", float)):
        return None
    return ast.Constant(number)


def _split_again(node: ast.BinOp, defs: dict[str, ast.expr], sizes: set[str]) -> ast.expr | None:
    """``x`` for ``x % m + x // m * m`` (either order, names resolved through their values), where ``x`` is never
    negative and ``m`` is a size: an index split into a row and a column and put back together."""
    def seen(e: ast.expr) -> ast.expr:
        return defs[e.id] if isinstance(e, ast.Name) and e.id in defs else e

    for rem, rest in ((node.left, node.right), (node.right, node.left)):
        r = seen(rem)
        if not (isinstance(r, ast.BinOp) and isinstance(r.op, ast.Mod) and isinstance(r.right, ast.Name)
                and r.right.id in sizes and isinstance(rest, ast.BinOp) and isinstance(rest.op, ast.Mult)):
            continue
        for quot, m in ((rest.left, rest.right), (rest.right, rest.left)):
            q = seen(quot)
            if ast.unparse(m) == r.right.id and isinstance(q, ast.BinOp) and isinstance(q.op, ast.FloorDiv) \
                    and ast.unparse(q.left) == ast.unparse(r.left) and ast.unparse(q.right) == r.right.id \
                    and _counts_up(r.left, defs):
                return copy.deepcopy(r.left)
    return None


class _Strides(ast.NodeTransformer):
    """In a pointer, Inductor's row stride ``max(1, s)`` (``1 * (1 >= s) + s * (s > 1)``) is ``s``: they differ only
    where ``s`` is 0, and then the dimension it strides over holds no element to address."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        text = ast.unparse(node)
        for name in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}:
            if text == f"1 * (1 >= {name}) + {name} * ({name} > 1)":
                return ast.Name(name, ast.Load())
        return node


def _counts_up(value: ast.expr, defs: dict[str, ast.expr], depth: int = 0) -> bool:
    """Whether ``value`` is never negative: program ids, ranges from 0, non-negative constants and constexprs,
    and their sums and products."""
    if depth > 8:
        return False
    if isinstance(value, ast.Constant):
        return type(value.value) is int and value.value >= 0
    if isinstance(value, ast.Name):
        return value.id.isupper() or (value.id in defs and _counts_up(defs[value.id], defs, depth + 1))
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mult)):
        return _counts_up(value.left, defs, depth + 1) and _counts_up(value.right, defs, depth + 1)
    if isinstance(value, ast.Subscript):
        return _counts_up(value.value, defs, depth + 1)
    if isinstance(value, ast.Call):
        func = ast.unparse(value.func)
        return func in ("tl.program_id", "tl.num_programs") or func == "tl.arange" and all(
            _counts_up(a, defs, depth + 1) for a in value.args)
    return False


def _cast(value: ast.expr) -> str | None:
    """The dtype ``value`` is cast to (``x.to(tl.int32)``: ``tl.int32``), or None."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "to" \
            and len(value.args) == 1 and not value.keywords:
        return ast.unparse(value.args[0])
    return None


def _int(value: ast.expr) -> int | None:
    """An integer constant's value (``-1`` is a minus applied to 1 in the tree)."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        inner = _int(value.operand)
        return -inner if inner is not None else None
    return value.value if isinstance(value, ast.Constant) and type(value.value) is int else None


def _number(value: ast.expr) -> float | None:
    if isinstance(value, ast.Constant) and type(value.value) in (int, float):
        return float(value.value)
    return None


def _masked_load(value: ast.expr, defs: dict[str, ast.expr]) -> tuple[str, float | None] | None:
    """For a value that is a load (through names assigned once and casts): its mask's text and the number its
    masked-off lanes hold (``other=``); None for any other value."""
    seen = 0
    while seen < 16:
        seen += 1
        if isinstance(value, ast.Name) and value.id in defs:
            value = defs[value.id]
        elif _cast(value) is not None:
            value = value.func.value  # type: ignore[attr-defined]
        else:
            break
    if not (isinstance(value, ast.Call) and ast.unparse(value.func) == "tl.load" and len(value.args) >= 2):
        return None
    other = next((k.value for k in value.keywords if k.arg == "other"), None)
    return ast.unparse(value.args[1]), (_number(other) if other is not None else None)


def _combine(value: ast.expr, acc: str) -> tuple[str, ast.expr] | None:
    """``acc + x`` (or ``x + acc``, ``acc * x``, ``_inductor_maximum(acc, x)``...): how it combines, and ``x``."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mult)):
        kind = "add" if isinstance(value.op, ast.Add) else "mul"
        for a, x in ((value.left, value.right), (value.right, value.left)):
            if isinstance(a, ast.Name) and a.id == acc and acc not in loads(x):
                return kind, x
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _IDENTITY \
            and len(value.args) == 2 and not value.keywords:
        for a, x in ((value.args[0], value.args[1]), (value.args[1], value.args[0])):
            if isinstance(a, ast.Name) and a.id == acc and acc not in loads(x):
                return value.func.id, x
    return None


def _identity_accumulators(fn: ast.FunctionDef) -> bool:
    """``acc = tl.full(S, identity, T)`` ... ``t = acc + x`` ... ``acc = tl.where(m, t, acc)`` in the kernel's top
    level: ``t = x.to(T)`` and ``acc = tl.where(m, t, identity)`` (the full is then overwritten unread)."""
    body = fn.body
    counts = stores(fn)
    for i, s in enumerate(body):
        got = single(s)
        if got is None or not (isinstance(got[1], ast.Call) and ast.unparse(got[1].func) == "tl.where"
                               and len(got[1].args) == 3 and ast.unparse(got[1].args[2]) == got[0]):
            continue
        acc, step = got[0], got[1].args[1]
        start = next((j for j in range(i - 1, -1, -1) if acc in stores(body[j])), None)
        init = single(body[start]) if start is not None else None
        if init is None or not (isinstance(init[1], ast.Call) and ast.unparse(init[1].func) == "tl.full"
                                and len(init[1].args) == 3):
            continue
        fill, dtype = ast.unparse(init[1].args[1]), init[1].args[2]
        assert start is not None
        if not isinstance(step, ast.Name) or counts.get(step.id) != 1:
            continue
        at = next((k for k in range(start + 1, i) if single(body[k]) is not None
                   and single(body[k])[0] == step.id), None)  # type: ignore[index]
        combined = _combine(single(body[at])[1], acc) if at is not None else None  # type: ignore[index]
        if at is None or combined is None or fill not in _IDENTITY[combined[0]]:
            continue
        others = [k for k in range(start + 1, i) if k != at and acc in loads(body[k])]
        if others or sum(n.id == step.id for n in ast.walk(fn) if isinstance(n, ast.Name)) != 2:
            continue
        x = combined[1]
        body[at] = ast.Assign([ast.Name(step.id, ast.Store())], ast.Call(
            ast.Attribute(x, "to", ast.Load()), [dtype], []), lineno=0)
        got[1].args[2] = copy.deepcopy(init[1].args[1])
        return True
    return False


def _same_values(fn: ast.FunctionDef) -> bool:
    """A top-level ``x = E`` where an earlier statement assigned ``E`` and nothing ``E`` reads (nor memory, when it
    loads) changed between: gone when it assigns the same name, else ``x = y`` for the copy pass to take."""
    body, counts = fn.body, stores(fn)
    for i, s in enumerate(body):
        got = single(s)
        if got is None or has_effect(got[1]):
            continue
        name, text = got[0], ast.unparse(got[1])
        if name in loads(got[1]):
            continue  # (x = x + 1 twice is two steps)
        read = loads(got[1]) | {name}
        memory = any(isinstance(c, ast.Call) and ast.unparse(c.func) == "tl.load" for c in ast.walk(got[1]))
        for j in range(i - 1, -1, -1):
            between = body[j + 1:i]
            earlier = single(body[j])
            if earlier is not None and ast.unparse(earlier[1]) == text and not any(
                    read & stores(b).keys() or (memory and has_effect(b)) for b in between):
                if earlier[0] == name:
                    del body[i]
                    return True
                if counts.get(name) == 1 and counts.get(earlier[0]) == 1:
                    body[i] = ast.Assign([ast.Name(name, ast.Store())], ast.Name(earlier[0], ast.Load()), lineno=0)
                    return True
            if read & stores(body[j]).keys():
                break
    return False


def _overwritten(fn: ast.FunctionDef) -> bool:
    """A top-level ``x = E`` (no effect) whose next mention is another ``x = F`` not reading ``x``: gone."""
    body = fn.body
    for i, s in enumerate(body):
        got = single(s)
        if got is None or has_effect(got[1]):
            continue
        for later in body[i + 1:]:
            if got[0] in loads(later):
                break
            if got[0] in stores(later):
                if single(later) is not None:
                    del body[i]
                    return True
                break
    return False


def cumsum(fn: ast.FunctionDef, adds: set[str]) -> bool:
    """``t, = tl.associative_scan((v,), axis, f)`` where ``f`` adds (``adds``: such helpers' names) and ``v`` is cast
    to a 32- or 64-bit type, which ``tl.cumsum`` keeps: ``t = tl.cumsum(v, axis)``; whether one was."""
    defs = _defs(fn)
    changed = False
    for block in [fn.body] + [n.body for n in ast.walk(fn) if isinstance(n, ast.For) and n is not fn]:
        for i, s in enumerate(block):
            if not (isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Tuple) and len(s.targets[0].elts) == 1
                    and _scan_of(s.value) and ast.unparse(s.value.args[2]) in adds  # type: ignore[attr-defined]
                    and len(s.value.args[0].elts) == 1):  # type: ignore[attr-defined]
                continue
            v, axis = s.value.args[0].elts[0], s.value.args[1]  # type: ignore[attr-defined]
            source = defs.get(v.id) if isinstance(v, ast.Name) else v
            if source is None or _cast(source) not in ("tl.int32", "tl.int64", "tl.float32", "tl.float64"):
                continue
            block[i] = ast.Assign([s.targets[0].elts[0]], ast.Call(  # type: ignore[attr-defined]
                ast.Attribute(ast.Name("tl", ast.Load()), "cumsum", ast.Load()), [v, axis], []), lineno=0)
            changed = True
    return changed


def inline(fn: ast.FunctionDef, outputs: set[str]) -> None:
    """Each temporary that a later statement of its own block reads once, and nothing else reads, written into that
    statement, where nothing its value reads changes between and the statement stays within ``LINE`` characters;
    a load only into the store that copies it, with no store between but to ``outputs`` (pointers the kernel only
    writes, which no load reads)."""
    while _inline_one(fn, outputs):
        pass


def _inline_one(fn: ast.FunctionDef, outputs: set[str]) -> bool:
    counts = stores(fn)
    uses: dict[str, int] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            uses[n.id] = uses.get(n.id, 0) + 1
    for block in [fn.body] + [n.body for n in ast.walk(fn) if isinstance(n, (ast.For, ast.If)) and n is not fn]:
        for i, s in enumerate(block):
            got = single(s)
            if got is None or isinstance(s, ast.AnnAssign) or counts.get(got[0]) != 1 or uses.get(got[0]) != 1 \
                    or not all(ast.unparse(c.func) in _PURE + ("tl.load",) or (isinstance(c.func, ast.Attribute)
                                                                                and c.func.attr == "to")
                               for c in ast.walk(got[1]) if isinstance(c, ast.Call)):
                continue
            name, read = got[0], loads(got[1])
            memory = any(isinstance(c, ast.Call) and ast.unparse(c.func) == "tl.load" for c in ast.walk(got[1]))
            for j in range(i + 1, len(block)):
                later = block[j]
                if name in loads(later):
                    if isinstance(later, (ast.For, ast.If, ast.While)) or memory and not _copies(later, name):
                        break  # (a loaded value keeps its tensor's name, but for one a store copies)
                    trial = substitute(copy.deepcopy(later), name, got[1])
                    if len(ast.unparse(trial)) <= LINE:
                        block[j] = trial  # type: ignore[assignment]
                        del block[i]
                        return True
                    break
                if read & stores(later).keys() or memory and has_effect(later) and not _writes_only(later, outputs):
                    break
    return False


def _writes_only(stmt: ast.stmt, outputs: set[str]) -> bool:
    """Whether ``stmt`` is a ``tl.store`` through a pointer of ``outputs`` (and so changes nothing a load reads)."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) == \
        "tl.store" and bool(stmt.value.args) and bool(loads(stmt.value.args[0]) & outputs) and not has_effect(
            stmt.value.args[0]) and all(not n.endswith("_ptr") or n in outputs for n in loads(stmt.value.args[0]))


def _copies(stmt: ast.stmt, name: str) -> bool:
    """Whether ``stmt`` is ``tl.store(pointer, name, ...)``: a store of the value as it is."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) == \
        "tl.store" and len(stmt.value.args) >= 2 and ast.unparse(stmt.value.args[1]) == name
