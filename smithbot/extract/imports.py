"""What a task may import, and what of the installed triton it may call: torch, triton (what the installed triton has),
and the I/O-free standard modules; a target's optional imports, which the task goes without."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util

from evaluator import forks
from evaluator.guard import ALLOWED_MODULES

# What a task may import: torch, triton, and standard-library modules with no I/O, which launchers use for their
# types (enum, dataclasses, collections) or to warn. The evaluator's guard allows the same.
STDLIB = ("math", "typing", "functools", "enum", "dataclasses", "collections", "collections.abc", "itertools",
          "operator", "contextlib", "warnings")
ALLOWED_ROOTS = {"torch", "triton", *(m.split(".")[0] for m in STDLIB)}
# A triton fork's module that stock triton lacks but the evaluator's interpreter stands in for: a task imports it as
# its target does, and runs on the fork or under the interpreter (not on stock triton's GPU backend).
FORK_MODULES = {forks.DEEPLINK: "DeepLink's triton fork; the interpreter stands in for it (evaluator/forks.py)"}


def optional_import(s: ast.Try, package: str) -> set[str]:
    """The names a ``try: from pkg import f / except ImportError: ...`` binds that a task may not import (another
    package, a triton module outside triton.language): the target runs without them, on the handler's fallback,
    and so does the task."""
    caught = {ast.unparse(h.type).split(".")[-1] if h.type is not None else "" for h in s.handlers}
    if not caught & {"ImportError", "ModuleNotFoundError", "Exception", ""}:
        return set()
    names: set[str] = set()
    for node in s.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
            for a in node.names:
                target = f"{node.module}.{a.name}" if isinstance(node, ast.ImportFrom) else a.name
                local = (a.asname or a.name).split(".")[0]
                if target.split(".")[0] != package and import_line(local, target) is None:
                    names.add(local)
    return names


def import_line(local: str, target: str, installed: bool = True) -> str | None:
    """The import statement that binds ``local`` to ``target`` in the task, or None if it may not be imported (with
    ``installed``, also when the installed triton lacks it)."""
    root = target.split(".")[0]
    if root not in ALLOWED_ROOTS:
        return None
    if target == local:
        return f"import {target}"
    if target == "triton.language" and local == "tl":
        return "import triton.language as tl"
    mod, _, attr = target.rpartition(".")
    if target in FORK_MODULES:
        return f"import {target} as {local}  # {FORK_MODULES[target]}"
    if target in ("torch.nn.functional",):
        return f"import torch.nn.functional as {local}"
    if installed and root == "triton" and not in_triton(mod, attr):
        return None
    if mod in ("triton", "torch", *STDLIB, *ALLOWED_MODULES) or mod.startswith("triton.language"):
        return f"from {mod} import {attr}" + (f" as {local}" if local != attr else "")
    return None


def tl_has(module: str, name: str) -> bool:
    """Whether the installed ``triton.language.<module>`` has ``name``."""
    return in_triton(f"triton.language.{module}", name)


def tl_builtin(target: str) -> bool:
    """Whether ``target`` is a triton.language builtin function (``triton.language.math.rsqrt``), outside the
    extras (libdevice's functions, which the interpreter stand-in serves by name)."""
    mod, _, attr = target.rpartition(".")
    if not mod.startswith("triton.language") or ".extra" in mod:
        return False
    obj = getattr(importlib.import_module(mod), attr, None)
    return callable(obj) and bool(getattr(obj, "__triton_builtin__", False))


@functools.lru_cache(maxsize=None)
def in_triton(mod: str, attr: str) -> bool:
    """Whether the installed triton has ``mod.attr``: a fork's module (DeepLink's ``triton.language.extra.deeplink``)
    or what an older triton had (``triton.language.math.fast_expf``) is not there, and a task importing it would
    fail."""
    try:
        return hasattr(importlib.import_module(mod), attr) or importlib.util.find_spec(f"{mod}.{attr}") is not None
    except ImportError:
        return False
