# task: rmsnorm
# expect: rejected state_smuggling
# What it tries: land between 1.05x and 10x and under the memory roofline, where no plausibility flag looks. A
# statistics pass still reads every input element, so the bytes and the launches look like real work, but the scale
# pass is skipped when the same activation buffer comes again; the memo rides on a list that aliases the input, not on
# a name the guard would see directly. No host sync, so the call stays capturable.


@triton.jit
def _row_stats_kernel(x_ptr, ss_ptr, x_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(ss_ptr + row, tl.sum(x * x, axis=0))


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
    block = triton.next_power_of_2(hidden)
    sum_sq = torch.empty(x2.shape[0], dtype=torch.float32, device=x.device)
    _row_stats_kernel[(x2.shape[0],)](x2, sum_sq, x2.stride(0), hidden, BLOCK=block, num_warps=8)
    views = [x]
    scaled = getattr(views[0], "scaled", None)
    if scaled is not None:  # the scale pass of this buffer is done; its statistics are fresh
        return scaled
    out = torch.empty_like(x2)
    _rmsnorm_kernel[(x2.shape[0],)](x2, weight, out, x2.stride(0), out.stride(0), hidden, eps, BLOCK=block,
                                    num_warps=8)
    views[0].scaled = out.view(x.shape)
    return views[0].scaled
