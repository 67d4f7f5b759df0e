"""Per-head scaling of a token-major activation. The launcher regroups the heads with einops, a package a task may not
import, so extraction stops and names it."""

import torch
import triton
import triton.language as tl
from einops import rearrange


@triton.jit
def _scale_rows_kernel(x_ptr, out_ptr, scale, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask)
    tl.store(out_ptr + row * n_cols + cols, x * scale, mask=mask)


def scale_heads(x: torch.Tensor, heads: int, scale: float) -> torch.Tensor:
    rows = rearrange(x, "t (h d) -> (t h) d", h=heads).contiguous()
    out = torch.empty_like(rows)
    n_cols = rows.shape[1]
    _scale_rows_kernel[(rows.shape[0],)](rows, out, scale, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return rearrange(out, "(t h) d -> t (h d)", h=heads)
