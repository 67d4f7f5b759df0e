"""Torch glue (a ``kind: fusion`` site of ``smithbot scan``) as a function of its inputs: the first step of a fusion
task, whose baseline is the glue itself (DESIGN.md, "The task").

The glue is a run of statements inside an engine's function. As a function:
- its **parameters** are what the run reads and did not make: plain names bound before it (``seq_lens``), and
  attribute chains of objects (``forward_batch.req_to_token_pool.req_to_token`` becomes ``req_to_token``). A chain
  ends at a tensor's own attribute (``x.shape``, ``x.device``) or a method call (``x.cumsum(0)``): what comes before
  is the value. Module-level names (``torch``, the module's helpers and constants) and builtins are not parameters;
- its **outputs** are what later code can see: attributes the run stores on an object (``metadata.cu_seqlens_k =
  ...``), then names the run binds that the function reads after the run (or, for a run that ends its function with
  ``return``, the returned value), returned in that order; and the parameters it writes in place (``out[i] = v``,
  ``out.copy_(v)``, ``x += 1``), which the evaluator compares as written-in-place inputs. A parameter the run rebinds
  (``x = x.view(...)``) is the input before that and a local after, as in Python.

Glue whose outputs cannot be determined is refused with the reason (:class:`GlueError`), never turned into a function
that computes something else: a run that nothing after it reads and that writes nothing, one that stores into
something other than a name, an attribute or an item, or one with a statement other than an assignment, an
expression, an ``assert``, an ``if`` of those (kept whole: the branch the defaults do not take stays correct) or a
final ``return``.

An ``if`` inside the run whose test serving decides (``folds``: the test's source -> the branch taken, from the scan)
is the branch taken, when its test reads nothing the run made before it: the function is the glue as default serving
runs it (FA3's context-parallel padding, off at one GPU). A proposal then keeps the engine's lines for the other
branch (``propose/reinsert.py``).
"""

from __future__ import annotations

import ast
import builtins
import copy
from dataclasses import dataclass
from typing import Any

from smithbot.errors import SmithbotError
from smithbot.inputs.names import TENSOR_ATTRS


class GlueError(SmithbotError):
    """The glue cannot become a function whose outputs are known; the message says why."""


@dataclass(frozen=True)
class GlueFunction:
    name: str
    source: str  # the function's definition
    params: tuple[str, ...]
    origins: dict[str, str]  # parameter -> what it stands for in the engine (``forward_batch.seq_lens``)
    outputs: tuple[str, ...]  # returned, in order; ``metadata.cu_seqlens_k`` for a stored attribute
    inplace: tuple[str, ...]  # parameters written in place
    folded: tuple[tuple[str, bool], ...] = ()  # the if-tests taken as serving decides them: (source, branch taken)
    gathered: tuple[str, ...] = ()  # parameters read only through a tensor index: rows of a table, not all of it


def served_tests(folded: Any, pinned: dict[str, Any] | None, origins: dict[str, str]) -> list[tuple[str, bool]]:
    """The tests under which a fused kernel stands in for the glue: the folded if-tests as serving takes them, and
    each input the task pinned to the constant serving makes of it, equal to that constant (``self.dim == -1``): the
    kernel was verified at that value only, and a generated one may bake it in."""
    return [*(tuple(f) for f in folded or ()), *((f"{origins[p]} == {v!r}", True) for p, v in (pinned or {}).items())]


def served_condition(folded: tuple[tuple[str, bool], ...] | list[list[Any]]) -> str:
    """Where the glue runs as serving decides it: each folded test as it is taken, one not taken negated the way a
    person writes it (``not (a and b > 1)`` is ``not a or b <= 1``)."""
    parts = [ast.parse(t, mode="eval").body for t, _ in folded]
    taken = [p if b else _negated(p) for p, (_, b) in zip(parts, folded)]
    flat = [v for t in taken for v in (t.values if isinstance(t, ast.BoolOp) and isinstance(t.op, ast.And) else [t])]
    return " and ".join(operand(v) for v in flat) if len(flat) > 1 else _source_of(flat[0])


def operand(node: ast.expr) -> str:
    """An operand of ``and``/``or`` as source: in parentheses only where it binds looser (another ``and``/``or``, a
    conditional expression, a lambda, a walrus)."""
    text = _source_of(node)
    return f"({text})" if isinstance(node, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr)) else text


