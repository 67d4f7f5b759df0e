"""A cleaning pass for the Triton kernels Inductor generates, before they become a candidate that a maintainer reads:
the same computation with Inductor's bookkeeping taken out and its serial names replaced.

- Hints nobody measured go: ``eviction_policy=`` on loads and stores (the search times the candidate; a hint that
  matters comes back as a tuned knob, not as a default). ``tl.device_assert`` bounds checks go too: they compile to
  nothing outside Triton's debug mode.
- A copy (``r0_0 = r0_index``, ``tmp13 = ks0``, ``RBLOCK: tl.constexpr = R0_BLOCK``) is replaced by what it copies
  (within its block, when a loop assigns it each step), an assignment nothing reads (``rbase = r0_base``,
  ``rindex = r0_index``) goes, and so does a ``tl.broadcast_to`` to the shape its value already has, until none is
  left.
- Names say what a value is: a pointer parameter takes the name of the tensor the launcher hands it
  (``in_ptr0`` -> ``seq_lens_ptr``), a size parameter the launcher's name for it (``ks0`` -> ``seq_lens_size_0``),
  a loaded value that tensor's name (``seq_lens``), a cast ``seq_lens_i32``, a value carried from one loop step to
  the next ``acc``, and other temporaries the op that makes them (``where``, ``cumsum``...), numbered only where a
  name repeats. Inductor's index vocabulary becomes rows and columns: a reduction's ``xindex``/``r0_index`` are
  ``rows``/``cols`` (``xmask`` ``row_mask``, ``r0_numel`` ``n_cols``, ``XBLOCK`` ``BLOCK_ROWS``...), a pointwise
  kernel's ``xindex`` its ``offsets`` (``xmask`` ``mask``, ``XBLOCK`` ``BLOCK``).

Everything here keeps the computation: the cleaned candidate goes through the evaluator like any other, and the
tests check it bit for bit against the glue. The pass works on the AST (the kernels are ``ast.unparse`` output, so
there is no hand formatting to keep)."""

from __future__ import annotations

import ast
import builtins
import copy
import keyword
import re

from smithbot.evolve import fold
from smithbot.evolve.kernel_ast import blocks, has_effect, loads, shape, single, stores

# what a temporary made by this call or operator is called
_CALL_WORDS = {"where": "where", "associative_scan": "scan", "sum": "total", "max": "largest", "min": "smallest",
               "full": "const", "broadcast_to": "wide", "arange": "offsets", "maximum": "largest",
               "minimum": "smallest", "exp": "exp", "log": "log", "sqrt": "root", "rsqrt": "inv_root",
               "sigmoid": "sig", "abs": "magnitude", "cumsum": "cumsum", "div_floor_integer": "quot"}
_OP_WORDS = {ast.Add: "added", ast.Sub: "diff", ast.Mult: "prod", ast.Div: "ratio", ast.FloorDiv: "quot",
             ast.Mod: "rem", ast.BitAnd: "both", ast.BitOr: "either", ast.LShift: "shifted", ast.RShift: "shifted"}
_CMP_WORDS = {ast.Lt: "below", ast.LtE: "at_most", ast.Gt: "above", ast.GtE: "at_least", ast.Eq: "equal",
              ast.NotEq: "differs"}
_DTYPES = {"int32": "i32", "int64": "i64", "float32": "f32", "float16": "f16", "bfloat16": "bf16", "int1": "bool",
           "int8": "i8", "uint8": "u8"}
_TEMP = re.compile(r"_?tmp\d+|[xyz]\d+|r0_\d+")  # Inductor's temporaries and its split indices (x0 = xindex % ks0)
# Inductor's index vocabulary: a prefix per dimension (x, y; r0_ or r for the reduced one) and what it names
_INDEX = re.compile(r"(x|y|r0_|r)(offset|index|mask|base|numel)")
_BLOCK = re.compile(r"(X|Y|R0_|R)BLOCK")
_PARTS = {"offset": "{}_start", "index": "{}s", "mask": "{}_mask", "base": "{}_offsets", "numel": "n_{}s",
          "BLOCK": "BLOCK_{}S"}
