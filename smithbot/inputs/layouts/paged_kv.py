"""A paged KV cache as the engines keep it: a request pool whose table maps each request's positions to KV slots
(sglang's ``req_to_token``), pages of ``page`` slots laid out whole (a page's slots are consecutive), and what a batch
of requests derives from it: their lengths, their rows of the pool, page tables (``page_table`` = the page of every
``page``-th position; lmdeploy's ``block_offsets``), the ragged ``kv_indptr`` / ``kv_indices`` (FlashInfer's) and the
offsets ``cu_seqlens_k``; the decode step's query (vLLM's ``query_start_loc``, a token per request, and
that token's ``positions``, each request's last); the chunks a chunked-prefix prefill reads the cached prefixes in
(sglang's MLA ``prefix_chunk_*``: each request's ``seq_lens`` positions taken ``chunk_capacity // batch`` at a time);
and an extend step's writes into the pool: each request's ``seq_lens`` split into a cached ``prefix_lens`` and the
``extend_lens`` new positions (at least one), with ``prefix_tensors`` (one tensor per request: the slots the prefix
cache hands over for its prefix) and ``out_cache_loc`` (the slots allocated for the new positions, laid end to end).
Those slots are the pool's free ones (its rows outside the batch), as the step finds them before it writes the table:
so writing them into the batch's rows changes the table.

Sizes: ``batch`` requests, each with at most ``context`` positions (a multiple of ``page``). The pool holds twice
the batch, so the batch's rows are a scattered subset, and every slot belongs to one position of one row.

``build_paged_kv`` is pure torch and is copied into each task's harness as it is."""

NAME = "paged_kv"
FIELDS = ("seq_lens", "cache_seqlens", "req_pool_indices", "req_to_token", "page_table", "kv_indptr", "kv_indices",
          "cu_seqlens_k", "max_seq_pages", "strided_indices", "max_seqlen_k", "batch_size", "num_prefix_chunks",
          "prefix_chunk_starts", "prefix_chunk_seq_lens", "prefix_chunk_cu_seq_lens", "prefix_chunk_num_tokens",
          "query_start_loc", "positions", "prefix_lens", "extend_lens", "prefix_tensors", "out_cache_loc")
SIZES = ("batch", "context", "page", "chunk_capacity")
NAMES = {
    "seq_lens": ("seq_lens", "paged_kernel_lens", "kv_seqlens", "kv_lens"),
    "cache_seqlens": ("cache_seqlens", "cache_seqlens_int32", "seq_lens_int32"),
    "req_pool_indices": ("req_pool_indices", "req_pool_idx", "req_indices"),
    "req_to_token": ("req_to_token",),
    "page_table": ("page_table", "block_table", "block_offsets"),
    "kv_indptr": ("kv_indptr",),
    "kv_indices": ("kv_indices",),
    "cu_seqlens_k": ("cu_seqlens_k",),
    "max_seq_pages": ("max_seq_pages", "max_num_pages"),
    "strided_indices": ("strided_indices",),
    "max_seqlen_k": ("max_seqlen_k", "max_seq_len_k"),
    "batch_size": ("batch_size", "num_reqs"),
    "query_start_loc": ("query_start_loc", "cu_seqlens_q"),
    "positions": ("positions",),
    "prefix_lens": ("prefix_lens", "extend_prefix_lens"),
    "extend_lens": ("extend_lens", "extend_seq_lens"),
    "prefix_tensors": ("prefix_tensors",),
    "out_cache_loc": ("out_cache_loc",),
    **{f: (f,) for f in ("num_prefix_chunks", "prefix_chunk_starts", "prefix_chunk_seq_lens",
                         "prefix_chunk_cu_seq_lens", "prefix_chunk_num_tokens")},
}
DERIVED = ("req_to_token", "req_pool_indices", "kv_indices", "strided_indices", "prefix_chunk_starts",
           "prefix_chunk_seq_lens", "prefix_chunk_cu_seq_lens", "query_start_loc")


def build_paged_kv(sizes, generator, device):
    import torch

    batch, context, page = (int(sizes[k]) for k in ("batch", "context", "page"))
    context = (context + page - 1) // page * page
    rows = 2 * batch
    seq_lens = torch.randint(1, context + 1, (batch,), generator=generator, device=device)
    req_pool_indices = torch.randperm(rows, generator=generator, device=device)[:batch]
    # every page of the pool, in a random order, page-sized runs of slots
    pages = torch.randperm(rows * context // page, generator=generator, device=device).view(rows, context // page)
    req_to_token = (pages[:, :, None] * page + torch.arange(page, device=device)).view(rows, context)
    page_table = pages[req_pool_indices].to(torch.int32)
    kv_indptr = torch.zeros(batch + 1, dtype=torch.int32, device=device)
    kv_indptr[1:] = torch.cumsum(seq_lens, 0)
    own = req_to_token[req_pool_indices]
    kv_indices = own[torch.arange(context, device=device)[None, :] < seq_lens[:, None]]
    # the cached prefixes read in chunks of chunk_len positions per request, as an engine that bounds the KV a
    # chunk reads splits them (a spec may size that capacity; where none does, 128K positions)
    chunk_len = max(1, int(sizes.get("chunk_capacity", 128 * 1024)) // batch)
    chunks = (int(seq_lens.max()) + chunk_len - 1) // chunk_len
    starts = (torch.arange(chunks, device=device, dtype=torch.int32)[:, None] * chunk_len).expand(-1, batch)
    chunk_lens = (torch.minimum(seq_lens[None, :], starts + chunk_len) - starts).clamp(min=0).to(torch.int32)
    chunk_cu = torch.zeros(chunks, batch + 1, dtype=torch.int32, device=device)
    chunk_cu[:, 1:] = chunk_lens.cumsum(1)
    # an extend step: a cached prefix of each request and at least one new position, their slots the free ones
    prefix_lens = (torch.rand(batch, generator=generator, device=device) * seq_lens).long().clamp(max=seq_lens - 1)
    free_rows = torch.ones(rows, dtype=torch.bool, device=device)
    free_rows[req_pool_indices] = False
    free = req_to_token[free_rows].flatten()
    free = free[torch.randperm(free.numel(), generator=generator, device=device)]
    ends = prefix_lens.cumsum(0).tolist()
    prefix_tensors = [free[end - n:end].clone() for end, n in zip(ends, prefix_lens.tolist())]
    out_cache_loc = free[ends[-1]:ends[-1] + int((seq_lens - prefix_lens).sum())].clone()
    return {"seq_lens": seq_lens, "cache_seqlens": seq_lens.to(torch.int32),
            "req_pool_indices": req_pool_indices, "req_to_token": req_to_token.to(torch.int32),
            "page_table": page_table, "kv_indptr": kv_indptr, "kv_indices": kv_indices.to(torch.int64),
            "cu_seqlens_k": kv_indptr.clone(), "max_seq_pages": context // page,
            "strided_indices": torch.arange(0, context, page, device=device),
            "max_seqlen_k": int(seq_lens.max()), "batch_size": batch, "num_prefix_chunks": chunks,
            "prefix_chunk_starts": starts.contiguous(), "prefix_chunk_seq_lens": chunk_lens,
            "prefix_chunk_cu_seq_lens": chunk_cu, "prefix_chunk_num_tokens": chunk_lens.sum(1).tolist(),
            "query_start_loc": torch.arange(batch + 1, dtype=torch.int32, device=device),
            "positions": seq_lens - 1, "prefix_lens": prefix_lens, "extend_lens": seq_lens - prefix_lens,
            "prefix_tensors": prefix_tensors, "out_cache_loc": out_cache_loc}
