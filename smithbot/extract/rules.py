"""The closure's quirk rules: rewrites that let a definition copied from the target run in a standalone task without
changing what its kernel computes.

Each rule has its trigger (a cheap sign in the definition's source: most definitions match none, and skip the
parse), its rewrite (the new source, or None where nothing applied) and the reason the rewrite keeps the kernel's
work. ``ClosureBuilder`` applies them in ``RULES`` order to every definition it copies; tests/extract/test_rules.py
holds a fixture for each.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Callable

import libcst as cst

from smithbot.extract.constants import Constants, fold_settings, inline_kwargs
from smithbot.extract.imports import tl_has
from smithbot.extract.rewrite import EnvPinner, Pruner, for_the_task, without_lazy_globals
from smithbot.extract.splice import splice
from smithbot.extract.stand_ins import STAND_INS


@dataclass(frozen=True)
class Context:
    """What a rule reads of the closure being built: the target's stub values, the module's constants and imports,
    and the stand-ins the task gets (a rule adds the one its rewrite calls)."""
    stubs: dict[str, Any]
    constants: Constants
    imports: dict[str, str]
    stand_ins: dict[str, str]
    decided: dict[str, bool]  # the definition's if-tests that serving decides for the launch (``LaunchSite.decided``)


@dataclass(frozen=True)
class Rule:
    name: str
    why: str
    applies: Callable[[Context, str, ast.stmt], bool]
    rewrite: Callable[[Context, str, ast.stmt], str | None]


def _spliced(source: str, node: ast.AST | None) -> str | None:
    return None if node is None else splice(source, node)  # type: ignore[arg-type]


def _function(node: ast.stmt) -> bool:
    return isinstance(node, ast.FunctionDef)


def _profiler_label(ctx: Context, source: str, node: ast.stmt) -> str:
    ctx.stand_ins.setdefault("record_function", STAND_INS["torch.profiler.record_function"].format(
        name="record_function"))
    return source.replace("torch.profiler.record_function", "record_function")


def _record_options(ctx: Context, source: str, node: ast.stmt) -> str | None:
    assert isinstance(node, ast.ClassDef)
    if not any(ctx.imports.get(ast.unparse(b).rpartition(".")[0] or ast.unparse(b), "").startswith("msgspec")
               for b in node.bases):
        return None
    node.keywords = []
    return splice(source, node)


_WATCHING = re.compile(r"([\w.]*\.)?(\w*cache[d]?|(register_)?custom_op|(debug|nvtx|trace)_\w+)(\(.*\))?"
                       r"|torch\.(jit\.script|compile)(\(.*\))?", re.S)


def _watching_decorators(ctx: Context, source: str, node: ast.stmt) -> str | None:
    assert isinstance(node, ast.FunctionDef)
    dropped = [d for d in node.decorator_list if _WATCHING.fullmatch(ast.unparse(d))]
    if not dropped:
        return None
    node.decorator_list = [d for d in node.decorator_list if d not in dropped]
    return splice(source, node)


_HIP_VERSION = re.compile(r"getattr\(torch\.version,\s*['\"]hip['\"],\s*None\)|torch\.version\.hip\b")

RULES: tuple[Rule, ...] = (
    Rule("decided branches",
         "a branch on a runtime helper the target's YAML stands for (`if is_hip():` with is_hip false), or on a test "
         "that the call graph decides for the launch on the default path (`if support_triton(get_server_args()"
         ".attention_backend):`), keeps only the branch serving takes, so the task carries neither another "
         "platform's code nor the state the test reads",
         lambda ctx, src, node: _function(node) and (bool(ctx.decided) or any(name in src for name in ctx.stubs)),
         lambda ctx, src, node: cst.parse_module(src).visit(Pruner(ctx.stubs, ctx.decided)).code),
    Rule("environment reads",
         "`os.getenv(K, D)` and `os.environ.get(K, D)` become D, what a clean environment gives: the task does not "
         "depend on the shell it runs in",
         lambda ctx, src, node: "os." in src,
         lambda ctx, src, node: cst.parse_module(src).visit(EnvPinner()).code),
    Rule("autotune keyword arguments",
         "`@triton.autotune(..., **cache_kwargs)` with the module's constant dict spelled out, so the task does not "
         "need the module that builds it",
         lambda ctx, src, node: _function(node) and "**" in src,
         lambda ctx, src, node: _spliced(src, inline_kwargs(node, ctx.constants))),
    Rule("declared settings",
         "`envs.X.get()` of a settings registry becomes the setting's declared default, the value default serving "
         "reads",
         lambda ctx, src, node: _function(node) and ".get()" in src,
         lambda ctx, src, node: _spliced(src, fold_settings(node, ctx.constants))),
    Rule("profiler labels",
         "`with torch.profiler.record_function(...)` only labels a trace: it becomes a stand-in that does nothing",
         lambda ctx, src, node: "torch.profiler.record_function" in src,
         _profiler_label),
    Rule("record options",
         "`class Plan(msgspec.Struct, frozen=True)`: the record's options only govern serialisation, and the task "
         "imports no msgspec",
         lambda ctx, src, node: isinstance(node, ast.ClassDef) and bool(node.keywords),
         _record_options),
    Rule("triton spellings",
         "`x.device.type == \"cuda\"` as `x.is_cuda` (what the interpreter's stand-in answers) and `tl.math` names "
         "as the installed triton spells them",
         lambda ctx, src, node: "tl.math." in src or "device.type" in src or "autotune" in src,
         lambda ctx, src, node: _spliced(src, for_the_task(node, tl_has))),
    Rule("ROCm version",
         "the task runs on CUDA, where `torch.version.hip` is None",
         lambda ctx, src, node: "torch.version" in src,
         lambda ctx, src, node: _HIP_VERSION.sub("None", src)),
    Rule("watching decorators",
         "memoisation (lru_cache) only saves time and the evaluator allows no state; a torch custom-op registration "
         "only routes calls; debugging and tracing wrappers only watch the call; TorchScript and torch.compile only "
         "compile the same function",
         lambda ctx, src, node: _function(node) and bool(node.decorator_list),  # type: ignore[attr-defined]
         _watching_decorators),
    Rule("lazy globals",
         "`global cap` / `if cap is None: cap = probe()` caches a probe's answer between calls; the task asks on "
         "each call (the evaluator allows no state between calls)",
         lambda ctx, src, node: _function(node) and any(isinstance(n, ast.Global) for n in ast.walk(node)),
         lambda ctx, src, node: splice(src, without_lazy_globals(node))),  # type: ignore[arg-type]
)


def rewritten(ctx: Context, source: str, node: ast.stmt) -> tuple[str, ast.stmt]:
    """A definition's source and node with every rule that applies applied, in order."""
    for rule in RULES:
        if rule.applies(ctx, source, node):
            new = rule.rewrite(ctx, source, node)
            if new is not None and new != source:
                source, node = new, ast.parse(new).body[0]
    return source, node
