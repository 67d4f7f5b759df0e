"""What a function's callers hand one of its parameters, for the call graph's if-tests: the walk's calls of it, else
the calls in the parsed code, up through callers that pass the parameter on (a pass-through ``forward(*args,
**kwargs)`` too), with ``*``/``**`` spreads of known dicts and tuples. A mixin of the call graph's resolver, beside
``calls.CallValues``."""

from __future__ import annotations

import ast
from typing import Any

from smithbot.program.kinds import CONFIG, GIVEN
from smithbot.program.sources import element_of, element_split, is_literal
from smithbot.program.state import ParsedIndex, ResolverState
from smithbot.program.syntax import parse_expr, source
from smithbot.program.value import Func, Inst, Method, Value

# callers up from a parameter: a top-k's padding count reaches the mask six calls down from the model's MoE block,
# through a pass-through forward (sglang's MultiPlatformOp.forward)
_ARG_DEPTH = 6


def _passes_through(caller: dict[str, Any] | None, call: list[Any]) -> bool:
    """Whether ``call`` hands on the caller's own ``*args`` and ``**kwargs`` and nothing else, from a method that
    takes no other parameter (``def forward(self, *args, **kwargs): return self._forward_method(*args, **kwargs)``):
    the callee then gets what the caller's callers pass, in the same places."""
    spread = call[5].get("**") if set(call[5]) == {"**"} else None
    return caller is not None and spread is not None and caller.get("params", []) in ([], ["self"]) \
        and spread not in caller.get("locals", {})