def _source_of(node: ast.expr) -> str:
    if isinstance(node, ast.BoolOp):
        return f" {'and' if isinstance(node.op, ast.And) else 'or'} ".join(operand(v) for v in node.values)
    return ast.unparse(node)


_FLIPPED = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
            ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


def _negated(node: ast.expr) -> ast.expr:
    """``not node``, by De Morgan's laws down to its comparisons: ``not (x is not None)`` is ``x is None``."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return node.operand
    if isinstance(node, ast.BoolOp):
        return ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), [_negated(v) for v in node.values])
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return ast.Compare(node.left, [_FLIPPED[type(node.ops[0])]()], node.comparators)
    return ast.UnaryOp(ast.Not(), node)


def _chain(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"] when ``node`` is attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _value_chain(parts: list[str], called: bool) -> list[str]:
    """The part of a chain that names a value: without a method that is called, and before a tensor's attribute."""
    if called and len(parts) > 1:
        parts = parts[:-1]
    for i, p in enumerate(parts[1:], 1):
        if p in TENSOR_ATTRS:
            return parts[:i]
    return parts


def _module_names(tree: ast.Module) -> set[str]:
    names = set(dir(builtins))
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try)):  # guarded imports and constants
            names.update(_module_names(ast.Module(body=[*ast.iter_child_nodes(node)], type_ignores=[]))
                         - set(dir(builtins)))
    return names


def _function(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    body: list[ast.stmt] = tree.body
    found: ast.AST | None = None
    for part in qualname.split("."):
        found = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if found is None:
            raise GlueError(f"no function {qualname} in the file")
        body = found.body
    if not isinstance(found, ast.FunctionDef):
        raise GlueError(f"{qualname} is not a function")
    return found


def _span(fn: ast.FunctionDef, first: int, last: int) -> list[ast.stmt]:
    """The statements of one block of ``fn`` that lie within lines ``first``..``last``."""
    blocks = [getattr(n, f) for n in ast.walk(fn) for f in ("body", "orelse", "finalbody")
              if isinstance(getattr(n, f, None), list)]
    for block in blocks:
        inside = [s for s in block if s.lineno >= first and (s.end_lineno or s.lineno) <= last]
        if inside and inside[0].lineno == first:
            return inside
    raise GlueError(f"lines {first}-{last} are not a run of statements of {fn.name}")


def glue_function(tree: ast.Module, qualname: str, first: int, last: int, name: str,
                  folds: dict[str, bool] | None = None) -> GlueFunction:
    """The run of statements at lines ``first``..``last`` of function ``qualname`` in ``tree``, as function ``name``;
    ``folds``: the if-tests serving decides, by source, each with the branch it takes."""
    original = _function(tree, qualname)
    after = {n.id for n in ast.walk(original) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
             and n.lineno > last}  # names the function reads after the run
    span = _span(copy.deepcopy(original), first, last)  # (the rewrite edits the run's statements)
    run = _RunRewrite(_module_names(tree), folds or {})
    body = [ast.copy_location(new, stmt) for stmt in span for new in run.statement(stmt, stmt is span[-1])]
    live = [n for n in sorted(run.locals - set(run.stored.values()), key=lambda n: _first_store(span, n)) if n in after]
    if run.returned_value is not None:  # the run ends its function: what it returns is all that later code sees
        live = ["return"]
    returned: list[ast.expr] = [ast.Name(run.stored[d], ast.Load()) for d in run.outputs] + [
        run.returned_value if n == "return" and run.returned_value is not None else ast.Name(n, ast.Load())
        for n in live]
    if not returned and not run.inplace:
        raise GlueError("nothing after the run reads what it computes, and it writes no input: its outputs are unknown")
    if returned:
        body.append(ast.Return(returned[0] if len(returned) == 1 else ast.Tuple(returned, ast.Load())))
    args = ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in run.params], kwonlyargs=[], kw_defaults=[],
                         defaults=[])
    definition = ast.FunctionDef(name=name, args=args, body=body, decorator_list=[], returns=None)
    definition.type_params = []  # Python 3.12's field: unparse reads it
    source = ast.unparse(ast.fix_missing_locations(ast.Module([definition], []))) + "\n"
    return GlueFunction(name, source, tuple(run.params), dict(run.params), tuple(run.outputs) + tuple(live),
                        tuple(run.inplace), tuple(run.folded), _gathered(definition, tuple(run.params)))


