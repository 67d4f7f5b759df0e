"""Values the engine's own code gives, for the call graph's if-tests: what an instance attribute holds (its class's
and bases' assignments, an ``__init__`` parameter traced to the constructions of the class), what a predicate an
if-test calls returns (its return expression with the call's arguments, ``getattr(obj, "name", default)`` taking the
default when no class ``obj`` may hold sets ``name``), and a getter's parameter defaults. A mixin of the call graph's
resolver: it uses its ``expr``, ``mro``, ``cls`` and ``decisions``."""

from __future__ import annotations

import ast
from typing import Any

from smithbot.program.evaluate import Unknown, evaluate, value_of
from smithbot.program.modules import Program

Value = tuple  # the call graph's abstract value (see callgraph.Value)


class EngineValues:
    """The resolver's methods that evaluate values from the engine's code (see the module's docstring)."""

    p: Program
    env: Any
    made_in: dict[tuple[str, str], set[Value]]
    _tracing: int
    _owner_flags: dict[tuple[str, str] | None, dict[str, list[str]]]
    _ctor_args: dict[tuple[tuple[str, str], str], str | None]
    _ctor_index: dict[str, set[Value]]
    _ctor_indexed: set[str]

    def owner_flags(self, owner: tuple[str, str] | None) -> dict[str, list[str]]:
        """``self.x`` -> its sources, for an instance of ``owner``: what its class and bases assign, a subclass's
        assignment over its base's, each traced to the constructor's arguments where it is one."""
        if owner not in self._owner_flags:
            flags: dict[str, list[str]] = {}
            for m, q in (self.mro(*owner) if owner else [])[::-1]:
                c = self.cls(m, q)
                flags.update({f"self.{k}": self.traced(owner, (m, q), v)
                              for k, v in (c or {}).get("flags", {}).items()})
            self._owner_flags[owner] = flags
        return self._owner_flags[owner]

    def traced(self, owner: tuple[str, str], declaring: tuple[str, str], sources: list[str]) -> list[str]:
        """A flag's sources, with a bare ``__init__`` parameter (``self.use_x = use_x``) replaced by the literal that
        every construction of ``owner`` seen on the walk passes for it, when they agree and the defaults decide it."""
        f = self.p.facts(declaring[0])
        init = (f or {}).get("functions", {}).get(f"{declaring[1]}.__init__")
        params = (init or {}).get("params", [])[1:]
        if not init or not any(src in params for src in sources) or self._tracing > 2:
            return sources
        out = []
        for src in sources:
            out.append(self._constructor_arg(owner, params, src) if src in params else None)
            if out[-1] is None:
                out[-1] = src
        return out

    def _constructor_arg(self, owner: tuple[str, str], params: list[str], param: str) -> str | None:
        key = (owner, param)
        if key not in self._ctor_args:
            self._ctor_args[key] = None  # guards a cycle
            self._ctor_args[key] = self._trace_arg(owner, params, param)
        return self._ctor_args[key]

    def _trace_arg(self, owner: tuple[str, str], params: list[str], param: str) -> str | None:
        values = set()
        self._tracing += 1
        try:
            for site in self.made_in.get(owner) or self._construction_sites(owner):
                f = self.p.facts(site[1])
                fn = (f or {}).get("functions", {}).get(site[2])
                if fn is None:
                    return None
                calls = [c for c in fn.get("constructs", []) if ("class", *owner) in
                         self.expr(site[1], fn.get("class"), site[3], fn, c[0])]
                if not calls:
                    return None
                for _, args, kwargs in calls:
                    i = params.index(param)
                    src = kwargs.get(param, args[i] if i < len(args) else None)
                    if src is None:
                        src = fn_default(self.p, owner, param)
                    if src is None:
                        return None
                    site_flags = dict(fn.get("flags", {}))
                    for m, q in (self.mro(*site[3]) if site[3] else [])[::-1]:
                        site_flags.update({f"self.{k}": v for k, v in (self.cls(m, q) or {}).get("flags", {}).items()})
                    assigns = (f or {}).get("assigns", {})
                    v = value_of(src, self.env, lambda n: site_flags.get(n, assigns.get(n)))
                    if v is Unknown or not isinstance(v, (bool, int, float, str, type(None))):
                        return None
                    values.add(repr(v))
        finally:
            self._tracing -= 1
        return values.pop() if len(values) == 1 else None

    def _construction_sites(self, owner: tuple[str, str]) -> set[Value]:
        """The functions of the modules parsed so far that construct a class of ``owner``'s name: where its
        arguments come from when the walk did not see it made (an instance a layer holds, built in an __init__ that
        only a type annotation led to)."""
        for mod, f in self.p.parsed():
            if mod in self._ctor_indexed:
                continue
            self._ctor_indexed.add(mod)
            for qual, fn in f["functions"].items():
                for c in fn.get("constructs", []):
                    site = ("func", mod, qual, (mod, fn["class"]) if fn.get("class") else None)
                    self._ctor_index.setdefault(c[0].split(".")[-1], set()).add(site)
        return self._ctor_index.get(owner[1].split(".")[-1], set())

    def predicate(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, call: str,
                  depth: int = 0) -> str | None:
        """What the call ``call`` (a source, in ``fn`` of ``mod``, ``self`` bound to ``klass``) returns, as a constant's
        source, when the one function it names returns a value the serving defaults decide: its return expressions
        with the parameters bound to the call's arguments and evaluated here (``getattr(attn.kv_b_proj,
        "set_lora", False)`` is its default when no class that ``attn.kv_b_proj`` may hold assigns ``set_lora``).
        None when it cannot say. Within a depth limit, as the walk itself."""
        node = _parse_expr(call)
        if depth > 3 or not isinstance(node, ast.Call) or node.keywords or \
                any(isinstance(a, ast.Starred) for a in node.args):
            return None
        callee = ast.unparse(node.func)
        cls = (fn or {}).get("class")
        funcs = [v for v in self.expr(mod, cls, klass, fn, callee) if v[0] == "func"]
        if len(funcs) != 1:
            return None
        f = self.p.facts(funcs[0][1])
        target = (f or {}).get("functions", {}).get(funcs[0][2])
        if target is None or not target.get("values"):
            return None
        params = target.get("params", [])
        if target.get("class") and params:
            params = params[1:]  # a method: self is its receiver, not an argument
        args = dict(zip(params, (ast.unparse(a) for a in node.args)))
        values = []
        for text, tests in target["values"]:
            if tests:
                return None  # a return under an if-test: not evaluated (yet)
            ret = _parse_expr(text)
            if ret is None:
                return None
            bound_ret = _Substitute(args).visit(ret)
            value = self._getattr_default(mod, cls, klass, fn, bound_ret)
            if value is None:
                look = lambda name: self.predicate(mod, fn, klass, name, depth + 1) if name.endswith(")") \
                    else None  # noqa: E731
                decided = evaluate(ast.unparse(bound_ret), self.env, look)
                value = None if decided is None else repr(decided)
            if value is None:
                return None
            values.append(value)
        return values[0] if len(set(values)) == 1 else None

    def _getattr_default(self, mod: str, cls: str | None, klass: tuple[str, str] | None, fn: dict[str, Any] | None,
                         node: ast.AST) -> str | None:
        """``getattr(obj, "name", default)`` -> the default's source, when every class ``obj`` may hold is known and
        none of them (nor their bases) assigns ``self.name``."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) == 3 and isinstance(node.args[1], ast.Constant)):
            return None
        vals = self.expr(mod, cls, klass, fn, ast.unparse(node.args[0]))
        if not vals or any(v[0] != "inst" for v in vals):
            return None
        name = node.args[1].value
        for v in vals:
            for m, q in self.mro(v[1], v[2]):
                c = self.cls(m, q) or {}
                if name in c.get("flags", {}) or name in c.get("attrs", {}) or name in c.get("assigned", ()):
                    return None
        return ast.unparse(node.args[2])

    def param_defaults(self, mod: str, fn: dict[str, Any] | None, callee: str) -> list[str | None] | None:
        """The default sources of the parameters of the one function ``callee`` names in ``mod``, in order."""
        funcs = [v for v in self.expr(mod, (fn or {}).get("class"), None, fn, callee) if v[0] == "func"]
        if len(funcs) != 1:
            return None
        f = self.p.facts(funcs[0][1])
        target = (f or {}).get("functions", {}).get(funcs[0][2])
        if target is None:
            return None
        given = {**target.get("defaults", {}), **target.get("constants", {})}
        return [given.get(p) for p in target.get("params", [])]


def fn_default(program: Program, owner: tuple[str, str], param: str) -> str | None:
    """The literal default of a class's ``__init__`` parameter (``use_x=False``), through its bases."""
    f = program.facts(owner[0])
    init = (f or {}).get("functions", {}).get(f"{owner[1]}.__init__")
    return (init or {}).get("constants", {}).get(param)


class _Substitute(ast.NodeTransformer):
    """Parameter names replaced by the caller's argument sources."""

    def __init__(self, args: dict[str, str]) -> None:
        self.args = args

    def visit_Name(self, node: ast.Name) -> ast.AST:
        src = self.args.get(node.id)
        found = _parse_expr(src) if src else None
        return found if found is not None else node


def _parse_expr(src: str) -> ast.expr | None:
    try:
        return ast.parse(src, mode="eval").body
    except SyntaxError:
        return None
