"""Inputs for an extracted task: which tensor or scalar each wrapper parameter gets, and the shape cases.

In order of preference, a parameter's spec comes from:
1. the target YAML's ``inputs: {wrapper: {param: spec}}``;
2. the parameter's name (``x``, ``weight``, ``q``, ``positions``, ``router_logits``...), with model-preset dims;
3. its default value;
4. how the launcher uses it (``infer.py``): annotations, ranks and shape equalities read from its code, and what
   the kernel it is handed to makes of it (a pointer, a number).
Otherwise extraction stops and names the parameter, so that the YAML can say what it is.

A tensor spec is ``{shape: [dims...], dtype: act|fp32|fp16|bf16|int32|int64|int8|uint8|bool|complex64|fp8_e4m3|fp4x2|
e8m0, init: ...}`` (``fp4x2`` and ``e8m0``, MX formats' packed bytes: any byte, or a ``randint`` init's) where dims
are numbers or arithmetic (with ``min``, ``max`` and ``pow2``, the largest power of two not above) over the case's
dims (``tokens``, ``hidden``, ``heads``, ``kv_heads``, ``head_dim``, ``intermediate``, ``moe_intermediate``,
``experts``, ``top_k``, ``vocab`` and any extra ``_dims``), and ``init`` is ``randn`` (the default), ``around1``,
``rand`` (uniform in [0, 1): probabilities), ``randint:LO:HI``, ``perm:N`` (distinct values below N; in a longer
table, N after them), ``arange``, ``arange:STEP`` (0, STEP, 2 STEP...) or ``arange:STEP:FIRST`` (FIRST, FIRST +
STEP...), ``onehot`` (a single 1 in each row, at random), ``even:N`` and ``even_end:N`` (where each entry's share of N
rows, shared out evenly and in order, starts and ends: per-expert ranges of sorted rows), ``split:N`` (the size of
each entry's share), ``cuts:N`` (an offsets table one longer than the shares: 0, where each share starts, N),
``starts:LENS`` (where each sequence starts when the lengths in input LENS, or in a sibling attribute of the same
object, are laid end to end; with one entry more than LENS, the last is the total), ``upto:LENS`` (each entry at most
LENS's: a prefix of each sequence, its cached part), or ``chunks:CU:BT`` (the
(sequence, chunk) pair of each BT-token chunk of the sequences whose offsets are input CU, rows of two: FLA's
``chunk_indices``). ``transposed: true`` hands the tensor over as the transpose of one laid out the other way round (a
weight passed as ``w.t()``). A scalar spec is a number, a bool, or an arithmetic expression over the dims;
``dtype:act`` is the case's dtype and ``dtype:fp8_e4m3`` (or any other dtype name of ``inputs/code.py``'s
``TORCH_NAMES``) that dtype, and
``tldtype:...`` the same as a triton dtype; ``device:`` the case's device; ``regime:decode`` True in the decode
cases and False in the prefill ones (a step's ``is_decoding``); ``default:`` leaves the parameter to the
launcher's own default (``QuantPolicy.NONE``); ``{literal: VALUE}`` is VALUE as it is (a string default such as
``activation="swish"``); ``{object: {attr: spec...}}`` an object carrying those attributes (a module's ``self``, read
for its weights), ``{items: [spec...]}`` a list of them and ``{returns: spec}``, in an object, a method that answers
that value (``cfg.resolved_max_len()``).

Beside the parameters, a wrapper's YAML entry may give ``_dims`` (extra dims, as expressions over the others),
``_interpreter_dims`` (smaller values of some of those, or of the model's dims, for the interpreter's one case, where
a model-sized state or chunk would take minutes), ``_models`` (the presets whose cases it runs), ``_shrink`` (the dim
a case too large for the memory budget halves, instead of a MoE layer's expert count) and ``_kernels:
{kernel: {param: spec...}}``: for a kernel that the launcher picks by its inputs' shapes (decode or prefill, a head
size), the specs that replace these in that kernel's own task. ``_stubs: {helper: value}`` gives runtime helpers
values for this launcher's task alone, over the target's ``stubs`` (a tuning lookup that reads the environment; in a
``_kernels`` entry, the value that picks that kernel).
"""

