"""What a parameter's name and annotation say about its input: the dimension a size is named after, index-like and
cumulative names, floats and sizes by name, default values for scalar names, and torch dtype names. Input inference
(``infer.py``) falls back on these when the code says nothing more."""

from __future__ import annotations

import ast
import re
from typing import Any

# Variable-name rules for one dimension, tried in order (a name is lower-cased, underscores kept).
DIM_NAMES: list[tuple[str, str]] = [
    (r"^(m|t|n_?tokens?|num_?tokens?|tokens?|total_?tokens?|bs|b|batch|batch_?size|num_?seqs?|n_?rows|rows|seq_?len|"
     r"seqlen|l|s|n_?reqs?|num_?reqs?|num_?items)$", "tokens"),
    (r"^(h|nheads?|n_?heads?|num_?heads?|num_?q_?heads|head_?num|hq|num_?attention_?heads)$", "heads"),
    (r"^(hk|hkv|n_?kv_?heads?|num_?kv_?heads?|kv_?heads?)$", "kv_heads"),
    (r"^(d|dk|dv|head_?dim|head_?size|d_?head|headdim|qk_?head_?dim|v_?head_?dim)$", "head_dim"),
    (r"^(e|n_?experts?|num_?experts?|experts?)$", "experts"),
    (r"^(top_?k|k_?top|num_?topk)$", "top_k"),
    (r"^(v|vocab|vocab_?size)$", "vocab"),
    (r"^(i|inter|intermediate|intermediate_?size|ffn_?dim)$", "intermediate"),
    (r"^(n|k|c|hidden|hidden_?size|hidden_?dim|dim|n_?cols|cols|d_?model|width|feat|features)$", "hidden"),
]
INDEX_NAME = re.compile(r"(^|_)(ids?|idx|indices|index|indptr|loc|locs|pos|positions|offsets?|lens?|lengths?|"
                        r"seqlens?|seq_lens?|starts?|ends?|mapping|map|table|slots?|mask|counts?|tokens_per)"
                        r"(_|$|\d)|_to_|[a-z]2[a-z]")  # src2dst
# tables with a row per expert: ExpStart, exp_end, expert_start_loc, expert_offsets, num_tokens_per_expert
PER_EXPERT = re.compile(r"^(exp|experts?)_?(start|end|offsets?|locs?|counts?|ids?|lens?)|per_?expert")
CUMULATIVE = re.compile(r"(cu_|indptr|start_loc|offsets|cumsum)")
FLOAT_NAME = r"(scale|(^|_)eps|factor|temperature|alpha|beta|cap|softcap|smoothing|fill_value|const)$"
SIZE_NAME = r"(len|size|sz|dim|num|window|win|capacity|budget|tokens?|pages|rank_dim|blk)"
SCALAR_INTS: list[tuple[str, Any]] = [
    (r"(page|block|chunk|group|tile)_?size", 64), (r"^(bs|batch_?size|num_?tokens|n_?tokens|num_?seqs)$", "tokens"),
    (r"(hidden_?size|hidden_?dim|^dim$|^n_?cols$)", "hidden"), (r"num_?heads|^nheads$", "heads"),
    (r"head_?(dim|size)", "head_dim"), (r"top_?k", "top_k"), (r"num_?experts", "experts"), (r"^max_", 64),
    (r"(stride|^offset$|^start$)", 0), (r"^(n|m|k|size|length|num|count)$", "tokens"), (r"_size$", 64),
    (r"ratio", 4), (r"^total_", "tokens"), (r"^(num|n)_|_per_", 4), (r"(policy|mode|flags?)$", 0), (r"mult$", 1),
]


def ann_kind(ann: ast.expr | None) -> str | None:
    if ann is None:
        return None
    text = ast.unparse(ann).replace("'", "").replace('"', "")
    if "Tensor" in text:
        return "tensor"
    if "dtype" in text:
        return "dtype"
    if re.fullmatch(r"(Optional\[)?([Ll]ist|[Tt]uple|Sequence)\[int(, \.\.\.|, int)*\]\]?", text):
        return "ints"  # block_size: list[int]
    for kind in ("bool", "int", "float", "str"):
        if re.fullmatch(rf"(Optional\[)?{kind}\]?|{kind} \| None", text):
            return kind
    return "other"


TORCH_DTYPES = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
                "int32": "int32", "int": "int32", "int64": "int64", "long": "int64", "float8_e4m3fn": "fp8_e4m3",
                "int8": "int8", "uint8": "uint8", "bool": "bool"}


def setting(key: str) -> int:
    """A plausible value for one key of a launch-settings dict (``config["BLOCK_SIZE_M"]``)."""
    low = key.lower()
    if low.endswith("num_warps"):  # LightLLM's `stage1_num_warps` too
        return 4
    if low.endswith("num_stages"):
        return 2
    return 64 if "block" in low else 1


def dim_of_name(name: str) -> str | None:
    low = name.lower()
    for pattern, dim in DIM_NAMES:
        if re.match(pattern, low):
            return dim
    return None

# attributes of a tensor itself: a chain that reaches one is the tensor before it
TENSOR_ATTRS = {"shape", "device", "dtype", "ndim", "is_cuda", "T", "mT", "data", "grad", "layout", "itemsize",
                "nbytes"}