_FLAT = {"offset": "start", "index": "offsets", "mask": "mask", "base": "base", "numel": "n_elements",
         "BLOCK": "BLOCK"}


def clean_kernel(fn: ast.FunctionDef, tensors: dict[str, str], one_row: bool = False,
                 adds: frozenset[str] = frozenset()) -> dict[str, str]:
    """Clean ``fn`` (one kernel, changed in place) as the module says, and fold it (``fold.py``); ``tensors`` maps a
    parameter to the launcher's argument for it (``in_ptr0`` -> ``seq_lens``, ``ks0`` -> ``seq_lens_size_0``).
    With ``one_row`` the launcher makes a row one block, so a looped reduction reads it in one pass; ``adds`` names
    the local helpers that add (a scan's combine). Returns the new names of its constexpr parameters, which the
    launcher passes by keyword (``XBLOCK`` -> ``BLOCK_ROWS``), "" for one the kernel no longer takes (``XBLOCK``
    where the launch passes one row: it is 1)."""
    constexprs = [a.arg for a in fn.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)]
    _drop_hints(fn)
    fixed = _single_row(fn, tensors)
    _simplify(fn)
    if one_row and fold.one_pass(fn):
        _simplify(fn)
    if _drop_float_casts(fn, {p for p, given in tensors.items() if _FLOAT_ARG.fullmatch(given)}):
        _simplify(fn)  # (the copy the cast was made into)
    if fold.cumsum(fn, set(adds)):
        _simplify(fn)
    outputs = {a.arg for a in fn.args.args if re.fullmatch(r"out_ptr\d+", a.arg)}  # (written, never read)
    names = _rename(fn, tensors)
    outputs = {names.get(o, o) for o in outputs}
    fold.inline(fn, outputs)
    while fold.fold(fn):  # (what writing values in place left to fold)
        fold.inline(fn, outputs)
    return {c: "" if c in fixed else names.get(c, c) for c in constexprs}


def _single_row(fn: ast.FunctionDef, tensors: dict[str, str]) -> set[str]:
    """A kernel launched for one row (its ``xnumel`` passed as 1, as Inductor's scans of a vector are): ``XBLOCK``
    is 1 in its body and no longer a parameter, so a value that spans the row block has the shape it is broadcast
    to. Returns the parameters so fixed."""
    params = {a.arg for a in fn.args.args}
    if tensors.get("xnumel") != "1" or "XBLOCK" not in params:
        return set()
    fn.args.args = [a for a in fn.args.args if a.arg != "XBLOCK"]
    for s in fn.body:
        fold.substitute(s, "XBLOCK", ast.Constant(1))
    return {"XBLOCK"}


_FLOAT_ARG = re.compile(r"float\((\w+)\)")  # a number the glue takes, passed to the kernel as a Python float


def _drop_float_casts(fn: ast.FunctionDef, floats: set[str]) -> bool:
    """``x.to(tl.float32)`` of a parameter passed a Python float is ``x``: Triton types a float argument fp32
    (Inductor declared it fp64 and cast it), and its interpreter has no ``.to`` on a number."""
    dropped = []

    class Drop(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "to" and isinstance(f.value, ast.Name) \
                    and f.value.id in floats and len(node.args) == 1 and not node.keywords \
                    and ast.unparse(node.args[0]) == "tl.float32":
                dropped.append(node)
                return f.value
            return node

    Drop().visit(fn)
    return bool(dropped)


def clean_helper(fn: ast.FunctionDef) -> None:
    """A kernel's own helper (a scan's combine function, ``tmp0 = arg0_0 + arg1_0; return tmp0``) cleaned the same
    way, its parameters ``a``, ``b``... and a temporary that is only returned returned as its value."""
    _simplify(fn)
    letters = iter("abcdefghijklmnopqrstuvw")
    params = {a.arg: next(letters) for a in fn.args.args if re.fullmatch(r"arg\d+_\d+", a.arg)}
    if set(params.values()) & (stores(fn).keys() | loads(fn)):
        params = {}
    body = fn.body
    if len(body) >= 2 and isinstance(body[-1], ast.Return) and isinstance(body[-1].value, ast.Name):
        got = single(body[-2])
        if got is not None and got[0] == body[-1].value.id and stores(fn).get(got[0]) == 1 and sum(
                isinstance(n, ast.Name) and n.id == got[0] for n in ast.walk(fn)) == 2:
            body[-2:] = [ast.Return(got[1])]
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in params:
            node.id = params[node.id]
    for a in fn.args.args:
        a.arg = params.get(a.arg, a.arg)


def _simplify(fn: ast.FunctionDef) -> None:
    while _propagate_copies(fn) or _drop_dead(fn) or _drop_broadcasts(fn) or fold.fold(fn):
        pass


def _drop_hints(fn: ast.FunctionDef) -> None:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            node.keywords = [k for k in node.keywords if k.arg != "eviction_policy"]
    for block in blocks(fn):
        block[:] = [s for s in block if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                                             and ast.unparse(s.value.func) == "tl.device_assert")]


