"""Vendors' triton forks under the interpreter (evaluator/forks.py). Cambricon's stepped slices of a tensor match
PyTorch's. A kernel written with DeepLink's module for an Ascend NPU's cube and vector cores runs serially in source
order and matches a PyTorch reference; a kernel that needs its two cores at once fails with a message that says so, as
does a grid-wide barrier."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = '''
import torch
import triton
import triton.language as tl

from evaluator import standin

standin.install()
import triton.language.extra.deeplink as dl  # noqa: E402


@triton.jit
def _halves(X, Y, Z, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    base = tl.program_id(0) * BLOCK * BLOCK
    with dl.async_task(scope=dl.async_task.cube):
        x = tl.load(X + base + offs[:, None] * BLOCK + offs[None, :])
        dl.compile_hint(x, "dot_pad_only_k")
        dl.set_cross_flag(dl.SyncFlag.C2V, 0)
    with dl.async_task(scope=dl.async_task.vector):
        dl.wait_cross_flag(dl.SyncFlag.C2V, 0)
        HALF: tl.constexpr = BLOCK // 2
        for s in dl.parallel(0, 2, bind_sub_block=True):
            part = dl.extract_slice(x, (s * HALF, 0), (HALF, BLOCK), (1, 1))
            rows = s * HALF + tl.arange(0, HALF)
            tl.store(Y + base + rows[:, None] * BLOCK + offs[None, :], part * (s + 1))
        even = dl.extract_slice(x, (0, 1), (HALF, BLOCK // 2), (2, 2))  # even rows, odd columns
        half = tl.arange(0, HALF)
        tl.store(Z + tl.program_id(0) * HALF * HALF + half[:, None] * HALF + half[None, :], even)


@triton.jit
def _rotate_pairs(X, Y, R: tl.constexpr, BLOCK: tl.constexpr):  # Cambricon's style: columns by slicing the block
    rows = tl.program_id(0) * R + tl.arange(0, R)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + rows[:, None] * BLOCK + cols[None, :])
    even, odd = x[:, 0:BLOCK:2], x[:, 1:BLOCK:2]
    half = tl.arange(0, BLOCK // 2)
    tl.store(Y + rows[:, None] * BLOCK + half[None, :], even - odd)
    tl.store(Y + rows[:, None] * BLOCK + BLOCK // 2 + half[None, :], odd[:, None, :BLOCK // 2].reshape(R, BLOCK // 2))


@triton.jit
def _pipelined(X):
    with dl.async_task(scope=dl.async_task.cube):
        dl.wait_cross_flag(dl.SyncFlag.V2C, 1)  # the vector core sets it below, concurrently on the NPU
        tl.store(X, 1.0)
    with dl.async_task(scope=dl.async_task.vector):
        dl.set_cross_flag(dl.SyncFlag.V2C, 1)


@triton.jit
def _first_program_sets(X):
    if tl.program_id(0) == 0:
        dl.set_cross_flag(dl.SyncFlag.C2V, 2)
    dl.wait_cross_flag(dl.SyncFlag.C2V, 2)
    tl.store(X + tl.program_id(0), 1.0)


@triton.jit
def _barrier(X):
    tl.store(X + tl.program_id(0), 1.0)
    dl.sync_block_all()


for seed in (0, 1):
    torch.manual_seed(seed)
    x = torch.randn(3, 8, 8)
    y, z = torch.full_like(x, float("nan")), torch.full((3, 4, 4), float("nan"))
    _halves[(3,)](x, y, z, BLOCK=8)
    ref = x.clone()
    ref[:, 4:] *= 2
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
    torch.testing.assert_close(z, x[:, 0::2, 1::2], rtol=0, atol=0)
    x = torch.randn(8, 16)
    y = torch.full_like(x, float("nan"))
    _rotate_pairs[(2,)](x, y, 4, BLOCK=16)
    torch.testing.assert_close(y, torch.cat([x[:, 0::2] - x[:, 1::2], x[:, 1::2]], dim=1), rtol=0, atol=0)
print("halves ok")
one = torch.zeros(2)
_barrier[(1,)](one)
assert one[0] == 1.0
print("barrier of one program ok")
for name, kernel, grid in (("pipelined", _pipelined, (1,)), ("first", _first_program_sets, (2,)),
                           ("barrier", _barrier, (2,))):
    try:
        kernel[grid](torch.zeros(2))
    except Exception as e:
        print(name, "raised:", e)
'''


def test_fork_stand_ins_run_serial_kernels_and_refuse_concurrent_ones(tmp_path: Path) -> None:
    (tmp_path / "forks.py").write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(tmp_path / "forks.py")], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[:2] == ["halves ok", "barrier of one program ok"], out.stdout
    assert any(line.startswith("pipelined raised:") and "dl.wait_cross_flag(V2C, 1) comes before its set_cross_flag"
               in line for line in lines), out.stdout
    assert any(line.startswith("first raised:") and "dl.wait_cross_flag(C2V, 2)" in line for line in lines), out.stdout
    assert any(line.startswith("barrier raised:") and "barrier across the grid's 2 programs" in line
               for line in lines), out.stdout
