"""What tensor an expression of the engine's code holds on the default path: its dtype and, where its making says,
its shape, traced through the code the walks ran. A mixin of the call graph's resolver, asked after the walks (as the
if-tests around glue runs are): a cast counts as a launch only where the dtype it casts from differs, and a glue
task's inputs get the dtype and shape they have in serving.

How a value is traced (``tensor(mod, qual, line, src)``):
- a local name through the assignments that reach ``line`` in its function (both branches of an ``if``; a loop's
  body may or may not have run), a parameter through what every call the last round of walks made of the function
  hands it, in the caller's context;
- ``self.x`` through the assignments of the bound class and its bases (``self.weight = nn.Parameter(torch.empty(
  (n, d), dtype=torch.float32))``);
- a making call gives its dtype and shape (``torch.empty/zeros/ones/full/rand/randn(shape, dtype=D)``, ``*_like``),
  a cast its target (``.float()``, ``.to(torch.bfloat16)``, ``.to(w.dtype)``, ``.type_as(w)``), ``F.linear(x, w)``
  and ``x @ w`` the dtype of ``x``; views, elementwise ops and indexing keep their operand's dtype, and a view or an
  elementwise op its shape.

A tensor made with no device (``torch.tensor(lens, dtype=torch.int64)``), or moved by ``.cpu()``, is the host's until
``.to(device)`` or ``.cuda()`` moves it (``host``): its ops are no GPU work, and a glue task cannot take it.

A dim of a shape is the number the defaults make of it (``self.n_routed_experts`` is the model config's 256), or None.
What cannot be told is None, never a guess: a dtype no making or cast decides (a tensor the engine's caller hands in,
a model's default dtype), or values that differ between callers or branches.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, replace
from typing import Any

from smithbot.program.kinds import DTYPES
from smithbot.program.sources import is_literal
from smithbot.program.syntax import dotted_name, parse_expr
from smithbot.program.state import ResolverState
from smithbot.program.value import Class, Func

_DEPTH = 12  # values deep: a router's logits reach their making four calls up, each a caller's local or argument

CASTS = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64", "long": "int64",
         "int": "int32", "short": "int16", "bool": "bool"}  # tensor methods that cast to a dtype
_MAKERS = {"empty", "zeros", "ones", "full", "rand", "randn", "randint", "empty_strided", "arange", "tensor"}
_LIKE = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like"}
# keep the dtype and shape of their receiver (or first argument)
_SAME = {"contiguous", "clone", "detach", "sigmoid", "exp", "neg", "abs", "relu", "silu", "tanh", "sqrt", "rsqrt",
         "masked_fill", "masked_fill_", "clamp", "clamp_", "clamp_min", "clamp_max", "copy_", "fill_", "zero_",
         "mul_", "add_", "div_", "sub_", "sigmoid_", "exp_", "gelu", "softplus", "normalize", "dropout"}
# keep the dtype, not the shape
_SAME_DTYPE = {"view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "permute", "t",
               "expand", "expand_as", "narrow", "select", "index_select", "gather", "repeat", "repeat_interleave",
               "roll", "flip", "cumsum", "cumprod", "softmax", "log_softmax", "cat", "stack", "concat", "where",
               "movedim", "split", "chunk", "unbind", "pad"}
_MATMUL = {"linear", "matmul", "mm", "bmm", "addmm"}
_TENSOR_ATTR = {"data", "T", "mT"}
_LINEAR_PARAMS = ["in_features", "out_features"]  # torch.nn.Linear's first two
END = 1 << 30  # a line after every statement of a function


@dataclass(frozen=True)
class TensorType:
    dtype: str | None  # torch's name (float32, bfloat16...), None when not decided
    # each dim's number where decided (None where not); "..." first: leading dims of a rank not known; None: nothing
    shape: tuple[int | str | None, ...] | None = None
    made: str = ""  # the function that made or cast it, as ``module:qualname``
    # made on the host (a making call given no device, ``.cpu()``) and not moved since: its ops are no GPU work
    host: bool = False


_UNKNOWN = TensorType(None)
# the attribute being traced, met again in one of its own sources (``self.seq_lens = self.seq_lens + 1``): an update
# that keeps what the attribute's other sources give it, so a merge leaves it out
_ITSELF = TensorType(None, None, "itself")
# None: no tensor, so not what a tensor op reads (``self.seq_lens_cpu = None`` on another path); a merge leaves it out
_NONE = TensorType(None, None, "none")


def tensor_question(kind: str, line: int, src: str) -> str:
    """How a question is put to ``TensorTypes.answer`` and its answer kept: ``tensor@LINE:SRC`` (what tensor the
    expression holds at the line), ``dtype@LINE:SRC`` (what dtype it names) or ``value@LINE:SRC`` (the constant it
    is, as a literal's source)."""
    return f"{kind}@{line}:{src}"


def merge(types: list[TensorType]) -> TensorType:
    """What several possible values have in common: a dtype and dims all agree on, else None. A self-update
    (``_ITSELF``) and None add nothing; of self-updates alone, the merge is one."""
    types = [t for t in types if t is not _NONE]
    types = [t for t in types if t is not _ITSELF] or types[:1]
    if not types or types[0] is _ITSELF:
        return types[0] if types else _UNKNOWN
    dtypes = {t.dtype for t in types}
    shapes = {t.shape for t in types}
    shape = shapes.pop() if len(shapes) == 1 else None
    if shape is None and all(t.shape is not None for t in types) and len({len(t.shape) for t in types}) == 1:
        shape = tuple(d[0] if len(set(d)) == 1 else None for d in zip(*(t.shape for t in types)))  # type: ignore
    return TensorType(dtypes.pop() if len(dtypes) == 1 else None, shape, types[0].made if len(types) == 1 else "",
                      all(t.host for t in types))


class TensorTypes(ResolverState):
    """The resolver's tensor tracing (see the module's docstring)."""

    mro: Any
    cls: Any
    symbol: Any
    bound_of: dict[tuple[str, str], tuple[str, str] | None]
    _attrs_traced: set[tuple[tuple[str, str], str]]  # the ``self.x`` being traced (their class, their name)
    _value_there: Any  # (values.EngineValues)

    def tensor(self, mod: str, qual: str, line: int, src: str) -> TensorType:
        """The tensor ``src`` holds at ``line`` of function ``qual`` of ``mod``, as far as the engine's code tells."""
        node = parse_expr(src)
        if node is None:
            return _UNKNOWN
        found = self._tensor(mod, qual, self.bound_of.get((mod, qual)), line, node, 0)
        return _UNKNOWN if found in (_ITSELF, _NONE) else found

    def answer(self, mod: str, qual: str, question: str) -> dict[str, Any] | str | None:
        """A question of ``tensor_question``'s form answered: a tensor's ``{dtype, shape, made}`` (and ``host``, for a
        host tensor), a dtype, or a constant's literal source (None where the defaults do not make it one)."""
        kind, _, rest = question.partition("@")
        line, _, src = rest.partition(":")
        if kind == "dtype":
            return self.dtype_value(mod, qual, int(line), src)
        if kind == "value":
            fn = ((self.p.facts(mod) or {}).get("functions") or {}).get(qual)
            found = self._constant(mod, fn, self.bound_of.get((mod, qual)), src)
            return found if found is not None and is_literal(found) else None
        t = self.tensor(mod, qual, int(line), src)
        return {"dtype": t.dtype, "shape": list(t.shape) if t.shape is not None else None, "made": t.made,
                **({"host": True} if t.host else {})}

    def dtype_value(self, mod: str, qual: str, line: int, src: str) -> str | None:
        """The dtype an expression names (``torch.float32``, ``w.dtype``, a parameter every caller passes one)."""
        node = parse_expr(src)
        return None if node is None else self._dtype(mod, qual, self.bound_of.get((mod, qual)), line, node, 0)

    # --- the tracing -----------------------------------------------------------------------------------------
    def _fn(self, mod: str, qual: str) -> ast.FunctionDef | None:
        rel = self.p.modules.get(mod)
        return _functions(self.p.texts[rel]).get(qual) if rel in self.p.texts else None

    def _tensor(self, mod: str, qual: str, klass: tuple[str, str] | None, line: int, e: ast.expr,
                depth: int) -> TensorType:
        if depth > _DEPTH:
            return _UNKNOWN
        at = f"{mod}:{qual}"
        if isinstance(e, ast.Name):
            return merge([self._tensor(m, q, k, ln, v, depth + 1) for m, q, k, ln, v in
                          self._sources(mod, qual, klass, line, e.id, depth)] or [_UNKNOWN])
        if isinstance(e, ast.Attribute):
            return self._attribute(mod, qual, klass, line, e, depth)
        if isinstance(e, ast.Subscript):
            inner = self._tensor(mod, qual, klass, line, e.value, depth + 1)
            return inner if inner is _ITSELF else TensorType(inner.dtype, None, inner.made, inner.host)
        if isinstance(e, ast.IfExp):
            return merge([self._tensor(mod, qual, klass, line, b, depth + 1) for b in (e.body, e.orelse)])
        if isinstance(e, ast.Constant) and e.value is None:
            return _NONE
        if isinstance(e, ast.BinOp):
            return self._binop(mod, qual, klass, line, e, depth)
        if not isinstance(e, ast.Call):
            return _UNKNOWN
        name, recv = self._callee(mod, e)
        kw = {k.arg: k.value for k in e.keywords if k.arg}
        if recv is not None and isinstance(recv, ast.Name) and recv.id == "self" and klass is not None and e.args:
            width = self._out_features(klass, name)  # a linear layer of the module's: `self.gate(hidden_states)`
            if width is not None:
                x = self._tensor(mod, qual, klass, line, e.args[0], depth + 1)
                return TensorType(x.dtype, (*(x.shape[:-1] if x.shape is not None else ("...",)), width), x.made,
                                  x.host)
        if recv is not None:  # a tensor method
            return self._method(mod, qual, klass, line, e, name, recv, kw, depth)
        if name is None:
            return _UNKNOWN
        head, _, fname = name.rpartition(".")
        if name in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") and e.args:
            return replace(self._tensor(mod, qual, klass, line, e.args[0], depth + 1), host=False)
        if head != "torch" and head != "torch.nn.functional":
            return _UNKNOWN
        first = e.args[0] if e.args else kw.get("input")
        if fname in _MAKERS:
            d = self._dtype(mod, qual, klass, line, kw["dtype"], depth + 1) if "dtype" in kw else None
            shape = self._shape(mod, qual, klass, line, e.args if fname != "full" else e.args[:1], kw.get("size"))
            # torch's default device is the host, but for a torch module's tensors: the loader builds the model
            # under a device context, and moves it
            host = _host_device(kw["device"]) if "device" in kw else not self._torch_module(klass)
            return TensorType(d, shape, at, host) if d else TensorType(None, shape, host=host)
        if fname in _LIKE and first is not None:
            inner = self._tensor(mod, qual, klass, line, first, depth + 1)
            d = self._dtype(mod, qual, klass, line, kw["dtype"], depth + 1) if "dtype" in kw else inner.dtype
            return TensorType(d, inner.shape, at, _host_device(kw["device"]) if "device" in kw else inner.host)
        if fname in _MATMUL and first is not None:
            x = self._tensor(mod, qual, klass, line, first, depth + 1)
            if fname == "linear" and len(e.args) > 1:
                w = self._tensor(mod, qual, klass, line, e.args[1], depth + 1)
                rows = w.shape[0] if w.shape is not None and len(w.shape) == 2 else None
                lead = x.shape[:-1] if x.shape is not None else ("...",)  # (its leading dims, however many)
                return TensorType(x.dtype, (*lead, rows) if rows or x.shape is not None else None, x.made, x.host)
            return TensorType(x.dtype, None, x.made, x.host)
        if (fname in _SAME or fname in _SAME_DTYPE) and first is not None:
            if "dtype" in kw:
                return TensorType(self._dtype(mod, qual, klass, line, kw["dtype"], depth + 1), None, at)
            if isinstance(first, (ast.List, ast.Tuple)):  # torch.cat([a, b])
                joined = merge([self._tensor(mod, qual, klass, line, x, depth + 1) for x in first.elts])
                return joined if joined is _ITSELF else TensorType(joined.dtype, host=joined.host)
            inner = self._tensor(mod, qual, klass, line, first, depth + 1)
            return inner if fname in _SAME else TensorType(inner.dtype, None, inner.made, inner.host)
        return _UNKNOWN

    def _attribute(self, mod: str, qual: str, klass: tuple[str, str] | None, line: int, e: ast.Attribute,
                   depth: int) -> TensorType:
        """``x.data``: x; ``self.x`` (or ``batch.x``, ``batch`` hinted as an engine class): what the class's methods
        assign it, an update from itself (``_ITSELF``) left out."""
        if e.attr in _TENSOR_ATTR:
            return self._tensor(mod, qual, klass, line, e.value, depth + 1)
        owner = klass if isinstance(e.value, ast.Name) and e.value.id == "self" else \
            self._hinted_class(mod, qual, e.value.id) if isinstance(e.value, ast.Name) else None
        if owner is None:
            return _UNKNOWN
        key = (owner, e.attr)
        if key in self._attrs_traced:
            return _ITSELF
        self._attrs_traced.add(key)
        try:
            return merge([self._tensor(m, q, owner, ln, v, depth + 1)
                          for m, q, ln, v in self._self_sources(owner, e.attr)] or [_UNKNOWN])
        finally:
            self._attrs_traced.discard(key)

    def _method(self, mod: str, qual: str, klass: tuple[str, str] | None, line: int, e: ast.Call, name: str,
                recv: ast.expr, kw: dict[str, ast.expr], depth: int) -> TensorType:
        """A tensor method's result: a cast, a move, or an op that keeps its receiver's dtype (and shape)."""
        at = f"{mod}:{qual}"
        if name in CASTS:
            inner = self._tensor(mod, qual, klass, line, recv, depth + 1)
            return TensorType(CASTS[name], inner.shape, at, inner.host)
        if name in ("cpu", "cuda", "pin_memory"):
            return replace(self._tensor(mod, qual, klass, line, recv, depth + 1), host=name != "cuda")
        if name == "to":
            target = kw.get("dtype") or next((a for a in e.args if not devicey(a)), None)
            inner = self._tensor(mod, qual, klass, line, recv, depth + 1)
            moved = next((a for a in [*e.args, kw.get("device")] if a is not None and devicey(a)), None)
            host = inner.host if moved is None else _host_device(moved)
            if target is None:
                return replace(inner, host=host)  # .to(device): the same dtype
            d = self._dtype(mod, qual, klass, line, target, depth + 1)
            return TensorType(d, inner.shape, at, host) if d else _UNKNOWN
        if name == "type_as" and e.args:
            other = self._tensor(mod, qual, klass, line, e.args[0], depth + 1)
            inner = self._tensor(mod, qual, klass, line, recv, depth + 1)
            return TensorType(other.dtype, inner.shape, at, inner.host)
        if name in _SAME or name in _SAME_DTYPE:
            if "dtype" in kw:
                return TensorType(self._dtype(mod, qual, klass, line, kw["dtype"], depth + 1), None, at)
            inner = self._tensor(mod, qual, klass, line, recv, depth + 1)
            return inner if name in _SAME or inner is _ITSELF else TensorType(inner.dtype, None, inner.made,
                                                                              inner.host)
        return _UNKNOWN

    def _binop(self, mod: str, qual: str, klass: tuple[str, str] | None, line: int, e: ast.BinOp,
               depth: int) -> TensorType:
        """``a @ w``: a's dtype; two tensors of one dtype: that dtype; a float tensor and a number: the tensor's
        dtype and shape, as an integer tensor and an integer (not divided); anything else is type promotion: None."""
        numbers = [s for s in (e.left, e.right) if isinstance(s, ast.Constant) and isinstance(s.value, (int, float))
                   and not isinstance(s.value, bool)]
        got = [self._tensor(mod, qual, klass, line, s, depth + 1) for s in (e.left, e.right) if s not in numbers]
        if not got:
            return _UNKNOWN
        if all(t is _ITSELF for t in got) and not isinstance(e.op, (ast.MatMult, ast.Div)) \
                and all(isinstance(n.value, int) for n in numbers):
            return _ITSELF  # self.seq_lens + 1: the attribute's own dtype, whatever its other sources give
        if isinstance(e.op, ast.MatMult):
            return TensorType(got[0].dtype, None, got[0].made, got[0].host)
        if len(got) == 2:
            return merge(got) if got[0].dtype == got[1].dtype else _UNKNOWN
        t = got[0]
        floating = bool(t.dtype) and "float" in t.dtype  # type: ignore[operator]
        integral = bool(t.dtype) and not floating and t.dtype != "bool" and not isinstance(e.op, ast.Div) \
            and all(isinstance(n.value, int) for n in numbers)
        return t if floating or integral else _UNKNOWN

    def _dtype(self, mod: str, qual: str, klass: tuple[str, str] | None, line: int, e: ast.expr,
               depth: int) -> str | None:
        if depth > _DEPTH:
            return None
        if isinstance(e, ast.Attribute):
            if e.attr == "dtype":
                return self._tensor(mod, qual, klass, line, e.value, depth + 1).dtype
            dotted = dotted_name(e)
            if dotted and self._torch_name(mod, dotted.split(".")[0]) == "torch" and dotted.count(".") == 1:
                return DTYPES.get(e.attr)
            if isinstance(e.value, ast.Name) and e.value.id == "self" and klass is not None:
                got = {self._dtype(m, q, klass, ln, v, depth + 1) for m, q, ln, v in self._self_sources(klass, e.attr)}
                return got.pop() if len(got) == 1 else None
            return None
        if isinstance(e, ast.Name):
            got = {self._dtype(m, q, k, ln, v, depth + 1)
                   for m, q, k, ln, v in self._sources(mod, qual, klass, line, e.id, depth)}
            return got.pop() if len(got) == 1 else None
        if isinstance(e, ast.IfExp):
            got = {self._dtype(mod, qual, klass, line, b, depth + 1) for b in (e.body, e.orelse)}
            return got.pop() if len(got) == 1 else None
        return None

    def _constant(self, mod: str, fn: dict[str, Any] | None, klass: tuple[str, str] | None, src: str) -> str | None:
        """The constant ``src`` is in ``fn`` (a literal as it is), as a source; None where the defaults cannot
        evaluate it."""
        try:
            return src if is_literal(src) else self._value_there(mod, fn, klass, src)
        except (RecursionError, ValueError, TypeError, KeyError):
            return None

    def _out_features(self, klass: tuple[str, str], attr: str) -> int | None:
        """The width of what the module ``self.<attr>`` returns where it is a linear layer: the ``out_features`` its
        making passes, by that name or in that parameter's place (``torch.nn.Linear``'s, and a factory's that
        takes it under the same name), as the number the defaults make of it."""
        found = set()
        for m, where, _, v in self._self_sources(klass, attr):
            if not isinstance(v, ast.Call):
                return None
            kw = {k.arg: k.value for k in v.keywords if k.arg}
            src = kw.get("out_features")
            if src is None:
                params = _LINEAR_PARAMS if self._torch_name(m, (dotted_name(v.func) or ".").partition(".")[0]) \
                    else self._params(m, v.func)
                i = params.index("out_features") if "out_features" in params else len(v.args)
                src = v.args[i] if i < len(v.args) else None
            got = self._constant(m, (self.p.facts(m) or {}).get("functions", {}).get(where), klass,
                                 ast.unparse(src)) if src is not None else None
            found.add(int(got) if got is not None and re.fullmatch(r"\d+", str(got)) else None)
        return found.pop() if len(found) == 1 else None

    def _params(self, mod: str, func: ast.expr) -> list[str]:
        """The positional parameters of the function or class a call names (a class's ``__init__``'s), ``self``
        left out."""
        name = dotted_name(func)
        for v in (self.symbol(mod, name) if name else []):
            fn = None
            if isinstance(v, Func):
                fn = ((self.p.facts(v.mod) or {}).get("functions") or {}).get(v.qual)
            elif isinstance(v, Class):
                fn = ((self.p.facts(v.mod) or {}).get("functions") or {}).get(f"{v.qual}.__init__")
            if fn is not None:
                return [p for p in fn.get("params", []) if p != "self"]
        return []

    def _shape(self, mod: str, qual: str, klass: tuple[str, str] | None, line: int, args: list[ast.expr],
               size: ast.expr | None) -> tuple[int | None, ...] | None:
        """The dims a making call is given (``torch.empty((n, d), ...)`` or ``torch.empty(n, d)``), each the
        number the defaults make of it, or None."""
        dims = args[0].elts if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)) else \
            size.elts if isinstance(size, (ast.Tuple, ast.List)) else args
        if not dims or any(isinstance(d, ast.Starred) for d in dims):
            return None
        f = self.p.facts(mod) or {}
        fn = f.get("functions", {}).get(qual)
        out: list[int | None] = []
        for d in dims:
            got = self._constant(mod, fn, klass, ast.unparse(d))
            out.append(int(got) if got is not None and re.fullmatch(r"-?\d+", str(got)) else None)
        return tuple(out)

    # --- where a name's value comes from -----------------------------------------------------------------------
    def _sources(self, mod: str, qual: str, klass: tuple[str, str] | None, line: int, name: str, depth: int
                 ) -> list[tuple[str, str, tuple[str, str] | None, int, ast.expr]]:
        """The expressions a name may hold at ``line``: ``(module, function, bound class, line, expression)``, in
        its own function or, for a parameter it still holds, in each caller's."""
        fn = self._fn(mod, qual)
        if fn is None:
            return []
        params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        reaching = _reaching(fn.body, name, line, [None] if name in params else [])
        out: list[tuple[str, str, tuple[str, str] | None, int, ast.expr]] = []
        for v in reaching:
            if v is None:  # the parameter as the caller handed it
                got = self._from_caller(mod, qual, fn, name, depth)
                if got is None:
                    return []
                out += got
            elif isinstance(v, ast.expr):
                out.append((mod, qual, klass, v.lineno, v))
            else:
                return []  # unpacked, a loop's variable: not traced
        return out

    def _from_caller(self, mod: str, qual: str, fn: ast.FunctionDef, name: str, depth: int
                     ) -> list[tuple[str, str, tuple[str, str] | None, int, ast.expr]] | None:
        """What every call of the function the walks made hands parameter ``name``, each in its caller."""
        callers = (self.callers or {}).get((mod, qual))
        f = self.p.facts(mod) or {}
        facts = f.get("functions", {}).get(qual) or {}
        params = facts.get("params", [])
        if not callers or depth > _DEPTH or name not in params:
            return None
        skip = 1 if facts.get("class") and not any(d == "staticmethod" for d, _ in facts.get("decorators", [])) else 0
        out = []
        for node, i in sorted(callers, key=str):
            cf = (self.p.facts(node.mod) or {}).get("functions", {}).get(node.qual)
            call = cf["calls"][i] if cf and i < len(cf["calls"]) else None
            if call is None or len(call) < 6 or call[4] is None:
                return None
            pos = params.index(name) - skip
            src = call[5].get(name, call[4][pos] if 0 <= pos < len(call[4]) else None)
            if src is None:
                default = next((d for a, d in zip(reversed(fn.args.args), reversed(fn.args.defaults))
                                if a.arg == name), None)
                if default is None:
                    return None
                out.append((mod, qual, self.bound_of.get((mod, qual)), fn.lineno, default))
                continue
            e = parse_expr(src)
            if e is None or src == "?" or "**" in call[5]:
                return None
            out.append((node.mod, node.qual, node.bound, call[3], e))
        return out

    def _torch_module(self, klass: tuple[str, str] | None) -> bool:
        """Whether the class is a torch module (``nn.Module`` among its bases, through the engine's classes)."""
        return klass is not None and any(b.split(".")[-1] == "Module" and b.split(".")[0] in ("nn", "torch")
                                         for m, q in self.mro(*klass) for b in (self.cls(m, q) or {}).get("bases", []))

    def _hinted_class(self, mod: str, qual: str, name: str) -> tuple[str, str] | None:
        """The engine's class that parameter ``name`` of ``qual`` is hinted as (``batch: ScheduleBatch``, ``other:
        "ScheduleBatch"`` in a method of that class): its attributes are traced as that class's ``self``'s."""
        fn = ((self.p.facts(mod) or {}).get("functions") or {}).get(qual) or {}
        hint = (fn.get("annotated") or {}).get(name, "").removesuffix("()")
        found = [v for v in (self.symbol(mod, hint) if hint else []) if isinstance(v, Class)]
        return (found[0].mod, found[0].qual) if len(found) == 1 else None

    def _self_sources(self, klass: tuple[str, str], attr: str) -> list[tuple[str, str, int, ast.expr]]:
        """What the class and its bases assign ``self.<attr>``: (module, assigning function, line, expression)."""
        out = []
        for m, q in self.mro(*klass):
            for src, where, _ in ((self.cls(m, q) or {}).get("flags", {}).get(attr) or []):
                e = parse_expr(src)
                if e is not None and where:
                    fn = self._fn(m, where)
                    out.append((m, where, (fn.end_lineno or fn.lineno) + 1 if fn else 0, e))
            if out:
                return out  # a subclass's assignment over its base's
        return out

    def _callee(self, mod: str, call: ast.Call) -> tuple[str | None, ast.expr | None]:
        """(a torch function's full name, None) or (a method's name, its receiver); (None, None) otherwise."""
        dotted = dotted_name(call.func)
        if dotted:
            head, _, rest = dotted.partition(".")
            full = self._torch_name(mod, head)
            if full is not None:
                return (f"{full}.{rest}" if rest else full), None
        if isinstance(call.func, ast.Attribute):
            return call.func.attr, call.func.value
        return None, None

    def _torch_name(self, mod: str, head: str) -> str | None:
        """The torch module or name a module-level name imports (``F`` -> ``torch.nn.functional``), or None."""
        imported = ((self.p.facts(mod) or {}).get("imports") or {}).get(head)
        if head == "torch" or (imported or "").split(".")[0] == "torch":
            return imported or "torch"
        return None


