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


def test_an_out_of_memory_reads_as_what_was_asked_and_what_the_card_has() -> None:
    """A table row of `smithbot profile` once read "oom: oom OutOfMemoryError: ... If reserved but unallocated memory
    is large try setting PYTORCH_CUDA_ALLOC_CONF..." (a DeepSeek-V3 MoE task on an 80 GB H100)."""
    from evaluator import EvalResult
    from evaluator.worker import _describe

    oom = torch.cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of 79.18 GiB of which 1.48 GiB is "
        "free. Including non-PyTorch memory, this process has 77.69 GiB memory in use. Of the allocated memory 77.02 "
        "GiB is allocated by PyTorch. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF")
    said = _describe(oom)
    assert said == ("OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of "
                    "79.18 GiB of which 1.48 GiB is free.")
    r = EvalResult(candidate="c.py", task="t", backend="cuda", stage="prepare", status="oom", reason="oom", detail=said)
    assert r.why == f"oom: {said}"
    assert EvalResult(candidate="c.py", task="t", backend="cuda", stage="prepare", status="incorrect",
                      reason="mismatch", detail="output[0]").why == "incorrect: mismatch output[0]"


def _measured(rounds: list[list[float]], margin: float = 0.02, seed: int = 0) -> dict:
    """An evaluation's answer for these per-case round ratios (baseline/candidate), as the timing builds it."""
    from evaluator.timing import _median_ci, summarize
    from evaluator.verdict import sign_p

    rng = np.random.default_rng(seed)
    cases = []
    for i, r in enumerate(rounds):
        x = np.asarray(r)
        wins = int((x > 1 + margin).sum())
        cases.append({"name": f"c{i}", "ratio": float(np.median(x)), "ratio_ci": list(_median_ci(x, rng)),
                      "wins": wins, "sign_p": sign_p(wins, len(x)), "cand_bw_fraction": 0.2})
    return {"summary": summarize([np.asarray(r) for r in rounds], margin, rng), "cases": cases}


def test_promotion_needs_the_interval_and_each_claimed_case_significantly_faster() -> None:
    """A bootstrap interval over a handful of rounds can clear 1 + min_gain on a self-comparison; each case's sign
    test stops that. A round counts only when won by more than the margin, and 5 rounds of one case can never be
    significant (p = 1/32 > 0.01): CI saw a self-comparison win all 5 by chance."""
    from evaluator.verdict import sign_p, sign_rounds, verdict

    assert sign_p(5, 5) == 1 / 32 and sign_p(7, 7) == 1 / 128 and sign_p(3, 5) == 0.5 and sign_p(0, 5) == 1.0
    assert sign_rounds(1) == 7 and sign_rounds(6) == 10 and 2 ** -sign_rounds(6) < 0.01 / 6 < 2 ** -(sign_rounds(6) - 1)
    same = _measured([[1.03, 1.01, 1.025, 1.015, 1.04, 1.01, 1.019]])
    assert same["cases"][0]["wins"] == 3  # faster in all 7, by the margin in only 3
    assert verdict(same, 0.02) == ("correct", ())
    faster = _measured([[1.30, 1.28, 1.31, 1.29, 1.30, 1.27, 1.33]])
    assert 1.28 < faster["summary"]["geomean"] < 1.31 and verdict(faster, 0.02) == ("promoted", ())
    five = _measured([[1.30, 1.28, 1.31, 1.29, 1.30]])
    assert five["summary"]["ci"][0] > 1.02 and verdict(five, 0.02) == ("correct", ())  # too few rounds
    narrow = {**faster, "summary": {**faster["summary"], "ci": [1.01, 1.2]}}
    assert verdict(narrow, 0.02) == ("correct", ())  # every round won, the geomean's interval too low


