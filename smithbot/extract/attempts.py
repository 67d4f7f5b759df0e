"""What extraction tries when a task's self-check (``smithbot.types.Check``) fails: a plan over typed failures, read
from the evaluator's statuses and from what a kernel read past (``evaluator.bounds.OutOfBounds``), never from error
text.

The ladder, for a task that failed its self-check (``plan_attempts``): a read past an inferred input first grows that
input (``grow``); then the task is built again without the layouts that bound by themselves (plain inference may
serve it where a layout's sizes do not); then at its launcher instead of the op around it (the op's inputs may need
what inference cannot tell, a quantized op's scales); or, where the launcher's own outputs differ between two runs
(a routing whose order follows its atomics, which the op's result does not), around the op that calls it; last, at
each other function that launches the kernel (a launcher whose inputs inference cannot size may have a sibling whose
inputs it can, or that the target's specs name).
"""

from __future__ import annotations

from dataclasses import dataclass

from smithbot.types import Failure

Where = tuple[str, str]  # (file, function)


@dataclass(frozen=True)
class Attempt:
    """One more way to build a failed task: ``how`` (said in its row), where it is built (``op``: around the op as
    first built, True; at the launcher, False; around the op that calls it, "caller"), whether layouts may bind by
    themselves, and ``at``: another of the kernel's launchers to build it at (None: the one first chosen)."""
    how: str
    op: bool | str = True
    by_themselves: bool = True
    at: Where | None = None


def plan_attempts(failure: Failure, layouts_bound: bool, op: Where | None, launcher: Where | None,
                  caller: Where | None, others: tuple[Where, ...] = ()) -> list[Attempt]:
    """The attempts, in order, for a task that failed with ``failure``: ``layouts_bound``, whether a layout bound by
    itself; ``op``, the function it was built around; ``launcher``, the kernel's own launcher; ``caller``, the op
    that calls it (needed only where the outputs disagree); ``others``, the kernel's other launchers, in the scan's
    order of preference (at most two are tried)."""
    plan = []
    if layouts_bound:
        plan.append(Attempt("without the layouts that bound by themselves", by_themselves=False))
    if launcher is not None and launcher != op:
        plan.append(Attempt(f"at its launcher {launcher[1]}() (not the op {op[1] if op else None}())", op=False))
    elif failure is Failure.DISAGREES and caller is not None and caller != op:
        plan.append(Attempt(f"around the op {caller[1]}() that calls it (its launcher's own outputs differ between "
                            "runs)", op="caller"))
    plan += [Attempt(f"at its other launcher {at[1]}() (not {launcher[1] if launcher else None}())", op=False, at=at)
             for at in [w for w in others if w not in (op, launcher)][:2]]
    return plan
