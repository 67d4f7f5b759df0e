"""Inputs and a plain PyTorch reference for the silu_and_mul task."""

import torch


def make_inputs(case, generator):
    x = 2.0 * torch.randn(case["tokens"], 2 * case["intermediate"], generator=generator, device=generator.device)
    return {"x": x.to(case["dtype"])}


def reference(x):
    gate, up = x.float().chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up).to(x.dtype)
