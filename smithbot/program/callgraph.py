"""A call graph from a model's code and the engine's per-step code down to Triton kernel launches, following the
dispatch that the target's declared serving defaults decide.

The graph is built on demand: it starts at the entry functions (the preset's model class ``__init__`` and
``forward``, and the target's per-step engine functions with their classes' ``__init__``), and parses each module
the first time a call resolves into it (``program.modules``, cached by content hash).

How a call is resolved (an abstract value per expression, see ``_Resolver.expr``):
- names through the module's definitions, imports (re-exports followed) and module-level aliases;
- ``self.x`` through the class's attribute assignments in any method (``self.mlp = MoEBlock(...)``), the bases'
  too, and a factory's returns (``get_impl_class(cfg)(...)``, ``backend.get_builder(...).build(...)``);
- a method through the bases of the class ``self`` is bound to: a function is walked once per concrete class, so
  ``self.m()`` in an inherited method finds the subclass's override and ``self.x`` its attributes;
- a registry (a dict filled by a decorator, ``REGISTRY[name](...)``) through the functions registered with a key
  that is one of the declared settings' values (``@register_backend("fa3")``);
- a method of a declared type (``fb: ForwardBatch``, a dataclass field ``attn_backend: AttentionBackend``) through
  the live subclasses of that type: the classes constructed anywhere on the reachable code, start-up included (rapid
  type analysis), iterated until that set is stable;
- a constructor parameter through what the bound subclass hands ``super().__init__``, else its default.

A call whose receiver has no known type is not followed: guessing by the method's name alone (every live class's
``capture``) put the CUDA-graph capture under a MoE layer's top-k, and found nothing the typed rules miss on sglang,
lmdeploy or the demo.

Each call's enclosing if-tests are evaluated (``program.evaluate``); a test that the defaults decide against its
branch cuts the edge, an unknown one keeps it and costs a bit of uncertainty. The walk runs once per phase (decode,
prefill), since forward-mode predicates decide differently in each, and records for every kernel whether it is
reached inside a loop of the model's code (per layer) and its least uncertain path.
"""

from __future__ import annotations

import ast
import heapq
from collections import deque
import math
import re
from dataclasses import dataclass
from typing import Any

from smithbot.program.evaluate import Env, Unknown, evaluate, value_of
from smithbot.program.modules import Program

_GETTERS = ("get", "__getitem__", "pop", "setdefault")
# an abstract value: ("func", mod, qual, bound class or None) | ("class", mod, qual) | ("inst", mod, qual)
# | ("method", mod, cls, name) | ("module", mod) | ("kernel", mod, name) | ("registry", name) | ("getter", name)
Value = tuple


@dataclass(frozen=True)
class Reach:
    """How a kernel is reached in one phase: inside a loop of the path (per layer) or not, and the path."""

    phase: str  # decode | prefill
    per_layer: bool
    path: tuple[str, ...]  # qualified names from the entry to the kernel
    undecided: float = 0.0  # the path's uncertainty in bits: undecided if-tests, plus log2 of each call's targets
    tests: tuple[str, ...] = ()  # the if-tests on the path that the defaults leave undecided, each with its line

    @property
    def decided(self) -> bool:
        """Whether every if-test on the path is decided for it: the path is the default one, not only possible."""
        return not self.tests


