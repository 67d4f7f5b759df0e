"""Torch glue on the default serving path: straight runs of small tensor ops that a fused kernel could replace
(``kind: fusion`` entries of ``smithbot scan``).

A run is found in the source of a function the call graph reaches (``PresetReach.functions``): consecutive simple
statements of one block whose calls and operators are torch tensor ops. Each op that launches a kernel counts one
launch (``torch.cumsum``, ``.copy_``, ``a + b`` on a tensor, ``x[idx]`` with a tensor index, ``x[i] = v``); views,
reshapes and shape reads are free; ``.item()``/``.tolist()`` are host syncs, listed apart; identity and membership
tests (``x is not None``) and arithmetic on ints, shapes and config values are host work, never a launch;
``.contiguous()`` launches only on what is known to be strided (a transpose, a strided slice). A cast (``.float()``,
``.to(dtype)``, ``.type_as(t)``) is recorded with the tensor it converts and the dtype it converts to: whether it
launches depends on that tensor's dtype, which ``scan.fusion`` asks the call graph (``program.tensors``). A run ends at a loop or
another compound statement (its bodies are runs of their own), at a Triton launch, and after a call that is neither a
tensor op nor a known-harmless builtin (it may launch anything); it goes on through an ``if`` whose branch is simple
statements, once per branch, each under its test (the defaults then keep the branch they take). A run of two launches
or more is a candidate; the ``TODO``/``FIXME`` comments near it that mention fusion, a kernel or Triton are kept with
it.

What is a tensor is decided from this function alone: names and attributes assigned from a tensor op, parameters
annotated ``Tensor``, and what the function uses as one (the first argument of ``torch.cumsum(x)``, the receiver of
``x.copy_``). Arithmetic on anything else (ints, shapes) is not counted.
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import Any

from smithbot.program.syntax import dotted_name
from smithbot.program.tensors import CASTS, DTYPES, devicey

GLUE_VERSION = "17"
MEMO = "#memo"  # file_glue's key for the ifs that fill what they test, beside the functions' runs
MIN_LAUNCHES = 2

# torch.<name>: launches a kernel; creation ops take sizes, not tensors, as their first argument
_CREATE = {"zeros", "ones", "full", "arange", "randn", "rand", "randint", "linspace", "zeros_like", "ones_like",
           "full_like"}
# torch.<name>: the host's data made a tensor (on the host unless a device is named): an upload, not a kernel
_UPLOAD_FN = {"tensor", "as_tensor"}
# a host tensor's methods that move it to the GPU: an upload (a copy from the host), not a kernel
_UPLOAD_M = {"to", "cuda", "pin_memory"}
_LAUNCH_FN = _CREATE | {
    "cumsum", "cumprod", "cat", "concat", "stack", "gather", "scatter", "scatter_add", "scatter_reduce",
    "index_select", "index_put", "index_add", "index_copy", "where", "clamp", "clip", "clamp_min", "clamp_max",
    "maximum", "minimum", "max", "min", "sum", "mean", "prod", "argmax", "argmin", "topk", "sort", "argsort",
    "softmax", "log_softmax", "sigmoid", "exp", "log", "abs", "neg", "sqrt", "rsqrt", "div", "mul", "add", "sub",
    "floor_divide", "remainder", "fmod", "masked_fill", "masked_select", "repeat_interleave", "searchsorted",
    "bucketize", "nonzero", "unique", "flip", "roll", "tril", "triu", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_not", "bitwise_and", "bitwise_or", "any", "all", "isin", "bincount",
    "diff", "pad", "ceil", "floor", "round", "sign", "tanh", "relu", "one_hot", "clone"}
_FREE_FN = {"empty", "empty_like", "empty_strided", "reshape", "flatten", "squeeze", "unsqueeze", "transpose",
            "permute", "narrow", "split", "chunk", "unbind", "broadcast_to", "device", "Size", "finfo", "iinfo",
            "is_tensor", "numel", "get_default_dtype", "no_grad", "inference_mode", "is_grad_enabled"}
_F_LAUNCH = {"pad", "softmax", "log_softmax", "silu", "gelu", "relu", "sigmoid", "one_hot", "normalize",
             "embedding", "softplus", "tanh", "dropout"}
# tensor methods: free (views, shapes), host syncs, and launches (only a tensor has these names)
_FREE_M = {"view", "reshape", "unsqueeze", "squeeze", "flatten", "unflatten", "transpose", "permute", "narrow",
           "split", "chunk", "t", "expand", "expand_as", "view_as", "select", "size", "dim", "numel", "stride",
           "data_ptr", "element_size", "is_contiguous", "unbind", "movedim", "get_device", "storage_offset"}
_SYNC_M = {"item", "tolist", "numpy"}
_LAUNCH_M = {"cumsum", "cumprod", "repeat_interleave", "masked_fill", "masked_select", "index_select", "gather",
             "scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill", "contiguous",
             "cuda", "cpu", "clamp", "clamp_min", "clamp_max", "new_zeros", "new_ones", "new_full", "new_tensor",
             "argmax", "argmin", "topk", "argsort", "softmax", "log_softmax", "sigmoid", "nonzero", "bincount",
             "floor_divide", "remainder", "logical_and", "logical_or", "logical_not", "diff", "rsqrt", "sqrt"}
# casts: a launch only where the tensor is not of that dtype already (decided by ``fusion``, through the engine)
_CAST_M = {**CASTS, "to": None, "type_as": None}
# names that other objects have too: a launch only on a known tensor
_AMBIGUOUS_M = {"sum", "max", "min", "mean", "sort", "clone", "repeat", "any", "all", "abs", "exp", "log", "neg",
                "eq", "ne", "lt", "gt", "le", "ge", "where", "flip", "unique", "add", "sub", "mul", "div", "fill",
                "copy", "round", "sign", "prod"}
# calls that launch nothing: builtins, logging, python containers' methods
_HARMLESS = {"len", "int", "float", "bool", "str", "min", "max", "range", "isinstance", "getattr", "hasattr",
             "setattr", "list", "tuple", "dict", "set", "enumerate", "zip", "print", "abs", "round", "divmod",
             "type", "super", "sorted", "any", "all", "next", "iter", "id", "hash", "repr", "format", "sum",
             "reversed", "map", "filter", "cdiv", "next_power_of_2", "ceil", "floor", "log2", "sqrt", "prod",
             "replace", "field", "cast"}
_HARMLESS_M = {"append", "extend", "insert", "items", "keys", "values", "get", "update", "pop", "setdefault",
               "join", "startswith", "endswith", "format", "lower", "upper", "strip", "debug", "info", "warning",
               "index", "count", "is_decode", "is_extend", "is_prefill", "is_idle", "is_cuda_graph",
               "is_target_verify", "is_draft_extend", "is_dummy_first"}
_HARMLESS_HEADS = {"logger", "logging", "math", "triton", "dataclasses", "np", "numpy", "os", "time", "itertools",
                   "functools", "warnings", "typing", "operator"}
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
        ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@",
        ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.USub: "neg",
        ast.Invert: "~"}
_INDEX_NAME = re.compile(r"(indices|_ids|_idx|_index)$")
_TODO = re.compile(r"\b(TODO|FIXME|XXX)\b.*")  # in a comment or a docstring
_ASKS = re.compile(r"fus|kernel|triton|launch", re.I)


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> torch dotted name, from the file's imports (``import torch.nn.functional as F``)."""
    out = {"torch": "torch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "torch":
                    out[a.asname or a.name.split(".")[0]] = a.name if a.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "torch" \
                and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


class _Function:
    """One function's glue runs."""

    def __init__(self, node: ast.FunctionDef | ast.AsyncFunctionDef, aliases: dict[str, str],
                 attributes: set[str] = frozenset(), module: set[str] = frozenset(),  # type: ignore[assignment]
                 helpers: dict[str, tuple[str, ...]] | None = None) -> None:
        self.aliases, self.tensors = aliases, {f"self.{a}" for a in attributes}
        self.host: set[str] = set()  # names of tensors on the host (``on_host``)
        self.module = module  # the file's module-level names: never a run's input
        self.helpers = helpers or {}  # the file's own glue helpers (``_helpers``): their ops count in a caller's run
        for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            if a.annotation is not None and "Tensor" in ast.unparse(a.annotation):
                self.tensors.add(a.arg)
        for sub in _own_nodes(node):  # what the function uses as a tensor
            if not isinstance(sub, ast.Call):
                continue
            full = self._torch(sub.func)
            if full and sub.args and full.split(".")[-1] in _LAUNCH_FN - _CREATE:
                first = sub.args[0]
                for e in (first.elts if isinstance(first, (ast.List, ast.Tuple)) else [first]):
                    if dotted_name(e):
                        self.tensors.add(dotted_name(e))  # type: ignore[arg-type]
            elif isinstance(sub.func, ast.Attribute) and (sub.func.attr in _LAUNCH_M | _SYNC_M | set(_CAST_M)
                                                          or _inplace(sub.func.attr)):
                recv = dotted_name(sub.func.value)
                if recv and not self._torch(sub.func.value):
                    self.tensors.add(recv)
        self.node = node
        self.runs: list[dict[str, Any]] = []

    def analysed(self) -> list[dict[str, Any]]:
        """The function's glue runs (worked out here: a helper's ops alone need no runs)."""
        self.block(self.node.body)
        return self.runs

    def _torch(self, func: ast.AST) -> str | None:
        """The torch dotted name of a callee (``F.pad`` -> ``torch.nn.functional.pad``), or None."""
        d = dotted_name(func)
        if not d:
            return None
        head, _, rest = d.partition(".")
        full = self.aliases.get(head)
        return (f"{full}.{rest}" if rest else full) if full else None

    # --- classification --------------------------------------------------------------------------------------
    def call(self, c: ast.Call) -> tuple[str, str]:
        """(kind, op name): kind is launch | free | sync | upload (the host's data made a tensor or copied up: a
        transfer, not counted) | other (harmless, not counted) | break."""
        if isinstance(c.func, ast.Subscript):
            return "break", "kernel[grid]"  # a Triton launch, or a registry's function
        full = self._torch(c.func)
        if full:
            parts = full.split(".")
            if parts[:3] == ["torch", "nn", "functional"] and len(parts) == 4:
                return ("launch" if parts[3] in _F_LAUNCH else "break"), parts[3]
            if len(parts) == 2:
                if parts[1] in _UPLOAD_FN:
                    return "upload", parts[1]
                if parts[1] in _LAUNCH_FN:
                    return "launch", parts[1]
                return ("free" if parts[1] in _FREE_FN else "other"), parts[1]
            if parts[1] in ("distributed", "ops", "nn"):
                return "break", full  # collectives, extension ops, modules
            return "other", full
        if isinstance(c.func, ast.Attribute):
            m, recv = c.func.attr, c.func.value
            tensor = self.is_tensor(recv)
            if m in _FREE_M or (m == "contiguous" and not _strided(recv)):
                return "free", m  # a view; or contiguous() of what is not known to be strided (a no-op then)
            if m in _SYNC_M:
                return "sync", f".{m}"
            if m in _UPLOAD_M and self.on_host(recv):
                return "upload", f".{m}"  # copied up (a transfer), or cast on the host: no kernel to fuse
            if m in _CAST_M:
                return ("launch" if self._cast(c) is None else "cast"), f".{m}"
            if m in _LAUNCH_M or _inplace(m) or (tensor and m in _AMBIGUOUS_M):
                return "launch", f".{m}"
            if m in _AMBIGUOUS_M or m in _HARMLESS_M or tensor or dotted_name(recv) in _HARMLESS_HEADS \
                    or (dotted_name(recv) or "").split(".")[0] in _HARMLESS_HEADS:
                return "other", m
            return "break", m
        name = dotted_name(c.func) or ""
        if name in self.helpers:
            return "helper", name
        if name in _HARMLESS or name[:1].isupper():  # builtins; a constructor (a dataclass of metadata)
            return "other", name
        return "break", name

    def _cast(self, c: ast.Call) -> dict[str, Any] | None:
        """A cast's record (``{line, op, of, to, to_src}``: the tensor it converts, the dtype it converts to, or the
        expression that names it), or None for a ``.to()`` that moves the tensor to a device (a copy: a launch)."""
        assert isinstance(c.func, ast.Attribute)
        m, kw = c.func.attr, {k.arg: k.value for k in c.keywords if k.arg}
        of = ast.unparse(c.func.value)
        if not isinstance(c.func.value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            of = f"({of})"  # (lens - 1).to(...)
        if m == "to":
            target = kw.get("dtype") or (c.args[0] if c.args else None)
            if target is None or "device" in kw or (target is not kw.get("dtype") and devicey(target)):
                return None
            dotted = dotted_name(target) or ""
            to = DTYPES.get(dotted.split(".")[-1]) if dotted.split(".")[0] in self.aliases \
                and self.aliases[dotted.split(".")[0]] == "torch" and dotted.count(".") == 1 else None
            return {"line": c.lineno, "op": ".to", "of": of, "to": to,
                    "to_src": None if to else ast.unparse(target)}
        if m == "type_as":
            return {"line": c.lineno, "op": ".type_as", "of": of, "to": None,
                    "to_src": f"{ast.unparse(c.args[0])}.dtype" if c.args else "?"}
        return {"line": c.lineno, "op": f".{m}", "of": of, "to": CASTS[m], "to_src": None}

    def reads(self, stmts: list[ast.stmt]) -> list[str]:
        """What a run reads that it did not make, in order: names bound before it (not the module's) and ``self``'s
        attributes: the values a glue task takes as its inputs."""
        bound: set[str] = set()
        out: list[str] = []
        for st in stmts:
            value = [st.value] if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and st.value else [st]
            for n in (x for v in value for x in ast.walk(v)):
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
                    src = f"self.{n.attr}"
                elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound \
                        and n.id not in self.module and n.id not in self.aliases and n.id != "self" \
                        and not hasattr(builtins, n.id):
                    src = n.id
                else:
                    continue
                if src not in out:
                    out.append(src)
            if isinstance(st, (ast.Assign, ast.AnnAssign)):
                for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                    bound.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        return out

    def on_host(self, e: ast.AST) -> bool:
        """Whether ``e`` is a tensor on the host: the host's data made a tensor with no device named
        (``torch.tensor(lens, dtype=torch.int64)``), or a name this function assigned one."""
        if isinstance(e, ast.Call):
            return self._torch(e.func) is not None and self.call(e)[0] == "upload" \
                and not any(k.arg == "device" for k in e.keywords)
        return dotted_name(e) in self.host

    def is_tensor(self, e: ast.AST) -> bool:
        if isinstance(e, (ast.Name, ast.Attribute)):
            return dotted_name(e) in self.tensors
        if isinstance(e, ast.Call):
            kind, name = self.call(e)
            return kind in ("launch", "cast", "helper", "upload") or (kind == "free" and name not in {
                "size", "dim", "numel", "stride", "data_ptr", "element_size", "is_contiguous", "device", "Size",
                "finfo", "iinfo", "get_device"})
        if isinstance(e, ast.Subscript):
            return self.is_tensor(e.value)
        if isinstance(e, ast.BinOp):
            return self.is_tensor(e.left) or self.is_tensor(e.right)
        if isinstance(e, ast.UnaryOp):
            return self.is_tensor(e.operand)
        if isinstance(e, ast.IfExp):
            return self.is_tensor(e.body) or self.is_tensor(e.orelse)
        return False

    def ops(self, e: ast.AST, out: list[tuple[str, str]]) -> None:
        """The ops of an expression in evaluation order (operands first), as (kind, name)."""
        if isinstance(e, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            inner: list[tuple[str, str]] = []
            for child in ast.iter_child_nodes(e):
                self.ops(child, inner)
            if any(k in ("launch", "sync", "break") for k, _ in inner):
                out.append(("break", "comprehension"))  # runs an unknown number of times
            return
        for child in ast.iter_child_nodes(e):
            self.ops(child, out)
        if isinstance(e, ast.Call):
            kind, name = self.call(e)
            if kind == "helper":  # the helper's own ops, in its order
                out.extend(("launch", f"{name}:{op}") for op in self.helpers[name])
            else:
                out.append((kind, name))
        elif isinstance(e, ast.BinOp) and any(self.is_tensor(x) and not self.on_host(x) for x in (e.left, e.right)):
            out.append(("launch", _OPS.get(type(e.op), "op")))  # (arithmetic on host tensors is host work)
        elif isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.Invert)) and self.is_tensor(e.operand):
            out.append(("launch", _OPS[type(e.op)]))
        elif isinstance(e, ast.Compare) and not all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                                                    for op in e.ops) \
                and any(map(self.is_tensor, [e.left, *e.comparators])):
            out.append(("launch", _OPS.get(type(e.ops[0]), "cmp")))  # `x is None`, `k in d`: host tests
        elif isinstance(e, ast.Subscript) and isinstance(e.ctx, ast.Load) and self._gathers(e):
            out.append(("launch", "[index]"))

    def _gathers(self, e: ast.Subscript) -> bool:
        """A subscript that gathers by an index tensor, not a view (slices, ints): a known tensor indexed by a
        tensor, or rows picked by something named as indices next to a slice (``req_to_token[fb.req_pool_indices,
        :n]``)."""
        parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        if self.is_tensor(e.value) and any(not isinstance(p, ast.Slice) and self.is_tensor(p) for p in parts):
            return True
        return any(isinstance(p, ast.Slice) for p in parts) and any(
            _INDEX_NAME.search(dotted_name(p) or "") for p in parts)

    # --- statements ------------------------------------------------------------------------------------------
    _SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Assert, ast.Pass, ast.Delete,
               ast.Raise, ast.Global, ast.Nonlocal)

    def simple(self, s: ast.stmt) -> list[tuple[str, str]]:
        """The ops of a simple statement, in order (a ``break`` among them ends the run after it)."""
        ops: list[tuple[str, str]] = []
        value = getattr(s, "value", None) if not isinstance(s, ast.Assert) else s.test
        if value is not None:
            self.ops(value, ops)
        targets = s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(
            s, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            if isinstance(t, ast.Subscript):
                self.ops(t.slice, ops)
                if self.is_tensor(t.value) or (value is not None and self.is_tensor(value)):
                    ops.append(("launch", "[]="))
            elif isinstance(s, ast.AugAssign) and self.is_tensor(t):
                ops.append(("launch", _OPS.get(type(s.op), "op") + "="))
        if value is not None and self.is_tensor(value):
            for t in targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if dotted_name(el):
                        self.tensors.add(dotted_name(el))  # type: ignore[arg-type]
                        (self.host.add if self.on_host(value) else self.host.discard)(dotted_name(el))
        return ops

    def branch(self, stmts: list[ast.stmt]) -> list[tuple[ast.stmt, list[tuple[str, str]]]] | None:
        """A branch a run carries on through: simple statements that neither end a run nor leave the function."""
        out = []
        for s in stmts:
            if not isinstance(s, self._SIMPLE) or isinstance(s, (ast.Return, ast.Raise)):
                return None
            ops = self.simple(s)
            if any(k == "break" for k, _ in ops):
                return None
            out.append((s, ops))
        return out

    def block(self, stmts: list[ast.stmt], tests: tuple[tuple[str, bool], ...] = (), loop: bool = False) -> None:
        """Runs of one block; ``tests`` are the enclosing if-tests as (source, branch taken). An ``if`` whose
        branches are simple statements does not end a run: the run goes on through either branch, each a run of
        its own under that test (``softmax``, then ``topk`` in one branch or the other)."""
        run: list[Any] = []  # (stmt, ops) | ("if", test, body items, orelse items)
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            guard = isinstance(s, ast.If) and not s.orelse and isinstance(s.body[-1], (ast.Return, ast.Raise))
            if isinstance(s, ast.If) and not guard and sum(1 for x in run if x[0] == "if") < 3:
                body, orelse = self.branch(s.body), self.branch(s.orelse)
                if body is not None or orelse is not None:
                    test = ast.unparse(s.test)
                    for side, stmts_, taken in ((body, s.body, True), (orelse, s.orelse, False)):
                        if side is None:  # a branch that ends the run is a block of its own
                            self.block(stmts_, tests + ((test, taken),), loop)
                    leaves = [bool(b) and isinstance(b[-1], (ast.Return, ast.Raise)) for b in (s.body, s.orelse)]
                    run.append(("if", test, body, orelse, s.lineno, leaves))
                    continue
            if not isinstance(s, self._SIMPLE):
                self.flush(run, tests, loop)
                run = []
                if isinstance(s, ast.If):
                    test = ast.unparse(s.test)
                    self.block(s.body, tests + ((test, True),), loop)
                    self.block(s.orelse, tests + ((test, False),), loop)
                    if guard:
                        tests = tests + ((test, False),)  # an early return: the rest runs where the test is false
                    continue
                inner = loop or isinstance(s, (ast.For, ast.AsyncFor, ast.While))
                for name in ("body", "orelse", "finalbody"):
                    self.block(getattr(s, name, []) or [], tests, inner)
                for h in getattr(s, "handlers", []) or []:
                    self.block(h.body, tests, loop)
                for case in getattr(s, "cases", []) or []:
                    self.block(case.body, tests, loop)
                continue
            ops = self.simple(s)
            run.append((s, [o for o in ops if o[0] != "break"]))
            if any(k == "break" for k, _ in ops) or isinstance(s, (ast.Return, ast.Raise)):
                self.flush(run, tests, loop)
                run = []
        self.flush(run, tests, loop)

    def flush(self, run: list[Any], tests: tuple[tuple[str, bool], ...], loop: bool) -> None:
        """The runs of one straight stretch, one per choice of the branches it carries on through (a branch
        without launches or casts adds no test)."""
        Choice = tuple[list[tuple[ast.stmt, list[tuple[str, str]]]], tuple[tuple[str, bool], ...]]
        choices: list[Choice] = [([], ())]
        ended: list[Choice] = []  # what ran before a branch that ends the run
        for item in run:
            if item[0] != "if":
                choices = [(stmts + [item], own) for stmts, own in choices]
                continue
            _, test, body, orelse, _, leaves = item
            launches = [side is not None and any(k in ("launch", "cast") for _, ops in side for k, _ in ops)
                        for side in (body, orelse)]  # (a cast may launch: its test is kept)
            if body is not None and orelse is not None and not any(launches):
                choices = [(stmts + body + orelse, own) for stmts, own in choices]
                continue
            nxt: list[Choice] = []
            for side, taken, leave in ((body, True, leaves[0]), (orelse, False, leaves[1])):
                if side is None:  # that branch ends the run here; unless it returns, what follows starts again
                    ended += choices
                    if not leave:
                        nxt += [([], own + ((test, taken),)) for _, own in choices]
                else:
                    nxt += [(stmts + side, own + ((test, taken),)) for stmts, own in choices]
            choices = nxt
        seen = set()
        for stmts, own in ended + choices:
            counted = [(st, ops) for st, ops in stmts if any(k in ("launch", "sync", "cast") for k, _ in ops)]
            launches = [n for _, ops in counted for k, n in ops if k == "launch"]
            casts = [self._cast(c) for st, _ in counted for c in _calls(st)
                     if isinstance(c.func, ast.Attribute) and self.call(c)[0] == "cast"]
            before = [i for i, (k, _) in enumerate(o for _, ops in counted for o in ops if o[0] in ("launch", "cast"))
                      if k == "cast"]
            for n, (c, i) in enumerate(zip(casts, before)):
                c["at"] = i - n  # (where it falls among the launches, should it launch)
            if len(launches) + len(casts) < MIN_LAUNCHES:
                continue
            first, last = counted[0][0].lineno, counted[-1][0].end_lineno or counted[-1][0].lineno
            lines = {st.lineno for st, _ in counted}
            # a test counts when its branch adds launches to this run, or when its other branch would have cut the
            # run short before some of them
            own = tuple((t, taken) for t, taken in own if any(
                item[0] == "if" and item[1] == t and (
                    any(st.lineno in lines for st, _ in ((item[2] if taken else item[3]) or []))
                    or ((item[3] if taken else item[2]) is None and item[4] < max(lines))
                    or (item[2] if taken else item[3]) is None)  # it starts again after that branch
                for item in run))
            key = (first, last, tuple(launches), own)
            if key in seen:
                continue
            seen.add(key)
            self.runs.append({"first": first, "last": last, "ops": launches, "launches": len(launches),
                              "casts": casts, "reads": self.reads([st for st, _ in stmts]),
                              # each counted statement's launches and reads, in order: one that reads host
                              # tensors alone is host work (decided with the walk's types)
                              "parts": [[sum(k == "launch" for k, _ in ops), self.reads([st])] for st, ops in counted],
                              "syncs": [n for _, ops in counted for k, n in ops if k == "sync"],
                              "tests": [list(t) for t in tests + own], "in_loop": loop})


def _memo_spans(tree: ast.Module) -> list[list[Any]]:
    """The ``if``s of a file that fill what they test (``_filled``): the first and last line of the body, the test's
    source and the name the filled value hangs on (``self``, or a parameter such as ``forward_batch``)."""
    return [[s.body[0].lineno, s.body[-1].end_lineno or s.body[-1].lineno, ast.unparse(s.test), root]
            for s in ast.walk(tree) if isinstance(s, ast.If) for root in [_filled(s)] if root]


def _filled(s: ast.If) -> str | None:
    """The root name of what an ``if`` tests and its body assigns: ``if fb.start is None: ... fb.start = ...`` (a
    value worked out once and kept), ``if self.mode != mode: self.mode = mode; ...`` (work redone when it changes).
    What runs under it runs once for the object that holds the value, however often the function is called."""
    t = s.test
    if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
        held = [t.operand]
    elif isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.NotEq):
        held = [t.left, t.comparators[0]]
    elif isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Is) \
            and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value is None:
        held = [t.left]
    else:
        return None
    keys = {ast.unparse(h) for h in held if isinstance(h, ast.Attribute) and dotted_name(h)}
    for n in (n for b in s.body for n in ast.walk(b)):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        for x in targets:
            if ast.unparse(x) in keys:
                return ast.unparse(x).partition(".")[0]
    return None


