"""Inputs and a plain PyTorch reference for the kv_cache_write task."""

import torch


def make_inputs(case, generator):
    dev = generator.device
    t, h, d, s = case["tokens"], case["kv_heads"], case["head_dim"], case["slots"]

    def rand(*shape):
        return torch.randn(*shape, generator=generator, device=dev).to(case["dtype"])

    # Distinct slots, as an allocator hands out; the first `padding` tokens are padding (-1) in padded batches.
    slots = torch.randperm(s, generator=generator, device=dev)[:t].to(torch.int64)
    slots[: case.get("padding", 0)] = -1
    # The caches start full of old data, so a kernel that skips a write is caught.
    return {"key": rand(t, h, d), "value": rand(t, h, d), "k_cache": rand(s, h, d), "v_cache": rand(s, h, d),
            "slot_mapping": slots}


def reference(key, value, k_cache, v_cache, slot_mapping):
    keep = slot_mapping >= 0
    k_cache[slot_mapping[keep]] = key[keep]
    v_cache[slot_mapping[keep]] = value[keep]



def bytes_moved(key, value, k_cache, v_cache, slot_mapping):
    """The fewest bytes: read every key/value row and slot, write the rows of non-padding tokens (not whole caches)."""
    row = key[0].numel() * key.element_size()
    kept = int((slot_mapping >= 0).sum())
    return 2 * key.shape[0] * row + slot_mapping.numel() * slot_mapping.element_size() + 2 * kept * row
