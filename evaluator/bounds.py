"""Bounds checking for Triton's interpreter: every load, store and atomic a kernel makes must fall inside a tensor
it was given.

On a GPU an access past the end of a tensor reads someone else's memory, or faults much later; in the interpreter it
reads the CPU heap or kills the process with SIGSEGV, which says nothing about the cause. ``install()`` makes every
such access an ``IndexError`` that names the kernel and the argument the address lies nearest to, so a candidate that
reads out of bounds is a runtime error with a reason, and a task whose inputs are wrong says which one.

Only the interpreter worker installs it: the GPU backend is untouched.

A kernel may also reach a tensor it is not given, through a table of addresses it is (sglang's
``write_req_to_token_pool_triton`` loads each request's prefix from a pointer in ``prefix_tensors``): the tensors the
task's call was handed (``handed``) count as inside too, under their names there.

A read past the end of one tensor can land in the next one, where the heap put it; that would look legal. So, once
installed, every input tensor the evaluator copies for a call (``runtime.clone_args``) is placed in the middle of a
buffer with unused room on both sides (``padded_empty``), and only the tensor's own bytes count as inside it: a read a
row or a tensor's length past the end now lands in the room, which no tensor owns.
"""

from __future__ import annotations

import types
import weakref
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import torch

OUT_OF_BOUNDS = "outside every tensor it was given"  # in each message, which the worker reports as a crash
# what the last access past the end found (OutOfBounds.found), kept for the worker, which reports it with its answer
# however the interpreter wrapped the exception; the worker clears it before each request
last: dict[str, Any] | None = None
# (sorted storage starts, ends, argument names, kernel name) of the launch in progress; None outside launches.
_bounds: tuple[np.ndarray, np.ndarray, list[str], str] | None = None
_installed = False
_ROOM_MAX = 16 << 20  # bytes of room on each side of a padded tensor, at most
_ROOM_MIN = 64 << 10  # and at least: a read a few hundred rows past a small table lands in its own room
_owned: dict[int, tuple[int, int]] = {}  # a padded buffer's address -> (start, bytes) of the tensor inside it
# the storages of the tensors the task's calls in progress were handed (``handed``): start -> (bytes, names)
_handed: dict[int, tuple[int, list[str]]] = {}


def installed() -> bool:
    return _installed


