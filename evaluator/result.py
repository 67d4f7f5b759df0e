"""EvalResult: the evaluator's answer for one candidate, as a frozen dataclass that round-trips through JSON.

Statuses, in cascade order (the first that applies):
- ``rejected``: the static guard refused the source (``reason`` says which rule);
- ``compile_error``, ``runtime_error``, ``oom``, ``timeout``, ``crash``: stage 2 failed, with the log's tail;
- ``incorrect``: stage 3 found a difference (``reason``: mismatch, modified_input, no_launch, torch_compute,
  nondeterministic, state_smuggling, aliased_output), or a timed call's output differed from the baseline's on the
  same inputs (``timed_output_mismatch``);
- ``flagged``: correct and measured, but implausible (over 10x, or beyond the memory roofline): a human must look;
- ``correct``: correct, but not shown faster;
- ``promoted``: correct, the geomean interval's lower bound exceeds 1 + min_gain, and the candidate won (by more than
  min_gain) significantly more than half the timed rounds;
- ``cancelled``: not evaluated to the end: the search's time budget ended while it waited or ran (``stage`` says
  which). It says nothing of the candidate.
On the ``interpreter`` backend, speed comes from wall-clock timing of the CPU interpreter (``timing_method`` is
``interpreter_wall``): it does not predict GPU speed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("rejected", "compile_error", "runtime_error", "oom", "timeout", "crash", "incorrect", "flagged",
            "correct", "promoted", "cancelled")


@dataclass(frozen=True)
class EvalResult:
    candidate: str
    task: str
    backend: str
    status: str
    stage: str  # guard | compile | correctness | timing | verdict
    reason: str = ""
    detail: str = ""
    speedup: float | None = None  # geomean over cases of the median per-round ratio baseline/candidate
    speedup_ci: tuple[float, float] | None = None
    cases: tuple[dict[str, Any], ...] = ()
    flags: tuple[str, ...] = ()
    task_warnings: tuple[str, ...] = ()
    baseline_kernels: tuple[str, ...] = ()  # the Triton kernels the baseline launched on the cases
    timing_method: str = ""
    # a fusion task's verification on the GPU: its baseline under torch.compile, timed against eager on the same
    # cases ({mode, geomean, ci, cases: [{name, us, speedup}]}, or {mode, error})
    compiled: dict[str, Any] = field(default_factory=dict)
    elapsed_s: dict[str, float] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    log_tail: str = ""
    # what a kernel read or wrote past every tensor it was given (``bounds.OutOfBounds.found``), where one did
    out_of_bounds: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.status in ("flagged", "correct", "promoted")

    @property
    def device(self) -> str:
        """The device that checked and timed it (``host/gpu1``; ``env["device"]``), or "" where none did."""
        return str(self.env.get("device") or "")

    @property
    def device_s(self) -> float:
        """Seconds it held its device: its correctness checks and timing, which take the GPU's lock."""
        return sum(self.elapsed_s.get(k, 0.0) for k in ("correctness", "timing"))

    @property
    def why(self) -> str:
        """The status with its reason and detail, in one line (a reason that only repeats the status left out)."""
        rest = [x for x in ("" if self.reason == self.status else self.reason, self.detail) if x]
        return f"{self.status}: {' '.join(rest)}".strip()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["speedup_ci"] = list(self.speedup_ci) if self.speedup_ci else None
        d["cases"] = list(self.cases)
        d["flags"] = list(self.flags)
        d["task_warnings"] = list(self.task_warnings)
        d["baseline_kernels"] = list(self.baseline_kernels)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalResult:
        d = dict(d)
        d["speedup_ci"] = tuple(d["speedup_ci"]) if d.get("speedup_ci") else None
        for k in ("cases", "flags", "task_warnings", "baseline_kernels"):
            d[k] = tuple(d.get(k) or ())
        return cls(**d)
