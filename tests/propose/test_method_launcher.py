"""A kernel launched from a method (vLLM's ``BlockTable.compute_slot_mapping``): extraction flattens it into a
function that builds a stand-in ``self``; the generated test must call the target's own method the same way. It
imported the Triton kernel itself as the new launcher, and so could not pass."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import load_task
from smithbot import api
from smithbot.evolve import tune
from tests.conftest import git_repo

TABLE = '''import torch
import triton
import triton.language as tl


@triton.jit
def _scale_rows_kernel(src_ptr, out_ptr, n_cols, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    for start in range(0, n_cols, BLOCK):
        m = start + offs < n_cols
        x = tl.load(src_ptr + row * n_cols + start + offs, mask=m)
        tl.store(out_ptr + row * n_cols + start + offs, x * scale, mask=m)


class ScaledTable:
    def __init__(self, rows: int, cols: int, scale: float):
        self.out = torch.zeros(rows, cols)
        self.scale = scale

    def scale_rows(self, src: torch.Tensor) -> None:
        rows, cols = src.shape
        _scale_rows_kernel[(rows,)](src, self.out, cols, self.scale, BLOCK=16)
'''


def _pytest(checkout: Path, test: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(checkout), "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=checkout,
                          capture_output=True, text=True, env=env, timeout=300)


def test_the_generated_test_of_a_method_launcher_calls_the_targets_method(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    upstream = git_repo(tmp_path / "upstream", {"minitab/__init__.py": "", "minitab/table.py": TABLE})
    [row] = api.extract(str(upstream), "_scale_rows_kernel", out=tmp_path / "task", source=str(upstream))
    task = load_task(row.out)
    assert task.entry == "ScaledTable_scale_rows_flat"
    src = task.kernel_path.read_text()
    knobs = {k.name: k for k in tune.knobs(src)}
    replay = tmp_path / "replay.jsonl"
    cand = tune.set_knobs(src, {knobs["BLOCK"].id: 1024})
    replay.write_text(json.dumps({"response": f"```python\n{cand}```", "format": "full"}) + "\n")
    db = tmp_path / "runs.db"
    run = api.evolve(row.out, proposer="replay", replay=str(replay), iterations=1, backend="interpreter",
                     db=db).run_id
    assert api.verify(run, top=1, db=db).winner
    [(same, _)] = api.propose([run], source=str(upstream), out=tmp_path / "pr", db=db)
    [out] = (tmp_path / "pr").iterdir()
    test = next(out.glob("test_*.py")).read_text()
    assert "from minitab.table import ScaledTable\n" in test
    assert re.search(r"def ScaledTable_scale_rows_flat_new\(.*\n(.*\n)*?.*ScaledTable\.scale_rows\(", test), test
    # the patch applied to the base commit, and the generated test run there, on the change
    subprocess.run(["git", "-C", str(upstream), "apply", str(out / "patch.diff")], check=True)
    ok = _pytest(upstream, str(next(upstream.rglob("test_*.py")).relative_to(upstream)))
    assert ok.returncode == 0 and re.search(r"^\d+ passed", ok.stdout, re.M), ok.stdout + ok.stderr
