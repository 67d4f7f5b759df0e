"""RMSNorm: ``y[t, :] = x[t, :] * rsqrt(mean(x[t, :] ** 2) + eps) * w``.

Shapes: x ``[T, H]`` (any leading dims, last dim contiguous), w ``[H]``, y like x. Accumulates in fp32.
"""

import torch
import triton
import triton.language as tl

# EVOLVE-BLOCK-START


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps, BLOCK: tl.constexpr):
    # One program per row, two passes over the row in BLOCK-wide chunks: the first sums squares, the second scales.
    row = tl.program_id(0)
    x_row = x_ptr + row * x_stride
    out_row = out_ptr + row * out_stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    out = torch.empty_like(x2)
    _rmsnorm_kernel[(x2.shape[0],)](x2, weight, out, x2.stride(0), out.stride(0), hidden, eps, BLOCK=256, num_warps=4)
    return out.view(x.shape)


# EVOLVE-BLOCK-END
