"""What kernels written for vendors' triton forks ask of triton, answered under the interpreter where the installed
triton (stock) lacks it. A task that uses them runs on its fork or under the interpreter; stock triton cannot compile
it for a GPU.

**Cambricon's triton** slices a tensor in a kernel (``x[:, 0:BLOCK:2]``, the even columns of a block); stock triton
takes only ``None`` and ``:``. Under the interpreter a bounded or stepped slice is a numpy slice.

**DeepLink's triton** (``triton.language.extra.deeplink``, which DLBlas's Ascend kernels import as ``dl``):
``install()`` registers this module under that name. On an Ascend NPU one program runs on a cube core and on vector
cores at once. ``with dl.async_task(scope=...)`` says which core runs a block, ``dl.set_cross_flag`` /
``dl.wait_cross_flag`` order the two, ``dl.parallel(a, b, bind_sub_block=...)`` spreads a loop over the vector
sub-blocks, ``dl.compile_hint`` guides the compiler and ``dl.extract_slice`` takes a sub-block of a tensor. The
interpreter runs a program as serial Python, in source order:

- the scopes run one after the other, and hints do nothing;
- ``parallel`` is ``range``: its iterations are independent, so their order does not matter;
- ``extract_slice`` is a numpy slice;
- the flags are checked, never ignored: every wait must find its set already done in the same program. When one does
  not, the kernel needs its two cores at the same time (a pipeline between them), serial order would compute other
  numbers, and the call fails with a message that says so;
- ``sync_block_all`` (a barrier across every program) fails the same way when the grid has more than one program,
  since the interpreter runs programs one after another.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import sys
from typing import Any

import numpy as np

from evaluator.interpreted import scalar, unwrap

DEEPLINK = "triton.language.extra.deeplink"


class DeepLinkStandInError(RuntimeError):
    """The kernel needs the Ascend cores to run concurrently, which serial interpretation cannot do."""


def _program() -> tuple[int, ...]:
    from triton import language as tl

    return tuple(scalar(tl.program_id(axis)) for axis in range(3))


class async_task(contextlib.nullcontext):  # noqa: N801 (the fork's name)
    """``with dl.async_task(scope=dl.async_task.vector):`` runs its block in place."""

    cube, vector = "cube", "vector"

    def __init__(self, scope: Any = None, **kwargs: Any) -> None:
        super().__init__()


class SyncFlag:
    C2V, V2C = "C2V", "V2C"


class _Flags:
    """The flags set and not yet waited for, in the program now running (programs run one after another, so a new
    program id starts afresh)."""

    program: tuple[int, ...] | None = None
    count: collections.Counter[tuple[str, int]] = collections.Counter()

    @classmethod
    def here(cls) -> collections.Counter[tuple[str, int]]:
        program = _program()
        if program != cls.program:
            cls.program, cls.count = program, collections.Counter()
        return cls.count


def set_cross_flag(flag: Any, event_id: Any) -> None:
    _Flags.here()[(str(flag), scalar(event_id))] += 1


def wait_cross_flag(flag: Any, event_id: Any) -> None:
    count, key = _Flags.here(), (str(flag), scalar(event_id))
    if count[key] <= 0:
        raise DeepLinkStandInError(
            f"dl.wait_cross_flag({flag}, {key[1]}) comes before its set_cross_flag in source order: the kernel runs "
            "its cube and vector tasks concurrently, which the interpreter (serial, in source order) cannot")
    count[key] -= 1


def sync_block_all(*args: Any, **kwargs: Any) -> None:
    from triton import language as tl

    programs = int(np.prod([scalar(tl.num_programs(axis)) for axis in range(3)]))
    if programs > 1:
        raise DeepLinkStandInError(f"dl.sync_block_all() is a barrier across the grid's {programs} programs, which the "
                                   "interpreter runs one after another")


def compile_hint(*args: Any, **kwargs: Any) -> None:
    return None


def parallel(start: Any, stop: Any = None, step: Any = 1, **kwargs: Any) -> range:
    return range(scalar(start), scalar(stop), scalar(step)) if stop is not None else range(scalar(start))


def extract_slice(x: Any, offsets: Any, sizes: Any, strides: Any) -> Any:
    from triton import language as tl
    from triton.runtime.interpreter import TensorHandle

    index = tuple(slice(scalar(o), scalar(o) + scalar(n) * scalar(s), scalar(s)) for o, n, s in zip(offsets, sizes, strides))
    data = np.ascontiguousarray(x.handle.data[index])
    return tl.tensor(TensorHandle(data, x.handle.dtype), tl.block_type(x.dtype, [scalar(n) for n in sizes]))


def __getattr__(name: str) -> Any:
    raise AttributeError(f"{DEEPLINK}.{name} has no interpreter stand-in (evaluator/forks.py)")


def _patch_slices() -> None:
    from triton import language as tl
    from triton.language import core
    from triton.runtime.interpreter import TensorHandle

    getitem = core.tensor.__getitem__

    def bounded(sl: Any) -> bool:
        return hasattr(sl, "step") and any(unwrap(a) is not None for a in (sl.start, sl.stop, sl.step))

    def __getitem__(self: Any, slices: Any, _semantic: Any = None) -> Any:
        items = list(getattr(slices, "values", slices)) if isinstance(slices, (tuple, core.tuple)) else [slices]
        if not any(bounded(sl) for sl in items):
            return getitem(self, slices, _semantic=_semantic)
        index, rest = [], []
        for sl in items:  # the bounded slices here; None (a new axis) and `:` for the interpreter's own indexing
            if unwrap(sl) is not None:
                bounds = (None if unwrap(a) is None else scalar(a) for a in (sl.start, sl.stop, sl.step))
                index.append(slice(*bounds) if bounded(sl) else slice(None))
            rest.append(None if unwrap(sl) is None else slice(None))
        data = np.ascontiguousarray(self.handle.data[tuple(index)])
        taken = tl.tensor(TensorHandle(data, self.handle.dtype), tl.block_type(self.dtype, list(data.shape)))
        return getitem(taken, tuple(rest), _semantic=_semantic)

    setattr(__getitem__, core.TRITON_BUILTIN, True)
    core.tensor.__getitem__ = __getitem__


def install() -> None:
    """Cambricon's slices; this module as DeepLink's, where the installed triton has none."""
    import triton.language.extra as extra

    _patch_slices()
    if DEEPLINK in sys.modules or importlib.util.find_spec(DEEPLINK) is not None:
        return
    sys.modules[DEEPLINK] = sys.modules[__name__]
    extra.deeplink = sys.modules[__name__]  # type: ignore[attr-defined]
