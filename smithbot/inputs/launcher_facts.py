"""What a launcher's code says about its parameters, read from its AST and from the kernels it launches
(``infer.py`` turns it into input specs): which are tensors and of what rank, which axes and names are equal or
computed from one another, what the code insists on in its guards, and what each kernel makes of what it is handed.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from smithbot.inputs.kernel_use import splat_widths
from smithbot.inputs.names import TORCH_DTYPES


TENSOR_ATTRS = {"shape", "stride", "size", "dtype", "device", "numel", "view", "reshape", "contiguous", "data_ptr",
                "is_contiguous", "element_size", "dim", "ndim", "flatten", "unsqueeze", "squeeze", "transpose",
                "is_cuda", "new_empty", "new_zeros", "zero_", "fill_", "copy_", "to", "float", "half", "t",
                "permute", "expand", "narrow", "split", "chunk", "view_as", "T", "mT", "nbytes", "sum", "max",
                "min", "cumsum", "numel", "item", "tolist"}
class Facts:
    """Union-find over axes ``(param, i)``, local names and integer literals, plus ranks and tensor use."""

    def __init__(self, params: set[str], kernels: dict[str, tuple[dict[str, str], list[str]]]) -> None:
        self.params = params
        self.kernels = kernels  # kernel name -> (its parameters' kinds in signature order, those a launch must pass)
        self.kernel_kind: dict[str, str] = {}  # launcher parameter -> what the kernel it is handed to makes of it
        self.parent: dict[Any, Any] = {}
        self.rank: dict[str, int] = {}
        self.exact: set[str] = set()  # ranks the code states (unpacking, dim() ==), not just indexes up to
        self.tensor: set[str] = set()
        self.floaty: set[str] = set()
        self.launched: set[str] = set()
        self.dtype: dict[str, str] = {}  # from `p.dtype == torch.float32`
        self.same_dtype: list[tuple[str, str]] = []  # from `q.dtype == k.dtype`
        self.keys: dict[str, set[str]] = {}  # p["BLOCK_SIZE_M"]: p is a dict of launch settings
        self.alias: dict[str, str] = {}  # out = torch.empty_like(x): out has x's shape
        self.renamed: dict[str, str] = {}  # rows = plan_rows: the same tensor
        self.same_rows: dict[str, str] = {}  # f = torch.view_as_real(freqs).flatten(-2): f's rows are freqs's
        self.multiples: list[tuple[ast.expr, ast.expr]] = []  # assert n % BLOCK == 0
        self.upper: list[tuple[Any, int]] = []  # assert K <= 256
        self.isa: dict[str, str] = {}  # assert isinstance(flag, bool)
        self.pow2: list[Any] = []  # sizes a kernel hands to tl.arange
        self.index_into: dict[str, tuple[str, bool]] = {}  # index table -> a tensor whose rows its values address,
        # and whether the kernel stores through them
        self.addressed: dict[str, set[str]] = {}  # index table -> every tensor whose rows its values address
        self.derived: dict[Any, ast.expr] = {}  # assert z.shape[0] == K // group_size: the axis is that expression
        self.sizes: set[str] = set()  # torch.empty((k, s)), range(k): names used as sizes, so numbers
        self.values: dict[str, Any] = {}  # parameters whose inputs are fixed flags or None: they decide branches
        self.truthy: set[str] = set()  # assert weight_column_major: the flag must be set
        self.unit_stride: dict[str, int] = {}  # assert b.stride(1) == 1: the axis whose elements are adjacent
        self.handed: dict[str, list[tuple[str, str]]] = {}  # parameter -> (kernel, kernel parameter) it is passed as

    def find(self, x: Any) -> Any:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Any, b: Any) -> None:
        if a is not None and b is not None:
            self.parent[self.find(a)] = self.find(b)

    def equal(self, key: Any, node: ast.expr) -> None:
        """``key`` (an axis or name) equals ``node``: the same class, or, for arithmetic, that expression."""
        if self.axis(node) is not None:
            self.union(key, self.axis(node))
        elif key is not None and arithmetic(node):
            self.find(key)
            self.derived.setdefault(key, node)

    def at_least(self, p: str, r: int) -> None:
        self.rank[p] = max(self.rank.get(p, 0), r)

    @staticmethod
    def _int(node: ast.expr) -> int | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, int):
            return -node.operand.value
        return None

    def axis(self, node: ast.expr) -> Any:
        """``p.shape[i]`` / ``p.size(i)`` -> ("ax", p, i); a name -> ("name", n); an int -> ("lit", v); else None."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                and isinstance(node.value.value, ast.Name) and self._int(node.slice) is not None:
            return self._ax(node.value.value.id, self._int(node.slice))  # type: ignore[arg-type]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and isinstance(node.func.value, ast.Name) and len(node.args) == 1 and self._int(node.args[0]) is not None:
            return self._ax(node.func.value.id, self._int(node.args[0]))  # type: ignore[arg-type]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
                and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            return self._ax(node.args[0].id, 0)  # len(p): p's first axis
        if isinstance(node, ast.Name):
            return ("name", node.id)
        if self._int(node) is not None and self._int(node) >= 0:  # type: ignore[operator]
            return ("lit", self._int(node))
        return None

    def _ax(self, p: str, i: int) -> Any:
        p = self.alias.get(p, p)
        if p not in self.params:
            return None
        self.tensor.add(p)
        if i >= 0:
            self.at_least(p, i + 1)
            return ("ax", p, i)
        self.at_least(p, -i)
        return ("neg", p, -i)

    def shape_of(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("tuple", "list") \
                and len(node.args) == 1:  # tuple(p.shape) == (a, b)
            node = node.args[0]
        if isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(node.value, ast.Name) \
                and self.alias.get(node.value.id, node.value.id) in self.params:
            return self.alias.get(node.value.id, node.value.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and not node.args and isinstance(node.func.value, ast.Name) \
                and self.alias.get(node.func.value.id, node.func.value.id) in self.params:
            return self.alias.get(node.func.value.id, node.func.value.id)
        return None


ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}


def arithmetic(node: ast.expr) -> bool:
    """``K // group_size``, ``2 * head_dim``, ``x.numel()``, ``triton.cdiv(K, block_k)``, ``block_size[1]`` (an
    element of a list of sizes): a size computed from others."""
    return isinstance(node, ast.BinOp) and type(node.op) in ARITH or isinstance(node, ast.Call) \
        and isinstance(node.func, ast.Attribute) and node.func.attr == "numel" and not node.args \
        or ceil_div(node) is not None or element(node) is not None


def ceil_div(node: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    """``triton.cdiv(a, b)`` (or ``cdiv(a, b)``) -> (a, b)."""
    if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "cdiv" and len(node.args) == 2 \
            and not node.keywords:
        return node.args[0], node.args[1]
    return None


def element(node: ast.expr) -> tuple[str, int] | None:
    """``block_size[1]`` -> ("block_size", 1): a constant index into a name."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, int) and not isinstance(node.slice.value, bool):
        return node.value.id, node.slice.value
    return None


def _negated(test: ast.expr) -> list[ast.expr]:
    """What must hold for ``if test: raise`` not to raise, as far as it can be said: ``a != b`` -> ``a == b``
    (``not in`` -> ``in``, ``is None`` -> ``is not None``), ``x or y`` -> both negated, ``not x`` -> ``x``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return [test.operand]
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return [t for v in test.values for t in _negated(v)]
    if isinstance(test, (ast.Attribute, ast.Name)):  # if x.dtype.is_floating_point: raise
        return [ast.UnaryOp(op=ast.Not(), operand=test)]
    flipped = {ast.NotEq: ast.Eq, ast.NotIn: ast.In, ast.Is: ast.IsNot}
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in flipped:
        return [ast.Compare(left=test.left, ops=[flipped[type(test.ops[0])]()], comparators=test.comparators)]
    return []


def _insisted(fn: ast.FunctionDef, values: dict[str, Any] | None = None) -> list[ast.expr]:
    """The conditions the launcher insists on: ``assert cond`` and ``if not cond: raise ...``. Only these say what
    the inputs must be; ``if n == 0: return`` is a special case, not the rule. With ``values`` (parameters whose
    inputs are fixed: ``use_fp8=False``, ``scale=None``), a branch those decide against is left out."""
    out: list[ast.expr] = []

    def visit(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, ast.Assert):
                out.append(node.test)
            elif isinstance(node, ast.If):
                if node.body and isinstance(node.body[0], ast.Raise):
                    out.extend(_negated(node.test))
                taken = _decided(node.test, values or {})
                if taken is not False:
                    visit(node.body)
                if taken is not True:
                    visit(node.orelse)
            elif isinstance(node, (ast.For, ast.While, ast.With, ast.Try)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)

    visit(fn.body)
    return out


def _decided(test: ast.expr, values: dict[str, Any]) -> bool | None:
    """Whether ``test`` holds, when fixed parameter values decide it; None when they do not."""
    if isinstance(test, ast.Name) and test.id in values:
        return bool(values[test.id])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        v = _decided(test.operand, values)
        return None if v is None else not v
    if isinstance(test, ast.BoolOp):
        parts = [_decided(v, values) for v in test.values]
        stop = isinstance(test.op, ast.Or)  # Or: any True decides; And: any False decides
        if stop in parts:
            return stop
        return None if None in parts else not stop
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and test.left.id in values and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None and isinstance(test.ops[0], (ast.Is, ast.IsNot)):
        return (values[test.left.id] is None) == isinstance(test.ops[0], ast.Is)
    return None


SAME_SHAPE = {"clone", "contiguous", "detach", "float", "half", "bfloat16", "to"}
BOOL_NAME = r"^(is_|use_|has_|enable|do_)|^(causal|training)$"  # flags, False in the cases
ALLOCATORS = {"empty", "zeros", "ones", "full", "randn", "rand", "new_empty", "new_zeros", "new_ones", "new_full"}


def collect(fn: ast.FunctionDef, facts: Facts) -> None:
    """What launcher ``fn`` says of its parameters, into ``facts``: other names for a parameter and its shape,
    what each use of a parameter tells (a tensor's axes, a dict's keys, what a launch hands a kernel), what its
    assignments bind (``n, h = x.shape``), and what its asserts insist on."""
    _shape_names(fn, facts)
    _descriptors(fn, facts)
    assigned = [t.id for a in ast.walk(fn) if isinstance(a, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                for tgt in (a.targets if isinstance(a, ast.Assign) else [a.target])
                for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt]) if isinstance(t, ast.Name)]
    for node in ast.walk(fn):
        _read(node, facts)
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            _assignment(node, facts, assigned)
    _insisted_facts(fn, facts)


def _shape_names(fn: ast.FunctionDef, facts: Facts) -> None:
    """Other names for a parameter, its shape or its rows (``out = torch.empty_like(x)``, ``rows = plan_rows``),
    and the axes ``x.numel() // x.size(-1)`` implies."""
    for node in ast.walk(fn):  # x.numel() // x.size(-1): the rows of x, which has more than one axis then
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and isinstance(node.left, ast.Call) \
                and ast.unparse(node.left.func).endswith(".numel") and isinstance(node.left.func, ast.Attribute):
            key = facts.axis(node.right)
            if key is not None and key[0] == "neg" and key[1] == ast.unparse(node.left.func.value):
                facts.at_least(key[1], key[2] + 1)
    for node in ast.walk(fn):  # out = torch.empty_like(x), y = x.contiguous(): names for x's shape
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call):
            f, args = node.value.func, node.value.args
            src = args[0] if isinstance(f, ast.Attribute) and f.attr.endswith("_like") and args else \
                f.value if isinstance(f, ast.Attribute) and f.attr in SAME_SHAPE else None
            if isinstance(src, ast.Name) and src.id in facts.params and node.targets[0].id != src.id:
                facts.alias[node.targets[0].id] = src.id
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Name) and node.value.id in facts.params \
                and node.targets[0].id not in facts.params:  # rows = plan_rows: another name for the parameter
            facts.alias[node.targets[0].id] = facts.renamed[node.targets[0].id] = node.value.id
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            src = _rows_source(node.value)
            if src in facts.params and node.targets[0].id not in facts.params:
                facts.same_rows[node.targets[0].id] = src


