"""What a case's GPU timing costs follows from the measured call time (issue 21): the plan is pure arithmetic, so it
is tested here without a GPU; the H200 figures are in benchmarks/RESULTS.md."""

import numpy as np

from evaluator.pool import EFFORT
from evaluator.timing import MAX_COPIES, MIN_ROUNDS, _plan, summarize

L2 = 60 << 20


def test_a_slow_call_gets_few_copies_so_a_case_keeps_its_time_cap() -> None:
    # the launcher: 236 us a call, 12 KB moved; the L2 rule alone asked 256 copies (60 ms a sample)
    copies = _plan(236.0, 12_000, 12_000, L2, rounds=30, case_s=0.2)
    assert copies == int(0.2e6 / (2 * MIN_ROUNDS * 236.0)) == 42
    assert 2 * MIN_ROUNDS * copies * 236.0 <= 0.2e6
    # a screen's shorter cap takes fewer still
    assert _plan(236.0, 12_000, 12_000, L2, rounds=10, case_s=EFFORT["screen"][1]) == 10


def test_a_fast_call_keeps_a_cold_l2_and_a_large_one_takes_one_copy() -> None:
    assert _plan(3.0, 12_000, 12_000, L2, rounds=30, case_s=0.2) == MAX_COPIES
    assert _plan(40.0, 8 << 20, 8 << 20, L2, rounds=30, case_s=0.2) == 15  # twice the L2 in 8 MiB passes
    assert _plan(2000.0, 256 << 20, 256 << 20, L2, rounds=30, case_s=0.2) == 1
    assert _plan(5.0, 1 << 20, 3 << 30, L2, rounds=30, case_s=0.2) == 1  # the memory cap


def test_cases_with_different_rounds_share_one_summary() -> None:
    rng = np.random.default_rng(0)
    many = np.full(30, 1.10)
    few = np.full(10, 1.10)
    s = summarize([many, few], 0.02, rng)
    assert s["rounds"] == 40 and s["wins"] == 40 and abs(s["geomean"] - 1.10) < 1e-9
    same = summarize([np.full(30, 1.0), np.full(10, 1.0)], 0.02, rng)
    assert same["wins"] == 0 and same["sign_p"] == 1.0


def test_a_baseline_is_timed_alone_on_the_cases_asked() -> None:
    """`Evaluator.time_baseline`: the baseline against itself (what a call costs before any candidate), on the named
    case only, with the bytes it moves; a case the task lacks is the task's error, in one line."""
    from pathlib import Path

    import pytest

    from evaluator import Evaluator, TaskError

    task = Path(__file__).resolve().parents[2] / "smithbot" / "tasks" / "silu_and_mul"
    with Evaluator(task, backend="interpreter") as ev:
        name = ev.case_names[0]
        [case] = ev.time_baseline([name])
        assert case["name"] == name and case["base_us"] > 0 and case["bytes"] > 0
        assert case["method"] == "interpreter_wall"
        with pytest.raises(TaskError, match="no-such-case"):
            ev.time_baseline(["no-such-case"])
