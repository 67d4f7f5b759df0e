"""Under Triton's interpreter the CPU plays the GPU's part. Launchers and kernels written for the GPU ask things of it
that the CPU build of torch and the interpreter cannot answer; ``install()`` answers them, in the interpreter worker
only, so a task runs there as it runs on an H200:

- a CPU tensor answers ``is_cuda`` with True (launchers ``assert x.is_cuda``), and what a launcher allocates on the
  GPU (``device="cuda"``, or the name of another accelerator a vendor's launcher names: ``"npu"``, ``"mlu"``) or
  moves there (``.to("cuda")``, ``.cuda()``) stays on the CPU;
- ``torch.cuda.get_device_capability``, ``get_device_properties`` and ``current_device`` describe one H200, and
  ``torch.cuda.device(...)`` and ``torch.get_device_module(x.device).device(...)`` are contexts that do nothing;
- the libdevice functions (``tl.extra.cuda.libdevice.round``, ``from triton.language.extra.libdevice import tanh``),
  which the interpreter cannot call, compute with numpy;
- where the installed triton has removed block pointers (3.9), ``tl.make_block_ptr``, ``tl.advance`` and
  ``tl.load``/``tl.store`` with ``boundary_check`` work as they do in the triton releases the targets run on: a block
  pointer becomes the block of plain pointers and the mask it stands for;
- a comparison's result stays boolean when it is broadcast (the interpreter filled the block with the compared
  operands' integer type, and ``tl.load`` then rejects the mask);
- ``tl.extra.cuda.gdc_wait()`` and ``gdc_launch_dependents()`` (programmatic dependent launch) do nothing, as on a
  launch without that attribute;
- the loop variable of ``tl.range`` and of ``range`` in a kernel answers ``i.to(tl.int64)`` with a triton scalar, as
  a compiled loop variable does;
- a ``tl.constexpr`` global in arithmetic with a block (``_kAlpha * x``) yields the block, as the compiler reads the
  global by its value;
- ``mask_a and mask_b`` on tensors is their elementwise ``logical_and`` (``or``: ``logical_or``), as the compiler
  reads it; the interpreter, running the kernel as Python, took one of the two masks whole;
- what kernels written for vendors' triton forks use (Cambricon's stepped slices of a tensor, DeepLink's
  ``triton.language.extra.deeplink``): see ``evaluator/forks.py``.

``torch.cuda.is_available()`` stays False: code that takes a CUDA path on it would allocate on a GPU that is not there.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import importlib
import math
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import torch

from evaluator import forks
from evaluator.interpreted import scalar, unwrap

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


class _BlockPtr:
    """A block pointer: a base pointer, the parent tensor's shape and strides, and the block's offsets and shape."""

    def __init__(self, base: Any, shape: list[int], strides: list[int], offsets: list[int], block: list[int]) -> None:
        self.base, self.shape, self.strides, self.offsets, self.block = base, shape, strides, offsets, block
        self.dtype = base.dtype  # p.dtype.element_ty: what the block holds

    def pointers(self, boundary_check: Any) -> tuple[Any, Any]:
        """The block of pointers, and the mask of those inside the parent tensor along ``boundary_check``'s dims."""
        from triton import language as tl
        from triton.runtime.interpreter import TensorHandle

        pointer = self.base.dtype
        size = max(pointer.element_ty.primitive_bitwidth // 8, 1)
        index = np.zeros(self.block, dtype=np.int64)
        inside = np.ones(self.block, dtype=bool)
        checked = {int(scalar(d)) for d in (boundary_check or ())}
        for d, (offset, n, stride, extent) in enumerate(zip(self.offsets, self.block, self.strides, self.shape)):
            i = (offset + np.arange(n, dtype=np.int64)).reshape([-1 if k == d else 1 for k in range(len(self.block))])
            index = index + i * stride
            if d in checked:
                inside = inside & (i >= 0) & (i < extent)
        base = int(np.asarray(self.base.handle.data).reshape(-1)[0])
        addr = (base + index * size).astype(np.uint64)
        ptrs = tl.tensor(TensorHandle(addr, pointer), tl.block_type(pointer, list(self.block)))
        mask = tl.tensor(TensorHandle(inside, tl.int1), tl.block_type(tl.int1, list(self.block))) if checked else None
        return ptrs, mask


def _patch_block_pointers() -> None:
    from triton import language as tl
    from triton.language import core

    if "have been removed" not in (core.make_block_ptr.__doc__ or ""):
        return  # this triton's interpreter has block pointers of its own
    load, store = core.load, core.store

    def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any, order: Any,
                       _semantic: Any = None) -> _BlockPtr:
        ints = lambda xs: [scalar(x) for x in xs]  # noqa: E731
        return _BlockPtr(base, ints(shape), ints(strides), ints(offsets), ints(block_shape))

    def advance(base: _BlockPtr, offsets: Any, _semantic: Any = None) -> _BlockPtr:
        moved = [o + scalar(d) for o, d in zip(base.offsets, offsets)]
        return _BlockPtr(base.base, base.shape, base.strides, moved, base.block)

    def block_load(pointer: Any, mask: Any = None, other: Any = None, boundary_check: Any = (),
                   padding_option: Any = "", cache_modifier: str = "", eviction_policy: str = "", volatile: bool = False,
                   _semantic: Any = None) -> Any:
        if isinstance(pointer, _BlockPtr):
            pointer, mask = pointer.pointers(boundary_check)
            other = float("nan") if mask is not None and str(unwrap(padding_option)) == "nan" else None
        return load(pointer, mask, other, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                    volatile=volatile, _semantic=_semantic)

    def block_store(pointer: Any, value: Any, mask: Any = None, boundary_check: Any = (), cache_modifier: str = "",
                    eviction_policy: str = "", _semantic: Any = None) -> Any:
        if isinstance(pointer, _BlockPtr):
            pointer, mask = pointer.pointers(boundary_check)
        return store(pointer, value, mask, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                     _semantic=_semantic)

    for name, fn in (("make_block_ptr", make_block_ptr), ("advance", advance), ("load", block_load),
                     ("store", block_store)):
        setattr(fn, core.TRITON_BUILTIN, True)
        setattr(core, name, fn)
        setattr(tl, name, fn)


