"""Inputs the harness builds as objects (a module's ``self``) are copied per call and compared like any input."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from evaluator.correctness import _compare_effects, written_by
from evaluator.runtime import clone_args, tensor_leaves


def test_an_object_input_is_copied_per_call_and_its_in_place_writes_are_compared() -> None:
    args = {"x": torch.ones(3), "self": types.SimpleNamespace(state=torch.zeros(3), norms=[types.SimpleNamespace(
        w=torch.ones(2))], eps=1e-5)}
    assert set(tensor_leaves(args)) == {"x", "self.state", "self.norms[0].w"}
    a, b = clone_args(args), clone_args(args)
    assert a["self"] is not b["self"] and a["self"].state.data_ptr() != b["self"].state.data_ptr()
    a["self"].state += 1  # the baseline updates its state in place
    b["self"].state += 2  # the candidate gets it wrong
    written = written_by(a, args)
    assert written == ["self.state"] and torch.equal(args["self"].state, torch.zeros(3))  # the pristine copy stays
    assert _compare_effects(None, a, None, clone_args(a), written) is None
    m = _compare_effects(None, b, None, a, written)
    assert m is not None and "self.state" in str(m)


def test_a_bare_assert_is_reported_by_its_line(tmp_path) -> None:
    """``assert head_dim >= rope_dim`` fails with an empty message; the reason names the line instead."""
    from evaluator.worker import _describe

    src = tmp_path / "kernel.py"  # compiled here, not by pytest, whose rewritten asserts carry a message
    src.write_text("def launcher(head_dim, rope_dim):\n    assert head_dim >= rope_dim\n")
    scope: dict = {}
    exec(compile(src.read_text(), str(src), "exec"), scope)
    with pytest.raises(AssertionError) as info:
        scope["launcher"](64, 128)
    assert _describe(info.value) == "AssertionError: kernel.py:2: assert head_dim >= rope_dim"
    assert _describe(ValueError("bias must be 1-D")) == "ValueError: bias must be 1-D"


def test_promotion_needs_the_interval_and_significantly_many_rounds_won_by_the_margin() -> None:
    """A bootstrap interval over a handful of rounds can clear 1 + min_gain on a self-comparison; the sign test stops
    that. A round counts only when won by more than the margin, and 5 rounds of one case can never be significant
    (p = 1/32 > 0.01): CI saw a self-comparison win all 5 by chance."""
    from evaluator.pool import verdict
    from evaluator.timing import sign_p, summarize

    assert sign_p(5, 5) == 1 / 32 and sign_p(7, 7) == 1 / 128 and sign_p(3, 5) == 0.5 and sign_p(0, 5) == 1.0
    rng = np.random.default_rng(0)
    same = summarize(np.array([[1.03, 1.01, 1.025, 1.015, 1.04, 1.01, 1.019]]), 0.02, rng)
    assert same["wins"] == 3 and same["sign_p"] == sign_p(3, 7)  # faster in all 7, by the margin in only 3
    faster = summarize(np.array([[1.30, 1.28, 1.31, 1.29, 1.30, 1.27, 1.33]]), 0.02, rng)
    assert faster["wins"] == 7 and 1.28 < faster["geomean"] < 1.31 and faster["ci"][0] > 1.02
    case = {"name": "c", "ratio": 1.3, "cand_bw_fraction": 0.2}
    assert verdict({"summary": faster, "cases": [case]}, 0.02) == ("promoted", ())
    assert verdict({"summary": same, "cases": [case]}, 0.02) == ("correct", ())
    five = summarize(np.array([[1.30, 1.28, 1.31, 1.29, 1.30]]), 0.02, rng)
    assert five["wins"] == 5 and five["ci"][0] > 1.02
    assert verdict({"summary": five, "cases": [case]}, 0.02) == ("correct", ())  # too few rounds to be significant
    narrow = {**faster, "ci": [1.01, 1.2]}
    assert verdict({"summary": narrow, "cases": [case]}, 0.02) == ("correct", ())  # every round won, interval too low


def test_the_roofline_flag_needs_a_baseline_within_it() -> None:
    """A candidate moving more bytes per second than the device copies is flagged, unless the baseline does too under
    the same byte count: then the count overstates what the kernels touch (a few rows of a large cache), as the
    eighth session's GPU self-comparisons showed."""
    from evaluator.pool import verdict

    summary = {"geomean": 1.0, "ci": [0.99, 1.01], "wins": 0, "sign_p": 1.0}

    def case(cand_fraction: float, base_fraction: float) -> dict:
        return {"name": "c", "ratio": cand_fraction / base_fraction, "cand_bw_fraction": cand_fraction,
                "cand_gbps": cand_fraction * 4000, "base_gbps": base_fraction * 4000}

    assert verdict({"summary": summary, "cases": [case(1.6, 1.55)]}, 0.02) == ("correct", ())
    status, flags = verdict({"summary": summary, "cases": [case(1.6, 0.9)]}, 0.02)
    assert status == "flagged" and flags == ("beyond the memory roofline on c",)
