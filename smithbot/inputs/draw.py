"""The input kinds that take more than one expression to draw, as plain torch functions: the one source that both the
task's harness (``inputs/harness.py``) and the generated test (``propose/testcode.py``) write out, so that the two
draw the same tensors from the same generator. Their names start with an underscore because they are copied into
files where a spec's parameter names are locals too. Each draws on its generator's device or its input's."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the files these are written into import it; the parent process never runs them
    import torch


def _drawn(dtype):  # fp8 and integer inputs are drawn in bf16 or fp32 and converted
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return dtype
    return torch.bfloat16 if dtype.is_floating_point and dtype.itemsize == 1 else torch.float32


def _perm(n, shape, gen):  # distinct values below n; a longer table is padded with n (no row)
    t = torch.randperm(n, generator=gen, device=gen.device)[:torch.Size(shape).numel()]
    return torch.cat([t, t.new_full((torch.Size(shape).numel() - len(t),), n)]).view(shape)


def _starts(lens, n):  # where each sequence starts, the lengths laid end to end
    ends = torch.cumsum(lens.flatten().to(torch.int64), 0)
    return torch.cat([ends.new_zeros(1), ends])[:n]


def _upto(whole, n, gen):  # each at most the same entry of whole: a prefix of each sequence
    whole = whole.flatten().to(torch.int64)[:n]
    t = (torch.rand(n, generator=gen, device=gen.device, dtype=torch.float64) * (whole + 1)).long()
    return torch.minimum(t, whole)


def _chunks(cu, bt, n):  # (sequence, chunk) of each bt-token chunk of the sequences at offsets cu
    cu = cu.flatten().to(torch.int64)
    counts = (cu[1:] - cu[:-1] + bt - 1) // bt
    seq = torch.repeat_interleave(torch.arange(len(counts), device=cu.device), counts)
    chunk = torch.arange(len(seq), device=cu.device) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    t = torch.stack([seq, chunk], 1).flatten()[:n]
    return torch.cat([t, t.new_zeros(n - len(t))])


# read once, at import, like the size arithmetic the harness embeds
HELPERS = {f.__name__: inspect.getsource(f).strip() for f in (_drawn, _perm, _starts, _upto, _chunks)}
