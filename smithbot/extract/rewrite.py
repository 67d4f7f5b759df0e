"""Rewrites of the target's source for a task, and what the closure works out at extraction instead of at import.

- libcst rewrites of a definition: tl aliases to qualified calls, branches a stub decides pruned, environment reads
  pinned to their defaults, function-local imports the task may not make dropped;
- folds of module-level values: stubbed helpers' results and release-number version checks (the constants that plain
  helpers compute at import are ``constants.py``'s);
- ``global`` probes cached between calls, asked on each call instead.

What a task holds in place of what it may not import is ``stand_ins.py``'s; re-emitting a rewritten definition with
its other lines kept byte for byte is ``splice.py``'s.
"""

from __future__ import annotations

import ast
import copy
import re
from typing import Any, Callable

import libcst as cst
import libcst.helpers

from smithbot.extract.stand_ins import stub_value


class Renamer(cst.CSTTransformer):
    """Rewrites tl aliases (``exp`` -> ``tl.exp``) in a definition's source."""

    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        target = self.aliases.get(original.value)
        return cst.parse_expression(target) if target else updated

    # Names that are not reads of the alias keep their spelling: attributes, keywords, parameters, definitions.
    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
        return updated.with_changes(name=original.name)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        return updated.with_changes(name=original.name)


class Pruner(cst.CSTTransformer):
    """Keeps only the branch a test takes where its value is known: a stubbed dispatch test (``if is_hip(): ...``
    with is_hip stubbed to False), or a test in ``decided`` (its source, as ``ast.unparse`` writes it)."""

    def __init__(self, values: dict[str, Any], decided: dict[str, bool] | None = None) -> None:
        self.values = values
        self.decided = decided or {}
        self._elif: set[int] = set()

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self._elif.add(id(node.orelse))

    def _eval(self, test: cst.BaseExpression) -> bool | None:
        if self.decided:
            text = ast.unparse(ast.parse(cst.Module([]).code_for_node(test).strip(), mode="eval"))
            if text in self.decided:
                return self.decided[text]
        if isinstance(test, cst.Name) and test.value in self.values:
            return bool(self.values[test.value])
        if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value in self.values \
                and not test.args:
            return bool(self.values[test.func.value])
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._eval(test.expression)
            return None if inner is None else not inner
        return None

    def leave_If(self, original: cst.If, updated: cst.If) -> Any:
        taken = self._eval(updated.test)
        if taken is None:
            return updated
        if id(original) in self._elif:  # an elif: it can only become an else, another elif, or nothing
            if taken:
                return cst.Else(body=updated.body)
            return updated.orelse if updated.orelse is not None else cst.RemoveFromParent()
        if taken:
            return cst.FlattenSentinel(updated.body.body)
        if updated.orelse is None:
            return cst.RemoveFromParent()
        if isinstance(updated.orelse, cst.If):
            return updated.orelse
        return cst.FlattenSentinel(updated.orelse.body.body)


class EnvPinner(cst.CSTTransformer):
    """``os.getenv(k, d)`` and ``os.environ.get(k, d)`` -> ``d`` (``None`` without one), the value a clean
    environment gives."""

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        name = cst.helpers.get_full_name_for_node(updated.func) or ""
        if name not in ("os.getenv", "os.environ.get") or not updated.args:
            return updated
        default = updated.args[1].value if len(updated.args) > 1 else next(
            (a.value for a in updated.args if a.keyword and a.keyword.value == "default"), cst.Name("None"))
        return default


