"""Input specs inferred from how a launcher uses its parameters, for the parameters no rule or YAML entry names.

The evidence, all read from the launcher's AST and the kernels it launches:
- annotations (``torch.Tensor``, ``int``, ``float``, ``bool``) and tensor use (``p.shape``, ``p.stride(0)``, ``p.view``);
- ranks: ``a, b = p.shape``, ``B, T, H, K, V = *q.shape, v.shape[-1]``, ``p.shape[i]``, ``p.size(i)``,
  ``p.stride(i)``, ``p.dim() == k``, ``p.dim() >= k``, and a ``*p.stride()`` splat as wide as the kernel parameters
  it fills;
- what the code insists on, in ``assert`` and ``if ...: raise`` guards only (``if n == 0: return`` is a special case,
  not the rule): ``p.shape == (a, b)``, ``p.shape[i] == q.shape[j]``, ``p.shape == q.shape``, ``n == 192``,
  ``n % BLOCK == 0``, ``d in {64, 128}``, ``p.dtype == torch.float32``, ``p.dtype in (torch.int32, ...)``,
  ``not p.dtype.is_floating_point``, ``p.numel() == 1``, ``n is not None``, ``assert flag``; these override a name
  rule's sizes. A scalar parameter with a known value, or a local constant bound once, pins the axes it equals;
- what a parameter handed to a kernel launch becomes there (``kernel_param_kinds``): a pointer the kernel loads
  from or stores to is a tensor, a ``tl.constexpr`` or a plain scalar is a number;
- ``p["BLOCK_SIZE_M"]``: a dict of launch settings, with a plausible value per key read.
Axes that are equal share one dimension; a dimension is named after the variables bound to it (``num_tokens`` ->
tokens, ``nheads`` -> heads...) or, failing that, after its position (first axis tokens, last axis hidden). Names that
say "index" (``*_ids``, ``*_indices``, ``*_loc``, ``seq_lens``...) get integer tensors with valid values.

The reading of the launcher is in ``launcher_facts.py`` and ``launcher_reads.py``, of kernel bodies in ``kernel_use.py``, the name rules in
``names.py``. These are guesses: the extracted baseline must still pass its self-check on them, or the kernel is
reported.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from smithbot.inputs.kernel_use import (arange_bounds, bitwise_params, fp32_params, index_targets, kernel_param_kinds,
                                        required_params, sets_through_helpers, through_helpers)
from smithbot.inputs.launcher_facts import (ARITH, BOOL_NAME, Facts, arithmetic, ceil_div, collect, element, equate,
                                            required_optionals)
from smithbot.inputs.launcher_reads import (arriving_views, axis_indexes, early_outs, none_tested, rebound_apart,
                                            split_views)
from smithbot.inputs.names import (CUMULATIVE, FLOAT_NAME, INDEX_NAME, PER_EXPERT, SCALAR_INTS, SIZE_NAME, ann_kind,
                                   dim_of_name, setting)


def infer(fn: ast.FunctionDef, unknown: list[str], known: dict[str, Any], by_rule: tuple[str, ...] = (),
          kernels: tuple[ast.FunctionDef, ...] = ()) -> dict[str, Any]:
    """Specs for the ``unknown`` parameters of launcher ``fn`` (a subset may stay unknown: they are left out), and
    for those of ``by_rule`` (specs a name rule gave) whose rank the code contradicts: ``hidden_states`` is 2-D by its
    name, but ``assert hidden_states.dim() == 3`` says otherwise, and the code wins. ``kernels`` are the
    ``@triton.jit`` functions it may launch."""
    return _Inference(fn, unknown, known, by_rule, kernels).specs()


class _Inference:
    """One ``infer`` call: the launcher's facts read, the parameters a spec was given but the code contradicts
    reopened, the axes' ranks and equalities settled (``_settle``), then sizes (``dim``, ``scalar_int``) and a spec
    per parameter (``specs``)."""

    def __init__(self, fn: ast.FunctionDef, unknown: list[str], known: dict[str, Any], by_rule: tuple[str, ...],
                 kernels: tuple[ast.FunctionDef, ...]) -> None:
        self.fn, self.by_rule = fn, by_rule
        args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        self.params = {a.arg for a in args}
        self.ann = {a.arg: ann_kind(a.annotation) for a in args}
        self.ann_text = {a.arg: ast.unparse(a.annotation) for a in args if a.annotation is not None}
        kinds = through_helpers({k.name: kernel_param_kinds(k) for k in kernels}, kernels)  # index_targets needs them
        fp32 = sets_through_helpers({k.name: fp32_params(k) for k in kernels}, kernels)
        ints = sets_through_helpers({k.name: bitwise_params(k) for k in kernels}, kernels)
        self.per_kernel = {k.name: (kinds[k.name], required_params(k), arange_bounds(k),
                                    index_targets(k, kinds[k.name]), fp32[k.name], ints[k.name])
                           for k in kernels}
        self.known, self.unknown = known, unknown  # as given, while the facts are read
        facts, arrives = self._read()
        self.facts = facts
        self.known, self.unknown = dict(known), list(unknown)
        self._reopen(arrives, {k.name: k for k in kernels})
        self._settle()

    def _facts_of(self, code: ast.FunctionDef) -> Facts:
        f = Facts(self.params, self.per_kernel)
        f.values = {p: v for p, v in self.known.items() if v is None or isinstance(v, bool)}
        f.values.update({p: False for p in self.unknown if self.ann.get(p) == "bool" or re.match(BOOL_NAME, p.lower())})
        collect(code, f)
        return f

    def _read(self) -> tuple[Facts, Facts]:
        """The launcher's facts, and those of the parameters as they arrive (before the launcher rebinds them)."""
        fn = self.fn
        # `x = x.view(x.shape[0], x.shape[1], groups, group_dim)`: x arrives with three axes, not the view's four
        split = {x: v for x, v in split_views(fn, self.params).items() if x in self.unknown}
        facts = self._facts_of(arriving_views(fn, split) if split else fn)
        if any(facts.rank.get(x, 0) > kept + 1 for x, (kept, _, _) in split.items()):  # read past the split axis
            split = {x: v for x, v in split.items() if facts.rank.get(x, 0) <= v[0] + 1}
            facts = self._facts_of(arriving_views(fn, split) if split else fn)
        same_split: dict[tuple[int, str], str] = {}  # two views split by the same sizes split axes of one size
        for x, (kept, rest, _) in split.items():
            facts.rank[x] = kept + 1
            facts.exact.add(x)
            key = (kept, ", ".join(ast.unparse(r) for r in rest))
            facts.union(("ax", x, kept), ("ax", same_split.setdefault(key, x), kept))
        # whether the code contradicts a name rule's rank is read before the parameter is rebound: after
        # `hidden_states = _unsqueeze_to_3d(hidden_states)`, `hidden_states.size(1)` is the new value's
        arrives = self._facts_of(rebound_apart(fn, self.params)) if self.by_rule else facts
        return facts, arrives

    def _reopen(self, arrives: Facts, by_name: dict[str, ast.FunctionDef]) -> None:
        """Parameters given a spec that the code contradicts become unknown again; the ranks of the others stand."""
        facts, known, unknown, fn = self.facts, self.known, self.unknown, self.fn
        # `seg_indptr=None` by default, but handed to a kernel that reads through it and never asks whether it is
        # None (nor does the launcher): the default is no input to run on, so it is inferred like any tensor
        for p in [p for p, v in known.items() if v is None and facts.kernel_kind.get(p) in ("pointer", "index")]:
            if not none_tested(fn, {p}) and all(k in by_name and not none_tested(by_name[k], {kp})
                                                  for k, kp in facts.handed.get(p, [("?", "?")])):
                del known[p]
                unknown.append(p)
        for p in self.by_rule:
            shape = known[p].get("shape") if isinstance(known.get(p), dict) else None
            if isinstance(shape, list) and (p in arrives.rank and (
                    (p in arrives.exact and arrives.rank[p] != len(shape)) or arrives.rank[p] > len(shape))
                    or (p in facts.sizes or facts.kernel_kind.get(p) in ("scalar", "constexpr"))
                    and p not in facts.tensor):  # `k` is a key tensor by name, a count by use; `temperature` a number
                del known[p]
                unknown.append(p)
            elif isinstance(shape, list):
                facts.rank[p] = len(shape)  # the rule's rank stands; `x.shape[-1]` is its last axis
        for p, spec in known.items():  # a given spec's rank stands too (`y.shape == x.shape` with x given)
            if p not in self.by_rule and isinstance(spec, dict) and isinstance(spec.get("shape"), list):
                facts.rank[p] = len(spec["shape"])

    def _settle(self) -> None:
        """Ranks and axis classes settled; what pins a class (a spec, a literal, a bound, a multiple, a power of
        two, a derivation, the rows an index table addresses)."""
        facts, known, by_rule = self.facts, self.known, self.by_rule
        # p.shape == q.shape: one rank, and axis by axis the same dims
        groups: dict[Any, list[str]] = {}
        for key in list(facts.parent):
            if key[0] == "same":
                groups.setdefault(facts.find(key), []).append(key[1])
        for members in groups.values():
            r = max(facts.rank.get(p, 0) for p in members)
            for p in members:
                facts.rank[p] = r
                for i in range(r):
                    facts.union(("ax", p, i), ("ax", members[0], i))
        # x.shape[0] (a batch) and x.shape[-1] (experts), never said to be equal: two axes, not one
        for key in list(facts.parent):
            if key[0] == "neg" and facts.rank.get(key[1], 0) < key[2] + 1:
                for other in [k for k in list(facts.parent) if k[0] == "ax" and k[1] == key[1]]:
                    if facts.find(other) != facts.find(key) and key[1] not in facts.exact:
                        facts.at_least(key[1], other[2] + 1 + key[2])
        # negative axes, now that ranks are known
        for key in list(facts.parent):
            if key[0] == "neg" and facts.rank.get(key[1]):
                facts.union(key, ("ax", key[1], facts.rank[key[1]] - key[2]))
        # A known spec pins its axes: x -> [tokens, hidden] makes x.shape[1] "hidden".
        # The first spec to pin a class wins, and a given spec before a name rule's: with `assert heads == kv_heads`,
        # q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim] (both by name) share q's heads.
        pinned: dict[Any, Any] = {}
        for p, spec in sorted(known.items(), key=lambda item: item[0] in by_rule):
            if isinstance(spec, dict) and isinstance(spec.get("shape"), list):
                for i, d in enumerate(spec["shape"]):
                    pinned.setdefault(facts.find(("ax", p, i)), d)
            elif isinstance(spec, int) and not isinstance(spec, bool) and spec > 0 or isinstance(spec, str) \
                    and not spec.startswith(("dtype:", "tldtype:", "default:")):
                pinned[facts.find(("name", p))] = spec  # d_v=512 and `assert q.shape[-1] == d_v`
        # n % BLOCK == 0 with BLOCK a number: n rounds down to a multiple of it, and is at least BLOCK (a smaller size
        # is less likely to overrun a buffer whose relation to n only the kernel knows); otherwise n = BLOCK
        multiples = []
        for a, b in facts.multiples:
            key = facts.axis(b)
            m = facts._int(b) or (key is not None and next(
                (k[1] for k in list(facts.parent) if k[0] == "lit" and facts.find(k) == facts.find(key)), None))
            if m and facts.axis(a) is not None:
                multiples.append((facts.axis(a), m))
            else:
                equate(facts, a, b)
        self.classes: dict[Any, list[Any]] = {}
        for key in list(facts.parent):
            self.classes.setdefault(facts.find(key), []).append(key)
        self.multiple = {facts.find(key): m for key, m in multiples}
        self.pinned: dict[Any, Any] = {}  # `n % groups == 0` joined groups to n's class: what pinned n pins it still
        for key, d in pinned.items():
            self.pinned.setdefault(facts.find(key), d)
        self.pow2 = {facts.find(key) for key in facts.pow2}
        for key, node in list(facts.derived.items()):  # BLOCK_F = q.size(-1) // 2 goes to tl.arange: so must q's axis
            halved = isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mult))
            scale = facts._int(node.right) if halved else None  # type: ignore[attr-defined]
            axis = facts.axis(node.left) if halved else None  # type: ignore[attr-defined]
            if axis is not None and axis[0] == "neg" and facts.rank.get(axis[1]):  # q.size(-1): q's last axis
                axis = ("ax", axis[1], facts.rank[axis[1]] - axis[2])
            if facts.find(key) in self.pow2 and scale and scale & (scale - 1) == 0 and axis is not None:
                self.pow2.add(facts.find(axis))
        # K <= 256: at most the bound, a power of two, and no more than 128
        self.most = {facts.find(key): 1 << (min(bound, 128).bit_length() - 1) for key, bound in facts.upper
                     if bound >= 1}
        self.addressed: dict[str, str] = {}  # expert_ids (randint:0:experts) addresses B's rows: B has `experts` rows
        for p in by_rule:
            init = str(known[p].get("init", "")) if isinstance(known.get(p), dict) else ""
            for q in sorted(facts.addressed.get(p, ())) if re.match(r"(perm|randint:0):", init) else ():
                if q in self.unknown:
                    self.addressed.setdefault(q, init.split(":")[-1])
        self.derived: dict[Any, ast.expr] = {}
        for key, node in facts.derived.items():
            self.derived.setdefault(facts.find(key), node)

    # sizes

    def class_literal(self, key: Any) -> int | None:
        return next((m[1] for m in self.classes.get(self.facts.find(key), []) if m[0] == "lit"), None)

    def literal(self, p: str, i: int) -> int | None:
        return self.class_literal(("ax", p, i))

    def dim(self, p: str, i: int, rank: int, seen: frozenset = frozenset()) -> Any:
        return self.adjusted(p, i, self._dim(p, i, rank, seen))

    def adjusted(self, p: str, i: int, d: Any) -> Any:
        """Size ``d`` of axis i of p, as the code insists: a literal, at most a bound, a multiple, a power of two."""
        if self.literal(p, i) is not None:
            return self.literal(p, i)
        root = self.facts.find(("ax", p, i))
        if root in self.most and not isinstance(d, int):
            d = self.most[root]
        d = _multiple_of(d, self.multiple[root]) if root in self.multiple else d
        return _pow2(d) if root in self.pow2 else d

    def _dim(self, p: str, i: int, rank: int, seen: frozenset) -> Any:
        facts = self.facts
        root = facts.find(("ax", p, i))
        if self.literal(p, i) is not None:  # the code insists: `assert x.shape[-1] == 128`
            return self.literal(p, i)
        if root in self.pinned:
            return self.pinned[root]
        if i == 0 and p in self.addressed:  # as many rows as a name rule's index table addresses
            return self.addressed[p]
        if root in self.derived and root not in seen:  # assert z.shape[0] == K // group_size
            d = self.value_of(self.derived[root], seen | {root})
            if d is not None:
                return d
        members = self.classes.get(root, [])
        for m in members:
            if m[0] == "name" and dim_of_name(m[1]):
                return dim_of_name(m[1])
        if i == 0 and PER_EXPERT.search(p.lower()):  # ExpStart, expert_start_loc, tokens_per_expert: a row each
            return "experts"
        # axes the code equates get one size, by the position of the one in the widest tensor: 1-D `sin` with
        # `x.size(-1) == sin.size(-1)` and x [tokens, heads, head] is [hidden], not [tokens]
        widest = max((m for m in members if m[0] == "ax" and facts.rank.get(m[1])),
                     key=lambda m: (facts.rank[m[1]], m[1] == p), default=("ax", p, i))
        i, rank = widest[2], facts.rank.get(widest[1]) or rank
        if rank == 1 or i == 0:
            return "tokens"
        if i == rank - 1:
            return "hidden"
        return "heads"

    def value_of(self, node: ast.expr, seen: frozenset) -> Any:
        """The size ``node`` computes, as a number or a harness expression; None where a part has no size."""
        facts = self.facts
        if facts._int(node) is not None:
            return facts._int(node)
        if isinstance(node, ast.BinOp) and type(node.op) in ARITH:
            a, b = self.value_of(node.left, seen), self.value_of(node.right, seen)
            if a is None or b is None or b == 0 and isinstance(node.op, ast.FloorDiv):
                return None
            if isinstance(a, int) and isinstance(b, int):
                return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}.get(type(node.op)) if not isinstance(
                    node.op, ast.FloorDiv) else a // b
            return f"({a}) {ARITH[type(node.op)]} ({b})"
        if ceil_div(node) is not None:  # triton.cdiv(K, block_k)
            a, b = (self.value_of(x, seen) for x in ceil_div(node))  # type: ignore[union-attr]
            if a is None or not b:
                return None
            return -(-a // b) if isinstance(a, int) and isinstance(b, int) else f"(({a}) + ({b}) - 1) // ({b})"
        if element(node) is not None:  # block_size[1] of a list of sizes
            p, i = element(node)  # type: ignore[misc]
            spec = self._ints(p) if p in self.params and self.kind_of(p) == "ints" else None
            return spec["literal"][i] if spec and i < len(spec["literal"]) else None
        if arithmetic(node):  # p.numel(): the product of its dims
            p = facts.alias.get(getattr(node.func.value, "id", ""), "")  # type: ignore[attr-defined]
            p = p or getattr(node.func.value, "id", "")  # type: ignore[attr-defined]
            r = facts.rank.get(p)
            return " * ".join(f"({self.dim(p, i, r, seen)})" for i in range(r)) if p in self.params and r else None
        key = facts.axis(node)
        if key is not None and key[0] == "neg" and facts.rank.get(key[1]):  # x.size(-1): x's last axis
            key = ("ax", key[1], facts.rank[key[1]] - key[2])
        root = facts.find(key) if key is not None else None
        if root is None or root in seen:
            return None
        members = self.classes.get(root, [key])
        ax = next((m for m in members if m[0] == "ax"), None)
        if ax is not None:
            return self.dim(ax[1], ax[2], facts.rank.get(ax[1]) or ax[2] + 1, seen | {root})
        if self.class_literal(root) is not None:
            return self.class_literal(root)
        if root in self.pinned:
            return self.pinned[root]
        p = next((m[1] for m in members if m[0] == "name" and m[1] in self.params), None)
        if p is None and root in self.derived:  # block_k = block_size[1], a local bound once
            return self.value_of(self.derived[root], seen | {root})
        return self.scalar_int(p, seen | {root}) if p is not None else None

    def kind_of(self, p: str) -> str | None:
        return self.ann.get(p) or {"bool": "bool", "int": "int", "float": "float"}.get(self.facts.isa.get(p, ""))

    def scalar_int(self, p: str, seen: frozenset) -> Any:
        """An integer parameter's value: what the code insists on, the axis or expression it equals, else a
        plausible size for its name; None when nothing says it is an integer."""
        facts = self.facts
        root = facts.find(("name", p))
        members = self.classes.get(root, [])
        lits = [m[1] for m in members if m[0] == "lit"]
        if lits:  # assert num_experts == 192
            return lits[0]
        axes = [m for m in members if m[0] == "ax" and m[1] != p]
        if axes:
            q, i = axes[0][1], axes[0][2]
            return self.dim(q, i, facts.rank.get(q) or 1, seen)
        value = self.value_of(self.derived[root], seen | {root}) if root in self.derived and root not in seen else None
        # by its name, or by the end of it (`batch_info_num_segments`: an object's attribute, renamed)
        tails = [p.split("_", i)[-1] for i in range(p.count("_") + 1)] if value is None else []
        for tail in (t for t in tails if t):
            value = next((v for pattern, v in SCALAR_INTS if re.search(pattern, tail.lower())), dim_of_name(tail))
            if value is not None:
                break
        if value is None and (self.kind_of(p) == "int" or facts.kernel_kind.get(p) in ("scalar", "constexpr")):
            # a number with nothing more to go on: a power of two for a size (tl.arange needs one), else 0
            value = 64 if facts.kernel_kind.get(p) == "constexpr" or re.search(SIZE_NAME, p.lower()) else 0
        if value is not None and root in self.multiple:  # assert page_size % 128 == 0
            value = _multiple_of(value, self.multiple[root])
        if value is not None and root in self.pow2:
            value = _pow2(value)
        return value

    def rows(self, p: str) -> Any:
        """The rows of the tensor that the values of index table ``p`` address, if the kernel says which."""
        q = self.facts.index_into.get(p, (None,))[0]
        if q is None:
            return None
        shape = self.known[q].get("shape") if isinstance(self.known.get(q), dict) else None
        return shape[0] if isinstance(shape, list) and shape else self.dim(q, 0, self.facts.rank.get(q) or 1)

    # specs

    def specs(self) -> dict[str, Any]:
        """The specs: a name rule's with the sizes the code insists on, then one per unknown parameter, then what
        relates them (one dtype, a scale per row)."""
        out = self._by_rule()
        facts, known, unknown = self.facts, self.known, self.unknown
        nones = required_optionals(self.fn, ast.Is, facts.values) - required_optionals(self.fn, ast.IsNot, facts.values)
        for p in unknown:
            kind = self.kind_of(p)
            if p in nones:  # `assert A_scale is None` on the path the cases take (no quantization)
                out[p] = None
                continue
            spec = (self._ints(p) if kind == "ints" else None) or (
                self._tensor(p, kind) if self._is_tensor(p, kind) else self._other(p, kind))
            if spec is not ...:
                out[p] = spec
        for _ in facts.same_dtype:  # q.dtype == k.dtype == v.dtype: one dtype that is not the cases' own spreads
            for pair in facts.same_dtype:
                held = [out[p] for p in pair if isinstance(out.get(p), dict) and "shape" in out[p]]
                other = next((h["dtype"] for h in held if h.get("dtype", "bf16") != "bf16"), None)
                for h in held if other is not None and len(held) == 2 else ():
                    h["dtype"] = other
        for p in unknown:  # B_scale of B [experts, n, k]: a scale per row of its last axis, [experts, n]
            m = re.match(r"^(.+?)_?(scales?|s)$", p)
            base = known.get(m.group(1)) if m else None
            base = out.get(m.group(1), base) if m else None
            shape = base.get("shape") if isinstance(base, dict) else None
            if isinstance(out.get(p), dict) and "init" not in out[p] and p not in facts.exact \
                    and isinstance(shape, list) and len(shape) >= 2 and facts.rank.get(p, 0) <= len(shape) - 1:
                out[p]["shape"] = shape[:-1]
        for p in (p for p in unknown if p not in out):  # `sorted_ = permutation is not None`: the launcher takes None
            if any(isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], (ast.Is, ast.IsNot))
                   and isinstance(n.left, ast.Name) and n.left.id == p and isinstance(n.comparators[0], ast.Constant)
                   and n.comparators[0].value is None for n in ast.walk(self.fn)):
                out[p] = None
        return out

    def _by_rule(self) -> dict[str, Any]:
        """A name rule's specs with the sizes the code insists on, where they differ."""
        out: dict[str, Any] = {}
        known = self.known
        for p in self.by_rule:
            if p not in self.unknown and isinstance(known.get(p), dict) and isinstance(known[p].get("shape"), list):
                shape = known[p]["shape"]
                fixed = {**known[p], "shape": [self.adjusted(p, i, self.pinned.get(self.facts.find(("ax", p, i)), d))
                                               for i, d in enumerate(shape)]}
                init = str(known[p].get("init", ""))
                if init.startswith("randint:0:") and self.rows(p) is not None:  # and values its kernel can address
                    fixed["init"] = f"randint:0:min({init[10:]}, {self.rows(p)})"
                if fixed != known[p]:
                    out[p] = fixed
            elif p not in self.unknown and isinstance(known.get(p), str):  # top_k by its name, but `assert top_k == 8`
                lits = [m[1] for m in self.classes.get(self.facts.find(("name", p)), []) if m[0] == "lit"]
                if lits:
                    out[p] = lits[0]
                elif p in axis_indexes(self.fn):  # dim by its name is a size, but `x.shape[dim]` an axis
                    out[p] = -1
        return out

    def _ints(self, p: str) -> dict[str, Any] | None:
        """A list of sizes (``block_size: list[int]``): as long as the code says (``len(p) == 2``, or the elements it
        reads), each element the size its name gives (``block_size`` -> 64), else 1."""
        n = max([e[1] + 1 for e in map(element, ast.walk(self.fn)) if e is not None and e[0] == p and e[1] >= 0]
                + [c.comparators[0].value for c in ast.walk(self.fn) if isinstance(c, ast.Compare)
                   and ast.unparse(c.left) == f"len({p})" and isinstance(c.ops[0], ast.Eq)
                   and isinstance(c.comparators[0], ast.Constant) and isinstance(c.comparators[0].value, int)],
                default=0)
        size = next((v for pattern, v in SCALAR_INTS if re.search(pattern, p.lower())), None)
        return {"literal": [size if isinstance(size, int) else 1] * n} if n else None

    def _is_tensor(self, p: str, kind: str | None) -> bool:
        """Annotated or used as a tensor, or handed to a kernel under a buffer-like name: a pointer argument."""
        facts = self.facts
        handed = facts.kernel_kind.get(p)
        return kind == "tensor" or p in facts.tensor or kind is None and (handed in ("pointer", "index") or (
            handed is None and p in facts.launched and (
                INDEX_NAME.search(p.lower()) or re.search(r"(_ptr|buf|buffer|cache|^out|output)$", p.lower()))))

    def _tensor(self, p: str, kind: str | None) -> dict[str, Any]:
        """A tensor's spec: its shape, and, for an index, mask or count, its dtype and values."""
        facts = self.facts
        indexes = facts.kernel_kind.get(p) == "index" or bool(INDEX_NAME.search(p.lower()))
        rank = facts.rank.get(p) or (1 if indexes else 2)
        shape = [self.dim(p, i, rank) for i in range(rank)]
        spec: dict[str, Any]
        if indexes and "mask" not in p.lower():
            dtype = "int32" if "int32" in p.lower() else "int64"
            if CUMULATIVE.search(p.lower()):
                if shape == ["tokens"] and re.search(r"^cu_|indptr", p.lower()):
                    shape = ["tokens + 1"]  # one more entry than there are rows: row b is [p[b], p[b + 1])
                spec = {"shape": shape, "dtype": dtype, "init": "arange"}
            elif re.search(r"lens?|lengths?|counts?", p.lower()):
                spec = {"shape": shape, "dtype": dtype, "init": "randint:1:8"}
            else:
                bound = self.rows(p) or "tokens"
                scatter = facts.index_into.get(p, (None, False))[1] and shape == [bound]
                spec = {"shape": shape, "dtype": dtype, "init": f"perm:{bound}" if scatter else
                        f"randint:0:{bound}"}  # a scatter's rows are distinct: no two programs race for one
        elif re.fullmatch(r"mask(ed)?_?m", p.lower()):  # DeepEP's masked layout: the rows each expert holds,
            # at most the rows axis of the [experts, rows, ...] tensors it goes with (`x.shape[0] == len(m)`)
            held = next((self.dim(q, 1, facts.rank[q]) for q in sorted(self.params - {p}) if facts.rank.get(q, 0) >= 3
                         and facts.find(("ax", q, 0)) == facts.find(("ax", p, 0))), "tokens")
            spec = {"shape": shape, "dtype": "int32", "init": f"randint:0:{held} + 1"}
        elif "mask" in p.lower():
            spec = {"shape": shape, "dtype": "bool", "init": "randint:0:2"}
        elif p in early_outs(self.fn):  # `if no_lora_flag_cpu.item(): return`: False, or no kernel runs
            spec = {"shape": shape, "dtype": "bool", "init": "randint:0:1"}
        else:
            spec = {"shape": shape}
        if p in facts.dtype and facts.dtype[p] != "bf16":  # bf16 is what the cases' activation dtype already is
            spec["dtype"] = facts.dtype[p]
        if rank >= 2 and facts.unit_stride.get(p) in (rank - 2, -2) and "init" not in spec:
            spec["transposed"] = True  # assert b.stride(1) == 1 of a 3-D b: its last two axes, column-major
        return spec

    def _other(self, p: str, kind: str | None) -> Any:
        """The spec of a parameter that is no tensor: a settings dict, a dtype, a number or a flag; ``...`` where
        nothing says which."""
        facts = self.facts
        if p in facts.keys and kind in (None, "other"):  # config["BLOCK_SIZE_M"]: settings a tuning table gives
            return {"literal": {k: setting(k) for k in sorted(facts.keys[p])}}
        if kind == "str":  # kv_cache_dtype: str, and `assert kv_cache_dtype == "auto" or ...`
            return {"literal": next((c.value for n in ast.walk(self.fn) if isinstance(n, ast.Compare)
                                     and isinstance(n.left, ast.Name) and n.left.id == p for c in n.comparators
                                     if isinstance(c, ast.Constant) and isinstance(c.value, str)), "")}
        if kind == "dtype" or p.lower().endswith("dtype"):
            spec = "dtype:fp8_e4m3" if re.search("quant|fp8", p.lower()) else "dtype:act"
            # compute_type: tl.dtype
            return "tl" + spec if re.match(r"(tl|triton\.language)\.", self.ann_text.get(p, "")) else spec
        if kind == "float" or p in facts.floaty or re.search(FLOAT_NAME, p.lower()):
            low = p.lower()
            return 1e-6 if re.search(r"(^|_)eps", low) else 0.0 if re.search(r"smoothing|fill", low) else 1.0
        if p in facts.truthy and kind in ("bool", None, "other"):  # assert weight_column_major
            return True
        if kind == "bool" or re.match(BOOL_NAME, p.lower()):
            return False
        if p in axis_indexes(self.fn) and kind in ("int", None):  # x.size(dim), `dim < x.ndim`: the last axis
            return -1
        if kind == "int" or kind is None:
            value = self.scalar_int(p, frozenset())
            if value is not None:
                return value
        return ...


def _multiple_of(d: Any, m: int) -> Any:
    """The largest multiple of ``m`` no larger than ``d`` (a number, or a dim name or expression), and at least m."""
    if isinstance(d, int):
        return max(m, d // m * m)
    return f"max({m}, ({d}) // {m} * {m})"


def _pow2(d: Any) -> Any:
    """The largest power of two no larger than ``d`` (a number, or a dim name or expression)."""
    if isinstance(d, int):
        return 1 << max(d, 1).bit_length() - 1
    return f"pow2({d})"