class _Resolver:
    """Abstract values of expressions. A function value carries the concrete class its ``self`` is bound to, so that
    ``self.x`` inside an inherited method reads the subclass's attributes and ``self.m()`` finds its overrides."""

    def __init__(self, program: Program, kernels: set[tuple[str, str]], env: Env,
                 other_platforms: tuple[str, ...] = ()) -> None:
        self.p, self.kernels, self.env = program, kernels, env
        self.other_platforms = set(other_platforms)
        self._foreign: dict[tuple[str, str], bool] = {}
        self.live: set[tuple[str, str]] = set()
        # the values of the settings the target chose: what a registry's keys are matched against (the argument
        # classes' hundreds of defaults would let every "auto" and "none" registration through)
        self.setting_values = {str(v) for k, v in env.settings.items()
                               if k in env.chosen and isinstance(v, (str, int, bool))}
        self._registered: dict[str, list[tuple[tuple[str, ...], Value]]] | None = None
        self._mro: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._memo: dict[tuple, list[Value]] = {}
        self._sites: dict[tuple, list[Value]] = {}
        self._concrete: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._decided: dict[tuple[str, int, str, str | None], bool | None] = {}
        self.at: Value | None = None  # the function whose calls are being resolved
        # a live class -> the functions seen constructing it (where its __init__ arguments come from)
        self.made_in: dict[tuple[str, str], set[Value]] = {}
        self._tracing = 0  # depth of constructor-argument tracing under way
        self._owner_flags: dict[tuple[str, str] | None, dict[str, list[str]]] = {}  # per round
        self._ctor_args: dict[tuple[tuple[str, str], str], str | None] = {}  # per round
        self._ctor_index: dict[str, set[Value]] = {}  # class name -> functions constructing one, by module parsed
        self._ctor_indexed: set[str] = set()
        # the functions the last round of walks visited (None in the first round), and those this round visits: an
        # attribute its class's __init__ sets keeps only the other assignments made in functions a walk reaches
        # (MultiPlatformOp's forward method, which only torch.compile's capture sets back to forward_native)
        self.ran: frozenset[tuple[str, str]] | None = None
        self.visited: set[tuple[str, str]] = set()

    def reset(self) -> None:
        """Forget what depends on the live classes (they grew)."""
        self._memo, self._sites, self._concrete, self._decided = {}, {}, {}, {}
        self._owner_flags, self._ctor_args = {}, {}

    # --- symbols -----------------------------------------------------------------------------------------------
    def symbol(self, module: str, name: str, depth: int = 0) -> list[Value]:
        """What ``name`` (dotted) means at the top level of ``module``."""
        if depth > 12:
            return []
        f = self.p.facts(module)
        head, _, rest = name.partition(".")
        if f is None:
            sub = f"{module}.{head}"
            return self._then(self.symbol_abs(sub, depth + 1), rest, depth) if sub in self.p.modules else []
        vals: list[Value]
        if head in f["classes"]:
            vals = [("class", module, head)]
        elif (module, head) in self.kernels:
            vals = [("kernel", module, head)]
        elif head in f["functions"]:
            vals = [("func", module, head, None)]
        elif head in f["imports"]:
            vals = self.symbol_abs(f["imports"][head], depth + 1)
        elif head in f["assigns"]:
            src = f["assigns"][head]
            if src.replace(".", "").replace("_", "").isalnum() and src != head:
                vals = self.symbol(module, src, depth + 1)  # an alias: X = other_module.Y
            else:
                vals = [("registry", head)]  # a module-level table: dispatch goes through its registrations
        elif f"{module}.{head}" in self.p.modules:
            vals = [("module", f"{module}.{head}")]
        else:
            vals = []
        return self._then(vals, rest, depth)

    def symbol_abs(self, dotted: str, depth: int = 0) -> list[Value]:
        if dotted in self.p.modules:
            # ``from pkg import name`` reads the package's attribute first: a re-exported function shadows the
            # submodule of the same name (lmdeploy's kernels.cuda.rms_norm)
            parent, _, name = dotted.rpartition(".")
            pf = self.p.facts(parent) if parent in self.p.modules else None
            if pf is not None and (name in pf["functions"] or name in pf["classes"]
                                   or pf["imports"].get(name, dotted) != dotted):
                return self.symbol(parent, name, depth + 1)
            return [("module", dotted)]
        found = self.p.split(dotted)
        if found is None:
            return []
        mod, rest = found
        return self.symbol(mod, rest, depth + 1) if rest else [("module", mod)]

    def _then(self, vals: list[Value], rest: str, depth: int) -> list[Value]:
        for part in [p for p in rest.split(".") if p]:
            vals = [w for v in vals for w in self.attr(v, part, depth + 1)]
        return vals

    # --- classes -----------------------------------------------------------------------------------------------
    def cls(self, mod: str, qual: str) -> dict[str, Any] | None:
        f = self.p.facts(mod)
        return None if f is None else f["classes"].get(qual)

    def mro(self, mod: str, qual: str) -> list[tuple[str, str]]:
        key = (mod, qual)
        if key not in self._mro:
            self._mro[key] = [key]  # guards a cycle
            out = [key]
            c = self.cls(mod, qual)
            for b in (c["bases"] if c else []):
                for v in self.symbol(mod, b):
                    if v[0] == "class":
                        out.extend(x for x in self.mro(v[1], v[2]) if x not in out)
            self._mro[key] = out
        return self._mro[key]

    def method(self, mod: str, qual: str, name: str) -> list[Value]:
        """``name`` looked up on the class (its bases in order), bound to that class."""
        for m, q in self.mro(mod, qual):
            f = self.p.facts(m)
            if f is not None and f"{q}.{name}" in f["functions"]:
                return [("func", m, f"{q}.{name}", (mod, qual))]
        return []

    def concrete(self, mod: str, qual: str) -> list[tuple[str, str]]:
        """The live classes an instance of this class may be: itself if live, its live subclasses; itself if none."""
        key = (mod, qual)
        if key not in self._concrete or len(self.live) != self._concrete[key][0]:
            out = [c for c in sorted(self.live) if key in self.mro(*c)]
            self._concrete[key] = (len(self.live), out or [key])  # type: ignore[assignment]
        return self._concrete[key][1]  # type: ignore[return-value]

    def attr(self, v: Value, name: str, depth: int) -> list[Value]:
        kind = v[0]
        if kind == "module":
            return self.symbol(v[1], name, depth + 1)
        if kind in ("class", "inst"):
            mod, qual = v[1], v[2]
            if kind == "inst":
                made = []
                for m, q in self.mro(mod, qual):
                    c = self.cls(m, q)
                    if c and name in c["attrs"]:
                        f = self.p.facts(m)
                        entries = c["attrs"][name]
                        if self.ran is not None and any(w and w.endswith(".__init__") for _, w, _ in entries):
                            entries = [e for e in entries if not e[1] or e[1].endswith(".__init__")
                                       or (m, e[1]) in self.ran]
                        for t, w, tests in entries:
                            where = f["functions"].get(w) if f and w else None
                            if not self.cut(m, tests, where):
                                made.append((m, q, t, where))
                if made:
                    return list(dict.fromkeys(w for m, q, t, fn in made
                                              for w in self.expr(m, q, (mod, qual), fn, t, depth + 1)))
            for m, q in self.mro(mod, qual):
                c = self.cls(m, q)
                if c and name in c["registries"]:
                    return [("registry", name)]
                f = self.p.facts(m)
                if f is not None and f"{q}.{name}" in f["classes"]:
                    return [("class", m, f"{q}.{name}")]
            if self.method(mod, qual, name):
                return [("method", mod, qual, name)]
            return []
        if kind == "registry" and name in _GETTERS:
            return [("getter", v[1])]
        return []

    # --- expressions -------------------------------------------------------------------------------------------
    def expr(self, mod: str, cls: str | None, bound: tuple[str, str] | None, fn: dict[str, Any] | None, text: str,
             depth: int = 0) -> list[Value]:
        """The abstract values of an expression text (``program.facts.expr_text``) in ``fn`` of class ``cls``
        (defined in ``mod``), whose ``self`` is an instance of ``bound``."""
        key = (mod, cls, bound, id(fn), text)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = []  # guards a cycle
        out = self._expr(mod, cls, bound, fn, text, depth) if depth <= 14 else []
        self._memo[key] = out
        return out

    def _expr(self, mod: str, cls: str | None, bound: tuple[str, str] | None, fn: dict[str, Any] | None, text: str,
              depth: int) -> list[Value]:
        parts = _split(text)
        head, called = parts[0]
        me = bound or ((mod, cls) if cls else None)
        if head == "self" and me:
            vals: list[Value] = [("inst", *me)]
        elif head == "cls" and me:
            vals = [("class", *me)]
        elif head == "super" and cls:
            vals = [("inst", m, q) for m, q in self.mro(mod, cls)[1:2]]
            called = []
        elif head.startswith("abs:"):  # imported inside the function (facts._abs)
            vals = self.symbol_abs(head[4:].replace("/", "."))
        elif fn is not None and (head in fn["locals"] or head in fn.get("params", ())):
            # a parameter's value from the caller, and whatever the function assigns to the name
            vals = self.param(mod, cls, bound, fn, head, depth) if head in fn.get("params", ()) else []
            vals += [w for t, tests in fn["locals"].get(head, []) if t != text and not self.cut(mod, tests, fn)
                     for w in self.expr(mod, cls, bound, fn, t, depth + 1)]
        else:
            vals = self.symbol(mod, head, depth + 1)
        for args in called:
            vals = self.call(vals, depth + 1, args)
        for name, called in parts[1:]:
            vals = [w for v in vals for w in self.attr(v, name, depth + 1)]
            for args in called:
                vals = self.call(vals, depth + 1, args)
        return list(dict.fromkeys(vals))

    def param(self, mod: str, cls: str | None, bound: tuple[str, str] | None, fn: dict[str, Any], name: str,
              depth: int) -> list[Value]:
        """A constructor parameter's value: what the bound subclass's constructor hands ``super().__init__`` for it
        (Qwen3MoeModel passes decoder_layer_type=Qwen3MoeDecoderLayer to Qwen2MoeModel), else its default."""
        if bound and cls and bound != (mod, cls):
            for m, q in self.mro(*bound):
                if (m, q) == (mod, cls):
                    break
                f = self.p.facts(m)
                init = f["functions"].get(f"{q}.__init__") if f else None
                if init and name in init.get("super_kwargs", {}):
                    return self.expr(m, q, bound, init, init["super_kwargs"][name], depth + 1)
        default = fn.get("defaults", {}).get(name)
        return self.expr(mod, cls, bound, None, default, depth + 1) if default else []

    def call(self, vals: list[Value], depth: int, args: str = "") -> list[Value]:
        """What calling each value (with these constant arguments, if known) returns."""
        out: list[Value] = []
        for v in vals:
            if v[0] == "class":
                out.append(("inst", v[1], v[2]))
            elif v[0] in ("func", "method"):
                for t in self.targets([v]):
                    out += self.returns(t, depth + 1, args)
            elif v[0] == "getter":
                out.append(("registry", v[1]))
            elif v[0] == "registry":
                for t in self.registered(v[1]):
                    out += self.returns(t, depth + 1)
        return out

    def returns(self, t: Value, depth: int, args: str = "") -> list[Value]:
        if t[0] != "func" or depth > 12:
            return []
        f = self.p.facts(t[1])
        fn = f["functions"].get(t[2]) if f else None
        if fn is None:
            return []
        static = any(d == "staticmethod" for d, _ in fn["decorators"])
        bound = _bind(fn, args, t[3] is not None and not static)
        # a parameter the factory hands on to another factory carries the caller's constant argument with it
        forwards = {f"{callee}()": f"{callee}({', '.join(bound.get(a, a) for a in fargs)})"
                    for callee, fargs in fn.get("forwards", []) if all(a in bound or a[:1] in "'\"0123456789"
                                                                        or "." in a for a in fargs)} if bound else {}
        out = []
        for text, tests in fn["returns"]:
            if self.cut(t[1], tests, fn, bound):
                continue
            out += self.expr(t[1], fn["class"], t[3], fn, forwards.get(text, text), depth + 1)
        return out

    def targets(self, vals: list[Value]) -> list[Value]:
        """The functions and kernels a call of these values runs (constructors included)."""
        out: list[Value] = []
        for v in vals:
            if v[0] in ("func", "kernel"):
                out.append(v)
            elif v[0] == "class":
                self.live.add((v[1], v[2]))
                if self.at is not None:
                    self.made_in.setdefault((v[1], v[2]), set()).add(self.at)
                out += self.method(v[1], v[2], "__init__")
            elif v[0] == "inst":
                for c in self.concrete(v[1], v[2]):
                    out += self.method(*c, "forward") or self.method(*c, "__call__")
            elif v[0] == "method":
                for c in self.concrete(v[1], v[2]):
                    out += self.method(*c, v[3])
            elif v[0] == "registry":
                out += self.registered(v[1])
        return list(dict.fromkeys(out))

    def registered(self, registry: str) -> list[Value]:
        """Functions registered into a table named ``registry`` by a decorator keyed by declared settings' values:
        by the value of the setting the table is named after (``ATTENTION_BACKENDS`` and ``attention_backend``),
        else by any setting's values (``@register_fused_func("none", "triton")``)."""
        if self._registered is None:
            key = frozenset(self.setting_values)
            if key not in self.p.registrations:
                self._registered = {}
                # only files with a decorator keyed by a declared value can register a default: find them by bytes
                keys = [f'("{v}"'.encode() for v in key] + [f"('{v}'".encode() for v in key]
                by_path = {rel: mod for mod, rel in self.p.modules.items()}
                for rel, data in self.p.texts.items():
                    if b"@" in data and any(k in data for k in keys) and rel in by_path:
                        self._index_registrations(by_path[rel])
                self.p.registrations[key] = self._registered
            self._registered = self.p.registrations[key]
        norm = registry.replace("_", "").lower()
        named = {str(v) for k, v in self.env.settings.items() if k in self.env.chosen
                 and k.replace("_", "").lower() in norm}
        allowed = named or self.setting_values
        return [v for args, v in self._registered.get(registry, []) if all(a in allowed for a in args)]

    def _index_registrations(self, mod: str) -> None:
        f = self.p.facts(mod)
        if f is None or self._registered is None:
            return
        for qual, fn in f["functions"].items():
            for dec, args in fn["decorators"]:
                if not args:
                    continue
                for d in self.symbol(mod, dec):
                    if d[0] != "func":
                        continue
                    df = self.p.facts(d[1])
                    for store in (df["functions"][d[2]]["stores"] if df else []):
                        self._registered.setdefault(store.split(".")[-1], []).append(
                            (tuple(args), ("func", mod, qual, None)))

    def foreign(self, v: Value) -> bool:
        """Code for other hardware: a module path or class name with one of the other platforms' words."""
        key = (v[1], v[3][1] if v[0] == "func" and v[3] else v[2].split(".")[0])
        if key not in self._foreign:
            words = set(re.split(r"[._]", key[0].lower())) | set(re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+",
                                                                           key[1].replace("_", " ")))
            self._foreign[key] = bool({w.lower() for w in words} & self.other_platforms)
        return self._foreign[key]

    def undecided(self, mod: str, tests: list[list[Any]], fn: dict[str, Any] | None = None,
                  klass: tuple[str, str] | None = None) -> list[str]:
        """The if-tests the defaults leave open, as their source."""
        return [t for (t, _), d in zip(tests, self.decisions(mod, tests, fn, klass=klass)) if d is None]

    def cut(self, mod: str, tests: list[list[Any]], fn: dict[str, Any] | None = None,
            bound: dict[str, str] | None = None, klass: tuple[str, str] | None = None) -> bool:
        """Whether the serving defaults decide one of these if-tests against the branch taken. A name reads the
        call's constant arguments (``bound``: parameter -> source, for a factory's returns), then the function's
        own assignments (``w8a8 = quant_method == 'smooth_quant'``), then the module's. ``self.x`` reads what the
        class ``self`` is bound to (``klass``, else the function's own class) and its bases assign: a mixin's method
        sees the attributes of the class that mixes it in."""
        return any(d is not None and d != taken for d, taken in zip(self.decisions(mod, tests, fn, bound, klass),
                                                                     (t for _, t in tests)))

    def decisions(self, mod: str, tests: list[list[Any]], fn: dict[str, Any] | None = None,
                  bound: dict[str, str] | None = None, klass: tuple[str, str] | None = None) -> list[bool | None]:
        out = []
        owner = klass or ((mod, fn["class"]) if fn and fn.get("class") else None)
        for test, _ in tests:
            key = (mod, id(fn), test, self.env.phase, owner)
            if bound or key not in self._decided:
                f = self.p.facts(mod)
                assigns = f["assigns"] if f else {}
                flags = {**(fn.get("flags", {}) if fn else {}), **self.owner_flags(owner)}
                def look(name: str, fn: dict[str, Any] | None = fn, flags: dict = flags, assigns: dict = assigns
                         ) -> Any:
                    if name.endswith("(*defaults)"):  # a getter's own parameter defaults (evaluate's protocol)
                        return self.param_defaults(mod, fn, name[:-len("(*defaults)")])
                    if name.endswith(")"):  # a predicate's call: what it returns here
                        return self.predicate(mod, fn, owner, name)
                    return (bound or {}).get(name, flags.get(name, assigns.get(name)))

                value = evaluate(test, self.env, look)
                if bound:
                    out.append(value)
                    continue
                self._decided[key] = value
            out.append(self._decided[key])
        return out

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

    def callees(self, node: Value, fn: dict[str, Any], callee: str) -> list[Value]:
        """The functions and kernels a call names, without making anything live (a cut call's, for its reason)."""
        vals = self.expr(node[1], fn["class"], node[3], fn, callee.removesuffix("[]"))
        return [v for v in vals if v[0] in ("func", "kernel")]

    # --- one call site -----------------------------------------------------------------------------------------
    def site(self, node: Value, fn: dict[str, Any], callee: str) -> list[Value]:
        key = (node, callee, len(self.live))
        if key not in self._sites:
            self._sites[key] = self._site(node, fn, callee)
        return self._sites[key]

    def _site(self, node: Value, fn: dict[str, Any], callee: str) -> list[Value]:
        mod, bound, cls = node[1], node[3], fn["class"]
        if callee.endswith("[]"):  # kernel[grid](...) or REGISTRY[key](...)
            vals = self.expr(mod, cls, bound, fn, callee[:-2])
            return [v for v in vals if v[0] == "kernel"] + self.targets([v for v in vals if v[0] == "registry"])
        return self.targets(self.expr(mod, cls, bound, fn, callee))


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