def _descriptors(fn: ast.FunctionDef, facts: Facts) -> None:
    """A TMA descriptor's block has the tensor's rank (``TensorDescriptor.from_tensor(x, [1, r, k, 2, 256])``, the
    block also a name bound to list literals of one length): x has exactly that many axes."""
    lists: dict[str, set[int]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            size = len(node.value.elts) if isinstance(node.value, (ast.List, ast.Tuple)) else -1
            lists.setdefault(node.targets[0].id, set()).add(size)
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-2:] in (
                ["TensorDescriptor", "from_tensor"], ["TensorDescriptor"]) and node.args
                and isinstance(node.args[0], ast.Name) and node.args[0].id in facts.params):
            continue
        at = 1 if ast.unparse(node.func).endswith("from_tensor") else 3  # TensorDescriptor(x, shape, strides, block)
        block = next((k.value for k in node.keywords if k.arg == "block_shape"),
                     node.args[at] if len(node.args) > at else None)
        sizes = {len(block.elts)} if isinstance(block, (ast.List, ast.Tuple)) else \
            lists.get(block.id, {-1}) if isinstance(block, ast.Name) else {-1}
        if len(sizes) == 1 and min(sizes) > 0:
            p = node.args[0].id
            facts.tensor.add(p)
            facts.rank[p] = min(sizes)
            facts.exact.add(p)


