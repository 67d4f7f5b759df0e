"""Stage 1 of the cascade: a static guard on the candidate's source.

It is the first line against the known cheats, and it runs in the parent before any candidate code does:
- only the EVOLVE-BLOCK differs from the baseline, and the entry point keeps its signature;
- imports come from an allow-list (torch, triton and its language submodules such as libdevice, and the I/O-free
  standard modules math, typing, functools, enum, dataclasses, collections, itertools, operator,
  contextlib); ``from torch import empty`` style imports, which would dodge output poisoning, are
  refused;
- no streams, events, graphs, synchronisation, threads, processes, files, environment, ``eval``/``exec``/``compile``/
  ``__import__``/``getattr`` (of a computed name)/``globals``, private or dunder attributes, ``try`` blocks (a silent
  fallback), ``global`` statements, module-level mutable state, mutable defaults, cache decorators, or writes into
  modules and module-level objects (which is how timers, ``synchronize`` or ``torch.empty`` would be patched);
- no attribute assigned on what a call is handed, or on anything reachable from it (``x.cached = out``), unless the
  baseline assigns it too (``state_smuggling``), and no tensor subclass, torch mode or ``__torch_function__`` hook
  (work deferred past the timed call);
- outside ``@triton.jit`` functions, no torch compute call that the baseline does not make. Allocation, views, dtype
  casts and shape queries are always allowed. Operators (``a * b``) cannot be typed statically; the runtime check in
  ``correctness.py`` counts ATen ops for those.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass

from evaluator.handed import deferred_work, smuggled_state
from evaluator.task import TaskError, parse, split_evolve

ALLOWED_MODULES = {"__future__", "math", "typing", "functools", "torch", "torch.nn.functional", "triton",
                   "triton.language", "enum", "dataclasses", "collections", "collections.abc", "itertools", "operator",
                   "contextlib", "warnings", "triton.tools.tensor_descriptor"}
ALLOWED_FROM = {
    # the host-side TMA descriptor (a tensor with its block shape): data, it reaches nothing
    "triton.tools.tensor_descriptor": {"TensorDescriptor"},
    "torch": {"Tensor", "dtype", "device", "Size"},
    "triton": {"language", "jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2"},
    "functools": {"partial", "reduce", "wraps"},
}
FORBIDDEN_NAMES = {
    "eval": "eval", "exec": "exec", "compile": "compile", "__import__": "__import__", "open": "file access",
    "globals": "globals()", "locals": "locals()", "vars": "vars()", "getattr": "getattr", "setattr": "setattr",
    "delattr": "delattr", "input": "input", "breakpoint": "breakpoint", "exit": "exit", "quit": "quit",
    "id": "id() (object identity as a cache key)", "__builtins__": "__builtins__", "memoryview": "memoryview",
    "help": "help",
}
FORBIDDEN_ATTRS = {
    # streams, events, graphs and synchronisation: the ways to hide work from the timer
    **{a: "streams/events/synchronisation" for a in (
        "Stream", "stream", "streams", "current_stream", "default_stream", "set_stream", "ExternalStream",
        "wait_stream", "record_stream", "Event", "synchronize", "CUDAGraph", "graph", "graphs", "elapsed_time",
        "is_current_stream_capturing")},
    **{a: "process/environment access" for a in ("system", "popen", "spawn", "fork", "environ", "getenv", "putenv")},
}
# Attributes of the torch and triton modules that reach files, foreign code, other processes or the benchmark tools.
FORBIDDEN_MODULE_ATTRS = {"load", "save", "from_file", "ops", "library", "cpp_extension", "hub", "distributed",
                          "multiprocessing", "testing", "profiler", "compile", "runtime", "backends", "utils", "jit"}
CACHE_DECORATORS = {"lru_cache", "cache", "cached_property"}
# Torch calls that never compute: allocation, views, casts, shape and device queries.
ALLOWED_TORCH = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "arange",
    "tensor", "as_tensor", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor",
    "view", "view_as", "reshape", "reshape_as", "contiguous", "flatten", "unflatten", "squeeze", "unsqueeze", "permute",
    "transpose", "t", "expand", "expand_as", "narrow", "select", "split", "chunk", "unbind", "as_strided", "movedim",
    "to", "float", "half", "bfloat16", "int", "long", "bool", "double", "type", "type_as",
    "size", "stride", "dim", "numel", "nelement", "element_size", "is_contiguous", "data_ptr", "storage_offset",
    "get_device", "is_floating_point", "is_cuda", "item", "tolist", "device", "dtype", "finfo", "iinfo", "Size",
    "is_tensor", "fill_", "zero_", "copy_", "clone", "detach", "cuda", "cpu",
    "get_device_properties", "get_device_capability", "get_device_name", "current_device", "device_count",
    "is_available",
}
_MODULE_LEVEL_CALLS = {"constexpr", "jit", "autotune", "heuristics", "Config", "int", "float", "bool", "str", "finfo",
                       "iinfo",  # torch.finfo(dtype): the dtype's fixed limits
                       "fromhex",  # float.fromhex("0x1.fffffep-1"): a float, written exactly
                       "constexpr_function"}  # triton.runtime.jit.constexpr_function(f): f, usable in kernels
_TRY = tuple(getattr(ast, n) for n in ("Try", "TryStar") if hasattr(ast, n))


@dataclass(frozen=True)
class GuardResult:
    ok: bool
    reason: str = ""  # syntax, outside_block, signature, import, forbidden, state, state_smuggling, torch_compute
    detail: str = ""


# private names that launchers in the wild read and that reach nothing: the versions (``assert triton.__version__ >=
# '3.0.0'``) and triton's compile-time helper ``tl.standard._log2`` (a bitonic sort's stage count)
PRIVATE_ALLOWED = {"tl.standard._log2", "triton.language.standard._log2", "triton.__version__", "torch.__version__"}
DOTTED_ALLOWED = {"triton.runtime.jit.constexpr_function"}  # a decorator that marks a helper usable in kernels
_DOTTED_TAILS = {d.rsplit(".", 1)[1] for d in DOTTED_ALLOWED}  # only these attributes are worth unparsing


def _norm(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def aten_op(name: str) -> str | None:
    """``torch.ops.aten.zeros.default`` -> ``zeros``: an ATen operator called by its registered name is the torch
    function of that name, held to the same rules (``torch.ops`` reaches other libraries' operators, so only ATen's
    pass, and none that the torch module itself forbids, such as ``from_file``)."""
    parts = name.split(".")
    if parts[:3] != ["torch", "ops", "aten"] or len(parts) < 4 or parts[3].startswith("_") or \
            parts[3] in FORBIDDEN_MODULE_ATTRS or parts[3] in FORBIDDEN_ATTRS:
        return None
    return parts[3]


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_jit(fn: ast.FunctionDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = _dotted(target) or ""
        if name.split(".")[-1] in {"jit", "autotune", "heuristics"}:
            return True
    return False


class _Facts(ast.NodeVisitor):
    """Aliases of torch modules and the torch compute calls a source makes outside Triton kernels."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.calls: set[str] = set()

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if not _is_jit(node):
            self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        if name is not None:
            head, _, rest = name.partition(".")
            full = self.aliases.get(head, head) + ("." + rest if rest else "")
            op = aten_op(full)
            full = f"torch.{op}" if op else full
            if full.startswith("torch.") and full.split(".")[-1] not in ALLOWED_TORCH:
                self.calls.add(full)
            elif isinstance(node.func, ast.Attribute) and head not in self.aliases:
                meth = node.func.attr
                if meth not in ALLOWED_TORCH and _is_tensor_method(meth):
                    self.calls.add(f"Tensor.{meth}")
        self.generic_visit(node)


