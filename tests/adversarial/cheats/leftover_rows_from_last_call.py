# task: rmsnorm
# expect: incorrect mismatch
# What it tries: a result that depends on what ran before. Only the second half of the rows is written; the first half
# of a fresh allocation still holds the previous call's output whenever the caching allocator hands the same block
# back, which it does when the same case runs again and again.


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(out_ptr + row * out_stride + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    out = torch.empty_like(x2)
    head = x2.shape[0] // 2
    _rmsnorm_kernel[(x2.shape[0] - head,)](x2[head:], weight, out[head:], x2.stride(0), out.stride(0), hidden, eps,
                                           BLOCK=triton.next_power_of_2(hidden), num_warps=8)
    return out.view(x.shape)
