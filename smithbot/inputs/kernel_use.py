"""What a ``@triton.jit`` kernel makes of its parameters, read from its body: pointers, index tables (and what they
address), numbers, constexprs and ``tl.arange`` sizes; which parameters a launch must pass, and how a launch's
``*x.stride()`` splats fill them. Input inference (``infer.py``) uses it for the launcher's parameters that are handed
to a kernel as they are."""

from __future__ import annotations

import ast
import itertools

POINTER_OPS = {"load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_cas", "atomic_xchg", "atomic_and",
               "atomic_or", "atomic_xor", "make_block_ptr", "make_tensor_descriptor"}
PASS_THROUGH = {"multiple_of", "max_contiguous", "cast"}  # f(ptr, ...) is still the pointer


def _addends(expr: ast.expr) -> set[str]:
    """Names that a pointer expression adds offsets to: ``X + row * stride + cols`` -> {X, cols}."""
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _addends(expr.left) | _addends(expr.right)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Sub):
        return _addends(expr.left)
    if isinstance(expr, ast.IfExp):
        return _addends(expr.body) | _addends(expr.orelse)
    if isinstance(expr, ast.Subscript):
        return _addends(expr.value)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("to", "cast") \
            and not (isinstance(expr.func.value, ast.Name) and expr.func.value.id == "tl"):
        return _addends(expr.func.value)  # ptr.to(tl.pointer_type(...))
    if isinstance(expr, ast.Call) and expr.args and (isinstance(expr.func, ast.Attribute) and expr.func.attr
                                                     or getattr(expr.func, "id", None)) in PASS_THROUGH:
        return _addends(expr.args[0])  # tl.multiple_of(ptr, 16), tl.cast(ptr, ...)
    return set()