def _calls(s: ast.stmt) -> list[ast.Call]:
    """The calls of a statement in evaluation order (a call's operands before it), nested definitions left out."""
    out: list[ast.Call] = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        for child in ast.iter_child_nodes(n):
            visit(child)
        if isinstance(n, ast.Call):
            out.append(n)
    visit(s)
    return out


def _tensor_attributes(cls: ast.ClassDef, aliases: dict[str, str]) -> set[str]:
    """The attributes of a class that hold a tensor: annotated as one (a dataclass field ``seq_lens: torch.Tensor``,
    ``self.x: Tensor``), or assigned a torch op's result in one of its methods (``self.buf = torch.zeros(n)``)."""
    out = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.AnnAssign) and "Tensor" in ast.unparse(node.annotation):
            t = node.target
            if isinstance(t, ast.Name):
                out.add(t.id)
            elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                out.add(t.attr)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            name = dotted_name(node.value.func) or ""
            full = aliases.get(name.split(".")[0])
            if full == "torch" and name.count(".") == 1 and name.split(".")[1] in _LAUNCH_FN | {"empty", "empty_like"}:
                out |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return out


def _strided(e: ast.AST) -> bool:
    """Whether an expression is known not to be contiguous: a transpose, permute or expand, or a strided slice."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        return e.func.attr in ("transpose", "permute", "t", "mT", "expand", "expand_as", "movedim", "swapaxes")
    if isinstance(e, ast.Subscript):
        parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        return any(isinstance(p, ast.Slice) for p in parts[1:]) or any(
            isinstance(p, ast.Slice) and p.step is not None for p in parts)
    return False


def _inplace(m: str) -> bool:
    return m.endswith("_") and not m.startswith("_") and m[:-1].isidentifier() and m not in ("set_", )


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of a function's own body, nested definitions left out."""
    out, stack = [], list(ast.iter_child_nodes(fn))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        out.append(n)
        stack.extend(ast.iter_child_nodes(n))
    return out


