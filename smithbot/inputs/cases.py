"""Shape cases for an extracted task: the interpreter's one small case, and the GPU's cases from the presets and
phases whose default serving path runs the kernel, each sized to fit beside the evaluator's other workers."""

from __future__ import annotations

from typing import Any

from smithbot.config import ModelPreset, Target
from smithbot.inputs.sizes import DIMS, MOE_INTERPRETER_CAPS, SMALL_CAPS, InputError, names_in, size_value
from smithbot.types import InputPlan, TensorSpec, spec_parts


# Inputs of one GPU case may take at most this many bytes. The evaluator runs 3 workers on each GPU, and each holds
# four or five copies of one case's inputs at a time (the inputs, the baseline's and the candidate's fresh copies,
# their outputs; it frees them before the next case's): 8 GiB of inputs is at most about 120 GB of an H200's 141.
CASE_BYTES = 8 << 30
MAX_ELEMENTS = 2**31 - 1  # a tensor's element offsets must fit the int32 arithmetic kernels index it with
_ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2, "act": 2, "int32": 4, "int64": 8, "int8": 1, "uint8": 1, "bool": 1,
             "complex64": 8, "fp8_e4m3": 1, "fp4x2": 1, "e8m0": 1}


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def footprint(plan: InputPlan, dims: dict[str, int]) -> tuple[int, int]:
    """(bytes of the tensors of ``plan`` at ``dims``, elements of the largest one). Layouts' fields, a few index
    tables beside the tensors they index, and what a method returns are not counted."""
    dims = dict(dims)
    for k, v in plan.extra:
        dims.setdefault(k, size_value(v, dims))
    sizes: list[tuple[int, int]] = []
    for spec in (part for _, s in plan.params for part in spec_parts(s, returns=False)):
        if isinstance(spec, TensorSpec):
            n = 1
            for d in spec.shape:
                n *= int(size_value(d, dims))
            sizes.append((n * _ITEMSIZE.get(str(spec.dtype or "act"), 4), n))
    return sum(b for b, _ in sizes), max((n for _, n in sizes), default=0)


def cases(plan: InputPlan, target: Target, wrapper: str,
          also: tuple[str, ...] = (), budget: int = CASE_BYTES) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(cases, skipped): decode and prefill cases named after the model presets whose dims the inputs need, and the
    dims ``also`` names (or the YAML's _models): those that run the kernel (``target.reach_presets``) when any fits,
    one case set per distinct set of dims, in the phases serving runs it in (``target.reach_phases``). A case whose
    inputs take more than ``budget`` bytes, or hold a tensor past int32 offsets, is shrunk (a MoE layer's experts
    halved down to its top-k while fewer tokens alone could not fit, a prefill's tokens halved down to 256) or, when
    that is not enough, skipped, and ``skipped`` says why."""
    used = set(also).union(*[names_in(s) for _, s in plan.params], *[names_in(v) for _, v in plan.extra])
    needed = [d for d in DIMS if d in used]
    allowed = target.inputs.get(wrapper, {}).get("_models")
    # the dim a case too large shrinks: a MoE layer's experts, or, where the launcher's path needs the model's
    # expert count (lmdeploy's compact fp8 GEMM runs with all 256 of DeepSeek's), the YAML's `_shrink` (their width)
    shrink = target.inputs.get(wrapper, {}).get("_shrink") or "experts"
    interpreter_dims = target.inputs.get(wrapper, {}).get("_interpreter_dims") or {}
    models: list[ModelPreset] = [m for m in target.models if all(getattr(m, d) > 0 for d in needed)
                                 and (allowed is None or m.name in allowed)]
    if not models:
        raise InputError(f"no model preset of {target.name} has {', '.join(needed)}")
    # The interpreter runs one small, irregular case: the first model's dims with head and expert counts capped, so
    # that it runs in seconds on a CPU (the same case whichever presets run the kernel).
    small = {d: min(getattr(models[0], d), SMALL_CAPS.get(d, getattr(models[0], d))) for d in needed}
    if "experts" in needed:  # a MoE layer's grouped GEMMs tile by tile in numpy: narrower still, or it takes minutes
        small.update({d: min(small[d], cap) for d, cap in MOE_INTERPRETER_CAPS.items() if d in small})
    out = [{"name": "irregular-decode-bs3", "regime": "decode", "dtype": "bf16",
            "dims": {"tokens": 3, **small, **interpreter_dims}, "interpreter": True}]
    skipped: list[dict[str, str]] = []
    # The GPU runs every named case of the presets whose default serving path runs the kernel, when scan found any
    # that fit; the same shapes under another model's name add nothing.
    seen: list[dict[str, int]] = []
    for m in [m for m in models if m.name in target.reach_presets] or models:
        dims = {d: getattr(m, d) for d in needed}
        if dims in seen:
            continue
        seen.append(dims)
        for regime, tokens, label in (("decode", 1, "bs1"), ("decode", 64, "bs64"), ("prefill", 4096, "4k")):
            if target.reach_phases and regime not in target.reach_phases:
                continue  # serving runs it only in the other phase: a decode attention never sees a 4k batch
            name = f"{m.name}-{regime}-{label}"
            case = {"tokens": tokens, **dims}
            try:
                need, largest = footprint(plan, case)
                # too large: a MoE layer's experts halve (down to its top-k, at least 8: every expert's GEMM keeps
                # its model's shape) while fewer tokens alone could not fit; a prefill's tokens halve down to 256
                def over(c: dict[str, int]) -> bool:
                    b, n = footprint(plan, c)
                    return b > budget or n > MAX_ELEMENTS

                while need > budget or largest > MAX_ELEMENTS:
                    floor = max(case.get("top_k", 1), 8) if shrink == "experts" else 128  # (128: a quant block)
                    fewer = case.get(shrink, 0) // 2 >= floor
                    if fewer and over({**case, "tokens": min(case["tokens"], 256)}):
                        case[shrink] //= 2
                    elif regime == "prefill" and case["tokens"] > 256:
                        case["tokens"] //= 2
                    elif fewer:
                        case[shrink] //= 2
                    else:
                        break
                    need, largest = footprint(plan, case)
            except (KeyError, ValueError, ZeroDivisionError, TypeError):
                need = largest = 0  # a size the estimate cannot evaluate: the evaluator's own memory check decides
            if need > budget:
                skipped.append({"name": name, "why": f"its inputs take {_size(need)}, over the {_size(budget)} a "
                                                     f"case may take beside the evaluator's other workers"})
                continue
            if largest > MAX_ELEMENTS:
                skipped.append({"name": name, "why": f"a tensor of {largest:,} elements: past 2**31, the int32 "
                                                     f"offsets Triton kernels compute overflow"})
                continue
            if case["tokens"] != tokens:
                t = case["tokens"]
                name = f"{m.name}-{regime}-{t // 1024}k" if t >= 1024 else f"{m.name}-{regime}-{t}"
            if case.get(shrink) != dims.get(shrink):  # of the model's dims[shrink]
                name += f"-{case[shrink]}experts" if shrink == "experts" else f"-{shrink}{case[shrink]}"
            out.append({"name": name, "regime": regime, "dtype": "bf16", "dims": case, "interpreter": False})
    return out, skipped
