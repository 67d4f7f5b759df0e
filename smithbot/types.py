"""Value types shared between stages, as frozen dataclasses (the evaluator's own types live in ``evaluator``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smithbot.config import Target
    from smithbot.repo import Checkout


@dataclass(frozen=True)
class LaunchSite:
    path: str
    line: int
    wrapper: str  # qualified name of the enclosing function, or "<module>"
    grid: str
    kwargs: tuple[str, ...]
    branch: str  # the enclosing if-tests, e.g. "if is_hip(): [body]"; "" when unconditional
    fallback_only: bool  # reached only on a non-CUDA dispatch branch
    cuda_branch: bool  # explicitly on the CUDA branch
    # the enclosing if-tests that serving decides for this launch, each with the value it takes (the call graph's
    # answer where it has one): an extraction keeps that branch only
    decided: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class KernelSite:
    """One Triton kernel definition, its launches, and how it ranks."""

    name: str
    qualname: str
    path: str
    line: int
    module: str
    form: str  # decorator | call (f = triton.jit(f))
    autotune: bool
    heuristics: int
    nested: bool
    conditional: bool
    role: str  # launched | helper (called from other kernels) | unused
    launches: tuple[LaunchSite, ...]
    family: str
    extraction: str  # torch+triton | stubs | cross-file | external
    blockers: tuple[str, ...]  # what puts it in that class: helper names, stub names, external modules
    hotness: float
    reasons: tuple[str, ...]
    measured_us: float | None = None  # GPU µs per profiled step, from a trace
    measured_share: float | None = None  # its share of the step's GPU time
    measured_of: str = ""  # what was profiled: "decode step on qwen3-30b-a3b (batch 8)"
    presets: tuple[str, ...] = ()  # model presets whose default serving path reaches it (empty: none, or no graph)
    default_path: str = ""  # how the best of them reaches it, e.g. "Qwen3MoeForCausalLM.forward → … → kernel"
    phases: tuple[str, ...] = ()  # the serving phases (decode, prefill) in which those paths run it
    reach: str = ""  # default | possible | never (no preset's path) | "" (no call graph)
    undecided: tuple[str, ...] = ()  # the if-tests and dispatches its best path leaves open, each with its line
    per_step: tuple[tuple[str, int], ...] = ()  # (preset, launches a step): its layers where a path runs it per layer

    @property
    def wrappers(self) -> tuple[str, ...]:
        return tuple(sorted({f"{launch.path}::{launch.wrapper}" for launch in self.launches}))

    def to_dict(self) -> dict[str, Any]:
        """What ``dataclasses.asdict`` gives (the launches as dicts), built directly: asdict's deep copy of 500
        sites was a quarter of a warm scan, and no field holds anything mutable."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["launches"] = tuple({f.name: getattr(launch, f.name) for f in fields(launch)} for launch in self.launches)
        d["wrappers"] = list(self.wrappers)
        return d


@dataclass(frozen=True)
class ScanResult:
    """What a scan hands the stages after it: the target and its checkout, every kernel ranked, the torch glue on the
    default paths (``scan.fusion.FusionSite``), what could not be parsed, and where ``scan.json`` was written."""

    target: Target
    checkout: Checkout
    sites: list[KernelSite]
    errors: list[tuple[str, str]]
    modules: dict[str, str]  # module name -> relative path, for every parsed file
    files: int
    parsed: int
    cached: int
    path: Path  # where scan.json was written
    fusion: list[Any] = field(default_factory=list)  # scan.fusion.FusionSite: torch glue on the default paths


# a task's self-check as a value, read by extraction's retries (extract/attempts.py) and the input growth
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