from __future__ import annotations

import ast
import copy
import re
from typing import Any

from smithbot.config import Target
from smithbot.inputs.infer import infer
from smithbot.inputs.kernel_use import program_rows
from smithbot.inputs.launcher_facts import required_optionals
from smithbot.inputs.names import TENSOR_ATTRS, TORCH_DTYPES
from smithbot.inputs.plan import bind_layouts, fill_sizes
from smithbot.inputs.sizes import InputError
from smithbot.types import InputPlan

_ACT = ["tokens", "hidden"]
NAME_RULES: dict[str, Any] = {
    **{n: {"shape": _ACT} for n in ("x", "hidden_states", "input", "residual", "inp")},
    **{n: {"shape": ["hidden"], "init": "around1"} for n in ("weight", "w", "gamma")},
    **{n: 1e-6 for n in ("eps", "epsilon", "variance_epsilon")},
    "device": "device:",  # the case's device
    # a paged KV cache's request-to-slot table (the paged_kv layout's field of that name): a row per request, a slot
    # per position; the plain inference's guess where the layout does not bind
    "req_to_token": {"shape": ["tokens", 1024], "dtype": "int32", "init": "randint:0:tokens"},
    "src2dst": {"shape": ["tokens * top_k"], "dtype": "int32", "init": "perm:tokens * top_k"},
    **{n: {"shape": ["tokens"], "dtype": "fp32", "init": "around1"} for n in ("temperatures", "temperature")},
    **{n: {"shape": ["tokens", "heads", "head_dim"]} for n in ("q", "query")},
    **{n: {"shape": ["tokens", "kv_heads", "head_dim"]} for n in ("k", "key", "v", "value")},
    **{n: {"shape": ["tokens"], "dtype": "int64", "init": "randint:0:4096"} for n in ("positions", "position_ids")},
    **{n: {"shape": ["tokens", "experts"], "dtype": "fp32"} for n in ("router_logits", "gating_output", "logits")},
    **{n: "top_k" for n in ("top_k", "topk")},
    # the bound a step's token buffers are sized to: the case's tokens fill them
    **{n: "tokens" for n in ("max_num_tokens", "max_num_batched_tokens")},
    **{n: {"shape": ["tokens", "top_k"], "dtype": "int32", "init": "randint:0:experts"}
       for n in ("topk_ids", "topk_idx", "topk_indices", "topk_index")},
    **{n: {"shape": ["tokens", "top_k"], "dtype": "fp32", "init": "around1"} for n in ("topk_weights", "topk_weight")},
    # (a MoE routing's aligned tables, sorted_token_ids, expert_ids, num_tokens_post_padded: the moe_align layout)
}


# an op of a MoE layer (it takes top-k ids): its expert weights, gate and up stacked, then down
_TOPK_IDS = ("topk_ids", "topk_idx", "topk_indices", "topk_index")
MOE_NAME_RULES: dict[str, Any] = {
    **{n: {"shape": ["experts", "2 * moe_intermediate", "hidden"]} for n in ("w1", "w13", "w13_weight", "w1_weight")},
    **{n: {"shape": ["experts", "hidden", "moe_intermediate"]} for n in ("w2", "w2_weight")},
}

# the grouped GEMM of a MoE layer over an aligned routing (vLLM's lineage: sglang's and DLBlas's
# invoke_fused_moe_kernel(A, B, C, ...)): the tokens' activations, every expert's gate-up weights, a row per slot
GROUPED_GEMM_RULES: dict[str, Any] = {
    "A": {"shape": ["tokens", "hidden"]},
    "B": {"shape": ["experts", "2 * moe_intermediate", "hidden"]},
    "C": {"shape": ["tokens", "top_k", "2 * moe_intermediate"]},
}


