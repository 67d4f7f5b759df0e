"""Values the engine's own code gives, for the call graph's if-tests: what an instance attribute holds (its class's
and bases' assignments, an ``__init__`` parameter traced to the constructions of the class), what a predicate an
if-test calls returns (its return expression with the call's arguments, ``getattr(obj, "name", default)`` taking the
default when no class ``obj`` may hold sets ``name``), and a getter's parameter defaults. A mixin of the call graph's
resolver: it uses its ``expr``, ``mro``, ``cls`` and ``decisions``."""

from __future__ import annotations

import ast
import copy
import functools
from typing import Any, Callable

from smithbot.program.evaluate import (CONFIG, EACH, EACH_OF_SOURCE, EACH_SOURCE, GIVEN, OBJECT, Member, ModelConfig,
                                       Several, Unknown, _parse, _several, evaluate, value_of)
from smithbot.program.modules import Program

Value = tuple  # the call graph's abstract value (see callgraph.Value)
# how many values deep a value may be traced (a constructor's argument through its constructions, a caller's
# argument, another object's attribute): a model's config reaches a router six constructions down
_DEPTH = 8


class EngineValues:
    """The resolver's methods that evaluate values from the engine's code (see the module's docstring)."""

    p: Program
    env: Any
    made_in: dict[tuple[str, str], set[Value]]
    targets: Any
    callers: dict[tuple[str, str], set[tuple[Value, int]]] | None
    qual_of: dict[int, tuple[str, str]]
    entries: set[int]
    configs: dict[int, str]
    _tracing: int
    _filtering: int
    _predicates: dict[tuple, str | None]
    _objects: dict[tuple, tuple]
    _flag_home: dict[tuple[tuple[str, str], str], tuple[str, dict[str, Any] | None]]
    look: Any
    ran: frozenset[tuple[str, str]] | None
    _owner_flags: dict[tuple[str, str] | None, tuple]
    _ctor_args: dict[tuple[tuple[str, str], str], tuple]
    _ctor_index: dict[str, set[Value]]
    _ctor_indexed: set[str]
    _ctor_seen: int
    _cut_short: int
    _guards_read: int
    _anywhere_args: dict[tuple, tuple]

    def owner_flags(self, owner: tuple[str, str] | None) -> dict[str, list[str]]:
        """``self.x`` -> its sources, for an instance of ``owner``: what its class and bases assign, a subclass's
        assignment over its base's, each traced to the constructor's arguments where it is one."""
        got = self._owner_flags.get(owner)
        if got is not None and not got[3] and (not got[1] or self._tracing >= got[2]):
            return got[0]  # (as _kept would, without making the table of sources first)
        classes = [(m, q, (self.cls(m, q) or {}).get("flags", {})) for m, q in
                   (self.mro(*owner) if owner else [])[::-1]]
        # while the assignments' own if-tests are evaluated, every assignment counts (a decision made then is one
        # that all of them agree on, so it holds after; it is not kept, see ``decisions``)
        raw = {f"self.{k}": [e[0] for e in v] for _, _, flags in classes for k, v in flags.items()}
        return self._kept(self._owner_flags, owner, raw, lambda: self._owner_flags_of(owner, classes))

    def _owner_flags_of(self, owner: tuple[str, str] | None, classes: list[tuple[str, str, dict[str, Any]]]
                        ) -> dict[str, list[str]]:
        self._filtering += 1
        try:
            out: dict[str, list[str]] = {}
            for m, q, flags in classes:
                # a field declared without a default (spec_algorithm: SpeculativeAlgorithm) holds only what the
                # constructions pass
                fields = {k: [] for k, v in ((self.cls(m, q) or {}).get("attrs") or {}).items()
                          if k not in flags and any(e[1] is None for e in v)}
                for k, entries in {**fields, **flags}.items():
                    kept = self._made_here(owner, m, entries, k)
                    if kept:
                        where = next((e[1] for e in entries if e[0] in kept and e[1]), None)
                        home = (self.p.facts(m) or {}).get("functions", {}).get(where)
                        self._flag_home[(owner, k)] = (m, home)
                        out[f"self.{k}"] = [self._at_home(owner, m, home, src) for src in kept]
        finally:
            self._filtering -= 1
        return out

    def _kept(self, table: dict[Any, Any], key: Any, guard: Any, compute: Callable[[], Any],
              only_whole: bool = False) -> Any:
        """``compute()`` memoised in ``table`` for the round, ``guard`` standing in while it runs (a cycle). A
        value the depth limit cut short somewhere below is used again only as deep or deeper: asked from less deep,
        it is computed again (at most once per level). With ``only_whole``, an unknown (None) that was cut short or
        read a guard standing in for another is not kept at all."""
        got = table.get(key)
        if got is not None and (not got[1] or self._tracing >= got[2]):
            if got[3]:
                self._guards_read += 1  # a guard standing in: what reads it may be cut short too
            return got[0]
        table[key] = (guard, False, self._tracing, True)
        before = (self._cut_short, self._guards_read)
        value = compute()
        short = self._cut_short != before[0]
        if only_whole and value is None and (short or self._guards_read != before[1]):
            del table[key]
        else:
            table[key] = (value, short, self._tracing, False)
        return value

    def _too_deep(self) -> bool:
        """Whether tracing is past its depth limit (and so cuts a value short)."""
        if self._tracing > _DEPTH:
            self._cut_short += 1
            return True
        return False

    def _at_home(self, owner: tuple[str, str] | None, mod: str, home: dict[str, Any] | None, src: str) -> str:
        """An attribute's source that reads the assigning method's own parameters or locals
        (``self.has_local = model_runner.model_config.is_local``) as the constant it is there, when the defaults
        decide it; else the source as it is."""
        if home is None or _literal(src) or self._too_deep():
            return src
        node = _parse_expr(src)
        own = set(home.get("params", [])[1:]) | set(home.get("flags", {}))
        if node is None or not any(isinstance(n, ast.Name) and n.id in own for n in ast.walk(node)):
            return src
        self._tracing += 1
        try:
            value = value_of(src, self.env, self.look(mod, home, owner))
        finally:
            self._tracing -= 1
        return _source(value) or src

    def _made_here(self, owner: tuple[str, str] | None, mod: str, entries: list[list[Any]], name: str) -> list[str]:
        """The sources an attribute may hold, from its assignments (``[source, method, if-tests]``) that the
        serving defaults let happen: none under an if-test decided against it, and, once a walk has run, none
        outside ``__init__`` in a method the walk did not reach (``self._aiter_runner = MoeRunner(...)`` under
        ``if use_aiter``, or a flag only a capture helper sets). In ``__init__`` an assignment that surely runs
        replaces the ones before it (``self.fused_func = None``, then ``= pool.get(...)`` under ``if not lora``).
        A field's default in the class body (``ready: bool = False``) holds unless a construction of the class
        passes the field by name: what it passes is one more value (its constant where the call site decides it,
        else unknown), and when every construction passes it the default never holds."""
        f = self.p.facts(mod)
        if owner and (not entries or any(where is None for _, where, _ in entries)):
            # where the walk saw it made, else anywhere; and always the class's own alternative constructors
            sites = set(self.made_in.get(owner) or self._construction_sites(owner))
            sites |= {s for s in self._construction_sites(owner) if s[3] == owner}
            passed: list[list[Any]] = []
            every = True  # every construction passes the field: its default never holds
            for site in sorted(sites, key=str):
                sf = self.p.facts(site[1])
                sfn = ((sf or {}).get("functions", {}).get(site[2]) or {})
                for _, _, kwargs, _, tests in constructions(sfn, site, owner):
                    if self.cut(site[1], tests, sfn, klass=site[3]):
                        continue
                    if name in kwargs:
                        passed.append([self._value_there(site[1], sfn, site[3], kwargs[name]) or "?", None, []])
                    elif "**" in kwargs:
                        passed.append(["?", None, []])
                    else:
                        every = False
            if passed and every:
                entries = [e for e in entries if e[1] is not None]
            entries = entries + passed
        made: list[str] = []  # what __init__ leaves, in its order: an assignment that surely runs replaces the last
        later: list[str] = []
        for src, where, tests in entries:
            fn = (f or {}).get("functions", {}).get(where)
            in_init = not where or where.endswith("__init__")
            if where is None and made:  # a construction's argument: one more value the field may hold
                made.append(src)
                continue
            if self.ran is not None and not in_init and (mod, where) not in self.ran:
                continue
            held = self.decisions(mod, tests, fn, klass=owner) if tests else []
            if any(h not in (None, EACH) and h != taken for h, (_, taken) in zip(held, tests)):
                continue
            if not in_init:
                later.append(src)
            elif all(h is not None and h is not EACH for h in held):
                made = [src]
            else:
                made.append(src)
        return made + later

    def _value_there(self, mod: str, fn: dict[str, Any] | None, owner: tuple[str, str] | None, src: str,
                     deeper: bool = True) -> str | None:
        """The constant an expression is in a function's context, as a source: a literal, what the defaults make of
        it, or OBJECT for a class or a function named as a value; None when it cannot be told. ``deeper``: one more
        value deep (not when the caller counted it already)."""
        if _literal(src):
            return src
        if self._too_deep():
            return None
        self._tracing += deeper
        try:
            found = _source(value_of(src, self.env, self.look(mod, fn, owner)))
            if found is None:
                vals = self.expr(mod, (fn or {}).get("class"), owner, fn, src)
                if vals and all(v[0] in ("class", "func", "kernel") for v in vals):
                    found = OBJECT
            return found
        finally:
            self._tracing -= deeper

    def _constructor_arg(self, owner: tuple[str, str], params: list[str], param: str) -> str | None:
        key = (owner, param)
        return self._kept(self._ctor_args, key, None, lambda: self._trace_arg(owner, params, param))

    def _trace_arg(self, owner: tuple[str, str], params: list[str], param: str) -> str | None:
        values = set()
        self._tracing += 1
        try:
            for site in list(self.made_in.get(owner) or self._construction_sites(owner)):
                f = self.p.facts(site[1])
                fn = (f or {}).get("functions", {}).get(site[2])
                if fn is None:
                    return None
                calls = [c for c in fn.get("constructs", []) if ("class", *owner) in
                         self.expr(site[1], fn.get("class"), site[3], fn, c[0])]
                if not calls:
                    return None
                for _, args, kwargs, iters, tests in calls:
                    if self.cut(site[1], tests, fn, klass=site[3]):
                        continue  # a construction the defaults rule out (the HIP-only runner)
                    i = params.index(param)
                    if param not in kwargs and i >= len(args) and "**" in kwargs:
                        return None  # it may be in the **kwargs handed on
                    src = kwargs.get(param, args[i] if i < len(args) else None)
                    if src in iters and iters[src].startswith("range("):
                        # built in a loop (one layer per index): each index of the range, when it is known
                        bounds = value_of(iters[src][5:] if "," in iters[src] else f"(0, {iters[src][6:-1]})",
                                          self.env, lambda n: (f or {}).get("assigns", {}).get(n))
                        if not (isinstance(bounds, tuple) and all(isinstance(b, int) for b in bounds)):
                            return None
                        values.add(f"{EACH_SOURCE}{bounds[:2]}")
                        continue
                    if src is None:
                        src = fn_default(self.p, owner, param)
                    if src is None:
                        return None
                    found = self._value_there(site[1], fn, site[3], src, deeper=False)
                    if found is None:
                        return None
                    values.add(found)
        finally:
            self._tracing -= 1
        return values.pop() if len(values) == 1 else None

    def _construction_sites(self, owner: tuple[str, str]) -> set[Value]:
        """The functions of the modules parsed so far that construct a class of ``owner``'s name: where its
        arguments come from when the walk did not see it made (an instance a layer holds, built in an __init__ that
        only a type annotation led to)."""
        if self._ctor_seen == self.p.parsed_count():
            return self._ctor_index.get(owner[1].split(".")[-1], set())
        self._ctor_seen = self.p.parsed_count()
        for mod, f in self.p.parsed():
            if mod in self._ctor_indexed:
                continue
            self._ctor_indexed.add(mod)
            for qual, fn in f["functions"].items():
                for c in fn.get("constructs", []):
                    site = ("func", mod, qual, (mod, fn["class"]) if fn.get("class") else None)
                    made = fn["class"] if c[0] == "cls" and fn.get("class") else c[0]  # a classmethod's cls(...)
                    self._ctor_index.setdefault(made.split(".")[-1], set()).add(site)
        return self._ctor_index.get(owner[1].split(".")[-1], set())

    def predicate(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, call: str,
                  depth: int = 0, outer: Callable[[str], Any] | None = None, cached: bool = True
                  ) -> str | list[str] | None:
        """What the call ``call`` (a source, in ``fn`` of ``mod``, ``self`` bound to ``klass``) returns, as a constant's
        source, or the sources of the constants it may return; None when that is not known. ``hasattr(obj,
        "name")`` and ``getattr(obj, "name", default)`` are answered from the classes ``obj`` may hold. Otherwise
        each function the call may go to (a registry's too: ``AttentionBackendRegistry.get_handler(name)(...)``)
        is evaluated: its parameters bound to the call's arguments (and ``self`` to the receiver,
        ``forward_batch.needs_init()``), its returns taken in order, each under its if-tests (early returns
        included): a return the defaults rule out is skipped, one they leave open is one value it may return, and
        the first that surely runs is the last; with none that surely runs, it may also run off its end (None). A
        name the function's module defines reads that module's assignment, unless a function the walk ran rebinds
        it (``global``); a call is the caller's, else one of the function's module (``_dispatch(attn)``); any
        other name is the caller's (``outer``, its lookup). Within a depth limit, as the walk itself. Memoised per
        round in the caller's context (``cached``: ``outer`` is that context's own lookup, with no call's
        arguments bound)."""
        # (a value found while attributes are being filtered may be less decided: kept apart, see owner_flags)
        key = (mod, id(fn), klass, call, self.env.phase, depth, self._filtering > 0)
        if not cached:
            return self._predicate(mod, fn, klass, call, depth, outer, False)
        if key not in self._predicates:
            self._predicates[key] = None  # guards a cycle
            self._predicates[key] = self._predicate(mod, fn, klass, call, depth, outer, True)
        return self._predicates[key]

    def _predicate(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, call: str,
                   depth: int, outer: Callable[[str], Any] | None, cached: bool) -> str | list[str] | None:
        node = _parse_expr(call)
        if depth > 3 or not isinstance(node, ast.Call) or any(k.arg is None for k in node.keywords) or \
                any(isinstance(a, ast.Starred) for a in node.args):
            return None
        cls = (fn or {}).get("class")
        found = self._attribute_test(mod, cls, klass, fn, node)
        if found is not None:
            return found
        vals = self.expr(mod, cls, klass, fn, ast.unparse(node.func))
        if not vals or any(v[0] not in ("func", "method", "registry") for v in vals):
            return None
        funcs = [v for v in self.targets(vals) if v[0] == "func"]
        if not funcs or len(funcs) > 8:
            return None
        out: list[str] = []
        for target in funcs:
            got = self._returned(mod, fn, klass, node, target, depth, outer, cached)
            if got is None:
                return None
            out.extend(g for g in got if g not in out)
        return out[0] if len(out) == 1 else out

    def _returned(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, node: ast.Call,
                  func: Value, depth: int, outer: Callable[[str], Any] | None, cached: bool) -> list[str] | None:
        """The constants one function (``func``) may return for the call ``node``, as sources; None when one of
        them is not known. See ``predicate``."""
        f = self.p.facts(func[1])
        target = (f or {}).get("functions", {}).get(func[2])
        if target is None or not target.get("values"):
            return None
        params = target.get("params", [])
        args = {}
        decorators = {d.split(".")[-1] for d, _ in target["decorators"]}
        if target.get("class") and params and "staticmethod" not in decorators:
            if "classmethod" in decorators:  # cls is the class (return cls.NONE: a member of it)
                args[params[0]] = target["class"].split(".")[-1]
            elif isinstance(node.func, ast.Attribute):
                # self is the receiver; a member of the forward-mode enum is the phase's
                args[params[0]] = self.phase_member([("inst", *func[3])] if func[3] else []) \
                    or self._receiver(ast.unparse(node.func.value), outer)
            params = params[1:]
        args.update(zip(params, (ast.unparse(a) for a in node.args)))
        args.update({k.arg: ast.unparse(k.value) for k in node.keywords if k.arg in params})
        if any(p not in args and p not in target.get("constants", {}) for p in params):
            return None  # a parameter left to its default, unknown here
        args.update({p: v for p, v in target.get("constants", {}).items() if p not in args})
        theirs = func[1]

        def look(name: str) -> Any:
            if name.endswith(")"):  # a call the caller can name, else one of the function's own module
                got = self.predicate(mod, fn, klass, name, depth + 1, outer, cached)
                if got is None:
                    got = self.predicate(theirs, target, func[3], name, depth + 1, look, False)
                return got
            if name in (self.p.facts(theirs) or {}).get("assigns", {}):
                return self.module_value(theirs, name)
            return outer(name) if outer else None

        def decide(src: str) -> bool | None:
            return evaluate(_bound_source(src, tuple(args.items())), self.env, look)

        out: list[str] = []
        for text, tests in target["values"]:
            held = [decide(t) for t, _ in tests]
            if any(h is not None and h != taken for h, (_, taken) in zip(held, tests)):
                continue  # a return the defaults rule out
            bound_src = _bound_source(text, tuple(args.items()))
            bound_ret = _parse_expr(bound_src)
            if bound_ret is None:
                return None
            value = self._attribute_test(mod, (fn or {}).get("class"), klass, fn, bound_ret)
            got = [value] if value is not None else _sources(value_of(bound_src, self.env, look))
            if got is None:
                return None
            out.extend(g for g in got if g not in out)
            if all(h is not None for h in held):
                return out  # a return that surely runs: the ones after it never do
        return out + ["None"] if "None" not in out else out  # (or it runs off its end)

    def _receiver(self, src: str, outer: Callable[[str], Any] | None) -> str:
        """The receiver of a method call as ``self`` is bound to it: where it may be None or one other value, that
        value (a method runs on no None: ``batch.spec_algorithm.is_none()`` of a field left None in an empty batch
        and set in every batch that runs); else its source."""
        value = value_of(src, self.env, outer or (lambda name: None))
        if isinstance(value, Several) and None in value.items:
            rest = _sources(_several([v for v in value.items if v is not None]))
            if rest and len(rest) == 1:
                return rest[0]
        return src

    def object_flag(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, dotted: str
                    ) -> list[str] | None:
        """The constant sources of ``obj.attr`` (``self.batch.warm``, ``self.model_config.is_generation``) when every
        class ``obj`` may hold is known: what their assignments (``owner_flags``) leave, each evaluated where the class
        assigns it when it is no literal. None otherwise."""
        key = (mod, id(fn), klass, dotted, self.env.phase, self._filtering > 0)
        return self._kept(self._objects, key, None, lambda: self._object_flag(mod, fn, klass, dotted))

    def phase_member(self, vals: list[Value]) -> str | None:
        """The source of the forward-mode member of the phase being walked, when ``vals`` are instances of the
        engine's forward-mode enum: an enum with a member named for each phase (``DECODE``, and ``EXTEND`` or
        ``PREFILL``), as sglang's ForwardMode. A step of the decode phase is in mode DECODE; None otherwise."""
        if self.env.phase not in _PHASE_MEMBERS or not vals or any(v[0] != "inst" for v in vals) \
                or len({v[1:3] for v in vals}) != 1 or not self.enum(vals[0][1], vals[0][2]):
            return None
        members = {n for m, q in self.mro(vals[0][1], vals[0][2]) for n in (self.cls(m, q) or {}).get("assigned", ())}
        if "DECODE" not in members:
            return None
        found = next((n for n in _PHASE_MEMBERS[self.env.phase] if n in members), None)
        return f"Enum.{found}" if found else None

    def _object_flag(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, dotted: str
                     ) -> list[str] | None:
        head, _, attr = dotted.rpartition(".")
        vals = self.expr(mod, (fn or {}).get("class"), klass, fn, head)
        if vals and all(v[0] == "inst" for v in vals):
            phase = self.phase_member(self.expr(mod, (fn or {}).get("class"), klass, fn, dotted))
            if phase is not None:
                return [phase]  # forward_batch.forward_mode: the phase's mode (not ForwardMode.IDLE, a member)
        if len(vals) == 1 and vals[0][0] == "class":  # a class attribute: an enum member's value (QuantPolicy.NONE)
            found = [e[0] for m, q in self.mro(vals[0][1], vals[0][2])
                     for e in ((self.cls(m, q) or {}).get("flags", {}).get(attr) or [])[:1] if e[1] is None]
            return found[:1] if found and _literal(found[0]) else None
        if not vals or any(v[0] != "inst" for v in vals) or self._too_deep():
            return None
        out: list[str] = []
        for v in vals:
            owner = (v[1], v[2])
            srcs = self.owner_flags(owner).get(f"self.{attr}")
            if not srcs:
                return None
            for src in srcs:
                if not _literal(src):  # evaluated where the object's class assigns it
                    home = self._flag_home.get((owner, attr))
                    if home is None:
                        return None
                    self._tracing += 1
                    try:
                        value = value_of(src, self.env, self.look(home[0], home[1], owner))
                    finally:
                        self._tracing -= 1
                    src = _source(value)
                    if src is None:
                        return None
                out.append(src)
        return out

    def call_arg(self, fn: dict[str, Any], param: str, depth: int = 0, mod: str | None = None) -> str | None:
        """A parameter's value from the calls the last round of walks made of the function: the literal every
        caller passes (or leaves to its constant default), traced through the callers' own parameters; an entry's
        parameter is what its caller leaves to the default. None when they differ or cannot be told."""
        key = self.qual_of.get(id(fn))
        if key is None and mod is not None:  # a function no walk ran: called only from code no step runs
            key = next(((mod, q) for q, g in ((self.p.facts(mod) or {}).get("functions") or {}).items() if g is fn),
                       None)
        callers = (self.callers or {}).get(key) if key else None
        if key and not callers and depth <= 4:  # (memoised: finding such callers and evaluating there is costly)
            return self._kept(self._anywhere_args, (key, param, self.env.phase, self._filtering > 0), None,
                              lambda: self._from_callers(fn, param, depth, key, self._callers_anywhere(key)), True)
        return self._from_callers(fn, param, depth, key, callers)

    def _from_callers(self, fn: dict[str, Any], param: str, depth: int, key: tuple[str, str] | None,
                      callers: Any) -> str | None:
        """The one value these calls (``(caller, call index)``) hand the parameter, see ``call_arg``."""
        if not callers or depth > 4 or key is None:
            return None
        params = fn.get("params", [])
        skip = 1 if fn.get("class") and not any(d == "staticmethod" for d, _ in fn["decorators"]) else 0
        values = set()
        for node, i in callers:
            cf = (self.p.facts(node[1]) or {}).get("functions", {}).get(node[2])
            call = cf["calls"][i] if cf and i < len(cf["calls"]) else None
            if call is None or len(call) < 6 or call[4] is None:
                return None
            args, kwargs = call[4], call[5]
            pos = params.index(param) - skip
            if pos < 0:  # self: the receiver of the call (self.spec_algorithm.create_future_map(...))
                receiver = call[0].rpartition(".")[0]
                head = receiver.partition(".")[0]
                if "(" in receiver or "[" in receiver or not (head in cf.get("params", ()) or head in cf.get(
                        "locals", {})):
                    return None  # (Class.method(obj): an unbound call; a receiver the caller does not hold)
                args, kwargs, pos = [receiver], {}, 0
            if param not in kwargs and not 0 <= pos < len(args) and "**" in kwargs:
                return None  # it may be in the caller's **kwargs
            src = kwargs.get(param, args[pos] if 0 <= pos < len(args) else fn.get("constants", {}).get(param))
            if src is None and param in fn.get("defaults", {}):  # left to a default that is no literal
                src = self._value_there(key[0], None, None, fn["defaults"][param])
                if src is not None:
                    values.add(src)
                    continue
            if src is None or src == "?":
                return None
            if not _literal(src):
                if src in cf.get("params", ()) and src not in cf.get("flags", {}):
                    if self.configs.get(id(cf)) == src:  # the model class's config: the model's config.json
                        src = CONFIG
                    elif id(cf) in self.entries:  # left to its constant default, or passed (not None)
                        src = cf.get("constants", {}).get(src, None if src in cf.get("defaults", {}) else GIVEN)
                    else:
                        src = self.call_arg(cf, src, depth + 1, node[1])
                else:  # an expression of the caller's (server_args.attention_backend)
                    owner = node[3] or ((node[1], cf["class"]) if cf.get("class") else None)
                    src = self._value_there(node[1], cf, owner, src)
                if src is None:
                    return None
            values.add(src)
        return values.pop() if len(values) == 1 else None

    def _callers_anywhere(self, key: tuple[str, str]) -> list[tuple[Value, int]]:
        """The calls of a function in the modules parsed so far, as ``callers`` holds them, where the walk made none
        (``ScheduleBatch.init_new``, called by the scheduler's batch building, which no step runs): a call whose
        callee resolves to it, in its function bound to the live class that has it (a mixin's method is the
        scheduler's)."""
        name = key[1].split(".")[-1]
        for mod, f in self.p.parsed():
            if mod in self._call_indexed:
                continue
            self._call_indexed.add(mod)
            for qual, fn in f["functions"].items():
                for i, c in enumerate(fn["calls"]):
                    self._call_index.setdefault(c[0].split(".")[-1], []).append((mod, qual, i))
        out = []
        for mod, qual, i in self._call_index.get(name, []):
            cf = (self.p.facts(mod) or {}).get("functions", {}).get(qual)
            if cf is None:
                continue
            owners = self.concrete(mod, cf["class"]) if cf.get("class") else [None]
            for owner in owners[:1] if len(owners) == 1 else []:
                node = ("func", mod, qual, owner)
                vals = self.expr(mod, cf["class"], owner, cf, cf["calls"][i][0])
                if any(t[1:3] == key for t in self.targets([v for v in vals if v[0] in ("func", "method")])):
                    out.append((node, i))
        return out

    def module_value(self, mod: str, name: str) -> str | None:
        """The source a module-level name is assigned, unless a function rebinds it (``global``) and the walk may
        run that function (every one, before the first walk has)."""
        f = self.p.facts(mod) or {}
        rebound = f.get("rebound", {}).get(name, [])
        if rebound and (self.ran is None or any((mod, q) in self.ran for q in rebound)):
            return None
        return f.get("assigns", {}).get(name)

    def _attribute_test(self, mod: str, cls: str | None, klass: tuple[str, str] | None, fn: dict[str, Any] | None,
                        node: ast.AST) -> str | None:
        """``hasattr(obj, "name")`` -> "True" or "False", and ``getattr(obj, "name", default)`` -> the default's
        source, when every class ``obj`` may hold is known and all of them (hasattr: or none) define ``name``: a
        method, a class attribute or an attribute their methods set, through their bases. None otherwise."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and len(node.args) == (3 if node.func.id == "getattr" else 2)
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            return None
        vals = self.expr(mod, cls, klass, fn, ast.unparse(node.args[0]))
        if not vals or any(v[0] != "inst" for v in vals):
            return None
        name = node.args[1].value
        has = set()
        for v in vals:
            has.add(any(name in c.get("flags", {}) or name in c.get("attrs", {}) or name in c.get("assigned", ())
                        or f"{q}.{name}" in (self.p.facts(m) or {}).get("functions", {})
                        for m, q in self.mro(v[1], v[2]) for c in [self.cls(m, q) or {}]))
        if node.func.id == "hasattr":
            return repr(has.pop()) if len(has) == 1 else None
        return ast.unparse(node.args[2]) if has == {False} else None

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


_PHASE_MEMBERS = {"decode": ("DECODE",), "prefill": ("EXTEND", "PREFILL")}


def constructions(fn: dict[str, Any] | None, site: Value, owner: tuple[str, str]) -> list[list[Any]]:
    """The constructions of ``owner`` that ``fn`` (the function ``site``) makes, by the class's name or, in one of
    its classmethods, as ``cls(...)``: its ``constructs`` facts ``[name, args, kwargs, iters, tests]``."""
    return [c for c in (fn or {}).get("constructs", [])
            if c[0].split(".")[-1] == owner[1].split(".")[-1] or (c[0] == "cls" and site[3] == owner)]


def fn_default(program: Program, owner: tuple[str, str], param: str) -> str | None:
    """The literal default of a class's ``__init__`` parameter (``use_x=False``), through its bases."""
    f = program.facts(owner[0])
    init = (f or {}).get("functions", {}).get(f"{owner[1]}.__init__")
    return (init or {}).get("constants", {}).get(param)


