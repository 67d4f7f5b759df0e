"""Inductor's generated module for a fusion task's glue made a standalone candidate (``to_candidate``): its Triton
kernels with readable names and plain ``@triton.jit``, the Inductor helpers they use inlined, no ``torch._inductor``
import, and a launcher with the task's entry signature that allocates the buffers and launches the kernels as
Inductor's ``call()`` did; cleaned (``clean.py``) and its buffers named for what they hold. The compiling itself is
``inductor.py``'s."""

from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import inspect
import re
from dataclasses import dataclass

from evaluator.task import EVOLVE_END, EVOLVE_START, parse, split_evolve
from smithbot.errors import SmithbotError
from smithbot.evolve.clean import clean_helper, clean_kernel


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


_KINDS = ("pointwise", "reduction", "persistent_reduction")
# the module-level names of Inductor's output that the launcher may use, and what each becomes
_DROPPED_CALLS = ("assert_size_stride", "assert_alignment", "get_raw_stream")


def _helpers_source() -> dict[str, ast.FunctionDef]:
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
class _Kernel:
    name: str  # in the candidate
    source: str  # its @triton.jit definition, renamed, with the helpers it calls renamed
    params: list[str]
    constexprs: list[str]
    kind: str
    axes: dict[str, int]  # prefix (x, y, z) -> grid axis
    grid_type: str


def _kernel(name: str, new: str, text: str, helper_defs: dict[str, ast.FunctionDef], used: set[str]) -> tuple[
        _Kernel, list[str]]:
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
    if kind not in _KINDS:
        raise InductorError(f"{name}: an Inductor {kind or 'undecorated'} kernel (only pointwise kernels and "
                            "reductions are made standalone)")
    grid = re.search(r"'grid_type':\s*'(\w+)'", ast.unparse(deco))
    grid_type = grid.group(1) if grid else "Grid1D"
    if grid_type not in ("Grid1D", "Grid2D", _OVERFLOW):
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
            if grid_type == _OVERFLOW and node.targets[0].id == "yoffset" and ast.unparse(node.value).replace(
                    " ", "") == "(tl.program_id(1)+tl.program_id(2)*tl.num_programs(1))*YBLOCK":
                axes["y"] = 1  # (the y blocks past the grid's y limit go on along z: see _launch)
                continue
            if "num_programs" in ast.unparse(node.value) or len(pids) != 1:
                raise InductorError(f"{name}: its {node.targets[0].id} is not one program id times a block")
            axes[node.targets[0].id[0]] = int(ast.literal_eval(pids[0].args[0]))
    helpers = [s for s in out if s]
    return _Kernel(new, source, [a.arg for a in args], constexprs, kind, axes, grid_type), helpers


def _inline_helpers(used: set[str], defs: dict[str, ast.FunctionDef]) -> list[str]:
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


# block sizes of the candidate's launches (the tune proposer moves them): a pointwise kernel's elements a program,
# a reduction's rows a program and its reduced elements a loop step
_BLOCKS = {"pointwise": {"XBLOCK": 1024, "YBLOCK": 16}, "reduction": {"XBLOCK": 1, "R0_BLOCK": 1024, "RBLOCK": 1024},
           "persistent_reduction": {"XBLOCK": 1}}
_BLOCKS_2D = {"XBLOCK": 64, "YBLOCK": 16}
# Inductor's 2D grid whose y blocks beyond CUDA's limit of a grid's y size (65535) carry on along z
_OVERFLOW = "Grid2DWithYZOverflow"
_MAX_Y_GRID = 65535


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
    defs = _helpers_source()
    used: set[str] = set()
    kernels: dict[str, _Kernel] = {}
    local_helpers: list[str] = []
    for i, (name, src) in enumerate(sources.items()):
        kernels[name], helpers = _kernel(name, kernel_name(entry, i, len(sources)), src, defs, used)
        local_helpers += helpers
    base_fn = next((n for n in parse(baseline).body if isinstance(n, ast.FunctionDef) and n.name == entry), None)
    if base_fn is None:
        raise InductorError(f"the baseline has no function {entry}")
    body = _launcher_body(call, compiled, kernels)
    body = _unbake(kernels, body, compiled.scalars)
    if clean:
        body = _follow_dtypes(_name_buffers(body, base_fn), compiled.dtypes)
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
            body = [_relaunch(line, k.name, blocks, sizes) for line in body]
        cleaned.append(ast.unparse(fn))
    if clean:  # (a helper that folding left unread goes)
        text = "\n".join(cleaned)
        local_helpers = [h for h in local_helpers if parse(h).body[0].name in text]  # type: ignore[attr-defined]
        text += "\n".join(local_helpers)
        used = {u for u in used if (f"_inductor_{u}" if u != "libdevice" else "libdevice.") in text}
    signature = f"def {entry}({ast.unparse(base_fn.args)}):"
    parts = (["from triton.language.extra import libdevice"] if "libdevice" in used else []) + \
        _inline_helpers(used, defs) + local_helpers + cleaned + \
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


