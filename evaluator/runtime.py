"""What the worker child needs around a candidate's call: module loading, output poisoning, ATen op accounting and
Triton launch counting. Runs only inside the child process."""

from __future__ import annotations

import bisect
import contextlib
import copy
import importlib.util
import itertools
import sys
import types
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator import bounds
from evaluator.tolerances import fields_of

# ATen ops that allocate, view, cast or copy: never "compute" for the purposes of the torch-compute check.
ALLOWED_ATEN = {
    "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.empty_permuted", "aten.new_empty",
    "aten.new_empty_strided", "aten.zeros", "aten.zeros_like", "aten.ones", "aten.ones_like", "aten.full",
    "aten.full_like", "aten.new_zeros", "aten.new_ones", "aten.new_full", "aten.fill_", "aten.zero_", "aten.copy_",
    "aten._to_copy", "aten.clone", "aten.view", "aten._unsafe_view", "aten.reshape", "aten._reshape_alias",
    "aten.as_strided", "aten.t", "aten.transpose", "aten.permute", "aten.expand", "aten.squeeze", "aten.unsqueeze",
    "aten.slice", "aten.select", "aten.alias", "aten.detach", "aten.set_", "aten.lift_fresh", "aten.split",
    "aten.split_with_sizes", "aten.unbind", "aten.arange", "aten.scalar_tensor", "aten._local_scalar_dense",
    "aten.resize_", "aten.lift_fresh_copy", "aten.is_same_size", "aten.unfold", "aten.narrow", "aten.chunk",
}
_EMPTY_OPS = {"aten.empty", "aten.empty_like", "aten.empty_strided", "aten.empty_permuted", "aten.new_empty",
              "aten.new_empty_strided"}
# ATen ops that launch no kernel on a GPU: uninitialised allocations, views and metadata. Every other op a call runs
# is a kernel launch there, which is what a fusion saves (``Recorder.launches``).
NO_KERNEL = _EMPTY_OPS | {
    "aten.view", "aten._unsafe_view", "aten.reshape", "aten._reshape_alias", "aten.as_strided", "aten.t",
    "aten.transpose", "aten.permute", "aten.expand", "aten.squeeze", "aten.unsqueeze", "aten.slice", "aten.select",
    "aten.alias", "aten.detach", "aten.set_", "aten.lift_fresh", "aten.split", "aten.split_with_sizes", "aten.unbind",
    "aten.is_same_size", "aten.unfold", "aten.narrow", "aten.chunk", "aten.resize_", "aten.sym_size",
    "aten.sym_stride", "aten.sym_numel", "aten.sym_storage_offset",
}


def poison_value(dtype: torch.dtype) -> float | int | bool:
    """NaN for floats; an unlikely large value for integers; True for bools."""
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return True
    return int(torch.iinfo(dtype).max) - 0x11


class Recorder(TorchDispatchMode):
    """Records every ATen op of a call and, with ``poison``, fills every uninitialised allocation with poison.

    Working at the dispatcher catches every spelling of an allocation (``torch.empty``, ``x.new_empty``, an alias
    imported under another name) and every tensor operator (``a * b``), which a static check cannot type.
    """

    def __init__(self, poison: bool) -> None:
        super().__init__()
        self.poison = poison
        self.ops: set[str] = set()
        self.launches = 0  # the ATen ops that launch a kernel on a GPU (not in NO_KERNEL), each time one runs

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = str(func.overloadpacket)
        self.ops.add(name)
        self.launches += name not in NO_KERNEL and not LaunchCounter.inside  # the interpreter's own copies are not
        out = func(*args, **(kwargs or {}))
        if self.poison and name in _EMPTY_OPS and isinstance(out, torch.Tensor) and out.numel():
            out.fill_(poison_value(out.dtype))
        return out