class CallerArgs(ResolverState):
    """The resolver's methods that trace a parameter to its callers' arguments."""

    _call_index: ParsedIndex
    concrete: Any
    decisions: Any
    _kept: Any
    _local: Any
    _forward_method: Any
    _value_there: Any

    def call_arg(self, fn: dict[str, Any], param: str, depth: int = 0, mod: str | None = None) -> str | None:
        """A parameter's value from the calls the last round of walks made of the function: the literal every
        caller passes (or leaves to its constant default), traced through the callers' own parameters; an entry's
        parameter is what its caller leaves to the default. None when they differ or cannot be told."""
        key = self.qual_of.get(id(fn))
        if key is None and mod is not None:  # a function no walk ran: called only from code no step runs
            key = next(((mod, q) for q, g in ((self.p.facts(mod) or {}).get("functions") or {}).items() if g is fn),
                       None)
        callers = (self.callers or {}).get(key) if key else None
        if key and not callers and depth <= _ARG_DEPTH:  # (memoised: finding such callers and evaluating there costs)
            return self._kept(self._anywhere_args, (key, param, self.env.phase, self._filtering > 0), lambda: None,
                              lambda: self._from_callers(fn, param, depth, key, self._callers_anywhere(key)), True)
        return self._from_callers(fn, param, depth, key, callers)

    def _known_spread(self, node: Func, cf: dict[str, Any], kwargs: dict[str, str], param: str) -> dict[str, str]:
        """A call's keywords with ``param`` read from the local dict it spreads, where the facts could not tell its
        value ("?": one branch of ``kw = dict(p=...) if test else {}`` lacks it) and the defaults decide which
        branch it holds: its source there, or not passed at all."""
        if kwargs.get(param) != "?" or "**known" not in kwargs:
            return kwargs
        spread = self._spread(node, cf, kwargs["**known"], param)
        return kwargs if spread is None else {**{k: v for k, v in kwargs.items() if k != param}, **spread}

    def _spread(self, node: Func, cf: dict[str, Any], text: str, param: str) -> dict[str, str] | None:
        """What a caller's ``**name`` hands ``param``, when ``name`` is a local dict the defaults let be only literal
        dicts (``kw = {}``, then ``kw = dict(packed_out=p)`` under a test decided against it, or ``kw = dict(...)
        if test else {}`` with the test decided): ``{param: source}`` where one passes it, ``{}`` where none does;
        None when that cannot be told."""
        if not text.isidentifier() or text not in cf.get("flags", {}):
            return None
        owner = node.bound or ((node.mod, cf["class"]) if cf.get("class") else None)
        found: dict[str, str] = {}
        for src in self._local(node.mod, cf, owner, text):
            tree = parse_expr(src)
            while isinstance(tree, ast.IfExp):
                taken = self.decisions(node.mod, [[source(tree.test), True]], cf, klass=owner)[0]
                if taken not in (True, False):
                    return None
                tree = tree.body if taken else tree.orelse
            if isinstance(tree, ast.Dict) and all(isinstance(k, ast.Constant) for k in tree.keys):
                pairs = {k.value: source(v) for k, v in zip(tree.keys, tree.values)}  # type: ignore[union-attr]
            elif isinstance(tree, ast.Call) and source(tree.func) == "dict" and not tree.args \
                    and all(k.arg for k in tree.keywords):
                pairs = {k.arg: source(k.value) for k in tree.keywords}
            else:
                return None
            if param in pairs:
                if found:
                    return None  # (passed by more than one: not one value)
                found = {param: pairs[param]}
        return found

    def _from_callers(self, fn: dict[str, Any], param: str, depth: int, key: tuple[str, str] | None,
                      callers: Any) -> str | None:
        """The one value these calls (``(caller, call index)``) hand the parameter (``param[i]``: that element of
        it), see ``call_arg``."""
        if not callers or depth > _ARG_DEPTH or key is None:
            return None
        asked = param
        param, element = element_split(param)
        params = fn.get("params", [])
        skip = 1 if fn.get("class") and not any(d == "staticmethod" for d, _ in fn["decorators"]) else 0
        values = set()
        for node, i in sorted(callers, key=str):  # (a set: in one order whatever the hash seed, as memos fill)
            cf = (self.p.facts(node.mod) or {}).get("functions", {}).get(node.qual)
            call = cf["calls"][i] if cf and i < len(cf["calls"]) else None
            if call is not None and len(call) >= 6 and call[4] is None and _passes_through(cf, call):
                # `return self._forward_method(*args, **kwargs)`: the caller hands on what its own callers pass it
                # (those that call it on an object of the class it is bound to: MultiPlatformOp.forward serves
                # every op, and only the calls of a TopK reach TopK.forward_cuda)
                outer = self.qual_of.get(id(cf))
                got = self._from_callers(fn, asked, depth + 1, outer, [
                    (n, j) for n, j in sorted((self.callers or {}).get(outer) or (), key=str)
                    if node.bound is None or Inst(*node.bound) in self._callee_values(n, j)])
                if got is None:
                    return None
                values.add(got)
                continue
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
            kwargs = self._known_spread(node, cf, kwargs, param)
            if param not in kwargs and not 0 <= pos < len(args) and "**" in kwargs:
                spread = self._spread(node, cf, kwargs["**"], param)
                if spread is None:
                    return None  # it may be in the caller's **kwargs
                kwargs = {**kwargs, **spread}
            src = kwargs.get(param, args[pos] if 0 <= pos < len(args) else fn.get("constants", {}).get(param))
            if src is None and param in fn.get("defaults", {}):  # left to a default that is no literal
                default = fn["defaults"][param] if element is None else element_of(fn["defaults"][param], element)
                src = self._value_there(key[0], None, None, default) if default else None
                if src is not None:
                    values.add(src)
                    continue
            if src is None or src == "?":
                return None
            if element is not None:
                src = element_of(src, element)
                if src is None:
                    return None
            if not is_literal(src):
                base = element_split(src)[0]  # (src itself where no element is asked for)
                if element is not None and base in cf.get("params", ()) and base not in cf.get("flags", {}) \
                        and id(cf) not in self.entries:
                    src = self.call_arg(cf, src, depth + 1, node.mod)  # an element of the caller's own parameter
                elif src in cf.get("params", ()) and src not in cf.get("flags", {}):
                    if self.configs.get(id(cf)) == src:  # the model class's config: the model's config.json
                        src = CONFIG
                    elif id(cf) in self.entries:  # left to its constant default, or passed (not None)
                        src = cf.get("constants", {}).get(src, None if src in cf.get("defaults", {}) else GIVEN)
                    else:
                        src = self.call_arg(cf, src, depth + 1, node.mod)
                else:  # an expression of the caller's (server_args.attention_backend)
                    owner = node.bound or ((node.mod, cf["class"]) if cf.get("class") else None)
                    src = self._value_there(node.mod, cf, owner, src, several=element is not None)
                if src is None:
                    return None
            values.add(src)
        return values.pop() if len(values) == 1 else None

    def _callee_values(self, node: Func, i: int) -> list[Value]:
        """What the function ``node`` calls in its call ``i`` (the values of the called expression)."""
        cf = (self.p.facts(node.mod) or {}).get("functions", {}).get(node.qual)
        if not cf or i >= len(cf["calls"]):
            return []
        return self.expr(node.mod, cf.get("class"), node.bound, cf, cf["calls"][i][0])

    def _callers_anywhere(self, key: tuple[str, str]) -> list[tuple[Func, int]]:
        """The calls of a function in the modules parsed so far, as ``callers`` holds them, where the walk made none
        (``ScheduleBatch.init_new``, called by the scheduler's batch building, which no step runs): a call whose
        callee resolves to it, in its function bound to the live class that has it (a mixin's method is the
        scheduler's)."""
        name = key[1].split(".")[-1]
        out = []
        for mod, qual, i in self._call_index.get(self.p, name, []):
            cf = (self.p.facts(mod) or {}).get("functions", {}).get(qual)
            if cf is None:
                continue
            owners = self.concrete(mod, cf["class"]) if cf.get("class") else [None]
            for owner in owners[:1] if len(owners) == 1 else []:
                node = Func(mod, qual, owner)
                vals = self.expr(mod, cf["class"], owner, cf, cf["calls"][i][0])
                if any((t.mod, t.qual) == key
                       for t in self.targets([v for v in vals if isinstance(v, (Func, Method))])):
                    out.append((node, i))
        return out


def index_calls(entries: dict[str, Any], mod: str, f: dict[str, Any]) -> None:
    """A module's calls by the callee's last name, as (module, function, the call's index) (``ParsedIndex``)."""
    for qual, fn in f["functions"].items():
        for i, c in enumerate(fn["calls"]):
            entries.setdefault(c[0].split(".")[-1], []).append((mod, qual, i))