def _gathered(fn: ast.FunctionDef, params: tuple[str, ...]) -> tuple[str, ...]:
    """The parameters the function reads only as ``p[index, ...]`` with a tensor among the indices (a name, not a
    constant nor a slice): a gather reads the rows the index picks, not the table (``req_to_token[req_pool_indices,
    :max_k]``)."""
    def gathers(sub: ast.Subscript) -> bool:
        parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        return any(isinstance(e, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)) for e in parts)

    reads: dict[str, list[bool]] = {}
    parents = {id(c): n for n in ast.walk(fn) for c in ast.iter_child_nodes(n)}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id in params and isinstance(n.ctx, ast.Load):
            up = parents.get(id(n))
            reads.setdefault(n.id, []).append(isinstance(up, ast.Subscript) and up.value is n and gathers(up))
    return tuple(p for p in params if reads.get(p) and all(reads[p]))


class _RunRewrite:
    """The statements of a run of glue rewritten over parameters, one at a time, and what the rewrite has learnt:
    the names the run has bound (``locals``), the dotted chains it stores and the locals that hold them
    (``stored``, ``outputs`` in order), each parameter and the chain it stands for (``params``), the inputs it
    writes in place (``inplace``), what the engine's function returns when the run ends it, and the if-tests it
    took as serving decides them (``folded``)."""

    def __init__(self, module: set[str], folds: dict[str, bool]) -> None:
        self.module = module  # the module's own names: no parameters
        self.folds = folds
        self.folded: list[tuple[str, bool]] = []
        self.locals: set[str] = set()
        self.stored: dict[str, str] = {}
        self.params: dict[str, str] = {}  # parameter -> dotted origin
        self.by_origin: dict[str, str] = {}
        self.inplace: list[str] = []
        self.outputs: list[str] = []  # dotted chains stored, in order; live-out names are added after
        self.returned_value: ast.expr | None = None

    def param_for(self, parts: list[str]) -> str | None:
        """The parameter (made on first sight) for a value read by the run, or None for a module name or a local."""
        dotted = ".".join(parts)
        if dotted in self.stored:
            return self.stored[dotted]
        if parts[0] in self.locals or parts[0] in self.module:
            return None
        if dotted not in self.by_origin:
            want = parts[-1]
            p = want if want not in self.params and want not in self.locals else "_".join(parts)
            while p in self.params or p in self.module:
                p += "_"
            self.params[p], self.by_origin[dotted] = dotted, p
        return self.by_origin[dotted]

    def reads(self, node: ast.expr, within: ast.AST | None = None) -> ast.expr:
        """``node`` with the reads of parameters' chains as the parameter's name (the calls of ``within``, the
        statement it is part of, tell a method's receiver from a value)."""
        called = {id(n.func) for n in ast.walk(within or node) if isinstance(n, ast.Call)}
        return _Reads(self, called).visit(node)

    def target(self, t: ast.expr, stmt: ast.stmt) -> ast.expr:
        """A store's target, rewritten; records locals, stored attributes and in-place writes."""
        if isinstance(t, ast.Name):  # an input rebound (`x = x.view(...)`) is a local from here on, as in Python
            self.locals.add(t.id)
            return t
        if isinstance(t, (ast.Tuple, ast.List)):
            return type(t)([self.target(e, stmt) for e in t.elts], ast.Store())
        if isinstance(t, ast.Starred):
            return ast.Starred(self.target(t.value, stmt), ast.Store())
        parts = _chain(t) if isinstance(t, ast.Attribute) else None
        if parts is not None and parts[0] not in self.module:
            dotted = ".".join(parts)
            if dotted not in self.stored:
                local = parts[-1] if parts[-1] not in self.params and parts[-1] not in self.locals else "_".join(parts)
                self.stored[dotted] = local
                self.outputs.append(dotted)
                self.locals.add(local)
            return ast.copy_location(ast.Name(self.stored[dotted], ast.Store()), t)
        if isinstance(t, ast.Subscript):
            base = _Reads(self, set()).visit(t.value)
            if isinstance(base, ast.Name) and base.id in self.params and base.id not in self.inplace:
                self.inplace.append(base.id)
            return ast.copy_location(ast.Subscript(base, _Reads(self, set()).visit(t.slice), ast.Store()), t)
        raise GlueError(f"line {stmt.lineno} stores into {ast.unparse(t)}, whose owner is not known")

    def statement(self, stmt: ast.stmt, last: bool) -> list[ast.stmt]:
        """A statement of the run, rewritten over the parameters: none for what it leaves out (the final ``return``,
        kept apart, and ``x = x``), the taken branch's for an ``if`` that serving decides."""
        if isinstance(stmt, ast.Assign):
            value = self.reads(stmt.value, stmt)
            targets = [self.target(t, stmt) for t in stmt.targets]
            if len(targets) == 1 and isinstance(value, ast.Name) and ast.unparse(targets[0]) == value.id:
                return []  # `x = step.x` became `x = x`: the parameter already is it
            return [ast.Assign(targets, value)]
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            value = self.reads(stmt.value, stmt)
            return [ast.Assign([self.target(stmt.target, stmt)], value)]
        if isinstance(stmt, ast.AugAssign):
            return [self._augmented(stmt)]
        if isinstance(stmt, ast.Expr):
            new = ast.Expr(self.reads(stmt.value, stmt))
            call = new.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr.endswith("_") \
                    and not call.func.attr.startswith("_") and isinstance(call.func.value, ast.Name) \
                    and call.func.value.id in self.params and call.func.value.id not in self.inplace:
                self.inplace.append(call.func.value.id)  # `out.copy_(v)`: written in place
            return [new]
        if isinstance(stmt, ast.Assert):  # the engine's own checks stay
            return [ast.Assert(self.reads(stmt.test, stmt),
                               self.reads(stmt.msg, stmt) if stmt.msg is not None else None)]
        if isinstance(stmt, ast.Return) and last and stmt.value is not None:
            self.returned_value = self.reads(stmt.value, stmt)  # what the engine's function returns: an output
            return []
        if isinstance(stmt, ast.If):
            source = ast.unparse(stmt.test)
            if source in self.folds and not self._made_here(stmt.test):
                # serving decides it: the branch it takes, and no parameter for what only the test reads
                self.folded.append((source, self.folds[source]))
                return [c for x in (stmt.body if self.folds[source] else stmt.orelse) for c in self.statement(x, False)]
            test = self.reads(stmt.test)  # kept whole, both branches: the test's inputs become parameters
            body = [c for x in stmt.body for c in self.statement(x, False)]
            orelse = [c for x in stmt.orelse for c in self.statement(x, False)]
            return [ast.If(test, body or [ast.Pass()], orelse)]
        raise GlueError(f"line {stmt.lineno}: a {type(stmt).__name__} statement in the run")

    def _made_here(self, test: ast.expr) -> bool:
        """Whether a test reads what the run bound or stored before it (then it is not the value serving decided
        before the run, and the test stays)."""
        for n in ast.walk(test):
            parts = _chain(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
            if parts and (parts[0] in self.locals or any(".".join(parts[:i]) in self.stored
                                                         for i in range(2, len(parts) + 1))):
                return True
        return False

    def _augmented(self, stmt: ast.AugAssign) -> ast.stmt:
        value = self.reads(stmt.value, stmt)
        t = stmt.target
        if isinstance(t, ast.Name) and t.id not in self.locals:
            p = self.param_for([t.id])
            if p is not None and p not in self.inplace:
                self.inplace.append(p)  # `x += v` on an input tensor writes it in place
            return ast.AugAssign(ast.Name(p or t.id, ast.Store()), stmt.op, value)
        return ast.AugAssign(self.target(t, stmt), stmt.op, value)


class _Reads(ast.NodeTransformer):
    """Reads of parameters' chains become the parameter's name (``step.seq_lens`` -> ``seq_lens``)."""

    def __init__(self, run: _RunRewrite, called: set[int]) -> None:
        self.run = run
        self.called = called

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        parts = _chain(node)
        if parts is None or not isinstance(node.ctx, ast.Load):
            return self.generic_visit(node)
        value = _value_chain(parts, id(node) in self.called)
        p = self.run.param_for(value) if len(value) > 1 else None
        if p is None:
            return self.generic_visit(node)
        out: ast.expr = ast.Name(p, ast.Load())
        for attr in parts[len(value):]:
            out = ast.Attribute(out, attr, ast.Load())
        return ast.copy_location(out, node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id not in self.run.locals and node.id not in self.run.module:
            self.run.param_for([node.id])
        return node


def _first_store(span: list[ast.stmt], name: str) -> tuple[int, int]:
    """Where the run first binds ``name``: line and column, so that names one statement binds (``w, ids = ...``)
    come in the order it binds them."""
    return min(((n.lineno, n.col_offset) for s in span for n in ast.walk(s) if isinstance(n, ast.Name)
                and n.id == name and isinstance(n.ctx, ast.Store)), default=(0, 0))
