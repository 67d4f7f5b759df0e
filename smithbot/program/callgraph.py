"""A call graph from a model's code and the engine's per-step code down to Triton kernel launches, following the
dispatch that the target's declared serving defaults decide.

The graph is built on demand: it starts at the entry functions (the preset's model class ``__init__`` and
``forward``, and the target's per-step engine functions with their classes' ``__init__``), and parses each module
the first time a call resolves into it (``program.modules``, cached by content hash).

How a call is resolved (an abstract value per expression, see ``_Resolver.expr``; the lookups of names, classes and
registries are ``symbols.Symbols``, the if-test decisions ``decide.Decisions``, the values ``values.EngineValues``,
stores on other objects ``stores.ObjectStores``, what calls give ``calls.CallValues`` and what callers pass
``args.CallerArgs``):
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
- a constructor parameter through what the bound subclass hands ``super().__init__``, else its default; any
  parameter also through what the calls the last round of walks made of its function hand it;
- a module's lazy attribute (PEP 562) through what the module's ``__getattr__`` returns for its name.

A call whose receiver has no known type is not followed: guessing by the method's name alone (every live class's
``capture``) put the CUDA-graph capture under a MoE layer's top-k, and found nothing the typed rules miss on sglang,
lmdeploy or the demo.

Each call's enclosing if-tests are evaluated (``program.evaluate``); a test that the defaults decide against its
branch cuts the edge, an unknown one keeps it and costs a bit of uncertainty. The walk runs once per phase (decode,
prefill), since forward-mode predicates decide differently in each, and records for every kernel whether it is
reached inside a loop of the model's code (per layer) and its least uncertain path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smithbot.program.args import CallerArgs, index_calls
from smithbot.program.calls import CallValues
from smithbot.program.stores import ObjectStores, index_stores
from smithbot.program.decide import Decisions
from smithbot.program.evaluate import Env
from smithbot.program.kinds import INSTANCE_SOURCE
from smithbot.program.modules import Program
from smithbot.program.state import ParsedIndex
from smithbot.program.symbols import Symbols
from smithbot.program.tensors import TensorTypes
from smithbot.program.value import Class, Func, Getter, Inst, Kernel, Method, Module, Registry, Super, Value
from smithbot.program.values import EngineValues, constructions, index_constructions

_GETTERS = ("get", "__getitem__", "pop", "setdefault")
# an abstract value: Func(mod, qual, bound class or None) | Class(mod, qual) | Inst(mod, qual) | Method(mod, cls, name)
# | Module(mod) | Kernel(mod, name) | Registry(name) | Getter(name) | Super(mod, cls, (bound mod, bound qual)): see
# program.value (each is the tagged tuple it stands for: ("func", mod, qual, bound), ...)


# how likely the default path takes one open if-test (or one bit of a dispatch) that a path needs: about a third, as
# measured on both engines' possible glue runs against the ground truth (3 of 8 with one open test run by default,
# 5 of 119 with more; RESULTS.md), where an even guess would say a half
OPEN_ODDS = 1 / 3


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


class _Resolver(Symbols, Decisions, EngineValues, ObjectStores, CallValues, CallerArgs, TensorTypes):
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
        self._tables: dict[str, list[tuple[tuple[str, ...], Value]]] = {}  # (symbols.Symbols._entries)
        self._mro: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._memo: dict[tuple, tuple[list[Value], int | None]] = {}  # value, and the depth it was cut short at
        self._expr_cuts = 0
        # the expressions being worked out (-> their depth in that stack), and the shallowest of them a cycle
        # reached: a value found inside a cycle is kept only once its head is done
        self._active: dict[tuple, int] = {}
        self._low = 1 << 30
        self._prov: dict[tuple, tuple[Any, int]] = {}  # what a cycle's head still being worked out made meanwhile
        self._heads: dict[int, list[tuple]] = {}  # a head's depth -> the provisional values that read it
        self._made_modes: dict[tuple, frozenset[str]] = {}  # (decide._modes_made)
        self._phase_sides: dict[tuple, bool | None] = {}  # (decide.phase_side)
        self._setters_seen, self._any_setter = -1, False
        self._sites: dict[tuple, list[Value]] = {}
        self._concrete: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._decided: dict[tuple[str, int, str, str | None], bool | None] = {}
        self.at: Value | None = None  # the function whose calls are being resolved
        # a live class -> the functions seen constructing it (where its __init__ arguments come from)
        self.made_in: dict[tuple[str, str], set[Value]] = {}
        # what this round of walks constructs (the next round's live classes and made_in): a class only an earlier,
        # less decided round made (a base model's default layer type) does not stay live
        self.made_now: set[tuple[str, str]] = set()
        self.made_in_now: dict[tuple[str, str], set[Value]] = {}
        self._tracing = 0  # depth of constructor-argument tracing under way
        self._cut_short = 0  # how many times the tracing's depth limit cut a value short (see values._kept)
        self._guards_read = 0  # how many times a memo's cycle guard was read in its stead
        self._filtering = 0  # instance attributes' assignments being filtered by their if-tests (owner_flags)
        self._owner_flags: dict[tuple[str, str] | None, tuple] = {}  # per round (see values._kept)
        self._flag_home: dict[tuple[tuple[str, str], str], tuple[str, dict[str, Any] | None]] = {}  # per round
        self._predicates: dict[tuple, str | None] = {}  # a predicate call's value in its caller's context, per round
        self._locals: dict[tuple, list[str]] = {}  # a function's local flag -> the sources it may hold, per round
        self._objects: dict[tuple, tuple] = {}  # another object's attribute -> its sources, per round
        self._ctor_args: dict[tuple[tuple[str, str], str], tuple] = {}  # per round
        self._anywhere_args: dict[tuple, tuple] = {}  # a parameter from calls no walk made, per round
        self._imported: dict[tuple, tuple] = {}  # another module's name, evaluated where it is assigned, per round
        self._ctor_index = ParsedIndex(index_constructions)  # class name -> functions constructing one
        self._call_index = ParsedIndex(index_calls)  # a callee's last name -> (module, function, call)
        self._sets_index = ParsedIndex(index_stores)  # an attribute -> who stores it on other objects
        self._off_path: dict[tuple[str, int, int], bool] = {}  # a method name -> whether no live class has it
        # the functions the last round of walks visited (None in the first round), and those this round visits: an
        # attribute its class's __init__ sets keeps only the other assignments made in functions a walk reaches
        # (MultiPlatformOp's forward method, which only torch.compile's capture sets back to forward_native)
        self.ran: frozenset[tuple[str, str]] | None = None
        # of those, the ones a walk reached with every if-test on the way decided: they surely run, at start-up or
        # every step, so what they assign replaces what __init__ left (``self.current_attention_backend = None``,
        # then the step's backend) and a module-level placeholder (``_ATTN_DP_SIZE = None``)
        self.surely: frozenset[tuple[str, str]] = frozenset()
        self.surely_now: set[tuple[str, str]] = set()
        self.entries: set[int] = set()  # the walk's entry functions (ids of their facts)
        self.configs: dict[int, str] = {}  # the model class's constructor (id of its facts) -> its config parameter
        # a function -> the calls of it a round of walks made (caller, index of the call in its facts); the last
        # round's, as ``ran``: where a parameter's value comes from
        self.callers: dict[tuple[str, str], set[tuple[Value, int]]] | None = None
        self.callers_now: dict[tuple[str, str], set[tuple[Value, int]]] = {}
        self.qual_of: dict[int, tuple[str, str]] = {}  # id of a function's facts -> (module, qualname)
        self.bound_of: dict[tuple[str, str], tuple[str, str] | None] = {}  # a visited function -> its self's class
        self.visited: set[tuple[str, str]] = set()
        self._attrs_traced: set[tuple[tuple[str, str], str]] = set()  # (tensors.TensorTypes)

    def reset(self) -> None:
        """Forget what depends on the live classes (they grew)."""
        self._memo, self._sites, self._concrete, self._decided = {}, {}, {}, {}
        self._owner_flags, self._ctor_args, self._flag_home, self._predicates, self._locals = {}, {}, {}, {}, {}
        self._objects, self._anywhere_args, self._imported = {}, {}, {}
        self._prov, self._heads, self._made_modes, self._phase_sides = {}, {}, {}, {}

    def attr(self, v: Value, name: str, depth: int) -> list[Value]:
        if isinstance(v, Module):
            return self.symbol(v.mod, name, depth + 1)
        if isinstance(v, (Class, Inst)):
            mod, qual = v.mod, v.qual
            if isinstance(v, Inst):
                made, sure = [], False
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
                            # a base's hint (`backend: BaseCudaGraphBackend`) declares; a subclass's __init__ that
                            # surely assigns the attribute gives what it holds
                            if not (sure and w is None) and not self.cut(m, tests, where):
                                made.append((m, q, t, where))
                        sure = sure or any(w and w.endswith("__init__") and not tests for _, w, tests in entries)
                if made:
                    # a field that every construction the walk saw passes holds what they pass, not any instance
                    # of its declared type (``AttentionBackends(attn_backend=attn_backend)``)
                    passed = self.field_passed((mod, qual), name, depth) \
                        if all(fn is None for *_, fn in made) else None
                    if passed:
                        return passed
                    return list(dict.fromkeys(w for m, q, t, fn in made
                                              for w in self.expr(m, q, (mod, qual), fn, t, depth + 1)))
                passed = self.field_passed((mod, qual), name, depth)  # a field of no class type (backend: object)
                if passed:
                    return passed
            for m, q in self.mro(mod, qual):
                c = self.cls(m, q)
                if c and name in c["registries"]:
                    return [Registry(name)]
                f = self.p.facts(m)
                if f is not None and f"{q}.{name}" in f["classes"]:
                    return [Class(m, f"{q}.{name}")]
            if isinstance(v, Class) and self.enum(mod, qual) and any(
                    name in (self.cls(m, q) or {}).get("assigned_at", {}) for m, q in self.mro(mod, qual)):
                return [Inst(mod, qual)]  # an enum member (cls.NONE): an instance of its class
            found = self.method(mod, qual, name)
            f = self.p.facts(found[0].mod) if found else None
            deco = {d.split(".")[-1] for d, _ in f["functions"][found[0].qual]["decorators"]} if f else set()
            if found and isinstance(v, Inst) and deco & {"property", "cached_property"}:
                return self.returns(found[0], depth + 1)  # self.model_runner: what the property returns
            if found and isinstance(v, Class) and deco & {"classmethod", "staticmethod"}:
                return found  # Fp8Config.from_config: that class's own, not a subclass's override
            if found:
                return [Method(mod, qual, name)]
            return []
        if isinstance(v, Registry) and name in _GETTERS:
            return [Getter(v.name)]
        if isinstance(v, Registry):  # QUANTIZATION_METHODS[name].from_config: the attribute of what it holds
            return [w for t in self.registered(v.name) if isinstance(t, Class) for w in self.attr(t, name, depth + 1)]
        if isinstance(v, Super):  # the classes after this one in the bound class's method order
            chain = self.mro(*v.bound)
            after = chain[chain.index((v.mod, v.cls)) + 1:] if (v.mod, v.cls) in chain else self.mro(v.mod, v.cls)[1:]
            for m, q in after:
                f = self.p.facts(m)
                if f is not None and f"{q}.{name}" in f["functions"]:
                    return [Func(m, f"{q}.{name}", v.bound)]
        return []

    def field_passed(self, owner: tuple[str, str], name: str, depth: int) -> list[Value] | None:
        """What the constructions of ``owner`` the last round of walks made pass for its field ``name``, resolved
        where they are made; None when one of them leaves it out (or may, through ``**kwargs``)."""
        sites = (self.made_in or {}).get(owner)
        if not sites or self._deep(depth, 10):
            return None
        out: list[Value] = []
        for site in sorted(sites, key=str):
            fn = (self.p.facts(site.mod) or {}).get("functions", {}).get(site.qual)
            calls = constructions(fn, site, owner)
            if not calls:
                return None
            for _, _, kwargs, *_ in calls:
                if name not in kwargs:
                    return None
                out += self.expr(site.mod, fn["class"], site.bound, fn, kwargs[name], depth + 1)
        return list(dict.fromkeys(out)) or None

    # --- expressions -------------------------------------------------------------------------------------------
    def expr(self, mod: str, cls: str | None, bound: tuple[str, str] | None, fn: dict[str, Any] | None, text: str,
             depth: int = 0) -> list[Value]:
        """The abstract values of an expression text (``program.facts.expr_text``) in ``fn`` of class ``cls``
        (defined in ``mod``), whose ``self`` is an instance of ``bound``."""
        key = (mod, cls, bound, id(fn), text, self._filtering > 0)  # (kept apart while filtering: see owner_flags)
        got = self._memo.get(key)
        if got is not None and (got[1] is None or depth >= got[1]):
            return got[0]  # kept whole, or cut short by the depth limit and asked as deep or deeper
        cuts = self._expr_cuts
        out, final = self._work_out(  # (a cycle: nothing more here, and what depends on it is provisional)
            key, list, lambda: self._expr(mod, cls, bound, fn, text, depth) if not self._deep(depth, 14) else [])
        if final:
            self._memo[key] = (out, depth if self._expr_cuts != cuts else None)
        return out

    def _deep(self, depth: int, limit: int) -> bool:
        """Whether ``depth`` is past ``limit``: what is worked out above is then cut short, and its memo holds only
        for askers as deep or deeper."""
        if depth > limit:
            self._expr_cuts += 1
            return True
        return False

    def _expr(self, mod: str, cls: str | None, bound: tuple[str, str] | None, fn: dict[str, Any] | None, text: str,
              depth: int) -> list[Value]:
        parts = _split(text)
        head, called = parts[0]
        me = bound or ((mod, cls) if cls else None)
        if head == "self" and me:
            vals: list[Value] = [Inst(*me)]
        elif head == "cls" and me:
            vals = [Class(*me)]
        elif head == "super" and cls:
            # the base's methods, with self still the instance it is bound to (a subclass's attributes and
            # constructor arguments stay in view)
            vals = [Super(mod, cls, me or (mod, cls))]
            called = []
        elif head.startswith("abs:"):  # imported inside the function (facts._abs)
            vals = self.symbol_abs(head[4:].replace("/", "."))
        elif fn is not None and (head in fn["locals"] or head in fn.get("params", ())):
            # a parameter's value from the caller, and whatever the function assigns to the name
            vals, every = self.param(mod, cls, bound, fn, head, depth) if head in fn.get("params", ()) else ([], False)
            # a type hint stands for the value only where the callers' arguments do not tell it (a hint's base
            # class, MoeQuantInfo, does not have the fields of the TritonMoeQuantInfo every caller passes)
            hint = fn.get("annotated", {}).get(head) if every and vals else None
            vals += [w for t, tests in fn["locals"].get(head, [])
                     if t != text and t != hint and not self.cut(mod, tests, fn, klass=bound)
                     for w in self.expr(mod, cls, bound, fn, t, depth + 1)]
        else:
            vals = self.symbol(mod, head, depth + 1)
        for args in called:
            vals = self.call(vals, depth + 1, self._constants(mod, bound or ((mod, cls) if cls else None), fn, vals,
                                                              args))
        for name, called in parts[1:]:
            vals = [w for v in vals for w in self.attr(v, name, depth + 1)]
            for args in called:
                vals = self.call(vals, depth + 1, self._constants(mod, bound or ((mod, cls) if cls else None), fn,
                                                                  vals, args))
        return list(dict.fromkeys(vals))

    def _constants(self, mod: str, owner: tuple[str, str] | None, fn: dict[str, Any] | None, vals: list[Value],
                   args: str) -> str:
        """A call's argument texts as the constants they are in the caller (``rope_scaling=rope_scaling``, the
        caller's own parameter, is the model config's None), for a function the call runs; the caller's ``self`` as
        ``__instance__('mod', 'Cls')`` (a callee may ask ``isinstance`` of it: ``get_quant_method(self, prefix)``);
        an argument that cannot be told is ``?`` (its text would mean the callee's own name there)."""
        if not args or not any(isinstance(v, (Func, Method)) for v in vals):
            return args
        out = []
        for a in _arguments(args):
            key, eq, value = a.partition("=")
            named = bool(eq) and key.strip().isidentifier() and not value.startswith("=")
            src = value.strip() if named else a.strip()
            if src == "self" and owner:
                const = f"{INSTANCE_SOURCE}({owner[0]!r}, {owner[1]!r})"
            elif src.startswith(f"{INSTANCE_SOURCE}("):  # handed on again (a factory forwarding its caller's self)
                const = src
            else:
                const = self._value_there(mod, fn, owner, src) if src and src != "?" else None
            out.append(f"{key.strip()}={const or '?'}" if named else (const or "?"))
        return ", ".join(out)

    def param(self, mod: str, cls: str | None, bound: tuple[str, str] | None, fn: dict[str, Any], name: str,
              depth: int) -> tuple[list[Value], bool]:
        """A parameter's value: for a constructor, what the bound subclass's constructor hands ``super().__init__``
        for it (Qwen3MoeModel passes decoder_layer_type=Qwen3MoeDecoderLayer to Qwen2MoeModel); else its default,
        and what the function's callers pass (``passed``). With it, whether that is all it can be."""
        if bound and cls and bound != (mod, cls):
            for m, q in self.mro(*bound):
                if (m, q) == (mod, cls):
                    break
                f = self.p.facts(m)
                init = f["functions"].get(f"{q}.__init__") if f else None
                if init and name in init.get("super_kwargs", {}):
                    return self.expr(m, q, bound, init, init["super_kwargs"][name], depth + 1), True
        passed, every = self.passed(fn, name, depth)
        default = fn.get("defaults", {}).get(name)
        if every or not default:  # every caller passes it: the default never holds
            return passed, every
        return self.expr(mod, cls, bound, None, default, depth + 1) + passed, False

    def passed(self, fn: dict[str, Any], name: str, depth: int) -> tuple[list[Value], bool]:
        """What the calls the last round of walks made of ``fn`` hand its parameter ``name``, each argument resolved
        in its caller (``model_forward(self.patched_model, ...)``: the model, or the graph runner wrapping it), and
        whether every one of those calls passes it."""
        key = self.qual_of.get(id(fn))
        callers = (self.callers or {}).get(key) if key else None
        params = fn.get("params", [])
        if not callers or name not in params or self._deep(depth, 10):
            return [], False
        method = fn.get("class") and not any(d == "staticmethod" for d, _ in fn["decorators"])
        pos = params.index(name) - (1 if method else 0)
        out: list[Value] = []
        every = True
        for node, i in sorted(callers, key=str)[:8]:
            cf = (self.p.facts(node.mod) or {}).get("functions", {}).get(node.qual)
            call = cf["calls"][i] if cf and i < len(cf["calls"]) else None
            src = None
            if call is not None and len(call) >= 6 and call[4] is not None:
                src = call[5].get(name, call[4][pos] if 0 <= pos < len(call[4]) else None)
            if src and src != "?":
                out += self.expr(node.mod, cf["class"], node.bound, cf, src, depth + 1)
            else:
                every = False
        return out, every and len(callers) <= 8

    def call(self, vals: list[Value], depth: int, args: str = "") -> list[Value]:
        """What calling each value (with these constant arguments, if known) returns."""
        out: list[Value] = []
        for v in vals:
            if isinstance(v, Class):
                out.append(Inst(v.mod, v.qual))
            elif isinstance(v, (Func, Method)):
                for t in self.targets([v]):
                    out += self.returns(t, depth + 1, args)
            elif isinstance(v, Getter):
                out.append(Registry(v.name))
            elif isinstance(v, Registry):
                out += self.call(self.registered(v.name), depth)
        return out

    def returns(self, t: Value, depth: int, args: str = "") -> list[Value]:
        if not isinstance(t, Func) or self._deep(depth, 12):
            return []
        f = self.p.facts(t.mod)
        fn = f["functions"].get(t.qual) if f else None
        if fn is None:
            return []
        static = any(d == "staticmethod" for d, _ in fn["decorators"])
        bound = _bind(fn, args, t.bound is not None and not static)
        # a parameter the factory hands on to another factory carries the caller's constant argument with it (one
        # not known stays unknown: ``super().get_quant_method(layer, prefix)`` with only ``layer`` known)
        params = fn.get("params", ())
        forwards = {f"{callee}()": f"{callee}({', '.join(bound.get(a, '?') if a in params else a for a in fargs)})"
                    for callee, fargs in fn.get("forwards", []) if any(bound.get(a, "?") != "?" for a in fargs)}
        out = []
        for text, tests in fn["returns"]:
            if self.cut(t.mod, tests, fn, bound):
                continue
            made = fn["locals"].get(text) if text not in fn.get("params", ()) else None
            # a local it returns: what it is assigned under the tests the call's arguments leave (get_rope's
            # rotary_emb, a DualChunkRotaryEmbedding only for a dual-chunk config)
            for src in ([s for s, held in made if not self.cut(t.mod, held, fn, bound)] if made else [text]):
                out += self.expr(t.mod, fn["class"], t.bound, fn, forwards.get(src, src), depth + 1)
        if not out and fn.get("returns_hint") and fn["returns"] and all(
                text.endswith("()") and {type(v) for v in self.expr(t.mod, fn["class"], t.bound, fn, text[:-2],
                                                                   depth + 1)} == {Registry}
                for text, _ in fn["returns"]):
            # an entry of a registry that nothing the walk saw fills, made by name: an instance of the class the
            # return hint names (``def get_parser(name) -> ParserBase: return _PARSERS[name]()``)
            out = [Inst(v.mod, v.qual) for v in self.symbol(t.mod, fn["returns_hint"].removesuffix("()"), depth + 1)
                   if isinstance(v, Class)]
        return out

    def targets(self, vals: list[Value]) -> list[Value]:
        """The functions and kernels a call of these values runs (constructors included)."""
        out: list[Value] = []
        for v in vals:
            if isinstance(v, (Func, Kernel)):
                out.append(v)
            elif isinstance(v, Class):
                self.live.add((v.mod, v.qual))
                self.made_now.add((v.mod, v.qual))
                if self.at is not None:
                    self.made_in_now.setdefault((v.mod, v.qual), set()).add(self.at)
                out += self.method(v.mod, v.qual, "__init__")
            elif isinstance(v, Inst):
                for c in self.concrete(v.mod, v.qual):
                    out += self.method(*c, "forward") or self.method(*c, "__call__")
            elif isinstance(v, Method):
                for c in self.concrete(v.mod, v.cls):
                    out += self.method(*c, v.name)
            elif isinstance(v, Registry):
                out += self.targets(self.registered(v.name))
        return list(dict.fromkeys(out))

    def callees(self, node: Func, fn: dict[str, Any], callee: str) -> list[Value]:
        """The functions and kernels a call names, a bound method's on each live class it may be, without making
        anything live (a cut call's, for its reason)."""
        out: list[Value] = []
        for v in self.expr(node.mod, fn["class"], node.bound, fn, callee.removesuffix("[]")):
            if isinstance(v, (Func, Kernel)):
                out.append(v)
            elif isinstance(v, Method):
                out += [m for c in self.concrete(v.mod, v.cls) for m in self.method(*c, v.name)]
        return list(dict.fromkeys(out))

    # --- one call site -----------------------------------------------------------------------------------------
    def site(self, node: Func, fn: dict[str, Any], callee: str) -> list[Value]:
        key = (node, callee, len(self.live))
        if key not in self._sites:
            self._sites[key] = self._site(node, fn, callee)
        return self._sites[key]

    def _site(self, node: Func, fn: dict[str, Any], callee: str) -> list[Value]:
        mod, bound, cls = node.mod, node.bound, fn["class"]
        if callee.endswith("[]"):  # kernel[grid](...) or REGISTRY[key](...)
            vals = self.expr(mod, cls, bound, fn, callee[:-2])
            return [v for v in vals if isinstance(v, Kernel)] + self.targets([v for v in vals
                                                                              if isinstance(v, Registry)])
        return self.targets(self.expr(mod, cls, bound, fn, callee))


def method_of(program: Program, mod: str, cls: str, name: str) -> Func | None:
    """A class's method, looked up through its bases, bound to the class (an entry of the walk)."""
    found = _Resolver(program, set(), Env({}, {})).method(mod, cls, name)
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


def _arguments(args: str) -> list[str]:
    """A call's argument texts, split at the commas outside brackets and strings."""
    out, depth, buf, quote = [], 0, "", ""
    for ch in args:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(buf)
            buf = ""
            continue
        buf += ch
    return [a for a in out + [buf] if a.strip()]


def _bind(fn: dict[str, Any], args: str, method: bool) -> dict[str, str]:
    """Parameter -> argument source for a call's constant arguments (``OpType.RMSNorm``)."""
    if not args:
        return {}
    params = fn.get("params", [])[1 if method else 0:]
    out: dict[str, str] = {}
    for i, a in enumerate(a.strip() for a in _arguments(args)):
        key, eq, value = a.partition("=")
        if eq and key.isidentifier():
            out[key] = value
        elif i < len(params):
            out[params[i]] = a
    return out


def _qual(v: Value) -> str:
    return v.qual if isinstance(v, (Func, Kernel)) else str(v)
