"""Per-file analysis: kernel definitions, launch sites, functions, imports and module-level aliases of one file.

``analyze(relpath, data, custom_jit)`` is a pure function of the file's bytes (plus the target's custom decorator
names). It returns plain JSON-able data, runs in a process pool, and its result is cached by content hash.

It uses the standard library's ``ast``, not libcst. On sglang's Triton files a libcst parse alone costs about 36 ms
a file (12 s for the 330 candidate files on one core), which is four times the cold-scan budget. ``ast`` takes about
4 ms a file. libcst stays the tool for extraction and re-insertion, where byte-exact round trips matter. A file that
``ast`` cannot parse (for example a PEP 701 f-string under Python 3.11) is reported and skipped.
"""

from __future__ import annotations

import ast
from typing import Any

from smithbot.program.syntax import collect_imports, dotted_name

JIT_NAMES = {"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"}
WRAP_NAMES = {"triton.autotune", "triton.heuristics", "triton.runtime.autotuner.autotune",
              "triton.runtime.autotuner.heuristics", "triton.runtime.autotune", "triton.runtime.heuristics"}


def module_name(relpath: str, package_dirs: set[str] | None = None) -> str:
    """The importable name of a file: leading directories that are not packages (``python/`` in sglang) are dropped.

    ``package_dirs`` holds every directory (relative, '/'-separated) that has an ``__init__.py``; None keeps them all."""
    parts = relpath.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    dirs = relpath.split("/")[:-1]
    # the module name starts at the topmost package directory (namespace packages below it count); a tree with no
    # package at all keeps its whole path, so that files in different directories never share a name
    start = 0 if package_dirs is None else next(
        (i for i in range(len(dirs)) if "/".join(dirs[: i + 1]) in package_dirs), 0)
    return ".".join(p for p in parts[start:] if p)


class _Visitor(ast.NodeVisitor):
    def __init__(self, modname: str, is_package: bool, custom_jit: set[str]) -> None:
        self.modname = modname
        self.is_package = is_package
        self.custom_jit = custom_jit
        self.imports: dict[str, str] = {}
        self.kernels: list[dict[str, Any]] = []
        self.functions: list[dict[str, Any]] = []
        self.launches: list[dict[str, Any]] = []
        self.tl_aliases: dict[str, str] = {}
        self.constants: dict[str, str] = {}
        self.assigns: dict[str, str] = {}
        self.jit_calls: list[tuple[str, str, int]] = []  # f = triton.jit(f): (assigned name, function, line)
        self.aliases: dict[str, str] = {}  # other name of a kernel, wrapped by a call
        self.scope: list[tuple[str, str, list[str]]] = []  # (kind, name, class bases)
        self.branches: list[dict[str, str]] = []
        self.try_depth = 0
        self.fn_stack: list[dict[str, Any]] = []

    def lookup(self, dotted: str | None) -> str:
        if not dotted:
            return ""
        head, _, rest = dotted.partition(".")
        full = self.imports.get(head, head)
        return f"{full}.{rest}" if rest else full

    # --- control flow ------------------------------------------------------------------------------------------
    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        for part, stmts in (("body", node.body), ("orelse", node.orelse)):
            self.branches.append({"test": test, "in": part})
            for s in stmts:
                self.visit(s)
            self.branches.pop()

    def visit_Try(self, node: ast.Try) -> None:
        self.try_depth += 1
        self.generic_visit(node)
        self.try_depth -= 1

    visit_TryStar = visit_Try

    # --- definitions -------------------------------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(("class", node.name, [self.lookup(dotted_name(b)) for b in node.bases]))
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        decorators = [self.lookup(dotted_name(d.func if isinstance(d, ast.Call) else d)) for d in node.decorator_list]
        cls = self.scope[-1] if self.scope and self.scope[-1][0] == "class" else None
        info: dict[str, Any] = {
            "name": node.name, "qualname": ".".join([s[1] for s in self.scope] + [node.name]), "line": node.lineno,
            "nested": any(s[0] == "def" for s in self.scope),
            "conditional": bool(self.branches) or self.try_depth > 0,
            "class": cls[1] if cls else None,
            "autograd_forward": bool(cls) and node.name == "forward" and any(
                b == "Function" or b.endswith("autograd.Function") for b in cls[2]),
            "params": [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs],
            "work": _work(node),
        }
        if any(d in JIT_NAMES or d in WRAP_NAMES or d.split(".")[-1] in self.custom_jit for d in decorators):
            info.update(form="decorator", decorators=decorators, autotune=any(d.endswith("autotune") for d in decorators),
                        heuristics=sum(d.endswith("heuristics") for d in decorators), work=_work(node))
            self.kernels.append(info)
        else:
            self.functions.append(info)
        calls: set[str] = set()
        names: set[str] = set()
        self.fn_stack.append({"qualname": info["qualname"], "calls": calls, "names": names, "lambdas": {}})
        self.scope.append(("def", node.name, []))
        for stmt in node.body:
            self.visit(stmt)
        self.scope.pop()
        self.fn_stack.pop()
        info["calls"], info["names"] = sorted(calls), sorted(names)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Name(self, node: ast.Name) -> None:
        if self.fn_stack:
            self.fn_stack[-1]["names"].add(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return
        target, value = node.targets[0].id, node.value
        if not self.fn_stack and not self.scope:
            self.assigns[target] = ast.unparse(value)  # _is_hip = is_hip(): what a launch's if-test reads
        if isinstance(value, ast.Call) and self.lookup(dotted_name(value.func)) in JIT_NAMES | WRAP_NAMES:
            if value.args and isinstance(value.args[0], ast.Name):
                self.jit_calls.append((target, value.args[0].id, node.lineno))
        elif isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Name) and not self.fn_stack:
            self.aliases[target] = value.args[0].id  # k2 = autotune(...)(k), k2 = wrap(k): kept if k is a kernel
        elif isinstance(value, ast.Lambda) and self.fn_stack:
            self.fn_stack[-1]["lambdas"][target] = ast.unparse(value)
        elif not self.fn_stack:
            dotted = self.lookup(dotted_name(value))
            if dotted.startswith("triton.language."):
                self.tl_aliases[target] = dotted
            elif isinstance(value, ast.Call) and self.lookup(dotted_name(value.func)) == "triton.language.constexpr":
                self.constants[target] = ast.unparse(value)

    # --- calls and launches ------------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Subscript):
            kernel = dotted_name(func.value)
            if kernel:
                grid = ast.unparse(func.slice)
                if self.fn_stack and grid in self.fn_stack[-1]["lambdas"]:
                    grid = self.fn_stack[-1]["lambdas"][grid]
                self.launches.append({
                    "kernel": kernel, "resolved": self.lookup(kernel), "line": node.lineno,
                    "wrapper": self.fn_stack[-1]["qualname"] if self.fn_stack else "<module>",
                    "grid": grid, "grid_lambda": grid.startswith("lambda") or "META" in grid,
                    "kwargs": sorted(k.arg for k in node.keywords if k.arg),
                    "branches": [dict(b) for b in self.branches],
                })
                return
        if self.fn_stack:
            dotted = dotted_name(func)
            if dotted:
                self.fn_stack[-1]["calls"].add(dotted)