_TENSOR_METHODS: set[str] | None = None


def _is_tensor_method(name: str) -> bool:
    global _TENSOR_METHODS
    if _TENSOR_METHODS is None:
        import torch

        _TENSOR_METHODS = {n for n in dir(torch.Tensor) if not n.startswith("_")}
    return name in _TENSOR_METHODS


def _decorator_factory(call: ast.Call) -> bool:
    return (_dotted(call.func) or "").split(".")[-1] in ("autotune", "heuristics")


_CONTAINERS = (ast.Dict, ast.List, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def frozen_classes(tree: ast.Module) -> frozenset[str]:
    """The module-level classes of ``tree`` whose instances cannot change: ``@dataclass(frozen=True)`` ones and
    ``NamedTuple`` subclasses (a table of launch settings built from them is a constant)."""
    out = set()
    for stmt in tree.body:
        if not isinstance(stmt, ast.ClassDef):
            continue
        frozen = any(isinstance(d, ast.Call) and (_dotted(d.func) or "").split(".")[-1] == "dataclass" and any(
            k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value is True for k in d.keywords)
            for d in stmt.decorator_list)
        if frozen or any((_dotted(b) or "").split(".")[-1] == "NamedTuple" for b in stmt.bases):
            out.add(stmt.name)
    return frozenset(out)


def _check_module_value(value: ast.AST, frozen: frozenset[str] = frozenset()) -> str | None:
    """None when a module-level (or class-level) value is immutable; else why not. ``frozen``: the module's classes
    whose instances are immutable (``frozen_classes``)."""
    if isinstance(value, _CONTAINERS):
        return "a mutable container"
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Call) and _decorator_factory(value.func):
        # `k_tuned = triton.autotune(configs=[...], key=[...])(k)`: the decorator, applied by hand
        return _check_module_value(value.func, frozen) or next(
            (why for e in value.args for why in [_check_module_value(e, frozen)] if why), None)
    if isinstance(value, ast.Call):
        name = _dotted(value.func) or ""
        if name in frozen:  # `_PhaseCfg(nw=8, BS=32)`: immutable if what it holds is
            return next((why for e in [*value.args, *(k.value for k in value.keywords)]
                         for why in [_check_module_value(e, frozen)] if why), None)
        if name.split(".")[-1] not in _MODULE_LEVEL_CALLS:
            return f"the result of {name or 'a call'}()"
        parts = [*value.args, *(k.value for k in value.keywords)]
        settings = (value.args or [next((k.value for k in value.keywords if k.arg == "kwargs"), None)])[0] \
            if name.split(".")[-1] == "Config" else None
        if isinstance(settings, ast.Dict):  # triton.Config({"BLOCK": 64}, num_warps=4): the dict is its settings
            parts = [e for e in parts if e is not settings] + [*settings.keys, *settings.values]
        elif _decorator_factory(value):  # configs=[...], key=[...]: the factory's own lists, as in @triton.autotune
            parts = [x for e in parts for x in (e.elts if isinstance(e, ast.List) else [e])]
        else:
            parts = None
        if parts is not None:
            return next((why for e in parts if e is not None for why in [_check_module_value(e, frozen)] if why), None)
    for sub in ast.iter_child_nodes(value):
        if isinstance(sub, ast.expr):
            why = _check_module_value(sub, frozen)
            if why:
                return why
    return None


