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
