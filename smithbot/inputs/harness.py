"""The task's harness.py: the input specs (``inputs/specs.py``) and the interpreter of them that every harness
carries, so that a task directory needs nothing of smithbot to make its inputs. Its arithmetic over the case's dims
is ``smithbot.inputs.sizes.size_value``, and the kinds drawn in more than one step are ``smithbot.inputs.draw``'s:
every harness embeds their source, as the generated test does."""

from __future__ import annotations

import inspect
from typing import Any

from smithbot.inputs.draw import HELPERS
from smithbot.inputs.layouts import builder_source
from smithbot.inputs.plan import nested
from smithbot.inputs.sizes import size_value


# read once, at import: every harness of a run embeds the same function, even if the file changes on disk meanwhile
_SIZE_VALUE_SOURCE = inspect.getsource(size_value).strip()

HARNESS = '''"""Inputs for {wrapper}, written by smithbot extract ({how})."""

import ast
import types

import torch

inf = float("inf")  # as repr writes an infinite literal (dt_limit=(0.0, inf))
SPEC = {spec!r}
EXTRA_DIMS = {extra!r}
GATHERED = {gathered!r}  # inputs read only through an index: their size is not what a call moves
_DTYPES = {{"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int32": torch.int32,
           "fp8_e4m3": torch.float8_e4m3fn, "int8": torch.int8, "uint8": torch.uint8,
           "int64": torch.int64, "bool": torch.bool, "complex64": torch.complex64}}
# bytes read as packed fp4 pairs or e8m0 exponents (MX formats): drawn as bytes, since torch has no arithmetic on them
_BYTE_DTYPES = {{n: getattr(torch, t) for n, t in (("fp4x2", "float4_e2m1fn_x2"), ("e8m0", "float8_e8m0fnu"))
                if hasattr(torch, t)}}
_DTYPES.update(_BYTE_DTYPES)


{value_fn}


{draw_fns}
{layout_fns}

def make_inputs(case, generator):
    dims = {{k: v for k, v in case.items() if isinstance(v, int) and not isinstance(v, bool)}}
    for k, v in EXTRA_DIMS.items():  # the interpreter's case may carry its own, smaller, value
        dims.setdefault(k, size_value(v, dims))
    dev = generator.device
    args = {{}}
    layouts = {{}}

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
            attrs = {{}}  # an attribute's starts: may name a sibling's lengths
            for k, v in sorted(spec["object"].items(), key=later):
                attrs[k] = make(v, attrs)
            return types.SimpleNamespace(**{{k: attrs[k] for k in spec["object"]}})
        if "items" in spec:
            return [make(v, scope) for v in spec["items"]]
        if "layout" in spec:  # a field of a layout instance, built once per case with its sizes
            key = (spec["layout"], repr(sorted(spec["sizes"].items())))
            if key not in layouts:
                sizes = {{k: size_value(v, dims) for k, v in spec["sizes"].items()}}
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
        elif init[0] == "perm":
            t = _perm(int(size_value(init[1], dims)), shape, generator)
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
                t = {{"even": start, "even_end": end, "split": end - start}}[init[0]]
            t = t.view(shape)
        elif init[0] == "starts":  # of the lengths in input init[1]
            t = _starts(scope[init[1]], numel).view(shape)
        elif init[0] == "upto":  # each at most the same entry of input init[1]
            t = _upto(scope[init[1]], numel, generator).view(shape)
        elif init[0] == "chunks":  # of the sequences at the offsets in input init[1], init[2] tokens each
            t = _chunks(scope[init[1]], int(size_value(init[2], dims)), numel).view(shape)
        elif init[0] == "onehot":  # a single 1 in each row (a top-k choice among the last axis's experts)
            t = torch.nn.functional.one_hot(torch.randint(0, shape[-1], shape[:-1], generator=generator, device=dev),
                                            shape[-1])
        elif init[0] == "rand":  # uniform in [0, 1): probabilities
            t = torch.rand(shape, generator=generator, device=dev, dtype=_drawn(dtype))
        elif init[0] == "around1":
            t = 1.0 + 0.1 * torch.randn(shape, generator=generator, device=dev, dtype=_drawn(dtype))
        else:
            t = torch.randn(shape, generator=generator, device=dev, dtype=_drawn(dtype))
        return t.to(dtype).transpose(-1, -2) if spec.get("transposed") else t.to(dtype)

    later = lambda item: isinstance(item[1], dict) and str(item[1].get("init", "")).startswith(("starts:", "chunks:", "upto:"))
    for name, spec in sorted(SPEC.items(), key=later):  # offsets after the lengths they add up
        if spec != "default:":  # else left to the launcher's own default
            args[name] = make(spec, args)
    return args
'''


def harness_source(wrapper: str, specs: dict[str, Any], extra: dict[str, Any], how: str,
                   gathered: tuple[str, ...] = ()) -> str:
    used = sorted({s["layout"] for s in nested(specs) if "layout" in s})
    layout_fns = "".join(f"\n\n{builder_source(n)}\n" for n in used) + "\n\nLAYOUT_BUILDERS = {" + ", ".join(
        f"{n!r}: build_{n}" for n in used) + "}\n"
    return HARNESS.format(wrapper=wrapper, how=how, spec=specs, extra=extra, gathered=gathered,
                          value_fn=_SIZE_VALUE_SOURCE, draw_fns="\n\n\n".join(HELPERS.values()), layout_fns=layout_fns)