def _read(node: ast.AST, facts: Facts) -> None:
    """What one node of the launcher says of the parameters it reads."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in facts.params \
            and node.attr in TENSOR_ATTRS:
        facts.tensor.add(node.value.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "stride" \
            and isinstance(node.func.value, ast.Name) and node.args and facts._int(node.args[0]) is not None:
        facts._ax(node.func.value.id, facts._int(node.args[0]))  # type: ignore[arg-type]
    if isinstance(node, (ast.Subscript, ast.Call)):
        facts.axis(node)  # records p.shape[i] / p.size(i): p is a tensor of rank > i
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in facts.params \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        facts.keys.setdefault(node.value.id, set()).add(node.slice.value)
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.view_as_real" and node.args \
            and isinstance(node.args[0], ast.Name) and node.args[0].id in facts.params:
        facts.tensor.add(node.args[0].id)
        facts.dtype[node.args[0].id] = "complex64"  # freqs_cis: complex rotations, read as (re, im) pairs
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("pop", "get") \
            and isinstance(node.func.value, ast.Name) and node.func.value.id in facts.params \
            and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        # config.pop("BLOCK_SIZE_K"); with a default (config.get("SPLIT_K", 1)) the key may be absent
        facts.keys.setdefault(node.func.value.id, set()).add(node.args[0].value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
        facts.launched.update(a.id for a in [*node.args, *(k.value for k in node.keywords)]
                              if isinstance(a, ast.Name) and a.id in facts.params)
        if getattr(node.func.value, "id", None) in facts.kernels:
            _launch(facts, node, *facts.kernels[node.func.value.id])  # type: ignore[attr-defined]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and node.args \
            and isinstance(node.args[0], ast.Name):
        facts.floaty.add(node.args[0].id)
    if isinstance(node, ast.Call) and (ast.unparse(node.func).split(".")[-1] in ALLOCATORS or
                                       isinstance(node.func, ast.Name) and node.func.id == "range"):
        args = node.args[0].elts if node.args and isinstance(node.args[0], (ast.Tuple, ast.List)) else node.args
        facts.sizes.update(a.id for a in args if isinstance(a, ast.Name))


def _assignment(node: ast.Assign, facts: Facts, assigned: list[str]) -> None:
    """What one assignment binds: names for a parameter's axes (``n, h = x.shape[0], x.shape[1]``,
    ``B, T, H = *k.shape``, ``s0, s1 = x.stride()``), or a name bound once to an axis or to arithmetic of them."""
    tgt, val = node.targets[0], node.value
    starred = [e for e in val.elts if isinstance(e, ast.Starred)] if isinstance(val, ast.Tuple) else []
    if isinstance(val, ast.Tuple) and not starred and isinstance(tgt, ast.Tuple) \
            and len(tgt.elts) == len(val.elts):  # n, h = x.shape[0], x.shape[1]
        for e, v in zip(tgt.elts, val.elts):
            ax = facts.axis(v)
            if isinstance(e, ast.Name) and ax is not None and ax[0] in ("ax", "neg"):
                facts.union(("name", e.id), ax)
            elif isinstance(e, ast.Name) and ax is None and assigned.count(e.id) == 1 and arithmetic(v):
                facts.equal(("name", e.id), v)  # block_n, block_k = block_size[0], block_size[1]
        return
    if len(starred) == 1 and facts.shape_of(starred[0].value) and isinstance(tgt, (ast.Tuple, ast.List)):
        # B, T, H, K, V = *k.shape, v.shape[-1]
        p, at = facts.shape_of(starred[0].value), val.elts.index(starred[0])
        r = len(tgt.elts) - len(val.elts) + 1
        if r >= 1 and p:
            facts.rank[p] = r
            facts.exact.add(p)
            for i, e in enumerate(tgt.elts):
                src = ("ax", p, i - at) if at <= i < at + r else \
                    facts.axis(val.elts[i if i < at else i - r + 1])
                if isinstance(e, ast.Name) and e.id != "_":
                    facts.union(("name", e.id), src)
        return
    if isinstance(val, ast.Call) and isinstance(val.func, ast.Name) and val.func.id == "map" \
            and len(val.args) == 2 and not val.keywords:  # s0, s1 = map(int, x.stride()): x's own
        val = val.args[1]
    p = facts.shape_of(val)
    strides = isinstance(val, ast.Call) and isinstance(val.func, ast.Attribute) and val.func.attr == "stride" \
        and not val.args and isinstance(val.func.value, ast.Name) and val.func.value.id in facts.params
    if (p or strides) and isinstance(tgt, (ast.Tuple, ast.List)) and not any(
            isinstance(e, ast.Starred) for e in tgt.elts):
        if strides:  # s0, s1, _ = p.stride(): p has as many axes, whose sizes this does not say
            p = val.func.value.id  # type: ignore[attr-defined]
            facts.tensor.add(p)
        facts.rank[p] = len(tgt.elts)
        facts.exact.add(p)
        for i, e in enumerate(tgt.elts):
            if isinstance(e, ast.Name) and e.id != "_" and not strides:
                facts.union(("name", e.id), ("ax", p, i))
    elif isinstance(tgt, ast.Name):
        ax = facts.axis(val)
        if ax is not None and (ax[0] in ("ax", "neg") or ax[0] == "lit" and ax[1] > 0
                               and assigned.count(tgt.id) == 1):  # BLOCK_E = 128, bound once
            facts.union(("name", tgt.id), ax)
        elif ax is None and assigned.count(tgt.id) == 1 and arithmetic(val):  # n = h // 2, bound once
            facts.equal(("name", tgt.id), val)


def _insisted_facts(fn: ast.FunctionDef, facts: Facts) -> None:
    """What the launcher's asserts (and the tests it raises on) insist on: a truthy flag, a dtype, a unit stride,
    a power of two, a multiple, an upper or lower bound, one of a set of values."""
    insisted = _insisted(fn, facts.values)
    for test in insisted:
        for part in test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]:
            if isinstance(part, ast.Name) and part.id in facts.params:
                facts.truthy.add(part.id)
            text = ast.unparse(part)
            m = re.fullmatch(r"not (\w+)\.dtype\.is_floating_point", text) or re.fullmatch(
                r"(\w+)\.dtype in [(\[{]torch\.(\w+)\b.*", text)  # an integer tensor, or one of the dtypes listed
            if m and m.group(1) in facts.params:
                dtype = TORCH_DTYPES.get(m.group(2)) if m.lastindex == 2 else "int32"
                if dtype:
                    facts.dtype.setdefault(m.group(1), dtype)
            m = re.fullmatch(r"(\w+)\.stride\((-?\d+)\) == 1", text)  # assert b.stride(1) == 1: b's unit axis
            if m and m.group(1) in facts.params:
                facts.tensor.add(m.group(1))
                facts.unit_stride[m.group(1)] = int(m.group(2))
            m = re.fullmatch(r"(\w+)\.numel\(\) == (\d+)", text)  # assert x_s.numel() == 1: one axis of that size
            if m and m.group(1) in facts.params and m.group(1) not in facts.rank:
                facts.tensor.add(m.group(1))
                facts.rank[m.group(1)] = 1
                facts.exact.add(m.group(1))
                facts.union(("ax", m.group(1), 0), ("lit", int(m.group(2))))
    for node in (n for test in insisted for n in ast.walk(test)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                and len(node.args) == 2 and isinstance(node.args[0], ast.Name) and isinstance(node.args[1], ast.Name):
            facts.isa[node.args[0].id] = node.args[1].id  # assert isinstance(flag, bool)
        if not isinstance(node, ast.Compare):
            continue
        if all(isinstance(o, ast.Eq) for o in node.ops):
            items = [node.left, *node.comparators]
            pow2 = [e.args[0] for e in items if isinstance(e, ast.Call) and ast.unparse(e.func).endswith(
                "next_power_of_2") and len(e.args) == 1]
            if len(items) == 2 and pow2 and ast.unparse(pow2[0]) in map(ast.unparse, items):
                key = facts.axis(pow2[0])  # assert d == triton.next_power_of_2(d): d is a power of two
                if key is not None:
                    facts.find(key)
                    facts.pow2.append(key)
                continue
            if isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Mod) and len(items) == 2 \
                    and facts._int(items[1]) == 0:  # `assert n % BLOCK == 0`: n is a multiple of BLOCK
                facts.multiples.append((node.left.left, node.left.right))
                if facts.axis(node.left.left) is not None:
                    facts.find(facts.axis(node.left.left))  # records the axis, and the rank it implies
                continue
            lit = next((e for e in items if facts._int(e) is not None), None)
            for a, b in zip(items, items[1:]) if lit is None else ((e, lit) for e in items if e is not lit):
                equate(facts, a, b)  # a == b == c; q.dim() == k.dim() == 2: each of them is 2
        elif len(node.ops) == 1 and isinstance(node.ops[0], (ast.Lt, ast.LtE)) \
                and facts._int(node.comparators[0]) is not None and facts.axis(node.left) is not None:
            bound = facts._int(node.comparators[0]) - isinstance(node.ops[0], ast.Lt)  # type: ignore[operator]
            key = facts.axis(node.left)
            facts.find(key)
            facts.upper.append((key, bound))  # assert K <= 256
        elif len(node.ops) == 1 and isinstance(node.ops[0], (ast.Gt, ast.GtE)) \
                and facts._int(node.comparators[0]) is not None:
            p = _rank_of(facts, node.left)  # assert x.dim() >= 2
            if p is not None:
                facts.tensor.add(p)
                facts.at_least(p, facts._int(node.comparators[0]) + isinstance(node.ops[0], ast.Gt))  # type: ignore
        elif len(node.ops) == 1 and isinstance(node.ops[0], ast.In) and isinstance(
                node.comparators[0], (ast.Set, ast.Tuple, ast.List)) and node.comparators[0].elts:
            # assert d in {64, 128, 256}; assert w.dtype in (torch.int8, torch.float16): one of them
            options = node.comparators[0].elts
            pick = next((e for e in options if facts._int(e) == 128), options[0])
            equate(facts, node.left, pick)


def _launch(facts: Facts, call: ast.Call, kinds: dict[str, str], required: list[str], pow2: set[str],
            tables: dict[str, dict[str, bool]], fp32: set[str], ints: set[str] = frozenset()) -> None:
    """What the kernel makes of each launcher parameter handed to it as it is, and the rank of each splatted
    ``*p.stride()`` / ``*p.shape``: the kernel parameters left over for it (``splat_widths``)."""
    names = list(kinds)
    given = {k.arg for k in call.keywords}
    stars = [i for i, a in enumerate(call.args) if isinstance(a, ast.Starred)]
    left = [n for n in required if n not in given]
    widths = splat_widths(call.args, left, [_splatted(facts, call.args[i].value) for i in stars])  # type: ignore
    if widths is None:
        return
    for i, width in zip(stars, widths):
        p = _splatted(facts, call.args[i].value)  # type: ignore[attr-defined]
        if p and width >= 1:
            facts.tensor.add(p)
            facts.rank[p] = width
            facts.exact.add(p)
    pairs, at = [], 0
    for a in call.args:
        if isinstance(a, ast.Starred):
            at += widths[stars.index(call.args.index(a))]
            continue
        if at < len(names):
            pairs.append((names[at], a))
        at += 1
    passed = {kparam for kparam, _ in pairs} | given
    for k in call.keywords:  # **config: a settings dict holds the kernel parameters the launch passes no other way
        if k.arg is None and isinstance(k.value, ast.Name) and k.value.id in facts.params:
            facts.keys.setdefault(k.value.id, set()).update(n for n in required if n not in passed)
    for kparam, a in pairs + [(k.arg, k.value) for k in call.keywords]:
        p = facts.renamed.get(a.id, a.id) if isinstance(a, ast.Name) else None
        if p in facts.params and kparam:
            facts.handed.setdefault(p, []).append((call.func.value.id, kparam))  # type: ignore[attr-defined]
        if p in facts.params and kinds.get(kparam or "", "unknown") != "unknown":
            facts.kernel_kind.setdefault(p, kinds[kparam])  # type: ignore[arg-type, index]
        if p in facts.params and kparam in fp32:
            facts.dtype.setdefault(p, "fp32")  # type: ignore[arg-type]
        if p in facts.params and kparam in ints:  # (w >> shift) & 0xF of what it loads: packed integers
            facts.dtype.setdefault(p, "int32")  # type: ignore[arg-type]
        if kparam in pow2 and facts.axis(a) is not None:  # tl.arange(0, D): D is a power of two
            facts.pow2.append(facts.axis(a))
            facts.find(facts.axis(a))
    source = {kparam: facts.same_rows.get(a.id, facts.alias.get(a.id, a.id))
              for kparam, a in pairs + [(k.arg, k.value) for k in call.keywords]
              if isinstance(a, ast.Name) and facts.same_rows.get(a.id, facts.alias.get(a.id, a.id)) in facts.params}
    for table, targets in tables.items():  # what the kernel reads from a table addresses these tensors' rows
        rows = [(source[t], targets[t]) for t in sorted(targets) if t in source and source[t] != source.get(table)]
        if table in source and rows:
            facts.index_into.setdefault(source[table], rows[0])
            facts.addressed.setdefault(source[table], set()).update(q for q, _ in rows)


_ROW_KEEPING = {"contiguous", "float", "half", "bfloat16", "to", "view_as_real", "view_as_complex", "detach"}


def _rows_source(value: ast.expr) -> str | None:
    """The name ``value`` is a view of with the same rows (its leading axis): ``torch.view_as_real(x).flatten(-2)``,
    ``x.contiguous().flatten(1)`` -> ``x``."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        f, start = value.func.attr, (value.args[0] if value.args else None)
        if f.startswith("view_as_") and start is not None:  # torch.view_as_real(x)
            value = start
        elif f in _ROW_KEEPING or f == "flatten" and (isinstance(start, ast.UnaryOp) or isinstance(
                start, ast.Constant) and isinstance(start.value, int) and start.value >= 1):  # x.flatten(-2)
            value = value.func.value
        else:
            return None
    return value.id if isinstance(value, ast.Name) else None


