"""What a call gives, for the call graph's if-tests: what a predicate an if-test calls returns (each return its
if-tests leave open, over every function the call may reach, with the call's arguments bound; ``getattr(obj, "name",
default)`` taking the default when no class ``obj`` may hold sets ``name``), what a function's callers hand one of
its parameters (``args.CallerArgs``), and a getter's parameter defaults. A mixin of
the call graph's resolver, beside ``values.EngineValues``: it uses its ``expr``, ``targets``, ``look`` and the
values' lookups."""

from __future__ import annotations

import ast
import copy
import functools
import itertools
from typing import Any, Callable

from smithbot.program.evaluate import evaluate, value_of
from smithbot.program.kinds import (CONFIG, CONFIG_CLASSES, CONFIG_LOADERS, EACH_OF_SOURCE, INSTANCE_SOURCE,
                                    OBJECT, UNKNOWN_SOURCE, ModelConfig, Several, several)
from smithbot.program.sources import element_of, element_split, is_literal, source_of
from smithbot.program.syntax import parse_expr, source
from smithbot.program.state import ResolverState
from smithbot.program.value import Class, Func, Inst, Kernel, Method, Registry, Value


class CallValues(ResolverState):
    """The resolver's methods that evaluate calls (see the module's docstring)."""

    _off_path: dict[tuple[str, int, int], bool]
    _cut_short: int
    concrete: Any
    cls: Any
    mro: Any
    owner_flags: Any
    module_value: Any
    phase_member: Any
    _kept: Any
    _value_there: Any

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
        if not cached:  # a lookup handed down: memoised by what it reads (its ``context``), where that is known; a
            # caller's predicate it asks again is then a cycle (``_work_out``), not a new question at a lower depth
            context = getattr(outer, "context", None)
            if context is None:
                return self._predicate(mod, fn, klass, call, depth, outer, False)
            key = (*key, context)
        if key in self._predicates:
            return self._predicates[key]
        value, final = self._work_out(("predicate", *key), lambda: None,  # (a cycle: undecided meanwhile)
                                      lambda: self._predicate(mod, fn, klass, call, depth, outer, cached))
        if final:
            self._predicates[key] = value
        return value

    def _predicate(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, call: str,
                   depth: int, outer: Callable[[str], Any] | None, cached: bool) -> str | list[str] | None:
        node = parse_expr(call)
        element = None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call):  # prepare(...)[1]: one element
            node, element = node.value, element_split(call)[1]
        if depth > 3 or not isinstance(node, ast.Call):
            return None
        cls = (fn or {}).get("class")
        if _imported(self.p.facts(mod) or {}, source(node.func)) in CONFIG_LOADERS:
            return CONFIG  # AutoConfig.from_pretrained(path): the model's config.json
        found = self._attribute_test(mod, cls, klass, fn, node, read=True) \
            or self._instance_test(mod, cls, klass, fn, node, outer)
        if found is not None:
            return found
        held = self._held_callable(mod, fn, klass, node)
        if held is not None:  # `mode_check()`, where `mode_check = batch.mode.is_cuda_graph`: that call, asked
            out: list[str] = []
            for src in held:
                got = self.predicate(mod, fn, klass, src + call[len(source(node.func)):], depth + 1, outer, cached)
                if got is None:
                    return None
                out.extend(g for g in ([got] if isinstance(got, str) else got) if g not in out)
            return out[0] if len(out) == 1 else out
        vals = self.expr(mod, cls, klass, fn, source(node.func))
        if len(vals) == 1 and isinstance(vals[0], Class) and len(node.args) == 1 and not node.keywords \
                and self.enum(vals[0].mod, vals[0].qual):
            return self._member(vals[0], source(node.args[0]), outer)
        if not vals or any(not isinstance(v, (Func, Method, Registry)) for v in vals):
            return None
        funcs = [v for v in self.targets(vals) if isinstance(v, Func)]
        if not funcs or len(funcs) > 8:
            return None
        if all(self._returns_config(f) for f in funcs):
            return CONFIG
        out: list[str] = []
        for target in funcs:
            got = self._returned(mod, fn, klass, node, target, depth, outer, cached, element)
            if got is None:
                return None
            out.extend(g for g in got if g not in out)
        return out[0] if len(out) == 1 else out

    def _returns_config(self, func: Func) -> bool:
        """Whether a function says it returns the model's config.json: its return hint is transformers'
        ``PretrainedConfig`` (``def parse(self, model) -> PretrainedConfig``, a parser's base method, whatever
        registry entry the call goes to)."""
        f = self.p.facts(func.mod) or {}
        hint = (f.get("functions", {}).get(func.qual) or {}).get("returns_hint")
        return bool(hint) and _imported(f, hint.removesuffix("()")) in CONFIG_CLASSES

    def _held_callable(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, node: ast.Call
                       ) -> list[str] | None:
        """The dotted sources a local the call names is assigned (``mode_check = forward_batch.forward_mode.
        is_cuda_graph``, on the side of an ``if``-expression the defaults take), when each is a dotted name: the
        call is then a call of one of those. None otherwise (a parameter, or a local bound to anything else)."""
        if not isinstance(node.func, ast.Name) or fn is None or node.func.id in fn.get("params", ()):
            return None
        srcs = [t for t, tests in fn.get("locals", {}).get(node.func.id, [])
                if not self.cut(mod, tests, fn, klass=klass)]
        dotted = [t for t in srcs if "." in t and all(p.isidentifier() for p in t.split("."))]
        return dotted if dotted and len(dotted) == len(srcs) else None

    def _member(self, enum: Class, arg: str, outer: Callable[[str], Any] | None) -> list[str] | str | None:
        """``Backend(value)``: the members of the enum whose constant is what ``arg`` may be in the caller."""
        got = _sources(value_of(arg, self.env, outer or (lambda name: None)))
        if got is None:
            return None
        members = {_constant(src): name for m, q in self.mro(enum.mod, enum.qual)
                   for name, entries in (self.cls(m, q) or {}).get("flags", {}).items()
                   for src, where, _ in entries[:1] if where is None and is_literal(src)}
        found = [f"Enum.{members[c]}" for c in map(_constant, got) if c in members]
        if len(found) != len(got):
            return None
        return found[0] if len(found) == 1 else found

    def _returned(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, node: ast.Call,
                  func: Func, depth: int, outer: Callable[[str], Any] | None, cached: bool,
                  element: int | str | None = None) -> list[str] | None:
        """The constants one function (``func``) may return for the call ``node`` (``element``: the item of the tuple, or
        the key of the dict, it returns), as sources; None when one of them is not known. See ``predicate``."""
        f = self.p.facts(func.mod)
        target = (f or {}).get("functions", {}).get(func.qual)
        if target is None or not target.get("values"):
            return None
        args = self._call_args(target, node, func, outer)
        if args is None:
            return None
        theirs = func.mod

        def look(name: str) -> Any:
            if name.endswith(")"):  # a call the caller can name, else one of the function's own module
                got = self.predicate(mod, fn, klass, name, depth + 1, outer, cached)
                if got is None:
                    got = self.predicate(theirs, target, func.bound, name, depth + 1, look, False)
                return got
            if element is not None and element_split(name)[0] in target.get("flags", {}):
                # a local the returned tuple holds (return None, mode, batch): as the walk's context values it
                return _sources(value_of(name, self.env, self.look(theirs, target, func.bound)))
            if name in target.get("flags", {}) and name not in args:  # its own local (b = get_backend()), with
                # the call's arguments in its sources; not a collection filled after it is made
                if name in target.get("filled", ()):
                    return None
                return [_bound_source(src, bound) for src in self._local(theirs, target, func.bound, name)] or None
            head = name.partition(".")[0]
            if head != name and head in target.get("flags", {}) and head not in args:
                # an attribute of its own local (moe = get_flags().moe; return moe.enabled): read in the function
                return self.look(theirs, target, func.bound)(name)
            if name in (self.p.facts(theirs) or {}).get("assigns", {}):
                return self.module_value(theirs, name)
            return outer(name) if outer else None

        bound = tuple(args.items())
        context = getattr(outer, "context", None) if outer is not None else ()
        if context is not None:  # what ``look`` reads: the caller's context, this function and the call's arguments
            look.context = (  # type: ignore[attr-defined]
                context, mod, id(fn), klass, func, bound, depth, element, cached)

        def decide(src: str) -> bool | None:
            return evaluate(_bound_source(src, bound), self.env, look)

        out: list[str] = []
        for text, tests in target["values"]:
            held = [decide(t) for t, _ in tests]
            if any(h is not None and h != taken for h, (_, taken) in zip(held, tests)):
                continue  # a return the defaults rule out
            if element is not None:
                text = element_of(text, element)
                if text is None:
                    return None
            bound_src = _bound_source(text, bound)
            bound_ret = parse_expr(bound_src)
            if bound_ret is None:
                return None
            value = self._attribute_test(mod, (fn or {}).get("class"), klass, fn, bound_ret)
            got = [value] if value is not None else _sources(value_of(bound_src, self.env, look))
            if got is None and (isinstance(bound_ret, ast.Tuple) and bound_ret.elts
                                or self._objects_only(func, target, text)):
                got = [OBJECT]  # a tuple it builds, a function or class it hands back (a registry's entry): not None
            if got is None:
                return None
            out.extend(g for g in got if g not in out)
            if all(h is not None for h in held):
                return out  # a return that surely runs: the ones after it never do
        return out + ["None"] if "None" not in out and not target.get("leaves") else out  # (or it runs off its end)

    def _call_args(self, target: dict[str, Any], node: ast.Call, func: Func, outer: Callable[[str], Any] | None
                   ) -> dict[str, str] | None:
        """The sources the call ``node`` binds the function's parameters to (``self`` to the receiver, ``cls`` to the
        class; a parameter the call leaves to its constant default, that constant); None where one is left to a
        default that is no constant."""
        params = target.get("params", [])
        args = {}
        decorators = {d.split(".")[-1] for d, _ in target["decorators"]}
        if target.get("class") and params and "staticmethod" not in decorators:
            if "classmethod" in decorators:  # cls is the class (return cls.NONE: a member of it)
                args[params[0]] = target["class"].split(".")[-1]
            elif isinstance(node.func, ast.Attribute):
                # self is the receiver; a member of the forward-mode enum is the phase's
                args[params[0]] = self.phase_member([Inst(*func.bound)] if func.bound else []) \
                    or self._receiver(source(node.func.value), outer)
            params = params[1:]
        given = list(itertools.takewhile(lambda a: not isinstance(a, ast.Starred), node.args))
        args.update(zip(params, (source(a) for a in given)))
        args.update({k.arg: source(k.value) for k in node.keywords if k.arg in params})
        if len(given) < len(node.args) or any(k.arg is None for k in node.keywords):
            # f(x, **kwargs): the spread may pass any parameter not named: each is unknown
            args.update({p: UNKNOWN_SOURCE for p in params if p not in args})
        if any(p not in args and p not in target.get("constants", {}) for p in params):
            return None  # a parameter left to its default, unknown here
        args.update({p: v for p, v in target.get("constants", {}).items() if p not in args})
        return args

    def _objects_only(self, func: Func, target: dict[str, Any], text: str) -> bool:
        """Whether a function's returned expression is, in the function, surely a class or a function: one named, or
        what a registry holds for the serving settings (``cls._fused_funcs.get(key)``, when a function is
        registered under the settings' values). Only a lookup is asked (``.get(`` or a subscript, in the expression or
        in a local it names): resolving every return the defaults cannot value would cost the walk."""
        looked = [text, *(src for src, _ in target.get("locals", {}).get(text, []))]
        if not any(".get(" in src or "[" in src for src in looked):
            return False
        vals = self.expr(func.mod, target.get("class"), func.bound, target, text)
        return bool(vals) and all(isinstance(v, (Class, Func, Kernel))
                                  or isinstance(v, Registry) and self.registered(v.name) for v in vals)

    def _receiver(self, src: str, outer: Callable[[str], Any] | None) -> str:
        """The receiver of a method call as ``self`` is bound to it: where it may be None or one other value, that
        value (a method runs on no None: ``batch.spec_algorithm.is_none()`` of a field left None in an empty batch
        and set in every batch that runs); else its source."""
        value = value_of(src, self.env, outer or (lambda name: None))
        if isinstance(value, Several) and None in value.items:
            rest = _sources(several([v for v in value.items if v is not None]))
            if rest and len(rest) == 1:
                return rest[0]
        return src

    def _attribute_test(self, mod: str, cls: str | None, klass: tuple[str, str] | None, fn: dict[str, Any] | None,
                        node: ast.AST, read: bool = False) -> str | None:
        """``hasattr(obj, "name")`` -> "True" or "False", and ``getattr(obj, "name", default)`` -> the default's
        source, when every class ``obj`` may hold is known and all of them (hasattr: or none) define ``name``: a
        method, a class attribute or an attribute their methods set, through their bases; with ``read`` (the call
        is in ``fn`` itself), ``getattr`` where all of them have it is ``obj.name``, read as the caller reads it.
        None otherwise."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and len(node.args) == (3 if node.func.id == "getattr" else 2)
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            return None
        vals = self.expr(mod, cls, klass, fn, source(node.args[0]))
        name = node.args[1].value
        if not vals and self.ran is not None and self._off_path_method(name):
            # an object of no known class asked for a method that only classes no step makes define
            # (hasattr(self.model, "is_prefill_aware_swa"): the model is the preset's class, which lacks it)
            return "False" if node.func.id == "hasattr" else source(node.args[2])
        if not vals or any(not isinstance(v, Inst) for v in vals):
            return None
        has = {self._has_attribute((v.mod, v.qual), name) for v in vals}
        if node.func.id == "hasattr":
            return repr(has.pop()) if len(has) == 1 else None
        if has == {True} and read:
            return f"{source(node.args[0])}.{name}"  # getattr(model_runner, "prefill_aware_swa", False)
        return source(node.args[2]) if has == {False} else None

    def _instance_test(self, mod: str, cls: str | None, klass: tuple[str, str] | None, fn: dict[str, Any] | None,
                       node: ast.Call, outer: Callable[[str], Any] | None) -> str | None:
        """``isinstance(obj, A)`` (or ``(A, B)``, ``A | B``) -> "True" or "False", when every class ``obj`` may hold
        is known and the live classes each may be (itself, its live subclasses) all are, or none is, one of them
        (``isinstance(layer, LinearBase)`` in the ``get_quant_method(self, layer)`` a fused-MoE layer calls: the
        call binds ``layer`` to ``__instance__(...)``, read through ``outer``). None otherwise."""
        if not (isinstance(node.func, ast.Name) and node.func.id == "isinstance" and len(node.args) == 2):
            return None
        kinds, todo = [], [node.args[1]]
        while todo:
            k = todo.pop()
            if isinstance(k, ast.Tuple):
                todo += k.elts
            elif isinstance(k, ast.BinOp) and isinstance(k.op, ast.BitOr):
                todo += [k.left, k.right]
            else:
                found = self.expr(mod, cls, klass, fn, source(k))
                if not found or any(not isinstance(v, Class) for v in found):
                    return None
                kinds += [(v.mod, v.qual) for v in found]
        if isinstance(value_of(source(node.args[0]), self.env, outer or (lambda name: None)), ModelConfig):
            return self._config_instance(kinds)
        held_src = outer(node.args[0].id) if outer is not None and isinstance(node.args[0], ast.Name) else None
        bound = parse_expr(held_src) if isinstance(held_src, str) and held_src.startswith(INSTANCE_SOURCE) else None
        if isinstance(bound, ast.Call) and all(isinstance(a, ast.Constant) for a in bound.args):
            vals: list[Value] = [Inst(*(a.value for a in bound.args))]
        else:
            vals = self.expr(mod, cls, klass, fn, source(node.args[0]))
        if not vals or any(not isinstance(v, Inst) for v in vals):
            return None
        held = {any(k in self.mro(*c) for k in kinds) for v in vals for c in self.concrete(v.mod, v.qual)}
        return repr(held.pop()) if len(held) == 1 else None

    def _config_instance(self, kinds: list[tuple[str, str]]) -> str | None:
        """``isinstance(config, A)`` of the model's config.json, ``A`` a class of the engine's: transformers loads
        the config into the class registered for its ``model_type``, which is the engine's own only where the engine
        declares one for that type (``model_type = "deepseek_v3"`` in a config class); so the config is an instance
        of ``A`` only when such a class has ``A`` among its bases. None where the preset gives no ``model_type``."""
        mine = self.env.settings.get("model_type")
        if not isinstance(mine, str):
            return None
        own = [(m, q) for m in self.p.assigning("model_type", mine)
               for q, c in (self.p.facts(m) or {}).get("classes", {}).items()
               if any(where is None and is_literal(src) and _constant(src) == mine
                      for src, where, _ in (c.get("flags", {}).get("model_type") or [])[:1])]
        return repr(any(k in self.mro(*c) for c in own for k in kinds))

    def _off_path_method(self, name: str) -> bool:
        """Whether ``name`` is a method that some file of the target defines and no live class (one a walk made, or
        an entry's) has, through its bases."""
        key = (name, len(self.live), self.p.parsed_count())
        if key not in self._off_path:
            self._off_path[key] = self.p.defines_method(name) and not any(
                f"{q}.{name}" in (self.p.facts(m) or {}).get("functions", {})
                for c in self.live for m, q in self.mro(*c))
        return self._off_path[key]

    def _has_attribute(self, owner: tuple[str, str], name: str) -> bool:
        """Whether an instance of ``owner`` has the attribute ``name``: a method or class attribute of its method
        order, or a field, or an assignment to ``self.name`` that the serving defaults let run (one under an
        if-test decided against it, or in a method other than a constructor that no walk reached, does not)."""
        for m, q in self.mro(*owner):
            c = self.cls(m, q) or {}
            functions = (self.p.facts(m) or {}).get("functions", {})
            if f"{q}.{name}" in functions or any(e[1] is None for e in c.get("attrs", {}).get(name, ())):
                return True
            for where, tests in c.get("assigned_at", {}).get(name, ()):
                if where is None:
                    return True
                if self.ran is not None and not where.endswith("__init__") and (m, where) not in self.ran:
                    continue
                if not self.cut(m, tests, functions.get(where), klass=owner):
                    return True
        return False

    def param_defaults(self, mod: str, fn: dict[str, Any] | None, callee: str) -> list[str | None] | None:
        """The default sources of the parameters of the one function ``callee`` names in ``mod``, in order."""
        funcs = [v for v in self.expr(mod, (fn or {}).get("class"), None, fn, callee) if isinstance(v, Func)]
        if len(funcs) != 1:
            return None
        f = self.p.facts(funcs[0].mod)
        target = (f or {}).get("functions", {}).get(funcs[0].qual)
        if target is None:
            return None
        given = {**target.get("defaults", {}), **target.get("constants", {})}
        return [given.get(p) for p in target.get("params", [])]


@functools.lru_cache(maxsize=65536)
def _bound_source(src: str, args: tuple[tuple[str, str], ...]) -> str:
    """``src`` with its names replaced by these arguments' sources, as source (cached: the same test is bound to the
    same arguments many times over)."""
    node = parse_expr(src)
    return src if node is None else ast.unparse(_substitute(node, dict(args)))


def _substitute(node: ast.expr, args: dict[str, str]) -> ast.AST:
    """A copy of the tree with parameter names replaced by the caller's argument sources (parses are shared)."""
    return _Substitute(args).visit(copy.deepcopy(node))


class _Substitute(ast.NodeTransformer):
    def __init__(self, args: dict[str, str]) -> None:
        self.args = args

    def visit_Name(self, node: ast.Name) -> ast.AST:
        src = self.args.get(node.id)
        found = copy.deepcopy(parse_expr(src)) if src else None
        return found if found is not None else node


def _constant(src: str) -> Any:
    """A literal source's value, for comparing (``"auto"`` and ``'auto'`` are one); the source itself otherwise."""
    try:
        return ast.literal_eval(src)
    except (ValueError, SyntaxError):
        return src


def _sources(value: Any) -> list[str] | None:
    """The sources of a value that may be one of several (``Several``), each as ``source_of`` gives it."""
    found = [source_of(v) for v in (value.items if isinstance(value, Several) else [value])]
    if any(f is None for f in found):
        return None
    if isinstance(value, Several) and value.each:  # each of them, per instance: one source that says so
        return [source_of(value) or f"{EACH_OF_SOURCE}({', '.join(found)})"]  # type: ignore[arg-type]
    return found  # type: ignore[return-value]


def _imported(facts: dict[str, Any], name: str) -> str:
    """The absolute dotted name ``name`` stands for in a module, by its imports (``PretrainedConfig`` after ``from
    transformers import PretrainedConfig`` is ``transformers.PretrainedConfig``)."""
    head, _, rest = name.partition(".")
    full = facts.get("imports", {}).get(head, head)
    return f"{full}.{rest}" if rest else full