def _reaching(body: list[ast.stmt], name: str, line: int, now: list[Any]) -> list[Any]:
    """The values a local may hold when ``line`` runs, after ``now`` at the start of ``body``: the expressions
    assigned to it before that line (None: still the parameter; "?": an assignment not traced, a tuple's or a loop
    variable's). Both branches of an ``if`` may have run; a loop's body may have run or not."""
    for s in body:
        if s.lineno >= line:
            break
        inside = line <= (s.end_lineno or s.lineno)
        if isinstance(s, ast.If):
            if inside:
                branch = s.body if s.body[0].lineno <= line <= (s.body[-1].end_lineno or 0) else s.orelse
                return _reaching(branch, name, line, now)
            now = _union(_reaching(s.body, name, END, now), _reaching(s.orelse, name, END, now))
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(s, (ast.For, ast.AsyncFor)) and any(isinstance(n, ast.Name) and n.id == name
                                                              for n in ast.walk(s.target)):
                now = _union(now, ["?"])
            after = _union(now, _reaching(s.body, name, END, now))  # after no pass, or some
            if inside:
                return _reaching(s.body, name, line, after)
            now = after
        elif isinstance(s, (ast.With, ast.AsyncWith, ast.Try)):
            blocks = [s.body, getattr(s, "orelse", []), getattr(s, "finalbody", [])] + [
                h.body for h in getattr(s, "handlers", [])]
            if inside:
                return _reaching(next((b for b in blocks if b and b[0].lineno <= line <= (b[-1].end_lineno or 0)),
                                      s.body), name, line, now)
            now = _reaching(s.body, name, END, now)
        elif inside:
            break  # the statement the line is part of has not finished
        elif isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                if isinstance(t, ast.Name) and t.id == name:
                    now = [s.value]
                elif any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                         for n in ast.walk(t)):
                    now = ["?"]
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and s.name == name:
            now = ["?"]
    return now


@functools.lru_cache(maxsize=256)
def _functions(text: bytes) -> dict[str, ast.FunctionDef]:
    """A file's functions by qualified name (``Class.method``), parsed once for every preset's walk."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, ast.FunctionDef] = {}

    def visit(body: list[ast.stmt], scope: str) -> None:
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[scope + n.name] = n  # type: ignore[assignment]
                visit(n.body, f"{scope}{n.name}.")
            elif isinstance(n, ast.ClassDef):
                visit(n.body, f"{scope}{n.name}.")
    visit(tree.body, "")
    return found


def _union(a: list[Any], b: list[Any]) -> list[Any]:
    return a + [x for x in b if not any(x is y for y in a)]


def _host_device(e: ast.expr) -> bool:
    """Whether a device argument names the host (``"cpu"``, ``torch.device("cpu")``)."""
    return "'cpu'" in ast.unparse(e) or '"cpu"' in ast.unparse(e)


def devicey(e: ast.expr) -> bool:
    """Whether a ``.to(...)`` argument names a device rather than a dtype (``x.device``, ``"cuda"``, ``device``)."""
    text = ast.unparse(e)
    return isinstance(e, ast.Constant) or any(w in text for w in ("device", "cuda", "cpu"))
