"""Re-insertion as before/after data: only the changed definitions move, everything else stays byte for byte."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from evaluator import load_task
from smithbot import api
from smithbot.evolve import tune
from smithbot.propose.reinsert import ReinsertError, reinsert

# The upstream file: decorator forms, an alias the extractor rewrites, a method, and code around it all.
UPSTREAM = '''"""Upstream module: nothing here but the changed lines may move."""
import torch
import triton
import triton.language as tl
from triton.language import exp as _exp  # an alias the extractor rewrites to tl.exp

CONSTANT = 7  # untouched


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],
                 key=["n"])
@triton.jit
def _act_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n)
    tl.store(y_ptr + i, _exp(x), mask=i < n)


@triton.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
@triton.jit
def _scale_kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)


class Layer:
    """A layer whose method launches a kernel."""

    def forward(self, x):
        # a comment inside the method stays
        n = x.numel()
        _scale_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=256, num_warps=4)
        return x


def act(x):
    y = torch.empty_like(x)
    _act_kernel[lambda META: (triton.cdiv(x.numel(), META["BLOCK"]),)](x, y, x.numel())
    return y
'''

# The task's baseline, as the extractor writes it: the same definitions inside an EVOLVE-BLOCK, the alias rewritten.
BASELINE = ("import torch\nimport triton\nimport triton.language as tl\n\n# EVOLVE-BLOCK-START\n"
            + UPSTREAM.split("CONSTANT = 7  # untouched\n", 1)[1].replace("_exp(x)", "tl.exp(x)")
            + "\n\n# EVOLVE-BLOCK-END\n")


def _task(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "upstream"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "ops.py").write_text(UPSTREAM)
    task = tmp_path / "task"
    task.mkdir()
    (task / "kernel.py").write_text(BASELINE)
    (task / "harness.py").write_text("def make_inputs(case, generator):\n    return {}\n")
    defs = [{"name": n, "path": "pkg/ops.py", "qualname": q} for n, q in
            (("_act_kernel", "_act_kernel"), ("_scale_kernel", "_scale_kernel"), ("Layer", "Layer"), ("act", "act"))]
    (task / "task.yaml").write_text(yaml.safe_dump({
        "id": "fixture-act", "kind": "triton", "entry": "act", "provenance": {"repo": "x", "commit": None,
                                                                               "definitions": defs},
        "cases": [{"name": "c", "regime": "decode", "dtype": "fp32", "dims": {"n": 10}}]}))
    return task, repo


def _changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    import difflib

    sm = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines())
    return [(" | ".join(before.splitlines()[i1:i2]), " | ".join(after.splitlines()[j1:j2]))
            for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"]


@pytest.mark.parametrize("edit, expected", [
    # an autotune config list changed: only that decorator line moves
    (('triton.Config({"BLOCK": 64}, num_warps=2)', 'triton.Config({"BLOCK": 256}, num_warps=8)'),
     [('@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],',
       '@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=8), triton.Config({"BLOCK": 128}, num_warps=4)],')]),
    # a method's launch config changed (qualname Layer, the class holds it)
    (("BLOCK=256, num_warps=4)", "BLOCK=1024, num_warps=8)"),
     [("        _scale_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=256, num_warps=4)",
       "        _scale_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=1024, num_warps=8)")]),
    # a kernel body line next to a line the extractor rewrote: the upstream alias stays
    (("    x = tl.load(x_ptr + i, mask=i < n)\n", "    x = tl.load(x_ptr + i, mask=i < n, other=0.0)\n"),
     [("    x = tl.load(x_ptr + i, mask=i < n)", "    x = tl.load(x_ptr + i, mask=i < n, other=0.0)")]),
])
def test_only_the_changed_lines_move(tmp_path: Path, edit: tuple[str, str], expected: list) -> None:
    task_dir, repo = _task(tmp_path)
    cand = BASELINE.replace(*edit)
    assert cand != BASELINE
    r = reinsert(load_task(task_dir), cand, repo)
    after = (repo / "pkg" / "ops.py").read_text()
    assert _changed_lines(UPSTREAM, after) == expected and r.changed_files == ("pkg/ops.py",)
    assert "from triton.language import exp as _exp" in after and "_exp(x)" in after
    again = reinsert(load_task(task_dir), cand, repo)  # idempotent
    assert (repo / "pkg" / "ops.py").read_text() == after and again.changed_files == ()


def test_baseline_round_trips_and_helpers_are_added(tmp_path: Path) -> None:
    task_dir, repo = _task(tmp_path)
    assert reinsert(load_task(task_dir), BASELINE, repo).changed_files == ()
    assert (repo / "pkg" / "ops.py").read_text() == UPSTREAM
    helper = "@triton.jit\ndef _fast_exp(x):\n    return tl.exp2(x * 1.4426950408889634)\n\n\n"
    cand = BASELINE.replace("@triton.heuristics", helper + "@triton.heuristics").replace(
        "    x = tl.load(x_ptr + i, mask=i < n)\n", "    x = _fast_exp(tl.load(x_ptr + i, mask=i < n))\n")
    r = reinsert(load_task(task_dir), cand, repo)
    after = (repo / "pkg" / "ops.py").read_text()
    assert r.added == ("pkg/ops.py::_fast_exp",) and r.replaced == ("pkg/ops.py::_act_kernel",)
    assert after.index("def _act_kernel") < after.index("def _fast_exp") < after.index("@triton.heuristics")
    assert after.count("def _fast_exp") == 1 and "    x = _fast_exp(tl.load(x_ptr + i, mask=i < n))\n" in after
    reinsert(load_task(task_dir), cand, repo)
    assert (repo / "pkg" / "ops.py").read_text() == after  # idempotent, the helper is not added twice


def test_upstream_that_moved_on_stops_with_a_reason(tmp_path: Path) -> None:
    task_dir, repo = _task(tmp_path)
    (repo / "pkg" / "ops.py").write_text(UPSTREAM.replace("BLOCK=256, num_warps=4)", "BLOCK=512, num_warps=2)"))
    with pytest.raises(ReinsertError, match="pkg/ops.py::Layer: the candidate changes lines that differ upstream"):
        reinsert(load_task(task_dir), BASELINE.replace("BLOCK=256, num_warps=4)", "BLOCK=1024, num_warps=8)"), repo)
    (repo / "pkg" / "ops.py").write_text(UPSTREAM.replace("class Layer:", "class Renamed:"))
    with pytest.raises(ReinsertError, match="Layer is not defined in the target file any more"):
        reinsert(load_task(task_dir), BASELINE.replace("BLOCK=256, num_warps=4)", "BLOCK=1024, num_warps=8)"), repo)


def test_extracted_from_the_demo_then_reinserted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from smithbot.config import TARGETS_DIR

    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    [row] = api.extract("demo", "rms_norm", out=tmp_path / "task", check=False)
    task = load_task(row.out)
    src = task.kernel_path.read_text()
    ks = {k.name: k for k in tune.knobs(src)}
    cand = tune.set_knobs(src, {ks["BLOCK"].id: 1024, ks["num_warps"].id: (2, 8)})
    upstream = tmp_path / "upstream"
    shutil.copytree(TARGETS_DIR / "demo", upstream)
    subprocess.run(["git", "init", "-q", str(upstream)], check=True)
    subprocess.run(["git", "-C", str(upstream), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(upstream), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"],
                   check=True)
    r = reinsert(task, cand, upstream)
    diff = subprocess.run(["git", "-C", str(upstream), "diff", "--stat"], capture_output=True, text=True).stdout
    assert r.changed_files == ("minengine/kernels/norm.py",) and "1 file changed, 1 insertion(+), 1 deletion(-)" in diff
    line = next(ln for ln in (upstream / "minengine/kernels/norm.py").read_text().splitlines() if "_rms_norm_kernel[" in ln)
    assert line.endswith("BLOCK=1024, num_warps=(2 if x.shape[0] <= 256 else 8))")


def test_formatter_runs_only_on_files_that_were_clean(tmp_path: Path) -> None:
    from smithbot.propose.reinsert import run_formatters

    clean = "def f(x):\n    return g(x, BLOCK=32)\n"
    messy = "def f( x ):\n    return g(x,BLOCK=32)\n"
    (tmp_path / "a.py").write_text(clean.replace("BLOCK=32", "BLOCK=64 ,  num_warps=8"))  # the change, unformatted
    (tmp_path / "b.py").write_text(messy.replace("BLOCK=32", "BLOCK=64"))
    notes = run_formatters(tmp_path, ("a.py", "b.py"), ("black",), originals={"a.py": clean, "b.py": messy})
    assert (tmp_path / "a.py").read_text() == "def f(x):\n    return g(x, BLOCK=64, num_warps=8)\n"
    assert (tmp_path / "b.py").read_text() == messy.replace("BLOCK=32", "BLOCK=64")  # left alone
    assert notes == ["`b.py` was not `black`-clean before this change; it was left unformatted so that the diff holds "
                     "only the change"]
    assert run_formatters(tmp_path, ("a.py",), ("no-such-formatter",)) == [
        "`no-such-formatter` is not installed here, so the changed files were not formatted with it"]
