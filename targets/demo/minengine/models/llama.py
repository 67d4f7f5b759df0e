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


class LlamaModel(torch.nn.Module):
    """Embedding, the decoder layers in order, a final norm. Each layer keeps its own KV cache [B, L, H, D]."""

    def __init__(self, vocab: int, hidden: int, heads: int, kv_heads: int, head_dim: int, intermediate: int,
                 layers: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.layers = torch.nn.ModuleList([LlamaDecoderLayer(hidden, heads, heads, head_dim, intermediate)
                                           for _ in range(layers)])
        self.norm = RMSNorm(hidden)

    def forward(self, ids, positions, inv_freq, k_caches, v_caches, lens):
        # TODO: fuse these small ops into one kernel: the step's lengths and rotary positions take six launches
        lens = lens.clamp(min=1).to(torch.int32)
        positions = torch.minimum(positions, (lens - 1).to(positions.dtype))
        positions = positions.clamp(min=0)
        x = self.embed(ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, positions, inv_freq, k_caches[i], v_caches[i], lens)
        return self.norm(x)


class LlamaForCausalLM(torch.nn.Module):
    """The model class a config.json names (``architectures: [LlamaForCausalLM]``): one decode step per call."""

    def __init__(self, config: dict) -> None:
        super().__init__()
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        self.model = LlamaModel(config["vocab_size"], config["hidden_size"], config["num_attention_heads"],
                                config["num_key_value_heads"], head_dim, config["intermediate_size"],
                                config["num_hidden_layers"])
        self.lm_head = torch.nn.Linear(config["hidden_size"], config["vocab_size"], bias=False)

    def forward(self, ids, positions, inv_freq, k_caches, v_caches, lens):
        return self.lm_head(self.model(ids, positions, inv_freq, k_caches, v_caches, lens))
