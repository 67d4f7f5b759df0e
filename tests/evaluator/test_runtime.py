"""The evaluator's launch hook under the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

LIST_GRID = '''
import torch
import triton
import triton.language as tl

from evaluator.runtime import LaunchCounter

LaunchCounter.install()


@triton.jit
def _double(X, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)


x = torch.arange(37, dtype=torch.float32)
_double[[triton.cdiv(37, 16)]](x, 37, BLOCK=16)  # a list grid, as the GPU launcher accepts
_double[lambda meta: [triton.cdiv(37, meta["BLOCK"])]](x, 37, BLOCK=16)
assert torch.equal(x, 4 * torch.arange(37, dtype=torch.float32)), x
print(LaunchCounter.count)
'''


def test_a_list_grid_runs_under_the_interpreter(tmp_path) -> None:
    (tmp_path / "launch.py").write_text(LIST_GRID)
    out = subprocess.run([sys.executable, str(tmp_path / "launch.py")], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "2"


def test_a_launcher_that_insists_on_cuda_tensors_runs_under_the_interpreter(tmp_path) -> None:
    import json
    import shutil

    from tests.conftest import TASKS

    task = tmp_path / "rmsnorm"
    shutil.copytree(TASKS / "rmsnorm", task)
    src = (task / "kernel.py").read_text()
    head = "def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:\n"
    assert head in src
    (task / "kernel.py").write_text(src.replace(head, head + '    assert x.is_cuda and weight.is_cuda, "CUDA only"\n'))
    out = subprocess.run([sys.executable, "-m", "evaluator", str(task), str(task / "candidates" / "single_pass.py"),
                          "--backend", "interpreter", "--json", "--rounds", "1"], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1])["status"] in ("correct", "promoted")


STANDIN_AND_BOUNDS = '''
import types

import torch
import triton
import triton.language as tl

from evaluator import bounds, standin

available = torch.cuda.is_available()  # on a GPU machine too, the stand-ins leave this as it is
standin.install()
bounds.install()
from triton.language.extra.libdevice import tanh  # bound at import, as launchers do


@triton.jit
def _act(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0)
    y = tl.extra.cuda.libdevice.round(x) + tanh(x) + tl.extra.cuda.libdevice.pow(x, 2.0)
    tl.store(Y + offs, y, mask=offs < n)


@triton.jit
def _shift(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs + 3, mask=offs < n), mask=offs < n)


@triton.jit
def _copy_blocks(X, Y, M, N, sxm, sxn, sym, syn, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_block_ptr(X, shape=(M, N), strides=(sxm, sxn), offsets=(tl.program_id(0) * BM, 0),
                            block_shape=(BM, BN), order=(1, 0))
    dst = tl.make_block_ptr(Y, (M, N), (sym, syn), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    for _ in range(0, N, BN):
        tl.store(dst, tl.load(src, boundary_check=(0, 1), padding_option="zero") + 1.0, boundary_check=(0, 1))
        src = tl.advance(src, (0, BN))
        dst = tl.advance(dst, (0, BN))


@triton.jit
def _gather_rows(X, Tok, Y, n, lo, hi, BLOCK: tl.constexpr):
    tl.extra.cuda.gdc_wait()
    tok = tl.load(Tok + tl.program_id(0)).to(tl.int64)
    inside = (tok >= lo) & (tok < hi)  # a scalar comparison, broadcast into a block mask below
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.range(0, 2):
        acc += tl.load(X + (tok - lo) * n + offs, mask=(offs < n) & inside, other=0.0) * (i.to(tl.int64) + 1)
    for j in range(0, 1):
        tl.store(Y + (tl.program_id(0) + j.to(tl.int64)) * n + offs, acc, mask=offs < n)
    tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def _plus_one(X, Y, M, N, ON: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rm, rn = tl.arange(0, BM)[:, None], tl.arange(0, BN)[None, :]
    inside = rm < M and rn < N  # Python `and` on two masks: both, elementwise, as the compiler reads it
    if ON and M > 0:  # a constexpr and a scalar
        v = tl.load(X + rm * N + rn, mask=inside, other=0.0)
        tl.store(Y + rm * N + rn, v + 1.0, mask=inside or False)


@triton.jit
def _scatter_add(X, Idx, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(Y + tl.load(Idx + offs), tl.load(X + offs))


for half in (torch.bfloat16, torch.float16):  # atomics the interpreter's own helper cannot do
    src, where, acc = torch.randn(16).to(half), torch.tensor([0, 1, 2, 3] * 4), torch.zeros(4, dtype=half)
    _scatter_add[(1,)](src, where, acc, BLOCK=16)
    want = torch.zeros(4, dtype=half)
    for i in range(16):  # in order, each sum rounded to the tensor's type
        want[where[i]] = (want[where[i]].float() + src[i].float()).to(half)
    assert torch.equal(acc, want), (acc, want)

m = torch.randn(3, 5)
p = torch.zeros(3, 5)
_plus_one[(1,)](m, p, 3, 5, ON=True, BM=4, BN=8)  # the 4 x 8 block overhangs both axes
assert torch.equal(p, m + 1.0), p
_plus_one[(1,)](m, p, 3, 5, ON=False, BM=4, BN=8)
assert torch.equal(p, m + 1.0), p

rows, tok, out = torch.randn(4, 3), torch.tensor([5, 2, 3, 9]), torch.full((4, 3), float("nan"))
_gather_rows[(4,)](rows, tok, out, 3, 2, 6, BLOCK=4)  # tokens 2..5 address rows 0..3; 9 is outside
want = torch.where((tok >= 2)[:, None] & (tok < 6)[:, None], rows[(tok - 2).clamp(0, 3)] * 3, torch.zeros(4, 3))
assert torch.equal(out, want), (out, want)
assert tl.range.__name__ == "range" and isinstance(tl.range, type) and "range" not in globals()

a = torch.randn(5, 7)
b = torch.zeros(7, 5).t()  # strided, and its storage exactly as large as a's
_copy_blocks[(2,)](a, b, 5, 7, *a.stride(), *b.stride(), BM=4, BN=4)
assert torch.equal(b, a + 1.0), (a, b)

x = torch.tensor([-2.5, -0.4, 0.5, 1.5, 3.0])
y = torch.empty(8)[:5]  # a view: its storage is what bounds it
_act[(1,)](x, y, 5, BLOCK=8)
want = torch.sign(x) * torch.floor(x.abs() + 0.5) + torch.tanh(x) + x * x
assert torch.allclose(y, want), (y, want)
assert torch.cuda.get_device_properties(0).multi_processor_count == 132 and torch.cuda.get_device_capability() == (9, 0)
with torch.get_device_module(x.device).device(x.device.index), torch.cuda.device(x.device):
    assert x.is_cuda and torch.cuda.is_available() == available
if not available:  # what a launcher allocates on, or moves to, an accelerator stays on the CPU
    made = [torch.empty(2, device="cuda"), torch.zeros(2, device=torch.device("cuda", 0)),
            torch.arange(3, dtype=torch.float32, device="npu"), torch.ones(2).to("cuda"), torch.ones(2).cuda(),
            torch.ones(2).to(device="mlu", dtype=torch.float16)]
    assert all(t.device.type == "cpu" for t in made) and made[-1].dtype == torch.float16
_shift[(1,)](x, y, 2, BLOCK=8)  # reads x[3], x[4]: inside
try:
    _shift[(1,)](x, y, 5, BLOCK=8)  # reads x[3..7]: three past the end
except Exception as exc:
    print(exc)

# two inputs the heap put side by side (here: one storage): a read past the first lands in the second, and would
# look legal; the copies the evaluator makes per call sit apart, with room between them that no tensor owns
from evaluator.runtime import clone_args

both = torch.randn(13)
copies = clone_args({"x": both[:5], "y": both[5:]})
assert torch.equal(copies["x"], both[:5]) and copies["x"].stride() == (1,)
_shift[(1,)](both[:5], both[5:], 5, BLOCK=8)  # unchecked: x's storage runs on into y
bounds.last = None
try:
    _shift[(1,)](copies["x"], copies["y"], 5, BLOCK=8)
except Exception as exc:
    print("apart:", exc)
print("found:", sorted(bounds.last.items()))  # what the worker reports with its answer, however the exception is wrapped

# a kernel that reaches a tensor through a table of addresses (sglang's prefix tensors): inside while the task's call
# is handed that tensor, and an error otherwise
@triton.jit
def _through_table(Table, Y, n, BLOCK: tl.constexpr):
    src = tl.load(Table).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


reached = clone_args({"prefix": [torch.randn(6)]})
table = torch.tensor([reached["prefix"][0].data_ptr()], dtype=torch.uint64)
out = torch.zeros(6)
with bounds.handed(reached):
    _through_table[(1,)](table, out, 6, BLOCK=8)
assert torch.equal(out, reached["prefix"][0])
try:
    _through_table[(1,)](table, out, 6, BLOCK=8)
except Exception as exc:
    print("not handed:", type(exc).__name__)


# a table of the inputs' own addresses (vLLM's block_table_ptrs, built once in a constructor): a copy of the inputs
# holds its copies' addresses, so a kernel that writes through it writes this call's copy, not the originals
@triton.jit
def _write_through(Table, n, BLOCK: tl.constexpr):
    dst = tl.load(Table + tl.program_id(0)).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, 7.0, mask=offs < n)


rows = [torch.zeros(4), torch.zeros(5)]
ptrs = torch.tensor([r.data_ptr() for r in rows], dtype=torch.uint64)
copy = clone_args({"state": types.SimpleNamespace(rows=rows, ptrs=ptrs), "ids": torch.arange(3)})
with bounds.handed(copy):
    _write_through[(2,)](copy["state"].ptrs, 4, BLOCK=4)
assert all(torch.equal(r[:4], torch.full((4,), 7.0)) for r in copy["state"].rows), copy["state"].rows
assert not any(r.any() for r in rows) and ptrs.tolist() == [r.data_ptr() for r in rows]
assert torch.equal(copy["ids"], torch.arange(3))  # an index tensor is no table, whatever its values
grid = torch.zeros(3, 4)  # a table of row addresses (batch_memcpy's src_ptrs): each points into the copy's rows
rows_copy = clone_args({"grid": grid, "row_ptrs": torch.tensor([grid[i].data_ptr() for i in range(3)],
                                                                dtype=torch.uint64)})
with bounds.handed(rows_copy):
    _write_through[(3,)](rows_copy["row_ptrs"], 4, BLOCK=4)
assert torch.equal(rows_copy["grid"], torch.full((3, 4), 7.0)) and not grid.any(), rows_copy["grid"]
print("written through the copy's table")
'''


def test_the_interpreter_stands_in_for_the_gpu_and_checks_bounds(tmp_path) -> None:
    """libdevice calls, block pointers, torch.cuda queries, loop variables used as triton scalars (``i.to(...)``),
    scalar comparisons broadcast into masks, ``and``/``or`` on masks, fp16/bf16 atomics and programmatic-dependent-launch
    calls work under the interpreter, and
    an access past the end
    of a tensor is an error naming the kernel and the argument (it would read the heap, or kill the worker with
    SIGSEGV), also when the heap put another input right after it. The block-pointer copy's blocks overhang both tensors, so its boundary checks are exercised too."""
    (tmp_path / "standin.py").write_text(STANDIN_AND_BOUNDS)
    out = subprocess.run([sys.executable, str(tmp_path / "standin.py")], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert ("kernel _shift loads 3 element(s) outside every tensor it was given (the first: element 5 of 'X', whose "
            "storage holds 5; the furthest: element 7)") in out.stdout, out.stdout
    assert 'apart: OutOfBounds("kernel _shift loads 3 element(s) outside every tensor' in out.stdout, out.stdout
    assert ("found: [('access', 'loads'), ('count', 3), ('first', 5), ('furthest', 7), ('holds', 5), ('kernel', "
            "'_shift'), ('tensor', 'X')]") in out.stdout, out.stdout
    assert "not handed: " in out.stdout, out.stdout
    assert "written through the copy's table" in out.stdout, out.stdout


CONSTEXPR_GLOBAL = '''
import math

import torch
import triton
import triton.language as tl

from evaluator import standin

_ALPHA = tl.constexpr(0.5)


@triton.jit
def _scale(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(Y + offs, tl.sigmoid(_ALPHA * x) + (x * _ALPHA - x / 2.0), mask=offs < n)


x = torch.linspace(-3, 3, 10)
y = torch.empty_like(x)
try:
    _scale[(1,)](x, y, 10, BLOCK=16)
    print("stock: ran")
except Exception as exc:  # the interpreter alone wraps `_ALPHA * x` in a constexpr, which tl.sigmoid rejects
    print("stock:", type(exc).__name__)
standin.install()
_scale[(1,)](x, y, 10, BLOCK=16)
assert torch.allclose(y, torch.sigmoid(0.5 * x), atol=1e-6), y
print("standin: ran")
'''


def test_a_constexpr_global_times_a_block_is_the_block_under_the_interpreter(tmp_path) -> None:
    """``_ALPHA = tl.constexpr(0.5)`` at module level and ``_ALPHA * x`` in a kernel (xformers' GeLU constant): the
    compiler reads the global by its value; under the interpreter the stand-in makes the product the block, as the
    compiled kernel computes it."""
    (tmp_path / "constexpr_global.py").write_text(CONSTEXPR_GLOBAL)
    out = subprocess.run([sys.executable, str(tmp_path / "constexpr_global.py")], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "standin: ran" in out.stdout, out.stdout


def test_a_block_partly_inside_a_tensor_is_charged_to_it_not_to_the_storage_it_runs_into() -> None:
    """Offsets from ``S`` that run far past its end land after another input (``A``, put there by the heap): the
    out-of-bounds elements are ``S``'s, where the block's in-bounds elements lie, so the grown input is the right one."""
    import numpy as np

    from evaluator import bounds

    class Ptrs:
        def __init__(self, addr):
            self.data = np.array(addr, dtype=np.uint64)

        def get_element_ty(self):
            return type("T", (), {"primitive_bitwidth": 32})()

    saved = bounds._bounds
    # S holds 4 floats at 1000, A 4 at 5000: S's block reads its elements 2002, 2003 (far past A too), then 2, 3
    bounds._bounds = (np.array([1000, 5000], dtype=np.uint64), np.array([1016, 5016], dtype=np.uint64), ["S", "A"], "k")
    try:
        bounds._check(Ptrs([9008, 9012, 1008, 1012]), None, "loads")
    except IndexError as exc:
        said = str(exc)
    finally:
        bounds._bounds = saved
    assert "(the first: element 2002 of 'S', whose storage holds 4; the furthest: element 2003)" in said, said


def test_a_small_table_has_room_enough_that_a_read_far_past_it_is_charged_to_it() -> None:
    """Each input of an interpreter call sits in its own buffer, with room on both sides that no tensor owns. A table
    of 3 int64 is given 64 KiB of room, not 3 elements: its element 400 (a row a size too far) lands in the table's
    own room, nearest to it, and so it is the input grown; with the room only as large as the table, the read fell
    by another input."""
    import numpy as np
    import torch

    from evaluator import bounds

    saved = bounds._installed
    bounds._installed = True
    try:
        table = bounds.padded_empty(torch.Size([3]), (1,), torch.int64, "cpu")
        start, nbytes = bounds._owned[table.untyped_storage().data_ptr()]
    finally:
        bounds._installed = saved
    assert (start, nbytes) == (table.data_ptr(), 24)
    assert start - table.untyped_storage().data_ptr() >= 64 << 10  # the room before it
    assert table.untyped_storage().nbytes() - nbytes >= 2 * (64 << 10)  # and after it
    assert np.uint64(start + 400 * 8) < np.uint64(table.untyped_storage().data_ptr() + table.untyped_storage().nbytes())


LAUNCHES = '''
import torch
import triton
import triton.language as tl

from evaluator.correctness import launches
from evaluator.runtime import LaunchCounter

LaunchCounter.install()


@triton.jit
def _clamp_sub(L, P, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    lens = tl.maximum(tl.load(L + offs, mask=offs < n), 1)
    tl.store(P + offs, tl.minimum(tl.load(P + offs, mask=offs < n), lens - 1), mask=offs < n)


def glue(lens, positions):
    lens = lens.clamp(min=1).to(torch.int32)  # clamp: 1; .to int32 of int32: no op
    positions = torch.minimum(positions, (lens - 1).to(positions.dtype))  # sub, _to_copy, minimum: 3
    return lens.view(-1), positions.unsqueeze(0).squeeze(0)  # views: none


def fused(lens, positions):
    out = torch.empty_like(positions)  # an allocation: none
    out.copy_(positions)  # 1
    _clamp_sub[(1,)](lens, out, lens.numel(), BLOCK=8)  # 1, and none for the interpreter's own argument copies
    return lens, out


args = {"lens": torch.tensor([0, 3, 9], dtype=torch.int32), "positions": torch.tensor([5, 1, 4])}
print(launches(glue, dict(args), "cpu"), launches(fused, dict(args), "cpu"))
'''


def test_launches_counts_what_a_gpu_would_launch(tmp_path) -> None:
    """A fusion's evidence without a GPU: a call's ATen ops that launch a kernel on a GPU, and its Triton launches;
    no views or allocations, and none of the copies the interpreter makes of a launch's arguments."""
    (tmp_path / "count.py").write_text(LAUNCHES)
    out = subprocess.run([sys.executable, str(tmp_path / "count.py")], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["4", "2"]


def test_each_case_runs_what_its_autotuner_chose_on_that_case_not_on_the_first(tmp_path) -> None:
    """An autotuner keys its choice on some arguments only. `Picks.on(case)` gives every autotuned kernel of the
    entry's module (one behind `@heuristics` too) what it chose on that case, or nothing, so that a case tunes on
    itself; `forget_autotuning` drops every choice. Without this, lmdeploy's router kernel ran the config picked on a
    decode case for prefill too, and a config list with one entry changed verified 1.51x faster on the H200 after
    the search had measured it at 1.03x."""
    from evaluator.runtime import Picks, autotuners, forget_autotuning, load_module

    path = tmp_path / "tuned.py"
    path.write_text('''
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=["n"])
@triton.jit
def _tuned(X, n):
    pass


@triton.autotune(configs=[triton.Config({}, num_warps=2)], key=["n"])
@triton.heuristics({"BLOCK": lambda args: 16})
@triton.jit
def _tuned_heuristic(X, n, BLOCK: tl.constexpr):
    pass


def entry(x):
    return x
''')
    module = load_module(path, "tuned", interpreter=False)
    tuners = autotuners(vars(module))
    assert len(tuners) == 2
    picks = Picks(module.entry)
    with picks.on("decode"):
        assert all(t.cache == {} for t in tuners)
        tuners[0].cache[(7,)] = tuners[0].configs[1]  # as a first call on the decode case would choose
    with picks.on("prefill"):
        assert all(t.cache == {} for t in tuners)  # not decode's choice
        tuners[0].cache[(7,)] = tuners[0].configs[0]
    with picks.on("decode"):
        assert tuners[0].cache == {(7,): tuners[0].configs[1]} and tuners[1].cache == {}
    forget_autotuning(module.entry)
    assert all(t.cache == {} for t in tuners)


UNTIMED = '''
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from evaluator.runtime import forget_autotuning, load_module, untimed_autotuning

SRC = """
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def _tuned(Out, Runs, n, BLOCK: tl.constexpr):
    tl.store(Out, BLOCK)
    tl.atomic_add(Runs, 1)


def entry(out, runs):
    _tuned[(1,)](out, runs, 4)
"""
path = Path(sys.argv[1])
path.write_text(SRC)
module = load_module(path, "untimed", interpreter=False)  # both configs kept, as on a GPU
out, runs = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
with untimed_autotuning():
    module.entry(out, runs)
tuner = module._tuned
print(int(runs), int(out), len(tuner.cache))
forget_autotuning(module.entry)
print(len(tuner.cache))
'''


def test_an_untimed_warm_up_runs_each_config_once_and_keeps_no_choice(tmp_path) -> None:
    """A candidate's warm-up runs outside the GPU lock, while another worker may be timing: its autotuners run each
    config once (every config compiled) and time nothing; the choice they settle on (the first) is forgotten, and
    the check and the timing, under the lock, pick. Under the interpreter, where Triton's own tuner would time each
    config on a GPU's events."""
    script = tmp_path / "untimed.py"
    script.write_text(UNTIMED)
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "k.py")], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    # two configs run once each, then the call itself on the first; one choice held, none after forgetting
    assert out.stdout.split() == ["3", "16", "1", "0"]


BUILTIN_ALIAS = '''
import sys
from pathlib import Path

import torch

from evaluator.runtime import load_module

Path(sys.argv[1]).write_text("""
import triton
import triton.language as tl

exp = tl.exp  # FLA's op.py binds its math this way


@triton.jit
def _exp(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Y + offs, exp(tl.load(X + offs, mask=offs < n)), mask=offs < n)
""")
x, y = torch.randn(10), torch.zeros(10)
module = load_module(Path(sys.argv[1]), "alias", interpreter=True)
module._exp[(1,)](x, y, 10, BLOCK=16)
assert torch.allclose(y, torch.exp(x)), y
print("alias: ran")
'''


def test_a_module_alias_of_a_triton_builtin_runs_under_the_interpreter(tmp_path) -> None:
    """``exp = tl.exp`` at module level names the builtin as it was before the interpreter patched ``tl``; the
    interpreter worker's module loader makes each such alias look the builtin up when called, so the kernel runs."""
    (tmp_path / "alias.py").write_text(BUILTIN_ALIAS)
    out = subprocess.run([sys.executable, str(tmp_path / "alias.py"), str(tmp_path / "kernel_alias.py")],
                         capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "alias: ran" in out.stdout, out.stdout