class LaunchCounter:
    """Counts Triton kernel launches by wrapping ``run`` on the JIT (and interpreter) function classes. Under the
    interpreter it also passes a list grid (``k[[n]](...)``, which the GPU launcher accepts) as a tuple."""

    count = 0
    names: set[str] = set()  # the kernels launched, by name
    # Arguments every launch of a kernel that takes them is given (``flops.count``'s counter)
    extra: dict[str, Any] | None = None
    inside = 0  # > 0 while a launch runs: the interpreter's torch ops (its argument copies) are part of the launch
    # With a list here, each GPU launch appends its (kernel, start, end) CUDA events, recorded behind a spin of the GPU that
    # outlasts the host's launch: the GPU then reaches the kernel with it already queued, and the events bracket the
    # kernel's own time however long the host took (no profiler start needed).
    timed: list[tuple[Any, Any]] | None = None
    SPIN_CYCLES = 1_000_000  # about 0.5 ms at the H200's clock: longer than any launch takes on the host
    _installed = False

    @classmethod
    def install(cls) -> None:
        if cls._installed:
            return
        from triton.runtime import jit

        classes: list[type] = [jit.JITFunction]
        try:
            from triton.runtime import interpreter

            classes.append(interpreter.InterpretedFunction)
        except ImportError:  # pragma: no cover - every supported triton has the interpreter
            pass
        for klass in classes:
            original = klass.run

            def run(self: Any, *args: Any, _original: Any = original, _host: bool = klass is not jit.JITFunction,
                    **kwargs: Any) -> Any:
                if LaunchCounter.extra:
                    kwargs.update({k: v for k, v in LaunchCounter.extra.items() if k in self.arg_names})
                if not kwargs.get("warmup", False):
                    LaunchCounter.count += 1
                    LaunchCounter.names.add(getattr(getattr(self, "fn", None), "__name__", "?"))
                grid = kwargs.get("grid")
                if _host and grid is not None:  # the GPU launcher takes a list grid, the interpreter only a tuple
                    kwargs["grid"] = (lambda meta, g=grid: tuple(g(meta))) if callable(grid) else tuple(grid)
                if LaunchCounter.timed is None or _host or kwargs.get("warmup", False):
                    LaunchCounter.inside += 1
                    try:
                        return _original(self, *args, **kwargs)
                    finally:
                        LaunchCounter.inside -= 1
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(LaunchCounter.SPIN_CYCLES)
                start.record()
                out = _original(self, *args, **kwargs)
                end.record()
                LaunchCounter.timed.append((getattr(getattr(self, "fn", None), "__name__", "?"), start, end))
                return out

            klass.run = run  # type: ignore[method-assign]
        cls._installed = True


_names = itertools.count()


def load_module(path: Path, label: str, interpreter: bool) -> ModuleType:
    """Import a file as a fresh module. Under the interpreter, autotuned kernels are pinned to their first config."""
    name = f"_smithbot_{label}_{next(_names)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # triton and inspect look modules up by name
    spec.loader.exec_module(module)
    if interpreter:
        for tuner in autotuners(vars(module)):
            tuner.configs = tuner.configs[:1]
        _late_bound_builtins(module)
    return module


def _late_bound_builtins(module: ModuleType) -> None:
    """Under the interpreter, a module-level alias of a ``triton.language`` builtin (``exp = tl.exp``) still names the
    builtin as it was before the interpreter patched ``tl`` for the run, and calling it raises "Did you forget to add
    @triton.jit ?". Each such alias becomes a call that looks the builtin up in its home module when it runs. On a GPU
    the alias is compiled as it is, so the GPU backend leaves the module alone."""
    import triton.language as tl

    homes = (tl, tl.math, tl.core)
    for name, value in list(vars(module).items()):
        if not callable(value) or not tl.core.is_builtin(value):
            continue
        home = next(((h, a) for h in homes for a, v in vars(h).items() if v is value), None)
        if home is not None:
            setattr(module, name, lambda *args, _home=home, **kwargs: getattr(*_home)(*args, **kwargs))


def autotuners(names: dict[str, Any]) -> list[Any]:
    """The ``triton.autotune`` wrappers among a module's names (``@autotune`` over ``@heuristics`` over ``@jit``
    included)."""
    from triton.runtime.autotuner import Autotuner

    out = []
    for value in list(names.values()):
        fn = value
        while fn is not None:
            if isinstance(fn, Autotuner) and fn not in out:
                out.append(fn)
            fn = getattr(fn, "fn", None)
    return out


def forget_autotuning(fn: Callable[..., Any]) -> None:
    """Drop the configs the autotuned kernels of ``fn``'s module chose so far, so that the next call tunes them on
    its own arguments."""
    for tuner in autotuners(getattr(fn, "__globals__", {})):
        tuner.cache.clear()


