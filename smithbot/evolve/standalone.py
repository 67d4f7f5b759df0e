"""Inductor's generated module for a fusion task's glue made a standalone candidate (``to_candidate``): its Triton
kernels with readable names and plain ``@triton.jit``, the Inductor helpers they use inlined, no ``torch._inductor``
import (``generated.py``), and a launcher with the task's entry signature that allocates the buffers and launches the
kernels as Inductor's ``call()`` did (``launcher.py``); cleaned and folded (``clean.py``, ``fold.py``). The compiling
itself is ``inductor.py``'s."""

from __future__ import annotations

import ast

from evaluator.task import EVOLVE_END, EVOLVE_START, parse, split_evolve
from smithbot.evolve.clean import clean_helper, clean_kernel
from smithbot.evolve.generated import (Compiled, InductorError, Kernel, helpers_source, inline_helpers, kernel_name,
                                       take_kernel)
from smithbot.evolve.launcher import follow_dtypes, launcher_body, name_buffers, relaunch, unbake


def to_candidate(baseline: str, entry: str, compiled: Compiled, clean: bool = True, one_row: bool = True) -> str:
    """The candidate ``kernel.py`` text: ``baseline`` with its EVOLVE-BLOCK replaced by Inductor's kernels for the
    glue, their helpers, and ``entry`` (the baseline's signature) launching them as Inductor's ``call`` did; cleaned
    and folded (``clean.py``, ``fold.py``) unless ``clean`` is false, which keeps Inductor's kernels and buffers as
    they come (what ``benchmarks/inductor_clean.py`` times the cleaned seed against). With ``one_row`` a looped
    reduction reads its row in one pass, launched with a block that covers the row; without it, it keeps
    Inductor's loop (the form that holds for rows too long for one block)."""
    tree = parse(compiled.code)
    sources: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and ast.unparse(node.value.func) == "async_compile.triton" and len(node.value.args) >= 2:
            sources[ast.literal_eval(node.value.args[0])] = ast.literal_eval(node.value.args[1])
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "call"), None)
    if call is None or not sources:
        raise InductorError("Inductor's output has no call() or no Triton kernel")
    defs = helpers_source()
    used: set[str] = set()
    kernels: dict[str, Kernel] = {}
    local_helpers: list[str] = []
    for i, (name, src) in enumerate(sources.items()):
        kernels[name], helpers = take_kernel(name, kernel_name(entry, i, len(sources)), src, defs, used)
        local_helpers += helpers
    base_fn = next((n for n in parse(baseline).body if isinstance(n, ast.FunctionDef) and n.name == entry), None)
    if base_fn is None:
        raise InductorError(f"the baseline has no function {entry}")
    body = launcher_body(call, compiled, kernels)
    body = unbake(kernels, body, compiled.scalars)
    if clean:
        body = follow_dtypes(name_buffers(body, base_fn), compiled.dtypes)
        local_helpers = [_cleaned_helper(h) for h in local_helpers]
    adds = frozenset(f.name for f in (parse(h).body[0] for h in local_helpers) if isinstance(f, ast.FunctionDef)
                     and ast.unparse(f.args) == "a, b" and [ast.unparse(b) for b in f.body] == ["return a + b"])
    cleaned = []
    launches = {ast.unparse(c.func.value): [ast.unparse(a) for a in c.args] for line in body
                for c in ast.walk(parse(line)) if isinstance(c, ast.Call) and isinstance(c.func, ast.Subscript)}
    for k in kernels.values():
        fn = parse(k.source).body[0]
        assert isinstance(fn, ast.FunctionDef)
        if clean:
            runtime = [p for p in k.params if p not in k.constexprs]
            given = dict(zip(runtime, launches.get(k.name, [])))
            row = one_row and k.kind == "reduction" and "R0_BLOCK" in k.constexprs and "r0_numel" in given
            blocks = clean_kernel(fn, given, one_row=row, adds=adds)
            sizes = {"R0_BLOCK": f"triton.next_power_of_2(max(1, {given['r0_numel']}))"} if row else {}
            body = [relaunch(line, k.name, blocks, sizes) for line in body]
        cleaned.append(ast.unparse(fn))
    if clean:  # (a helper that folding left unread goes)
        text = "\n".join(cleaned)
        local_helpers = [h for h in local_helpers if parse(h).body[0].name in text]  # type: ignore[attr-defined]
        text += "\n".join(local_helpers)
        used = {u for u in used if (f"_inductor_{u}" if u != "libdevice" else "libdevice.") in text}
    signature = f"def {entry}({ast.unparse(base_fn.args)}):"
    parts = (["from triton.language.extra import libdevice"] if "libdevice" in used else []) + \
        inline_helpers(used, defs) + local_helpers + cleaned + \
        [signature + f'\n    """What the torch glue returns, from {_count(len(kernels))}:\n    the code torch.compile '
                     'generates for it, made standalone by smithbot."""\n'
         + "\n".join("    " + line for line in body)]
    split = split_evolve(baseline)
    if split is None:
        raise InductorError("the baseline has no single EVOLVE-BLOCK")
    head, _, tail = split
    return f"{head}{EVOLVE_START}\n\n" + "\n\n\n".join(parts) + f"\n\n\n{EVOLVE_END}{tail}"


def _count(kernels: int) -> str:
    return "one Triton kernel" if kernels == 1 else f"{kernels} Triton kernels"


def _cleaned_helper(source: str) -> str:
    fn = parse(source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    clean_helper(fn)
    return ast.unparse(fn)
