"""The ``tune`` proposer's edits: launch configs and constexpr tiles found and rewritten with libcst.

Knobs are found inside the EVOLVE-BLOCK, in source order, each with its current value and a domain:
- keyword arguments of a kernel launch ``k[grid](...)``: ``num_warps`` and ``num_stages`` (an absent one, or one
  computed by an expression, is a knob whose current value is ``None``: "leave as written"), and upper-case tile
  constexprs (``BLOCK_M=64``) given as integer literals;
- tile names assigned a power-of-two literal in a launcher (``BLOCK = 128``, ``block = 256``);
- ``num_warps``/``num_stages`` entries of a dict literal in a launcher (``config = {"num_warps": ...}`` passed as
  ``**config``; such a launch gets no added kwargs);
- every ``triton.Config({...}, num_warps=..., num_stages=...)`` of an autotune list: its integer tile entries and
  its launch kwargs (the interpreter runs the first config; on a GPU the autotuner picks among them).

Per-shape-bucket values: a knob of a launcher whose launch grid names its row count (``k[(m,)]``,
``grid = (triton.cdiv(M, BLOCK_M), ...)``) may also take a pair ``(small, large)``, written as
``(small if m <= 256 else large)``, since engines choose configs by batch size and the best decode config is often
not the best prefill one. 256 is the top of the decode regime.

``set_knobs(source, {knob_id: value})`` rewrites only those nodes; everything else stays byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Tuple, Union

import libcst as cst

from evaluator.task import split_evolve
from smithbot.evolve.edits import with_block

WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4, 5)
_TILE_WORDS = ("BLOCK", "TILE", "CHUNK", "SPLIT")
_LAUNCH_KW = ("num_warps", "num_stages")
BUCKET = 256  # rows at or below this are the small (decode) bucket

Value = Union[int, None, Tuple[int, int]]


@dataclass(frozen=True)
class Knob:
    id: str
    where: str  # human-readable: "launch of _k in f(): num_warps"
    name: str
    value: Value  # None: absent or an expression, i.e. "as written"; a pair: (small bucket, large bucket)
    domain: tuple[int | None, ...]
    bucket: str | None = None  # the row-count expression a pair is split on; None: not bucketable

    def _steps(self, v: int | None) -> list[int]:
        ints = [d for d in self.domain if d is not None]
        if v not in ints:
            return ints
        i = ints.index(v)
        return [ints[j] for j in (i - 1, i + 1) if 0 <= j < len(ints)]

    def neighbours(self) -> list[Value]:
        """One step away: the next value up or down; with a bucket, also splitting or merging the pair."""
        if isinstance(self.value, tuple):
            a, b = self.value
            out: list[Value] = [(x, b) for x in self._steps(a)] + [(a, y) for y in self._steps(b)] + [a, b]
            return [v for v in out if not (isinstance(v, tuple) and v[0] == v[1])]
        steps: list[Value] = list(self._steps(self.value))
        if self.bucket is not None and self.value is not None:
            steps += [(self.value, n) for n in self._steps(self.value)] + [(n, self.value) for n in self._steps(self.value)]
        return steps

    def values(self) -> list[Value]:
        """Every value the knob can take."""
        ints = [d for d in self.domain if d is not None]
        pairs: list[Value] = [(a, b) for a in ints for b in ints if a != b] if self.bucket is not None else []
        return [*self.domain, *pairs]


def _is_tile(name: str) -> bool:
    return name.isupper() and any(w in name for w in _TILE_WORDS)


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _tile_domain(v: int) -> tuple[int, ...]:
    """Powers of two from an eighth of the current tile to 32 times it, within [1, 16384]."""
    return tuple(v << i if i >= 0 else v >> -i for i in range(-3, 6) if 1 <= (v << i if i >= 0 else v >> -i) <= 16384)


def _launch_domain(name: str, value: int | None) -> tuple[int | None, ...]:
    base = WARPS if name == "num_warps" else STAGES
    return (None, *base) if value is None else tuple(sorted(set(base) | {value}))


def _int(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    return None


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _value(node: cst.BaseExpression) -> Value:
    """An integer literal, a bucketed pair written by us, or None (an expression: "as written")."""
    if isinstance(node, cst.IfExp) and isinstance(node.test, cst.Comparison) and len(node.test.comparisons) == 1:
        cmp = node.test.comparisons[0]
        a, b = _int(node.body), _int(node.orelse)
        if isinstance(cmp.operator, cst.LessThanEqual) and _int(cmp.comparator) == BUCKET and a is not None \
                and b is not None:
            return (a, b)
    return _int(node)


def _bucket_of(node: cst.IfExp) -> str:
    return _code(node.test.left)  # type: ignore[attr-defined]


def _expr(value: Value, bucket: str | None) -> cst.BaseExpression:
    if isinstance(value, tuple):
        return cst.parse_expression(f"({value[0]} if {bucket} <= {BUCKET} else {value[1]})")
    return cst.Integer(str(value))


class _Rows(cst.CSTVisitor):
    """Per function, the row count its first launch's grid is built on (first grid element, ``cdiv`` unwrapped,
    a grid variable resolved through its assignment), or nothing when the grid is not that simple."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.grids: dict[str, dict[str, cst.BaseExpression]] = {}
        self.rows: dict[str, str] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.append(".".join([*self.scope[-1:], node.name.value]) if self.scope else node.name.value)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.scope and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self.grids.setdefault(self.scope[-1], {})[node.targets[0].target.value] = node.value

    def visit_Call(self, node: cst.Call) -> None:
        if not self.scope or not isinstance(node.func, cst.Subscript) or self.scope[-1] in self.rows:
            return
        grid = node.func.slice[0].slice
        if not isinstance(grid, cst.Index):
            return
        expr = grid.value
        if isinstance(expr, cst.Name):
            expr = self.grids.get(self.scope[-1], {}).get(expr.value, expr)
        if not isinstance(expr, cst.Tuple) or not expr.elements:
            return
        first = expr.elements[0].value
        if isinstance(first, cst.Call) and _callee(first) in ("triton.cdiv", "cdiv") and first.args:
            first = first.args[0].value
        if isinstance(first, (cst.Name, cst.Attribute, cst.Subscript)) and "META" not in _code(first):
            self.rows[self.scope[-1]] = _code(first)


