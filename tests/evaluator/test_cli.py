"""``python -m evaluator`` and ``smithbot eval``: help, results, and one clear line for every bad input."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, TASKS

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=600)


def assert_one_line_error(p: subprocess.CompletedProcess[str], words: str) -> None:
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error:") and words in lines[0], lines[0]
    assert "Traceback" not in p.stderr


def test_help() -> None:
    for mod in ("evaluator", "smithbot"):
        p = run("-m", mod, "--help")
        assert p.returncode == 0
        assert "candidate" in p.stdout.lower() or "eval" in p.stdout


def test_evaluator_cli_on_bundled_task(tmp_path: Path) -> None:
    p = run("-m", "evaluator", str(TASKS / "decode_metadata"), str(TASKS / "decode_metadata" / "candidates" / "fused.py"),
            str(TASKS / "decode_metadata" / "kernel.py"), "--backend", "interpreter")
    assert p.returncode == 0, p.stderr
    fused, base = p.stdout.splitlines()
    assert re.fullmatch(r"fused\.py: (correct|promoted) \d+\.\d{3}x \[\d+\.\d{3}, \d+\.\d{3}\]", fused), fused
    assert base == "kernel.py: incorrect (no_launch: case llama3-8b-decode-bs1 seed 0: the candidate launched no Triton kernel)"


def test_smithbot_eval_json(tmp_path: Path) -> None:
    import json

    p = run("-m", "smithbot", "eval", "rmsnorm", str(TASKS / "rmsnorm" / "candidates" / "single_pass.py"),
            "--backend", "interpreter", "--json")
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result["status"] in ("correct", "promoted") and result["backend"] == "interpreter"
    assert result["timing_method"] == "interpreter_wall" and result["speedup"] > 0


@pytest.mark.parametrize("mod", ["evaluator", "smithbot"])
def test_bad_inputs(mod: str, tmp_path: Path) -> None:
    prefix = ["-m", mod] + (["eval"] if mod == "smithbot" else [])
    cand = TASKS / "rmsnorm" / "kernel.py"
    assert_one_line_error(run(*prefix, str(tmp_path / "missing"), str(cand)), "no such task" if mod == "smithbot"
                          else "does not exist")
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in ("kernel.py", "harness.py"):
        (bad / f).write_text((TASKS / "rmsnorm" / f).read_text())
    (bad / "task.yaml").write_text("id: [oops\n")
    assert_one_line_error(run(*prefix, str(bad), str(cand)), "malformed YAML")
    junk = tmp_path / "junk.py"
    junk.write_text("this is not python at all (\n")
    assert_one_line_error(run(*prefix, str(TASKS / "rmsnorm"), str(junk)), "not a Python file")
    assert_one_line_error(run(*prefix, str(TASKS / "rmsnorm"), str(cand), "--backend", "cuda"), "needs a CUDA GPU")


def test_inputs_that_do_not_fit(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "huge"
    shutil.copytree(TASKS / "rmsnorm", root)
    text = (root / "task.yaml").read_text().replace("dims: {tokens: 3, hidden: 1000}", "dims: {tokens: 100000000, hidden: 100000000}")
    (root / "task.yaml").write_text(text)
    p = run("-m", "evaluator", str(root), str(root / "kernel.py"), "--backend", "interpreter")
    assert_one_line_error(p, "do not fit in memory")