def _relaunch(line: str, kernel: str, names: dict[str, str], sizes: dict[str, str]) -> str:
    """``line`` with the block-size keywords of its launch of ``kernel`` renamed as the cleaned kernel's, in the
    grid too (one it no longer takes, named "", dropped, and 1 in the grid), and those in ``sizes`` given that
    expression; a grid that reads no block size is a plain tuple."""
    tree = parse(line)
    hit = False
    for c in ast.walk(tree):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Subscript) and ast.unparse(c.func.value) == kernel:
            for kw in c.keywords:
                if kw.arg in sizes:
                    kw.value, hit = parse(sizes[kw.arg], mode="eval").body, True
            for kw in c.keywords:
                if kw.arg in names:
                    kw.arg, hit = names[kw.arg], True
            c.keywords = [kw for kw in c.keywords if kw.arg != ""]
            c.func.slice = _Grid(names).visit(c.func.slice)
            if isinstance(c.func.slice, ast.Lambda) and "meta" not in {
                    n.id for n in ast.walk(c.func.slice.body) if isinstance(n, ast.Name)}:
                c.func.slice, hit = c.func.slice.body, True
    return ast.unparse(tree) if hit else line


class _Grid(ast.NodeTransformer):
    """A launch grid with the block sizes renamed (``meta['XBLOCK']`` -> ``meta['BLOCK_ROWS']``; one dropped is 1),
    and ``triton.cdiv`` of constants, or by 1, worked out."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if ast.unparse(node.value) == "meta" and isinstance(node.slice, ast.Constant) and node.slice.value in self.names:
            new = self.names[node.slice.value]
            return ast.Constant(1) if new == "" else ast.Subscript(node.value, ast.Constant(new), ast.Load())
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if ast.unparse(node.func) == "triton.cdiv" and len(node.args) == 2:
            a, b = node.args
            if isinstance(b, ast.Constant) and b.value == 1:
                return a
            if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):
                return ast.Constant(-(-int(a.value) // int(b.value)))
        return node


def _returned(stmt: ast.stmt | None) -> list[ast.expr]:
    """What a ``return`` statement returns, item by item (none for anything else)."""
    if not isinstance(stmt, ast.Return) or stmt.value is None:
        return []
    return list(stmt.value.elts) if isinstance(stmt.value, ast.Tuple) else [stmt.value]


def _follow_dtypes(lines: list[str], follows: tuple[str, ...]) -> list[str]:
    """Each returned buffer allocated in the dtype of the parameter it follows (``dtype=topk_weights.dtype``), where
    ``follows`` names one, instead of the compile case's."""
    tree = parse("\n".join(lines))
    items = _returned(tree.body[-1] if tree.body else None)
    alloc = {s.targets[0].id: s.value for s in tree.body if isinstance(s, ast.Assign) and isinstance(
        s.targets[0], ast.Name) and isinstance(s.value, ast.Call) and ast.unparse(s.value.func) == "torch.empty_strided"}
    for item, param in zip(items, follows):
        if param and isinstance(item, ast.Name) and item.id in alloc:
            for kw in alloc[item.id].keywords:
                if kw.arg == "dtype":
                    kw.value = parse(f"{param}.dtype", mode="eval").body
    return [ast.unparse(s) for s in tree.body]


def _name_buffers(lines: list[str], base_fn: ast.FunctionDef) -> list[str]:
    """Inductor's buffers named for what they hold: a returned one as the baseline's return names it (``return
    cu_seqlens, page_table``; ``out`` where the baseline returns an expression), one that only passes data from one
    kernel to the next ``scratch``."""
    given = [e.id if isinstance(e, ast.Name) else "" for e in _returned(
        next((n for n in ast.walk(base_fn) if isinstance(n, ast.Return)), None))]
    tree = parse("\n".join(lines))
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {a.arg for a in base_fn.args.args}
    returned = [e.id if isinstance(e, ast.Name) else "" for e in _returned(tree.body[-1] if tree.body else None)]
    names: dict[str, str] = {}

    def fresh(word: str) -> str:
        out, n = word, 2
        while out in taken:
            out, n = f"{word}_{n}", n + 1
        taken.add(out)
        return out

    for i, buf in enumerate(returned):
        if re.fullmatch(r"buf\d+", buf) and buf not in names:
            word = given[i] if len(given) == len(returned) and given[i] else "out"
            names[buf] = fresh(word if word not in {a.arg for a in base_fn.args.args} else f"new_{word}")
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and re.fullmatch(r"buf\d+", n.id):
            if n.id not in names:
                names[n.id] = fresh("scratch")
            n.id = names[n.id]
    return [ast.unparse(s) for s in tree.body]


