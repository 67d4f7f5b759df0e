"""The one tolerance table, and the comparison every check uses.

A float output passes when all three hold:
- elementwise ``|out - ref| <= atol + rtol * |ref|`` on finite positions;
- relative RMS ``||out - ref|| / ||ref||`` at most ``rel_rms`` (computed in float64);
- NaN and infinity positions (and the sign of infinities) match exactly.

Integer and bool outputs must be bit-exact. The float rows are sized for a different reduction order or a different
(but not lower) accumulation precision: an fp32 kernel that accumulates in bf16 fails, a bf16 kernel whose results
differ in the last bit on a few elements passes.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass
from typing import Any

# name in task.yaml -> torch dtype attribute name
DTYPES: dict[str, str] = {
    "fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "bool": "bool",
}


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    rel_rms: float


TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(atol=1e-10, rtol=1e-9, rel_rms=1e-10),
    "float32": Tolerance(atol=1e-5, rtol=1e-4, rel_rms=1e-5),
    "float16": Tolerance(atol=1e-3, rtol=2e-3, rel_rms=1e-3),
    "bfloat16": Tolerance(atol=1e-2, rtol=1.6e-2, rel_rms=5e-3),
    "float8_e4m3fn": Tolerance(atol=1.25e-1, rtol=1.25e-1, rel_rms=6e-2),
    "float8_e5m2": Tolerance(atol=2.5e-1, rtol=2.5e-1, rel_rms=1.2e-1),
}
# ROCm's fp8 (no negative zero; its bit pattern is the one NaN) has the same mantissas, so the same rows
TOLERANCES["float8_e4m3fnuz"] = TOLERANCES["float8_e4m3fn"]
TOLERANCES["float8_e5m2fnuz"] = TOLERANCES["float8_e5m2"]


@dataclass(frozen=True)
class Mismatch:
    """Why two values differ: a short reason and the numbers behind it, for the search's feedback."""

    path: str
    reason: str
    max_abs: float | None = None
    rel_rms: float | None = None
    bad_fraction: float | None = None

    def __str__(self) -> str:
        parts = [f"{self.path}: {self.reason}"]
        if self.max_abs is not None:
            parts.append(f"max_abs={self.max_abs:.3g}")
        if self.rel_rms is not None:
            parts.append(f"rel_rms={self.rel_rms:.3g}")
        if self.bad_fraction is not None:
            parts.append(f"bad={self.bad_fraction:.2%}")
        return " ".join(parts)


def tolerance_for(dtype: Any) -> Tolerance | None:
    """The row for a torch dtype, or None for integer and bool dtypes (bit-exact)."""
    return TOLERANCES.get(str(dtype).removeprefix("torch."))


# Elements compared at a time. A comparison in float64 of a whole KV cache (800M elements) took some 40 GB of GPU
# memory beside the task's own (two float64 copies, and the indices of a boolean mask over four dims); a chunk takes a
# few hundred MB.
CHUNK = 1 << 25


def _chunks(out: Any, ref: Any, chunk: int) -> Any:
    """The flattened ``out`` and ``ref``, ``chunk`` elements at a time."""
    o, r = out.detach().reshape(-1), ref.detach().reshape(-1)
    for i in range(0, o.numel(), chunk):
        yield o[i:i + chunk], r[i:i + chunk]


