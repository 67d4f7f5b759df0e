"""An independent reading of the input spec language, for tests: the interpreter every task's harness carried before
the harness became plain code written from the spec (``smithbot/inputs/code.py``). The generated code must draw what
this draws, tensor for tensor, from the same generator."""

import types

import torch

from smithbot.inputs.layouts import moe_align, paged_kv
from smithbot.inputs.sizes import size_value

LAYOUT_BUILDERS = {"moe_align": moe_align.build_moe_align, "paged_kv": paged_kv.build_paged_kv}
_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int32": torch.int32,
           "fp8_e4m3": torch.float8_e4m3fn, "int8": torch.int8, "uint8": torch.uint8,
           "int64": torch.int64, "bool": torch.bool, "complex64": torch.complex64}
_BYTE_DTYPES = {n: getattr(torch, t) for n, t in (("fp4x2", "float4_e2m1fn_x2"), ("e8m0", "float8_e8m0fnu"))
                if hasattr(torch, t)}
_DTYPES.update(_BYTE_DTYPES)


def later(item):  # offsets after the lengths they add up
    return isinstance(item[1], dict) and str(item[1].get("init", "")).startswith(("starts:", "chunks:", "upto:"))


def make_inputs(SPEC, EXTRA_DIMS, case, generator):
    dims = {k: v for k, v in case.items() if isinstance(v, int) and not isinstance(v, bool)}
    for k, v in EXTRA_DIMS.items():  # the interpreter's case may carry its own, smaller, value
        dims.setdefault(k, size_value(v, dims))
    dev = generator.device
    args = {}
    layouts = {}

    def drawn(dtype):  # random values drawn at the input's own width: a DeepSeek-sized fp8 weight drawn in fp32
        if dtype in (torch.float16, torch.bfloat16, torch.float32):  # would take 14 GiB for a moment
            return dtype
        return torch.bfloat16 if dtype.is_floating_point and dtype.itemsize == 1 else torch.float32

    def make(spec, scope):
        if isinstance(spec, str) and spec.startswith(("dtype:", "tldtype:")):
            dtype = case["dtype"] if spec.endswith(":act") else _DTYPES[spec.split(":")[1]]
            if spec.startswith("tl"):  # a triton dtype (compute_type: tl.dtype), named like the torch one
                import triton.language as tl

                dtype = getattr(tl, str(dtype).removeprefix("torch.").replace("float8_e4m3fn", "float8e4nv"))
            return dtype
        if spec == "device:":
            return dev
        if spec == "regime:decode":  # a step's is_decoding
            return case["regime"] == "decode"
        if not isinstance(spec, dict):
            return size_value(spec, dims)
        if "literal" in spec:
            return spec["literal"]
        if "object" in spec:  # an object read for its attributes (a module's weights, a plan)
            attrs = {}  # an attribute's starts: may name a sibling's lengths
            for k, v in sorted(spec["object"].items(), key=later):
                attrs[k] = make(v, attrs)
            return types.SimpleNamespace(**{k: attrs[k] for k in spec["object"]})
        if "items" in spec:
            return [make(v, scope) for v in spec["items"]]
        if "layout" in spec:  # a field of a layout instance, built once per case with its sizes
            key = (spec["layout"], repr(sorted(spec["sizes"].items())))
            if key not in layouts:
                sizes = {k: size_value(v, dims) for k, v in spec["sizes"].items()}
                layouts[key] = LAYOUT_BUILDERS[spec["layout"]](sizes, generator, dev)
            return layouts[key][spec["field"]]
        if "returns" in spec:  # a method of an object spec (`cfg.max_len()`), answering this value
            value = make(spec["returns"], scope)
            return lambda *args, **kwargs: value
        shape = [int(size_value(s, dims)) for s in spec["shape"]]
        if spec.get("transposed"):  # drawn as its transpose, and handed over as a view of that (a weight's w.t())
            shape[-2:] = shape[:-3:-1]
        dtype = case["dtype"] if spec.get("dtype", "act") == "act" else _DTYPES[spec["dtype"]]
        init = str(spec.get("init", "randn")).split(":")
        numel = 1
        for s in shape:
            numel *= s
        if dtype in _BYTE_DTYPES.values():  # any byte, or those of a randint init (e8m0 exponents near 1)
            lo_hi = [int(size_value(b, dims)) for b in init[1:3]] if init[0] == "randint" else [0, 256]
            return torch.randint(*lo_hi, shape, generator=generator, device=dev).to(torch.uint8).view(dtype)
        if init[0] == "randint":
            low, high = int(size_value(init[1], dims)), int(size_value(init[2], dims))
            t = torch.randint(low, high, shape, generator=generator, device=dev)
        elif init[0] == "perm":  # a longer table is padded with n, the value that stands for no row
            n = int(size_value(init[1], dims))
            t = torch.randperm(n, generator=generator, device=dev)[:numel]
            t = torch.cat([t, t.new_full((numel - len(t),), n)]).view(shape)
        elif init[0] == "arange":  # 0, 1, 2... or with a step, 0, s, 2s..., or from f: f, f + s...
            step = int(size_value(init[1], dims)) if len(init) > 1 else 1
            first = int(size_value(init[2], dims)) if len(init) > 2 else 0
            t = (first + torch.arange(numel, device=dev) * step).view(shape)
        elif init[0] in ("even", "even_end", "split", "cuts"):  # N rows shared out evenly and in order
            n, i = int(size_value(init[1], dims)), torch.arange(numel, device=dev)
            if init[0] == "cuts":  # an offsets table, one longer than the shares: 0, where each next one starts..., N
                t = i * n // max(numel - 1, 1)
            else:  # where entry i's share starts, or ends, or its size
                start, end = i * n // numel, (i + 1) * n // numel
                t = {"even": start, "even_end": end, "split": end - start}[init[0]]
            t = t.view(shape)
        elif init[0] == "starts":  # where each sequence starts, the lengths in input init[1] laid end to end
            ends = torch.cumsum(scope[init[1]].flatten().to(torch.int64), 0)
            t = torch.cat([ends.new_zeros(1), ends])[:numel].view(shape)
        elif init[0] == "upto":  # each at most the same entry of input init[1] (a prefix of each sequence)
            whole = scope[init[1]].flatten().to(torch.int64)[:numel]
            t = (torch.rand(numel, generator=generator, device=dev, dtype=torch.float64) * (whole + 1)).long()
            t = torch.minimum(t, whole).view(shape)
        elif init[0] == "chunks":  # (sequence, chunk) of each BT-token chunk of the sequences offsets init[1] bound
            cu, bt = scope[init[1]].flatten().to(torch.int64), int(size_value(init[2], dims))
            n = (cu[1:] - cu[:-1] + bt - 1) // bt
            seq = torch.repeat_interleave(torch.arange(len(n), device=dev), n)
            chunk = torch.arange(len(seq), device=dev) - torch.repeat_interleave(torch.cumsum(n, 0) - n, n)
            t = torch.stack([seq, chunk], 1).flatten()[:numel]
            t = torch.cat([t, t.new_zeros(numel - len(t))]).view(shape)
        elif init[0] == "onehot":  # a single 1 in each row (a top-k choice among the last axis's experts)
            t = torch.nn.functional.one_hot(torch.randint(0, shape[-1], shape[:-1], generator=generator, device=dev),
                                            shape[-1])
        elif init[0] == "rand":  # uniform in [0, 1): probabilities
            t = torch.rand(shape, generator=generator, device=dev, dtype=drawn(dtype))
        elif init[0] == "around1":
            t = 1.0 + 0.1 * torch.randn(shape, generator=generator, device=dev, dtype=drawn(dtype))
        else:
            t = torch.randn(shape, generator=generator, device=dev, dtype=drawn(dtype))
        return t.to(dtype).transpose(-1, -2) if spec.get("transposed") else t.to(dtype)

    for name, spec in sorted(SPEC.items(), key=later):  # offsets after the lengths they add up
        if spec != "default:":  # else left to the launcher's own default
            args[name] = make(spec, args)
    return args
