"""Decode attention metadata, the PyTorch way: five small ops, each its own launch.

Shapes: seq_lens ``[B]`` int32 (each >= 1), req_pool_indices ``[B]`` int64, req_to_token ``[P, C]`` int32.
Returns cu_seqlens_k ``[B + 1]`` int32, page_table ``[B, L]`` int32, positions ``[B]`` int64, cache_loc ``[B]`` int32.
"""

import torch
import triton
import triton.language as tl

# EVOLVE-BLOCK-START


def build_decode_metadata(seq_lens: torch.Tensor, req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                          max_seq_len: int):
    cu_seqlens_k = torch.nn.functional.pad(torch.cumsum(seq_lens, dim=0, dtype=torch.int32), (1, 0))
    page_table = req_to_token[req_pool_indices, :max_seq_len]
    positions = (seq_lens - 1).to(torch.int64)
    cache_loc = req_to_token[req_pool_indices, positions]
    return cu_seqlens_k, page_table, positions, cache_loc


# EVOLVE-BLOCK-END
