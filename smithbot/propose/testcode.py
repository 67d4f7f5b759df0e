"""The generated test's inputs and reference, written out as plain code a maintainer reads like their own.

``inputs_code`` writes out an extracted task's input plan (the ``SPEC`` and ``EXTRA_DIMS`` its harness.py carries) as
the ``make_inputs(case, gen)`` that its harness runs (``smithbot/inputs/code.py``), on the test's ``DEVICE``. A
hand-written harness (the bundled tasks') is plain code already: its ``make_inputs`` is kept as it is.

``reference_code`` keeps, for a launch-config change, the original versions of the definitions the candidate changed
and the entry point that launches them; the unchanged kernels are imported from the target.
"""

from __future__ import annotations

import ast
import builtins
import typing

from smithbot.inputs.code import WIDE, InputsError, make_inputs_code
from smithbot.inputs.harness import plan_of


def inputs_code(harness: str, act_dtypes: set[str], reserved: set[str]) -> tuple[list[str], str]:
    """The imports and the code of ``make_inputs(case, gen)`` (with the helpers it uses) for a task's harness.py.
    ``act_dtypes``: the torch names of the cases' dtypes; ``reserved``: the case keys (no local may shadow one)."""
    plan = plan_of(harness)
    if plan is None:  # a hand-written harness: its make_inputs is plain code already
        tree = ast.parse(harness)
        fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "make_inputs"), None)
        if fn is None:
            raise InputsError("the harness has neither an input SPEC nor a make_inputs function")
        imports = [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        return imports, ast.get_source_segment(harness, fn) + "\n"
    return make_inputs_code(plan, act_dtypes <= set(WIDE), reserved)


def bound_names(node: ast.stmt) -> list[str]:
    """The names a top-level import or definition binds."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [a.asname or a.name for a in node.names]
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return []


def _used(node: ast.AST) -> set[str]:
    """The names ``node`` reads, those of its string annotations (``"Optional[torch.Tensor]"``) included."""
    notes = [a for n in ast.walk(node) for a in (
        [x.annotation for x in (*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs)] + [n.returns]
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else
        [n.annotation] if isinstance(n, ast.AnnAssign) else [])
        if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    found = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    for a in notes:
        try:
            found |= _used(ast.parse(a.value, mode="eval"))
        except SyntaxError:
            continue
    return found


def needed_imports(imports: list[str], code: str) -> list[str]:
    """The ``imports`` that bind a name ``code`` reads (the future import always): a linter flags the others."""
    used = _used(ast.parse(code))
    return [i for i in imports if i.startswith("from __future__") or set(bound_names(ast.parse(i).body[0])) & used]


def reference_code(code: str, imports: list[str], entry: str, changed: set[str],
                   upstream: dict[str, str]) -> tuple[list[str], list[str], str]:
    """For a launch-config change: the imports the kept code needs, the imports of the unchanged kernels from the
    target (``from module import name``), and the original versions of the ``changed`` definitions, with the
    ``entry`` point that launches them and the task's own helpers they use. ``code``: the task's kernel.py without
    its imports; ``upstream``: {provenance definition: its module in the target}."""
    tree = ast.parse(code)
    lines = code.splitlines()
    top = {name: node for node in tree.body for name in bound_names(node)}
    keep: list[ast.stmt] = []
    imported: dict[str, str] = {}
    todo = [entry, *sorted(changed)]
    while todo:
        name = todo.pop(0)
        node = top.get(name)
        if node is None or node in keep or name in imported:
            continue
        if name in upstream and name not in changed and name != entry:
            imported[name] = upstream[name]
            continue
        keep.append(node)
        todo += sorted(_used(node))
    keep.sort(key=lambda n: n.lineno)
    parts = []
    for node in keep:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        parts.append("\n".join(lines[first - 1:node.end_lineno]))
    kept = "\n\n\n".join(parts) + "\n"
    used = _used(ast.parse(kept))
    needed = needed_imports(imports, kept)
    # the extractor drops typing imports that only string annotations need; the test names them again for linters
    bound = {n for i in needed for n in bound_names(ast.parse(i).body[0])} | set(top) | set(dir(builtins))
    hints = sorted(n for n in used - bound if n in typing.__all__)
    if hints:
        needed.append(f"from typing import {', '.join(hints)}")
    target = [f"from {m} import {n}" for n, m in sorted(imported.items(), key=lambda x: (x[1], x[0]))]
    return needed, target, kept