def method_of(program: Program, mod: str, cls: str, name: str) -> Value | None:
    """A class's method, looked up through its bases, bound to the class (an entry of the walk)."""
    found = _Resolver(program, set(), Env({}, {}, {}, {})).method(mod, cls, name)
    return found[0] if found else None


def _split(text: str) -> list[tuple[str, list[str]]]:
    """``a.b(X.Y).c`` -> [("a", []), ("b", ["X.Y"]), ("c", [])]: each dotted part with the argument texts of each
    call made of it (``f()()`` -> [("f", ["", ""])])."""
    out: list[tuple[str, list[str]]] = []
    name, calls, depth, buf = "", [], 0, ""
    for ch in text:
        if depth:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    calls.append(buf)
                    buf = ""
                    continue
            buf += ch
        elif ch == "(":
            depth = 1
        elif ch == ".":
            out.append((name, calls))
            name, calls = "", []
        else:
            name += ch
    out.append((name, calls))
    return out


def _bind(fn: dict[str, Any], args: str, method: bool) -> dict[str, str]:
    """Parameter -> argument source for a call's constant arguments (``OpType.RMSNorm``)."""
    if not args:
        return {}
    params = fn.get("params", [])[1 if method else 0:]
    out: dict[str, str] = {}
    for i, a in enumerate(a.strip() for a in args.split(",")):
        key, eq, value = a.partition("=")
        if eq and key.isidentifier():
            out[key] = value
        elif i < len(params):
            out[params[i]] = a
    return out


