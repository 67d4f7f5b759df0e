"""Runtime helpers, as real engines have them: the dispatch branches and device queries kernels depend on."""

import functools
import os

import torch


@functools.lru_cache
def is_hip() -> bool:
    return torch.version.hip is not None


@functools.lru_cache
def is_npu() -> bool:
    return hasattr(torch, "npu") and torch.npu.is_available()


def is_cuda() -> bool:
    return torch.cuda.is_available() and not is_hip()


@functools.lru_cache
def get_device_core_count() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1


def cached_kernel(fn):
    """A custom decorator around a jit function (real engines wrap kernels for caching or op registration)."""
    fn.__smithbot_demo_cached__ = True
    return fn


USE_FAST_MATH = os.environ.get("MINENGINE_FAST_MATH", "0") == "1"
