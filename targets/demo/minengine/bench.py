"""Decode steps of the demo model on random weights under the torch profiler, written as a Chrome trace.

    python -m minengine.bench --config CONFIG.json --batch 8 --steps 4 --trace trace.json

The engine's own benchmark, as `smithbot profile demo` runs it (targets/demo.yaml, `profile:`). Needs a CUDA GPU.
"""

import argparse
import json
import sys

import torch

from minengine.models.llama import LlamaForCausalLM


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="a Hugging Face config.json")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--phase", default="decode", help="only decode: the demo engine has no prefill path")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--context", type=int, default=256, help="cached tokens per sequence")
    ap.add_argument("--trace", required=True)
    args = ap.parse_args(argv)
    if args.phase != "decode":
        print("minengine.bench: the demo engine has only a decode path", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("minengine.bench: needs a CUDA GPU", file=sys.stderr)
        return 2
    with open(args.config) as f:
        config = json.load(f)
    torch.manual_seed(0)
    torch.set_default_device("cuda")
    torch.set_default_dtype(torch.bfloat16)
    model = LlamaForCausalLM(config).eval()
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    b, layers = args.batch, config["num_hidden_layers"]
    k_caches = [torch.randn(b, args.context, heads, head_dim) for _ in range(layers)]
    v_caches = [torch.randn(b, args.context, heads, head_dim) for _ in range(layers)]
    lens = torch.full((b,), args.context, dtype=torch.int32)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    ids = torch.randint(0, config["vocab_size"], (b,))
    positions = torch.full((b,), args.context, dtype=torch.int64)

    def step():
        with torch.no_grad():
            return model(ids, positions, inv_freq, k_caches, v_caches, lens)

    for _ in range(2):  # compile every kernel before the profile
        step()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(args.steps):
            step()
            torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(args.trace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
