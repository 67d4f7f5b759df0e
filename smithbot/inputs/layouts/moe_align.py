"""MoE routing as the engines' block alignment lays it out for a grouped GEMM (sglang's and vLLM's
``moe_align_block_size``, an extension call): every (token, k) slot once, grouped by expert, each expert's group padded
to whole blocks of ``block`` rows with the no-slot value ``tokens * top_k``; one expert id per block; and the padded
length. The buffers have the engines' sizes: ``tokens * top_k + experts * (block - 1)`` slots at most.

``build`` is pure torch and is copied into each task's harness as it is, so it imports nothing at module level."""

NAME = "moe_align"
FIELDS = ("topk_ids", "topk_weights", "sorted_token_ids", "expert_ids", "num_tokens_post_padded")
SIZES = ("tokens", "top_k", "experts", "block")
# launcher parameter names, per field
NAMES = {
    "topk_ids": ("topk_ids", "topk_idx", "topk_indices", "topk_index"),
    "topk_weights": ("topk_weights", "topk_weight"),
    "sorted_token_ids": ("sorted_token_ids", "sorted_ids", "sorted_token_idx"),
    "expert_ids": ("expert_ids",),
    "num_tokens_post_padded": ("num_tokens_post_padded", "num_tokens_post_pad", "total_tokens_post_pad"),
}
# the fields only the alignment makes: a launcher that takes one needs the layout
DERIVED = ("sorted_token_ids", "expert_ids", "num_tokens_post_padded")


def build_moe_align(sizes, generator, device):
    import torch

    tokens, top_k, experts, block = (int(sizes[k]) for k in ("tokens", "top_k", "experts", "block"))
    # top_k distinct experts per token, and their softmax weights
    scores = torch.rand(tokens, experts, generator=generator, device=device)
    topk_weights, topk_ids = torch.topk(scores.softmax(-1), top_k, dim=-1)
    slots = topk_ids.flatten()
    counts = torch.bincount(slots, minlength=experts)
    padded = (counts + block - 1) // block * block
    starts = torch.cumsum(padded, 0) - padded  # where each expert's blocks begin
    order = torch.argsort(slots, stable=True)  # the slots, grouped by expert, in token order within one
    rank = torch.arange(len(slots), device=device) - (torch.cumsum(counts, 0) - counts)[slots[order]]
    capacity = len(slots) + experts * (block - 1)
    sorted_token_ids = torch.full((capacity,), len(slots), dtype=torch.int32, device=device)
    sorted_token_ids[starts[slots[order]] + rank] = order.to(torch.int32)
    # blocks past the padded length are never read by a kernel that stops there; they name expert 0, not garbage
    expert_ids = torch.zeros(((capacity + block - 1) // block,), dtype=torch.int32, device=device)
    total = int(padded.sum())
    expert_ids[:total // block] = torch.repeat_interleave(torch.arange(experts, device=device), padded // block).to(
        torch.int32)
    return {"topk_ids": topk_ids.to(torch.int32), "topk_weights": topk_weights.to(torch.float32),
            "sorted_token_ids": sorted_token_ids, "expert_ids": expert_ids,
            "num_tokens_post_padded": torch.tensor([total], dtype=torch.int32, device=device)}