def _loaded_from(expr: ast.expr) -> ast.expr | None:
    """The pointer expression of ``tl.load(p)``, also under ``.to(...)`` or ``tl.cast``; else None."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("to", "cast"):
        expr = expr.func.value if expr.func.attr == "to" else expr.args[0] if expr.args else expr.func.value
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "load" and expr.args:
        return expr.args[0]
    return None


def _loads_in(expr: ast.expr) -> list[ast.expr]:
    """The pointer expressions of the loads whose values ``expr`` computes with: ``tl.load(p)``, also cast, and in
    sums, differences and products."""
    source = _loaded_from(expr)
    if source is not None:
        return [source]
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
        return _loads_in(expr.left) + _loads_in(expr.right)
    return []


def _assignments(kernel: ast.FunctionDef) -> dict[str, list[ast.expr]]:
    """Every value each plain name is assigned in the kernel."""
    out: dict[str, list[ast.expr]] = {}
    for node in ast.walk(kernel):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append(node.value)  # half: tl.constexpr = DIM // 2
    return out


def kernel_param_kinds(kernel: ast.FunctionDef) -> dict[str, str]:
    """"pointer", "index", "constexpr", "scalar" or "unknown" for each parameter of a ``@triton.jit`` kernel, from its
    body: a parameter that offsets are added to and that ends up loaded from or stored to (``tl.load(X + offs)``) is a
    pointer, unless it is also compared, multiplied or ranged over, which only numbers are; a pointer whose loaded
    values go into an address or a loop bound is an index table."""
    params = [a.arg for a in kernel.args.posonlyargs + kernel.args.args + kernel.args.kwonlyargs]
    constexpr = {a.arg for a in kernel.args.posonlyargs + kernel.args.args + kernel.args.kwonlyargs
                 if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
    assigned = _assignments(kernel)
    pointer: set[str] = set()
    numeric: set[str] = set()
    pointer_args: list[ast.expr] = []
    loaded: dict[str, set[str]] = {}  # variable -> the names whose memory it was loaded from
    bounds: list[ast.expr] = []  # loop bounds: `for i in range(n)`
    for node in ast.walk(kernel):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    for source in _loads_in(node.value):  # `start = tl.load(Cum + i) - n` holds a loaded value
                        loaded.setdefault(t.id, set()).update(_addends(source))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in POINTER_OPS:
            target = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg in ("pointer", "base")), None)
            if target is not None:
                pointer |= _addends(target)
                pointer_args.append(target)
        elif isinstance(node, ast.Compare) and not all(isinstance(o, (ast.Is, ast.IsNot)) for o in node.ops):
            numeric |= {n.id for e in (node.left, *node.comparators) for n in ast.walk(e) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.FloorDiv, ast.Mod, ast.Div)):
            numeric |= {e.id for e in (node.left, node.right) if isinstance(e, ast.Name)}
        if isinstance(node, ast.Call) and (isinstance(node.func, ast.Name) and node.func.id in ("range", "min", "max")
                                           or isinstance(node.func, ast.Attribute) and node.func.attr in (
                                               "arange", "cdiv", "range", "static_range", "full", "minimum",
                                               "maximum")):
            numeric |= {n.id for a in node.args for n in ast.walk(a) if isinstance(n, ast.Name)}
            if getattr(node.func, "id", getattr(node.func, "attr", "")) in ("range", "static_range"):
                bounds.extend(node.args)
    todo = list(pointer)
    while todo:
        for expr in assigned.get(todo.pop(), []):
            for name in _addends(expr) - pointer:
                pointer.add(name)
                todo.append(name)
    # An index table: what is loaded from it goes into an address (`row = tl.load(Rows + i)`, `tl.load(X + row * n)`)
    # or bounds a loop (`n = tl.load(Counts + e)`, `for i in range(n)`)
    addressing = {n.id for c in pointer_args + bounds for n in ast.walk(c) if isinstance(n, ast.Name)}
    todo = list(addressing)
    while todo:
        for expr in assigned.get(todo.pop(), []):
            for name in {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)} - addressing:
                addressing.add(name)
                todo.append(name)
    index = {p for var, sources in loaded.items() if var in addressing for p in sources}
    return {p: "constexpr" if p in constexpr else "scalar" if p in numeric else "index" if p in index and p in pointer
            else "pointer" if p in pointer else "unknown" for p in params}  # "unknown": only handed on to a helper


FP32_MATH = {"exp", "exp2", "log", "log2", "cos", "sin", "sqrt", "sqrt_rn", "rsqrt", "erf", "floor", "ceil",
             "div_rn"}  # tl.math functions that reject bf16 and fp16 operands
SAME_TYPE = {"maximum", "minimum", "where", "abs"}  # keep their operands' type


def fp32_params(kernel: ast.FunctionDef) -> set[str]:
    """Pointer parameters whose loaded values reach a ``tl.exp``-like function uncast (``lse = tl.load(Lse + i)``,
    ``tl.exp(lse - m)``): those functions accept only fp32 and fp64, so the tensor must hold fp32."""
    params = {a.arg for a in kernel.args.posonlyargs + kernel.args.args + kernel.args.kwonlyargs}
    raw: dict[str, set[str]] = {}  # name -> the parameters whose loaded values it holds as loaded

    def sources(e: ast.expr) -> set[str]:
        if isinstance(e, ast.Name):
            return raw.get(e.id, set())
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            if e.func.attr == "load" and e.args:
                return _addends(e.args[0]) & params
            if e.func.attr in SAME_TYPE:
                return set().union(*(sources(a) for a in e.args[1 if e.func.attr == "where" else 0:]))
            return set()  # .to(), tl.cast, reductions, dots: another type, or one not known here
        if isinstance(e, ast.BinOp):
            return sources(e.left) | sources(e.right)
        if isinstance(e, ast.UnaryOp):
            return sources(e.operand)
        if isinstance(e, ast.IfExp):
            return sources(e.body) | sources(e.orelse)
        return set()

    for _ in range(3):  # to a fixed point over reassignments (p = p - m) in any order
        for node in ast.walk(kernel):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                raw.setdefault(node.targets[0].id, set()).update(sources(node.value))
    out = {p for n in ast.walk(kernel) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
           and n.func.attr in FP32_MATH and n.args for p in sources(n.args[0])}
    # tl.atomic_max(Scale, amax) with a float value (an abs-max for a quant scale): float atomics take fp32 only
    for n in ast.walk(kernel):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                "atomic_max", "atomic_min") and len(n.args) >= 2 and _floaty(n.args[1], kernel):
            out |= _addends(n.args[0]) & params
    return out


_BITWISE = (ast.RShift, ast.LShift, ast.BitAnd, ast.BitOr, ast.BitXor)


def bitwise_params(kernel: ast.FunctionDef) -> set[str]:
    """Pointer parameters whose loaded values are shifted or masked as loaded (``w = tl.load(B + offs)``,
    ``(w >> shift) & 0xF``: packed int4 weights), seed a random stream (``tl.randint(seed, offs)``), or take a
    bitwise atomic (``tl.atomic_or(Mask + idx, bit)``: a bitmask, whatever its name says): all take integers only,
    so the tensor holds int32."""
    params = {a.arg for a in kernel.args.posonlyargs + kernel.args.args + kernel.args.kwonlyargs}
    loaded: dict[str, set[str]] = {}
    for node in ast.walk(kernel):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute) \
                and node.value.func.attr == "load" and node.value.args:
            loaded.setdefault(node.targets[0].id, set()).update(_addends(node.value.args[0]) & params)
    shifted = {p for n in ast.walk(kernel) if isinstance(n, ast.BinOp) and isinstance(n.op, _BITWISE)
               for side in (n.left, n.right) if isinstance(side, ast.Name) for p in loaded.get(side.id, ())}
    calls = [(n.func.attr, n.args[0]) for n in ast.walk(kernel)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args]
    # seed = tl.load(seeds + i), tl.randint(seed, offs): a random stream's seed is an integer too
    seeds = {p for attr, first in calls if attr in _SEEDED and isinstance(first, ast.Name)
             for p in loaded.get(first.id, ())}
    bitmasks = {p for attr, first in calls if attr in _BITWISE_ATOMICS for p in _addends(first) & params}
    return shifted | seeds | bitmasks


_SEEDED = {"rand", "randn", "randint", "randint4x", "rand4x", "randn4x", "philox"}
_BITWISE_ATOMICS = {"atomic_or", "atomic_and", "atomic_xor"}  # Triton takes integer pointers only (no bool)


def _floaty(value: ast.expr, kernel: ast.FunctionDef) -> bool:
    """Whether ``value`` is a float by how it was made: tl.max(tl.abs(x)), x / y, a float literal, or a name bound
    to one of those in ``kernel``."""
    seen: set[str] = set()
    todo = [value]
    assigned = _assignments(kernel)
    while todo:
        e = todo.pop()
        if isinstance(e, ast.Name) and e.id not in seen:
            seen.add(e.id)
            todo.extend(assigned.get(e.id, []))
        elif isinstance(e, ast.Constant) and isinstance(e.value, float) or isinstance(e, ast.BinOp) and isinstance(
                e.op, ast.Div) or isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in (
                "abs", "exp", "sqrt", "rsqrt", "fabs"):
            return True
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("max", "min", "maximum"):
            todo.extend(e.args)
    return False


def required_params(kernel: ast.FunctionDef) -> list[str]:
    """The parameters a launch must pass: no default, and not set by an autotune config or a heuristic."""
    decorated = {k.value for d in kernel.decorator_list for n in ast.walk(d) if isinstance(n, ast.Dict)
                 for k in n.keys if isinstance(k, ast.Constant)}
    args = kernel.args.posonlyargs + kernel.args.args
    with_default = {a.arg for a in args[len(args) - len(kernel.args.defaults):]} if kernel.args.defaults else set()
    return [a.arg for a in args if a.arg not in with_default and a.arg not in decorated]


def program_rows(kernel: ast.FunctionDef) -> dict[str, int]:
    """Pointer parameters read or written at one element per program along a grid axis (``b = tl.program_id(0)``
    then ``tl.load(B_Seqlen + b)``): parameter -> that axis. Tables read so share one length, the grid's."""
    pids: dict[str, int] = {}
    for node in ast.walk(kernel):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call) and ast.unparse(node.value.func).endswith("program_id"):
            arg = node.value.args[0] if node.value.args else next(
                (k.value for k in node.value.keywords if k.arg == "axis"), None)
            if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
                pids[node.targets[0].id] = arg.value
    params = {a.arg for a in kernel.args.args}
    out: dict[str, int] = {}
    for node in ast.walk(kernel):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("tl.load", "tl.store") and node.args:
            e = node.args[0]
            if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
                for p, v in ((e.left, e.right), (e.right, e.left)):
                    if isinstance(p, ast.Name) and p.id in params and isinstance(v, ast.Name) and v.id in pids:
                        out.setdefault(p.id, pids[v.id])
    return out


