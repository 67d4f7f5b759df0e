"""Values the engine's own code gives, for the call graph's if-tests: what an instance attribute holds (its class's
and bases' assignments, an ``__init__`` parameter traced to the constructions of the class), what another object's
attribute holds (the forward mode: the phase's member), and a module-level name; memoised per round. What a call
gives is ``calls.CallValues``, what code stores on other objects ``stores.ObjectStores``. A mixin of the call
graph's resolver: it uses its ``expr``, ``mro``, ``cls`` and ``decisions``."""

from __future__ import annotations

from typing import Any, Callable

from smithbot.program.evaluate import value_of
from smithbot.program.kinds import EACH, EACH_SOURCE, OBJECT, ONE_OF_SOURCE
from smithbot.program.modules import Program
from smithbot.program.sources import constant_source, is_literal, one_of, one_of_items, source_of
from smithbot.program.state import ParsedIndex, ResolverState
from smithbot.program.syntax import names_read
from smithbot.program.value import Class, Func, Inst, Kernel, Value

# how many values deep a value may be traced (a constructor's argument through its constructions, a caller's
# argument, another object's attribute): a model's config reaches a router six constructions down
_DEPTH = 8




class EngineValues(ResolverState):
    """The resolver's methods that evaluate values from the engine's code (see the module's docstring)."""

    made_in: dict[tuple[str, str], set[Func]]
    _tracing: int
    _objects: dict[tuple, tuple]
    _imported: dict[tuple, tuple]
    _flag_home: dict[tuple[tuple[str, str], str], tuple[str, dict[str, Any] | None]]
    ran: frozenset[tuple[str, str]] | None
    _owner_flags: dict[tuple[str, str] | None, tuple]
    _ctor_args: dict[tuple[tuple[str, str], str], tuple]
    _ctor_index: ParsedIndex
    _set_elsewhere: Any  # (stores.ObjectStores)
    _factory_made: Any
    mro: Any
    _cut_short: int
    _guards_read: int
    _spread: Any  # (args.CallerArgs)

    def owner_flags(self, owner: tuple[str, str] | None) -> dict[str, list[str]]:
        """``self.x`` -> its sources, for an instance of ``owner``: what its class and bases assign, a subclass's
        assignment over its base's, each traced to the constructor's arguments where it is one."""
        # while the assignments' own if-tests are evaluated, every assignment counts (a decision made then is one
        # that all of them agree on, so it holds after; it is not kept, see ``decisions``)
        return self._kept(self._owner_flags, owner,
                          lambda: {f"self.{k}": [e[0] for e in v] for _, _, flags in self._flag_classes(owner)
                                   for k, v in flags.items()},
                          lambda: self._owner_flags_of(owner, self._flag_classes(owner)))

    def _flag_classes(self, owner: tuple[str, str] | None) -> list[tuple[str, str, dict[str, Any]]]:
        """The classes of ``owner``'s method order, bases first, each with its attribute assignments."""
        return [(m, q, (self.cls(m, q) or {}).get("flags", {})) for m, q in (self.mro(*owner) if owner else [])[::-1]]

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
                    kept += [src for src in self._set_elsewhere(owner, k) if kept and src not in kept]
                    if kept:
                        where = next((e[1] for e in entries if e[0] in kept and e[1]), None)
                        home = (self.p.facts(m) or {}).get("functions", {}).get(where)
                        self._flag_home[(owner, k)] = (m, home)
                        out[f"self.{k}"] = [self._at_home(owner, m, home, src) for src in kept]
        finally:
            self._filtering -= 1
        return out

    @staticmethod
    def _copied(fn: dict[str, Any], owner: tuple[str, str], name: str, src: str) -> bool:
        """Whether a construction passes field ``name`` the same field of another instance of the class (``src`` is
        ``vllm_config.model_config``, or a local of ``fn`` assigned only that, ``vllm_config`` annotated as the
        class, or ``self`` in one of its methods): a copy, which adds no value the other constructions do not give.
        (By the annotation: the object's value is not traced, which, while the class's fields are being worked out,
        would ask for them again.)"""
        sources = fn.get("flags", {}).get(src) if src.isidentifier() else None
        if sources and len(sources) == 1:
            src = sources[0]
        head, _, attr = src.rpartition(".")
        cls = owner[1].split(".")[-1]
        hinted = str(fn.get("annotated", {}).get(head, "")).split("(")[0].split(".")[-1]
        return attr == name and (hinted == cls or head == "self" and (fn.get("class") or "").split(".")[-1] == cls)

    def _source_there(self, mod: str, fn: dict[str, Any] | None, owner: tuple[str, str] | None, src: str
                      ) -> str | None:
        """``src`` evaluated in ``fn`` of ``mod`` (``self`` an instance of ``owner``), one level deeper in the
        tracing, as the constant's source (``__one_of__(a, b)`` for one of several); None where it is not known."""
        self._tracing += 1
        try:
            return constant_source(value_of(src, self.env, self.look(mod, fn, owner)), True)
        finally:
            self._tracing -= 1

    def _kept(self, table: dict[Any, Any], key: Any, guard: Callable[[], Any], compute: Callable[[], Any],
              only_whole: bool = False) -> Any:
        """``compute()`` memoised in ``table`` for the round, ``guard()`` standing in while it runs (a cycle). A
        value the depth limit cut short somewhere below is used again only as deep or deeper: asked from less deep,
        it is computed again (at most once per level), and reused, it cuts short what reads it too. With
        ``only_whole``, an unknown (None) that was cut short or read a guard standing in for another is not kept at
        all."""
        got = table.get(key)
        if got is not None and (not got[1] or self._tracing >= got[2]):
            self._cut_short += got[1]  # a value cut short cuts short what reads it
            return got[0]
        active = (id(table), key)
        if active in self._active:
            self._guards_read += 1  # its guard stands in: what reads it may be cut short too
        before = (self._cut_short, self._guards_read)
        value, final = self._work_out(active, guard, compute)
        short = self._cut_short != before[0]
        if final and not (only_whole and value is None and (short or self._guards_read != before[1])):
            table[key] = (value, short, self._tracing)
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
        if home is None or is_literal(src) or self._too_deep():
            return src
        own = set(home.get("params", [])[1 if home.get("class") else 0:]) | set(home.get("flags", {}))
        if not names_read(src) & own:
            return src
        return self._source_there(mod, home, owner, src) or src

    def _made_here(self, owner: tuple[str, str] | None, mod: str, entries: list[list[Any]], name: str) -> list[str]:
        """The sources an attribute may hold, from its assignments (``[source, method, if-tests]``) that the
        serving defaults let happen: none under an if-test decided against it, and, once a walk has run, none
        outside ``__init__`` in a method the walk did not reach (``self._aiter_runner = MoeRunner(...)`` under
        ``if use_aiter``, or a flag only a capture helper sets). In ``__init__`` an assignment that surely runs
        replaces the ones before it (``self.fused_func = None``, then ``= pool.get(...)`` under ``if not lora``), and
        one that surely runs in a method that surely runs (at start-up or every step) replaces what ``__init__``
        left, in steady serving (``self.current_attention_backend = None``, then each step's backend).
        A field's default in the class body (``ready: bool = False``) holds unless a construction of the class
        passes the field by name: what it passes is one more value (its constant where the call site decides it,
        else unknown), and when every construction passes it (each that the defaults leave; one at least, passing
        it) the default never holds. An assignment under a test that the attribute is set (``if self.lens is not
        None: self.lens = pad(self.lens)``) only replaces a value that is not None: where nothing else sets one, it
        never runs."""
        f = self.p.facts(mod)
        if owner and (not entries or any(where is None for _, where, _ in entries)):
            # where the walk saw it made, else anywhere; and always the class's own alternative constructors
            sites = set(self.made_in.get(owner) or self._construction_sites(owner))
            sites |= {s for s in self._construction_sites(owner) if s.bound == owner}
            passed: list[list[Any]] = []
            every = True  # every construction passes the field: its default never holds
            named = False  # a construction passes it, one the defaults rule out too
            for site in sorted(sites, key=str):
                sf = self.p.facts(site.mod)
                sfn = ((sf or {}).get("functions", {}).get(site.qual) or {})
                for _, _, kwargs, _, tests in constructions(sfn, site, owner):
                    named = named or name in kwargs
                    if self.cut(site.mod, tests, sfn, klass=site.bound):
                        continue
                    if name in kwargs and self._copied(sfn, owner, name, kwargs[name]):
                        continue  # `VllmConfig(model_config=vllm_config.model_config)`: another instance's value
                    if name in kwargs:
                        passed.append([self._value_there(site.mod, sfn, site.bound, kwargs[name], several=True) or "?",
                                       None, []])
                    elif "**" in kwargs:
                        passed.append(["?", None, []])
                    else:
                        every = False
            if named and every:
                entries = [e for e in entries if e[1] is not None]
            entries = entries + passed
        made: list[str] = []  # what __init__ leaves, in its order: an assignment that surely runs replaces the last
        later: list[str] = []
        each_step = False  # a method that surely runs surely assigns it: what __init__ left is gone after it
        kept_set: list[str] = []  # assigned only while it is set
        while_set = _while_set(name)
        for src, where, tests in entries:
            fn = (f or {}).get("functions", {}).get(where)
            in_init = not where or where.endswith("__init__")
            if where is None and made:  # a construction's argument: one more value the field may hold
                made.append(src)
                continue
            if self.ran is not None and not in_init and (mod, where) not in self.ran:
                continue
            if any(list(t) in while_set for t in tests):
                kept_set.append(src)
                continue
            held = self.decisions(mod, tests, fn, klass=owner) if tests else []
            if any(h not in (None, EACH) and h != taken for h, (_, taken) in zip(held, tests)):
                continue
            sure = all(h is not None and h is not EACH for h in held)
            if not in_init:
                later.append(src)
                each_step = each_step or sure and (mod, where) in self.surely
            elif sure:
                made = [src]
            else:
                made.append(src)
        out = later if each_step else made + later
        return out + kept_set if any(v != "None" for v in out) else out

    def _value_there(self, mod: str, fn: dict[str, Any] | None, owner: tuple[str, str] | None, src: str,
                     deeper: bool = True, several: bool = False) -> str | None:
        """The constant an expression is in a function's context, as a source: a literal, what the defaults make of
        it (``several``: or one of several constants, ``__one_of__(a, b)``), or OBJECT for a class or a function
        named as a value; None when it cannot be told. ``deeper``: one more value deep (not when the caller counted
        it already)."""
        if is_literal(src):
            return src
        if self._too_deep():
            return None
        self._tracing += deeper
        try:
            found = constant_source(value_of(src, self.env, self.look(mod, fn, owner)), several)
            if found is None:
                vals = self.expr(mod, (fn or {}).get("class"), owner, fn, src)
                if vals and all(isinstance(v, (Class, Func, Kernel)) for v in vals):
                    found = OBJECT
            return found
        finally:
            self._tracing -= deeper

    def _constructor_arg(self, owner: tuple[str, str], params: list[str], param: str) -> str | None:
        key = (owner, param)
        return self._kept(self._ctor_args, key, lambda: None, lambda: self._trace_arg(owner, params, param))

    def _trace_arg(self, owner: tuple[str, str], params: list[str], param: str) -> str | None:
        values = set()
        self._tracing += 1
        try:
            for site in sorted(self.made_in.get(owner) or self._construction_sites(owner), key=str):
                f = self.p.facts(site.mod)
                fn = (f or {}).get("functions", {}).get(site.qual)
                if fn is None:
                    return None
                calls = [c for c in fn.get("constructs", []) if Class(*owner) in
                         self.expr(site.mod, fn.get("class"), site.bound, fn, c[0])]
                if not calls:
                    return None
                for _, args, kwargs, iters, tests in calls:
                    if self.cut(site.mod, tests, fn, klass=site.bound):
                        continue  # a construction the defaults rule out (the HIP-only runner)
                    i = params.index(param)
                    kwargs = self._known_spread(site, fn, kwargs, param)
                    if param not in kwargs and i >= len(args) and "**" in kwargs:
                        spread = self._spread(site, fn, kwargs["**"], param)  # (a local dict of literal keys)
                        if spread is None:
                            return None  # it may be in the **kwargs handed on
                        kwargs = {**kwargs, **spread}
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
                    found = self._value_there(site.mod, fn, site.bound, src, deeper=False, several=True)
                    if found is None:
                        return None
                    values.add(found)
        finally:
            self._tracing -= 1
        if len(values) == 1:
            return values.pop()
        # made by one of several constructions: one of their constants (not where one is a loop's each index)
        items = sorted({item for v in values for item in one_of_items(v)})
        return one_of(items) if values and not any(v.startswith(EACH_SOURCE) for v in values) else None

    def _construction_sites(self, owner: tuple[str, str]) -> set[Func]:
        """The functions of the modules parsed so far that construct a class of ``owner``'s name: where its
        arguments come from when the walk did not see it made (an instance a layer holds, built in an __init__ that
        only a type annotation led to)."""
        return self._ctor_index.get(self.p, owner[1].split(".")[-1], set())

    def object_flag(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, dotted: str
                    ) -> list[str] | None:
        """The constant sources of ``obj.attr`` (``self.batch.warm``, ``self.model_config.is_generation``) when every
        class ``obj`` may hold is known: what their assignments (``owner_flags``) leave, each evaluated where the class
        assigns it when it is no literal. None otherwise."""
        key = (mod, id(fn), klass, dotted, self.env.phase, self._filtering > 0)
        return self._kept(self._objects, key, lambda: None, lambda: self._object_flag(mod, fn, klass, dotted))

    def phase_member(self, vals: list[Value]) -> str | None:
        """The source of the forward-mode member of the phase being walked, when ``vals`` are instances of the
        engine's forward-mode enum: an enum with a member named for each phase (``DECODE``, and ``EXTEND`` or
        ``PREFILL``), as sglang's ForwardMode. A step of the decode phase is in mode DECODE; None otherwise."""
        if self.env.phase not in PHASE_MEMBERS or not vals or any(not isinstance(v, Inst) for v in vals) \
                or len({(v.mod, v.qual) for v in vals}) != 1:
            return None
        members = self.mode_members(vals[0].mod, vals[0].qual)
        found = next((n for n in PHASE_MEMBERS[self.env.phase] if n in members), None)
        return f"Enum.{found}" if found else None

    def mode_members(self, mod: str, qual: str) -> set[str]:
        """The members of the class, when it is the engine's forward-mode enum (an enum with a DECODE member);
        else none."""
        if not self.enum(mod, qual):
            return set()
        members = {n for m, q in self.mro(mod, qual) for n in (self.cls(m, q) or {}).get("assigned_at", {})}
        return members if "DECODE" in members else set()

    def _object_flag(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, dotted: str
                     ) -> list[str] | None:
        head, _, attr = dotted.rpartition(".")
        made = self._factory_made(mod, fn, klass, head, attr)
        if made is not None:
            return made
        vals = self.expr(mod, (fn or {}).get("class"), klass, fn, head)
        if vals and all(isinstance(v, Inst) for v in vals):
            phase = self.phase_member(self.expr(mod, (fn or {}).get("class"), klass, fn, dotted))
            if phase is not None:
                return [phase]  # forward_batch.forward_mode: the phase's mode (not ForwardMode.IDLE, a member)
        # a class attribute: an enum member's value (QuantPolicy.NONE)
        if len(vals) == 1 and isinstance(vals[0], Class):
            found = [e[0] for m, q in self.mro(vals[0].mod, vals[0].qual)
                     for e in ((self.cls(m, q) or {}).get("flags", {}).get(attr) or [])[:1] if e[1] is None]
            return found[:1] if found and is_literal(found[0]) else None
        if not vals or any(not isinstance(v, Inst) for v in vals) or self._too_deep():
            return None
        out: list[str] = []
        for v in vals:
            owner = (v.mod, v.qual)
            srcs = self.owner_flags(owner).get(f"self.{attr}")
            if not srcs:
                return None
            for src in srcs:
                # evaluated where its class assigns it, unless a constant (or one of several made by constructions)
                if not is_literal(src) and not src.startswith(("Enum.", ONE_OF_SOURCE)):
                    home = self._flag_home.get((owner, attr))
                    if home is None:
                        return None
                    src = self._source_there(home[0], home[1], owner, src)
                    if src is None:
                        return None
                out.append(src)
        return out

    def module_value(self, mod: str, name: str, hops: int = 0) -> str | None:
        """The source a module-level name is assigned; where functions rebind it (``global``), see ``_rebound``.
        A name the module imports is the other module's when that is a literal (``from .utils import BACKENDS``, a
        list of names), else what its source evaluates to in its own module, when that is a constant (``from .utils
        import _is_hip``, ``_is_hip = is_hip()``)."""
        f = self.p.facts(mod) or {}
        own = f.get("assigns", {}).get(name)
        if own is not None and not self._unchanged(mod, f.get("mutated", {}).get(name, [])):
            return None
        rebound = f.get("rebound", {}).get(name, [])
        if rebound:
            return self._rebound(mod, name, list(dict.fromkeys(rebound)), own)
        imported = f.get("imports", {}).get(name)
        if own is not None or not imported or hops > 3:
            return own
        home, _, there = imported.rpartition(".")
        found = self.module_value(home, there, hops + 1) if home != mod else None
        if found is None or is_literal(found):
            return found
        return self._kept(self._imported, (home, there, self.env.phase, self._filtering > 0), lambda: None,
                          lambda: source_of(value_of(found, self.env, self.look(home, None, None))))

    def _unchanged(self, mod: str, mutators: list[str]) -> bool:
        """Whether the object a module-level name is assigned is still what it holds in serving, though these
        functions of the module change it (``_SPECS.append(spec)``, a plugin's registration): none of them ran in a
        walk, and nothing calls one at import, as a decorator (``@register("hf")``) or from a module's top level.
        Unknown before the first walk."""
        if not mutators:
            return True
        if self.ran is None:
            return False
        names = {part for q in mutators for part in (q.split(".")[0], q.split(".")[-1])}
        return not any((mod, q) in self.ran for q in mutators) and not any(map(self.p.called_at_import, names))

    def _rebound(self, mod: str, name: str, rebound: list[str], own: str | None) -> str | None:
        """A module-level name that functions rebind (``global x; x = ...``): unknown before the first walk. After
        it, the module-level value when no function the walk ran rebinds it; else one of the values those that ran
        give it, each evaluated there, and the module-level value too unless one of them surely ran (at start-up
        or every step): ``_ATTN_DP_SIZE = None`` is a placeholder that ``initialize_dp_attention`` fills at start-up
        with ``dp_size if enable_dp_attention else 1``."""
        if self.ran is None:
            return None
        ran = [q for q in rebound if (mod, q) in self.ran]
        if not ran:
            return own
        functions = (self.p.facts(mod) or {}).get("functions", {})

        def given() -> str | None:
            found = [] if any((mod, q) in self.surely for q in ran) else [own]
            for q in ran:
                src = self._source_there(mod, functions.get(q), None, name)
                if src is None:
                    return None
                found.extend(one_of_items(src))
            found = list(dict.fromkeys(found))
            return None if None in found else found[0] if len(found) == 1 else one_of(found)
        return self._kept(self._imported, (mod, name, "rebound", self.env.phase, self._filtering > 0), lambda: None,
                          given)

