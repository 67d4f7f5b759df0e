"""Kernels that only run off NVIDIA: a HIP-only fused kernel, and a conditional definition of a jit helper."""

import torch
import triton
import triton.language as tl

from minengine.utils import is_hip

if hasattr(tl, "exp2"):

    @triton.jit
    def softplus(x):
        return tl.log(1.0 + tl.exp2(x * 1.4426950408889634))

else:

    @triton.jit
    def softplus(x):
        return tl.log(1.0 + tl.exp(x))


@triton.jit
def _softplus_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, softplus(tl.load(x_ptr + offs, mask=mask, other=0.0)), mask=mask)


def softplus_op(x: torch.Tensor) -> torch.Tensor:
    if is_hip():
        out = torch.empty_like(x)
        _softplus_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024, waves_per_eu=2)
        return out
    return torch.nn.functional.softplus(x)


def make_scale_kernel():
    """A jit function defined inside a function, as some engines build specialised kernels on demand."""

    @triton.jit
    def _scale_kernel(x_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)

    return _scale_kernel


def scale_(x: torch.Tensor, scale: float) -> None:
    kernel = make_scale_kernel()
    kernel[(triton.cdiv(x.numel(), 512),)](x, x.numel(), scale, BLOCK=512)
