"""What code stores on an object other than its own ``self``, for the call graph's if-tests: ``obj.attr = value``
counted for ``obj``'s declared class (a hint, a construction, a function's return hint and then each field's, or
``self.a.b``'s field hints), and a field that its class-body default factory fills, read as that construction's
instance. A mixin of the call graph's resolver, beside ``values.EngineValues``."""

from __future__ import annotations

import ast
import re
from typing import Any

from smithbot.program.sources import is_literal
from smithbot.program.state import ParsedIndex, ResolverState
from smithbot.program.value import Class, Func, Inst
from smithbot.program.values import constructions

_CALLED_FIELDS = re.compile(r"((?:abs:)?[\w./]+)\([^()]*\)((?:\.\w+)*)")  # func(...).a.b


class ObjectStores(ResolverState):
    """The resolver's methods that read stores on other objects and factory-filled fields."""

    ran: frozenset[tuple[str, str]] | None
    _sets_index: ParsedIndex
    mro: Any
    cls: Any
    cut: Any
    symbol: Any
    symbol_abs: Any
    _too_deep: Any
    _source_there: Any
    _construction_sites: Any

    def _set_elsewhere(self, owner: tuple[str, str] | None, attr: str) -> list[str]:
        """What functions store into ``obj.attr`` where ``obj`` is an instance of ``owner`` (or of a class in its
        method order) and is not ``self`` (``forward_batch.mha_one_shot = True`` with ``forward_batch:
        ForwardBatch``; ``moe = get_flags().moe``, by the hints): in the modules parsed so far and, once a walk has
        run, in the functions it reached, leaving out a store under an if-test the defaults decide against (after
        ``if not is_tbo_enabled(): return``). Each is a value the field may hold: its constant, evaluated in the
        storing function where it reads that function's names, else "?" (unknown)."""
        if owner is None:
            return []
        related = {q.rpartition(".")[2] for _, q in self.mro(*owner)}
        out: list[str] = []
        for mod, qual, stores in self._sets_index.get(self.p, attr, ()):
            fn = (self.p.facts(mod) or {}).get("functions", {}).get(qual)
            if fn is None or self.ran is not None and (mod, qual) not in self.ran:
                continue
            home = (mod, fn["class"]) if fn.get("class") else None
            for base, src, tests in stores:
                if not self._classes_of(mod, fn, base) & related or tests and self.cut(mod, tests, fn, klass=home):
                    continue
                out.append(self._stored(mod, fn, home, src))
        return list(dict.fromkeys(out))

    def _stored(self, mod: str, fn: dict[str, Any], home: tuple[str, str] | None, src: str) -> str:
        """A stored value's constant source (``MoeRunnerBackend(server_args.moe_runner_backend)`` is the member the
        setting names), evaluated in the storing function; "?" where it is not known."""
        if is_literal(src) or self._too_deep():
            return src if is_literal(src) else "?"
        return self._source_there(mod, fn, home, src) or "?"

    def _classes_of(self, mod: str, fn: dict[str, Any], name: str) -> set[str]:
        """The names of the classes a local or parameter of ``fn`` is declared or made an instance of: its type
        hint, else the classes its assignments construct or declare (``moe = get_flags().moe``: what ``get_flags``
        says it returns, then that class's field ``moe``). Read from declarations only: no value is traced, as
        this is asked while fields' values are being worked out."""
        ann = (fn.get("annotated") or {}).get(name)
        made = [ann] if ann else [m for m, _ in (fn.get("locals") or {}).get(name, [])]
        out = {m.partition("(")[0].replace("/", ".").rpartition(".")[2] for m in made if "(" in m}
        home = (mod, fn["class"]) if fn.get("class") else None
        return out | {c[1].rpartition(".")[2] for m in made if not ann for c in self._declared(mod, m, home)}

    def _declared(self, mod: str, src: str, home: tuple[str, str] | None = None) -> list[tuple[str, str]]:
        """The class ``func(...).a.b`` is declared to be (``func``'s return hint, then each field's), or
        ``self.a.b`` in a method of ``home`` (each field's hint from there), else none."""
        match = _CALLED_FIELDS.fullmatch(src)
        if match is not None:
            head = match[1].replace("/", ".")
            funcs = self.symbol_abs(head[4:]) if head.startswith("abs:") else self.symbol(mod, head)
            found = [(f.mod, h) for f in funcs if isinstance(f, Func) for h in
                     [((self.p.facts(f.mod) or {}).get("functions", {}).get(f.qual) or {}).get("returns_hint")] if h]
            classes = [(v.mod, v.qual) for m, h in found[:1] for v in self.symbol(m, h.partition("(")[0])
                       if isinstance(v, Class)]
            fields = match[2]
        elif home is not None and src.startswith("self.") and all(map(str.isidentifier, src.split("."))):
            classes, fields = [home], src[4:]
        else:
            return []
        for attr in [a for a in fields.split(".") if a]:
            hints = [(m, e[0]) for m, q in (self.mro(*classes[0]) if len(classes) == 1 else [])
                     for e in ((self.cls(m, q) or {}).get("attrs", {}).get(attr) or [])[:1]]
            classes = [(v.mod, v.qual) for m, h in hints[:1] if h.endswith("()")
                       for v in self.symbol(m, h[:-2]) if isinstance(v, Class)]
        return classes if len(classes) == 1 else []

    def _factory_made(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, head: str,
                      attr: str) -> list[str] | None:
        """``obj.field.attr`` where ``field`` holds what its class-body default makes for each instance
        (``prefill: PhaseConfig = field(default_factory=lambda: PhaseConfig(backend=default_prefill_backend()))``):
        the argument that construction passes for ``attr``, evaluated in the class's module, and what stores on an
        instance of the made class elsewhere may put there (not the other constructions' values: sglang's decode
        ``PhaseConfig`` is ``full``, its prefill one is not). Only where nothing else may be in the field: no method
        of the class sets it, no construction passes it, no store elsewhere; else None."""
        base, _, name = head.rpartition(".")
        vals = self.expr(mod, (fn or {}).get("class"), klass, fn, base) if base else []
        if len(vals) != 1 or not isinstance(vals[0], Inst) or self._too_deep():
            return None
        owner = (vals[0].mod, vals[0].qual)
        found = [(m, c["factories"][name], c) for m, q in self.mro(*owner) for c in [self.cls(m, q) or {}]
                 if name in c.get("factories", {})][:1]
        if not found:
            return None
        home, src, body = found[0]
        if any(where is not None for where, _ in body["assigned_at"].get(name, ())) \
                or self._set_elsewhere(owner, name) or any(
                    name in c[2] or "**" in c[2] for site in self._construction_sites(owner)
                    for c in constructions(self.p.facts(site.mod)["functions"].get(site.qual), site, owner)):
            return None
        call = ast.parse(src, mode="eval").body
        assert isinstance(call, ast.Call)
        passed = next((k.value for k in call.keywords if k.arg == attr), None)
        made = [(v.mod, v.qual) for v in self.expr(home, None, None, None, src)
                if isinstance(v, Inst)] if passed else []
        if len(made) != 1:
            return None
        value = self._source_there(home, None, None, ast.unparse(passed))
        return None if value is None else [value, *self._set_elsewhere(made[0], attr)]


def index_stores(entries: dict[str, Any], mod: str, f: dict[str, Any]) -> None:
    """A module's stores on other objects by the attribute stored, as (module, function, its stores of it)
    (``ParsedIndex``)."""
    for qual, fn in f["functions"].items():
        for name, stores in (fn.get("sets") or {}).items():
            entries.setdefault(name, []).append((mod, qual, stores))
