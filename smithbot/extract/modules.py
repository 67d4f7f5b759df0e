"""A target file as the closure reads it: its top-level bindings (the branch a version test decides, a ``try``'s
fallback first), the names a definition reads without binding them, and an autotune factory applied by hand."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from smithbot.extract.imports import optional_import
from smithbot.extract.rewrite import unrolled, version_test


@dataclass
class Module:
    path: str
    name: str
    lines: list[str]
    tree: ast.Module
    imports: dict[str, str]
    top: dict[str, ast.stmt]  # first top-level (or conditional top-level) binding of each name
    optional: set[str]  # names imported in a `try:` whose `except ImportError:` is the target's own fallback


def applied_factory(mod: Module, node: ast.Assign) -> ast.Assign:
    """``tune = triton.autotune(configs=..., key=...)`` at module level, then ``k_tuned = tune(k)`` (or ``k =
    tune(k)``): the assignment with the decorator written out, its config list unrolled (``unrolled``); else
    ``node`` itself."""
    call = node.value
    factory = mod.top.get(call.func.id) if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) else None
    if not (isinstance(factory, ast.Assign) and isinstance(factory.value, ast.Call)
            and ast.unparse(factory.value.func).split(".")[-1] in ("autotune", "heuristics")):
        return node
    return ast.Assign(node.targets, ast.Call(unrolled(factory.value), call.args, call.keywords), lineno=node.lineno)


def top_bindings(tree: ast.Module, package: str) -> tuple[dict[str, ast.stmt], set[str]]:
    """Each name's first top-level (or conditional top-level) binding, and the optional imports
    (``optional_import``); for a ``try`` with one, the handler's bindings (``HAS_X = False``) come first."""
    out: dict[str, ast.stmt] = {}
    optional: set[str] = set()

    def visit(stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.FunctionDef) and any(ast.unparse(d).split(".")[-1] == "overload"
                                                      for d in s.decorator_list):
                continue  # a typing.overload signature: the implementation follows
            if isinstance(s, (ast.FunctionDef, ast.ClassDef)):
                out.setdefault(s.name, s)
            elif isinstance(s, ast.Assign):
                for t in s.targets:
                    if isinstance(t, ast.Name):
                        out.setdefault(t.id, s)
            elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
                out.setdefault(s.target.id, s)
            elif isinstance(s, ast.If):  # the branch the installed triton takes, else the first (often the newer)
                for branch in ((s.orelse, s.body) if version_test(s.test) is False else (s.body, s.orelse)):
                    visit(branch)
            elif isinstance(s, ast.Try):
                names = optional_import(s, package)
                optional.update(names)
                if names:
                    for h in s.handlers:
                        visit(h.body)
                visit(s.body)

    visit(tree.body)
    return out, optional


def without_annotations(node: ast.AST) -> list[ast.AST]:
    """Every node under ``node`` except annotations: the task starts with ``from __future__ import annotations``,
    so annotations are never evaluated and their names need no definition."""
    skip: set[int] = set()
    for n in ast.walk(node):
        anns = []
        if isinstance(n, ast.arg) and n.annotation is not None:
            anns.append(n.annotation)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None:
            anns.append(n.returns)
        elif isinstance(n, ast.AnnAssign):
            anns.append(n.annotation)
        for a in anns:
            skip.update(id(x) for x in ast.walk(a))
    return [n for n in ast.walk(node) if id(n) not in skip]


def free_names(node: ast.AST) -> list[str]:
    """Names a definition reads but does not bind itself, in first-use order."""
    bound: set[str] = set()
    used: list[str] = []
    declared = {g for n in ast.walk(node) if isinstance(n, ast.Global) for g in n.names}  # module-level names
    for n in without_annotations(node):
        if isinstance(n, ast.Name):
            if isinstance(n.ctx, ast.Store) and n.id not in declared:
                bound.add(n.id)
            elif n.id not in used:
                used.append(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n is not node:
            bound.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in n.names)
    return [u for u in used if u not in bound]
