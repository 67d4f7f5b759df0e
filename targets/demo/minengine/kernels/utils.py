"""Triton helpers shared by several kernel files (the extractor must inline them)."""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def softcap(x, cap):
    # tanh(x / cap) * cap, written with exp2 so it lowers to one MUFU op.
    e = tl.exp2(2.0 * LOG2E * x / cap)
    return cap * (e - 1.0) / (e + 1.0)


@triton.jit
def silu(x):
    return x / (1.0 + tl.exp(-x))