def _propagate_copies(fn: ast.FunctionDef) -> bool:
    """Replace one copy ``a = b`` by ``b``; whether one was. Everywhere, and the copy goes, where each is assigned
    once, ``b`` is a parameter or assigned before the copy, every read of ``a`` comes after it, and the copy runs
    whenever its loop step does (a constexpr alias only of a parameter). Else, as in a loop's body that assigns both
    each step, in the rest of the copy's block, when neither is assigned again there and ``a`` is not read before it
    in the block (a value carried from the step before); the copy itself goes once nothing reads it."""
    counts = stores(fn)
    params = {a.arg for a in fn.args.args}
    made = {n.id: (n.lineno, n.col_offset) for s in ast.walk(fn) if isinstance(s, (ast.Assign, ast.AnnAssign))
            for t in ([s.target] if isinstance(s, ast.AnnAssign) else s.targets) for n in ast.walk(t)
            if isinstance(n, ast.Name)}
    whole = [fn.body] + [n.body for n in ast.walk(fn) if isinstance(n, ast.For)]
    for block in blocks(fn):
        for i, s in enumerate(block):
            got = single(s)
            if got is None or not isinstance(got[1], ast.Name):
                continue
            name, source = got[0], got[1].id
            if isinstance(s, ast.AnnAssign) and source not in params:
                continue
            at = (s.lineno, s.col_offset)
            reads = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
            if counts.get(name) == 1 and counts.get(source) == 1 and any(block is b for b in whole) and (
                    source in params or made.get(source, at) < at) and all((n.lineno, n.col_offset) > at for n in reads):
                del block[i]
                block[:] = block or [ast.Pass()]
                for n in reads:
                    n.id = source
                return True
            rest = ast.Module(body=block[i + 1:], type_ignores=[])
            if isinstance(s, ast.AnnAssign) or name in loads(ast.Module(body=block[:i], type_ignores=[])) or \
                    {name, source} & stores(rest).keys():
                continue
            uses = [n for n in ast.walk(rest) if isinstance(n, ast.Name) and n.id == name]
            for node in uses:
                node.id = source
            if uses:
                return True
    return False


def _drop_dead(fn: ast.FunctionDef) -> bool:
    """Remove every assignment whose value has no effect and whose name nothing live reads: what a store, a
    loop's range or a branch's test reads is live, and so is what a live name's assignments read (so a value read
    only by itself or by values nothing else reads, ``acc = tl.where(m, acc + x, acc)``, goes); whether one was."""
    feeds: dict[str, set[str]] = {}
    live: set[str] = set()
    for s in ast.walk(fn):
        if not isinstance(s, ast.stmt) or isinstance(s, ast.FunctionDef):
            continue
        got = single(s)
        if got is not None and not has_effect(got[1]):
            feeds.setdefault(got[0], set()).update(loads(got[1]))
        elif isinstance(s, (ast.For, ast.If, ast.While)):
            live |= loads(s.iter if isinstance(s, ast.For) else s.test)
        else:
            live |= loads(s)
    todo = list(live)
    while todo:
        for name in feeds.get(todo.pop(), ()):
            if name not in live:
                live.add(name)
                todo.append(name)
    read = live
    changed = False
    for block in blocks(fn):
        keep = []
        for s in block:
            got = single(s)
            if got is not None and got[0] not in read and not has_effect(got[1]):
                changed = True
                continue
            keep.append(s)
        if not keep:  # (a loop whose body is all gone keeps a pass)
            keep = [ast.Pass()]
        block[:] = keep
    return changed


