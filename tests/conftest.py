"""Shared fixtures: one evaluator (and so one warm worker) per bundled task and backend for the whole session."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from evaluator import Evaluator

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "smithbot" / "tasks"


def git_repo(repo: Path, files: dict[str, str]) -> Path:
    """A real git repository at ``repo`` holding ``files`` (relative path -> text) in one commit."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    return repo


@pytest.fixture()
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The fake engine of ``tests/program/engine.py`` as a git checkout, and the path of its target YAML."""
    from tests.program.engine import FILES, TARGET_YAML

    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    root = git_repo(tmp_path / "eng", FILES)
    yaml = tmp_path / "eng.yaml"
    yaml.write_text(TARGET_YAML.format(root=root))
    return str(yaml)


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


class EvaluatorCache:
    def __init__(self) -> None:
        self._evs: dict[tuple[str, str, float], Evaluator] = {}

    def get(self, task: str, backend: str = "interpreter", timeout_s: float = 240.0) -> Evaluator:
        key = (task, backend, timeout_s)
        if key not in self._evs:
            self._evs[key] = Evaluator(TASKS / task, backend=backend, timeout_s=timeout_s, rounds=10)
        return self._evs[key]

    def close(self) -> None:
        for ev in self._evs.values():
            ev.close()


@pytest.fixture(scope="session")
def evaluators() -> Iterator[EvaluatorCache]:
    cache = EvaluatorCache()
    yield cache
    cache.close()


@pytest.fixture(autouse=True)
def _no_interpreter_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    # The parent never runs candidate code; the interpreter flag belongs to worker children only.
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    os.environ.pop("TRITON_INTERPRET", None)


def load_module(path: Path, name: str) -> Any:
    """The Python file at ``path`` imported as module ``name`` (a harness or task a test wrote)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


_SCAN_ONCE = """import json, sys
from smithbot import api
r = api.scan(sys.argv[1], source=sys.argv[2] or None, model=sys.argv[3] or None)
print(json.dumps(sorted((s.name, s.presets, s.reach, s.default_path, s.reasons) for s in r.sites)
                 + sorted(str(f) for f in r.fusion), default=str))
"""


def scans_under_seeds(target: str, source: str | None, home: Path, seeds: tuple[str, ...],
                      model: str | None = None) -> list[str]:
    """One cold scan per hash seed, each in its own process and SMITHBOT_HOME: its sites and fusion runs as text."""
    import sys

    outs = []
    for seed in seeds:
        env = {**os.environ, "PYTHONHASHSEED": seed, "SMITHBOT_HOME": str(home / f"home{seed}")}
        run = subprocess.run([sys.executable, "-c", _SCAN_ONCE, target, source or "", model or ""], env=env,
                             capture_output=True, text=True, check=True, timeout=1200)
        outs.append(run.stdout)
    return outs
