"""Inferred inputs grown to what the kernel reads, from the interpreter's bounds check.

An inferred shape is a guess: ``q_gate`` is ``[tokens]`` by default, but the kernel reads ``[tokens, heads]`` of it.
The bounds check (``evaluator/bounds.py``) then names the kernel argument, the first and the furthest element read
past its end, and how many its storage holds. ``grow`` follows the argument back through the launch to the harness
input it came from, and gives that input the smallest shape, among a few made from the case's own sizes, that holds
what was read: one more row (``tokens + 1``: offsets into ``tokens`` sequences), its leading axis times a size, a
leading token axis (``[hidden]`` read per token), or, for a 1-D input, another axis of a named size
(``[tokens, heads]``). If the launcher rejects the shape, the next one
is tried. The shape stays symbolic, so the GPU's model-sized cases grow
with it. The self-check is then run again, and an input may grow again; when nothing passes the harness is put back
as it was. Only inputs smithbot inferred are grown: the target YAML's specs are a person's, and stand.
"""

from __future__ import annotations

import ast
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import yaml

from smithbot.inputs.harness import plan_of, respec
from smithbot.inputs.sizes import size_value
from smithbot.types import Check, TensorSpec

_METHODS = {"view", "reshape", "contiguous", "flatten", "to", "float", "half", "bfloat16", "int", "long",
            "unsqueeze", "squeeze", "view_as", "narrow", "expand", "transpose", "permute", "t", "clone"}


def _base(expr: ast.expr, assigned: dict[str, ast.expr], seen: set[str], leaves: dict[str, str]) -> str | None:
    """The launcher name an argument is made from: ``x.view(-1, d)[0]``, ``x_flat`` after ``x_flat = x.flatten()``
    -> ``x``; an object's attribute (``self.slot_mapping.gpu``) -> the flat entry's parameter for it (``leaves``)."""
    while True:
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _METHODS:
            expr = expr.func.value
        elif isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Name) and expr.id in assigned and expr.id not in seen:
            seen.add(expr.id)
            expr = assigned[expr.id]
        elif isinstance(expr, ast.Attribute) and ast.unparse(expr) in leaves:
            return leaves[ast.unparse(expr)]
        else:
            return expr.id if isinstance(expr, ast.Name) else None


def _leaves(tree: ast.Module) -> dict[str, str]:
    """{an object's attribute path, ``self.slot_mapping.gpu``: the flat entry's parameter that stands for it}, from
    the stand-in objects the flat entry (``inputs.specs.flat_entry``) hands the launcher."""
    out: dict[str, str] = {}

    def walk(path: str, value: ast.expr) -> None:
        if isinstance(value, ast.Name):
            out[path] = value.id
        elif isinstance(value, ast.Call):
            for k in value.keywords:
                walk(f"{path}.{k.arg}", k.value)

    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.endswith("_flat")):
        ret = fn.body[-1]
        if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Call):
            for k in ret.value.keywords:
                if isinstance(k.value, ast.Call):
                    walk(str(k.arg), k.value)
    return out


