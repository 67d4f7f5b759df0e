"""Inductor's generated module read for a standalone candidate: what Inductor compiled for the glue (``Compiled``),
each of its Triton kernels taken out of its ``async_compile.triton`` source with a plain ``@triton.jit`` and a name
for the glue (``take_kernel``), and the Inductor helpers they call, inlined from the installed torch
(``inline_helpers``). ``standalone.py`` makes the candidate; ``launcher.py`` its launcher."""

from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import inspect
import re
from dataclasses import dataclass

from evaluator.task import parse
from smithbot.errors import SmithbotError


class InductorError(SmithbotError):
    """Inductor could not compile the glue, or its output is not one a candidate can be made from. One line."""


@dataclass(frozen=True)
class Compiled:
    """Inductor's output module for one graph; each graph input as an expression over the entry's parameters
    (``seq_lens``, ``seq_lens.size()[0]``, ``max_seq_len``); and what the entry returns, each item an expression over
    the graph's outputs ``out`` and the parameters (``out[2]``, ``x``, ``128``), with ``single`` when it returns one
    value, not a tuple."""

    code: str
    inputs: tuple[str, ...]
    returns: tuple[str, ...]
    single: bool = False
    # per returned value, the parameter whose dtype it takes in the glue (a bf16 input, a bf16 result), or "" where
    # its dtype is its own (a cumsum to int32): the launcher allocates it so, not in the compile case's dtype
    dtypes: tuple[str, ...] = ()
    # the glue's integer arguments at the compile case: a value Inductor wrote into a kernel as a constant is passed
    # as that argument again (``other=256`` for ``F.pad(ids, value=num_experts)``), so the seed holds for any value
    scalars: dict[str, int] = dataclasses.field(default_factory=dict)


# Inductor's 2D grid whose y blocks beyond CUDA's limit of a grid's y size (65535) carry on along z
OVERFLOW = "Grid2DWithYZOverflow"
KINDS = ("pointwise", "reduction", "persistent_reduction")


def helpers_source() -> dict[str, ast.FunctionDef]:
    """The functions of Inductor's Triton helpers module (``triton_helpers``) as installed, by name."""
    import torch._inductor.runtime.triton_helpers as helpers

    tree = parse(inspect.getsource(helpers))
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def kernel_name(entry: str, i: int, count: int) -> str:
    """A generated kernel's name, for what the glue computes: the glue's function without its class
    (``DefaultRouterNoauxTCImpl_renorm_glue`` -> ``_renorm_kernel``; ``build_decode_metadata`` ->
    ``_build_decode_metadata_kernel``), numbered when the glue needs several."""
    base = entry.removesuffix("_glue")
    head, _, rest = base.partition("_")
    if rest and any(c.isupper() for c in head):
        base = rest
    base = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", base).lower().strip("_") or "fused"
    return f"_{base}_kernel{i}" if count > 1 else f"_{base}_kernel"


@dataclass
class Kernel:
    name: str  # in the candidate
    source: str  # its @triton.jit definition, renamed, with the helpers it calls renamed
    params: list[str]
    constexprs: list[str]
    kind: str
    axes: dict[str, int]  # prefix (x, y, z) -> grid axis
    grid_type: str


