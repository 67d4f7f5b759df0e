"""Every cheat is rejected, for the reason it should be. The same suite runs on the interpreter (CI) and, marked
``gpu``, on a real GPU, where stream and timing cheats matter most."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.cheats import CHEATS, Cheat


def _run(cheat: Cheat, backend: str, evaluators, tmp_path: Path):
    path = tmp_path / f"{cheat.name}.py"
    path.write_text(cheat.source())
    ev = evaluators.get(cheat.task, backend, cheat.timeout_s)
    return ev.submit(path).result()


def _check(result, cheat: Cheat) -> None:
    assert (result.status, result.reason) == (cheat.status, cheat.reason), (
        f"{cheat.name}: got {result.status}/{result.reason}: {result.detail}\n{result.log_tail[-1500:]}")
    assert not result.correct


def test_at_least_forty_six_cheats() -> None:
    assert len(CHEATS) >= 46
    assert len({c.name for c in CHEATS}) == len(CHEATS)


@pytest.mark.parametrize("cheat", CHEATS, ids=[c.name for c in CHEATS])
def test_cheat_rejected_interpreter(cheat: Cheat, evaluators, tmp_path: Path) -> None:
    _check(_run(cheat, "interpreter", evaluators, tmp_path), cheat)


@pytest.mark.gpu
@pytest.mark.parametrize("cheat", CHEATS, ids=[c.name for c in CHEATS])
def test_cheat_rejected_cuda(cheat: Cheat, evaluators, tmp_path: Path) -> None:
    _check(_run(cheat, "cuda", evaluators, tmp_path), cheat)
