"""What a target YAML of one's own can say about a launcher's inputs, run end to end on a fixture repository: inputs of
its own for a kernel the launcher picks by shape (``_kernels:``), inputs for one file's launcher of a common name
(``FILE::call``), and what extraction does with kernels of one name in two files, a name the target defines nowhere,
TorchScript helpers and a launcher that asks for a CUDA tensor."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from smithbot import api
from smithbot.inputs.harness import harness_source
from smithbot.types import InputPlan
from tests.conftest import git_repo, load_module

SCALE = '''import torch
import triton
import triton.language as tl


@triton.jit
def _narrow_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Out + tl.program_id(0) * n + offs, tl.load(X + tl.program_id(0) * n + offs, mask=offs < n) * 2.0,
             mask=offs < n)


@triton.jit
def _wide_kernel(X, Out, n, BLOCK: tl.constexpr):
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tl.store(Out + tl.program_id(0) * n + offs, tl.load(X + tl.program_id(0) * n + offs, mask=offs < n) * 2.0,
                 mask=offs < n)


def scale(x):
    out = torch.empty_like(x)
    n = x.shape[-1]
    if n <= 128:  # a test on a shape: no flag of the launcher's takes the other branch
        _narrow_kernel[(x.shape[0],)](x, out, n, BLOCK=128)
    else:
        _wide_kernel[(x.shape[0],)](x, out, n, BLOCK=128)
    return out
'''

OPS = '''import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(X + offs, mask=offs < n) + {add}, mask=offs < n)


@torch.jit.script
def _rows(x: torch.Tensor) -> int:
    return x.shape[0]


def call(x):
    assert x.device.type == "cuda"  # what x.is_cuda asks
    device = x.device
    assert device.type == "cuda"  # the same, through a local
    out = torch.empty_like(x, device=device)
    if x.dim() > 5:
        undefined_kernel[(1,)](x)  # a dead path of the target's: nothing defines this name
    _copy_kernel[(triton.cdiv(x.numel(), 64) + 0 * _rows(x),)](x, out, x.numel(), BLOCK=64)
    return out
'''

TILES = '''import torch
import triton
import triton.language as tl


@triton.jit
def _one_tile_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(X + offs, mask=offs < n) * 3.0, mask=offs < n)


@triton.jit
def _tiles_kernel(X, Out, n, TILES: tl.constexpr, BLOCK: tl.constexpr):
    for t in tl.static_range(TILES):
        offs = (tl.program_id(0) * TILES + t) * BLOCK + tl.arange(0, BLOCK)
        tl.store(Out + offs, tl.load(X + offs, mask=offs < n) * 3.0, mask=offs < n)


def _pick_tiles():
    import os  # a tuning knob read from the environment, which a task may not read

    return int(os.environ.get("TILES", "1"))


def tiled(x):
    out = torch.empty_like(x)
    tiles = _pick_tiles()
    if tiles > 1:
        _tiles_kernel[(triton.cdiv(x.numel(), 64 * tiles),)](x, out, x.numel(), TILES=tiles, BLOCK=64)
    else:
        _one_tile_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out
'''

TARGET = '''name: engine
repo: {repo}
models: [llama3-8b]
regimes: {{decode_batch: [1, 8], prefill_tokens: [512]}}
inputs:
  scale:
    x: {{shape: [tokens, 64]}}
    _kernels:
      _wide_kernel: {{x: {{shape: [tokens, 300]}}}}  # the launcher takes this kernel for rows wider than 128
  tiled:
    x: {{shape: [tokens, 100]}}
    _stubs: {{_pick_tiles: 1}}  # the helper's value for this launcher's task
    _kernels:
      _tiles_kernel: {{_stubs: {{_pick_tiles: 4}}}}  # and the value that takes the other kernel
  engine/b/ops.py::call:  # only b's launcher named call
    x: {{shape: [tokens, 7], dtype: fp32}}
'''


@pytest.fixture()
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/scale.py": SCALE,
                                          "engine/a/ops.py": OPS.format(add="1.0"),
                                          "engine/b/ops.py": OPS.format(add="2.0"), "engine/tiles.py": TILES})
    target = tmp_path / "engine.yaml"
    target.write_text(TARGET.format(repo=repo))
    return repo, target


def test_a_target_yaml_of_ones_own_steers_extraction(engine: tuple[Path, Path], tmp_path: Path) -> None:
    repo, target = engine
    rows = api.extract(str(target), None, out=tmp_path / "tasks", source=str(repo), all_kernels=True, check=True)
    by = {(r.kernel, r.path): r for r in rows}
    assert all(r.checked for r in rows), [(r.kernel, r.why) for r in rows if not r.checked]
    # the launcher's task launches the narrow kernel; the wide one gets a task of its own, with its own inputs
    narrow, wide = by["_narrow_kernel", "engine/scale.py"], by["_wide_kernel", "engine/scale.py"]
    # (which of the two is said to have its own inputs follows the order they are extracted in, hottest first)
    assert wide.out != narrow.out and (wide.why.endswith("(with its own inputs)")
                                       or "the launcher's plain inputs" in narrow.why), (wide.why, narrow.why)
    assert "'shape': ['tokens', 300]" in (wide.out / "harness.py").read_text()
    # a helper the task cannot have (it reads the environment) takes the launcher's `_stubs:` value, and the
    # kernel's own value in that kernel's task
    one, tiles = by["_one_tile_kernel", "engine/tiles.py"], by["_tiles_kernel", "engine/tiles.py"]
    assert tiles.out != one.out and (tiles.why.endswith("(with its own inputs)")
                                     or "the launcher's plain inputs" in one.why), (tiles.why, one.why)
    assert "return 4" in (tiles.out / "kernel.py").read_text() and "environ" not in (one.out / "kernel.py").read_text()
    # one kernel name in two files: a task each, named after its file too; b's launcher takes b's inputs
    a, b = by["_copy_kernel", "engine/a/ops.py"], by["_copy_kernel", "engine/b/ops.py"]
    assert (a.out.name, b.out.name) == ("copy_kernel-engine.a.ops", "copy_kernel-engine.b.ops")
    assert "'shape': ['tokens', 7]" in (b.out / "harness.py").read_text()
    assert "'shape': ['tokens', 7]" not in (a.out / "harness.py").read_text()
    assert "engine-copy_kernel-engine.b.ops" in (b.out / "task.yaml").read_text()
    kernel = (b.out / "kernel.py").read_text()
    # the undefined name fails only if its path is taken; TorchScript's decorator is gone, its function kept
    assert "raise NameError('undefined_kernel is not defined in the target (engine/b/ops.py)')" in kernel
    assert "torch.jit" not in kernel and "def _rows(" in kernel
    assert kernel.count("assert x.is_cuda") == 2 and "device.type" not in kernel


def test_a_target_yaml_that_is_not_there_is_an_unknown_target(tmp_path: Path) -> None:
    from smithbot.config import ConfigError

    with pytest.raises(ConfigError, match="unknown target"):
        api.resolve_target(str(tmp_path / "missing.yaml"))


def test_inits_transposed_one_hot_and_ranges_from_a_first_value(tmp_path: Path) -> None:
    """``arange:STEP:FIRST`` counts from FIRST, ``onehot`` puts a single 1 in each row, ``transposed`` hands over the
    transpose of a tensor drawn the other way round (a weight passed as ``w.t()``)."""
    specs = {"odd": {"shape": [4], "dtype": "int64", "init": "arange:2:1"},
             "mask": {"shape": ["top_k", "tokens", 8], "dtype": "int64", "init": "onehot"},
             "w": {"shape": ["hidden", 6], "transposed": True}}
    (tmp_path / "harness.py").write_text(harness_source("f", InputPlan.read(specs, {}), "given"))
    mod = load_module(tmp_path / "harness.py", "harness_inits")
    args = mod.make_inputs({"dtype": torch.float32, "tokens": 5, "top_k": 2, "hidden": 3},
                           torch.Generator().manual_seed(0))
    assert args["odd"].tolist() == [1, 3, 5, 7]
    assert args["mask"].shape == (2, 5, 8) and args["mask"].sum(-1).eq(1).all()
    assert args["w"].shape == (3, 6) and args["w"].stride() == (1, 3) and args["w"].t().is_contiguous()
