"""A decoder layer wired from minengine's layers and kernels (enough for the scanner to see what models call)."""

import torch

from minengine.kernels.activation import silu_and_mul
from minengine.kernels.attention import decode_attention
from minengine.kernels.rotary import apply_rotary
from minengine.layers.norm import RMSNorm


class LlamaDecoderLayer(torch.nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, intermediate: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.norm1, self.norm2 = RMSNorm(hidden), RMSNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, (heads + 2 * kv_heads) * head_dim, bias=False)
        self.o = torch.nn.Linear(heads * head_dim, hidden, bias=False)
        self.up = torch.nn.Linear(hidden, 2 * intermediate, bias=False)
        self.down = torch.nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x, positions, inv_freq, k_cache, v_cache, lens):
        h = self.norm1(x)
        q, k, v = self.qkv(h).split([self.heads * self.head_dim, self.kv_heads * self.head_dim,
                                     self.kv_heads * self.head_dim], dim=-1)
        q = q.view(-1, self.heads, self.head_dim)
        k = k.view(-1, self.kv_heads, self.head_dim)
        apply_rotary(q, k, positions, inv_freq)
        attn = decode_attention(q, k_cache, v_cache, lens, self.head_dim ** -0.5)
        x = x + self.o(attn.flatten(1))
        return x + self.down(silu_and_mul(self.up(self.norm2(x))))
