"""Inputs and a plain PyTorch reference for the rmsnorm task."""

import torch


def make_inputs(case, generator):
    dev = generator.device
    x = torch.randn(case["tokens"], case["hidden"], generator=generator, device=dev).to(case["dtype"])
    weight = (1.0 + 0.1 * torch.randn(case["hidden"], generator=generator, device=dev)).to(case["dtype"])
    return {"x": x, "weight": weight, "eps": case["eps"]}


def reference(x, weight, eps):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype)
