"""How the call graph decides an if-test: the lookup of every name a test reads in its function's context (a call's
bound arguments, the function's locals in order, ``self``'s and other objects' attributes, a parameter traced to its
constructions or its callers, an entry's parameter, the model's config, the module's assignment, a predicate's value),
and the decisions made with it, memoised per round. A mixin of the call graph's resolver (``callgraph._Resolver``),
over the values of ``values.EngineValues``."""

from __future__ import annotations

from typing import Any, Callable

from smithbot.program.evaluate import Env, evaluate, value_of
from smithbot.program.kinds import CONFIG, EACH, GIVEN
from smithbot.program.sources import element_of, element_split, source_of
from smithbot.program.syntax import names_read, parse_expr
from smithbot.program.tensors import END
from smithbot.program.value import Class, Func, Inst, Value
from smithbot.program.values import ALL_PHASE_MEMBERS, PHASE_MEMBERS


class Decisions:
    """The resolver's methods that decide if-tests (see the module's docstring)."""

    env: Env
    entries: set[int]
    configs: dict[int, str]
    _decided: dict[tuple, bool | None]
    _locals: dict[tuple, list[str]]
    _filtering: int
    _work_out: Any
    owner_flags: Any
    predicate: Any
    object_flag: Any
    call_arg: Any
    module_value: Any
    param_defaults: Any
    _constructor_arg: Any
    method: Any
    mro: Any
    cls: Any
    p: Any
    qual_of: Any
    dtype_value: Any
    callees: Any
    expr: Any
    mode_members: Any
    live: set[tuple[str, str]]
    _made_modes: dict[tuple, frozenset[str]]
    _phase_sides: dict[tuple, bool | None]
    _setters_seen: int
    _any_setter: bool

    def undecided(self, mod: str, tests: list[list[Any]], fn: dict[str, Any] | None = None,
                  klass: tuple[str, str] | None = None, phased: bool = False) -> list[str]:
        """The if-tests the defaults leave open, as their source."""
        return [t for (t, _), d in zip(tests, self.decisions(mod, tests, fn, klass=klass, phased=phased)) if d is None]

    def cut(self, mod: str, tests: list[list[Any]], fn: dict[str, Any] | None = None,
            bound: dict[str, str] | None = None, klass: tuple[str, str] | None = None, phased: bool = False) -> bool:
        """Whether the serving defaults decide one of these if-tests against the branch taken. A name reads the
        call's constant arguments (``bound``: parameter -> source, for a factory's returns), then the function's
        own assignments (``w8a8 = quant_method == 'smooth_quant'``), then the module's. ``self.x`` reads what the
        class ``self`` is bound to (``klass``, else the function's own class) and its bases assign: a mixin's method
        sees the attributes of the class that mixes it in. ``phased``: the walk's own calls, where the phase decides
        a test the defaults leave open (``phase_side``)."""
        return any(d not in (None, EACH) and d != taken for d, taken in
                   zip(self.decisions(mod, tests, fn, bound, klass, phased), (t for _, t in tests)))

    def decisions(self, mod: str, tests: list[list[Any]], fn: dict[str, Any] | None = None,
                  bound: dict[str, str] | None = None, klass: tuple[str, str] | None = None,
                  phased: bool = False) -> list[bool | None]:
        out = []
        owner = klass or ((mod, fn["class"]) if fn and fn.get("class") else None)
        for test, _ in tests:
            key = (mod, id(fn), test, self.env.phase, owner)
            if not bound and key in self._decided:
                value = self._decided[key]
            else:
                value, final = self._work_out(  # (a cycle: undecided meanwhile; EACH: per layer)
                    ("decided", *key, tuple(sorted((bound or {}).items())), self._filtering > 0), lambda: None,
                    lambda: evaluate(test, self.env, self.look(mod, fn, owner, bound, test), each=True))
                if final and not bound and not self._filtering:
                    self._decided[key] = value
            out.append(self.phase_side(mod, fn, owner, test) if value is None and phased else value)
        return out

    def phase_side(self, mod: str, fn: dict[str, Any] | None, owner: tuple[str, str] | None, test: str
                   ) -> bool | None:
        """What the phase being walked decides of a test the defaults leave open: a step of the decode phase runs
        a decode batch. Where the calls on one side of the test make the step's batch one of this phase (they reach
        a method that sets its forward mode to the phase's member, as ``ScheduleBatch.prepare_for_decode`` does)
        and those on the other side make none, the step takes the first side; where one side makes a batch of
        another phase only, it takes the other (the scheduler's ``if new_batch is not None: ... else:
        update_running_batch(...)``). Calls under a test the defaults decide against (a mixed-chunk batch's decode
        half), and assignments under any test, are not counted. None where the phase does not decide it."""
        phase = self.env.phase
        where = self.qual_of.get(id(fn)) if fn is not None else None
        if phase not in PHASE_MEMBERS or where is None or not self._mode_setters():
            return None
        key = (mod, id(fn), test, phase, owner, len(self.live))
        if key not in self._phase_sides:
            node = Func(where[0], where[1], owner)
            made: dict[bool, set[str]] = {True: set(), False: set()}
            for callee, tests, *_ in fn["calls"]:
                sides = [taken for t, taken in tests if t == test]
                if sides and not self.cut(where[0], tests, fn, klass=owner):
                    for v in self.callees(node, fn, callee):
                        made[sides[0]] |= self._modes_made(v, 3)
            mine, found = set(PHASE_MEMBERS[phase]), None
            for side in (True, False):
                if not made[not side] and made[side]:
                    found = side if made[side] & mine else not side
            self._phase_sides[key] = found
        return self._phase_sides[key]

    def _modes_made(self, v: Value, depth: int) -> frozenset[str]:
        """The forward-mode members (``DECODE``, ``EXTEND``) that the function ``v``, or what it calls ``depth``
        calls down, sets on its object without an if-test: an assignment ``self.mode = Enum.MEMBER`` of an enum
        with a member for each phase."""
        key = (v, depth, len(self.live))  # (no cycle: each call down asks one depth less)
        if key in self._made_modes:
            return self._made_modes[key]
        if not isinstance(v, Func):
            return frozenset()
        f = self.p.facts(v.mod)
        fn = f["functions"].get(v.qual) if f else None
        if fn is None:
            return frozenset()
        out: set[str] = set()
        if fn.get("class"):
            for entries in (self.cls(v.mod, fn["class"]) or {}).get("flags", {}).values():
                for src, method, tests in entries:
                    head, _, member = src.rpartition(".")
                    if method == v.qual and not tests and member in ALL_PHASE_MEMBERS and head \
                            and self._mode_enum(v.mod, fn, head):
                        out.add(member)
        if depth > 0:
            for callee, tests, *_ in fn["calls"]:
                if not self.cut(v.mod, tests, fn, klass=v.bound):
                    for t in self.callees(v, fn, callee):
                        out |= self._modes_made(t, depth - 1)
        self._made_modes[key] = frozenset(out)
        return self._made_modes[key]

    def _mode_setters(self) -> bool:
        """Whether some class parsed so far sets a forward mode in a method (else no phase decides a test)."""
        if not self._any_setter and self._setters_seen != self.p.parsed_count():
            self._setters_seen = self.p.parsed_count()
            self._any_setter = any(
                method and not tests and src.rpartition(".")[2] in ALL_PHASE_MEMBERS
                for _, f in self.p.parsed() for c in f.get("classes", {}).values()
                for entries in c.get("flags", {}).values() for src, method, tests in entries)
        return self._any_setter

    def _mode_enum(self, mod: str, fn: dict[str, Any], head: str) -> bool:
        """Whether ``head`` (``ForwardMode``) names the engine's forward-mode enum: an enum with a DECODE member."""
        vals = self.expr(mod, fn.get("class"), None, fn, head)
        return len(vals) == 1 and isinstance(vals[0], Class) and bool(self.mode_members(vals[0].mod, vals[0].qual))

    def look(self, mod: str, fn: dict[str, Any] | None, owner: tuple[str, str] | None,
             bound: dict[str, str] | None = None, test: str | None = None) -> Callable[[str], Any]:
        """What a name an if-test of ``fn`` (in ``mod``, ``self`` an instance of ``owner``) reads is assigned, for
        ``evaluate``: a call's constant argument (``bound``), the function's own flags, the attributes of ``self``
        and of other objects, a constructor's or a function's parameter traced to its callers, an entry's parameter,
        the module's assignment; a predicate's value for a call. At ``test``, a parameter the function assigns
        only after it is still the caller's argument."""
        flags = self.owner_flags(owner)
        local = set(fn.get("flags", {})) if fn else set()
        if fn is not None and test is not None and test in fn.get("before", {}):
            local = {k for k in local if k not in fn.get("params", ()) or k in fn["before"][test]}
        # at ``test``, a local's assignments after it do not count
        upto = (fn or {}).get("assigned_before", {}).get(test, {}) if test is not None else {}

        def look(name: str) -> Any:
            if name.endswith("(*defaults)"):  # a getter's own parameter defaults (evaluate's protocol)
                return self.param_defaults(mod, fn, name[:-len("(*defaults)")])
            if name.endswith(")"):  # a predicate's call: what it returns here
                return self.predicate(mod, fn, owner, name, outer=look, cached=not bound)
            base, i = element_split(name)
            if i is not None:  # one element of a tuple (state[1], prepare(...)[1])
                return self._element(mod, fn, owner, name, base, i, look, bound, local)
            if bound and name in bound:
                return bound[name]
            if name in local and fn is not None:
                if name in fn.get("filled", ()):
                    return None  # a collection filled after it is made (out = {}; out[k] = v)
                own = self._local(mod, fn, owner, name, upto.get(name))
                if own and not any(name in names_read(src) for src in own):
                    return own  # (x = x or default: the x it reads is the parameter)
            if name in flags:
                return flags[name]
            if name.endswith(".dtype") and fn is not None:  # a tensor's dtype, traced to where it is made
                dtype = self._traced_dtype(fn, name)
                if dtype is not None:
                    return f"torch.{dtype}"
            if "." in name and not (name.startswith("self.") and name.count(".") == 1):
                got = self.env_getter(mod, name)
                if got is None:
                    got = self.object_flag(mod, fn, owner, name)
                prop = self._property(mod, fn, owner, name) if got is None else None
                if prop is not None:  # what the property returns, the object bound to its self
                    found = self._returned(mod, fn, owner, parse_expr(f"{name}()"), prop, 0, look, not bound)
                    got = found[0] if found and len(found) == 1 else found or None
                return got
            if fn is not None and self.configs.get(id(fn)) == name:
                return CONFIG  # the model's config.json
            if fn is not None and owner and name in fn.get("params", ())[1:] and self._is_init(owner, fn):
                return self._constructor_arg(owner, fn["params"][1:], name)  # what the constructions pass
            if fn is not None and name in fn.get("params", ()) and id(fn) in self.entries \
                    and name not in fn.get("defaults", {}):
                # an entry's parameter: the caller passes what it must and leaves the rest to their constant
                # defaults (the scheduler's forward_batch_generation(batch))
                return fn.get("constants", {}).get(name, GIVEN)
            if fn is not None and name in fn.get("params", ()):
                return self.call_arg(fn, name, mod=mod)
            return self.module_value(mod, name)

        # what the lookup reads, for the memo of a predicate it is handed down to (``predicate``)
        look.context = (  # type: ignore[attr-defined]
            mod, id(fn), owner, tuple(sorted(bound.items())) if bound else None,
            test if fn is not None and test in fn.get("before", {}) else None)
        return look

    def _property(self, mod: str, fn: dict[str, Any] | None, owner: tuple[str, str] | None, name: str
                  ) -> Func | None:
        """The property ``name`` reads (``vllm_config.use_v2_model_runner``, of the one class its object is an
        instance of), as the function value ``predicate`` evaluates; else None."""
        head, _, attr = name.rpartition(".")
        vals = self.expr(mod, (fn or {}).get("class"), owner, fn, head)
        if len(vals) != 1 or not isinstance(vals[0], Inst):
            return None
        found = self.method(vals[0].mod, vals[0].qual, attr)
        f = self.p.facts(found[0].mod) if found else None
        decorators = {d.split(".")[-1] for d, _ in f["functions"][found[0].qual]["decorators"]} if f else set()
        return found[0] if decorators & {"property", "cached_property"} else None

    def env_getter(self, mod: str, name: str) -> str | None:
        """The source of ``envs.VLLM_X``, where ``envs`` is a module that declares ``VLLM_X`` in a dict of getters
        (``Program.env_getters``): the value the user sets, else what the getter's body gives in its module when
        the variable is unset. None where ``name`` is no such read or the value is not known."""
        head, _, var = name.rpartition(".")
        getter = self.p.env_getters().get(var)
        if getter is None or (self.p.facts(mod) or {}).get("imports", {}).get(head, head) != getter[0]:
            return None
        if var in self.env.env:
            return repr(self.env.env[var])
        return source_of(value_of(getter[1], self.env, self.look(getter[0], None, None)))

    def _traced_dtype(self, fn: dict[str, Any], name: str) -> str | None:
        """The dtype ``name`` (``x.dtype``, ``self.w.dtype``) names in ``fn``, as the tensor tracing finds it over every
        assignment in the function (an if-test's line is not known here: they must all agree)."""
        key = self.qual_of.get(id(fn))
        return self.dtype_value(key[0], key[1], END, name) if key else None

    def _element(self, mod: str, fn: dict[str, Any] | None, owner: tuple[str, str] | None, name: str, base: str,
                 i: int | str, look: Callable[[str], Any], bound: dict[str, str] | None, local: set[str]) -> Any:
        """The sources of element ``i`` of ``base`` (``name`` is ``base[i]``): of each tuple a call returns, of each
        source of a local or a bound argument, of what the callers pass a parameter."""
        if base.endswith(")"):
            return self.predicate(mod, fn, owner, name, outer=look, cached=not bound)
        if bound and base in bound:
            sources = [bound[base]]
        elif base in local and fn is not None:
            sources = self._local(mod, fn, owner, base)
        elif fn is not None and base in fn.get("params", ()) and id(fn) not in self.entries:
            return self.call_arg(fn, name, mod=mod)
        else:
            return None
        found = [element_of(src, i) for src in sources]
        return None if not found or None in found or name in found else found

    def _local(self, mod: str, fn: dict[str, Any], owner: tuple[str, str] | None, name: str,
               upto: int | None = None) -> list[str]:
        """A local's sources that the defaults let happen, in order: none under an if-test decided against it, and
        one that surely runs replaces those before it (``m = None``, then ``if cfg is not None: m = cfg.m()``). With
        ``upto``, only its first ``upto`` assignments (those before an if-test that reads it)."""
        key = (id(fn), owner, name, self.env.phase, self._filtering > 0, upto)
        if key in self._locals:
            return self._locals[key]

        def sources() -> list[str]:
            out: list[str] = []
            for src, tests in fn.get("assigned", {}).get(name, [[s, []] for s in fn["flags"][name]])[:upto]:
                held = self.decisions(mod, tests, fn, klass=owner) if tests else []
                if any(h not in (None, EACH) and h != taken for h, (_, taken) in zip(held, tests)):
                    continue
                out = [src] if all(h is not None and h is not EACH for h in held) else out + [src]
            return list(dict.fromkeys(out))

        # (a cycle: every source counts meanwhile)
        out, final = self._work_out(("local", *key), lambda: list(fn["flags"][name]), sources)
        if final:
            self._locals[key] = out
        return out

    def every_one(self, node: Func, fn: dict[str, Any], callee: str) -> bool:
        """Whether a call of ``self.attr`` that may go to several classes goes to each of them in some instances:
        every assignment of the attribute is decided, and one by a test that differs per instance (the MoE block
        in some layers, the dense MLP in the others)."""
        parts = callee.removesuffix("[]").split(".")
        owner = node.bound or ((node.mod, fn["class"]) if fn.get("class") else None)
        if parts[0] != "self" or len(parts) < 2 or owner is None:
            return False
        for m, q in self.mro(*owner):
            entries = (self.cls(m, q) or {}).get("attrs", {}).get(parts[1])
            if entries:
                f = self.p.facts(m) or {}
                held = [d for _, where, tests in entries
                        for d in self.decisions(m, tests, f.get("functions", {}).get(where), klass=owner)]
                return EACH in held and None not in held
        return False

    def _is_init(self, owner: tuple[str, str], fn: dict[str, Any]) -> bool:
        """Whether ``fn`` is the ``__init__`` that constructing ``owner`` runs."""
        init = self.method(*owner, "__init__")
        f = self.p.facts(init[0][1]) if init else None
        return f is not None and f["functions"].get(init[0][2]) is fn