def arange_bounds(kernel: ast.FunctionDef) -> set[str]:
    """Parameters used as a bound of ``tl.arange``: each must be a power of two. So must ``DIM`` when the bound is
    ``half: tl.constexpr = DIM // 2``: a power of two times or divided by another is one only if it is."""
    assigned = _assignments(kernel)
    names = {a.id for n in ast.walk(kernel) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "arange" for a in n.args if isinstance(a, ast.Name)}
    out = set(names)
    for name in names:
        for e in assigned.get(name, []):
            if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.FloorDiv, ast.Mult)) and isinstance(
                    e.left, ast.Name) and isinstance(e.right, ast.Constant) and isinstance(e.right.value, int) \
                    and e.right.value > 0 and e.right.value & (e.right.value - 1) == 0:
                out.add(e.left.id)
    return out


def index_targets(kernel: ast.FunctionDef, kinds: dict[str, str] | None = None) -> dict[str, dict[str, bool]]:
    """For each parameter whose loaded values go into an address, the pointer parameters that address reaches, and
    whether the kernel stores through it: ``d = tl.load(Src2dst + i)``, ``tl.load(Down + d * n)`` gives
    {"Src2dst": {"Down": False}}. A value read from the table must then stay below the size of what it addresses, and
    a table that scatters stores had better not repeat a value (two programs would race for one row). ``kinds``:
    ``kernel_param_kinds(kernel)``, when the caller has it already."""
    params = {a.arg for a in kernel.args.posonlyargs + kernel.args.args + kernel.args.kwonlyargs}
    assigned = _assignments(kernel)

    def reach(expr: ast.expr, seen: set[str]) -> tuple[set[str], set[str]]:
        """(parameters the expression is built from, parameters the loads it uses read from). ``seen``: the names
        already followed, so that pointer chasing (``p = tl.load(p)``) ends."""
        bases: set[str] = set()
        tables: set[str] = set()
        todo = [expr]
        while todo:
            e = todo.pop()
            source = _loaded_from(e)
            if source is not None:  # a value read from memory: the pointer it was read from is a table
                tables |= reach(source, seen)[0]
            elif isinstance(e, ast.Name):
                if e.id not in seen:
                    seen.add(e.id)
                    bases |= {e.id} & params
                    todo.extend(assigned.get(e.id, []))
            else:
                todo.extend(ast.iter_child_nodes(e))  # type: ignore[arg-type]
        return bases, tables

    kinds = kinds or kernel_param_kinds(kernel)
    memory = {p for p, k in kinds.items() if k in ("pointer", "index")}
    out: dict[str, dict[str, bool]] = {}
    for node in ast.walk(kernel):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in POINTER_OPS \
                and node.args:
            bases, tables = reach(node.args[0], set())
            for t in tables & memory:
                for b in (bases & memory) - tables:
                    out.setdefault(t, {})[b] = out.get(t, {}).get(b, False) or node.func.attr == "store"
    return out


