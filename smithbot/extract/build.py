"""Write a task directory (DESIGN.md, "The task") for one launched kernel, and self-check it with the evaluator."""

from __future__ import annotations

import ast
import copy
import re
import shutil
from pathlib import Path
from dataclasses import dataclass, replace
from typing import Any, Callable

import yaml

from evaluator import Evaluator, TaskError
from smithbot.config import Target
from smithbot.extract.closure import ClosureBuilder, ExtractError
from smithbot.extract.entry import op_entry
from smithbot.extract.glue import GlueError, glue_function, served_condition, served_tests
from smithbot.inputs.cases import cases
from smithbot.inputs.harness import harness_source
from smithbot.inputs.names import TORCH_DTYPES, setting
from smithbot.inputs.specs import (NAME_RULES, InputError, Objects, flat_entry, flatten_objects, object_leaves,
                                   param_specs, traced_specs, traced_values)
from smithbot.types import Check, InputPlan, KernelSite, LaunchSite, LiteralSpec, failure_of

LAUNCH_KWARGS = ("num_warps", "num_stages")


def _wrapper_node(root: Path, site: KernelSite, modules: dict[str, str] | None = None,
                  inputs: dict[str, dict[str, Any]] | None = None, caller: bool = False
                  ) -> tuple[str, str, ast.FunctionDef | None]:
    """The launch to build ``site``'s task from (``_launcher_node``); with ``modules``, its op instead when the
    launcher takes an op's internal tables (``entry.op_entry``; ``inputs``: the target YAML's input specs), or, with
    ``caller``, whenever an op calls it."""
    path, wrapper, fn = _launcher_node(root, site)
    if modules is not None and fn is not None:
        op = op_entry(root, sorted(modules.values()), path, fn, inputs or {}, caller)
        if op is not None:
            return op
    return path, wrapper, fn


def _launcher_node(root: Path, site: KernelSite) -> tuple[str, str, ast.FunctionDef | None]:
    """(module path, wrapper, its def) of the kernel's preferred launch: CUDA branch first, fallbacks last, functions
    before methods. The wrapper is a module-level function (also one whose nested function launches), or
    ``Cls.method`` of a module-level class (then the def is None: the closure builder writes it as a function)."""
    for la in _preferred(site):
        cls, _, method = la.wrapper.rpartition(".")
        tree = ast.parse((root / la.path).read_text(encoding="utf-8-sig"))
        for node in tree.body:
            if not cls and isinstance(node, ast.FunctionDef) and node.name == la.wrapper:
                return la.path, la.wrapper, node
            if cls and isinstance(node, ast.ClassDef) and node.name == cls and any(
                    isinstance(n, ast.FunctionDef) and n.name == method for n in node.body):
                return la.path, la.wrapper, None
            if cls and isinstance(node, ast.FunctionDef) and node.name == cls and any(
                    isinstance(n, ast.FunctionDef) and n.name == method for n in ast.walk(node) if n is not node):
                return la.path, cls, node  # a launch in a function nested in a launcher: the launcher, as it is
    wrappers = ", ".join(sorted({la.wrapper for la in site.launches})) or "none"
    raise ExtractError(f"{site.name}: no module-level launcher function or method to extract (launched from: "
                       f"{wrappers}); launches at module level or two definitions deep are not supported yet")


def _preferred(site: KernelSite) -> list[LaunchSite]:
    """The launches a task may be built at, best first: CUDA branch first, fallbacks last, functions before methods
    (a launch at module level, or two definitions deep, is none)."""
    return sorted([la for la in site.launches if la.wrapper != "<module>" and la.wrapper.count(".") <= 1],
                  key=lambda la: (la.fallback_only, not la.cuda_branch, "." in la.wrapper))


def launchers(site: KernelSite) -> tuple[tuple[str, str], ...]:
    """(module path, wrapper) of each function that launches ``site``'s kernel, best first (``_preferred``)."""
    return tuple(dict.fromkeys((la.path, la.wrapper) for la in _preferred(site)))