def take_kernel(name: str, new: str, text: str, helper_defs: dict[str, ast.FunctionDef], used: set[str]) -> tuple[
        Kernel, list[str]]:
    """One ``async_compile.triton(...)`` module: its kernel, named ``new`` and with a plain ``@triton.jit``, and its own
    local helpers (``_triton_helper_fn_add0``: a scan's combine function), renamed for this kernel."""
    tree = parse(text)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    main = next((f for f in fns if f.name == name), None)
    if main is None:
        raise InductorError(f"{name}: no such kernel in its module")
    deco = next((d for d in main.decorator_list if isinstance(d, ast.Call) and "triton_heuristics" in ast.unparse(
        d.func)), None)
    kind = ast.unparse(deco.func).rsplit(".", 1)[-1] if deco is not None else ""
    if kind not in KINDS:
        raise InductorError(f"{name}: an Inductor {kind or 'undecorated'} kernel (only pointwise kernels and "
                            "reductions are made standalone)")
    grid = re.search(r"'grid_type':\s*'(\w+)'", ast.unparse(deco))
    grid_type = grid.group(1) if grid else "Grid1D"
    if grid_type not in ("Grid1D", "Grid2D", OVERFLOW):
        raise InductorError(f"{name}: Inductor's {grid_type} launch grid is not supported")
    local = {f.name: f"{new}_{f.name.removeprefix('_triton_helper_fn_')}" for f in fns if f is not main}
    out: list[str] = []
    renames = {**local, name: new}
    for f in fns:
        f.decorator_list = [parse("triton.jit", mode="eval").body]
        f.name = renames.get(f.name, f.name)

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in renames:
                node.id = renames[node.id]
            return node

        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            self.generic_visit(node)
            base = node.value.id if isinstance(node.value, ast.Name) else ""
            if base == "triton_helpers":
                if node.attr not in helper_defs:
                    raise InductorError(f"{name}: Inductor's helper triton_helpers.{node.attr} is not in the "
                                        "installed torch")
                used.add(node.attr)
                return ast.copy_location(ast.Name(f"_inductor_{node.attr}", ast.Load()), node)
            if base == "tl_math":
                return ast.copy_location(ast.Attribute(ast.Attribute(ast.Name("tl", ast.Load()), "math",
                                                                     ast.Load()), node.attr, ast.Load()), node)
            if base == "libdevice":
                used.add("libdevice")
            return node

    for f in fns:
        f = Rename().visit(f)
        out.append(ast.unparse(f) if f is not main else "")
    source = ast.unparse(main)
    args = main.args.args
    constexprs = [a.arg for a in args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)]
    axes: dict[str, int] = {}
    for node in ast.walk(main):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and re.fullmatch(r"[xyz]offset", node.targets[0].id):
            pids = [c for c in ast.walk(node.value) if isinstance(c, ast.Call) and ast.unparse(c.func).endswith(
                "program_id")]
            if grid_type == OVERFLOW and node.targets[0].id == "yoffset" and ast.unparse(node.value).replace(
                    " ", "") == "(tl.program_id(1)+tl.program_id(2)*tl.num_programs(1))*YBLOCK":
                axes["y"] = 1  # (the y blocks past the grid's y limit go on along z: see _launch)
                continue
            if "num_programs" in ast.unparse(node.value) or len(pids) != 1:
                raise InductorError(f"{name}: its {node.targets[0].id} is not one program id times a block")
            axes[node.targets[0].id[0]] = int(ast.literal_eval(pids[0].args[0]))
    helpers = [s for s in out if s]
    return Kernel(new, source, [a.arg for a in args], constexprs, kind, axes, grid_type), helpers


def inline_helpers(used: set[str], defs: dict[str, ast.FunctionDef]) -> list[str]:
    """The sources of Inductor's helpers ``used`` and those they call, each renamed ``_inductor_NAME``."""
    todo, seen = sorted(used - {"libdevice"}), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        todo += [n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name) and n.id in defs and n.id not in seen]
    out = []
    for name in sorted(seen):
        node = copy.deepcopy(defs[name])
        if [ast.unparse(d) for d in node.decorator_list] != ["triton.jit"]:
            raise InductorError(f"Inductor's helper {name} is not a plain @triton.jit function")
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in defs:
                n.id = f"_inductor_{n.id}"
            elif isinstance(n, ast.Name) and n.id not in ("tl", "triton", "libdevice") and isinstance(n.ctx, ast.Load) \
                    and n.id not in {a.arg for a in node.args.args} and n.id not in _assigned(node) \
                    and not hasattr(builtins, n.id):
                raise InductorError(f"Inductor's helper {name} reads {n.id}, which a candidate cannot have")
        node.name = f"_inductor_{name}"
        out.append(ast.unparse(node))
    return out


def _assigned(fn: ast.FunctionDef) -> set[str]:
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