def env_pinned(expr: ast.expr) -> ast.expr:
    """``expr`` with environment reads replaced by their defaults, as ``EnvPinner`` leaves them in the task."""

    class Pin(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if ast.unparse(node.func) in ("os.getenv", "os.environ.get") and len(node.args) == 2:
                return node.args[1]
            return self.generic_visit(node)

    return Pin().visit(copy.deepcopy(expr))


class LocalImportDropper(cst.CSTTransformer):
    """Replaces the import statements that bind any of ``names`` with ``pass`` (a block never becomes empty)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        def binds(stmt: cst.BaseSmallStatement) -> bool:
            if not isinstance(stmt, (cst.Import, cst.ImportFrom)) or isinstance(stmt.names, cst.ImportStar):
                return False
            bound = {(cst.helpers.get_full_name_for_node(a.asname.name if a.asname else a.name) or "").split(".")[0]
                     for a in stmt.names}
            return bool(bound & self.names)

        if any(binds(s) for s in updated.body):
            return updated.with_changes(body=[cst.Pass()])
        return updated


class TypeCheckDropper(cst.CSTTransformer):
    """Replaces ``assert isinstance(x, C)`` with ``pass`` where every class it names is one of ``names`` (bound by a
    function-local import of the engine's own module): the task's inputs stand in for the engine's objects, and the
    check would pull the class's whole module into the task (sglang's ``SWAKVPool``, for one branch's assert)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.dropped = False

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        def checks(stmt: cst.BaseSmallStatement) -> bool:
            test = stmt.test if isinstance(stmt, cst.Assert) else None
            if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance"
                    and len(test.args) == 2):
                return False
            cls = test.args[1].value
            names = [e.value for e in cls.elements] if isinstance(cls, cst.Tuple) else [cls]
            return all(isinstance(n, cst.Name) and n.value in self.names for n in names)

        if len(updated.body) == 1 and checks(updated.body[0]):
            self.dropped = True
            return updated.with_changes(body=[cst.Pass()])
        return updated


def calls_stub(expr: ast.expr, stubs: dict[str, Any]) -> bool:
    return any(_stub_call(n, stubs) for n in ast.walk(expr))


def _stub_call(n: ast.AST, stubs: dict[str, Any]) -> bool:
    """A call of a stubbed helper with literal arguments only (``get_bool_env_var("X")``, a ``torch.cuda`` query
    the target stubs: ``torch.cuda.get_device_capability()``, or a method of a stubbed object:
    ``current_platform.is_rocm()``): its value is the stub's."""
    return isinstance(n, ast.Call) and _stubbed(n.func, stubs) is not _NO_STUB and all(
        isinstance(a, ast.Constant) for a in [*n.args, *(k.value for k in n.keywords)])


_NO_STUB = object()


def _stubbed(func: ast.expr, stubs: dict[str, Any]) -> Any:
    """The stub's value for a call of ``func``, or ``_NO_STUB``."""
    if isinstance(func, ast.Name):
        return stubs.get(func.id, _NO_STUB)
    if isinstance(func, ast.Attribute) and ast.unparse(func.value) == "torch.cuda":
        return stubs.get(func.attr, _NO_STUB)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        obj = stubs.get(func.value.id)
        if isinstance(obj, dict) and set(obj) == {"methods"}:
            return obj["methods"].get(func.attr, _NO_STUB)
    return _NO_STUB


def fold_stubs(expr: ast.expr, stubs: dict[str, Any]) -> ast.expr:
    """``expr`` with each argument-less call of a stubbed helper replaced by the stub's value, and a conditional
    expression that this decides replaced by its branch."""

    class Fold(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if _stub_call(node, stubs):
                value = _stubbed(node.func, stubs)
                if isinstance(value, dict) and set(value) == {"source"}:
                    return ast.parse(stub_value(value), mode="eval").body
                return ast.Constant(tuple(value) if isinstance(value, list) else value)
            return self.generic_visit(node)

        def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:  # False and x -> False; True or x -> True
            self.generic_visit(node)
            first = node.values[0]
            if isinstance(first, ast.Constant) and bool(first.value) == isinstance(node.op, ast.Or):
                return first
            return node

        def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
            self.generic_visit(node)
            test = node.test
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
                    and isinstance(test.operand, ast.Constant):
                test = ast.Constant(not test.operand.value)
            if isinstance(test, ast.Constant):
                return node.body if test.value else node.orelse
            return node

    return Fold().visit(expr)


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in text.split("+")[0].split(".")[:3])


def fold_versions(expr: ast.expr, parse: set[str]) -> ast.expr:
    """``version.parse("3.2.0")`` -> ``(3, 2, 0)``; ``version.parse(triton.__version__)`` -> the installed triton's."""
    import triton

    class Fold(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if ast.unparse(node.func) in parse and len(node.args) == 1 and not node.keywords:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    return ast.Constant(_release(arg.value))
                if ast.unparse(arg) == "triton.__version__":
                    return ast.Constant(_release(triton.__version__))
            return self.generic_visit(node)

    return Fold().visit(expr)


def version_test(test: ast.expr) -> bool | None:
    """Whether a module-level ``if`` on the installed triton's version holds here (``version.parse(
    triton.__version__) <= version.parse("2.2.0")``, ``triton.__version__ >= "3.0.0"``); None for any other test."""
    import triton

    if "__version__" not in ast.unparse(test):
        return None

    class Fold(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if re.search(r"(parse|Version)$", ast.unparse(node.func)) and len(node.args) == 1 \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                return ast.Constant(_release(node.args[0].value))
            return node

        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            if ast.unparse(node) == "triton.__version__":
                return ast.Constant(triton.__version__)
            return self.generic_visit(node)

    folded = Fold().visit(copy.deepcopy(test))
    if not all(isinstance(n, (ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.cmpop, ast.boolop, ast.unaryop,
                              ast.Tuple, ast.Load)) for n in ast.walk(folded)):
        return None
    try:
        return bool(eval(compile(ast.fix_missing_locations(ast.Expression(folded)), "<version>", "eval"),
                         {"__builtins__": {}}))
    except TypeError:  # a tuple against a string: not a comparison this reads
        return None


def without_lazy_globals(fn: ast.FunctionDef) -> ast.FunctionDef:
    """``global cap`` / ``if cap is None: cap = probe()`` caches a probe's answer between calls; the task asks each
    call (the evaluator allows no state between calls). Other ``global`` uses stay, for the guard to report."""
    lazy: set[str] = set()

    class Strip(ast.NodeTransformer):
        def visit_If(self, node: ast.If) -> Any:
            t = node.test
            if isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and isinstance(t.ops[0], ast.Is) \
                    and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value is None \
                    and not node.orelse and t.left.id in declared:
                lazy.add(t.left.id)
                return node.body
            return self.generic_visit(node)

        def visit_Global(self, node: ast.Global) -> Any:
            return node

    declared = {g for n in ast.walk(fn) if isinstance(n, ast.Global) for g in n.names}
    fn = Strip().visit(fn)

    class Drop(ast.NodeTransformer):
        def visit_Global(self, node: ast.Global) -> Any:
            names = [g for g in node.names if g not in lazy]
            return ast.Global(names) if names else None

    return ast.fix_missing_locations(Drop().visit(fn))


def is_kernel(node: ast.FunctionDef) -> bool:
    return any(re.search(r"\b(jit|autotune|heuristics)\b", ast.unparse(d)) for d in node.decorator_list)


def only_called(tree: ast.Module, name: str, on_branches: bool = False) -> bool:
    """Whether every use of ``name`` in the module is a call inside a function body (``f(x)``, ``ext.f(x)``, a launch
    ``k[grid](x)``), and, with ``on_branches``, inside an ``if`` or an ``except`` there, so not on every path."""
    called: set[int] = set()
    inside: set[int] = set()
    branched: set[int] = set()
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func.value if isinstance(node.func, (ast.Attribute, ast.Subscript)) else node.func
            called.add(id(f))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
        if isinstance(node, (ast.If, ast.IfExp, ast.ExceptHandler)):
            parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else [*node.body,
                                                                                  *getattr(node, "orelse", [])]
            branched.update(id(n) for part in parts for n in ast.walk(part))
        if isinstance(node, ast.Name) and node.id == name:
            uses.append(node)
    return bool(uses) and all(id(u) in called and id(u) in inside and (id(u) in branched or not on_branches)
                              for u in uses)


def for_the_task(node: ast.AST, tl_has: Callable[[str, str], bool]) -> ast.AST | None:
    """``node`` with what the task must spell otherwise, on its syntax tree (None if nothing was): ``x.device.type
    == "cuda"`` (or ``device.type == "cuda"`` after ``device = x.device``) as ``x.is_cuda`` (the interpreter's
    stand-in answers that), and ``tl.math.round``, which older triton's ``tl.math`` held and the installed one
    (``tl_has(module, name)``) keeps only in libdevice, as ``tl.extra.cuda.libdevice.round``; and an autotune
    ``key`` without the names that are not the kernel's parameters (older triton skipped them; newer refuses
    them)."""

    class Spell(ast.NodeTransformer):
        changed = False
        devices: dict[str, ast.expr] = {}  # `device = x.device` in the function being visited: device -> x

        def visit_FunctionDef(self, n: ast.FunctionDef) -> ast.AST:
            outer = self.devices
            self.devices = {**outer, **{
                s.targets[0].id: s.value.value for s in ast.walk(n) if isinstance(s, ast.Assign)
                and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                and isinstance(s.value, ast.Attribute) and s.value.attr == "device"}}
            self.generic_visit(n)
            self.devices = outer
            params = {a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs}
            for d in n.decorator_list:
                key = next((k for k in getattr(d, "keywords", ()) if k.arg == "key"), None)
                if not (isinstance(d, ast.Call) and ast.unparse(d.func).split(".")[-1] == "autotune" and key
                        and isinstance(key.value, (ast.List, ast.Tuple))):
                    continue
                kept = [e for e in key.value.elts if not (isinstance(e, ast.Constant) and e.value not in params)]
                if len(kept) < len(key.value.elts):
                    key.value.elts, self.changed = kept, True
            return n

        def visit_Compare(self, n: ast.Compare) -> ast.AST:
            self.generic_visit(n)
            left, ops, right = n.left, n.ops, n.comparators
            if not (len(ops) == 1 and isinstance(ops[0], (ast.Eq, ast.NotEq)) and isinstance(left, ast.Attribute)
                    and left.attr == "type" and isinstance(right[0], ast.Constant) and right[0].value == "cuda"):
                return n
            if isinstance(left.value, ast.Attribute) and left.value.attr == "device":
                tensor = left.value.value
            elif isinstance(left.value, ast.Name) and left.value.id in self.devices:  # `device = x.device` earlier
                tensor = copy.deepcopy(self.devices[left.value.id])
            else:
                return n
            self.changed = True
            is_cuda = ast.Attribute(value=tensor, attr="is_cuda", ctx=ast.Load())
            return ast.copy_location(is_cuda if isinstance(ops[0], ast.Eq) else ast.UnaryOp(ast.Not(), is_cuda), n)

        def visit_Attribute(self, n: ast.Attribute) -> ast.AST:
            self.generic_visit(n)
            if ast.unparse(n.value) != "tl.math" or tl_has("math", n.attr) or not tl_has("extra.cuda.libdevice",
                                                                                         n.attr):
                return n
            self.changed = True
            return ast.copy_location(ast.parse(f"tl.extra.cuda.libdevice.{n.attr}", mode="eval").body, n)

    spell = Spell()
    out = spell.visit(copy.deepcopy(node))
    return ast.fix_missing_locations(out) if spell.changed else None


def unrolled(expr: ast.expr) -> ast.expr:
    """``expr`` with each list comprehension over literal lists written out as a tuple of its items
    (``[triton.Config({"BLOCK_M": m}, num_warps=w) for m in [16, 32] for w in [2, 4]]``: four configs), so that
    a decorator called at module level builds no list; a comprehension over anything else is left as it is."""

    class Unroll(ast.NodeTransformer):
        def visit_ListComp(self, node: ast.ListComp) -> ast.AST:
            self.generic_visit(node)
            loops: list[tuple[str, list[ast.expr]]] = []
            for g in node.generators:
                if g.ifs or g.is_async or not isinstance(g.target, ast.Name) or not isinstance(
                        g.iter, (ast.List, ast.Tuple)) or not all(isinstance(e, ast.Constant) for e in g.iter.elts):
                    return node
                loops.append((g.target.id, g.iter.elts))
            items: list[ast.expr] = []

            def each(depth: int, bound: dict[str, ast.expr]) -> None:
                if depth == len(loops):
                    class Bind(ast.NodeTransformer):
                        def visit_Name(self, n: ast.Name) -> ast.AST:
                            return bound.get(n.id, n)
                    items.append(Bind().visit(copy.deepcopy(node.elt)))
                    return
                name, values = loops[depth]
                for v in values:
                    each(depth + 1, {**bound, name: v})

            each(0, {})
            return ast.Tuple(items, ast.Load())

    return ast.fix_missing_locations(Unroll().visit(copy.deepcopy(expr)))