def splat_widths(args: list[ast.expr], left: list[str], owners: list[str | None]) -> list[int] | None:
    """How many kernel parameters each ``*splat`` in a launch fills. One splat takes what the others leave. Several
    take widths of 1 to 4 that add up, chosen so that most stride parameters land on the splat their name mentions
    (``kv_stride_s`` on ``*kv.stride()``, ``stride_qm`` on ``*q.stride()``), then as even as possible."""
    stars = [i for i, a in enumerate(args) if isinstance(a, ast.Starred)]
    total = len(left) - (len(args) - len(stars))
    if len(stars) <= 1:
        return [total] if stars else []
    if total < len(stars) or total > 4 * len(stars) or len(stars) > 8:
        return None
    at = stars[0]  # where in ``left`` the first splat starts
    nonstar_between = [sum(1 for a in args[s + 1:(stars + [len(args)])[k + 1]] if not isinstance(a, ast.Starred))
                       for k, s in enumerate(stars)]

    def owner_of(param: str) -> int | None:
        words = param.lower().split("_")
        if "stride" not in words and "strides" not in words:
            return None
        words = [w for w in words if w and w not in ("stride", "strides")]
        best, best_len = None, 0
        for k, o in enumerate(owners):
            o = (o or "").lower()
            if o and ("_".join(words) == o or "_".join(words).startswith(o + "_")
                      or (len(words) == 1 and words[0].startswith(o) and len(words[0]) - len(o) <= 1)) \
                    and len(o) > best_len:
                best, best_len = k, len(o)
        return best

    def score(widths: tuple[int, ...]) -> tuple[int, float]:
        pos, hits = at, 0
        for k, w in enumerate(widths):
            hits += sum(owner_of(p) == k for p in left[pos:pos + w])
            pos += w + nonstar_between[k]
        mean = total / len(widths)
        return hits, -sum((w - mean) ** 2 for w in widths)

    choices = [w for w in itertools.product(range(1, 5), repeat=len(stars)) if sum(w) == total]
    return list(max(choices, key=score)) if choices else None


