"""Inputs and a plain PyTorch reference for the moe_routing task."""

import torch


def make_inputs(case, generator):
    logits = torch.randn(case["tokens"], case["experts"], generator=generator, device=generator.device)
    return {"router_logits": logits.to(case["dtype"]), "top_k": case["top_k"], "renormalize": case["renormalize"]}


def reference(router_logits, top_k, renormalize):
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    counts = torch.bincount(ids.flatten(), minlength=router_logits.shape[1]).to(torch.int32)
    return weights, ids.to(torch.int32), counts
