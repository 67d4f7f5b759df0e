"""A task's self-check as a value, and what extraction tries when one fails: a plan over typed failures, read from
the evaluator's statuses and from what a kernel read past (``evaluator.bounds.OutOfBounds``), never from error text.

The ladder, for a task that failed its self-check (``plan_attempts``): a read past an inferred input first grows that
input (``grow``); then the task is built again without the layouts that bound by themselves (plain inference may
serve it where a layout's sizes do not); then at its launcher instead of the op around it (the op's inputs may need
what inference cannot tell, a quantized op's scales); or, where the launcher's own outputs differ between two runs
(a routing whose order follows its atomics, which the op's result does not), around the op that calls it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Failure(enum.Enum):
    READ_PAST = "a kernel reads past one of its inputs"
    DISAGREES = "the baseline's outputs differ between two runs on the same inputs"
    OUT_OF_MEMORY = "a case's inputs do not fit in memory"
    BROKEN = "the baseline does not run on its inputs"


# the evaluator's reasons for an incorrect baseline that mean its outputs differ from run to run
_DISAGREES = ("mismatch", "nondeterministic")


def failure_of(status: str, reason: str = "", read_past: dict[str, Any] | None = None) -> Failure:
    """The failure a self-check's evaluator reported: its status (a worker's status where the baseline failed while
    the task was prepared), its reason, and what a kernel read past, if one did."""
    if read_past:
        return Failure.READ_PAST
    if status == "incorrect" and reason in _DISAGREES:
        return Failure.DISAGREES
    if status == "oom":
        return Failure.OUT_OF_MEMORY
    return Failure.BROKEN


@dataclass(frozen=True)
class Check:
    """A self-check's outcome: whether it passed, the line that says so or why not, the Triton kernels the baseline
    launched, and, on failure, which kind and what a kernel read past (``OutOfBounds.found``)."""
    ok: bool
    why: str
    launched: tuple[str, ...] = ()
    failure: Failure | None = None
    read_past: dict[str, Any] | None = None


@dataclass(frozen=True)
class Attempt:
    """One more way to build a failed task: ``how`` (said in its row), where it is built (``op``: around the op as
    first built, True; at the launcher, False; around the op that calls it, "caller") and whether layouts may bind by
    themselves."""
    how: str
    op: bool | str = True
    by_themselves: bool = True


Where = tuple[str, str]  # (file, function)


def plan_attempts(failure: Failure, layouts_bound: bool, op: Where | None, launcher: Where | None,
                  caller: Where | None) -> list[Attempt]:
    """The attempts, in order, for a task that failed with ``failure``: ``layouts_bound``, whether a layout bound by
    itself; ``op``, the function it was built around; ``launcher``, the kernel's own launcher; ``caller``, the op
    that calls it (needed only where the outputs disagree)."""
    plan = []
    if layouts_bound:
        plan.append(Attempt("without the layouts that bound by themselves", by_themselves=False))
    if launcher is not None and launcher != op:
        plan.append(Attempt(f"at its launcher {launcher[1]}() (not the op {op[1] if op else None}())", op=False))
    elif failure is Failure.DISAGREES and caller is not None and caller != op:
        plan.append(Attempt(f"around the op {caller[1]}() that calls it (its launcher's own outputs differ between "
                            "runs)", op="caller"))
    return plan
