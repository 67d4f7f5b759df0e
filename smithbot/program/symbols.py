"""What a name means to the call graph: a module's top-level names (definitions, imports followed through
re-exports and star imports, module-level aliases, a lazy module attribute), classes and their method order, the
live subclasses an instance may be, the functions a registry's decorators or settings register, and code for other
hardware. A mixin of the call graph's resolver (``callgraph._Resolver``), which gives ``attr`` and ``returns``."""

from __future__ import annotations

import ast
import re
from typing import Any

from smithbot.program.evaluate import Env
from smithbot.program.modules import Program
from smithbot.program.syntax import dotted_name, parse_expr
from smithbot.program.value import Class, Func, Inst, Kernel, Method, Module, Registry, Value

_SINGLETON = re.compile(r"([A-Za-z_][\w.]*)\(.*\)", re.S)  # X = Cls(...): the callee


class Symbols:
    """The resolver's lookups of names, classes and registries (see the module's docstring)."""

    p: Program
    env: Env
    kernels: set[tuple[str, str]]
    live: set[tuple[str, str]]
    setting_values: set[str]
    other_platforms: set[str]
    _registered: dict[str, list[tuple[tuple[str, ...], Value]]] | None
    _tables: dict[str, list[tuple[tuple[str, ...], Value]]]
    _mro: dict[tuple[str, str], list[tuple[str, str]]]
    _concrete: dict[tuple[str, str], Any]
    _foreign: dict[tuple[str, str], bool]
    attr: Any
    returns: Any
    _deep: Any

    # --- symbols -----------------------------------------------------------------------------------------------
    def symbol(self, module: str, name: str, depth: int = 0) -> list[Value]:
        """What ``name`` (dotted) means at the top level of ``module``."""
        if self._deep(depth, 12):
            return []
        f = self.p.facts(module)
        head, _, rest = name.partition(".")
        if f is None:
            sub = f"{module}.{head}"
            return self._then(self.symbol_abs(sub, depth + 1), rest, depth) if sub in self.p.modules else []
        vals: list[Value]
        if head in f["classes"]:
            vals = [Class(module, head)]
        elif (module, head) in self.kernels:
            vals = [Kernel(module, head)]
        elif head in f["functions"]:
            vals = [Func(module, head, None)]
        elif head in f["imports"]:
            vals = self.symbol_abs(f["imports"][head], depth + 1)
        elif head in f["assigns"]:
            src = f["assigns"][head]
            made = _SINGLETON.fullmatch(src)
            if src.replace(".", "").replace("_", "").isalnum() and src != head:
                vals = self.symbol(module, src, depth + 1)  # an alias: X = other_module.Y
            elif made and made[1] != head and (classes := [v for v in self.symbol(module, made[1], depth + 1)
                                                           if isinstance(v, Class)]):
                vals = [Inst(v.mod, v.qual) for v in classes]  # a module's one instance: _CONTEXT = Context(...)
            else:
                vals = [Registry(head)]  # a module-level table: dispatch goes through its registrations
                if head not in self._tables:  # a dict it spells out ({"fp8": Fp8Config}) registers its entries
                    self._tables[head] = []  # (by the table's name, as decorators register: the first one read)
                    self._tables[head] = self._entries(module, src, 0)
        elif f"{module}.{head}" in self.p.modules:
            vals = [Module(f"{module}.{head}")]
        else:  # from pkg.common import *
            vals = next((v for star in f.get("stars", []) if star in self.p.modules
                         for v in [self.symbol(star, head, depth + 1)] if v), [])
            if not vals and "__getattr__" in f["functions"]:  # a lazy module attribute (PEP 562)
                vals = self.returns(Func(module, "__getattr__", None), depth + 1, repr(head))
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
            return [Module(dotted)]
        found = self.p.split(dotted)
        if found is None:
            return []
        mod, rest = found
        return self.symbol(mod, rest, depth + 1) if rest else [Module(mod)]

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
                    if isinstance(v, Class):
                        out.extend(x for x in self.mro(v.mod, v.qual) if x not in out)
            self._mro[key] = out
        return self._mro[key]

    def enum(self, mod: str, qual: str) -> bool:
        """Whether a class is an enum: it or a base derives from the standard library's Enum or Flag."""
        return any(b.split(".")[-1].endswith(("Enum", "Flag")) for m, q in self.mro(mod, qual)
                   for b in (self.cls(m, q) or {}).get("bases", []))

    def method(self, mod: str, qual: str, name: str) -> list[Func]:
        """``name`` looked up on the class (its bases in order), bound to that class."""
        for m, q in self.mro(mod, qual):
            f = self.p.facts(m)
            if f is not None and f"{q}.{name}" in f["functions"]:
                return [Func(m, f"{q}.{name}", (mod, qual))]
        return []

    def concrete(self, mod: str, qual: str) -> list[tuple[str, str]]:
        """The live classes an instance of this class may be: itself if live, its live subclasses; itself if none."""
        key = (mod, qual)
        if key not in self._concrete or len(self.live) != self._concrete[key][0]:
            out = [c for c in sorted(self.live) if key in self.mro(*c)]
            self._concrete[key] = (len(self.live), out or [key])  # type: ignore[assignment]
        return self._concrete[key][1]  # type: ignore[return-value]

    def registered(self, registry: str) -> list[Value]:
        """Functions registered into a table named ``registry`` (by a decorator, or a module-level call) keyed by
        declared settings' values:
        by the value of the setting the table is named after (``ATTENTION_BACKENDS`` and ``attention_backend``),
        else by any setting's values (``@register_fused_func("none", "triton")``)."""
        if self._registered is None:
            key = frozenset(self.setting_values)
            if key not in self.p.registrations:
                self._registered = {}
                # only files with a decorator or a registering call keyed by a declared value can register a
                # default: find them by bytes
                keys = [f'("{v}"'.encode() for v in key if isinstance(v, str)] + \
                    [f"('{v}'".encode() for v in key if isinstance(v, str)]
                by_path = {rel: mod for mod, rel in self.p.modules.items()}
                for rel, data in self.p.texts.items():
                    if (b"@" in data or b"register" in data) and any(k in data for k in keys) and rel in by_path:
                        self._index_registrations(by_path[rel])
                self.p.registrations[key] = self._registered
            self._registered = self.p.registrations[key]
        norm = registry.replace("_", "").lower()
        named = {str(v) for k, v in self.env.settings.items() if k in self.env.chosen
                 and k.replace("_", "").lower() in norm}
        allowed = named or self.setting_values
        return [v for args, v in self._registered.get(registry, []) + self._tables.get(registry, [])
                if all(a in allowed for a in args)]

    def _entries(self, module: str, src: str, depth: int) -> list[tuple[tuple[str, ...], Value]]:
        """The classes and functions a module-level dict literal holds under string keys, with the entries of a
        dict of the module's it unpacks (``{**BASE_METHODS, "x": X}``): ``registered`` matches their keys as it
        matches decorators'."""
        node = parse_expr(src)
        if not isinstance(node, ast.Dict) or depth > 12:
            return []
        out: list[tuple[tuple[str, ...], Value]] = []
        for key, value in zip(node.keys, node.values):
            name = dotted_name(value)
            if key is None and isinstance(value, ast.Name):
                inner = (self.p.facts(module) or {}).get("assigns", {}).get(value.id)
                out += self._entries(module, inner, depth + 1) if inner else []
            elif isinstance(key, ast.Constant) and isinstance(key.value, str) and name:
                out += [((key.value,), v) for v in self.symbol(module, name, depth + 1) if isinstance(v, (Class, Func))]
        return out

    def _index_registrations(self, mod: str) -> None:
        """A module's registrations: a function decorated by a registering decorator with its keys, and a
        module-level call of a registering function (one that stores into a table) that hands a function over
        with its keys (``AttentionBackendRegistry.register("fa3", handle_attention_fa3)``)."""
        f = self.p.facts(mod)
        if f is None or self._registered is None:
            return
        for callee, keys, names in f.get("registers", []):
            funcs = [v for name in names for v in self.symbol(mod, name) if isinstance(v, Func)]
            if not funcs:
                continue
            for d in self.symbol(mod, callee):
                for t in ([d] if isinstance(d, Func) else self.method(d.mod, d.cls, d.name) if isinstance(d, Method)
                          else []):
                    for store in self._stores(t):
                        self._registered.setdefault(store.split(".")[-1], []).extend(
                            (tuple(keys), func) for func in funcs)
        for qual, fn in f["functions"].items():
            for dec, args in fn["decorators"]:
                if not args:
                    continue
                for d in self.symbol(mod, dec):
                    if not isinstance(d, Func):
                        continue
                    for store in self._stores(d):
                        self._registered.setdefault(store.split(".")[-1], []).append(
                            (tuple(args), Func(mod, qual, None)))

    def _stores(self, t: Func, depth: int = 0) -> list[str]:
        """The tables a registering function stores into: its own stores, its inner functions' (a decorator
        factory's ``decorator``), and, one call deep, those of the functions they call (a decorator that hands the
        function to ``FusedOpPool.register_fused_func``, which stores it)."""
        f = self.p.facts(t.mod)
        if f is None or t.qual not in f["functions"]:
            return []
        out: list[str] = []
        for q in [t.qual, *(q for q in f["functions"] if q.startswith(t.qual + "."))]:
            fn = f["functions"][q]
            out += fn["stores"]
            if depth == 0:
                for c in fn["calls"]:
                    vals = self.expr(t.mod, fn.get("class"), None, fn, c[0])
                    out += [s for u in self.targets(vals) if isinstance(u, Func) for s in self._stores(u, 1)]
        return list(dict.fromkeys(out))

    def foreign(self, v: Func | Kernel) -> bool:
        """Code for other hardware: a module path or class name with one of the other platforms' words."""
        key = (v.mod, v.bound[1] if isinstance(v, Func) and v.bound else v.qual.split(".")[0])
        if key not in self._foreign:
            words = set(re.split(r"[._]", key[0].lower())) | set(re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+",
                                                                           key[1].replace("_", " ")))
            self._foreign[key] = bool({w.lower() for w in words} & self.other_platforms)
        return self._foreign[key]
