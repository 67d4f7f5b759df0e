"""The entry points behind the CLI, for programmatic use."""

from __future__ import annotations

from pathlib import Path

from evaluator import EvalResult, Evaluator, TaskError

BUNDLED_TASKS = Path(__file__).resolve().parent / "tasks"


def bundled_tasks() -> list[str]:
    """Names of the example tasks shipped with smithbot."""
    return sorted(p.name for p in BUNDLED_TASKS.iterdir() if (p / "task.yaml").is_file())


def resolve_task(task: str | Path) -> Path:
    """A task directory, or the name of a bundled task."""
    path = Path(task)
    if path.is_dir():
        return path
    if isinstance(task, str) and task in bundled_tasks():
        return BUNDLED_TASKS / task
    raise TaskError(f"{task}: no such task directory or bundled task (bundled: {', '.join(bundled_tasks())})")


def evaluate(task: str | Path, candidates: list[str | Path], backend: str = "auto", timeout_s: float = 300.0,
             rounds: int = 30, min_gain: float = 0.02) -> tuple[list[str], list[EvalResult]]:
    """Evaluate candidate files against a task's baseline. Returns the task's warnings and one result each."""
    root = resolve_task(task)
    with Evaluator(root, backend=backend, timeout_s=timeout_s, rounds=rounds, min_gain=min_gain) as ev:
        warnings = ev.prepare()
        return warnings, ev.evaluate(list(candidates))
