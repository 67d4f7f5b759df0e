"""Paged KV-cache write: scatter the new tokens' K and V rows into their cache slots, in place.

Shapes: key, value ``[T, H, D]``; k_cache, v_cache ``[S, H, D]``; slot_mapping ``[T]`` int64, -1 marks padding.
"""

import torch
import triton
import triton.language as tl

# EVOLVE-BLOCK-START


@triton.jit
def _store_kv_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, slot_ptr, k_stride, v_stride, kc_stride, vc_stride, row_len,
                     BLOCK: tl.constexpr):
    # One program per token and BLOCK-wide chunk of its H * D row.
    tok = tl.program_id(0)
    chunk = tl.program_id(1)
    slot = tl.load(slot_ptr + tok)
    if slot >= 0:
        cols = chunk * BLOCK + tl.arange(0, BLOCK)
        mask = cols < row_len
        k = tl.load(k_ptr + tok * k_stride + cols, mask=mask)
        v = tl.load(v_ptr + tok * v_stride + cols, mask=mask)
        tl.store(kc_ptr + slot * kc_stride + cols, k, mask=mask)
        tl.store(vc_ptr + slot * vc_stride + cols, v, mask=mask)


def store_kv_cache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   slot_mapping: torch.Tensor) -> None:
    tokens = key.shape[0]
    row_len = key.shape[1] * key.shape[2]
    block = 256
    grid = (tokens, triton.cdiv(row_len, block))
    _store_kv_kernel[grid](key, value, k_cache, v_cache, slot_mapping, key.stride(0), value.stride(0),
                           k_cache.stride(0), v_cache.stride(0), row_len, BLOCK=block, num_warps=2)


# EVOLVE-BLOCK-END
