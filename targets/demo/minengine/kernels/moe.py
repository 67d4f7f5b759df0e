"""MoE routing: softmax top-k, then a per-expert token count. The count kernel is launched from layers/moe.py."""

import torch
import triton
import triton.language as tl

from minengine.utils import cached_kernel, is_npu


@cached_kernel
@triton.jit
def topk_softmax_kernel(logits_ptr, w_ptr, ids_ptr, n_experts, TOP_K: tl.constexpr, BLOCK_E: tl.constexpr):
    tok = tl.program_id(0)
    cols = tl.arange(0, BLOCK_E)
    x = tl.load(logits_ptr + tok * n_experts + cols, mask=cols < n_experts, other=-float("inf"))
    p = tl.exp(x - tl.max(x, axis=0))
    p = p / tl.sum(p, axis=0)
    ks = tl.arange(0, TOP_K)
    w = tl.zeros([TOP_K], dtype=tl.float32)
    ids = tl.zeros([TOP_K], dtype=tl.int32)
    for k in tl.static_range(TOP_K):
        best = tl.max(p, axis=0)
        idx = tl.min(tl.where(p == best, cols, BLOCK_E), axis=0)
        w = tl.where(ks == k, best, w)
        ids = tl.where(ks == k, idx, ids)
        p = tl.where(cols == idx, -1.0, p)
    tl.store(w_ptr + tok * TOP_K + ks, w)
    tl.store(ids_ptr + tok * TOP_K + ks, ids)


@triton.jit
def expert_count_kernel(ids_ptr, counts_ptr, n_pairs, BLOCK_N: tl.constexpr):
    e = tl.program_id(0)
    acc = tl.zeros([BLOCK_N], dtype=tl.int32)
    for start in range(0, n_pairs, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        acc += (tl.load(ids_ptr + offs, mask=offs < n_pairs, other=-1) == e).to(tl.int32)
    tl.store(counts_ptr + e, tl.sum(acc, axis=0))


try:
    from sgl_kernel import topk_softmax as _native_topk_softmax
except ImportError:
    _native_topk_softmax = None


def topk_softmax(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, experts = logits.shape
    weights = torch.empty(tokens, top_k, dtype=torch.float32, device=logits.device)
    ids = torch.empty(tokens, top_k, dtype=torch.int32, device=logits.device)
    if is_npu():
        _native_topk_softmax(weights, ids, logits)
    else:
        topk_softmax_kernel[(tokens,)](logits, weights, ids, experts, TOP_K=top_k,
                                       BLOCK_E=triton.next_power_of_2(experts), num_warps=4)
    return weights, ids
