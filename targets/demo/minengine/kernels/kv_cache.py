"""A paged KV pool whose store method launches the scatter kernel."""

import torch
import triton
import triton.language as tl


def _store_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, slot_ptr, row_len, BLOCK: tl.constexpr):
    tok = tl.program_id(0)
    slot = tl.load(slot_ptr + tok)
    cols = tl.arange(0, BLOCK)
    mask = cols < row_len
    tl.store(kc_ptr + slot * row_len + cols, tl.load(k_ptr + tok * row_len + cols, mask=mask), mask=mask)
    tl.store(vc_ptr + slot * row_len + cols, tl.load(v_ptr + tok * row_len + cols, mask=mask), mask=mask)


_store_kernel = triton.jit(_store_kernel)


class KVPool:
    def __init__(self, slots: int, heads: int, head_dim: int, dtype: torch.dtype, device: str) -> None:
        self.k = torch.zeros(slots, heads, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)

    def store(self, key: torch.Tensor, value: torch.Tensor, slots: torch.Tensor) -> None:
        row = key.shape[1] * key.shape[2]
        _store_kernel[(key.shape[0],)](key, value, self.k, self.v, slots, row, BLOCK=triton.next_power_of_2(row))
