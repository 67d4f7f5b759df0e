"""The evaluator's verdict on a measured candidate, per case and overall. No torch here: the pool's parent process
and smithbot's verification read it.

A candidate is **promoted** when all three hold:
- the geomean's interval clears ``1 + min_gain``;
- no case is slower beyond its interval and the noise floor (``slower_cases``);
- it gains somewhere, and every case it claims faster (its interval above ``1 + min_gain``) is significantly faster:
  that case's rounds won by the margin pass a one-sided sign test at ``SIGN_ALPHA`` divided by the number of cases.

So a change that speeds up prefill and leaves decode alone is promoted (decode's cases are *unchanged*), while a
self-comparison's lucky bootstrap interval is not: the corrected sign test on each claimed case stops it. Each case is
labelled ``faster``, ``unchanged`` or ``slower`` (``case_changes``) for the reports and the PR.
"""

from __future__ import annotations

import math
from typing import Any

MAX_SPEEDUP = 10.0
ROOFLINE_SLACK = 1.05
SIGN_ALPHA = 0.01  # the family-wise level: each case's sign test runs at SIGN_ALPHA / the number of cases
# A case counts as slower only when its whole interval lies below 1 - NOISE_FLOOR. The per-case interval measures the
# noise within one evaluation; between evaluations a case can drift by about 1% (the A/A benchmark's largest per-case
# bias was +1.18%, the others within 0.3%), so a smaller "loss" is not evidence of one.
NOISE_FLOOR = 0.01


def sign_p(wins: int, n: int) -> float:
    """One-sided sign test: the chance of ``wins`` or more won rounds out of ``n`` when each round is won with
    probability 1/2 at most (the candidate's median ratio is not above the margin). Exact for any ``n``, where a
    bootstrap interval over a handful of rounds is too narrow: a self-comparison's 5 interpreter rounds can put its
    bootstrap interval above 1."""
    return float(sum(math.comb(n, k) for k in range(wins, n + 1)) / 2 ** n)


def sign_rounds(cases: int) -> int:
    """The fewest rounds in which a case that won every one passes its sign test at ``SIGN_ALPHA / cases``."""
    return math.floor(math.log2(max(cases, 1) / SIGN_ALPHA)) + 1


def slower_cases(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases whose interval lies below 1 beyond the noise floor."""
    return [c for c in cases if c["ratio_ci"][1] < 1.0 - NOISE_FLOOR]


def case_changes(cases: list[dict[str, Any]], min_gain: float) -> dict[str, str]:
    """Each case's change: ``faster`` (its interval above 1 + min_gain and its sign test passed at SIGN_ALPHA / the
    number of cases), ``slower`` (``slower_cases``), else ``unchanged`` (within the noise, or not shown)."""
    k = max(len(cases), 1)
    slow = {c["name"] for c in slower_cases(cases)}
    return {c["name"]: "slower" if c["name"] in slow else "faster" if _shown(c, min_gain, k) else "unchanged"
            for c in cases}


def changed_cases(cases: list[dict[str, Any]], min_gain: float) -> dict[str, list[str]]:
    """The case names under each change, ``faster``, ``unchanged`` and ``slower`` (``case_changes``)."""
    changes = case_changes(cases, min_gain)
    return {kind: [n for n, c in changes.items() if c == kind] for kind in ("faster", "unchanged", "slower")}


def _claimed(c: dict[str, Any], min_gain: float) -> bool:
    return c["ratio_ci"][0] > 1.0 + min_gain


def _shown(c: dict[str, Any], min_gain: float, k: int) -> bool:
    return _claimed(c, min_gain) and c.get("sign_p", 1.0) < SIGN_ALPHA / k


def verdict(ans: dict[str, Any], min_gain: float, interpreter: bool = False) -> tuple[str, tuple[str, ...]]:
    """``promoted``, ``correct`` or ``flagged`` (with why) for a measured candidate (the module's rules). Interpreter
    timings are not GPU timings, so neither the 10x nor the roofline flag applies to them."""
    summary, cases = ans["summary"], ans["cases"]
    flags = []
    if interpreter:
        pass
    elif summary["geomean"] > MAX_SPEEDUP or any(c["ratio"] > MAX_SPEEDUP for c in cases):
        flags.append(f"implausible speedup (over {MAX_SPEEDUP:.0f}x)")
    # Beyond the roofline: more bytes per second than the device copies, by the task's byte count. Where the baseline
    # is beyond it too, the count overstates what the kernels touch (a few rows of a large cache), and says nothing
    # about the candidate; the 10x flag still applies there.
    over = [c["name"] for c in cases if c["cand_bw_fraction"] > ROOFLINE_SLACK
            and c["cand_bw_fraction"] * c["base_gbps"] / c["cand_gbps"] <= ROOFLINE_SLACK]
    if over:
        flags.append(f"beyond the memory roofline on {', '.join(over)}")
    if flags:
        return "flagged", tuple(flags)
    k = max(len(cases), 1)
    claimed = [c for c in cases if _claimed(c, min_gain)]
    faster = (summary["ci"][0] > 1.0 + min_gain and not slower_cases(cases) and bool(claimed)
              and all(_shown(c, min_gain, k) for c in claimed))
    return ("promoted" if faster else "correct"), ()
