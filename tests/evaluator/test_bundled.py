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
        assert result.status == "correct", result.detail
        assert result.speedup is None and result.backend == "interpreter"


@pytest.mark.parametrize("path", sorted(TASKS.glob("*/candidates/*.py")), ids=lambda p: f"{p.parent.parent.name}-{p.stem}")
def test_example_candidates_are_correct(path, evaluators) -> None:
    result = evaluators.get(path.parent.parent.name).submit(path).result()
    assert result.status == "correct", result.detail
