"""Under Triton's interpreter the CPU plays the GPU's part. Launchers and kernels written for the GPU ask things of it
that the CPU build of torch and the interpreter cannot answer; ``install()`` answers them, in the interpreter worker
only, so a task runs there as it runs on an H200:

- a CPU tensor answers ``is_cuda`` with True (launchers ``assert x.is_cuda``);
- ``torch.cuda.get_device_capability``, ``get_device_properties`` and ``current_device`` describe one H200, and
  ``torch.cuda.device(...)`` and ``torch.get_device_module(x.device).device(...)`` are contexts that do nothing;
- the libdevice functions (``tl.extra.cuda.libdevice.round``, ``from triton.language.extra.libdevice import tanh``),
  which the interpreter cannot call, compute with numpy.

``torch.cuda.is_available()`` stays False: code that takes a CUDA path on it would allocate on a GPU that is not there.
"""

from __future__ import annotations

import contextlib
import importlib
import math
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import torch

# Hopper's figures (compute capability 9.0, 132 SMs on the SXM H200, 227 KiB shared memory per block).
_H200 = SimpleNamespace(name="NVIDIA H200 (interpreter stand-in)", major=9, minor=0, multi_processor_count=132,
                        total_memory=141 * 10**9, L2_cache_size=50 * 2**20, warp_size=32,
                        max_threads_per_multi_processor=2048, regs_per_multiprocessor=65536,
                        shared_memory_per_block=48 * 2**10, shared_memory_per_block_optin=227 * 2**10,
                        shared_memory_per_multiprocessor=228 * 2**10, gcnArchName="", is_integrated=False)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


_erf = np.vectorize(math.erf, otypes=[np.float64])

# libdevice's names (without the fp32 ``f`` suffix, ``fast_`` prefix or rounding-mode suffix) -> numpy.
_LIBDEVICE: dict[str, Callable[..., Any]] = {
    "abs": np.abs, "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": _round_half_away,
    "rint": np.rint, "nearbyint": np.rint, "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x),
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "rcp": lambda x: 1.0 / x, "cbrt": np.cbrt, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "erf": _erf,
    "pow": np.power, "powi": np.power, "fmin": np.fmin, "fmax": np.fmax, "min": np.minimum, "max": np.maximum,
    "fmod": np.fmod, "copysign": np.copysign, "hypot": np.hypot, "fma": lambda a, b, c: a * b + c,
    "div": np.divide, "dividef": np.divide, "mul": np.multiply, "add": np.add, "sub": np.subtract,
    "isnan": np.isnan, "isinf": np.isinf, "signbit": np.signbit, "finitef": np.isfinite, "isfinited": np.isfinite,
}
_PREDICATES = {"isnan", "isinf", "signbit", "finitef", "isfinited"}


def _stem(name: str) -> str | None:
    """The table's key for a libdevice function name: ``fast_expf`` -> ``exp``, ``div_rn`` -> ``div``."""
    for cand in (name, name.removeprefix("fast_")):
        for suffix in ("", "_rn", "_rz", "_rd", "_ru"):
            base = cand.removesuffix(suffix) if suffix else cand
            for key in (base, base.removesuffix("f")):
                if key in _LIBDEVICE:
                    return key
    return None


def _libdevice_fn(name: str, key: str) -> Callable[..., Any]:
    from triton import language as tl
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype

    fn = _LIBDEVICE[key]

    def call(*args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in args if isinstance(a, tl.tensor)]
        floats = [a.dtype for a in tensors if a.dtype.is_floating()]
        dtype = floats[0] if floats else tl.float32
        if dtype not in (tl.float16, tl.float32, tl.float64):
            raise TypeError(f"libdevice.{name} takes fp32 or fp64 arguments, not {dtype}")
        values = [a.handle.data if isinstance(a, tl.tensor) else a.value if isinstance(a, tl.constexpr) else a
                  for a in args]
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*values))
        rtype = tl.int1 if key in _PREDICATES else dtype
        out = out.astype(_get_np_dtype(rtype))
        shape = [int(s) for s in out.shape]
        return tl.tensor(TensorHandle(out, rtype), tl.block_type(rtype, shape) if shape else rtype)

    call.__name__ = name
    return call


def _patch_libdevice() -> None:
    for module_name in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in dir(module):
            key = _stem(name) if not name.startswith("_") and callable(getattr(module, name)) else None
            if key is not None:
                setattr(module, name, _libdevice_fn(name, key))


def install() -> None:
    torch.Tensor.is_cuda = property(lambda self: self.device.type in ("cuda", "cpu"))  # type: ignore[assignment]
    torch.cuda.get_device_capability = lambda device=None: (_H200.major, _H200.minor)
    torch.cuda.get_device_properties = lambda device=None: _H200
    torch.cuda.current_device = lambda: 0
    torch.cuda.device = lambda device=None: contextlib.nullcontext()  # type: ignore[assignment,misc]
    torch.cpu.device = lambda device=None: contextlib.nullcontext()  # type: ignore[attr-defined]
    _patch_libdevice()