_READ_METHODS = {"get", "items", "keys", "values", "index", "count"}
_READ_CALLS = {"len", "tuple", "list", "sorted", "dict", "set", "frozenset", "enumerate", "zip", "min", "max"}


def read_only_table(tree: ast.Module, stmt: ast.stmt) -> bool:
    """Whether module-level ``stmt`` binds one name to a table that nothing can change: a container of immutable
    values (``{torch.float8_e4m3fn: tl.float8e4nv}``, ``[triton.Config(...) for bn in (32, 64)]``, ``{}``) whose
    every use in ``tree`` reads it: ``T[k]``, ``k in T``, ``for x in T``, ``T.get(k)``, ``len(T)``, ``configs=T``,
    ``f(**T)``.
    Such a table is a constant, not a cache between calls."""
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    parts = _table_parts(value)
    if parts is None or len(targets) != 1 or not isinstance(targets[0], ast.Name):
        return False
    if any(_check_module_value(e, frozen_classes(tree)) for e in parts):  # a list inside could still grow
        return False
    name = targets[0].id
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    for n in ast.walk(tree):
        if not isinstance(n, ast.Name) or n.id != name or n is targets[0]:
            continue
        p = parents.get(id(n))
        if not (isinstance(n.ctx, ast.Load) and (
                isinstance(p, ast.Subscript) and p.value is n and isinstance(p.ctx, ast.Load)
                or isinstance(p, ast.Compare) and n in p.comparators and all(
                    isinstance(op, (ast.In, ast.NotIn)) for op in p.ops)
                or isinstance(p, (ast.For, ast.comprehension)) and p.iter is n
                or isinstance(p, ast.Attribute) and p.attr in _READ_METHODS
                and isinstance(parents.get(id(p)), ast.Call) and parents[id(p)].func is p
                or isinstance(p, ast.Call) and n in p.args and _dotted(p.func) in _READ_CALLS
                or isinstance(p, ast.keyword) and p.arg in ("configs", None))):  # None: `f(**T)` copies T
            return False
    return True