_MEMORY_OPS = ("load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_cas", "atomic_xchg", "atomic_and",
               "atomic_or", "atomic_xor")


def _work(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int]:
    """What one program of a kernel does, read from its body: its memory operations (``tl.load``, ``tl.store``,
    atomics), its ``tl.dot`` calls, and its loops whose trip count is not a literal (``for k in range(0, K, BLOCK)``):
    the static estimate of work per launch that ranks kernels no profile has measured."""
    memory = dots = loops = 0
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            memory += node.func.attr in _MEMORY_OPS
            dots += node.func.attr == "dot"
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and any(
                not isinstance(a, ast.Constant) for a in node.iter.args) \
                and (dotted_name(node.iter.func) or "").split(".")[-1] in ("range", "static_range"):
            loops += 1
    return {"memory": memory, "dots": dots, "loops": loops}


def analyze(relpath: str, data: bytes, custom_jit: tuple[str, ...] = (), modname: str | None = None,
            reexports: dict[str, str] | None = None) -> dict[str, Any]:
    """Facts about one file, or ``{"path", "error"}`` when it does not parse. ``reexports``: Triton's modules as
    other modules of the target hand them on (``index.triton_reexports``), read as Triton's own."""
    try:
        tree = ast.parse(data, filename=relpath)
    except (SyntaxError, ValueError) as exc:
        where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) and exc.lineno else ""
        return {"path": relpath, "error": f"{where}{getattr(exc, 'msg', None) or exc}"}
    v = _Visitor(modname if modname is not None else module_name(relpath), relpath.endswith("__init__.py"),
                 set(custom_jit))
    v.imports = {k: (reexports or {}).get(t, t) for k, t in collect_imports(tree, v.modname, v.is_package).items()}
    v.visit(tree)
    by_name = {f["name"]: f for f in v.functions if not f["nested"]}
    for target, fn, line in v.jit_calls:
        info = by_name.pop(fn, None)
        if info is None:
            continue
        v.functions.remove(info)
        info.update(form="call", decorators=[], autotune=False, heuristics=0, name=target, qualname=target,
                    assigned_line=line)
        v.kernels.append(info)
    return {"path": relpath, "module": v.modname, "imports": v.imports, "kernels": v.kernels,
            "functions": v.functions, "launches": v.launches, "tl_aliases": v.tl_aliases, "constants": v.constants,
            "assigns": v.assigns,
            "kernel_aliases": {a: k for a, k in v.aliases.items() if any(x["name"] == k for x in v.kernels)}}