ACCELERATORS = ("cuda", "npu", "mlu")


def _accelerator(device: Any) -> bool:
    return isinstance(device, (str, torch.device)) and str(device).split(":")[0] in ACCELERATORS


class _AllocateOnCpu(torch.overrides.TorchFunctionMode):
    """Every torch call's ``device=`` naming an accelerator becomes the CPU, as do ``Tensor.to``'s device argument
    and ``Tensor.cuda()``."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if _accelerator(kwargs.get("device")):
            kwargs["device"] = "cpu"
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to:
            args = tuple("cpu" if _accelerator(a) else a for a in args)
        return func(*args, **kwargs)


def install() -> None:
    _AllocateOnCpu().__enter__()  # for the worker's life, as torch.set_default_device does with its own mode
    torch.Tensor.is_cuda = property(lambda self: self.device.type in ("cuda", "cpu"))  # type: ignore[assignment]
    torch.cuda.get_device_capability = lambda device=None: (_H200.major, _H200.minor)
    torch.cuda.get_device_properties = lambda device=None: _H200
    torch.cuda.current_device = lambda: 0
    torch.cuda.device = lambda device=None: contextlib.nullcontext()  # type: ignore[assignment,misc]
    torch.cpu.device = lambda device=None: contextlib.nullcontext()  # type: ignore[attr-defined]
    _patch_libdevice()
    _patch_block_pointers()
    _patch_range()
    _patch_interpreter_ops()
    _patch_boolean_operators()
    _patch_constexpr_arithmetic()
    forks.install()


def _half_atomics(native: Callable[..., Any]) -> Callable[..., Any]:
    """``tl.atomic_add`` / ``max`` / ``min`` / ``xchg`` on fp16 and bf16, which the interpreter's native helper
    rejects ("Unsupported data type"): done element by element, in order, through fp32, rounded back to the
    tensor's type (the interpreter runs one program at a time, so each read-modify-write is whole)."""
    from triton import language as tl
    from triton._C.libtriton import ir
    from triton.runtime import interpreter

    combine = {ir.ATOMIC_OP.FADD: np.add, ir.ATOMIC_OP.MAX: np.maximum, ir.ATOMIC_OP.MIN: np.minimum,
               ir.ATOMIC_OP.XCHG: lambda old, new: new}

    def rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *rest: Any) -> Any:
        dtype = val.dtype.scalar
        if dtype not in (tl.float16, tl.bfloat16) or op not in combine:
            return native(self, op, ptr, val, mask, *rest)
        bf16 = dtype == tl.bfloat16  # bf16 travels as its uint16 bit pattern, fp16 as np.float16
        values = np.asarray(val.data)
        new_bits = values.reshape(-1).view(np.uint16)
        addresses, active = np.asarray(ptr.data).reshape(-1), np.broadcast_to(mask.data, ptr.data.shape).reshape(-1)
        old = np.zeros_like(new_bits)

        def to_f32(bits: np.ndarray) -> np.ndarray:
            return (bits.astype(np.uint32) << 16).view(np.float32) if bf16 else bits.view(np.float16).astype(
                np.float32)

        def from_f32(x: np.ndarray) -> np.ndarray:
            if not bf16:
                return x.astype(np.float16).view(np.uint16)
            u = x.astype(np.float32).view(np.uint32)
            return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest, ties to even

        for i in np.flatnonzero(active):
            cell = ctypes.c_uint16.from_address(int(addresses[i]))
            old[i] = cell.value
            cell.value = int(from_f32(combine[op](to_f32(old[i:i + 1]), to_f32(new_bits[i:i + 1])))[0])
        return interpreter.TensorHandle(old.view(values.dtype).reshape(values.shape), dtype)

    return rmw