def _launcher_body(call: ast.FunctionDef, compiled: Compiled, kernels: dict[str, _Kernel]) -> list[str]:
    """Inductor's ``call(args)`` as the entry's body: its inputs from the parameters, its buffers on their device,
    each ``kernel.run(...)`` a launch with a grid and block sizes, and the entry's return."""
    stmts: list[ast.stmt] = []
    todo = list(call.body)
    while todo:  # `with torch.cuda._DeviceGuard(0):` holds the launches: its body, in its place
        s = todo.pop(0)
        if isinstance(s, ast.With):
            todo[:0] = s.body
        else:
            stmts.append(s)
    lines: list[str] = []
    tensors: list[str] = []
    names: list[str] = []
    written = _written(stmts, kernels)
    for s in stmts:
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name) and s.value.id == "args":
            target = s.targets[0]
            names = [e.id for e in target.elts] if isinstance(target, ast.Tuple) else [target.id]  # type: ignore
            if len(names) != len(compiled.inputs):
                raise InductorError(f"call() takes {len(names)} inputs, the graph had {len(compiled.inputs)}")
            lines += [f"{n} = {e}" for n, e in zip(names, compiled.inputs)]
            continue
        text = ast.unparse(s)
        if isinstance(s, (ast.Delete, ast.Pass)) or text.startswith(("args.clear", "torch.cuda.set_device")) or (
                isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                and ast.unparse(s.value.func) in _DROPPED_CALLS) or (
                isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                and ast.unparse(s.value.func) in _DROPPED_CALLS):
            if text.startswith("assert_size_stride("):
                tensors.append(ast.unparse(s.value.args[0]))  # type: ignore[attr-defined]
                lines = _strided(lines, s.value, written)  # type: ignore[arg-type]
            continue
        if isinstance(s, ast.Return):
            outs = s.value.elts if isinstance(s.value, ast.Tuple) else [s.value] if s.value is not None else []
            items = [re.sub(r"\bout\[(\d+)\]", lambda m: ast.unparse(outs[int(m.group(1))]), r)
                     for r in compiled.returns]
            ret = items[0] if compiled.single else "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
            lines.append(f"return {ret}")
            continue
        lines.append(_statement(s, kernels, tensors))
    return _tidy(lines)


def _written(stmts: list[ast.stmt], kernels: dict[str, _Kernel]) -> set[str]:
    """The names ``call()`` hands a kernel as an output (``out_ptrN``, ``in_out_ptrN``)."""
    out = set()
    for call in (n for s in stmts for n in ast.walk(s) if isinstance(n, ast.Call)):
        func = ast.unparse(call.func)
        if func.endswith(".run") and func[:-4] in kernels:
            k = kernels[func[:-4]]
            runtime = [p for p in k.params if p not in k.constexprs]
            out |= {a.id for p, a in zip(runtime, call.args) if p.startswith(("out_ptr", "in_out_ptr"))
                    and isinstance(a, ast.Name)}
    return out


def _strided(lines: list[str], check: ast.Call, written: set[str]) -> list[str]:
    """Inductor compiled ``call()`` for the strides its guard asserts (``assert_size_stride(arg1_1, (s0, s1), (s1,
    1))``), and its kernels index by them; the engine's code it replaces took any strides. An input it only reads is
    made contiguous where the guard asked for that (``.contiguous()`` returns the tensor itself when it already is);
    one it writes, or other strides, keep the guard as an assert, so that a stride the kernels do not expect fails
    rather than reads the wrong elements. A 0-d guard needs neither: it may stand for a float the task passes
    (sglang's ``routed_scaling_factor``), which has no ``.contiguous()``."""
    name, sizes, strides = (ast.unparse(a) for a in check.args[:3])
    if sizes == "()":  # a 0-d tensor, or a float Dynamo wrapped as one (read as float(x)): no strides to get wrong
        return lines
    bound = next((i for i, line in enumerate(lines) if line.startswith(f"{name} = ")), None)
    if bound is not None and name not in written and _contiguous(check.args[1], check.args[2]):
        return lines[:bound + 1] + [f"{name} = {name}.contiguous()"] + lines[bound + 1:]
    return lines + [f"assert {name}.stride() == {strides}, 'compiled for the strides {strides} of sizes {sizes}'"]