def _qual(v: Value) -> str:
    return v[2] if v[0] in ("func", "kernel") else str(v)


def reach(program: Program, kernels: set[tuple[str, str]], env: Env, model: list[Value], engine: list[Value],
          startup: list[Value], other_platforms: tuple[str, ...] = (),
          phases: tuple[str, ...] = ("decode", "prefill"),
          functions: dict[tuple[str, str], list[Reach]] | None = None,
          cuts: dict[tuple[str, str], str] | None = None) -> dict[tuple[str, str], list[Reach]]:
    """Every kernel reached from the ``model`` entries (its forward: a loop there runs per layer) and the ``engine``
    entries (per-step code: its loops are not layers), per phase, with the best path: per layer first, then the
    fewest undecided branches.

    ``startup`` functions (the entry classes' constructors, the engine's set-up) run once and make classes live;
    kernels reached only from them are not counted. ``functions``, when given, is filled the same way with every
    function the model and engine entries reach (its path ends at the function): where torch glue may run. ``cuts``,
    when given, gets for each function or kernel a cut call names the if-test decided against it: why it is off."""
    out: dict[tuple[str, str], list[Reach]] = {}
    # one resolver for both phases: what an expression means rarely depends on the phase, and its memo is most of
    # the work; the if-test decisions are kept per phase
    r = _Resolver(program, kernels, env.with_phase(phases[0]), other_platforms)
    for v in model + engine + startup:
        if v[0] == "func" and v[3]:
            r.live.add(v[3])
    best: dict[str, dict[tuple[str, str], Reach]] = {}
    funcs: dict[str, dict[tuple[str, str], Reach]] = {}
    for _ in range(4):  # until the live classes and the functions visited stop changing
        before = len(r.live)
        r.reset()
        r.visited = set()
        r.env = env.with_phase(phases[0])
        _walk(r, startup, False, {}, True)
        if cuts is not None:
            cuts.clear()  # kept from the last round only, when the live classes have settled
        for phase in phases:
            r.env = env.with_phase(phase)
            best[phase], funcs[phase] = {}, {}
            _walk(r, model, True, best[phase], True, funcs[phase], cuts)
            _walk(r, engine, True, best[phase], False, funcs[phase], cuts)
        ran = frozenset(r.visited)
        if len(r.live) == before and ran == r.ran:
            break
        r.ran = ran
    if cuts is not None:
        _behind_cuts(r, cuts)
    for phase in phases:
        for key, rc in best[phase].items():
            out.setdefault(key, []).append(rc)
        if functions is not None:
            for key, rc in funcs[phase].items():
                functions.setdefault(key, []).append(rc)
    return out