def helper_args(kernels: tuple[ast.FunctionDef, ...]) -> list[tuple[str, str, str, str]]:
    """(kernel, helper, the helper's parameter, the kernel's name handed to it) for each call of one ``@triton.jit``
    function of the task by another: ``compute_m_range(pid, seg_indptr)``."""
    by_name = {k.name: k for k in kernels}
    out = []
    for k in kernels:
        for call in (n for n in ast.walk(k) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                     and n.func.id in by_name and n.func.id != k.name):
            h = by_name[call.func.id]  # type: ignore[attr-defined]
            order = [a.arg for a in h.args.posonlyargs + h.args.args]
            passed = list(zip(order, call.args)) + [(kw.arg, kw.value) for kw in call.keywords if kw.arg]
            out += [(k.name, h.name, hp, a.id) for hp, a in passed if isinstance(a, ast.Name)]
    return out


def through_helpers(kinds: dict[str, dict[str, str]],
                     kernels: tuple[ast.FunctionDef, ...]) -> dict[str, dict[str, str]]:
    """``kinds`` with a parameter that a kernel only hands to a ``@triton.jit`` helper (``compute_m_range(pid,
    seg_indptr, weight_indices)``) taking the kind it has there: a pointer the helper loads through is one here."""
    calls = helper_args(kernels)
    for _ in range(3):  # helpers of helpers
        for k, h, hp, a in calls:
            if kinds[k].get(a) == "unknown" and kinds[h].get(hp) in ("pointer", "index"):
                kinds[k][a] = kinds[h][hp]
    return kinds


def sets_through_helpers(sets: dict[str, set[str]], kernels: tuple[ast.FunctionDef, ...]) -> dict[str, set[str]]:
    """``sets`` (per kernel, parameters of one sort: fp32, integer) with what a kernel hands a helper's parameter of
    that sort (``gumbel_block_argmax(..., seeds_ptr)``, which seeds ``tl.randint`` from it)."""
    calls = helper_args(kernels)
    for _ in range(3):
        for k, h, hp, a in calls:
            if hp in sets[h]:
                sets[k].add(a)
    return sets
