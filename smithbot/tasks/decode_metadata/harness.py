"""Inputs and a plain PyTorch reference for the decode_metadata task."""

import torch


def make_inputs(case, generator):
    dev = generator.device
    b, pool, ctx, max_len = case["batch"], case["pool"], case["max_context"], case["max_seq_len"]
    seq_lens = torch.randint(1, max_len + 1, (b,), generator=generator, device=dev, dtype=torch.int32)
    req_pool_indices = torch.randperm(pool, generator=generator, device=dev)[:b].to(torch.int64)
    req_to_token = torch.randint(0, 1 << 30, (pool, ctx), generator=generator, device=dev, dtype=torch.int32)
    return {"seq_lens": seq_lens, "req_pool_indices": req_pool_indices, "req_to_token": req_to_token,
            "max_seq_len": max_len}


def reference(seq_lens, req_pool_indices, req_to_token, max_seq_len):
    b = seq_lens.shape[0]
    cu = torch.zeros(b + 1, dtype=torch.int32, device=seq_lens.device)
    page_table = torch.empty(b, max_seq_len, dtype=torch.int32, device=seq_lens.device)
    positions = torch.empty(b, dtype=torch.int64, device=seq_lens.device)
    cache_loc = torch.empty(b, dtype=torch.int32, device=seq_lens.device)
    for i in range(b):
        n = int(seq_lens[i])
        cu[i + 1] = cu[i] + n
        row = req_to_token[int(req_pool_indices[i])]
        page_table[i] = row[:max_seq_len]
        positions[i] = n - 1
        cache_loc[i] = row[n - 1]
    return cu, page_table, positions, cache_loc


def bytes_moved(seq_lens, req_pool_indices, req_to_token, max_seq_len):
    """The fewest bytes: the batch's inputs, the page-table rows it reads and writes, and the small outputs."""
    b = seq_lens.numel()
    return b * (4 + 8) + 2 * b * max_seq_len * 4 + b * 4 + (b + 1) * 4 + b * (8 + 4)
