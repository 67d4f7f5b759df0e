"""RMSNorm: ``y[t, :] = x[t, :] * rsqrt(mean(x[t, :] ** 2) + eps) * w``.

Shapes: x ``[T, H]`` (any leading dims, last dim contiguous), w ``[H]``, y like x. Accumulates in fp32.
"""

import torch
import triton
import triton.language as tl

# EVOLVE-BLOCK-START


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps, BLOCK: tl.constexpr):
    # One program per row; the whole row is held in registers, so x is read from memory once instead of twice.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    out = torch.empty_like(x2)
    block = triton.next_power_of_2(hidden)
    warps = min(max(block // 512, 1), 16)
    _rmsnorm_kernel[(x2.shape[0],)](x2, weight, out, x2.stride(0), out.stride(0), hidden, eps, BLOCK=block,
                                    num_warps=warps)
    return out.view(x.shape)


# EVOLVE-BLOCK-END