def _splatted(facts: Facts, star: ast.expr) -> str | None:
    """The launcher parameter whose ``.shape`` / ``.size()`` / ``.stride()`` is splatted, if it is one."""
    if isinstance(star, ast.Call) and isinstance(star.func, ast.Attribute) and star.func.attr == "stride" \
            and isinstance(star.func.value, ast.Name):
        p = facts.alias.get(star.func.value.id, star.func.value.id)
        return p if p in facts.params else None
    return facts.shape_of(star)


def _rank_of(facts: Facts, x: ast.expr) -> str | None:
    """The parameter whose rank ``x`` is: ``p.dim()``, ``p.ndim``, ``len(p.shape)``."""
    p = None
    if isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr == "dim" \
            and isinstance(x.func.value, ast.Name):
        p = x.func.value.id
    elif isinstance(x, ast.Attribute) and x.attr == "ndim" and isinstance(x.value, ast.Name):
        p = x.value.id
    elif isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and x.func.id == "len" and x.args:
        p = facts.shape_of(x.args[0])
    p = facts.alias.get(p or "", p)
    return p if p in facts.params else None


def equate(facts: Facts, a: ast.expr, b: ast.expr) -> None:
    held = [e.value.id for e in (a, b) if isinstance(e, ast.Attribute) and e.attr == "dtype"
            and isinstance(e.value, ast.Name) and e.value.id in facts.params]  # type: ignore[attr-defined]
    if len(held) == 2:  # q.dtype == k.dtype: whatever one holds, the other holds too
        facts.tensor.update(held)
        facts.same_dtype.append((held[0], held[1]))
        return
    for x, y in ((a, b), (b, a)):  # p.dtype == torch.float32
        if isinstance(x, ast.Attribute) and x.attr == "dtype" and isinstance(x.value, ast.Name) \
                and x.value.id in facts.params and isinstance(y, ast.Attribute) and y.attr in TORCH_DTYPES \
                and isinstance(y.value, ast.Name) and y.value.id == "torch":
            facts.tensor.add(x.value.id)
            facts.dtype[x.value.id] = TORCH_DTYPES[y.attr]
            return
    # p.dim() == k, p.ndim == k, len(p.shape) == k
    for x, y in ((a, b), (b, a)):
        if isinstance(y, ast.Constant) and isinstance(y.value, int):
            p = _rank_of(facts, x)
            if p is not None:
                facts.tensor.add(p)
                facts.rank[p] = y.value
                facts.exact.add(p)
                return
    for x, y in ((a, b), (b, a)):  # p.numel() == n: a 1-D p of n elements, unless p's rank is known otherwise
        if isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr == "numel" \
                and isinstance(x.func.value, ast.Name) and x.func.value.id in facts.params \
                and x.func.value.id not in facts.exact and facts.rank.get(x.func.value.id, 1) == 1:
            p = x.func.value.id
            facts.tensor.add(p)
            facts.rank[p] = 1
            facts.union(("ax", p, 0), facts.axis(y))
            return
    pa, pb = facts.shape_of(a), facts.shape_of(b)
    if pa and pb:  # p.shape == q.shape
        r = max(facts.rank.get(pa, 0), facts.rank.get(pb, 0))
        facts.rank[pa] = facts.rank[pb] = r or facts.rank.get(pa, 0)
        facts.parent.setdefault(("same", pa), ("same", pa))
        facts.union(("same", pa), ("same", pb))
        return
    for p, other in ((pa, b), (pb, a)):
        if p and isinstance(other, (ast.Tuple, ast.List)):
            facts.rank[p] = len(other.elts)
            facts.exact.add(p)
            for i, e in enumerate(other.elts):
                facts.equal(("ax", p, i), e)
            return
    if facts.axis(a) is None:
        a, b = b, a
    facts.equal(facts.axis(a), b)


def required_optionals(fn: ast.FunctionDef, op: type = ast.IsNot, values: dict[str, Any] | None = None) -> set[str]:
    """Names the launcher insists are given although their default is None: ``assert n is not None`` or
    ``if n is None: raise ...`` (with ``op=ast.Is``, those it insists are None: ``assert a_scale is None``), on the
    branches ``values`` leave (``_insisted``)."""
    return {c.left.id for test in _insisted(fn, values) for c in ast.walk(test)
            if isinstance(c, ast.Compare) and isinstance(c.left, ast.Name) and len(c.ops) == 1
            and isinstance(c.ops[0], op) and isinstance(c.comparators[0], ast.Constant)
            and c.comparators[0].value is None}