@functools.lru_cache(maxsize=65536)
def _bound_source(src: str, args: tuple[tuple[str, str], ...]) -> str:
    """``src`` with its names replaced by these arguments' sources, as source (cached: the same test is bound to the
    same arguments many times over)."""
    node = _parse_expr(src)
    return src if node is None else ast.unparse(_substitute(node, dict(args)))


def _substitute(node: ast.expr, args: dict[str, str]) -> ast.AST:
    """A copy of the tree with parameter names replaced by the caller's argument sources (parses are shared)."""
    return _Substitute(args).visit(copy.deepcopy(node))


class _Substitute(ast.NodeTransformer):
    def __init__(self, args: dict[str, str]) -> None:
        self.args = args

    def visit_Name(self, node: ast.Name) -> ast.AST:
        src = self.args.get(node.id)
        found = copy.deepcopy(_parse_expr(src)) if src else None
        return found if found is not None else node


def _source(value: Any) -> str | None:
    """A source that evaluates to ``value`` (a constant, an enum member, the model's config), or None."""
    if isinstance(value, ModelConfig):
        return CONFIG
    if isinstance(value, Member):
        return f"Enum.{value.name}"
    if isinstance(value, Several) and value.each and isinstance(value.items, range):
        return f"{EACH_SOURCE}({value.items.start}, {value.items.stop})"  # each index of a loop, handed on
    if value is not Unknown and isinstance(value, (bool, int, float, str, type(None))):
        return repr(value)
    return None


def _sources(value: Any) -> list[str] | None:
    """The sources of a value that may be one of several (``Several``), each as ``_source`` gives it."""
    found = [_source(v) for v in (value.items if isinstance(value, Several) else [value])]
    if any(f is None for f in found):
        return None
    if isinstance(value, Several) and value.each:  # each of them, per instance: one source that says so
        return [_source(value) or f"{EACH_OF_SOURCE}({', '.join(found)})"]  # type: ignore[arg-type]
    return found  # type: ignore[return-value]


def _literal(src: str) -> bool:
    try:
        ast.literal_eval(src)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _parse_expr(src: str) -> ast.expr | None:
    """The expression's tree, a cached parse shared by every caller: never to be changed in place."""
    return _parse(src)