class Picks:
    """The configs that the autotuned kernels of ``fn``'s module chose, case by case. Inside ``on(case)`` each
    autotuner holds what it chose on that case before, or nothing, so that its first call there tunes on that case.

    An autotuner keys its choice on some arguments only (lmdeploy's router on the expert count, not the batch), so
    without this a case would run the config chosen on whichever case came first: an order that differs between the
    search and verification, and between the two sides, and made a config list with one entry removed look 2.3x
    faster on prefill. Kept for the baseline across a worker's evaluations (tuned once per case, not once per
    candidate) and for a candidate through its check and its timing (the configs timed are the ones checked)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.tuners = autotuners(getattr(fn, "__globals__", {}))
        self.chosen: dict[str, list[dict[Any, Any]]] = {}

    @contextlib.contextmanager
    def on(self, case: str) -> Iterator[None]:
        for tuner, kept in zip(self.tuners, self.chosen.get(case, [{}] * len(self.tuners))):
            tuner.cache.clear()
            tuner.cache.update(kept)
        try:
            yield
        finally:
            self.chosen[case] = [dict(tuner.cache) for tuner in self.tuners]


@contextlib.contextmanager
def untimed_autotuning() -> Iterator[None]:
    """While active, an autotuner runs each config once instead of timing it, and so settles on the first config
    that compiles: a warm-up that compiles every config a case needs, without the GPU time that picking one takes.
    Its choice is not one to keep (``forget_autotuning`` after). Picking, which times every config on the GPU, is
    left to the check and the timing, which hold the GPU to themselves."""
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime import autotuner, errors

    unbuildable = (CompileTimeAssertionFailure,) + tuple(
        getattr(errors, name) for name in ("OutOfResources", "PTXASError") if hasattr(errors, name))
    timed = autotuner.Autotuner._bench

    def once(self: Any, *args: Any, config: Any, **meta: Any) -> list[float]:
        current = {**meta, **config.all_kwargs()}
        if config.pre_hook:
            config.pre_hook({**(self.nargs or {}), **current})
        try:
            self.fn.run(*args, **current)
        except unbuildable:  # as Triton's own tuner does: a config that cannot build is never chosen
            return [float("inf")] * 3
        return [0.0] * 3

    autotuner.Autotuner._bench = once
    try:
        yield
    finally:
        autotuner.Autotuner._bench = timed


def _clone(v: Any, moved: list[tuple[int, int, int]]) -> Any:
    if isinstance(v, torch.Tensor):
        c = bounds.padded_empty(v.shape, v.stride(), v.dtype, v.device)
        c.copy_(v)
        if v.numel():  # the bytes the tensor spans, and where its copy starts (the copy keeps its strides)
            span = sum((n - 1) * st for n, st in zip(v.shape, v.stride())) * v.element_size() + v.element_size()
            moved.append((v.data_ptr(), v.data_ptr() + span, c.data_ptr()))
        return c
    if isinstance(v, types.SimpleNamespace):  # an object the harness built (a module's self, a plan)
        return types.SimpleNamespace(**{k: _clone(x, moved) for k, x in vars(v).items()})
    if isinstance(v, list):
        return [_clone(x, moved) for x in v]
    return v


# an address table is small: one address per tensor (or row) it points at (vLLM's block tables, one per KV group)
ADDRESS_TABLE_MAX = 4096


def _readdress(copies: list[torch.Tensor], moved: list[tuple[int, int, int]]) -> None:
    """Each copied table of addresses (a 64-bit integer tensor whose every value is an address inside another input:
    ``torch.tensor([t.data_ptr() for t in tables], dtype=torch.uint64)``, or a row's) made to hold the same place in
    the copies: a kernel that loads a pointer from it then reads and writes this call's copies, not the originals
    every copy shares."""
    moved.sort()
    starts = [m[0] for m in moved]

    def to_copy(x: int) -> int | None:
        i = bisect.bisect_right(starts, x) - 1
        return moved[i][2] + x - moved[i][0] if i >= 0 and x < moved[i][1] else None

    for t in copies:
        if t.dtype not in (torch.int64, torch.uint64) or not 0 < t.numel() <= ADDRESS_TABLE_MAX:
            continue
        if to_copy(int(t.reshape(-1)[0].item())) is None:  # one value read first: most int64 inputs are no table
            continue
        new = [to_copy(int(x)) for x in t.reshape(-1).tolist()]
        if None not in new:
            t.copy_(torch.tensor(new, dtype=t.dtype).reshape(t.shape))


def clone_args(args: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of an argument dict: every tensor is cloned with its strides kept, also inside the objects and
    lists the harness built, so that no two calls share a buffer; a table of addresses inside the inputs points into
    the copies (``_readdress``)."""
    moved: list[tuple[int, int, int]] = []
    out = {k: _clone(v, moved) for k, v in args.items()}
    _readdress(tensors_of(out), moved)
    return out


def _fresh(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.detach()  # a new Python object over the same storage: it carries none of the old one's attributes
    if isinstance(v, types.SimpleNamespace):
        return types.SimpleNamespace(**{k: _fresh(x) for k, x in vars(v).items()})
    if isinstance(v, list):
        return [_fresh(x) for x in v]
    return v


def fresh_args(args: dict[str, Any]) -> dict[str, Any]:
    """The same inputs as new Python objects: every tensor a new object over the same memory, every object and list
    the harness built a new one. A timed call gets these, so nothing a candidate keeps on what it was handed (an
    attribute of a tensor, an entry appended to a list) reaches its next call."""
    return {k: _fresh(v) for k, v in args.items()}


def object_state(args: dict[str, Any]) -> dict[str, str]:
    """What a call can leave on the objects it is handed, by path: each tensor's Python attributes, ``requires_grad``
    and ``grad``, each object's attribute names, each list's length and every plain value inside them. Two calls on
    equal copies that leave different states differ in what they carry to a later call."""
    out: dict[str, str] = {}

    def walk(path: str, v: Any) -> None:
        if isinstance(v, torch.Tensor):
            extra = sorted(getattr(v, "__dict__", {}))
            grad = v.is_leaf and v.grad is not None  # only a leaf keeps a .grad (reading a view's warns)
            out[path] = f"tensor requires_grad={v.requires_grad} grad={grad} attrs={extra}"
            for k in extra:
                walk(f"{path}.{k}", v.__dict__[k])
        elif isinstance(v, types.SimpleNamespace):
            out[path] = f"object attrs={sorted(vars(v))}"
            for k, x in vars(v).items():
                walk(f"{path}.{k}", x)
        elif isinstance(v, (list, dict)):
            items = v.items() if isinstance(v, dict) else enumerate(v)
            out[path] = f"{type(v).__name__} len={len(v)}"
            for k, x in items:
                walk(f"{path}[{k!r}]", x)
        else:
            out[path] = type(v).__name__ + ("" if fields_of(v) is not None else f" {v!r}"[:80])

    for k, v in args.items():
        walk(k, v)
    return out


def storages(value: Any) -> dict[int, str]:
    """The storages the tensors of ``value`` (an argument dict or a returned structure) live in, by address, each
    with the first path that reaches it."""
    out: dict[int, str] = {}
    items = value.items() if isinstance(value, dict) else [("output", value)]
    for name, v in items:
        leaves = tensor_leaves({name: v}) if isinstance(v, (torch.Tensor, types.SimpleNamespace, list)) else {}
        if not leaves:
            leaves = {f"{name}[{i}]": t for i, t in enumerate(tensors_of(v))}
        for path, t in leaves.items():
            if t.numel():
                out.setdefault(t.untyped_storage().data_ptr(), path)
    return out


def tensor_leaves(args: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Every input tensor by its path: ``x``, ``self.weight``, ``norms[0].w`` (objects and lists the harness built).

    A walk with a stack, not a recursive closure: a closure that calls itself is a reference cycle, which kept the
    dict it fills, and the GPU memory of every tensor in it, alive until the cyclic collector ran."""
    out: dict[str, torch.Tensor] = {}
    todo = list(reversed(args.items()))
    while todo:
        path, v = todo.pop()
        if isinstance(v, torch.Tensor):
            out[path] = v
        elif isinstance(v, types.SimpleNamespace):
            todo.extend(reversed([(f"{path}.{k}", x) for k, x in vars(v).items()]))
        elif isinstance(v, list):
            todo.extend(reversed([(f"{path}[{i}]", x) for i, x in enumerate(v)]))
    return out


def tensors_of(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors_of(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_of(v)]
    fields = fields_of(value)  # a result record
    return tensors_of(list(fields.values())) if fields is not None else []


def bit_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def zeros_like_output(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.zeros_like(value)
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # a NamedTuple takes its fields one by one
        return type(value)(*(zeros_like_output(v) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(zeros_like_output(v) for v in value)
    if isinstance(value, dict):
        return {k: zeros_like_output(v) for k, v in value.items()}
    fields = fields_of(value)
    if fields is not None:  # a result record: a copy holding zeros
        record = copy.copy(value)
        for k, v in fields.items():
            object.__setattr__(record, k, zeros_like_output(v))
        return record
    return value
