"""What the closure works out at extraction instead of at import, without running target code: the value of a
module-level expression (``Constants``), settings reads folded to their declared defaults and the branches they
decide pruned, and ``**settings`` in a decorator written out."""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import math
from typing import Any


class NotConstant(Exception):
    pass


class Ref(str):
    """A helper's result that is an imported function: ``get_tl_exp()`` -> ``triton.language.math.exp``."""


class Constants:
    """The value of a module-level expression made only of literals, stubbed helpers, module constants and calls of
    plain helpers whose bodies are ifs and returns over the same: ``get_moe_padding_size(False)`` -> 0. Anything
    else is not a constant (no target code runs here)."""

    _CALLS = {"bool": bool, "int": int, "float": float, "str": str, "min": min, "max": max, "abs": abs}
    _STR_METHODS = {"lower", "upper", "strip", "split", "startswith", "endswith", "replace"}
    _MATH = {"log", "log2", "log10", "sqrt", "exp", "ceil", "floor", "gcd"}

    def __init__(self, builder: Any, mod: Any) -> None:
        self.builder, self.mod, self.stubs, self.depth = builder, mod, builder.stubs_values, 0

    def _top(self, name: str) -> tuple[Any, ast.stmt | None]:
        """(module, binding) of ``name`` as the module being read sees it: its own, or imported from the target."""
        if name in self.mod.top:
            return self.mod, self.mod.top[name]
        target = self.mod.imports.get(name, "")
        other = self.builder.module(target.rpartition(".")[0]) if target.split(".")[0] == self.builder.package \
            else None
        return (other, other.top.get(target.rpartition(".")[2])) if other is not None else (None, None)

    def _in(self, mod: Any, e: ast.expr, local: dict[str, Any] | None = None) -> Any:
        saved, self.mod = self.mod, mod
        try:
            return self.value(e, local)
        finally:
            self.mod = saved

    def value(self, e: ast.expr, local: dict[str, Any] | None = None) -> Any:
        local = local or {}
        self.depth += 1
        try:
            if self.depth > 50:
                raise NotConstant
            return self._value(e, local)
        finally:
            self.depth -= 1

    def _value(self, e: ast.expr, local: dict[str, Any]) -> Any:
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Attribute) and ast.unparse(e) == "triton.__version__":
            import triton

            return triton.__version__  # as the target compares it, against the triton installed here
        if isinstance(e, ast.Name):
            if e.id in local:
                return local[e.id]
            if e.id in self.stubs:
                return self.stubs[e.id]
            mod, top = self._top(e.id)
            if isinstance(top, ast.Assign) and len(top.targets) == 1:
                return self._in(mod, top.value)
            raise NotConstant
        if isinstance(e, ast.BoolOp):
            v = None
            for part in e.values:
                v = self.value(part, local)
                if bool(v) == isinstance(e.op, ast.Or):
                    return v
            return v
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.Not, ast.USub)):
            v = self.value(e.operand, local)
            return (not v) if isinstance(e.op, ast.Not) else -v
        if isinstance(e, ast.IfExp):
            return self.value(e.body if self.value(e.test, local) else e.orelse, local)
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Pow, ast.LShift)):
            raise NotConstant  # no arithmetic that can grow without bound
        if isinstance(e, (ast.BinOp, ast.Compare)):
            names = {f"_{i}": self.value(x, local) for i, x in enumerate(
                [e.left, e.right] if isinstance(e, ast.BinOp) else [e.left, *e.comparators])}
            shape = ast.BinOp(ast.Name("_0", ast.Load()), e.op, ast.Name("_1", ast.Load())) if isinstance(
                e, ast.BinOp) else ast.Compare(ast.Name("_0", ast.Load()), e.ops,
                                               [ast.Name(f"_{i + 1}", ast.Load()) for i in range(len(e.ops))])
            return eval(compile(ast.fix_missing_locations(ast.Expression(shape)), "<constant>", "eval"),
                        {"__builtins__": {}}, names)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and ast.unparse(e.func.value) == "math" \
                and e.func.attr in self._MATH and not e.keywords:  # LOG2 = math.log(2)
            return getattr(math, e.func.attr)(*[self.value(a, local) for a in e.args])
        if isinstance(e, ast.Attribute) and ast.unparse(e) in ("math.pi", "math.e", "math.inf"):
            return getattr(math, e.attr)
        if isinstance(e, ast.Call) and ast.unparse(e.func) in ("os.getenv", "os.environ.get") and len(e.args) == 2:
            return self.value(e.args[1], local)  # an environment read: its default, as the task pins it
        if setting_read(e) is not None:
            return self.setting(*setting_read(e))  # type: ignore[misc]
        if isinstance(e, (ast.List, ast.Tuple)):
            return tuple(self.value(x, local) for x in e.elts)
        if isinstance(e, ast.Dict) and all(k is not None for k in e.keys):
            return {self.value(k, local): self.value(v, local) for k, v in zip(e.keys, e.values)}  # type: ignore
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("hasattr", "dir") \
                and self._top(e.func.id)[1] is None and not e.keywords and e.args:
            # `hasattr(tl, "gather")`, `"nv_tma_desc_type" in dir(tl)`: asked of the installed triton, as at import
            probed = self._triton(e.args[0])
            if e.func.id == "dir" and len(e.args) == 1:
                return frozenset(dir(probed))
            if e.func.id == "hasattr" and len(e.args) == 2:
                return hasattr(probed, self.value(e.args[1], local))
        if isinstance(e, ast.Attribute) and e.attr == "parameters" and isinstance(e.value, ast.Call) \
                and len(e.value.args) == 1 and self._dotted(e.value.func) == "inspect.signature":
            return frozenset(inspect.signature(self._triton(e.value.args[0])).parameters)
        if isinstance(e, ast.Call):
            return self._call(e, local)
        raise NotConstant

    def _call(self, e: ast.Call, local: dict[str, Any]) -> Any:
        """A call's value: ``find_spec`` of a package every task has, ``float.fromhex``, a string's method, a stub's
        answer, a builtin's, or what a plain helper of the target computes; else NotConstant."""
        if len(e.args) == 1 and "importlib.util.find_spec" in (self._dotted(e.func),
                                                                self.mod.imports.get(self._dotted(e.func))):
            # `HAS_TRITON = find_spec("triton") is not None`: a task runs where torch and triton are installed
            package = self.value(e.args[0], local)
            if package in ("triton", "torch"):
                return Ref(f"importlib.util.find_spec({package!r})")
            raise NotConstant
        if ast.unparse(e.func) == "float.fromhex" and len(e.args) == 1 and not e.keywords:
            return float.fromhex(str(self.value(e.args[0], local)))  # _FP32_TINY = float.fromhex("0x1p-126")
        if isinstance(e.func, ast.Attribute) and e.func.attr in self._STR_METHODS and not e.keywords:
            held = self.value(e.func.value, local)  # os.getenv("X", "0").lower()
            if isinstance(held, str):
                return getattr(held, e.func.attr)(*[self.value(a, local) for a in e.args])
        if isinstance(e.func, ast.Name) and not e.keywords:
            args = [self.value(a, local) for a in e.args]
            if e.func.id in self.stubs:
                return self.stubs[e.func.id]
            if e.func.id in self._CALLS and self._top(e.func.id)[1] is None:
                return self._CALLS[e.func.id](*args)
            mod, fn = self._top(e.func.id)
            if isinstance(fn, ast.FunctionDef) and not fn.decorator_list and len(args) == len(fn.args.args) \
                    and not fn.args.vararg and not fn.args.kwarg:
                saved, self.mod = self.mod, mod
                try:
                    return self._run(fn.body, {a.arg: v for a, v in zip(fn.args.args, args)})
                finally:
                    self.mod = saved
        raise NotConstant

    def _dotted(self, e: ast.expr) -> str:
        """``tl.math.exp`` -> ``triton.language.math.exp``: a dotted name with its head as the module imports it."""
        dotted = ast.unparse(e)
        head = dotted.split(".")[0]
        return self.mod.imports.get(head, head) + dotted[len(head):]

    def _triton(self, e: ast.expr) -> Any:
        """The installed triton's object that ``e`` names (``tl``, ``triton.autotune``); else NotConstant."""
        dotted = self._dotted(e)
        if dotted.split(".")[0] != "triton":
            raise NotConstant
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            try:
                found = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for attr in parts[i:]:
                found = getattr(found, attr, NotConstant)
            if found is NotConstant:
                raise NotConstant
            return found
        raise NotConstant

    def setting(self, obj: str, attr: str) -> Any:
        """The default of ``obj.attr``, where ``obj = Settings()`` is a module-level instance and the class declares
        ``attr = EnvBool(False)`` or ``attr = Gated("attr", True)``: the value a clean environment gives, unless the
        target's stubs name ``attr`` (a setting whose default path needs an extension the task cannot have)."""
        if attr in self.stubs and not isinstance(self.stubs[attr], dict):
            return self.stubs[attr]
        mod, top = self._top(obj)
        if not (isinstance(top, ast.Assign) and isinstance(top.value, ast.Call) and isinstance(top.value.func, ast.Name)
                and not top.value.args and not top.value.keywords):
            raise NotConstant
        saved, self.mod = self.mod, mod
        try:
            _, cls = self._top(top.value.func.id)
        finally:
            self.mod = saved
        for stmt in cls.body if isinstance(cls, ast.ClassDef) else []:
            if isinstance(stmt, ast.Assign) and [ast.unparse(t) for t in stmt.targets] == [attr] \
                    and isinstance(stmt.value, ast.Call):
                given = {k.arg: k.value for k in stmt.value.keywords}
                rest = [a for a in stmt.value.args if not (isinstance(a, ast.Constant) and a.value == attr)]
                default = given.get("default", rest[0] if rest else None)
                try:
                    return ast.literal_eval(default) if default is not None else None
                except ValueError:
                    raise NotConstant from None
        raise NotConstant

    def _run(self, body: list[ast.stmt], local: dict[str, Any]) -> Any:
        for stmt in body:
            if isinstance(stmt, ast.Return):
                return self.value(stmt.value, local) if stmt.value is not None else None
            if isinstance(stmt, ast.If):
                branch = stmt.body if self.value(stmt.test, local) else stmt.orelse
                done, v = self._block(branch, local)
                if done:
                    return v
            elif isinstance(stmt, ast.Try):  # `try: from triton... import tanh`: the import this triton has
                done, v = self._block(stmt.body, local)
                if done:
                    return v
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                local.update({a.asname or a.name: Ref(f"{stmt.module}.{a.name}") for a in stmt.names})
            elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):  # a docstring
                raise NotConstant
        raise NotConstant

    def _block(self, body: list[ast.stmt], local: dict[str, Any]) -> tuple[bool, Any]:
        if not body:
            return False, None
        try:
            return True, self._run(body, local)
        except NotConstant:
            if any(isinstance(s, ast.Return) for s in ast.walk(ast.Module(body=body, type_ignores=[]))):
                raise
            return False, None


