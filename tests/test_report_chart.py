"""The report's line charts: round-number ticks that cover the data, and no negative axis for values that cannot be
negative (speedups, correct rates)."""

from __future__ import annotations

import math
import re

import pytest

from smithbot.report import _ticks, svg_lines


@pytest.mark.parametrize("lo,hi,whole", [(0.0, 14.133, False), (0.97, 1.137, False), (0.0, 1.0, False),
                                         (1.0, 1.0, False), (0.0, 9.0, True), (3.0, 487.0, True), (-0.2, 0.3, False)])
def test_ticks_are_round_and_cover_the_data(lo: float, hi: float, whole: bool) -> None:
    ticks = _ticks(lo, hi, whole)
    assert ticks[0] <= lo and ticks[-1] >= hi and 3 <= len(ticks) <= 7, ticks
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    assert len(steps) == 1, ticks
    step = steps.pop()
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1, 2, 5), (step, ticks)
    if whole:
        assert all(t == int(t) for t in ticks)
    if lo >= 0:
        assert ticks[0] >= 0


def test_a_speedup_chart_has_round_ticks_and_no_negative_axis() -> None:
    svg = svg_lines({"island 0": [(0, 1.0), (3, 1.0), (7, 14.133)], "island 1": [(0, 0.0), (9, 1.05)]},
                    "best speedup per island", "iteration", "speedup")
    labels = re.findall(r'text-anchor="end">([^<]+)</text>', svg)
    assert labels == ["0", "5", "10", "15"], labels
    xs = re.findall(r'text-anchor="middle">(-?[\d.]+)</text>', svg)
    assert xs and all(float(x) == int(float(x)) and float(x) >= 0 for x in xs), xs
