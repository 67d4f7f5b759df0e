"""Inferred inputs grown, from the interpreter's bounds check, to what the kernel reads."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import yaml

from smithbot import api
from smithbot.inputs.grow import harness_inputs
from tests.conftest import git_repo

GATED = '''"""A gate the launcher hands on by its row stride alone: nothing says it has as many columns as x."""
import torch
import triton
import triton.language as tl


@triton.jit
def _gated_kernel(X, Gate, Out, stride_g, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(Gate + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Out + row * n_cols + cols, (x * tl.sigmoid(g)).to(Out.dtype.element_ty), mask=mask)


def gated(x, gate):
    n, d = x.shape
    out = torch.empty_like(x)
    g = gate
    _gated_kernel[(n,)](x.contiguous(), g, out, gate.stride(0), d, BLOCK=triton.next_power_of_2(d))
    return out
'''


def _load(path: Path) -> object:
    spec = importlib.util.spec_from_file_location("harness_under_test", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_an_input_the_kernel_reads_past_grows_until_the_baseline_passes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``gate`` is inferred 1-D (only its row stride is read), the kernel reads a row of x's width from it: the first
    self-check fails on a read past its end, the gate grows by a named axis, and the task passes. Every case's gate
    then holds what the kernel reads, including the GPU's model-sized ones, since the growth is symbolic."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/gate.py": GATED})
    [row] = api.extract(str(repo), "gated", out=tmp_path / "task", source=str(repo), check=True)
    assert row.checked, row.why
    assert "inputs grown to what the kernel reads: gate ['tokens'] -> ['tokens', " in row.why
    harness = _load(tmp_path / "task" / "harness.py")
    assert "grown to what the kernel reads: gate" in harness.__doc__
    for case in yaml.safe_load((tmp_path / "task" / "task.yaml").read_text())["cases"]:
        args = harness.make_inputs({**case["dims"], "dtype": torch.float32}, torch.Generator().manual_seed(0))
        assert args["gate"].dim() == 2 and args["gate"].shape[0] == args["x"].shape[0], case["name"]
        assert args["gate"].shape[1] >= args["x"].shape[1], case["name"]


def test_a_kernel_parameter_is_traced_to_the_launcher_input_it_came_from() -> None:
    """Through a rename and tensor methods, positionally and by keyword; a launch with a ``*splat`` is skipped, since
    the positions after it are not known."""
    got = harness_inputs(GATED + '''

def other(q, k):
    k2 = k.view(-1, 4)
    _gated_kernel[(1,)](q[0], k2.contiguous(), Out=q, stride_g=1, n_cols=4, BLOCK=4)
    _gated_kernel[(1,)](*q.shape, k)
''', "_gated_kernel", ["X", "Gate", "Out", "stride_g"])
    assert got == {"X": "x", "Gate": "gate", "Out": "q"}  # gated()'s out is made there, not an input


def test_a_kernel_parameter_is_traced_through_the_stand_in_objects_of_a_flat_entry() -> None:
    """A method's launch reads ``self.slot_mapping.gpu``: the flat entry hands it a stand-in whose attribute is the
    task input ``slot_mapping``, so a read past that argument grows ``slot_mapping`` (vLLM's BlockTable)."""
    from smithbot.inputs.specs import flat_entry

    objects = {"self": {"slot_mapping": {"gpu": "slot_mapping"}, "block_size": "block_size"}}
    got = harness_inputs('''import triton


@triton.jit
def _slot_kernel(X, Slots, block_size):
    pass


def BlockTable_compute(self, x):
    _slot_kernel[(1,)](x, self.slot_mapping.gpu, self.block_size)
''' + flat_entry("BlockTable_compute", ["self", "x"], objects), "_slot_kernel", ["X", "Slots", "block_size"])
    assert got == {"X": "x", "Slots": "slot_mapping", "block_size": "block_size"}


def test_the_shapes_an_input_may_grow_to() -> None:
    """Smallest first: one more row; a 1-D input may gain an axis (read through its stride); a 2-D one only more rows,
    since an axis behind would change the strides the kernel reads by. A second growth is no off-by-one."""
    from smithbot.inputs.grow import _candidates

    dims = {"tokens": 3, "hidden": 8, "heads": 4}
    assert _candidates(["tokens", "hidden"], dims, 32, again=False)[0] == ["tokens + 1", "hidden"]
    grown = _candidates(["tokens", "hidden"], dims, 32, again=True)
    assert grown[0] == ["(tokens) * heads", "hidden"] and all(len(s) == 2 for s in grown)
    assert _candidates(["tokens"], dims, 10, again=True)[0] == ["tokens", "heads"]
    assert _candidates(["tokens"], dims, 10**6, again=True) == []
    assert ["tokens", "hidden"] in _candidates(["hidden"], dims, 20, again=True)  # read per token: a leading axis


def test_a_failed_self_check_is_a_typed_failure_and_its_attempts_follow_from_it() -> None:
    """The failure comes from the evaluator's status and reason, and from what a kernel read past (never from the
    message): a read past an input, outputs that differ between runs, memory, or a baseline that does not run. The
    plan of rebuilds follows from it alone."""
    from smithbot.extract.attempts import plan_attempts
    from smithbot.types import Failure, failure_of

    past = {"kernel": "_k", "access": "loads", "count": 3, "tensor": "X", "first": 5, "holds": 5, "furthest": 7}
    assert failure_of("crash", "crash", past) is Failure.READ_PAST
    assert failure_of("task_error", "", past) is Failure.READ_PAST  # while the task was prepared
    assert failure_of("incorrect", "nondeterministic") is Failure.DISAGREES
    assert failure_of("incorrect", "mismatch") is Failure.DISAGREES
    assert failure_of("incorrect", "modified_input") is Failure.BROKEN
    assert failure_of("oom") is Failure.OUT_OF_MEMORY and failure_of("runtime_error", "KeyError") is Failure.BROKEN

    op, plain, caller = ("a.py", "op"), ("a.py", "launch"), ("b.py", "layer")
    hows = [a.how for a in plan_attempts(Failure.BROKEN, True, op, plain, caller)]
    assert hows == ["without the layouts that bound by themselves", "at its launcher launch() (not the op op())"]
    # built at its launcher already: outputs that differ between runs go up to the op that calls it, nothing else does
    assert plan_attempts(Failure.BROKEN, False, plain, plain, caller) == []
    [up] = plan_attempts(Failure.DISAGREES, False, plain, plain, caller)
    assert (up.op, up.by_themselves) == ("caller", True) and up.how.startswith("around the op layer() that calls it")
    assert plan_attempts(Failure.DISAGREES, False, plain, plain, plain) == []
    # last, the kernel's other launchers, best first, two at most; never the one it was built at again
    others = (plain, ("c.py", "second"), ("d.py", "third"), ("e.py", "fourth"))
    tail = plan_attempts(Failure.READ_PAST, False, plain, plain, None, others)
    assert [(a.at, a.op) for a in tail] == [(("c.py", "second"), False), (("d.py", "third"), False)]
    assert tail[0].how == "at its other launcher second() (not launch())"