PHASE_MEMBERS = {"decode": ("DECODE",), "prefill": ("EXTEND", "PREFILL")}
ALL_PHASE_MEMBERS = frozenset(m for ms in PHASE_MEMBERS.values() for m in ms)


def index_constructions(entries: dict[str, Any], mod: str, f: dict[str, Any]) -> None:
    """A module's functions by the class names they construct (``ParsedIndex``)."""
    for qual, fn in f["functions"].items():
        for c in fn.get("constructs", []):
            site = Func(mod, qual, (mod, fn["class"]) if fn.get("class") else None)
            made = fn["class"] if c[0] == "cls" and fn.get("class") else c[0]  # a classmethod's cls(...)
            entries.setdefault(made.split(".")[-1], set()).add(site)


def _while_set(name: str) -> list[list[Any]]:
    """The if-tests, as taken, that hold only while ``self.name`` holds a value other than None."""
    attr = f"self.{name}"
    return [[f"{attr} is not None", True], [f"{attr} is None", False], [attr, True], [f"not {attr}", False]]


def constructions(fn: dict[str, Any] | None, site: Func, owner: tuple[str, str]) -> list[list[Any]]:
    """The constructions of ``owner`` that ``fn`` (the function ``site``) makes, by the class's name or, in one of
    its classmethods, as ``cls(...)``: its ``constructs`` facts ``[name, args, kwargs, iters, tests]``."""
    return [c for c in (fn or {}).get("constructs", [])
            if c[0].split(".")[-1] == owner[1].split(".")[-1] or (c[0] == "cls" and site.bound == owner)]


def fn_default(program: Program, owner: tuple[str, str], param: str) -> str | None:
    """The literal default of a class's ``__init__`` parameter (``use_x=False``), through its bases."""
    f = program.facts(owner[0])
    init = (f or {}).get("functions", {}).get(f"{owner[1]}.__init__")
    return (init or {}).get("constants", {}).get(param)
