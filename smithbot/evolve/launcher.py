"""The launcher of a standalone candidate: Inductor's ``call()`` as the task entry's body (its inputs from the
parameters, its buffers allocated on their device and named for what they hold, in the dtype of the input each
follows, each ``kernel.run(...)`` a launch whose grid reads the block sizes it passes), and the launch rewritten to
the cleaned kernels (``relaunch``)."""

from __future__ import annotations

import ast
import dataclasses
import re

from evaluator.task import parse
from smithbot.evolve.generated import OVERFLOW, Compiled, InductorError, Kernel


# the module-level names of Inductor's output that the launcher may use, and what each becomes
_DROPPED_CALLS = ("assert_size_stride", "assert_alignment", "get_raw_stream")
# block sizes of the candidate's launches (the tune proposer moves them): a pointwise kernel's elements a program,
# a reduction's rows a program and its reduced elements a loop step
_BLOCKS = {"pointwise": {"XBLOCK": 1024, "YBLOCK": 16}, "reduction": {"XBLOCK": 1, "R0_BLOCK": 1024, "RBLOCK": 1024},
           "persistent_reduction": {"XBLOCK": 1}}
_BLOCKS_2D = {"XBLOCK": 64, "YBLOCK": 16}
_MAX_Y_GRID = 65535  # CUDA's limit of a grid's y size


def relaunch(line: str, kernel: str, names: dict[str, str], sizes: dict[str, str]) -> str:
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
    and its ``triton.cdiv`` worked out where it can be (``_cdiv``)."""

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
        return _cdiv(node)


def _cdiv(node: ast.Call) -> ast.expr:
    """``triton.cdiv(a, b)`` worked out where ``b`` is 1 or both are constants; any other call as it is."""
    if ast.unparse(node.func) == "triton.cdiv" and len(node.args) == 2:
        a, b = node.args
        if isinstance(b, ast.Constant) and b.value == 1:
            return a
        if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):
            return ast.copy_location(ast.Constant(-(-int(a.value) // int(b.value))), node)
    return node


def _returned(stmt: ast.stmt | None) -> list[ast.expr]:
    """What a ``return`` statement returns, item by item (none for anything else)."""
    if not isinstance(stmt, ast.Return) or stmt.value is None:
        return []
    return list(stmt.value.elts) if isinstance(stmt.value, ast.Tuple) else [stmt.value]


def follow_dtypes(lines: list[str], follows: tuple[str, ...]) -> list[str]:
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


def name_buffers(lines: list[str], base_fn: ast.FunctionDef) -> list[str]:
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


def launcher_body(call: ast.FunctionDef, compiled: Compiled, kernels: dict[str, Kernel]) -> list[str]:
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


def _written(stmts: list[ast.stmt], kernels: dict[str, Kernel]) -> set[str]:
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
    is (``seq_lens_size_0``); a kernel's element count is ``numel_N``; a ``triton.cdiv`` it can is worked out."""
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
            return _cdiv(node)

    return [ast.unparse(Rename().visit(stmt)) for stmt in body]


def _statement(s: ast.stmt, kernels: dict[str, Kernel], tensors: list[str]) -> str:
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


def unbake(kernels: dict[str, Kernel], body: list[str], scalars: dict[str, int]) -> list[str]:
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


def _launch(k: Kernel, node: ast.Call) -> ast.AST:
    """``kernel.run(args..., stream=s)`` as ``kernel[lambda meta: grid](args..., BLOCK=...)``, the grid over the
    block sizes the launch passes."""
    args = [a for a in node.args]
    runtime = [p for p in k.params if p not in k.constexprs]
    if len(args) != len(runtime):
        raise InductorError(f"{k.name}: launched with {len(args)} arguments for {len(runtime)} parameters")
    value = dict(zip(runtime, (ast.unparse(a) for a in args)))
    blocks = dict(_BLOCKS_2D if k.grid_type in ("Grid2D", OVERFLOW) else _BLOCKS[k.kind])
    chosen = {c: blocks[c] for c in k.constexprs if c in blocks}
    missing = [c for c in k.constexprs if c not in blocks]
    if missing:
        raise InductorError(f"{k.name}: no block size for {', '.join(missing)}")
    grid = ["1"] * (max(k.axes.values(), default=0) + 1)
    for p, axis in k.axes.items():
        numel = value.get(f"{p}numel", "1")
        block = f"{p.upper()}BLOCK"
        grid[axis] = f"triton.cdiv({numel}, meta['{block}'])" if block in chosen else numel
    if k.grid_type == OVERFLOW and "y" in k.axes:  # as Inductor splits them: y blocks in rows of at most 65535
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