def _table_parts(value: ast.AST | None) -> list[ast.expr] | None:
    """The expressions a container literal (or comprehension) is built from, or None if ``value`` is none; a choice
    between two (``{...} if _IS_HIP else {}``) is built from its test and both."""
    if isinstance(value, ast.IfExp):
        body, orelse = _table_parts(value.body), _table_parts(value.orelse)
        return None if body is None or orelse is None else [value.test, *body, *orelse]
    if not isinstance(value, _CONTAINERS):
        return None
    if isinstance(value, (ast.ListComp, ast.SetComp, ast.DictComp)):
        parts = [value.key, value.value] if isinstance(value, ast.DictComp) else [value.elt]
        return parts + [e for g in value.generators for e in (g.iter, *g.ifs)]
    return [e for e in (*getattr(value, "keys", ()), *getattr(value, "values", ()), *getattr(value, "elts", ()))
            if e is not None]


def _stored(body: list[ast.stmt]) -> set[str]:
    """The names a function body binds (assignments, loop and ``with`` targets), which are then its locals
    everywhere in it: not inside nested functions, classes or comprehensions, which have scopes of their own."""
    out: set[str] = set()
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
                             ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _parameter_uses(tree: ast.Module) -> set[int]:
    """Uses of a function's own parameter or local that shadows a forbidden builtin (a launcher's ``input`` tensor, a
    kernel's ``for id in tl.range(...)``): the value comes from the caller or the function, not the builtin. Defaults
    are evaluated outside the function, so they are never exempt."""
    exempt: set[int] = set()

    def visit(node: ast.AST, params: frozenset[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for d in [*a.defaults, *[d for d in a.kw_defaults if d is not None]]:
                visit(d, params)
            for dec in getattr(node, "decorator_list", []):
                visit(dec, params)
            own = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x is not None}
            inner = params | own | (_stored(node.body) if isinstance(node.body, list) else set())
            for stmt in (node.body if isinstance(node.body, list) else [node.body]):
                visit(stmt, frozenset(inner))
            return
        if isinstance(node, ast.Name) and node.id in params:
            exempt.add(id(node))
        for child in ast.iter_child_nodes(node):
            visit(child, params)

    visit(tree, frozenset())
    return exempt


class _LiteralGetattr(ast.NodeTransformer):
    """``getattr(obj, "name", default)`` with a literal name, for the checks: ``(obj.name, default)``, an attribute
    read with a fallback, judged as the attribute read it is (a computed name stays a ``getattr``, which is
    forbidden)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and 2 <= len(node.args) <= 3 \
                and not node.keywords and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str) and node.args[1].value.isidentifier():
            read = ast.copy_location(ast.Attribute(node.args[0], node.args[1].value, ast.Load()), node)
            return ast.copy_location(ast.Tuple([read, *node.args[2:]], ast.Load()), node)
        return node


def _forbidden(tree: ast.Module, aliases: dict[str, str]) -> GuardResult | None:
    tree = _LiteralGetattr().visit(copy.deepcopy(tree))
    found = _module_state_found(tree)
    if found is not None:
        return found
    module_names = _module_level_names(tree)
    shadowed = _parameter_uses(tree)
    # the parts of an allowed dotted name (triton.runtime.jit.constexpr_function) pass, though triton.runtime does not
    allowed_parts = {id(part) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in _DOTTED_TAILS
                     and ast.unparse(n) in DOTTED_ALLOWED for part in ast.walk(n)}
    allowed_parts |= {id(n.value.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Attribute) and isinstance(n.value.value, ast.Attribute)
                      and aten_op(_dotted(n) or "") is not None}  # torch.ops in torch.ops.aten.OP
    scoped = _knob_scopes(tree)
    for node in ast.walk(tree):
        found = _node_found(node, aliases, shadowed, allowed_parts) or _write_found(node, module_names, scoped)
        if found is not None:
            return found
    return None


def _bad(reason: str, node: ast.AST, detail: str) -> GuardResult:
    return GuardResult(False, reason, f"line {getattr(node, 'lineno', '?')}: {detail}")


def _module_level_names(tree: ast.Module) -> set[str]:
    """The names the module binds at its top level (and the libraries a kernel file always has)."""
    names = {"torch", "triton", "tl", "math", "functools", "typing", "F"}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in stmt.names)
    return names


def _module_state_found(tree: ast.Module) -> GuardResult | None:
    """A module-level or class-level value that is state between calls (a mutable container, a call's result, an
    in-place update), but a read-only table."""
    frozen = frozen_classes(tree)
    for scope in [tree, *[n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]]:
        for stmt in scope.body:
            value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) else None
            if isinstance(stmt, ast.AugAssign):
                return _bad("state", stmt, "module-level state is updated in place")
            if value is not None:
                why = _check_module_value(value, frozen)
                if why and not (scope is tree and read_only_table(tree, stmt)):
                    return _bad("state", stmt, f"module-level state holds {why} (a cache between calls)")
    return None


def _knob_scopes(tree: ast.Module) -> set[int]:
    """`with triton.knobs.amd.scope(): triton.knobs.amd.use_buffer_ops = False`: a backend compile option, set for the
    launches inside the block and restored after it, is no state between calls (the ids of those assignments)."""
    return {id(s) for w in ast.walk(tree) if isinstance(w, ast.With) for s in w.body
            if any(re.fullmatch(r"triton\.knobs\.(amd|nvidia)\.scope\(\)", ast.unparse(i.context_expr))
                   for i in w.items)
            and isinstance(s, ast.Assign) and all(re.fullmatch(r"triton\.knobs\.(amd|nvidia)\.\w+", ast.unparse(t))
                                                  for t in s.targets)}


def _node_found(node: ast.AST, aliases: dict[str, str], shadowed: set[int], allowed_parts: set[int]
                ) -> GuardResult | None:
    """What one node does that a candidate may not: an import, a forbidden name or attribute, a cache decorator, a
    try, global state, async code, a mutable default."""
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.name not in ALLOWED_MODULES and not a.name.startswith("triton.language."):
                return _bad("import", node, f"import of {a.name!r} is not allowed")
    elif isinstance(node, ast.ImportFrom):
        mod = node.module or ""
        if node.level or (mod not in ALLOWED_MODULES and not mod.startswith("triton.language.")):
            return _bad("import", node, f"import from {'.' * node.level}{mod!r} is not allowed")
        allowed = ALLOWED_FROM.get(mod)
        for a in node.names:
            if allowed is not None and a.name not in allowed:
                return _bad("import", node, f"'from {mod} import {a.name}' is not allowed")
            if a.name in CACHE_DECORATORS:
                return _bad("state", node, f"cache decorator {a.name}")
    elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES and id(node) not in shadowed:
        return _bad("forbidden", node, f"{FORBIDDEN_NAMES[node.id]} is not allowed")
    elif isinstance(node, ast.Attribute):
        if node.attr.startswith("_") and ast.unparse(node) not in PRIVATE_ALLOWED:
            return _bad("forbidden", node, f"private attribute .{node.attr} is not allowed")
        if node.attr in FORBIDDEN_ATTRS:
            return _bad("forbidden", node, f"{FORBIDDEN_ATTRS[node.attr]}: .{node.attr} is not allowed")
        if isinstance(node.value, ast.Name) and node.attr in FORBIDDEN_MODULE_ATTRS and \
                id(node) not in allowed_parts and aliases.get(node.value.id) in ("torch", "triton") and \
                not (node.attr == "jit" and aliases[node.value.id] == "triton"):
            return _bad("forbidden", node, f"{aliases[node.value.id]}.{node.attr} is not allowed")
        if node.attr in CACHE_DECORATORS:
            return _bad("state", node, f"cache decorator .{node.attr}")
    elif isinstance(node, _TRY):
        return _bad("forbidden", node, "try/except is not allowed (a silent fallback hides a failing kernel)")
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        return _bad("state", node, f"'{type(node).__name__.lower()}' statements are not allowed")
    elif isinstance(node, (ast.AsyncFunctionDef, ast.Await)):
        return _bad("forbidden", node, "async code is not allowed")
    elif isinstance(node, (ast.FunctionDef, ast.Lambda)):
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            if isinstance(d, (ast.Dict, ast.List, ast.Set, ast.Call)):
                return _bad("state", d, "mutable default argument (a cache between calls)")
    return None


def _write_found(node: ast.AST, module_names: set[str], scoped: set[int]) -> GuardResult | None:
    """A write into a module-level object (patching or caching), but a backend knob set inside its scope."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)) and _root(t) in module_names and id(node) not in scoped:
                return _bad("state", node, f"write into module-level object {_root(t)!r} (patching or caching)")
    return None


def module_state(value: ast.AST, frozen: frozenset[str] = frozenset()) -> str | None:
    """Why a module-level value is state between calls (a mutable container, a call's result), or None; ``frozen``
    names the module's immutable classes (``frozen_classes``)."""
    return _check_module_value(value, frozen)


def forbidden_in(source: str) -> GuardResult | None:
    """The first rule that code breaks on its own (an import, ``getattr``, a private attribute, ``global``...), or
    None: what extraction asks of each helper it copies, so that a task's baseline passes its own guard."""
    tree = parse(source)
    facts = _Facts()
    facts.visit(tree)
    return _forbidden(tree, facts.aliases)


def check(baseline: str, candidate: str, entry: str) -> GuardResult:
    """Run every static check of a candidate's source against the baseline ``kernel.py``."""
    try:
        tree = parse(candidate)
    except SyntaxError as exc:
        return GuardResult(False, "syntax", f"line {exc.lineno}: {exc.msg}")
    base_parts, cand_parts = split_evolve(baseline), split_evolve(candidate)
    if base_parts is None:
        raise TaskError("baseline kernel.py has no single EVOLVE-BLOCK")
    if cand_parts is None:
        return GuardResult(False, "outside_block", "the EVOLVE-BLOCK markers are missing or duplicated")
    for i, where in ((0, "before"), (2, "after")):
        if _norm(base_parts[i]) != _norm(cand_parts[i]):
            return GuardResult(False, "outside_block", f"the text {where} the EVOLVE-BLOCK differs from the baseline")

    base_tree = parse(baseline)

    def entry_args(t: ast.Module) -> str | None:
        for stmt in t.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == entry:
                return ast.dump(stmt.args)
        return None

    cand_args = entry_args(tree)
    if cand_args is None:
        return GuardResult(False, "signature", f"entry point {entry}() is missing at module level")
    if cand_args != entry_args(base_tree):
        return GuardResult(False, "signature", f"entry point {entry}() changed its signature")
    base_facts, cand_facts = _Facts(), _Facts()
    base_facts.visit(base_tree)
    cand_facts.visit(tree)
    bad = _forbidden(tree, cand_facts.aliases)
    if bad is not None:
        return bad
    broken = deferred_work(tree) or smuggled_state(tree, base_tree)
    if broken is not None:
        return GuardResult(False, *broken)
    extra = sorted(cand_facts.calls - base_facts.calls)
    if extra:
        return GuardResult(False, "torch_compute", f"torch compute call(s) the baseline does not make: {', '.join(extra)}")
    return GuardResult(True)
