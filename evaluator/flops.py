"""The multiply-add work a task's kernels do, counted where it happens.

A kernel's headroom against the copy bandwidth says nothing about a kernel bound by its tensor cores. For those, the
work its ``tl.dot`` calls do is counted by running an instrumented copy of the task's kernel module once: every
``tl.dot(a, b, ...)`` becomes ``tl.dot(_sb_counted(a, b, _sb_flops), b, ...)``, where ``_sb_counted`` adds
``2·M·N·K`` of its operands' block shapes to a counter (one slot per operand width: 8, 16 and 32 bits) and returns
``a`` unchanged. The counter reaches each instrumented ``@triton.jit`` function as an added last parameter, passed on
to the helpers that (transitively) call ``tl.dot`` and, at launch, by ``runtime.LaunchCounter``. The count is what the
GPU executes: masked tails and padded blocks count as the full block, as the tensor cores do them.

Only 2-D dots are counted right (a batched 3-D dot counts one batch); ``a @ b`` is not counted. Torch-only.
"""

from __future__ import annotations

import ast
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

PARAM = "_sb_flops"
HELPER = "_sb_counted"
WIDTHS = (8, 16, 32)  # the counter's slots, by the bits of a dot's operands

_HELPER_SRC = f'''
@JIT
def {HELPER}(a, b, counter):
    tl.atomic_add(counter + a.dtype.primitive_bitwidth // 16, 2 * a.shape[0] * a.shape[1] * b.shape[1])
    return a
'''


def _is_jit(fn: ast.FunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (isinstance(target, ast.Attribute) and target.attr == "jit") or \
                (isinstance(target, ast.Name) and target.id == "jit"):
            return True
    return False


def _is_dot(call: ast.Call, lang: set[str]) -> bool:
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr == "dot" and ast.unparse(f.value) in lang


def _language_names(tree: ast.Module) -> set[str]:
    """What the module calls ``triton.language`` (``tl``, or the dotted name itself)."""
    names = {"triton.language"}
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name == "triton.language" and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "triton":
            names |= {a.asname or a.name for a in node.names if a.name == "language"}
    return names


def instrument(source: str) -> str | None:
    """The module's source with its ``tl.dot`` work counted (see the module's doc), or None where no
    ``@triton.jit`` function calls ``tl.dot``."""
    tree = ast.parse(source)
    lang = _language_names(tree)
    jitted = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and _is_jit(n)}

    def calls(fn: ast.FunctionDef) -> list[ast.Call]:
        return [c for c in ast.walk(fn) if isinstance(c, ast.Call)]

    counting = {name for name, fn in jitted.items() if any(_is_dot(c, lang) for c in calls(fn))}
    if not counting:
        return None
    grew = True
    while grew:  # the helpers' callers count too
        more = {name for name, fn in jitted.items() if name not in counting and any(
            isinstance(c.func, ast.Name) and c.func.id in counting for c in calls(fn))}
        counting |= more
        grew = bool(more)
    for name in counting:
        fn = jitted[name]
        fn.args.args.append(ast.arg(PARAM))
        if fn.args.defaults:  # (a parameter after defaulted ones needs one too)
            fn.args.defaults.append(ast.Constant(None))
        for c in calls(fn):
            if _is_dot(c, lang) and len(c.args) >= 2:
                c.args[0] = ast.Call(ast.Name(HELPER, ast.Load()), [c.args[0], c.args[1], ast.Name(PARAM, ast.Load())],
                                     [])
            elif isinstance(c.func, ast.Name) and c.func.id in counting:
                c.keywords.append(ast.keyword(PARAM, ast.Name(PARAM, ast.Load())))
    first = min(i for i, n in enumerate(tree.body) if isinstance(n, ast.FunctionDef) and n.name in jitted)
    jit = next(d.func if isinstance(d, ast.Call) else d for d in tree.body[first].decorator_list
               if ast.unparse(d.func if isinstance(d, ast.Call) else d).endswith("jit"))
    helper = _HELPER_SRC.replace("JIT", ast.unparse(jit)).replace("tl.", f"{min(lang, key=len)}.")
    tree.body[first:first] = ast.parse(helper).body
    return ast.unparse(ast.fix_missing_locations(tree))


@contextmanager
def counting(kernel_path: Path, entry: str, interpreter: bool) -> Iterator[Callable[..., Any] | None]:
    """The task's entry from an instrumented copy of its kernel module (loaded once, from a temporary file that
    lives as long as the context), or None where the module has no ``tl.dot``."""
    from evaluator.runtime import load_module

    source = instrument(kernel_path.read_text())
    if source is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="smithbot-flops-") as tmp:
        path = Path(tmp) / kernel_path.name
        path.write_text(source)
        yield getattr(load_module(path, "flops", interpreter), entry)


def count(fn: Callable[..., Any], args: dict[str, Any], device: str) -> dict[int, int]:
    """The ``tl.dot`` work (multiply-adds × 2) of one call of the instrumented entry ``fn`` (``counting``) on
    ``args``, by operand width. It calls twice (an autotuner settles on the first) and counts the second."""
    import torch

    from evaluator.bounds import handed
    from evaluator.runtime import LaunchCounter

    counter = torch.zeros(len(WIDTHS), dtype=torch.int64, device=device)
    LaunchCounter.install()
    LaunchCounter.extra = {PARAM: counter}
    try:
        with handed(args):
            fn(**args)
            counter.zero_()
            fn(**args)
    finally:
        LaunchCounter.extra = None
    return {w: int(n) for w, n in zip(WIDTHS, counter.tolist()) if n}