def launched_at(site: KernelSite, at: tuple[str, str]) -> KernelSite:
    """``site`` with only its launches in the function ``at``, so that its task is built there."""
    return replace(site, launches=tuple(la for la in site.launches if (la.path, la.wrapper) == at))


def launcher(root: Path, site: KernelSite, modules: dict[str, str] | None = None,
             inputs: dict[str, dict[str, Any]] | None = None, caller: bool = False) -> tuple[str, str] | None:
    """(module path, wrapper) of the launch or op that ``site``'s task is built from (``_wrapper_node``); None when
    there is none."""
    try:
        return _wrapper_node(root, site, modules, inputs, caller)[:2]
    except ExtractError:
        return None


def _literal(node: ast.expr | None) -> Any:
    """A default's value (``torch.float32`` as the spec ``dtype:fp32``), or ... when there is none or it is not a
    literal."""
    if node is None:
        return ...
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch" \
            and node.attr in TORCH_DTYPES:
        return f"dtype:{TORCH_DTYPES[node.attr]}"
    try:
        return ast.literal_eval(node)
    except ValueError:
        # `quant_policy: QuantPolicy = QuantPolicy.NONE`, `dt_limit=(0.0, float("inf"))`: the launcher's own
        # default, which the inputs leave to it
        return "default:"


def _params(fn: ast.FunctionDef) -> list[tuple[str, Any]]:
    """(name, default or ...) of every positional and keyword-only parameter, in signature order."""
    args = fn.args.posonlyargs + fn.args.args
    defaults = [None] * (len(args) - len(fn.args.defaults)) + list(fn.args.defaults)
    out = [(a.arg, _literal(d)) for a, d in zip(args, defaults)]
    out += [(a.arg, _literal(d)) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)]
    return out


