"""Decode attention metadata, the PyTorch way: five small ops, each its own launch.

Shapes: seq_lens ``[B]`` int32 (each >= 1), req_pool_indices ``[B]`` int64, req_to_token ``[P, C]`` int32.
Returns cu_seqlens_k ``[B + 1]`` int32, page_table ``[B, L]`` int32, positions ``[B]`` int64, cache_loc ``[B]`` int32.
"""

import torch
import triton
import triton.language as tl

# EVOLVE-BLOCK-START


@triton.jit
def _decode_metadata_kernel(seq_lens_ptr, pool_idx_ptr, r2t_ptr, r2t_stride, cu_ptr, pt_ptr, pos_ptr, loc_ptr,
                            batch, max_seq_len, BLOCK_B: tl.constexpr, BLOCK_L: tl.constexpr):
    # One program per request: its prefix sum over the (small) batch, its page-table row, position and slot.
    i = tl.program_id(0)
    offs = tl.arange(0, BLOCK_B)
    lens = tl.load(seq_lens_ptr + offs, mask=offs <= i, other=0)
    n = tl.load(seq_lens_ptr + i)
    tl.store(cu_ptr + i + 1, tl.sum(lens, axis=0).to(tl.int32))
    if i == 0:
        tl.store(cu_ptr, 0)
    row = r2t_ptr + tl.load(pool_idx_ptr + i) * r2t_stride
    tl.store(pos_ptr + i, (n - 1).to(tl.int64))
    tl.store(loc_ptr + i, tl.load(row + n - 1))
    for start in range(0, max_seq_len, BLOCK_L):
        cols = start + tl.arange(0, BLOCK_L)
        mask = cols < max_seq_len
        tl.store(pt_ptr + i * max_seq_len + cols, tl.load(row + cols, mask=mask), mask=mask)


def build_decode_metadata(seq_lens: torch.Tensor, req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                          max_seq_len: int):
    b = seq_lens.shape[0]
    dev = seq_lens.device
    cu_seqlens_k = torch.empty(b + 1, dtype=torch.int32, device=dev)
    page_table = torch.empty(b, max_seq_len, dtype=torch.int32, device=dev)
    positions = torch.empty(b, dtype=torch.int64, device=dev)
    cache_loc = torch.empty(b, dtype=torch.int32, device=dev)
    _decode_metadata_kernel[(b,)](seq_lens, req_pool_indices, req_to_token, req_to_token.stride(0), cu_seqlens_k,
                                  page_table, positions, cache_loc, b, max_seq_len,
                                  BLOCK_B=triton.next_power_of_2(b), BLOCK_L=1024, num_warps=4)
    return cu_seqlens_k, page_table, positions, cache_loc


# EVOLVE-BLOCK-END
