"""Stage 3 of the cascade: is the candidate the same function as the baseline on fresh inputs?

Per shape case and seed (fresh inputs each time, separate copies for each side):
- baseline and candidate run in alternating order (baseline first on even seeds, candidate first on odd);
- every uninitialised allocation is poisoned (NaN, or a sentinel for integers) during both calls;
- every returned tensor, and every argument the baseline writes, must match within the tolerance table;
- every argument the baseline leaves alone must stay bit-for-bit unmodified;
- each candidate call launches at least one Triton kernel, and runs no ATen compute op the baseline does not;
- the candidate runs a second time and must agree with itself (bit-exact for deterministic tasks).

Once per task, ``validate_task`` checks the baseline against the PyTorch reference and checks that all-zeros outputs
fail the comparison; a task where zeros pass is reported as too weak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from evaluator import bounds
from evaluator.runtime import (ALLOWED_ATEN, LaunchCounter, Recorder, bit_equal, clone_args, object_state, storages,
                               tensor_leaves, zeros_like_output)
from evaluator.task import Case, Task
from evaluator.tolerances import DTYPES, Mismatch, compare


@dataclass(frozen=True)
class Failure:
    reason: str  # mismatch, modified_input, no_launch, torch_compute, nondeterministic, state_smuggling, aliased_output
    detail: str


def case_dict(case: Case) -> dict[str, Any]:
    """What ``make_inputs`` receives: a flat dict of name, regime, torch dtype, dims and params."""
    return {"name": case.name, "regime": case.regime, "dtype": getattr(torch, DTYPES[case.dtype]), **case.dims,
            **case.params}


def make_args(harness: Any, case: Case, seed: int, device: str) -> dict[str, Any]:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    args = harness.make_inputs(case_dict(case), gen)
    if not isinstance(args, dict):
        raise TypeError(f"make_inputs must return a dict, got {type(args).__name__}")
    return args


def warm_call(fn: Callable[..., Any], harness: Any, case: Case, seed: int, device: str) -> None:
    """One call that is not checked (a warm-up that compiles): under the interpreter's bounds check on padded copies
    of the inputs, as the checked calls are, so that a read past an input is charged to that input whatever the heap
    put next to it."""
    args = make_args(harness, case, seed, device)
    if bounds.installed():
        args = clone_args(args)
    with bounds.handed(args):
        fn(**args)


def seed_for(case_index: int, seed_index: int) -> int:
    return 1_000_003 * (seed_index + 1) + 7919 * case_index


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def call(fn: Callable[..., Any], args: dict[str, Any], device: str, poison: bool = True,
         seed: int = 0) -> tuple[Any, set[str], int]:
    """Call ``fn(**args)`` under the recorder; return its output, the ATen ops it ran and its Triton launches. The
    global random generators are seeded with ``seed`` first, so a launcher that draws random numbers (rejection
    sampling's uniforms) draws the same ones on every call with the same seed."""
    torch.manual_seed(seed)
    before = LaunchCounter.count
    with Recorder(poison=poison) as rec, bounds.handed(args):
        out = fn(**args)
    _sync(device)
    return out, rec.ops, LaunchCounter.count - before


def launches(fn: Callable[..., Any], args: dict[str, Any], device: str, seed: int = 0) -> int:
    """The kernels one call of ``fn(**args)`` launches on a GPU: its Triton launches and its ATen ops that launch one
    there (a chain of six small torch ops is six). Counted the same on the interpreter, where nothing is timed that
    a GPU would see: a fusion's fewer launches are its evidence there."""
    torch.manual_seed(seed)
    before = LaunchCounter.count
    with Recorder(poison=False) as rec, bounds.handed(args):
        fn(**args)
    _sync(device)
    return rec.launches + LaunchCounter.count - before


def written_by(after: dict[str, Any], pristine: dict[str, Any]) -> list[str]:
    """The input tensors (by path: ``x``, ``self.state``) that a call changed, and the tensors it stored on an input
    object (``self.prefix_chunk_kv_indices[0]``: a method's outputs kept on its batch)."""
    now, before = tensor_leaves(after), tensor_leaves(pristine)
    return [k for k, v in before.items() if not bit_equal(now[k], v)] + [k for k in now if k not in before]


def state_left(cand_args: dict[str, Any], base_args: dict[str, Any]) -> str:
    """What a candidate's call left on the objects it was handed that the baseline's call on an equal copy did not
    (an attribute on a tensor, an entry appended to a list, a flag flipped), said in one line; ``""`` when nothing.
    Such state is how a candidate would carry a result from one timed call to the next."""
    cand, base = object_state(cand_args), object_state(base_args)
    for path in sorted(cand.keys() | base.keys()):
        if cand.get(path) != base.get(path):
            return (f"the candidate leaves {path} as <{cand.get(path, 'absent')}> on what it was handed, the baseline "
                    f"<{base.get(path, 'absent')}>: state carried between calls")
    return ""


def _aliases(out: Any, args: dict[str, Any]) -> set[tuple[str, str]]:
    """The (output path, input path) pairs whose tensors share one storage."""
    inputs = storages(args)
    return {(path, inputs[ptr]) for ptr, path in storages(out).items() if ptr in inputs}


def _compare_effects(out: Any, args: dict[str, Any], ref_out: Any, ref_args: dict[str, Any], written: list[str],
                     exact: bool = False) -> Mismatch | None:
    m = compare(out, ref_out, "output", exact)
    if m is not None:
        return m
    got, ref = tensor_leaves(args), tensor_leaves(ref_args)
    for k in written:
        if k not in got:
            return Mismatch(f"argument {k!r}", "the baseline stores it on its input; this call does not")
        m = compare(got[k], ref[k], f"argument {k!r} (written by the call)", exact)
        if m is not None:
            return m
    return None


def effects_mismatch(out: Any, args: dict[str, Any], ref_out: Any, ref_args: dict[str, Any],
                     written: list[str]) -> Mismatch | None:
    """A timed call's output and written arguments against the baseline's for the same inputs (same tolerance
    table as the correctness stage)."""
    return _compare_effects(out, args, ref_out, ref_args, written)


def check_case(task: Task, base_fn: Callable[..., Any], cand_fn: Callable[..., Any], harness: Any, case: Case,
               case_index: int, device: str) -> Failure | None:
    for s in range(task.seeds):
        seed = seed_for(case_index, s)
        args = make_args(harness, case, seed, device)
        # each side's copy is made just before its call, and the second call's after the first two are judged: at
        # most three copies of a model-sized case's inputs exist at once (the inputs, then two calls' copies)
        runs: dict[str, tuple[Any, ...]] = {}
        for side in ("base", "cand") if s % 2 == 0 else ("cand", "base"):
            copy = clone_args(args)
            runs[side] = (copy, *call(base_fn if side == "base" else cand_fn, copy, device, seed=seed))
        (a_base, out_b, ops_b, _), (a_cand, out_c, ops_c, launches) = runs.pop("base"), runs.pop("cand")
        copy = None
        where = f"case {case.name} seed {s}"
        if launches < 1:
            return Failure("no_launch", f"{where}: the candidate launched no Triton kernel")
        extra = sorted(ops_c - ops_b - ALLOWED_ATEN)
        if extra:
            return Failure("torch_compute", f"{where}: torch ops the baseline does not run: {', '.join(extra)}")
        written = written_by(a_base, args)
        m = _compare_effects(out_c, a_cand, out_b, a_base, written)
        if m is not None:
            return Failure("mismatch", f"{where}: {m}")
        given = set(tensor_leaves(args))  # what the call was handed, not what it stored on it
        aliased = {(o, i) for o, i in _aliases(out_c, a_cand) - _aliases(out_b, a_base) if i in given}
        if aliased:
            out_path, in_path = sorted(aliased)[0]
            return Failure("aliased_output", f"{where}: {out_path} shares memory with input {in_path!r}, where the "
                                             "baseline's does not (a caller that writes one changes the other)")
        cand_leaves = tensor_leaves(a_cand)
        for k, v in tensor_leaves(args).items():
            if k not in written and not bit_equal(cand_leaves[k], v):
                return Failure("modified_input", f"{where}: the candidate modified input {k!r}, the baseline does not")
        # what is right and still left behind on the inputs (an attribute, a list grown) is state between calls
        smuggled = state_left(a_cand, a_base)
        if smuggled:
            return Failure("state_smuggling", f"{where}: {smuggled}")
        a_base = out_b = cand_leaves = None  # noqa: F841
        a_cand2 = clone_args(args)
        args = None
        out_c2, _, launches2 = call(cand_fn, a_cand2, device, seed=seed)
        if launches2 < 1:
            return Failure("no_launch", f"{where}: the candidate's second call launched no Triton kernel")
        m = _compare_effects(out_c2, a_cand2, out_c, a_cand, written, exact=task.deterministic)
        if m is not None:
            return Failure("nondeterministic", f"{where}: a second call disagrees with the first: {m}")
        # this seed's copies go before the next seed's are made
        args = a_base = a_cand = a_cand2 = out_b = out_c = out_c2 = cand_leaves = None  # noqa: F841
    return None


def validate_task(task: Task, base_fn: Callable[..., Any], harness: Any, cases: tuple[Case, ...],
                  device: str) -> tuple[list[str], list[str]]:
    """Check the baseline against the reference, and zeros against the baseline. Returns (errors, warnings)."""
    errors: list[str] = []
    warnings: list[str] = []
    reference = getattr(harness, "reference", None)
    for i, case in enumerate(cases):
        seed = seed_for(i, 0)
        args = make_args(harness, case, seed, device)
        a_base = clone_args(args)
        out_b, _, launches = call(base_fn, a_base, device, seed=seed)
        if task.kind == "triton" and launches < 1:
            errors.append(f"case {case.name}: the baseline launched no Triton kernel (is the task kind right?)")
        written = written_by(a_base, args)
        if reference is not None:
            a_ref = clone_args(args)
            torch.manual_seed(seed)  # the random numbers the baseline drew
            with torch.no_grad():
                out_r = reference(**a_ref)
            _sync(device)
            m = _compare_effects(out_b, a_base, out_r, a_ref, written)
            if m is not None:
                errors.append(f"case {case.name}: the baseline disagrees with the reference: {m}")
        args = a_ref = out_r = None  # noqa: F841 (before the zeros' copy: three copies at most, not four)
        zero_args = clone_args(a_base)
        for t in (tensor_leaves(zero_args)[k] for k in written):
            t.zero_()
        if _compare_effects(zeros_like_output(out_b), zero_args, out_b, a_base, written) is None:
            warnings.append(f"case {case.name}: all-zeros outputs pass the comparison; the task is too weak")
        # this case's copies go before the next case's are made: two model-sized cases at once may not fit
        args = a_base = a_ref = zero_args = out_b = out_r = None  # noqa: F841
    return errors, warnings