def harness_inputs(kernel_py: str, kernel: str, params: list[str]) -> dict[str, str]:
    """For each of ``kernel``'s parameters, the launcher name its launches hand it (positional or keyword)."""
    tree = ast.parse(kernel_py)
    jit = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == kernel), None)
    if jit is None:
        return {}
    order = [a.arg for a in jit.args.posonlyargs + jit.args.args]
    leaves = _leaves(tree)
    out: dict[str, str] = {}
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        assigned = {t.id: n.value for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets
                    if isinstance(t, ast.Name)}
        for call in ast.walk(fn):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript)
                    and isinstance(call.func.value, ast.Name) and call.func.value.id == kernel):
                continue
            if any(isinstance(a, ast.Starred) for a in call.args):
                continue  # *x.stride() splats: positions after them are not known here
            passed = list(zip(order, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
            for name, arg in passed:
                base = _base(arg, assigned, set(), leaves)
                if name in params and base is not None:
                    out.setdefault(name, base)
    return out


MOST_ELEMENTS = 2**30  # a grown input at the GPU's model-sized cases: 2 GiB of bf16 at most (no 400 GB tables)


def _numel(shape: list[Any], dims: dict[str, int]) -> int:
    try:
        return math.prod(int(size_value(x, dims)) for x in shape)
    except (KeyError, ValueError, TypeError, ZeroDivisionError):
        return -1


def _candidates(shape: list[Any], dims: dict[str, int], need: int, again: bool) -> list[list[Any]]:
    """Shapes holding at least ``need`` elements, smallest first, then in this order: one more leading row (not
    ``again``: a second read past the end is no off-by-one); for one axis, another axis of a case size or of two
    sizes' product (read through its stride as rows); the leading axis times a case size. An axis added behind others
    would change their strides, which the kernel reads by; a leading token axis, when there is none, would not. A
    second token axis is not among them."""
    lead = str(shape[0]) if shape else "1"
    sizes = sorted(d for d in dims if d != "tokens")
    options = [[f"{lead} + 1", *shape[1:]]] if shape and not again else []
    if len(shape) <= 1:
        options += [[*shape, d] for d in sizes]
        options += [[*shape, f"{a} * {b}"] for i, a in enumerate(sizes) for b in sizes[i + 1:]]
    options += [[f"({lead}) * {d}", *shape[1:]] for d in sizes] if shape else []
    if shape and "tokens" not in lead:  # [hidden] read per token: [tokens, hidden], whose rows keep their stride
        options.append(["tokens", *shape])

    fits = [(_numel(s, dims), i, s) for i, s in enumerate(options) if _numel(s, dims) >= need]
    return [s for _, _, s in sorted(fits, key=lambda x: (x[0], x[1]))]


def grow(task_dir: Path, failed: Check, check: Callable[[Path], Check], yaml_inputs: dict[str, Any],
         rounds: int = 6) -> Check:
    """Grow the input that a failed self-check says a kernel read past (``Check.read_past``), check again, and
    repeat while the failures are reads past inferred inputs, at most ``rounds`` times. ``yaml_inputs``: the target
    YAML's input specs by launcher; those it gives are never grown. Returns the check that passed, its line saying
    what grew, or ``failed``, with the harness as it was."""
    harness = task_dir / "harness.py"
    if not harness.is_file() or failed.read_past is None:
        return failed
    entry = str(yaml.safe_load((task_dir / "task.yaml").read_text()).get("entry", ""))
    wrapper = entry.removesuffix("_flat")  # the YAML's specs of it, or of any file's launcher of its name
    person = set().union(*(spec for key, spec in yaml_inputs.items() if key.rpartition("::")[2] == wrapper))
    before = harness.read_text()
    grown: dict[str, tuple[Any, Any]] = {}
    result, checks = failed, 0
    while checks < rounds and result.read_past is not None:
        step = _options(task_dir, result.read_past, person, grown)
        if step is None:
            break
        name, original, options = step
        for shape in options[:3]:  # a shape the launcher then rejects (`n % BLOCK == 0`): the next one
            _set_shape(task_dir, name, shape)
            grown[name] = (original, shape)
            checks += 1
            result = check(task_dir)
            if result.ok:
                what = "; ".join(f"{k} {old} -> {new}" for k, (old, new) in grown.items())
                text = harness.read_text()
                harness.write_text(text.replace(" written by smithbot extract (", " written by smithbot extract "
                                                f"(grown to what the kernel reads: {what}; ", 1))
                return replace(result, why=f"{result.why} (inputs grown to what the kernel reads: {what})")
            if result.read_past is not None or checks >= rounds:
                break
    harness.write_text(before)
    return failed


def _set_shape(task_dir: Path, name: str, shape: list[Any]) -> None:
    harness = task_dir / "harness.py"
    text = harness.read_text()
    plan = plan_of(text)
    assert plan is not None  # only a plan's tensors are grown (_options)
    harness.write_text(respec(text, plan.with_shape(name, shape)))


def _options(task_dir: Path, read_past: dict[str, Any], person: set[str],
             grown: dict[str, tuple[Any, Any]]) -> tuple[str, list[Any], list[list[Any]]] | None:
    """(the input a kernel read past, its inferred shape, the shapes that hold what was read), or None. ``read_past``:
    what the bounds check found (``evaluator.bounds.OutOfBounds.found``)."""
    kernel, first, names = read_past["kernel"], int(read_past["first"]), str(read_past["tensor"])
    holds, furthest = int(read_past["holds"]), int(read_past["furthest"])
    if first < holds:
        return None  # read before the start: no size fixes that
    harness = task_dir / "harness.py"
    plan = plan_of(harness.read_text())
    if plan is None:
        return None
    task = yaml.safe_load((task_dir / "task.yaml").read_text())
    spec, extra = plan.specs, plan.dims
    every = []  # each case's dims, the interpreter's first
    for case in sorted(task.get("cases", []), key=lambda c: not c.get("interpreter")):
        dims = {k: v for k, v in case.get("dims", {}).items() if isinstance(v, int) and not isinstance(v, bool)}
        for k, v in extra.items():
            dims[k] = size_value(v, dims)
        every.append(dims)
    if not any(c.get("interpreter") for c in task.get("cases", [])):
        return None
    dims = every[0]
    params = names.split("/")
    sources = harness_inputs((task_dir / "kernel.py").read_text(), kernel, params)
    for p in params:
        name = sources.get(p, p)
        entry = spec.get(name)
        if name in person or not isinstance(entry, TensorSpec):
            continue
        size = _numel(list(entry.shape), dims)
        if size < 0:
            continue
        # the element count is in the kernel's pointer type; the storage holds ``holds`` of them for ``size``
        need = -(-(furthest + 1) * size // max(holds, 1))
        original = grown.get(name, (list(entry.shape),))[0]  # a second growth starts again from the inferred shape
        options = [o for o in _candidates(original, dims, need, again=name in grown)
                   if all(0 <= _numel(o, d) <= MOST_ELEMENTS for d in every)]
        if options:
            return name, original, options
    return None