def compare_tensors(out: Any, ref: Any, path: str, exact: bool = False, chunk: int = CHUNK) -> Mismatch | None:
    """Compare one tensor with its reference. ``exact`` demands bit equality (NaN positions matching) for floats too.
    The elements are compared ``chunk`` at a time; the verdict and its numbers are those of the whole tensor."""
    import torch

    if not isinstance(out, torch.Tensor):
        return Mismatch(path, f"expected a tensor, got {type(out).__name__}")
    if out.shape != ref.shape:
        return Mismatch(path, f"shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Mismatch(path, f"dtype {out.dtype} != {ref.dtype}")
    if out.device != ref.device:
        return Mismatch(path, f"device {out.device} != {ref.device}")
    if out.numel() == 0:
        return None
    tol = tolerance_for(ref.dtype)
    if tol is None:
        if torch.equal(out, ref):
            return None
        differ = sum(int((o != r).sum()) for o, r in _chunks(out, ref, chunk))
        return Mismatch(path, "not bit-exact", bad_fraction=differ / out.numel())
    nan_differ = finite = bad = 0
    inf_differ, bit_differ = False, 0
    max_abs = err2 = ref2 = 0.0
    for oc, rc in _chunks(out, ref, chunk):
        o, r = oc.to(torch.float64), rc.to(torch.float64)
        nan_o, nan_r = o.isnan(), r.isnan()
        if exact:  # bit equality, NaN positions matching
            bit_differ += int(((o != r) & ~(nan_o & nan_r)).sum())
            continue
        nan_differ += int((nan_o ^ nan_r).sum())
        inf_o, inf_r = o.isinf(), r.isinf()
        inf_differ |= not torch.equal(inf_o, inf_r) or not torch.equal(o[inf_o], r[inf_r])
        ok = ~(nan_r | inf_r)
        finite += int(ok.sum())
        diff = torch.where(ok, o - r, 0.0)
        rr = torch.where(ok, r, 0.0)
        err = diff.abs()
        bad += int((err > tol.atol + tol.rtol * rr.abs()).sum())
        max_abs = max(max_abs, float(err.max()))
        err2 += float((diff * diff).sum())
        ref2 += float((rr * rr).sum())
    if exact:
        return None if not bit_differ else Mismatch(path, "not bit-exact", bad_fraction=bit_differ / out.numel())
    if nan_differ:
        return Mismatch(path, "NaN positions differ", bad_fraction=nan_differ / out.numel())
    if inf_differ:
        return Mismatch(path, "infinity positions differ")
    if not finite:
        return None
    rel_rms = err2 ** 0.5 / max(ref2 ** 0.5, 1e-30)
    if bad or rel_rms > tol.rel_rms:
        why = "outside atol/rtol" if bad else "relative RMS error too large"
        return Mismatch(path, why, max_abs=max_abs, rel_rms=rel_rms, bad_fraction=bad / finite)
    return None


def compare(out: Any, ref: Any, path: str = "out", exact: bool = False) -> Mismatch | None:
    """Compare a returned structure (tensor, tuple/list, dict, None or scalar) with the reference structure."""
    import torch

    if isinstance(ref, torch.Tensor):
        return compare_tensors(out, ref, path, exact)
    if isinstance(ref, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(ref):
            return Mismatch(path, f"expected a sequence of {len(ref)}, got {type(out).__name__}")
        for i, (o, r) in enumerate(zip(out, ref)):
            m = compare(o, r, f"{path}[{i}]", exact)
            if m is not None:
                return m
        return None
    if isinstance(ref, dict):
        if not isinstance(out, dict) or set(out) != set(ref):
            return Mismatch(path, "expected a dict with the same keys")
        for k in ref:
            m = compare(out[k], ref[k], f"{path}[{k!r}]", exact)
            if m is not None:
                return m
        return None
    fields = fields_of(ref)
    if fields is not None:  # a result record (a dataclass, a msgspec.Struct, a plain object): field by field
        theirs = fields_of(out)
        if type(out).__name__ != type(ref).__name__ or theirs is None or set(theirs) != set(fields):
            return Mismatch(path, f"expected a {type(ref).__name__} with fields {sorted(fields)}, got "
                                  f"{type(out).__name__}")
        for k in fields:
            m = compare(theirs[k], fields[k], f"{path}.{k}", exact)
            if m is not None:
                return m
        return None
    if isinstance(out, torch.Tensor) or out != ref:
        return Mismatch(path, f"{out!r} != {ref!r}")
    return None


def fields_of(value: Any) -> dict[str, Any] | None:
    """The fields of a result record, by name: a dataclass's, a ``msgspec.Struct``'s (``__struct_fields__``), or a
    plain object's attributes; None for anything else (numbers, strings, tensors, types, functions, modules)."""
    import torch

    if isinstance(value, (torch.Tensor, type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                          torch.dtype, torch.device, int, float, complex, str, bytes, bool)) or value is None:
        return None
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    names = getattr(type(value), "__struct_fields__", None)
    if isinstance(names, tuple):
        return {n: getattr(value, n) for n in names}
    attrs = getattr(value, "__dict__", None)
    return dict(attrs) if isinstance(attrs, dict) and attrs else None