def file_glue(data: bytes) -> dict[str, list[dict[str, Any]]]:
    """Every function's glue runs in one file, by qualified name (``Class.method``, as ``program.facts`` names
    them), with the TODO/FIXME comments within three lines that ask for a fused kernel, and under ``MEMO`` the ifs
    that fill what they test (``_memo_spans``). Pure: cached by content."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError) as exc:
        return {"": [{"error": str(exc)}]}
    lines = data.decode("utf-8", "replace").splitlines()
    aliases = _aliases(tree)
    module = {n.id for s in tree.body for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
              and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))} | {
        (a.asname or a.name).split(".")[0] for s in ast.walk(tree) if isinstance(s, (ast.Import, ast.ImportFrom))
        for a in s.names} | {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                          ast.ClassDef))}
    out: dict[str, list[dict[str, Any]]] = {}
    helpers = _helpers(tree, aliases, module)

    def visit(node: ast.AST, scope: list[str], attributes: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = ".".join(scope + [child.name])
                runs = _Function(child, aliases, attributes, module, helpers).analysed()
                for r in runs:
                    near = range(max(child.lineno - 1, r["first"] - 5), min(len(lines), r["last"] + 3))
                    r["todos"] = [f"{i + 1}: {m.group(0).strip()}" for i in near
                                  for m in [_TODO.search(lines[i])] if m and _ASKS.search(m.group(0))]
                if runs:
                    out[qual] = runs
                visit(child, scope + [child.name])
            elif isinstance(child, ast.ClassDef):
                visit(child, scope + [child.name], _tensor_attributes(child, aliases))
            elif isinstance(child, ast.stmt):
                visit(child, scope)

    visit(tree, [])
    memo = _memo_spans(tree)
    return {**out, MEMO: memo} if memo else out


def _helpers(tree: ast.Module, aliases: dict[str, str], module: set[str]) -> dict[str, tuple[str, ...]]:
    """The file's undecorated module-level functions that are glue and nothing else, with their ops in order: a body
    of simple statements (no branch, no loop) whose calls all launch tensor ops or are harmless, at least one of
    which launches (``_process_temperature_``: ``scores.div_(temperature[:, None])``). A caller's run counts a call
    of one as those ops (an engine's sampling chain spreads an op or two a helper). A helper's casts are not counted
    (its tensors' dtypes are not traced there); a decorated function is none (``@torch.compile`` fuses its ops)."""
    out: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.decorator_list:  # (``@torch.compile`` fuses its ops)
            continue
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        fn = _Function(node, aliases, set(), module)
        if not body or not all(isinstance(st, _Function._SIMPLE) for st in body):
            continue
        ops = [o for st in body for o in fn.simple(st)]
        if ops and all(k in ("launch", "cast", "free", "other", "upload") for k, _ in ops) \
                and any(k == "launch" for k, _ in ops):
            out[node.name] = tuple(n for k, n in ops if k == "launch")
    return out
