"""The MoE layer: routing, then an expert count launched here from the kernel defined in kernels/moe.py."""

import torch
import triton

from minengine.kernels.moe import expert_count_kernel, topk_softmax


class CountExperts(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ids: torch.Tensor, experts: int) -> torch.Tensor:
        counts = torch.empty(experts, dtype=torch.int32, device=ids.device)
        expert_count_kernel[(experts,)](ids, counts, ids.numel(), BLOCK_N=256)
        return counts


class MoERouter(torch.nn.Module):
    def __init__(self, experts: int, top_k: int) -> None:
        super().__init__()
        self.experts, self.top_k = experts, top_k

    def forward(self, logits: torch.Tensor):
        weights, ids = topk_softmax(logits, self.top_k)
        return weights, ids, CountExperts.apply(ids, self.experts)