def test_a_gain_on_some_shapes_with_the_others_unchanged_is_promoted_and_labelled() -> None:
    """The demo's RMSNorm on the H200: 1.47x on both prefill cases, equal on the four decode cases. A sign test over
    every round of every case could never promote it; per case, prefill is faster and decode unchanged."""
    from evaluator.verdict import case_changes, verdict

    rng = np.random.default_rng(1)
    prefill = [list(1.47 + rng.normal(0, 0.01, 12)) for _ in range(2)]
    decode = [list(1.0 + rng.normal(0, 0.004, 12)) for _ in range(4)]
    ans = _measured(decode + prefill)
    assert verdict(ans, 0.02) == ("promoted", ())
    assert case_changes(ans["cases"], 0.02) == {"c0": "unchanged", "c1": "unchanged", "c2": "unchanged",
                                                "c3": "unchanged", "c4": "faster", "c5": "faster"}
    # a case claimed faster on too few rounds for six cases (7 < sign_rounds(6)) is not shown: nothing is promoted
    short = _measured(decode + [list(1.47 + rng.normal(0, 0.01, 7)) for _ in range(2)])
    assert short["summary"]["ci"][0] > 1.02 and verdict(short, 0.02) == ("correct", ())
    # and one case slower beyond its interval and the noise floor stops it
    slow = _measured(decode[:3] + [list(0.9 + rng.normal(0, 0.004, 12))] + prefill)
    assert case_changes(slow["cases"], 0.02)["c3"] == "slower" and verdict(slow, 0.02) == ("correct", ())


def test_a_self_comparison_is_never_promoted() -> None:
    """A/A: ratios around 1 with the noise of a GPU's rounds, over many seeds and case counts: none promoted."""
    from evaluator.verdict import verdict

    promoted = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        k = 1 + seed % 8
        ans = _measured([list(1.0 + rng.normal(0, 0.02, 12)) for _ in range(k)], seed=seed)
        promoted += verdict(ans, 0.02)[0] == "promoted"
    assert promoted == 0


def test_the_roofline_flag_needs_a_baseline_within_it() -> None:
    """A candidate moving more bytes per second than the device copies is flagged, unless the baseline does too under
    the same byte count: then the count overstates what the kernels touch (a few rows of a large cache), as the
    eighth session's GPU self-comparisons showed."""
    from evaluator.verdict import verdict

    summary = {"geomean": 1.0, "ci": [0.99, 1.01], "wins": 0, "sign_p": 1.0}

    def case(cand_fraction: float, base_fraction: float) -> dict:
        return {"name": "c", "ratio": cand_fraction / base_fraction, "ratio_ci": [0.99, 1.01],
                "cand_bw_fraction": cand_fraction, "cand_gbps": cand_fraction * 4000, "base_gbps": base_fraction * 4000}

    assert verdict({"summary": summary, "cases": [case(1.6, 1.55)]}, 0.02) == ("correct", ())
    status, flags = verdict({"summary": summary, "cases": [case(1.6, 0.9)]}, 0.02)
    assert status == "flagged" and flags == ("beyond the memory roofline on c",)


COPIES = '''
import sys, weakref
from pathlib import Path

from evaluator import correctness
from evaluator.runtime import LaunchCounter, load_module
from evaluator.task import load_task

task = load_task(sys.argv[1])
LaunchCounter.install()
harness = load_module(Path(sys.argv[1]) / "harness.py", "harness", True)
kernel = load_module(Path(sys.argv[1]) / "kernel.py", "kernel", True)
fn = getattr(kernel, task.entry)
live, peak = set(), [0]
real = correctness.clone_args


def counting(args):
    copy = real(args)
    for i, t in enumerate(v for v in copy.values() if hasattr(v, "data_ptr")):
        key = (id(copy), i)
        live.add(key)
        weakref.finalize(t, live.discard, key)
    peak[0] = max(peak[0], len({k[0] for k in live}))
    return copy


correctness.clone_args = counting
assert correctness.check_case(task, fn, fn, harness, task.cases[0], 0, "cpu") is None
print("peak", peak[0])
'''


def test_a_case_check_holds_two_copies_of_the_inputs_at_once_beside_them(tmp_path) -> None:
    """A model-sized case's inputs can be a good part of the card: the check copies them for each call just before
    it, and drops the baseline's before the candidate's second call, so at most two copies live beside the inputs
    themselves (there were three)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT, TASKS

    (tmp_path / "copies.py").write_text(COPIES)
    out = subprocess.run([sys.executable, str(tmp_path / "copies.py"), str(TASKS / "rmsnorm")], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"},
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "2", out.stdout
