"""SwiGLU activation, autotuned, with a grid lambda over META."""

import torch
import triton
import triton.language as tl

from minengine.kernels.utils import silu


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (512, 1024) for w in (2, 4)],
    key=["n_cols"],
)
@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, x_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    gate = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * x_stride + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, (silu(gate) * up).to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    out = torch.empty(x.shape[0], n, dtype=x.dtype, device=x.device)
    grid = lambda META: (x.shape[0], triton.cdiv(n, META["BLOCK"]))  # noqa: E731
    _silu_and_mul_kernel[grid](x, out, x.stride(0), out.stride(0), n)
    return out
