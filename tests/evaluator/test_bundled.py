"""Each bundled task holds up: its baseline matches its reference, zeros fail, and its example candidates pass."""

from __future__ import annotations

import pytest

from tests.conftest import TASKS
from tests.evaluator.test_task import BUNDLED


@pytest.mark.parametrize("name", BUNDLED)
def test_baseline_against_itself(name: str, evaluators) -> None:
    ev = evaluators.get(name)
    assert ev.prepare() == []  # no "zeros pass" warning: every task is strong enough
    result = ev.submit(TASKS / name / "kernel.py").result()
    if ev.task.kind == "fusion":
        # A fusion baseline is plain PyTorch: as a candidate it must be refused for launching no Triton kernel.
        assert (result.status, result.reason) == ("incorrect", "no_launch")
    else:
        assert result.correct, result.detail
        # Identical code on both sides: the interpreter's wall-clock ratio must sit near 1.
        assert result.backend == "interpreter" and result.timing_method == "interpreter_wall"
        assert result.speedup is not None and 0.5 < result.speedup < 2.0


@pytest.mark.parametrize("path", sorted(TASKS.glob("*/candidates/*.py")), ids=lambda p: f"{p.parent.parent.name}-{p.stem}")
def test_example_candidates_are_correct(path, evaluators) -> None:
    result = evaluators.get(path.parent.parent.name).submit(path).result()
    assert result.correct, result.detail