def setting_read(e: ast.expr) -> tuple[str, str] | None:
    """``envs.SGLANG_X.get()`` -> ("envs", "SGLANG_X"): a read of an environment-backed settings object."""
    if isinstance(e, ast.Call) and not e.args and not e.keywords and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "get" and isinstance(e.func.value, ast.Attribute) \
            and isinstance(e.func.value.value, ast.Name):
        return e.func.value.value.id, e.func.value.attr
    return None


def _decided(test: ast.expr) -> bool | None:
    """A test's truth where constants settle it (``False and x``, ``not True``, ``(False or False) and x``)."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _decided(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_decided(v) for v in test.values]
        settles = isinstance(test.op, ast.Or)  # True settles an `or`, False an `and`
        return settles if settles in values else None if None in values else not settles
    return None


def fold_settings(fn: ast.FunctionDef, constants: Constants) -> ast.FunctionDef | None:
    """``fn`` with each settings read that ``constants`` can resolve replaced by its default; None if none was."""
    class Fold(ast.NodeTransformer):
        changed = False

        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            read = setting_read(node)
            if read is None:
                return node
            try:
                value = constants.setting(*read)
            except NotConstant:
                return node
            self.changed = True
            return ast.copy_location(ast.Constant(value), node)

        def visit_If(self, node: ast.If) -> Any:
            self.generic_visit(node)
            taken = _decided(node.test)  # `if envs.X.get() and ...:` with X off: the branch goes
            if taken is None:
                return node
            return (node.body if taken else node.orelse) or None

    fold = Fold()
    out = fold.visit(copy.deepcopy(fn))
    for node in ast.walk(out):  # a body whose every statement went (`def log(m): if envs.DEBUG.get(): print(m)`)
        if isinstance(getattr(node, "body", None), list) and not node.body:
            node.body = [ast.Pass()]
    return ast.fix_missing_locations(out) if fold.changed else None


def inline_kwargs(fn: ast.FunctionDef, constants: Constants) -> ast.FunctionDef | None:
    """``fn`` with each ``**settings`` in a decorator call (``@triton.autotune(..., **autotune_cache_kwargs)``) that
    ``constants`` computes to a dict of plain values written out as keywords; None if there was none."""
    fn, changed = copy.deepcopy(fn), False
    for d in fn.decorator_list:
        if not isinstance(d, ast.Call):
            continue
        keywords: list[ast.keyword] = []
        for k in d.keywords:
            try:
                value = constants.value(k.value) if k.arg is None and isinstance(k.value, ast.Name) else None
            except NotConstant:
                value = None
            if isinstance(value, dict) and all(isinstance(x, str) and x.isidentifier() for x in value) and all(
                    v is None or isinstance(v, (bool, int, float, str)) for v in value.values()):
                keywords += [ast.keyword(arg=x, value=ast.Constant(v)) for x, v in value.items()]
                changed = True
            else:
                keywords.append(k)
        d.keywords = keywords
    return ast.fix_missing_locations(fn) if changed else None
