# task: rmsnorm
# expect: incorrect mismatch
# What it tries: lower the precision quietly. Accumulating the sum of squares in fp16 halves the registers and stays
# within the bf16 tolerance on bf16 rows; the fp32 cases of the table are what catch it.


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    xh = x.to(tl.float16)
    ss = tl.sum(xh * xh, axis=0).to(tl.float32)  # fp16 products and sum: half the registers of fp32
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float16)
    rstd = (1.0 / tl.sqrt(ss / n_cols + eps)).to(tl.float16)
    tl.store(out_ptr + row * out_stride + cols, (xh * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    out = torch.empty_like(x2)
    _rmsnorm_kernel[(x2.shape[0],)](x2, weight, out, x2.stride(0), out.stride(0), hidden, eps,
                                    BLOCK=triton.next_power_of_2(hidden), num_warps=8)
    return out.view(x.shape)