def _drop_broadcasts(fn: ast.FunctionDef) -> bool:
    """Replace every ``tl.broadcast_to(v, shape)`` whose ``v`` already has that shape (as far as the kernel's own
    statements show it) by ``v``; whether one was."""
    shapes: dict[str, tuple[str, ...] | None] = {a.arg: () for a in fn.args.args}
    changed = False

    class Drop(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            nonlocal changed
            self.generic_visit(node)
            if ast.unparse(node.func) == "tl.broadcast_to" and len(node.args) == 2 and \
                    isinstance(node.args[1], (ast.List, ast.Tuple)) and shape(node.args[0], shapes) == tuple(
                        ast.unparse(e) for e in node.args[1].elts):
                changed = True
                return node.args[0]
            return node

    def visit(block: list[ast.stmt]) -> None:
        for i, s in enumerate(block):
            if isinstance(s, ast.For):
                if isinstance(s.target, ast.Name):
                    shapes[s.target.id] = ()
                visit(s.body)
                continue
            if isinstance(s, (ast.If, ast.While)):
                visit(s.body)
                visit(s.orelse)
                continue
            block[i] = Drop().visit(s)
            got = single(block[i])
            if got is not None:
                known = shapes.get(got[0], "unset")
                made = shape(got[1], shapes)
                shapes[got[0]] = made if known in ("unset", made) else None

    visit(fn.body)
    return changed


def _word(value: ast.expr, names: dict[str, str]) -> str:
    """What a temporary made by ``value`` is called, from the op that makes it and what it reads."""
    if isinstance(value, ast.Call):
        func = ast.unparse(value.func)
        if func == "tl.load" and value.args:
            ptrs = [n.id for n in ast.walk(value.args[0]) if isinstance(n, ast.Name) and n.id.endswith("_ptr")]
            return ptrs[0].removesuffix("_ptr") if ptrs else "loaded"
        if isinstance(value.func, ast.Attribute) and value.func.attr == "to" and value.args:
            src = ast.unparse(value.func.value)
            base = names.get(src, src) if re.fullmatch(r"\w+", src) else "value"
            dtype = ast.unparse(value.args[0]).rsplit(".", 1)[-1]
            return f"{base}_{_DTYPES.get(dtype, dtype)}"
        word = func.rsplit(".", 1)[-1].lstrip("_").removeprefix("inductor_")  # (an inlined Inductor helper)
        return _CALL_WORDS.get(word, word or "value")
    if isinstance(value, ast.BinOp):
        return _OP_WORDS.get(type(value.op), "value")
    if isinstance(value, ast.Compare) and len(value.ops) == 1:
        return "is_" + _CMP_WORDS.get(type(value.ops[0]), "true")
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        return "negated"
    if isinstance(value, ast.Name):
        return names.get(value.id, value.id)
    if isinstance(value, ast.Subscript):  # tl.sum(acc, 1)[:, None]: what the sum is
        return _word(value.value, names)
    return "value"


def _rename(fn: ast.FunctionDef, tensors: dict[str, str]) -> dict[str, str]:
    """Pointer and size parameters named for their tensors and sizes, Inductor's indices for rows and columns, and
    temporaries for what makes them (see the module); the names given."""
    names: dict[str, str] = {}
    taken = {a.arg for a in fn.args.args} | stores(fn).keys()
    used = {n for n in taken if not (_TEMP.fullmatch(n) or _INDEX.fullmatch(n) or _BLOCK.fullmatch(n))}

    def fresh(word: str) -> str:
        word = re.sub(r"\W+", "_", word).strip("_") or "value"
        if word[0].isdigit():
            word = "v" + word
        out, n = word, 2
        while out in used or out in names.values() or hasattr(builtins, out) or keyword.iskeyword(out):
            out, n = f"{word}_{n}", n + 1
        used.add(out)
        return out

    for a in fn.args.args:
        given = tensors.get(a.arg, "")
        if (number := _FLOAT_ARG.fullmatch(given)) is not None:
            names[a.arg] = fresh(number.group(1))
            continue
        if not given.isidentifier() or re.fullmatch(r"buf\d+", given):
            continue
        if re.fullmatch(r"(in|out|in_out)_ptr\d+", a.arg):
            names[a.arg] = fresh(f"{given}_ptr")
        elif re.fullmatch(r"ks\d+", a.arg):  # a size Inductor made a symbol of, by the launcher's name for it
            names[a.arg] = fresh(given)
    reduced = any((m := _INDEX.fullmatch(n)) and m.group(1) in ("r0_", "r") for n in taken)
    if reduced and not taken & {"r0_index", "rindex"}:  # (read in one pass: the row's offsets are its columns)
        names.update({b: fresh("cols") for b in ("r0_base", "rbase") if b in taken})
    two_d = any((m := _INDEX.fullmatch(n)) and m.group(1) == "y" for n in taken)
    roles = {"x": "row", "r0_": "col", "r": "col"} if reduced else {"y": "row", "x": "col"} if two_d else {"x": ""}
    for n in sorted(taken):
        m = _INDEX.fullmatch(n) or _BLOCK.fullmatch(n)
        if m is None or n in names:
            continue
        prefix, part = (m.group(1), m.group(2)) if m.re is _INDEX else (m.group(1).lower(), "BLOCK")
        role = roles.get(prefix)
        if role is not None:
            word = _FLAT[part] if role == "" else _PARTS[part].format(role.upper() if part == "BLOCK" else role)
            names[n] = fresh(word)
    counts = stores(fn)
    for temp, buffer in _stored_as(fn, tensors).items():  # a value stored as it is: its buffer's name
        if temp not in names and counts.get(temp) == 1:
            names[temp] = fresh(buffer)
    for node in ast.walk(fn):  # definitions in source order: a name is given where its value is first made
        got = single(node) if isinstance(node, ast.stmt) else None
        if got is not None and _TEMP.fullmatch(got[0]) and got[0] not in names:
            # (one assigned again, in a loop, carries a value from step to step)
            names[got[0]] = fresh("acc" if counts[got[0]] > 1 else _word(_renamed(got[1], names), names))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            for el in node.targets[0].elts:  # tmp4, = tl.associative_scan(...)
                if isinstance(el, ast.Name) and _TEMP.fullmatch(el.id) and el.id not in names:
                    names[el.id] = fresh(_word(_renamed(node.value, names), names))
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in names:
            node.id = names[node.id]
    for a in fn.args.args:
        a.arg = names.get(a.arg, a.arg)
    return names


def _stored_as(fn: ast.FunctionDef, tensors: dict[str, str]) -> dict[str, str]:
    """Inductor's temporaries that the kernel stores as they are into one output the glue names (``tl.store(out_ptr1
    + x0, tmp3, xmask)``, the launcher passing ``positions``), each with that name."""
    seen: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "tl.store" and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Name) and _TEMP.fullmatch(node.args[1].id):
            ptrs = [n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)
                    and re.fullmatch(r"(in_out|out)_ptr\d+", n.id)]
            seen.setdefault(node.args[1].id, set()).update(tensors.get(q, "") for q in ptrs[:1])
    return {temp: next(iter(given)) for temp, given in seen.items() if len(given) == 1
            and re.fullmatch(r"[a-z]\w*", next(iter(given))) and not re.fullmatch(r"buf\d+|scratch\w*|out\w*",
                                                                                  next(iter(given)))}


def _renamed(value: ast.expr, names: dict[str, str]) -> ast.expr:
    """A copy of ``value`` with the names given so far, to name what it makes."""
    out = copy.deepcopy(value)
    for node in ast.walk(out):
        if isinstance(node, ast.Name) and node.id in names:
            node.id = names[node.id]
    return out
