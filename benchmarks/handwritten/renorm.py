# A hand-written Triton kernel for the top-k renorm glue (``w / w.sum(-1, keepdim=True)``), written the way a
# maintainer would, to compare the generated kernel's length and speed with (benchmarks/inductor_clean.py).
# Its entry is called ENTRY: inductor_clean.py gives it the task's entry name.

import torch
import triton
import triton.language as tl


@triton.jit
def _renorm_kernel(w_ptr, out_ptr, n_rows, n_cols, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)[:, None]
    cols = tl.arange(0, BLOCK_COLS)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    w = tl.load(w_ptr + rows * n_cols + cols, mask=mask, other=0.0)
    tl.store(out_ptr + rows * n_cols + cols, w / tl.sum(w.to(tl.float32), axis=1)[:, None], mask=mask)


def ENTRY(topk_weights):
    w = topk_weights.contiguous()
    out = torch.empty_like(w)
    n_rows, n_cols = w.shape
    block_cols = triton.next_power_of_2(n_cols)
    block_rows = max(1, 1024 // block_cols)
    _renorm_kernel[(triton.cdiv(n_rows, block_rows),)](w, out, n_rows, n_cols, BLOCK_ROWS=block_rows,
                                                        BLOCK_COLS=block_cols)
    return out
