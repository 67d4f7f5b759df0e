"""Inputs the harness builds as objects (a module's ``self``) are copied per call and compared like any input."""

from __future__ import annotations

import types

import pytest
import torch

from evaluator.correctness import _compare_effects, _written
from evaluator.runtime import clone_args, tensor_leaves


def test_an_object_input_is_copied_per_call_and_its_in_place_writes_are_compared() -> None:
    args = {"x": torch.ones(3), "self": types.SimpleNamespace(state=torch.zeros(3), norms=[types.SimpleNamespace(
        w=torch.ones(2))], eps=1e-5)}
    assert set(tensor_leaves(args)) == {"x", "self.state", "self.norms[0].w"}
    a, b = clone_args(args), clone_args(args)
    assert a["self"] is not b["self"] and a["self"].state.data_ptr() != b["self"].state.data_ptr()
    a["self"].state += 1  # the baseline updates its state in place
    b["self"].state += 2  # the candidate gets it wrong
    written = _written(a, args)
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


def test_promotion_needs_the_interval_and_more_wins_than_equals_would_have() -> None:
    """A bootstrap interval over 5 rounds can clear 1 + min_gain on a self-comparison that won 3 of them; the sign test
    stops that. A candidate faster in every round (and by a clear interval) is promoted."""
    from evaluator.pool import verdict
    from evaluator.timing import sign_p

    assert sign_p(5, 5) == 1 / 32 and sign_p(3, 5) == 0.5 and sign_p(0, 5) == 1.0
    case = {"name": "c", "ratio": 1.1, "cand_bw_fraction": 0.2}

    def answer(ci_low: float, wins: int) -> dict:
        return {"summary": {"geomean": 1.1, "ci": [ci_low, 1.2], "wins": wins, "sign_p": sign_p(wins, 5)},
                "cases": [case]}

    assert verdict(answer(1.05, 5), 0.02) == ("promoted", ())
    assert verdict(answer(1.05, 3), 0.02) == ("correct", ())  # the interval alone would have promoted it
    assert verdict(answer(1.01, 5), 0.02) == ("correct", ())  # every round faster, but by too little