def padded_empty(shape: torch.Size, stride: tuple[int, ...], dtype: torch.dtype, device: Any) -> torch.Tensor:
    """``torch.empty_strided``, but, once installed, inside a buffer with as much room again on each side (16 MiB at
    most), which the bounds check counts as no tensor's."""
    if not _installed or any(s == 0 for s in shape):
        return torch.empty_strided(shape, stride, dtype=dtype, device=device)
    n = 1 + sum((d - 1) * st for d, st in zip(shape, stride))
    size = dtype.itemsize
    room = max(_ROOM_MIN // size, min(n, _ROOM_MAX // size))
    buf = torch.empty(room + n + room, dtype=dtype, device=device)
    key = buf.untyped_storage().data_ptr()
    _owned[key] = (key + room * size, n * size)
    weakref.finalize(buf, _owned.pop, key, None)  # the view keeps buf (its base) alive
    return buf.as_strided(shape, stride, room)


def _storages(name: str, value: Any, out: dict[int, tuple[int, list[str]]]) -> None:
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        start, nbytes = _owned.get(storage.data_ptr(), (storage.data_ptr(), storage.nbytes()))
        entry = out.setdefault(start, (nbytes, []))
        entry[1].append(name)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _storages(f"{name}[{i}]", v, out)
    elif isinstance(value, types.SimpleNamespace):  # an object the harness built (a method's self)
        for k, v in vars(value).items():
            _storages(f"{name}.{k}", v, out)
    elif hasattr(value, "base") and isinstance(getattr(value, "base"), torch.Tensor):  # a TensorDescriptor
        _storages(name, value.base, out)


@contextmanager
def handed(*args: dict[str, Any]) -> Iterator[None]:
    """While the task's entry is called with ``args`` (one dict per call): their tensors are inside, for each kernel
    it launches."""
    global _handed
    reached: dict[int, tuple[int, list[str]]] = {}
    for call in args:
        for name, value in call.items():
            _storages(name, value, reached)
    before, _handed = _handed, reached
    try:
        yield
    finally:
        _handed = before


def _set(kernel: str, named: dict[str, Any]) -> None:
    global _bounds
    found: dict[int, tuple[int, list[str]]] = {}
    for name, value in named.items():
        _storages(name, value, found)
    found.update({p: v for p, v in _handed.items() if p not in found})  # a kernel argument keeps its own name
    order = sorted(found)
    _bounds = (np.array(order, dtype=np.uint64), np.array([p + found[p][0] for p in order], dtype=np.uint64),
               ["/".join(found[p][1]) for p in order], kernel)


def _check(ptrs: Any, mask: Any, what: str) -> None:
    if _bounds is None:
        return
    addr = np.asarray(ptrs.data).astype(np.uint64, copy=False)
    if mask is not None:
        addr = addr[np.broadcast_to(np.asarray(mask.data, dtype=bool), addr.shape)]
    addr = addr.ravel()
    if addr.size == 0 or not len(_bounds[0]):
        return
    size = np.uint64(max(ptrs.get_element_ty().primitive_bitwidth // 8, 1))
    starts, ends, names, kernel = _bounds
    i = np.searchsorted(starts, addr, side="right").astype(np.int64) - 1
    ok = (i >= 0) & (addr + size <= ends[np.maximum(i, 0)])
    if ok.all():
        return
    bad, nearest = addr[~ok], np.maximum(i[~ok], 0)
    j = int(nearest[0])
    start, end, unit = int(starts[j]), int(ends[j]), int(size)
    furthest = int(bad[nearest == j].max())
    owners, counts = np.unique(i[ok], return_counts=True)
    if owners.size and not (owners == j).any():  # a block partly inside one tensor, running far past it (where
        # the heap put another one): the tensor it was addressed from is the one its other elements lie in
        j = int(owners[np.argmax(counts)])
        start, end = int(starts[j]), int(ends[j])
        beyond = bad[bad >= np.uint64(start)]
        furthest = int(beyond.max()) if beyond.size else int(bad.max())
    raise OutOfBounds({"kernel": kernel, "access": what, "count": len(bad), "tensor": names[j],
                       "first": (int(bad[0]) - start) // unit, "holds": (end - start) // unit,
                       "furthest": (furthest - start) // unit})


class OutOfBounds(IndexError):
    """A kernel's access past every tensor it was given. ``found``: the kernel, the access (``loads``...), how many
    elements, the tensor its address lies nearest to (``/``-joined names where several share a storage), the first
    element's index in it, how many elements its storage holds, and the furthest index."""

    def __init__(self, found: dict[str, Any]) -> None:
        global last
        self.found = last = found
        super().__init__(f"kernel {found['kernel']} {found['access']} {found['count']} element(s) {OUT_OF_BOUNDS} "
                         f"(the first: element {found['first']} of '{found['tensor']}', whose storage holds "
                         f"{found['holds']}; the furthest: element {found['furthest']})")


def install() -> None:
    global _installed
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    executor = interpreter.GridExecutor
    init_args = getattr(executor, "_init_args_hst", None)
    if init_args is None:  # a triton whose interpreter is laid out otherwise: run unchecked, as before
        return
    masked_load, masked_store = builder.create_masked_load, builder.create_masked_store
    atomic_rmw, atomic_cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        named = dict(zip(self.arg_names, args_hst))
        named.update(kwargs_hst)
        _set(getattr(self.fn, "__name__", "?"), named)
        return args_hst, kwargs_hst

    def load(self: Any, ptrs: Any, mask: Any, *rest: Any) -> Any:
        _check(ptrs, mask, "loads")
        return masked_load(self, ptrs, mask, *rest)

    def store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
        _check(ptrs, mask, "stores")
        return masked_store(self, ptrs, value, mask, *rest)

    def rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *rest: Any) -> Any:
        _check(ptr, mask, "updates atomically")
        return atomic_rmw(self, op, ptr, val, mask, *rest)

    def cas(self: Any, ptr: Any, *rest: Any) -> Any:
        _check(ptr, None, "compares-and-swaps")
        return atomic_cas(self, ptr, *rest)

    _installed = True
    executor._init_args_hst = init_args_hst
    builder.create_masked_load, builder.create_masked_store = load, store
    builder.create_atomic_rmw, builder.create_atomic_cas = rmw, cas
