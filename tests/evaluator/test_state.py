"""Nothing a candidate keeps between calls counts as speed: timed calls get new objects, what a call leaves on its
inputs is compared with the baseline's, and the last timed call of every round is checked against the baseline's."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest
import torch

from evaluator import Evaluator
from evaluator.correctness import state_left
from evaluator.runtime import clone_args, fresh_args, object_state
from evaluator.task import Case
from evaluator.timing import TimedOutputMismatch, time_case_wall


def test_fresh_args_are_new_objects_over_the_same_memory() -> None:
    args = {"x": torch.arange(6.0), "self": types.SimpleNamespace(w=torch.ones(2), eps=1e-5), "xs": [torch.zeros(3)]}
    args["x"].cached = "left by an earlier call"
    f = fresh_args(args)
    assert f["x"] is not args["x"] and f["x"].data_ptr() == args["x"].data_ptr()
    assert not hasattr(f["x"], "cached")
    assert f["self"] is not args["self"] and f["self"].w.data_ptr() == args["self"].w.data_ptr()
    assert f["xs"] is not args["xs"] and f["xs"][0].data_ptr() == args["xs"][0].data_ptr()


@pytest.mark.parametrize("smuggle, where", [
    (lambda a: setattr(a["x"], "cached", 1), "x"),
    (lambda a: a["x"].requires_grad_(True), "x"),
    (lambda a: a["xs"].append(torch.ones(1)), "xs"),
    (lambda a: setattr(a["self"], "seen", True), "self"),
    (lambda a: setattr(a["self"], "eps", 0.0), "self.eps"),
])
def test_state_left_on_inputs_is_named(smuggle, where: str) -> None:
    args = {"x": torch.arange(6.0), "self": types.SimpleNamespace(w=torch.ones(2), eps=1e-5), "xs": [torch.zeros(3)]}
    base, cand = clone_args(args), clone_args(args)
    assert state_left(cand, base) == "" and object_state(cand) == object_state(base)
    smuggle(cand)
    said = state_left(cand, base)
    assert said.startswith(f"the candidate leaves {where}") and "state carried between calls" in said, said


def test_an_attribute_the_baseline_also_stores_is_no_smuggling() -> None:
    args = {"self": types.SimpleNamespace(w=torch.ones(2))}
    base, cand = clone_args(args), clone_args(args)
    base["self"].out = torch.zeros(2)  # a method launcher keeps its output on its batch object
    cand["self"].out = torch.zeros(2)
    assert state_left(cand, base) == ""


def _case() -> Case:
    return Case(name="c", regime="decode", dtype="fp32", dims={"n": 64}, params={})


HARNESS = types.SimpleNamespace(make_inputs=lambda case, gen: {"x": torch.randn(case["n"], generator=gen)})


def _base(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_every_timed_call_gets_new_objects() -> None:
    seen: list[torch.Tensor] = []

    def cand(x: torch.Tensor) -> torch.Tensor:
        seen.append(x)
        return x * 2

    time_case_wall(_base, cand, HARNESS, _case(), 1, 10, np.random.default_rng(0))
    assert len(seen) == 11 and len({id(t) for t in seen}) == 11  # a warm-up call and 10 rounds
    assert len({t.data_ptr() for t in seen}) == 1  # over the same copy of the inputs


def test_a_cache_on_the_input_object_never_hits_while_timed() -> None:
    """What the interpreter promoted at 13,153x: the result kept on the input and returned for the same object."""
    hits = []

    def cand(x: torch.Tensor) -> torch.Tensor:
        if hasattr(x, "cached"):
            hits.append(1)
            return x.cached
        x.cached = x * 2
        return x.cached

    time_case_wall(_base, cand, HARNESS, _case(), 1, 10, np.random.default_rng(0))
    assert hits == []


def test_a_timed_call_that_differs_from_the_baseline_is_caught() -> None:
    """A candidate that is right while checked and does less once called again and again (as only timing does)."""
    calls = []

    def cand(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x * 2 if len(calls) < 4 else torch.zeros_like(x)

    with pytest.raises(TimedOutputMismatch, match="case c round 2: the last timed call differs"):
        time_case_wall(_base, cand, HARNESS, _case(), 1, 10, np.random.default_rng(0))


KERNEL = '''"""Scale a vector by two."""

import torch
import triton
import triton.language as tl

# EVOLVE-BLOCK-START


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def scale(x: torch.Tensor, history: list) -> torch.Tensor:
    out = torch.empty_like(x)
    _scale_kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


# EVOLVE-BLOCK-END
'''
HARNESS_PY = '''import torch


def make_inputs(case, generator):
    return {"x": torch.randn(case["n"], generator=generator, device=generator.device), "history": []}


def reference(x, history):
    return x * 2
'''
TASK_YAML = '''id: scale
kind: triton
entry: scale
provenance: {repo: test, commit: null, definitions: [{name: scale, path: kernel.py, qualname: scale}]}
seeds: 3
cases:
  - {name: n-100, regime: decode, dtype: fp32, dims: {n: 100}, params: {}}
'''


def _scale_task(tmp_path: Path) -> tuple[Path, Path]:
    """The scale task, and a candidate that appends each output to the input list ``history``."""
    task = tmp_path / "scale"
    task.mkdir()
    (task / "kernel.py").write_text(KERNEL)
    (task / "harness.py").write_text(HARNESS_PY)
    (task / "task.yaml").write_text(TASK_YAML)
    cand = tmp_path / "cand.py"
    cand.write_text(KERNEL.replace("    return out\n", "    history.append(out)  # reuse on a repeated step\n"
                                                        "    return out\n"))
    return task, cand


def test_the_evaluator_rejects_state_appended_to_an_input_list(tmp_path: Path) -> None:
    """A list the harness hands in is a place to keep results between calls that no static rule sees."""
    task, cand = _scale_task(tmp_path)
    with Evaluator(task, backend="interpreter", rounds=7) as ev:
        same, smuggler = (ev.submit(p).result() for p in (task / "kernel.py", cand))
    assert same.status == "correct", same.detail
    assert (smuggler.status, smuggler.reason) == ("incorrect", "state_smuggling"), smuggler.detail
    assert "history" in smuggler.detail and "list len=1" in smuggler.detail


def test_a_check_runs_the_correctness_stage_and_times_nothing(tmp_path: Path) -> None:
    """A task's self-check asks ``effort="check"``: the same correctness stage (state smuggling included), no timed
    round, and so no speedup to report."""
    task, cand = _scale_task(tmp_path)
    with Evaluator(task, backend="interpreter") as ev:
        same, smuggler = (ev.submit(p, effort="check").result() for p in (task / "kernel.py", cand))
    assert (same.status, same.stage, same.speedup, same.cases) == ("correct", "correctness", None, ()), same.detail
    assert "timing" not in same.elapsed_s and "correctness" in same.elapsed_s
    assert (smuggler.status, smuggler.reason) == ("incorrect", "state_smuggling"), smuggler.detail
