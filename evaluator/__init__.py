"""smithbot's standalone evaluator: is a candidate kernel correct, and is it really faster?

It imports only torch, triton, numpy, pyyaml and the standard library, so it runs alone on a GPU host.

    from evaluator import Evaluator
    with Evaluator("smithbot/tasks/rmsnorm", backend="cuda") as ev:
        result = ev.submit("candidate.py").result()

Exceptions: ``TaskError`` (a broken task directory) and ``BackendError`` (a backend that cannot run here). Faults of
a candidate are never exceptions: they are ``EvalResult`` statuses.
"""

from __future__ import annotations

from evaluator.guard import GuardResult, check
from evaluator.pool import BackendError, Evaluator, resolve_backend
from evaluator.result import STATUSES, EvalResult
from evaluator.task import Case, Task, TaskError, load_task
from evaluator.tolerances import TOLERANCES, Tolerance, compare

__all__ = ["STATUSES", "TOLERANCES", "BackendError", "Case", "EvalResult", "Evaluator", "GuardResult", "Task",
           "TaskError", "Tolerance", "check", "compare", "load_task", "resolve_backend"]