def _callee(node: cst.Call) -> str:
    f = node.func
    parts = []
    while isinstance(f, cst.Attribute):
        parts.append(f.attr.value)
        f = f.value
    if isinstance(f, cst.Name):
        parts.append(f.value)
    return ".".join(reversed(parts))


class _Walker(cst.CSTTransformer):
    """Enumerates knobs in a fixed order; with ``values`` set, rewrites the chosen ones on the way back up."""

    def __init__(self, rows: dict[str, str], values: dict[str, Value] | None = None) -> None:
        self.values = values or {}
        self.rows = rows
        self.knobs: list[Knob] = []
        self.scope: list[str] = []
        self.jit_depth = 0
        self.autotuned: set[str] = set()
        self.config_depth = 0

    def _knob(self, where: str, name: str, value: Value, domain: tuple[int | None, ...],
              bucket: str | None = None) -> str:
        kid = f"k{len(self.knobs)}"
        self.knobs.append(Knob(kid, where, name, value, domain, bucket))
        return kid

    def _bucket(self, node: cst.BaseExpression | None = None) -> str | None:
        """The row-count expression of this launcher (kept from an existing pair when there is one)."""
        if isinstance(node, cst.IfExp) and isinstance(_value(node), tuple):
            return _bucket_of(node)
        return self.rows.get(".".join(self.scope)) if self.scope and not self.jit_depth else None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.append(node.name.value)
        decorators = [cst.Module([]).code_for_node(d.decorator) for d in node.decorators]
        self.jit_depth += any("jit" in d for d in decorators)
        if any("autotune" in d for d in decorators):
            self.autotuned.add(node.name.value)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.scope.pop()
        self.jit_depth -= any("jit" in cst.Module([]).code_for_node(d.decorator) for d in original.decorators)
        return updated

    def _fn(self) -> str:
        return ".".join(self.scope) or "<module>"

    def visit_Call(self, node: cst.Call) -> None:
        self.config_depth += _callee(node) in ("triton.Config", "Config")

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if _callee(original) in ("triton.Config", "Config"):
            self.config_depth -= 1
        if isinstance(original.func, cst.Subscript) and not self.jit_depth:
            kernel = cst.Module([]).code_for_node(original.func.value)
            # An autotuned kernel takes its launch config from the autotuner: tune its configs instead.
            return self._rewrite_kwargs(updated, f"launch of {kernel} in {self._fn()}()",
                                        add_missing=kernel not in self.autotuned, bucketed=True)
        if _callee(original) in ("triton.Config", "Config"):
            return self._rewrite_config(updated)
        return updated

    def _rewrite_kwargs(self, call: cst.Call, where: str, add_missing: bool, bucketed: bool = False) -> cst.Call:
        args = list(call.args)
        present = {a.keyword.value: i for i, a in enumerate(args) if a.keyword is not None}
        for i, a in enumerate(list(args)):
            if a.keyword is None:
                continue
            name, value = a.keyword.value, _value(a.value)
            bucket = self._bucket(a.value) if bucketed else None
            base = value[0] if isinstance(value, tuple) else value
            if name in _LAUNCH_KW:
                kid = self._knob(where, name, value, _launch_domain(name, base), bucket)
            elif _is_tile(name) and base is not None and _pow2(base):
                kid = self._knob(where, name, value, _tile_domain(base), bucket)
            else:
                continue
            if self.values.get(kid) is not None:
                args[i] = a.with_changes(value=_expr(self.values[kid], bucket))
        if add_missing and not any(a.star == "**" for a in args):  # **config may already carry them
            for name in _LAUNCH_KW:
                if name in present:
                    continue
                bucket = self._bucket() if bucketed else None
                kid = self._knob(where, name, None, _launch_domain(name, None), bucket)
                if self.values.get(kid) is not None:
                    new = cst.Arg(keyword=cst.Name(name), value=_expr(self.values[kid], bucket),
                                  equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
                    if len(args) > 1 and isinstance(args[-1].comma, cst.Comma) and isinstance(
                            args[-1].comma.whitespace_after, cst.ParenthesizedWhitespace):
                        # one argument a line, with a trailing comma: the new one goes on a line of its own
                        new = new.with_changes(comma=args[-1].comma)
                        args[-1] = args[-1].with_changes(comma=args[-2].comma)
                    elif args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
                        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                    args.append(new)
        return call.with_changes(args=args)

    def _rewrite_config(self, call: cst.Call) -> cst.Call:
        where = f"autotune config {sum(1 for k in self.knobs if k.name == '#config')} in {self._fn()}"
        self._knob(where, "#config", None, ())  # a marker numbering the configs; never chosen
        args = list(call.args)
        if args and args[0].keyword is None and isinstance(args[0].value, cst.Dict):
            elements = list(args[0].value.elements)
            for j, el in enumerate(elements):
                if not isinstance(el, cst.DictElement) or not isinstance(el.key, cst.SimpleString):
                    continue
                name, value = el.key.evaluated_value, _int(el.value)
                if isinstance(name, str) and _is_tile(name) and value is not None and _pow2(value):
                    kid = self._knob(where, name, value, _tile_domain(value))
                    if self.values.get(kid) is not None:
                        elements[j] = el.with_changes(value=cst.Integer(str(self.values[kid])))
            args[0] = args[0].with_changes(value=args[0].value.with_changes(elements=elements))
        return self._rewrite_kwargs(call.with_changes(args=args), where, add_missing=False)

    def leave_Dict(self, original: cst.Dict, updated: cst.Dict) -> cst.Dict:
        """``config = {"num_warps": ...}`` in a launcher, later passed as ``**config``."""
        if self.jit_depth or self.config_depth or not self.scope:
            return updated
        elements = list(updated.elements)
        for j, el in enumerate(elements):
            if not isinstance(el, cst.DictElement) or not isinstance(el.key, cst.SimpleString):
                continue
            name = el.key.evaluated_value
            if name in _LAUNCH_KW:
                value, bucket = _value(el.value), self._bucket(el.value)
                base = value[0] if isinstance(value, tuple) else value
                kid = self._knob(f"{{...}} in {self._fn()}()", str(name), value, _launch_domain(str(name), base),
                                 bucket)
                if self.values.get(kid) is not None:
                    elements[j] = el.with_changes(value=_expr(self.values[kid], bucket))
        return updated.with_changes(elements=elements)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if self.jit_depth or not self.scope or len(original.targets) != 1:
            return updated
        target, value = original.targets[0].target, _value(original.value)
        base = value[0] if isinstance(value, tuple) else value
        if (isinstance(target, cst.Name) and any(w in target.value.upper() for w in _TILE_WORDS) and base is not None
                and _pow2(base)):
            bucket = self._bucket(original.value)
            kid = self._knob(f"{target.value} in {self._fn()}()", target.value, value, _tile_domain(base), bucket)
            if self.values.get(kid) is not None:
                return updated.with_changes(value=_expr(self.values[kid], bucket))
        return updated


def _parse_block(source: str) -> cst.Module:
    parts = split_evolve(source)
    if parts is None:
        raise ValueError("the program has no single EVOLVE-BLOCK")
    return cst.parse_module(parts[1])


def _walk(source: str, values: dict[str, Value] | None = None) -> tuple[_Walker, cst.Module]:
    module = _parse_block(source)
    rows = _Rows()
    module.visit(rows)
    w = _Walker(rows.rows, values)
    return w, module.visit(w)


def knobs(source: str) -> list[Knob]:
    """Every tunable knob of a candidate's EVOLVE-BLOCK, in source order."""
    return [k for k in _walk(source)[0].knobs if k.name != "#config"]


def set_knobs(source: str, values: dict[str, Value]) -> str:
    """The candidate with the chosen knobs set (None leaves a knob as written)."""
    return with_block(source, _walk(source, values)[1].code)


def describe(before: list[Knob], values: dict[str, Any]) -> str:
    by_id = {k.id: k for k in before}
    return "; ".join(f"{by_id[k].where}: {by_id[k].name} {by_id[k].value if by_id[k].value is not None else 'as written'}"
                     f" -> {v}" for k, v in sorted(values.items()) if k in by_id and v != by_id[k].value)