def attributes_read(fn: ast.FunctionDef, name: str, helpers: dict[str, ast.FunctionDef] | None = None,
                    seen: frozenset[str] = frozenset()) -> list[str] | None:
    """The attributes parameter ``name`` of ``fn`` is read for (``plan.seq_lens``, ``self.weight``), when that is all
    it is used for: never called, assigned to, rebound, or passed on, except positionally to one of ``helpers`` (the
    task's own functions) that in turn only reads attributes of it (``_num_segments(batch_info)``). Otherwise None."""
    attrs: set[str] = set()
    called = {id(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
            if not isinstance(node.ctx, ast.Load) or id(node) in called or node.attr.startswith("__"):
                return None
            attrs.add(node.attr)
    handed = list(_handed(fn, {name}, helpers or {}, seen))
    for helper, param, _ in handed:
        inner = attributes_read(helper, param, helpers, seen | {helper.name}) if param else None
        if inner is None:
            return None
        attrs.update(inner)
    uses = sum(isinstance(n, ast.Name) and n.id == name for n in ast.walk(fn))
    reads = sum(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name
                for n in ast.walk(fn))
    return sorted(attrs) if attrs and uses == reads + len(handed) else None


def _handed(fn: ast.FunctionDef, names: set[str], helpers: dict[str, ast.FunctionDef],
            seen: frozenset[str]) -> list[tuple[ast.FunctionDef, str | None, str]]:
    """(helper, the parameter it takes it as, or None past its parameters, the name) for each of ``names`` that
    ``fn`` hands positionally to one of ``helpers`` (those in ``seen`` are already being followed)."""
    out = []
    for call in ast.walk(fn):
        helper = helpers.get(call.func.id) if isinstance(call, ast.Call) and isinstance(
            call.func, ast.Name) and call.func.id not in seen else None
        params = [a.arg for a in helper.args.posonlyargs + helper.args.args] if helper is not None else []
        for i, a in enumerate(call.args if helper is not None else []):  # type: ignore[attr-defined]
            if isinstance(a, ast.Name) and a.id in names:
                out.append((helper, params[i] if i < len(params) else None, a.id))
    return out


# an object's attributes: {attribute: the parameter that stands for it, or the attributes of an attribute that is
# itself only read for its attributes}
Objects = dict[str, "dict[str, str | Objects]"]


# what a tensor is read for (its own attributes, and the methods a launcher asks of it): a name read for these is a
# tensor, whatever else it is read for
_TENSOR_ATTRIBUTES = TENSOR_ATTRS | {"stride", "size", "numel", "dim", "view", "reshape", "to", "contiguous",
                                     "data_ptr"}


def flatten_objects(fn: ast.FunctionDef, names: list[str], helpers: dict[str, ast.FunctionDef] | None = None,
                    holders: bool = False) -> tuple[ast.FunctionDef, Objects]:
    """``fn`` with each positional parameter of ``names`` that is only read for its attributes (here or in
    ``helpers`` it is handed to) replaced by one per attribute (``plan.seq_lens`` -> ``seq_lens``; ``plan_seq_lens``
    when that name is taken), and, per replaced parameter, {attribute: the parameter that stands for it}. The inputs
    are then inferred for those parameters. An attribute that is in turn only read for its attributes
    (``self.block_table.gpu``) is replaced the same way, one level further down; there an object read for one
    attribute only (``holders``: a buffer that holds a tensor) lends the parameter its own name (``block_table``)."""
    taken = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {
        a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    bindings: dict[str, list[ast.expr]] = {}
    for node in ast.walk(fn):
        for t in node.targets if isinstance(node, ast.Assign) else ():
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    bindings.setdefault(n.id, []).append(node.value if t is n else t)
    # `num_segments = batch_info.num_segments`: the local is the attribute, so the parameter may take its name
    copies = {(vs[0].value.id, k) for k, vs in bindings.items()  # type: ignore[attr-defined]
              if all(isinstance(v, ast.Attribute) and v.attr == k and isinstance(v.value, ast.Name)
                     and v.value.id == vs[0].value.id for v in vs)}  # type: ignore[attr-defined]
    given: set[str] = set()
    objects: dict[str, dict[str, str]] = {}
    positional = {a.arg for a in fn.args.args}
    for name in (n for n in names if n in positional):
        attrs = attributes_read(fn, name, helpers)
        if attrs:
            objects[name] = {}
            for attr in attrs:
                if holders and len(attrs) == 1:
                    flat = name
                elif (name, attr) in copies and attr not in given:
                    flat = attr  # the copy becomes `num_segments = num_segments`
                else:
                    flat = attr if attr not in taken else f"{name}_{attr}"
                    while flat in taken:
                        flat += "_"
                objects[name][attr] = flat
                taken.add(flat)
                given.add(flat)
    if not objects:
        return fn, {}

    class Flatten(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            if isinstance(node.value, ast.Name) and node.value.id in objects:
                return ast.copy_location(ast.Name(objects[node.value.id][node.attr], ast.Load()), node)
            return self.generic_visit(node)

    flat = Flatten().visit(copy.deepcopy(fn))
    # what a helper does with the attributes (`batch_info.seg_lens.max()`: a tensor) is evidence too: its
    # expressions, on the launcher's names, close the body that only inference reads
    flat.body = flat.body + [ast.Expr(Flatten().visit(e)) for e in _helper_reads(fn, set(objects), helpers or {})]
    args = []
    for a in flat.args.args:
        args += [ast.arg(n) for n in objects[a.arg].values()] if a.arg in objects else [a]
    flat.args.args = args  # the objects had no defaults, so the defaults still belong to the last parameters
    if holders:
        return flat, objects
    tensors = {n.value.id for n in ast.walk(flat)  # `plan_q.shape`: a tensor, not an object that holds one
               if isinstance(n, ast.Attribute) and n.attr in _TENSOR_ATTRIBUTES and isinstance(n.value, ast.Name)}
    flat, inner = flatten_objects(flat, [n for attrs in objects.values() for n in attrs.values() if n not in tensors],
                                  helpers, True)
    nested: Objects = {p: {a: inner.get(n, n) for a, n in attrs.items()} for p, attrs in objects.items()}
    return flat, nested


def object_leaves(objects: Objects, prefix: str = "") -> list[tuple[str, str]]:
    """(the attribute's path, ``self.block_table.gpu``, the parameter that stands for it) for each leaf of
    ``objects``."""
    out = []
    for name, attrs in objects.items():
        for attr, leaf in attrs.items():
            path = f"{prefix}{name}.{attr}"
            out += object_leaves({path: leaf}) if isinstance(leaf, dict) else [(path, leaf)]
    return out


def _helper_reads(fn: ast.FunctionDef, objects: set[str], helpers: dict[str, ast.FunctionDef],
                  seen: frozenset[str] = frozenset()) -> list[ast.expr]:
    """The statement-level expressions of the ``helpers`` that ``fn`` hands one of ``objects`` to, with the helper's
    parameter renamed to the object's name (``return batch_info.num_segments or batch_info.bs``)."""
    out: list[ast.expr] = []
    for helper, param, obj in _handed(fn, objects, helpers, seen):
        if param is None:
            continue
        rename = {param: obj}

        class Rename(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.AST:
                return ast.copy_location(ast.Name(rename.get(node.id, node.id), node.ctx), node)

        body = Rename().visit(copy.deepcopy(helper))
        out += [v for st in ast.walk(body) if isinstance(st, ast.stmt) and not isinstance(st, ast.FunctionDef)
                for v in [getattr(st, "value", None), getattr(st, "test", None)] if isinstance(v, ast.expr)]
        out += _helper_reads(body, objects, helpers, seen | {helper.name})
    return out


def flat_entry(wrapper: str, params: list[str], objects: Objects) -> str:
    """Source of ``{wrapper}_flat``: the task's entry when the launcher reads attributes of objects. It takes one
    parameter per attribute and hands the launcher stand-in objects that carry them."""
    classes: list[str] = []

    def build(cls: str, label: str, attrs: dict[str, Any]) -> str:
        sets = "".join(f"        self.{a} = {a}\n" for a in attrs)
        classes.append(f"\n\nclass {cls}:\n"
                       f"    \"\"\"Stands in for the object {wrapper} reads as {label} (smithbot).\"\"\"\n\n"
                       f"    def __init__(self, {', '.join(attrs)}):\n{sets}")
        args = [f"{a}={build(f'{cls}_{a}', f'{label}.{a}', n) if isinstance(n, dict) else n}"
                for a, n in attrs.items()]
        return f"{cls}({', '.join(args)})"

    call = ", ".join(f"{p}={build(f'_{wrapper}_{p}', p, objects[p])}" if p in objects else f"{p}={p}"
                     for p in params)
    flat = [n for p in params for n in ([leaf for _, leaf in object_leaves({p: objects[p]})] if p in objects
                                        else [p])]
    return "".join(classes) + f"\n\ndef {wrapper}_flat({', '.join(flat)}):\n    return {wrapper}({call})\n"


def param_specs(params: list[tuple[str, Any]], wrapper: str, target: Target, fn: ast.FunctionDef,
                kernels: tuple[ast.FunctionDef, ...] = (), traced: dict[str, dict[str, Any]] | None = None
                ) -> tuple[InputPlan, list[str]]:
    """(the input plan: a spec per parameter and the extra dims; the parameters whose spec was inferred from the
    launcher's code). The specs are worked out in the mapping form the target YAML writes, then read into the plan.
    ``params`` holds (name, default or ...) in signature order; ``fn`` is the launcher and ``kernels`` the functions
    of its closure, for the inference. ``traced``: what the engine's code says of a parameter in serving (a glue
    task's inputs, ``traced_specs``): a spec with its shape comes after the YAML's; a dtype, and the last dims where
    only they are known, replace those of the spec the other rules give."""
    traced = traced or {}
    given = dict(target.inputs.get(wrapper, {}))
    for reserved in ("_models", "_shrink", "_interpreter_dims", "_kernels", "_stubs"):
        given.pop(reserved, None)
    layout_sizes = given.pop("_layouts", None) or {}
    extra = dict(given.pop("_dims", {}) or {})
    specs: dict[str, Any] = {}
    unknown = []
    required = required_optionals(fn)
    try:
        layouts = bind_layouts([n for n, _ in params], given, layout_sizes, target.layouts_by_themselves)
    except ValueError as exc:
        raise InputError(f"{wrapper}: {exc}") from None
    divisors = _divisors(fn)
    names = {n for n, _ in params}
    moe = any(n in _TOPK_IDS for n in names)
    grouped = any(s["layout"] == "moe_align" for s in layouts.values())
    for name, default in params:
        if name in layouts:
            specs[name] = layouts[name]
        elif name in given:
            specs[name] = given[name]
        elif "shape" in traced.get(name, {}):
            specs[name] = traced[name]
        elif moe and name in MOE_NAME_RULES:
            specs[name] = MOE_NAME_RULES[name]
        elif grouped and name in GROUPED_GEMM_RULES:
            specs[name] = GROUPED_GEMM_RULES[name]
        elif name in NAME_RULES:
            specs[name] = NAME_RULES[name]
        elif name.endswith("world_size") or name.endswith("rank") and f"{name[:-4]}world_size" in names:
            specs[name] = int(name.endswith("world_size"))  # a task runs on one GPU: a group of 1, and its rank 0
        elif default is not ... and not (default is None and name in required) \
                and not (default == 0 and type(default) is int and name in divisors):
            specs[name] = {"literal": default} if isinstance(default, (tuple, list)) or isinstance(default, str) \
                and not default.startswith(("dtype:", "default:")) else default
        elif not any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(fn)):
            specs[name] = None  # never read (a method's unused `self`): any value will do
        else:
            unknown.append(name)
    inferred = infer(fn, unknown, specs, tuple(n for n in specs if n in NAME_RULES and n not in given), kernels)
    for name in unknown:
        if name not in inferred and "value" not in traced.get(name, {}):
            raise InputError(f"cannot infer an input for parameter {name!r} of {wrapper}; describe it under "
                             f"inputs: {wrapper}: {name}: in the target YAML", name)
    specs = copy.deepcopy({name: inferred[name] if name in inferred else specs.get(name) for name, _ in params})
    for name, t in traced.items():
        # the constant serving makes of a scalar, over a guess of the rules or inference: not over the YAML's word,
        # a tensor, or a model dim the cases vary (``experts``: the irregular cases' tensors have 16), unless no size
        # can be that constant (``dim=-1``, an axis, guessed to be ``hidden`` by its name)
        sized = isinstance(specs.get(name), str) and not (isinstance(t.get("value"), int) and t["value"] < 0)
        if "value" in t and name in specs and name not in given and name not in layouts \
                and not isinstance(specs[name], dict) and not sized:
            specs[name] = {"literal": t["value"]} if isinstance(t["value"], (str, tuple, list)) else t["value"]
            if name in inferred:
                del inferred[name]
    for name, t in traced.items():
        spec = specs.get(name)
        if name not in given and isinstance(spec, dict) and "shape" in spec and ("dtype" in t or "tail" in t):
            if "dtype" in t:
                spec["dtype"] = t["dtype"]
            if len(t.get("tail", ())) < len(spec["shape"]):
                spec["shape"] = spec["shape"][:len(spec["shape"]) - len(t.get("tail", ()))] + t.get("tail", [])
    try:
        fill_sizes(specs)
        _one_layout(specs, set(inferred), _per_program(fn, kernels), _cumsummed(fn), _differences(fn))
        return InputPlan.read(specs, extra), list(inferred)
    except ValueError as exc:  # a layout the specs name wrongly, or a spec outside the language (SpecError)
        raise InputError(f"{wrapper}: {exc}") from None


def traced_specs(origins: dict[str, str], traced: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Specs for a glue task's parameters from what the call graph traced of the values they stand for
    (``origins``: parameter -> the engine's expression; ``traced``: expression -> ``{dtype, shape}``): the dtype, and
    the shape where every dim is decided, or its last dims (``tail``) where only the leading ones are not (a linear
    layer's output). The dims are the traced preset's numbers, not named after a model dim: a size that equals one
    (8 experts, 8 kv heads) is not known to be it. A vector whose length is not decided is the step's: an entry
    per token of the case (per request in decode, as a batch's sequence lengths are)."""
    out: dict[str, dict[str, Any]] = {}
    for param, origin in origins.items():
        t = traced.get(origin) or {}
        dtype = TORCH_DTYPES.get(t.get("dtype") or "")
        shape = t.get("shape") or []
        tail = shape[1:] if shape[:1] == ["..."] else None  # the last dims, after leading ones not known
        got: dict[str, Any] = {"dtype": dtype} if dtype else {}
        if shape and None not in shape and tail is None and dtype:
            got["shape"] = list(shape)
        elif shape == [None] and dtype:
            got["shape"] = ["tokens"]
        elif tail and None not in tail:
            got["tail"] = list(tail)  # (a linear layer's output: its width, whatever the model's dtype)
        if got:
            out[param] = got
    return out


def traced_values(origins: dict[str, str], presets: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """``{param: {"value": v}}`` for a glue task's parameters that every preset's serving makes the same constant
    (``presets``: each preset's traced inputs, expression -> ``{value}``, a literal's source). One that differs
    between presets (a router's top-k: 8 for Qwen3-MoE, 2 for Mixtral) is left to the model dims the cases vary."""
    out: dict[str, dict[str, Any]] = {}
    for param, origin in origins.items():
        values = {(p.get(origin) or {}).get("value") for p in presets}
        if len(values) == 1 and None not in values:
            out[param] = {"value": ast.literal_eval(values.pop())}
    return out


def _divisors(fn: ast.FunctionDef) -> set[str]:
    """Names the launcher divides by on every path (``assert n % num_groups == 0``, ``x // group_size`` in its
    own body, not under a branch): a default of 0 there (``num_groups: int = 0``, a value callers always pass)
    would divide by zero, so such a parameter is inferred like one without a default."""
    out: set[str] = set()
    for stmt in fn.body:
        if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef)):
            continue
        for n in ast.walk(stmt):
            if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mod, ast.FloorDiv, ast.Div)) \
                    and isinstance(n.right, ast.Name):
                out.add(n.right.id)
    return out


_STEM = re.compile(r"(start_?locs?|cu_?seq_?lens?|seq_?lens?|seqlens?|lens?|lengths?|starts?|indptr)")


def _stem(name: str) -> str:
    """What says which sequences a table is about: ``q`` of ``q_start_loc`` and ``q_seqlens``, ``k`` of
    ``cu_seqlens_k`` and ``k_lens``."""
    return _STEM.sub("", name.lower()).replace("_", "")


def _per_program(fn: ast.FunctionDef, kernels: tuple[ast.FunctionDef, ...]) -> list[set[str]]:
    """Launcher parameters that a kernel it launches reads one element of per program along the same grid axis
    (``kernel_use.program_rows``): each set's tables are as long as one another."""
    by_name = {k.name: k for k in kernels}
    groups: list[set[str]] = []
    for call in ast.walk(fn):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript)
                and isinstance(call.func.value, ast.Name) and call.func.value.id in by_name):
            continue
        kernel = by_name[call.func.value.id]
        names = [a.arg for a in kernel.args.args]
        handed: dict[str, str] = {}
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Starred):
                break
            if isinstance(a, ast.Name) and i < len(names):
                handed[names[i]] = a.id
        handed.update({k.arg: k.value.id for k in call.keywords if k.arg and isinstance(k.value, ast.Name)})
        axes: dict[int, set[str]] = {}
        for kp, axis in program_rows(kernel).items():
            if kp in handed:
                axes.setdefault(axis, set()).add(handed[kp])
        groups.extend(g for g in axes.values() if len(g) > 1)
    return groups


def _param_names(fn: ast.FunctionDef) -> set[str]:
    return {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}


def _cumsummed(fn: ast.FunctionDef) -> set[str]:
    """Parameters whose values the launcher itself adds up into offsets (``torch.cumsum(seq_lens, 0)``, also through
    a local made from them: ``q_lens = seq_lens - ready_lens``): lengths of sequences laid end to end."""
    params = _param_names(fn)
    made: dict[str, set[str]] = {}  # local -> the parameters its value is made from
    for _ in range(3):  # locals made from locals, in any order
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and node.targets[0].id not in params:
                names = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
                made.setdefault(node.targets[0].id, set()).update(
                    *(made.get(n, set()) for n in names), names & params)
    out: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cumsum":
            arg = node.args[0] if ast.unparse(node.func) == "torch.cumsum" and node.args else node.func.value
            if isinstance(arg, ast.Name):
                out |= {arg.id} & params | made.get(arg.id, set())
    return out


def _differences(fn: ast.FunctionDef) -> list[tuple[str, str]]:
    """Pairs of parameters the launcher subtracts one from the other (``q_lens = seq_lens - ready_lens``): (whole,
    part)."""
    params = _param_names(fn)
    return [(n.left.id, n.right.id) for n in ast.walk(fn) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub)
            and isinstance(n.left, ast.Name) and isinstance(n.right, ast.Name) and n.left.id in params
            and n.right.id in params and n.left.id != n.right.id]


_SEQUENCES = "max(1, (tokens) // 8)"  # a case's sequences where lengths lay them over its rows: 8 rows each


def _one_layout(specs: dict[str, Any], inferred: set[str], per_program: list[set[str]] | None = None,
                cumsummed: set[str] = frozenset(),  # type: ignore[assignment]
                differences: list[tuple[str, str]] | None = None) -> None:
    """Start offsets and lengths of the same sequences (``q_start_loc`` and ``q_seqlens``), inferred apart as
    ``arange`` and ``randint:1:8``, become one layout: a sequence per 8 rows (at least one), each 1 to
    rows/sequences long, each starting where the one before ends, so that no sequence runs past the rows; an inferred
    batch size (``bs``) counts those sequences. Lengths with no starts beside them that the launcher adds up into
    offsets itself (``cumsummed``) lay their sequences end to end over the rows the same way, and so do lengths the
    launcher subtracts others from (``seq_lens - ready_lens``, ``differences``: the new part of each sequence): the
    lengths subtracted are each at most the other's, a prefix of the sequence. A layout's request table beside such
    lengths (``req_pool_indices``) has as many rows as they have sequences."""
    lens = [n for n in inferred if isinstance(specs[n], dict) and specs[n].get("init") == "randint:1:8"
            and len(specs[n].get("shape", ())) == 1 and "len" in n.lower()]
    for start in sorted(inferred):
        spec = specs[start]
        if not (isinstance(spec, dict) and spec.get("init") == "arange" and len(spec.get("shape", ())) == 1
                and re.search(r"start|^cu_|indptr", start.lower())):
            continue
        same = [n for n in lens if _stem(n) == _stem(start)]
        if len(same) != 1:  # cu_q_seqlens and kv_seqlens describe different sequences
            continue
        partner = same[0]
        batch = _SEQUENCES
        specs[partner] = {**specs[partner], "shape": [batch], "init": f"randint:1:(tokens) // ({batch}) + 1"}
        cu = str(spec["shape"][0]).endswith("+ 1")
        specs[start] = {**spec, "shape": [f"{batch} + 1" if cu else batch], "init": f"starts:{partner}"}
        for group in per_program or ():  # tables a kernel reads one element of per sequence (the request
            if partner in group or start in group:  # index of each: `tl.load(B_req_idx + cur_batch)`) are as many
                for n in sorted(group & inferred - {partner, start}):
                    if isinstance(specs[n], dict) and specs[n].get("shape") == ["tokens"]:
                        specs[n] = {**specs[n], "shape": [batch]}
        for n in inferred:  # the batch size the launcher is also handed counts the same sequences
            if re.fullmatch(r"bs|batch(_size)?|num_(seqs|reqs|requests|segments)", n.lower()) and specs[n] == "tokens":
                specs[n] = batch
        lens.remove(partner)
    parts = [(a, b) for a, b in differences or () if a in lens and b in lens
             and specs[a].get("shape") == specs[b].get("shape") == ["tokens"]]
    for n in sorted(set(lens) & (cumsummed | {a for a, _ in parts})):  # torch.cumsum(seq_lens): offsets into rows
        batch = _SEQUENCES  # that must hold them all
        if specs[n].get("shape") == ["tokens"]:
            specs[n] = {**specs[n], "shape": [batch], "init": f"randint:1:(tokens) // ({batch}) + 1"}
    for a, b in parts:  # seq_lens - ready_lens: what is ready is part of the sequence
        specs[b] = {**specs[b], "shape": specs[a]["shape"], "init": f"upto:{a}"}
    if any(isinstance(s, dict) and s.get("shape") == [_SEQUENCES] for s in specs.values()):
        for spec in specs.values():  # a layout's request table beside those lengths has a row per sequence too
            if isinstance(spec, dict) and (spec.get("sizes") or {}).get("batch") == "tokens":
                spec["sizes"] = {**spec["sizes"], "batch": _SEQUENCES}
