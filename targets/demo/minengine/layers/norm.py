import torch

from minengine.kernels.norm import fused_add_rms_norm, rms_norm


class RMSNorm(torch.nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        if residual is not None:
            fused_add_rms_norm(x, residual, self.weight, self.eps)
            return x
        return rms_norm(x, self.weight, self.eps)
