"""Split-KV decode attention: stage 1 computes partial softmax-weighted sums per KV split, stage 2 merges them."""

import torch
import triton
import triton.language as tl

from minengine.kernels.utils import softcap
from minengine.utils import get_device_core_count, is_hip


@triton.jit
def _decode_stage1(q_ptr, k_ptr, v_ptr, lens_ptr, part_o_ptr, part_lse_ptr, scale, cap, max_len,
                   HEAD_DIM: tl.constexpr, SPLITS: tl.constexpr, BLOCK_N: tl.constexpr, USE_CAP: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.program_id(2)
    n = tl.load(lens_ptr + b)
    per_split = tl.cdiv(n, SPLITS)
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (b * tl.num_programs(1) + h) * HEAD_DIM + d).to(tl.float32)
    m = -float("inf")
    l = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for start in range(s * per_split, tl.minimum((s + 1) * per_split, n), BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < tl.minimum((s + 1) * per_split, n)
        kv = ((b * max_len + offs) * tl.num_programs(1) + h)[:, None] * HEAD_DIM + d[None, :]
        k = tl.load(k_ptr + kv, mask=mask[:, None], other=0.0).to(tl.float32)
        logits = tl.sum(k * q[None, :], axis=1) * scale
        if USE_CAP:
            logits = softcap(logits, cap)
        logits = tl.where(mask, logits, -float("inf"))
        m_new = tl.maximum(m, tl.max(logits, axis=0))
        p = tl.exp(logits - m_new)
        alpha = tl.exp(m - m_new)
        v = tl.load(v_ptr + kv, mask=mask[:, None], other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l = l * alpha + tl.sum(p, axis=0)
        m = m_new
    out = (b * tl.num_programs(1) + h) * SPLITS + s
    tl.store(part_o_ptr + out * HEAD_DIM + d, acc / l)
    tl.store(part_lse_ptr + out, m + tl.log(l))


@triton.jit
def _decode_stage2(part_o_ptr, part_lse_ptr, out_ptr, HEAD_DIM: tl.constexpr, SPLITS: tl.constexpr):
    bh = tl.program_id(0)
    s = tl.arange(0, SPLITS)
    lse = tl.load(part_lse_ptr + bh * SPLITS + s)
    w = tl.exp(lse - tl.max(lse, axis=0))
    w = tl.where(lse == -float("inf"), 0.0, w)
    d = tl.arange(0, HEAD_DIM)
    o = tl.load(part_o_ptr + (bh * SPLITS + s)[:, None] * HEAD_DIM + d[None, :])
    o = tl.where((lse == -float("inf"))[:, None], 0.0, o)
    tl.store(out_ptr + bh * HEAD_DIM + d, (tl.sum(o * w[:, None], axis=0) / tl.sum(w, axis=0)).to(out_ptr.dtype.element_ty))


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lens: torch.Tensor,
                     scale: float, cap: float = 0.0) -> torch.Tensor:
    """q [B, H, D]; k_cache, v_cache [B, L, H, D]; lens [B] int32. Returns [B, H, D]."""
    batch, heads, dim = q.shape
    if is_hip():
        splits = 4
    else:
        splits = 8 if batch * heads >= get_device_core_count() else 16
    part_o = torch.empty(batch, heads, splits, dim, dtype=torch.float32, device=q.device)
    part_lse = torch.empty(batch, heads, splits, dtype=torch.float32, device=q.device)
    _decode_stage1[(batch, heads, splits)](q, k_cache, v_cache, lens, part_o, part_lse, scale, cap,
                                           k_cache.shape[1], HEAD_DIM=dim, SPLITS=splits, BLOCK_N=32,
                                           USE_CAP=cap > 0, num_warps=4, num_stages=2)
    out = torch.empty_like(q)
    _decode_stage2[(batch * heads,)](part_o, part_lse, out, HEAD_DIM=dim, SPLITS=splits, num_warps=2)
    return out
