"""Compiling ahead: a candidate's Triton kernels built for the GPU on a CPU worker, before a GPU worker takes it.

A GPU worker spends most of an evaluation compiling (Triton's front end, then ``ptxas``): CPU work, done while it
holds memory on the GPU and while the GPU itself idles. The ``ahead`` worker (``python -m evaluator.worker FD ahead``)
needs no GPU. It stands in an active driver that reports the GPU's architecture (``AheadDriver``, from
``SMITHBOT_AHEAD_TARGET``: ``cuda:90:32``), builds each case's inputs on the CPU, and calls the candidate's entry
with every launch turned into Triton's own ``warmup`` (compile, and do not launch): each autotuned kernel once per
config. The binaries land in Triton's cache, which the GPU worker shares; its first call then loads them. So the
specialisation is the one the GPU sees: the same shapes, dtypes, constants and 16-byte alignment.

Building a case's inputs costs more than its compile where the case is model-sized (a MoE layer's weights: GBs of
random draws on the CPU, for every candidate that the worker cannot keep them for). A kernel's binary does not depend
on its inputs' values, so the ahead worker leaves large float draws unfilled (``UnfilledDraws``); indices, lengths
and small tensors are drawn as always, since a launcher may compute from them.

What cannot be compiled this way (a launcher that asks the CUDA runtime, a torch op the CPU lacks) is left to the
GPU worker, as before: only Triton's own compile errors are a verdict (``compile_error``), reached without a GPU.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from evaluator.correctness import make_args
from evaluator.runtime import tensors_of

# the most input bytes an ahead worker keeps between candidates (a task's cases, built once); beyond, built per use
KEEP_BYTES = 4 << 30
# a float draw this large is left unfilled (``UnfilledDraws``): 1M elements, far more than any index or length table
UNFILLED_ELEMENTS = 1 << 20


class AheadDriver:
    """Triton's active driver, as far as compiling goes: the target GPU, and no device or stream to launch on."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def is_active(self) -> bool:
        return True

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def get_benchmarker(self) -> Any:
        raise RuntimeError("nothing is timed while compiling ahead")


def parse_target(text: str) -> Any:
    """``cuda:90:32`` -> Triton's ``GPUTarget("cuda", 90, 32)``."""
    from triton.backends.compiler import GPUTarget

    backend, arch, warp = text.split(":")
    return GPUTarget(backend, int(arch) if arch.isdigit() else arch, int(warp))


def target_of_gpu(device: int = 0) -> str:
    """The ``SMITHBOT_AHEAD_TARGET`` of a visible CUDA GPU, as its own driver reports it."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"cuda:{major * 10 + minor}:32"


def install(target: str) -> None:
    """In this process: the stand-in driver for ``target``, every JIT launch a compile, and every autotuner compiling
    each config that its own pruning keeps instead of timing them. ``torch.cuda.get_device_capability`` answers as the
    target, as a pruning function asks it (lmdeploy's MoE keeps 2 of its 8 configs on sm90); a pruning that fails
    here leaves every config to compile."""
    from triton.runtime import autotuner, driver, jit

    gpu = parse_target(target)
    driver.set_active(AheadDriver(gpu))
    if isinstance(gpu.arch, int):
        torch.cuda.get_device_capability = lambda device=None: divmod(gpu.arch, 10)
    run = jit.JITFunction.run

    def compile_only(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
        return run(self, *args, grid=grid, warmup=True, **kwargs)

    def every_config(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.nargs = dict(zip(self.arg_names, args))
        try:
            configs = self.prune_configs(kwargs)
        except Exception:  # noqa: BLE001 - a pruning that needs the GPU: compile them all
            configs = self.configs
        for config in configs:
            self.fn.run(*args, **{**kwargs, **config.all_kwargs()})

    jit.JITFunction.run = compile_only
    autotuner.Autotuner.run = every_config


class UnfilledDraws(TorchFunctionMode):
    """While active: a random float draw of ``UNFILLED_ELEMENTS`` or more (``torch.randn``/``rand``, their ``_like``
    forms, ``normal_``/``uniform_``) is left unfilled, with its shape, dtype and device. Only the values differ from
    the GPU worker's inputs, and no compile depends on them."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in (torch.randn, torch.rand):
            shape = kwargs.get("size", args[0] if len(args) == 1 and not isinstance(args[0], int) else args)
            dtype = kwargs.get("dtype") or torch.get_default_dtype()
            if math.prod(int(d) for d in shape) >= UNFILLED_ELEMENTS and dtype.is_floating_point:
                return torch.empty(tuple(shape), dtype=kwargs.get("dtype"), device=kwargs.get("device"))
        elif func in (torch.randn_like, torch.rand_like):
            if args[0].numel() >= UNFILLED_ELEMENTS:
                return torch.empty_like(args[0], dtype=kwargs.get("dtype"), device=kwargs.get("device"))
        elif func in (torch.Tensor.normal_, torch.Tensor.uniform_):
            if args[0].numel() >= UNFILLED_ELEMENTS and args[0].is_floating_point():
                return args[0]
        return func(*args, **kwargs)



class Inputs:
    """A task's inputs on the CPU, each case's built once while they fit ``KEEP_BYTES``."""

    def __init__(self) -> None:
        self.kept: dict[str, dict[str, Any]] = {}
        self.bytes = 0

    def of(self, harness: Any, case: Any, seed: int) -> dict[str, Any]:
        if case.name in self.kept:
            return self.kept[case.name]
        with UnfilledDraws():
            args = make_args(harness, case, seed, "cpu")
        size = sum(t.numel() * t.element_size() for t in tensors_of(args))
        if self.bytes + size <= KEEP_BYTES:
            self.kept[case.name] = args
            self.bytes += size
        return args
