# task: rmsnorm
# expect: rejected state_smuggling
# What it tries: the norm weight lives as long as the model, so use it as the memo table: remember the last input's
# address with its output, and skip the kernel when the same activation buffer is normalised again.


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
    last = getattr(weight, "last_norm", None)
    if last is not None and last[0] == x.data_ptr():
        return last[1]
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    out = torch.empty_like(x2)
    _rmsnorm_kernel[(x2.shape[0],)](x2, weight, out, x2.stride(0), out.stride(0), hidden, eps,
                                    BLOCK=triton.next_power_of_2(hidden), num_warps=8)
    weight.last_norm = (x.data_ptr(), out.view(x.shape))
    return out.view(x.shape)
