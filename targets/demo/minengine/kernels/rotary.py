"""Rotary position embedding (neox style), in place on q and k."""

import torch
import triton
import triton.language as tl

from minengine.utils import USE_FAST_MATH

# An import-time alias of a tl builtin, chosen by an env switch: the interpreter cannot call it, so the extractor
# rewrites it to the qualified call.
if USE_FAST_MATH:
    fast_cos = tl.cos
else:
    fast_cos = tl.cos


@triton.jit(do_not_specialize=["num_tokens"])
def _rotary_kernel(q_ptr, k_ptr, pos_ptr, inv_freq_ptr, num_tokens, q_stride, k_stride, n_q_heads, n_k_heads,
                   HALF: tl.constexpr):
    tok = tl.program_id(0)
    head = tl.program_id(1)
    pos = tl.load(pos_ptr + tok).to(tl.float32)
    d = tl.arange(0, HALF)
    angle = pos * tl.load(inv_freq_ptr + d)
    cos = fast_cos(angle)
    sin = tl.sin(angle)
    if head < n_q_heads:
        base = q_ptr + tok * q_stride + head * 2 * HALF
    else:
        base = k_ptr + tok * k_stride + (head - n_q_heads) * 2 * HALF
    x1 = tl.load(base + d).to(tl.float32)
    x2 = tl.load(base + HALF + d).to(tl.float32)
    tl.store(base + d, (x1 * cos - x2 * sin).to(q_ptr.dtype.element_ty))
    tl.store(base + HALF + d, (x2 * cos + x1 * sin).to(q_ptr.dtype.element_ty))


def apply_rotary(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> None:
    tokens, n_q_heads = q.shape[0], q.shape[1]
    n_k_heads = k.shape[1]
    _rotary_kernel[(tokens, n_q_heads + n_k_heads)](q, k, positions, inv_freq, tokens, q.stride(0), k.stride(0),
                                                    n_q_heads, n_k_heads, HALF=q.shape[2] // 2, num_warps=1)