def _kwargs_settings(fn: ast.FunctionDef) -> list[tuple[str, Any]]:
    """(key, value) for each key a launcher reads from its ``**kwargs`` as a settings dict (LightLLM's
    ``**run_config`` with ``run_config["BLOCK_N"]``, ``run_config.get("num_warps", 4)``): the task passes them, so
    that the branch reading them runs as when a tuning table answers. A ``.get`` default is kept."""
    kw = fn.args.kwarg.arg if fn.args.kwarg else None
    out: dict[str, Any] = {}
    for node in ast.walk(fn) if kw else ():
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == kw \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            out.setdefault(node.slice.value, setting(node.slice.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == kw and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            d = _literal(node.args[1]) if len(node.args) > 1 else ...
            out[node.args[0].value] = d if isinstance(d, (int, float, bool)) else setting(node.args[0].value)
    return [(k, v) for k, v in out.items() if k.isidentifier()]


def _tunables(fn: ast.FunctionDef, source: str) -> dict[str, Any]:
    launch: dict[str, set[Any]] = {}
    constexpr: dict[str, set[Any]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            for kw in node.keywords:
                if kw.arg is None:
                    continue
                try:
                    value = ast.literal_eval(kw.value)
                except ValueError:
                    value = ast.unparse(kw.value)
                if kw.arg in LAUNCH_KWARGS:
                    launch.setdefault(kw.arg, set()).add(value)
                elif kw.arg.isupper():
                    constexpr.setdefault(kw.arg, set()).add(value)
    out: dict[str, Any] = {}
    if launch:
        out["launch"] = {k: sorted(v, key=str) for k, v in launch.items()}
    if constexpr:
        out["constexpr"] = {k: sorted(v, key=str) for k, v in constexpr.items()}
    if "triton.autotune" in source or "@autotune" in source:
        out["autotune"] = True
    return out


NEVER_LAUNCHED = "its task's inputs never launch it"


def branch_values(root: Path, site: KernelSite, modules: dict[str, str],
                  inputs: dict[str, dict[str, Any]] | None = None) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(launcher, the values of its parameters that take it down the branches to its launch of ``site``'s kernel,
    the values of its module's settings that do), where the tests are plain: ``if use_fp8:`` (True; False on the
    else side), ``if not x``, ``if mode == "decode"``, ``if scale is None``, ``if policy == Policy.FP8`` or ``in
    (Policy.FP8, ...)`` for an int or str enum of the target (its member's value; on the else side of such tests, a
    member none of them took). A setting is a module-level name bound once to a constant (``_USE_BATCHED_ROPE =
    False``, which a setter flips at run time). What a test this cannot read needs is left out; {} for a method
    launcher."""
    try:
        path, wrapper, fn = _wrapper_node(root, site, modules, inputs)
    except ExtractError:
        return "", {}, {}
    module = next((m for m, p in modules.items() if p == path), None)
    if fn is None or module is None:
        return wrapper, {}, {}
    resolver = ClosureBuilder(root, dict(modules), module.split(".")[0], {}, ())
    mod = resolver.module(module)
    local = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    settings = {name for name, node in (mod.top.items() if mod is not None else ())
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant)
                and name not in local}

    def member(node: ast.expr) -> tuple[Any, tuple[Any, ...]]:
        """``Policy.FP8`` -> (16, every member's value), where the target has ``class Policy(enum.IntEnum): FP8 =
        16``; (..., ()) for what is not such a member."""
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
            return ..., ()
        mod, name = resolver.module(module), node.value.id
        if mod is not None and name not in mod.top and "." in mod.imports.get(name, ""):
            mod, name = resolver.module(mod.imports[name].rpartition(".")[0]), mod.imports[name].rpartition(".")[2]
        cls = mod.top.get(name) if mod is not None else None
        if not (isinstance(cls, ast.ClassDef) and re.search(r"\b(IntEnum|IntFlag|StrEnum|int|str)\b",
                                                            " ".join(map(ast.unparse, cls.bases)))):
            return ..., ()
        values = {ast.unparse(s.targets[0]): s.value.value for s in cls.body if isinstance(s, ast.Assign)
                  and len(s.targets) == 1 and isinstance(s.value, ast.Constant)}
        return values.get(node.attr, ...), tuple(values.values())

    values = _branch_values(fn, site.name, member, settings)
    return (wrapper, {k: v for k, v in values.items() if k not in settings},
            {k: v for k, v in values.items() if k in settings})


_EQUALITIES = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)


def _branch_values(fn: ast.FunctionDef, kernel: str, member: Callable[[ast.expr], tuple[Any, tuple[Any, ...]]],
                   settings: set[str]) -> dict[str, Any]:
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs} | settings
    parents = {id(c): n for n in ast.walk(fn) for c in ast.iter_child_nodes(n)}
    launch = next((n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
                   and isinstance(n.func.value, ast.Name) and n.func.value.id == kernel), None)
    out: dict[str, Any] = {}
    ruled_out: dict[str, set[Any]] = {}  # on an else side: the values the tests before it took
    members: dict[str, tuple[Any, ...]] = {}  # a parameter compared with an enum's members: all of them

    def holds(test: ast.expr, truth: bool) -> None:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            holds(test.operand, not truth)
        elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) == truth:
            for v in test.values:  # a and b taken, or a or b not taken: each of them
                holds(v, truth)
        elif isinstance(test, ast.Name) and test.id in params:
            out.setdefault(test.id, truth)
        elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
                and test.left.id in params and isinstance(test.ops[0], _EQUALITIES):  # `n > 64` names no value
            op, right, p = test.ops[0], test.comparators[0], test.left.id
            options = right.elts if isinstance(op, (ast.In, ast.NotIn)) and isinstance(
                right, (ast.Tuple, ast.List, ast.Set)) else [right]
            found = [(o.value, ()) if isinstance(o, ast.Constant) else member(o) for o in options]
            for _, every in found:
                members[p] = every or members.get(p, ())
            if truth != isinstance(op, (ast.NotEq, ast.NotIn, ast.IsNot)):  # p is (one of) the options
                if found and found[0][0] is not ...:
                    out.setdefault(p, found[0][0])  # policy == A, policy in (A, B): A
            elif not isinstance(op, (ast.Is, ast.IsNot)):
                ruled_out.setdefault(p, set()).update(v for v, _ in found if v is not ...)

    node: ast.AST | None = launch
    while node is not None and node is not fn:
        parent = parents.get(id(node))
        if isinstance(parent, ast.If) and node is not parent.test:
            holds(parent.test, any(node is b for b in parent.body))
        node = parent
    for p, taken in ruled_out.items():  # the else side of `if policy == A: ... elif policy in (B, C):`: another member
        other = next((v for v in members.get(p, ()) if v not in taken), ...)
        if p not in out and other is not ...:
            out[p] = other
    return out


class NeedsInputs(ExtractError):
    """The kernel was extracted but its inputs could not be inferred: the task was written without a harness, for an
    LLM to write one."""

    def __init__(self, message: str, out: Path) -> None:
        super().__init__(message)
        self.out = out


# The sizes every model preset has: the cases of a task whose inputs an LLM will write.
DENSE_DIMS = ("hidden", "heads", "kv_heads", "head_dim", "intermediate")
MODEL_DIMS = (*DENSE_DIMS, "vocab", "experts", "top_k", "moe_intermediate")  # a preset's, by the name cases use


def extract(root: Path, commit: str | None, url: str, target: Target, site: KernelSite,
            modules: dict[str, str], out: Path, without_inputs: bool = False, name: str = "",
            op: bool | str = True) -> Path:
    """Write the task for ``site`` into ``out``; its id is the target's name and ``name`` (default: the kernel's).
    With ``without_inputs``, a kernel whose inputs cannot be inferred is still written, without ``harness.py``, and
    :class:`NeedsInputs` says so. Without ``op``, the task is built around the launcher even where an op would be
    chosen (``entry.op_entry``); with ``op="caller"``, around the op that calls the launcher, whatever it takes."""
    path, wrapper, fn = _wrapper_node(root, site, modules if op else None, target.inputs, op == "caller")
    launch_path, own_launcher, _ = _launcher_node(root, site)
    in_op = (path, wrapper) != (launch_path, own_launcher)  # built around the op that calls the launcher
    module = next((m for m, p in modules.items() if p == path), None)
    if module is None:
        raise ExtractError(f"{site.name}: {path} shares its module name with another file; cannot place it")
    target = target.for_launcher(path, wrapper.replace(".", "_"))  # a method's inputs are those of Cls_method
    # a launcher that picks its kernel by its inputs: this kernel's own specs (`_kernels:`) take its branch
    own = target.inputs.get(wrapper.replace(".", "_"), {}).get("_kernels", {}).get(site.name)
    if own:
        target = target.with_inputs(wrapper.replace(".", "_"), own)
    # the launcher's own `_stubs:` (a helper's value for this launcher's task alone) over the target's
    stubs = {**target.stubs, **(target.inputs.get(wrapper.replace(".", "_"), {}).get("_stubs") or {})}
    # a spec for a name the launcher reads as `get_NAME()` (engine state) hands that state in (closure.py)
    state = tuple(k for k in target.inputs.get(wrapper.replace(".", "_"), {}) if not k.startswith("_"))
    module_of = {p: m for m, p in modules.items()}
    decided = {(module_of.get(la.path, ""), la.wrapper): dict(la.decided) for la in site.launches if la.decided}
    builder = ClosureBuilder(root, modules, module.split(".")[0], stubs, target.hints.external_modules,
                             target.hints.custom_jit_decorators, state, decided)
    if fn is None:  # Cls.method, extracted as the function Cls_method
        fn = builder.add_method(module, *wrapper.split("."), wrapper.replace(".", "_"))
        wrapper = fn.name
    else:
        builder.add(module, wrapper)
    if builder.c.blockers:
        raise ExtractError(f"{site.name}: " + "; ".join(dict.fromkeys(builder.c.blockers)))
    defs = builder.render_definitions()
    functions = tuple(n for d in defs for n in ast.parse(d.source).body if isinstance(n, ast.FunctionDef))
    # the inputs are read from the launcher as the task runs it: its branches for other platforms gone (a CPU
    # path's method calls on an object do not make it more than what it is on the GPU's), the engine state it reads
    # made parameters
    fn = next((f for f in functions if f.name == wrapper), fn)
    got = _inputs(fn, functions, wrapper, target, site.name, without_inputs)
    objects, entry = got.objects, got.entry
    kernel_src = _write_kernel(
        out, f"{site.name}, launched by {wrapper}(): extracted by smithbot from {url}"
        f"{'@' + commit[:12] if commit else ''} {path}.\n\nEvery definition below comes from the target; task.yaml "
        "says where. Stubs replace runtime helpers with the target's values.", builder, defs,
        flat_entry(wrapper, [n for n, _ in _params(fn)], objects) if objects else "")
    if not got.missing:
        (out / "harness.py").write_text(harness_source(entry, got.plan, _how(target, "launcher", got.inferred)))
    task = {
        "id": f"{target.name}-{name or site.name.strip('_')}",
        "kind": "triton",
        "entry": entry,
        "description": f"{site.name} ({site.family}) from {path}:{site.line}, launched by {wrapper}()." if
        not in_op else f"{site.name} ({site.family}) from {site.path}:{site.line}, in the op {wrapper}() "
        f"({path}), which launches it through {own_launcher}(): the op's inputs are model tensors, where the "
        f"launcher's are tables the op builds.",
        "provenance": {"repo": url, "commit": commit,
                       "definitions": [{"name": d.name, "path": d.path, "qualname": d.qualname} for d in defs
                                       if not d.source.startswith(f"{d.name} = ")] },
        "seeds": 3,
        # atomics sum in whatever order the programs run: a second call's floats may differ in the last bits
        "deterministic": not _ATOMIC.search(kernel_src),
        "cases": got.cases,
        **({"skipped": got.skipped} if got.skipped else {}),
        "tunables": _tunables(fn, kernel_src),
    }
    hotness = _hotness(site)
    if hotness:
        task["hotness"] = hotness
    (out / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False, width=120))
    if got.missing:
        raise NeedsInputs(f"{site.name}: {got.missing}", out)
    return out


def _hotness(site: KernelSite) -> dict[str, Any]:
    """What the scan knew of how hot the kernel is, for task.yaml (what it did not know left out)."""
    hotness = {"presets": list(site.presets), "default_path": site.default_path, "reach": site.reach,
               "undecided": list(site.undecided), "per_step": dict(site.per_step),
               "measured": (f"{site.measured_share:.1%} of the GPU time of a {site.measured_of}"
                            if site.measured_share else ""), "share": site.measured_share or 0.0}
    return {k: v for k, v in hotness.items() if v}


@dataclass(frozen=True)
class _Inputs:
    """A launcher's inputs: the task's entry (the launcher, or its flat form where a parameter is read only for its
    attributes, ``objects``), each input's spec, the inferred names, the shape cases, and, where none could be
    worked out (``without_inputs``), why."""

    entry: str
    objects: Objects
    plan: InputPlan
    inferred: list[str]
    cases: list[dict[str, Any]]
    skipped: list[Any]
    missing: str = ""


def _inputs(fn: ast.FunctionDef, functions: tuple[ast.FunctionDef, ...], wrapper: str, target: Target,
            kernel: str, without_inputs: bool) -> _Inputs:
    """The inputs of launcher ``fn`` (``functions``: the closure's), as ``_Inputs``. A parameter read only for its
    attributes (``plan.seq_lens``, a method's ``self.weight``) becomes one per attribute; where an attribute has
    nothing to go on, the object is asked for whole. Without ``without_inputs``, inputs that cannot be worked out
    are an ExtractError."""
    bare = [n for n, d in _params(fn) if d is ... and n not in target.inputs.get(wrapper, {}) and n not in NAME_RULES]
    flat_fn, objects = flatten_objects(fn, bare, {f.name: f for f in functions})
    entry = f"{wrapper}_flat" if objects else wrapper
    try:
        try:
            plan, inferred = param_specs(_params(flat_fn) + _kwargs_settings(flat_fn), wrapper, target, flat_fn,
                                         functions)
        except InputError as flat_exc:
            if not objects:
                raise
            attr = next((path for path, n in object_leaves(objects) if n == flat_exc.name), None)
            flat_fn, objects, entry = fn, {}, wrapper  # an attribute has nothing to go on: ask for the object
            try:
                plan, inferred = param_specs(_params(fn) + _kwargs_settings(fn), wrapper, target, fn, functions)
            except InputError as whole:
                raise InputError(f"{whole} (nothing shows what {attr} is)" if attr else str(whole)) from None
        case_list, skipped = cases(plan, target, wrapper)
    except InputError as exc:
        if not without_inputs:
            raise ExtractError(f"{kernel}: {exc}") from None
        case_list, skipped = cases(InputPlan(()), target, wrapper, also=DENSE_DIMS)
        return _Inputs(entry, objects, InputPlan(()), [], case_list, skipped, str(exc))
    return _Inputs(entry, objects, plan, inferred, case_list, skipped)


_ATOMIC = re.compile(r"\btl\.atomic_(add|max|min|xchg|cas|and|or|xor)\b")


def atomic_order(source: str) -> list[str]:
    """The functions of ``source`` that store what an atomic returns, or store where it says: a slot taken with
    ``pos = tl.atomic_add(count, 1)``. Their outputs follow the order the programs run in, which differs between two
    runs on a GPU (not under the interpreter, which runs them one by one)."""

    def atomic(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and _ATOMIC.match(ast.unparse(node.func)) is not None

    def reads(node: ast.AST, names: set[str]) -> bool:
        return any(isinstance(n, ast.Name) and n.id in names or atomic(n) for n in ast.walk(node))

    out = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef) or not any(atomic(n) for n in ast.walk(fn)):
            continue
        tainted: set[str] = set()
        for _ in range(3):  # through a few assignments (pos = base + slot)
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and reads(node.value, tainted):
                    tainted |= {t.id for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name)}
        if any(isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.store" and any(reads(a, tainted)
                                                                                 for a in n.args[:2])
               for n in ast.walk(fn)):
            out.append(fn.name)
    return out


def _write_kernel(out: Path, doc: str, builder: ClosureBuilder, defs: list[Any], tail: str = "") -> str:
    """Write ``out/kernel.py`` into a fresh ``out``: the docstring ``doc``, the imports (torch and triton always,
    outside the block a candidate rewrites: its kernel needs them), the stubbed runtime helpers, the definitions inside
    the EVOLVE block, then ``tail``. Returns its text."""
    imports = sorted(set(builder.c.imports.values()) | {"import torch", "import triton", "import triton.language as tl"})
    parts = [f'"""{doc}"""\n', "from __future__ import annotations\n\n" + "\n".join(imports) + "\n"]
    if builder.c.stubs:
        parts.append("\n# Runtime helpers, stubbed with the values in the target YAML.\n" + "\n".join(builder.c.stubs.values()))
    parts.append("\n# EVOLVE-BLOCK-START\n\n" + "\n\n".join(d.source.rstrip() + "\n" for d in defs) + "\n\n# EVOLVE-BLOCK-END\n")
    if tail:
        parts.append(tail)
    text = "\n".join(parts)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "kernel.py").write_text(text)
    return text


def _how(target: Target, source: str, inferred: list[str]) -> str:
    """Where a harness's inputs come from, for its docstring."""
    return f"from {target.name}'s input specs" + (f"; inferred from the {source}'s code, unchecked by a person: "
                                                  f"{', '.join(inferred)}" if inferred else "")


def self_check(task_dir: Path, timeout_s: float = 300.0) -> Check:
    """The baseline must run on its inputs and agree with itself over two runs: on the GPU's named cases when there
    is a GPU, else under the interpreter. The GPU's larger cases catch inputs that only look valid when small (an
    index past the end of a bigger table) and races the interpreter cannot show; with a GPU, the GPU decides, and the
    interpreter (slow on a MoE layer's cases) is not run. The check also says which Triton kernels the baseline
    launched there (a launcher's other kernels are not checked) and, on failure, its kind. On the GPU, a host-bound
    baseline passes and says so."""
    import torch

    def run(backend: str) -> Check:
        where = "on the GPU" if backend == "cuda" else "under the interpreter"
        try:
            with Evaluator(task_dir, backend=backend, timeout_s=timeout_s, prepare_timeout_s=timeout_s,
                           workers_per_gpu=1) as ev:
                ev.prepare()  # runs the baseline on every case, and checks that zeros fail
                host = f"; {ev.host_bound}" if ev.host_bound else ""
                if ev.task.kind == "fusion":  # a torch baseline: no Triton candidate to compare with it
                    return Check(True, f"baseline runs {where} and runs on every case{host}")
                r = ev.submit(task_dir / "kernel.py", effort="check").result()  # correctness only: nothing timed
        except TaskError as exc:
            return Check(False, str(exc), (), failure_of(exc.cause, "", exc.out_of_bounds), exc.out_of_bounds)
        if not r.correct:
            return Check(False, r.why, r.baseline_kernels, failure_of(r.status, r.reason, r.out_of_bounds),
                         r.out_of_bounds or None)
        return Check(True, f"baseline runs {where} and agrees with itself{host}", r.baseline_kernels)

    if torch.cuda.is_available():
        got = run("cuda")
        return got if got.ok else replace(got, why=f"on the GPU: {got.why}")
    return run("interpreter")


def _traced(site: Any, origins: dict[str, str], models: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What the call graph traced for a glue run's inputs: the tensors' specs (``inputs.traced_specs``) from the
    first preset, in the site's order, that traced any, and the scalars every preset's serving makes the same
    constant (``inputs.traced_values``). A last dim that presets trace to different numbers is the model dim it
    equals in each of them, where exactly one does (a router's logits: Qwen3-MoE's 128 and Mixtral's 8 experts),
    so each preset's cases get their own (``models``: preset name -> ``config.ModelPreset``)."""
    per = {name: traced_specs(origins, p.get("inputs") or {}) for name, p in site.presets.items()}
    tensors = copy.deepcopy(next((t for t in per.values() if t), {}))
    for param, spec in tensors.items():
        tails = {name: t[param]["tail"] for name, t in per.items() if "tail" in t.get(param, {}) and name in models}
        differ = len({tuple(t) for t in tails.values()}) > 1 and len({len(t) for t in tails.values()}) == 1
        if "tail" in spec and differ:
            spec["tail"] = [_dim_named(i, n, tails, models) for i, n in enumerate(spec["tail"])]
    values = traced_values(origins, [p.get("inputs") or {} for p in site.presets.values()])
    return {**{k: v for k, v in values.items() if k not in tensors}, **tensors}


def _dim_named(i: int, n: int, tails: dict[str, list[int]], models: dict[str, Any]) -> int | str:
    """The model dim that last dim ``i`` of each preset's traced tail equals, where exactly one does; else ``n``."""
    named = [d for d in MODEL_DIMS if all(getattr(models[p], d) == t[i] for p, t in tails.items())]
    return named[0] if len(named) == 1 else n


def extract_glue(root: Path, commit: str | None, url: str, target: Target, site: Any, modules: dict[str, str],
                 out: Path) -> Path:
    """Write a ``fusion`` task for torch glue (``site``: a ``scan.fusion.FusionSite``) into ``out``: its baseline is the
    glue as a function of its inputs (``extract/glue.py``) with what it needs from its module; the inputs come from
    the target's specs and the name rules and layouts, as a launcher's do; provenance keeps the line span that a
    proposal replaces. Raises ExtractError with the reason when the glue's outputs cannot be known or its inputs
    cannot be inferred."""
    module = site.module
    modules = {**modules, module: site.path}  # scan's map holds the modules with kernel facts; the glue's may have none
    short = site.function.replace(".", "_").strip("_")
    entry = f"{short}_glue"  # what the target YAML describes its inputs under
    try:
        tree = ast.parse((root / site.path).read_text(encoding="utf-8"))
        glue = glue_function(tree, site.function, site.first, site.last, entry, site.folds)
    except (GlueError, SyntaxError) as exc:
        raise ExtractError(f"{site.function} (lines {site.first}-{site.last}): {exc}") from None
    builder = ClosureBuilder(root, modules, module.split(".")[0], target.stubs, target.hints.external_modules,
                             target.hints.custom_jit_decorators)
    fn = builder.add_source(module, entry, f"{site.function}:{site.first}-{site.last}", glue.source)
    if builder.c.blockers:
        raise ExtractError(f"{site.function}: " + "; ".join(dict.fromkeys(builder.c.blockers)))
    defs = builder.render_definitions()
    functions = tuple(n for d in defs for n in ast.parse(d.source).body if isinstance(n, ast.FunctionDef))
    hosted = sorted({param for p in site.presets.values() for param, origin in glue.origins.items()
                     if ((p.get("inputs") or {}).get(origin) or {}).get("host")})
    if hosted:  # a task's inputs all live on the GPU: its fused kernel would move the engine's host tensor there
        raise ExtractError(f"{site.function} (lines {site.first}-{site.last}): {', '.join(hosted)} "
                           f"{'is a host tensor' if len(hosted) == 1 else 'are host tensors'} in serving (made with "
                           "no device): the run mixes host work with its GPU ops, which one kernel cannot replace")
    traced = _traced(site, glue.origins, {m.name: m for m in target.models})
    try:
        plan, inferred = param_specs(_params(fn), entry, target, fn, functions, traced)
        plan = replace(plan, gathered=glue.gathered)
        case_list, skipped = cases(plan, target, entry)
    except InputError as exc:
        raise ExtractError(f"{site.function} (lines {site.first}-{site.last}): {exc}") from None
    outputs = ", ".join(glue.outputs) + (f"; written in place: {', '.join(glue.inplace)}" if glue.inplace else "")
    _write_kernel(out, f"Torch glue of {site.function}() at {site.path}:{site.first}-{site.last}, as a function of its "
                  f"inputs: extracted by smithbot from {url}{'@' + commit[:12] if commit else ''}.\n\nIts outputs: "
                  f"{outputs}. A fused kernel replaces these lines; the definitions below come from the target.",
                  builder, defs)
    shaped = [n for n, t in traced.items() if "dtype" in t]
    constant = [n for n, t in traced.items()
                if "value" in t and plan.specs.get(n) in (t["value"], LiteralSpec(t["value"]))]
    how = _how(target, "glue", inferred) + (f"; dtype and shape as serving has them, traced through {target.name}'s "
                                            f"code: {', '.join(shaped)}" if shaped else "") \
        + (f"; the constants every preset's serving makes of them, evaluated in {target.name}'s code: "
           f"{', '.join(constant)}" if constant else "")
    (out / "harness.py").write_text(harness_source(entry, plan, how))
    pinned = {n: traced[n]["value"] for n in constant}
    served = served_tests(glue.folded, pinned, glue.origins)
    task = {
        "id": f"{target.name}-{short}-glue-{site.first}",
        "kind": "fusion",
        "entry": entry,
        "description": f"{len(site.ops)} torch ops ({', '.join(site.ops)}) of {site.function}() at {site.path}:"
                       f"{site.first}-{site.last}, {site.launches} launches a call; outputs: {outputs}."
                       + (f" Taken where serving has it: `{served_condition(served)}`." if served else ""),
        "provenance": {"repo": url, "commit": commit,
                       "glue": {"path": site.path, "module": module, "function": site.function,
                                "lines": [site.first, site.last], "inputs": glue.origins,
                                **({"traced": traced} if traced else {}),
                                "outputs": list(glue.outputs), "inplace": list(glue.inplace),
                                **({"folded": [list(f) for f in glue.folded]} if glue.folded else {}),
                                **({"pinned": pinned} if pinned else {})},
                       "definitions": [{"name": d.name, "path": d.path, "qualname": d.qualname} for d in defs
                                       if d.name != entry and not d.source.startswith(f"{d.name} = ")]},
        "seeds": 3,
        "cases": case_list,
        **({"skipped": skipped} if skipped else {}),
        "hotness": {"presets": sorted(site.presets), "launches_per_step": site.per_step, "reach": site.reach,
                    "per_step": {p: site.runs(p) for p in site.presets},
                    **({"share": site.measured_share, "measured": f"{site.measured_share:.1%} of the GPU time of a "
                                                                  f"{site.measured_of}"} if site.measured_share else {}),
                    **({"undecided": list(site.undecided)} if site.undecided else {}),
                    **({"todos": list(site.todos)} if site.todos else {})},
    }
    (out / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False, width=120))
    return out
