"""A cleaning pass for the Triton kernels Inductor generates, before they become a candidate that a maintainer reads:
the same computation with Inductor's bookkeeping taken out and its serial names replaced.

- Hints nobody measured go: ``eviction_policy=`` on loads and stores (the search times the candidate; a hint that
  matters comes back as a tuned knob, not as a default). ``tl.device_assert`` bounds checks go too: they compile to
  nothing outside Triton's debug mode.
- A copy (``r0_0 = r0_index``, ``tmp13 = ks0``) is replaced by what it copies, and an assignment nothing reads
  (``rbase = r0_base``, ``rindex = r0_index``) goes, until none is left.
- Names say what a value is: a pointer parameter takes the name of the tensor the launcher hands it
  (``in_ptr0`` -> ``seq_lens_ptr``), a loaded value that tensor's name (``seq_lens``), a cast ``seq_lens_i32``,
  and other temporaries the op that makes them (``where``, ``cumsum``...), numbered only where a name repeats.

Everything here keeps the computation: the cleaned candidate goes through the evaluator like any other, and the
tests check it bit for bit against the glue. The pass works on the AST (the kernels are ``ast.unparse`` output, so
there is no hand formatting to keep)."""

from __future__ import annotations

import ast
import builtins
import copy
import keyword
import re

# calls that act on memory or the device, which an unread result does not make removable
_EFFECTS = ("store", "atomic", "assert", "print", "barrier")
# what a temporary made by this call or operator is called
_CALL_WORDS = {"where": "where", "associative_scan": "scan", "sum": "total", "max": "largest", "min": "smallest",
               "full": "const", "broadcast_to": "wide", "arange": "offsets", "maximum": "largest",
               "minimum": "smallest", "exp": "exp", "log": "log", "sqrt": "root", "rsqrt": "inv_root",
               "sigmoid": "sig", "abs": "magnitude", "cumsum": "cumsum"}
_OP_WORDS = {ast.Add: "added", ast.Sub: "diff", ast.Mult: "prod", ast.Div: "ratio", ast.FloorDiv: "quot",
             ast.Mod: "rem", ast.BitAnd: "both", ast.BitOr: "either", ast.LShift: "shifted", ast.RShift: "shifted"}
_CMP_WORDS = {ast.Lt: "below", ast.LtE: "at_most", ast.Gt: "above", ast.GtE: "at_least", ast.Eq: "equal",
              ast.NotEq: "differs"}
_DTYPES = {"int32": "i32", "int64": "i64", "float32": "f32", "float16": "f16", "bfloat16": "bf16", "int1": "bool",
           "int8": "i8", "uint8": "u8"}
_TEMP = re.compile(r"tmp\d+")


def clean_kernel(fn: ast.FunctionDef, tensors: dict[str, str]) -> ast.FunctionDef:
    """``fn`` (one kernel, changed in place and returned) cleaned as the module says; ``tensors`` maps a parameter
    to the launcher's argument for it (``in_ptr0`` -> ``seq_lens``; Inductor's own ``buf0`` names nothing)."""
    _drop_hints(fn)
    while _propagate_copies(fn) or _drop_dead(fn):
        pass
    _rename(fn, tensors)
    return fn


def _drop_hints(fn: ast.FunctionDef) -> None:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            node.keywords = [k for k in node.keywords if k.arg != "eviction_policy"]
    for block in _blocks(fn):
        block[:] = [s for s in block if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                                             and ast.unparse(s.value.func) == "tl.device_assert")]


