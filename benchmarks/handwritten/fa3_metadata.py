# A hand-written Triton kernel for FA3's decode metadata glue (the lengths as int32, their exclusive prefix sum, and
# the batch's rows of the token table cut to the longest length), written the way a maintainer would, to compare the
# generated kernel's length and speed with (benchmarks/inductor_clean.py). One program per request.

import torch
import triton
import triton.language as tl


@triton.jit
def _fa3_metadata_kernel(lens_ptr, pool_ptr, table_ptr, table_stride, lens32_ptr, cu_ptr, page_ptr, max_k,
                         BLOCK_B: tl.constexpr, BLOCK_K: tl.constexpr):
    i = tl.program_id(0)
    offs = tl.arange(0, BLOCK_B)
    lens = tl.load(lens_ptr + offs, mask=offs <= i, other=0).to(tl.int32)
    tl.store(cu_ptr + i + 1, tl.sum(lens, axis=0))
    if i == 0:
        tl.store(cu_ptr, 0)
    tl.store(lens32_ptr + i, tl.load(lens_ptr + i).to(tl.int32))
    row = table_ptr + tl.load(pool_ptr + i) * table_stride
    for start in range(0, max_k, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        mask = cols < max_k
        tl.store(page_ptr + i * max_k + cols, tl.load(row + cols, mask=mask), mask=mask)


def ENTRY(seqlens_in_batch, eager_max_k, req_to_token, req_pool_indices):
    b = seqlens_in_batch.shape[0]
    dev = seqlens_in_batch.device
    lens32 = torch.empty(b, dtype=torch.int32, device=dev)
    cu = torch.empty(b + 1, dtype=torch.int32, device=dev)
    page = torch.empty(b, eager_max_k, dtype=req_to_token.dtype, device=dev)
    _fa3_metadata_kernel[(b,)](seqlens_in_batch, req_pool_indices, req_to_token, req_to_token.stride(0), lens32, cu,
                               page, eager_max_k, BLOCK_B=triton.next_power_of_2(b), BLOCK_K=1024)
    return lens32, eager_max_k, cu, page