def _patch_boolean_operators() -> None:
    """``a and b`` / ``a or b`` in a kernel, as the compiler reads them: an operand that is no triton tensor (a
    constexpr, a Python value) short-circuits as in Python, and the tensors left are combined elementwise with
    ``logical_and`` / ``logical_or``. The interpreter runs the kernel as Python, where ``mask_a and mask_b`` asks
    ``bool(mask_a)`` and yields one of the two masks whole, so a load it guards reads out of bounds."""
    from triton import language as tl
    from triton.runtime import interpreter

    transformer = interpreter.ASTTransformer
    if getattr(transformer, "visit_BoolOp", None) is not None:  # a triton whose interpreter does this itself
        return

    def boolean(method: str, *operands: Callable[[], Any]) -> Any:
        tensors = []
        for operand in operands:  # evaluated lazily, left to right, as Python and the compiler do
            value = operand()
            if isinstance(value, tl.tensor):
                tensors.append(value)
            elif bool(value) == (method == "logical_or"):  # False for `and`, True for `or`: the result
                return value
        if not tensors:
            return value
        result = tensors.pop()
        while tensors:
            result = getattr(tensors.pop(), method)(result)
        return result

    def visit_BoolOp(self: Any, node: ast.BoolOp) -> ast.AST:
        node = self.generic_visit(node)
        method = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
        thunks = [ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                             body=v) for v in node.values]
        call = ast.Call(func=ast.Name(id="_smithbot_boolean", ctx=ast.Load()), args=[ast.Constant(method), *thunks],
                        keywords=[])
        return ast.copy_location(call, node)

    interpreter._smithbot_boolean = boolean  # the interpreter hands its module's names to the kernels it rewrites
    transformer.visit_BoolOp = visit_BoolOp


_CONSTEXPR_OPS = ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv", "rfloordiv", "mod",
                  "rmod", "pow", "rpow", "and", "rand", "or", "ror", "xor", "rxor", "lshift", "rlshift", "rshift",
                  "rrshift", "gt", "ge", "lt", "le", "eq", "ne")


def _patch_constexpr_arithmetic() -> None:
    """``_kAlpha * x``, with ``_kAlpha = tl.constexpr(0.79)`` a module global and ``x`` a block: the block, as the
    compiler reads a constexpr global by its value. The interpreter, running the kernel as Python, let the
    constexpr's operator wrap the resulting block in a constexpr, which the next ``tl`` call rejects."""
    from triton import language as tl

    cls = tl.constexpr
    if getattr(cls, "_smithbot_unwrapped", False):
        return
    for op in _CONSTEXPR_OPS:
        original = getattr(cls, f"__{op}__", None)
        if original is None:
            continue

        def method(self: Any, other: Any, _original: Callable[..., Any] = original) -> Any:
            result = _original(self, other)
            value = getattr(result, "value", None)
            return value if isinstance(result, cls) and isinstance(value, tl.tensor) else result

        setattr(cls, f"__{op}__", method)
    cls._smithbot_unwrapped = True


def _patch_range() -> None:
    """Each launch, after the interpreter maps ``tl.range`` to Python's ``range``, map it and the kernel module's
    ``range`` to one yielding loop indices; the interpreter's restore undoes both after the launch."""
    from triton import language as tl
    from triton.runtime import interpreter

    patch_lang = interpreter._patch_lang

    class LoopIndex(int):
        """A loop variable: an int, so arithmetic on it stays as fast as the interpreter's own loops, which also
        answers ``i.to(dtype)`` with a triton scalar, as a compiled loop variable does."""

        def to(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
            value = np.array([int(self)]).astype(interpreter._get_np_dtype(dtype))
            return tl.tensor(interpreter.TensorHandle(value, dtype), dtype)

    def indices(arg1: Any, arg2: Any = None, step: Any = None, **options: Any) -> Any:
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        return map(LoopIndex, range(scalar(start), scalar(end), 1 if step is None else scalar(step)))

    def patched(fn: Any) -> Any:
        scope = patch_lang(fn)
        scope.set_attr(tl, "range", indices)
        scope.set_attr(_Namespace(fn.__globals__), "range", indices)
        return scope

    interpreter._patch_lang = patched


class _Namespace:
    """A module's globals as attributes, so the interpreter's patch scope can set and restore a name in them."""

    def __init__(self, names: dict[str, Any]) -> None:
        object.__setattr__(self, "_names", names)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._names[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._names[name] = value

    def __delattr__(self, name: str) -> None:
        del self._names[name]


def _patch_interpreter_ops() -> None:
    from triton.language import core
    from triton.language.extra import cuda
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    splat = builder.create_splat

    def boolean_splat(self: Any, ret_ty: Any, arg: Any) -> Any:
        out = splat(self, ret_ty, arg)
        if np.asarray(arg.data).dtype == np.bool_:
            out.data = out.data.astype(np.bool_)
        return out

    builder.create_splat = boolean_splat
    builder.create_atomic_rmw = _half_atomics(builder.create_atomic_rmw)
    for name in ("gdc_wait", "gdc_launch_dependents"):
        if hasattr(cuda, name):
            nothing = lambda *args, _semantic=None, **kwargs: None  # noqa: E731
            setattr(nothing, core.TRITON_BUILTIN, True)
            setattr(cuda, name, nothing)