def _blocks(fn: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list in ``fn``: its body and the bodies of its loops and branches."""
    out = []
    for node in ast.walk(fn):
        for name in ("body", "orelse"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append(block)
    return out


def _stores(fn: ast.AST) -> dict[str, int]:
    """How many times each name is assigned (parameters once)."""
    counts: dict[str, int] = {a.arg: 1 for a in fn.args.args} if isinstance(fn, ast.FunctionDef) else {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    return counts


def _loads(fn: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _single(s: ast.stmt) -> tuple[str, ast.expr] | None:
    """``name = value`` (or ``name: T = value``): the name and the value."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
        return s.targets[0].id, s.value
    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
        return s.target.id, s.value
    return None


def _propagate_copies(fn: ast.FunctionDef) -> bool:
    """Replace one copy ``a = b`` (each assigned once, ``a`` not a constexpr) by ``b`` everywhere; whether one was."""
    counts = _stores(fn)
    for block in _blocks(fn):
        for i, s in enumerate(block):
            got = _single(s)
            if got is None or isinstance(s, ast.AnnAssign) or not isinstance(got[1], ast.Name):
                continue
            name, source = got[0], got[1].id
            if counts.get(name) != 1 or counts.get(source) != 1:
                continue
            del block[i]
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and node.id == name:
                    node.id = source
            return True
    return False


def _drop_dead(fn: ast.FunctionDef) -> bool:
    """Remove every assignment to a name nothing reads whose value has no effect; whether one was."""
    read = _loads(fn)
    changed = False
    for block in _blocks(fn):
        keep = []
        for s in block:
            got = _single(s)
            if got is not None and got[0] not in read and not any(
                    isinstance(c, ast.Call) and any(w in ast.unparse(c.func) for w in _EFFECTS)
                    for c in ast.walk(got[1])):
                changed = True
                continue
            keep.append(s)
        if not keep:  # (a loop whose body is all gone keeps a pass)
            keep = [ast.Pass()]
        block[:] = keep
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
    return "value"


def _rename(fn: ast.FunctionDef, tensors: dict[str, str]) -> None:
    """Pointer parameters named for their tensors, temporaries for what makes them (see the module)."""
    names: dict[str, str] = {}
    taken = {a.arg for a in fn.args.args} | _stores(fn).keys()
    for a in fn.args.args:
        tensor = tensors.get(a.arg, "")
        if tensor.isidentifier() and not re.fullmatch(r"buf\d+", tensor) and re.fullmatch(r"(in|out|in_out)_ptr\d+", a.arg) and f"{tensor}_ptr" not in taken:
            names[a.arg] = f"{tensor}_ptr"
            taken.add(f"{tensor}_ptr")
    used = set(taken) - {n for n in taken if _TEMP.fullmatch(n)}

    def fresh(word: str) -> str:
        word = re.sub(r"\W+", "_", word).strip("_") or "value"
        if word[0].isdigit():
            word = "v" + word
        out, n = word, 2
        while out in used or hasattr(builtins, out) or keyword.iskeyword(out):
            out, n = f"{word}_{n}", n + 1
        used.add(out)
        return out

    counts = _stores(fn)
    for node in ast.walk(fn):  # definitions in source order: a name is given where its value is first made
        got = _single(node) if isinstance(node, ast.stmt) else None
        if got is not None and _TEMP.fullmatch(got[0]) and got[0] not in names:
            # (one assigned again, in a loop, carries a value from step to step)
            names[got[0]] = fresh("carried" if counts[got[0]] > 1 else _word(_renamed(got[1], names), names))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            for el in node.targets[0].elts:  # tmp4, = tl.associative_scan(...)
                if isinstance(el, ast.Name) and _TEMP.fullmatch(el.id) and el.id not in names:
                    names[el.id] = fresh(_word(_renamed(node.value, names), names))
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in names:
            node.id = names[node.id]
    for a in fn.args.args:
        a.arg = names.get(a.arg, a.arg)


def _renamed(value: ast.expr, names: dict[str, str]) -> ast.expr:
    """A copy of ``value`` with the names given so far, to name what it makes."""
    out = copy.deepcopy(value)
    for node in ast.walk(out):
        if isinstance(node, ast.Name) and node.id in names:
            node.id = names[node.id]
    return out