def _contiguous(sizes: ast.expr, strides: ast.expr) -> bool:
    """Whether ``strides`` are a row-major layout of ``sizes`` (two tuples of expressions over Inductor's symbols),
    checked at three sets of values for the symbols."""
    if not (isinstance(sizes, ast.Tuple) and isinstance(strides, ast.Tuple) and len(sizes.elts) == len(strides.elts)):
        return False
    symbols = sorted({n.id for n in ast.walk(sizes) if isinstance(n, ast.Name)}
                     | {n.id for n in ast.walk(strides) if isinstance(n, ast.Name)})
    for seed in (3, 7, 11):
        env = {"__builtins__": {}, "max": max, "min": min, **{s: seed + 2 * i for i, s in enumerate(symbols)}}
        try:
            got = [eval(compile(ast.Expression(e), "<stride>", "eval"), env) for e in (sizes, strides)]
        except Exception:
            return False
        dims, steps = got
        want, step = [], 1
        for d in reversed(dims):
            want.insert(0, step)
            step *= d
        if [st for d, st in zip(dims, steps) if d != 1] != [w for d, w in zip(dims, want) if d != 1]:
            return False
    return True


def _tidy(lines: list[str]) -> list[str]:
    """Inductor's names made a reader's: a graph input that is a parameter (``arg1_1 = seq_lens``) and a size copied
    to a symbol (``s37 = arg0_1``) go, their uses taking the name they copy; a size keeps a name that says what it
    is (``seq_lens_size_0``); a kernel's element count is ``numel_N``; a grid of constants is computed."""
    tree = parse("\n".join(lines))
    names: dict[str, str] = {}
    body: list[ast.stmt] = []
    for stmt in tree.body:
        rebinds = isinstance(stmt, ast.Assign) and any(  # `arg1_1 = arg1_1.contiguous()`: the same input, still
            isinstance(n, ast.Name) and n.id == ast.unparse(stmt.targets[0]) for n in ast.walk(stmt.value))
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and re.fullmatch(r"arg\d+_\d+|s\d+", stmt.targets[0].id) and not rebinds:
            value = stmt.value
            if isinstance(value, ast.Name):
                names[stmt.targets[0].id] = names.get(value.id, value.id)
                continue
            names[stmt.targets[0].id] = re.sub(r"\W+", "_", ast.unparse(value)).strip("_")
        body.append(stmt)

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            m = re.fullmatch(r"triton_\w+?_(\d+)_xnumel", node.id)
            node.id = f"numel_{m.group(1)}" if m else names.get(node.id, node.id)
            return node

        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if ast.unparse(node.func) == "triton.cdiv" and all(isinstance(a, ast.Constant) for a in node.args):
                a, b = (int(x.value) for x in node.args)  # type: ignore[union-attr]
                return ast.copy_location(ast.Constant(-(-a // b)), node)
            return node

    return [ast.unparse(Rename().visit(stmt)) for stmt in body]


def _statement(s: ast.stmt, kernels: dict[str, _Kernel], tensors: list[str]) -> str:
    """One statement of ``call()``, in the candidate's terms."""
    device = f"{tensors[0]}.device" if tensors else "'cuda'"

    class Swap(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            func = ast.unparse(node.func)
            if func.startswith("empty_strided_"):
                return parse(f"torch.empty_strided({ast.unparse(node.args[0])}, {ast.unparse(node.args[1])}, "
                                 f"dtype={ast.unparse(node.args[2])}, device={device})", mode="eval").body
            if func == "reinterpret_tensor":
                return parse(f"torch.as_strided({', '.join(ast.unparse(a) for a in node.args)})",
                                 mode="eval").body
            if func.startswith("extern_kernels."):
                node.func = parse("torch." + func.split(".", 1)[1], mode="eval").body
                return node
            if func.startswith("aten."):
                node.func = parse("torch.ops." + func, mode="eval").body
                return node
            if isinstance(node.func, ast.Attribute) and node.func.attr == "item" and not node.args \
                    and isinstance(node.func.value, ast.Name):
                # a float the glue takes, which Dynamo handed Inductor as a 0-d tensor: float() of the number the
                # task passes, or of a tensor
                return ast.copy_location(ast.Call(ast.Name("float", ast.Load()), [node.func.value], []), node)
            if func.endswith(".run") and func[:-4] in kernels:
                return _launch(kernels[func[:-4]], node)
            return node

    s = Swap().visit(s)
    text = ast.unparse(s)
    left = {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and n.id in (
        "async_compile", "alloc_from_pool", "empty_strided_p2p", "inductor_ops", "_quantized", "get_raw_stream")}
    if left:
        raise InductorError(f"call() uses {', '.join(sorted(left))}, which a standalone candidate cannot")
    return text


def _unbake(kernels: dict[str, _Kernel], body: list[str], scalars: dict[str, int]) -> list[str]:
    """Each integer argument of the glue that the launcher never reads, whose compile-case value a kernel holds as a
    constant (a load's ``other=``, a ``tl.full`` value), made that kernel's parameter and passed by its launches:
    Inductor specialises such a value (the pad value of ``F.pad``), and the seed must hold for the task's other
    cases. (A constant that only happens to equal such a value makes a wrong seed, which the evaluator rejects.)"""
    read = {n.id for line in body for n in ast.walk(parse(line)) if isinstance(n, ast.Name)}
    unpassed = {n: v for n, v in scalars.items() if n not in read and type(v) is int}
    for name, value in unpassed.items():
        if list(unpassed.values()).count(value) > 1:
            continue  # (two arguments of that value: which one the constant is cannot be told)
        for key, k in list(kernels.items()):
            fn = parse(k.source).body[0]
            assert isinstance(fn, ast.FunctionDef)
            spots = [n for c in ast.walk(fn) if isinstance(c, ast.Call)
                     for n in [kw.value for kw in c.keywords if kw.arg == "other"]
                     + (c.args[1:2] if ast.unparse(c.func) == "tl.full" else [])
                     if isinstance(n, ast.Constant) and type(n.value) is int and n.value == value]
            if not spots or name in k.params:
                continue

            class Swap(ast.NodeTransformer):
                def visit_Constant(self, node: ast.Constant) -> ast.AST:
                    return ast.Name(name, ast.Load()) if any(node is s for s in spots) else node

            fn = Swap().visit(fn)
            at = next((i for i, a in enumerate(fn.args.args) if a.arg in k.constexprs), len(fn.args.args))
            fn.args.args.insert(at, ast.arg(name))
            kernels[key] = dataclasses.replace(k, source=ast.unparse(fn), params=[a.arg for a in fn.args.args])
            body = [_pass_too(line, k.name, name) for line in body]
    return body


def _pass_too(line: str, kernel: str, arg: str) -> str:
    """A launcher line with ``arg`` added after the positional arguments of each launch of ``kernel``."""
    tree = parse(line)
    hit = False
    for c in ast.walk(tree):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Subscript) and ast.unparse(c.func.value) == kernel:
            c.args.append(ast.Name(arg, ast.Load()))
            hit = True
    return ast.unparse(tree) if hit else line


def _launch(k: _Kernel, node: ast.Call) -> ast.AST:
    """``kernel.run(args..., stream=s)`` as ``kernel[lambda meta: grid](args..., BLOCK=...)``, the grid over the
    block sizes the launch passes."""
    args = [a for a in node.args]
    runtime = [p for p in k.params if p not in k.constexprs]
    if len(args) != len(runtime):
        raise InductorError(f"{k.name}: launched with {len(args)} arguments for {len(runtime)} parameters")
    value = dict(zip(runtime, (ast.unparse(a) for a in args)))
    blocks = dict(_BLOCKS_2D if k.grid_type in ("Grid2D", _OVERFLOW) else _BLOCKS[k.kind])
    chosen = {c: blocks[c] for c in k.constexprs if c in blocks}
    missing = [c for c in k.constexprs if c not in blocks]
    if missing:
        raise InductorError(f"{k.name}: no block size for {', '.join(missing)}")
    grid = ["1"] * (max(k.axes.values(), default=0) + 1)
    for p, axis in k.axes.items():
        numel = value.get(f"{p}numel", "1")
        block = f"{p.upper()}BLOCK"
        grid[axis] = f"triton.cdiv({numel}, meta['{block}'])" if block in chosen else numel
    if k.grid_type == _OVERFLOW and "y" in k.axes:  # as Inductor splits them: y blocks in rows of at most 65535
        rows = grid[k.axes["y"]]
        layers = f"max(1, triton.cdiv({rows}, {_MAX_Y_GRID}))"
        grid[k.axes["y"]] = f"triton.cdiv({rows}, {layers})"
        grid += ["1"] * (3 - len(grid))
        grid[2] = layers
    kwargs = ", ".join(f"{c}={v}" for c, v in chosen.items())
    # (the grid reads the block sizes the launch passes, so that one tuned stays in step with it)
    call = f"{k.name}[lambda meta: ({', '.join(grid)},)]({', '.join(ast.unparse(a) for a in args)}, {kwargs}, " \
           "num_warps=4)"
    return parse(call, mode="eval").body