def _behind_cuts(r: _Resolver, cuts: dict[tuple[str, str], str], limit: int = 5000) -> None:
    """Give what only a cut call leads to the reason of that cut: the functions and kernels its callees reach that no
    walk visited (``_step_a_q_kernel`` sits two calls behind ``is_kv_b_lora_active(self)``). Names only, nothing
    made live, within ``limit`` functions."""
    todo = deque(cuts.items())
    while todo and limit > 0:
        (mod, qual), why = todo.popleft()
        limit -= 1
        f = r.p.facts(mod)
        fn = f["functions"].get(qual) if f else None
        if fn is None:
            continue
        node = ("func", mod, qual, (mod, fn["class"]) if fn.get("class") else None)
        for callee, _tests, _loop, _line in fn["calls"]:
            for t in r.callees(node, fn, callee):
                key = (t[1], t[2])
                if key not in cuts and key not in r.visited:
                    cuts[key] = why
                    todo.append((key, why))


def _walk(r: _Resolver, starts: list[Value], count: bool, best: dict[tuple[str, str], Reach], loops: bool,
          funcs: dict[tuple[str, str], Reach] | None = None, cuts: dict[tuple[str, str], str] | None = None) -> None:
    """Cheapest paths first, where an edge costs its uncertainty in bits: one per if-test on it that the defaults
    leave undecided, and log2(n) for a call that may go to n functions. A kernel behind fewer bits is more surely
    on the default path. ``funcs`` gets each function visited, kept as kernels are: per layer first, then the
    fewest bits."""
    cost: dict[tuple[Value, bool], float] = {}
    parent: dict[tuple[Value, bool], tuple[Value, bool] | None] = {}
    open_tests: dict[tuple[Value, bool], tuple[str, ...]] = {}  # the undecided tests on the cheapest path there
    heap: list[tuple[float, int, Value, bool]] = []
    tick = 0
    for s in starts:
        cost[(s, False)] = 0
        parent[(s, False)] = None
        heap.append((0, tick := tick + 1, s, False))
    heapq.heapify(heap)
    while heap:
        c, _, node, loop = heapq.heappop(heap)
        if c > cost.get((node, loop), c):
            continue
        f = r.p.facts(node[1])
        fn = f["functions"].get(node[2]) if f else None
        if fn is None:
            continue
        r.visited.add((node[1], node[2]))
        if funcs is not None:
            old = funcs.get((node[1], node[2]))
            if old is None or (loop, -c) > (old.per_layer, -old.undecided):
                funcs[(node[1], node[2])] = Reach(r.env.phase or "", loop, _path(parent, (node, loop)), c,
                                                  open_tests.get((node, loop), ()))
        r.at = node
        where = r.p.modules.get(node[1], node[1])
        for callee, tests, in_loop, line in fn["calls"]:
            if r.cut(node[1], tests, fn, klass=node[3]):
                if count and cuts is not None:  # why what this call reaches is off the default path
                    against = next(t for (t, taken), d in zip(tests, r.decisions(node[1], tests, fn, klass=node[3]))
                                   if d is not None and d != taken)
                    for t in r.callees(node, fn, callee):
                        cuts.setdefault((t[1], t[2]), f"`{against}` is decided against it ({where}:{line})")
                continue
            undecided = r.undecided(node[1], tests, fn, node[3])
            now, step = loop or (in_loop and loops), c + len(undecided)
            here = open_tests.get((node, loop), ()) + tuple(f"{t} ({where}:{line})" for t in undecided)
            found = [t for t in r.site(node, fn, callee) if not r.foreign(t)]
            # a call that may go to n places: each is one of n alternatives, as an undecided test is one of 2
            step += math.log2(len(found)) if len(found) > 1 else 0.0
            if len(found) > 1:  # an undecided dispatch, as an undecided test
                here += (f"{callee.removesuffix('[]')}() may call any of {len(found)} ({where}:{line})",)
            for t in found:
                if t[0] == "kernel":
                    if count:
                        old = best.get((t[1], t[2]))
                        if old is None or (now, -step) > (old.per_layer, -old.undecided):
                            best[(t[1], t[2])] = Reach(r.env.phase or "", now, _path(parent, (node, loop)) + (t[2],),
                                                       step, here)
                    continue
                if step < cost.get((t, now), 1 << 30):
                    cost[(t, now)] = step
                    parent[(t, now)] = (node, loop)
                    open_tests[(t, now)] = here
                    heapq.heappush(heap, (step, tick := tick + 1, t, now))


def _path(parent: dict, at: tuple[Value, bool]) -> tuple[str, ...]:
    out = []
    cur: tuple[Value, bool] | None = at
    while cur is not None and len(out) < 64:
        out.append(_qual(cur[0]))
        cur = parent.get(cur)
    return tuple(reversed(out))
