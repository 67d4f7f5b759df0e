"""The one tolerance table and the comparison behind every correctness check."""

from __future__ import annotations

import pytest
import torch

from evaluator.tolerances import TOLERANCES, compare


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rounding_noise_passes_and_real_error_fails(dtype: torch.dtype, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    ref64 = torch.randn(257, 61, generator=g, dtype=torch.float64)
    ref = ref64.to(dtype)
    # Another summation order: the float64 value rounded once more through float32 arithmetic.
    other = (ref64 * 3.0 / 3.0).to(torch.float32).to(dtype)
    assert compare(other, ref) is None
    tol = TOLERANCES[str(dtype).removeprefix("torch.")]
    worse = (ref.double() * (1 + 20 * tol.rel_rms)).to(dtype)
    m = compare(worse, ref)
    assert m is not None and m.rel_rms is not None and m.rel_rms > tol.rel_rms


def test_fp32_computed_in_bf16_fails() -> None:
    ref = torch.randn(1000, generator=torch.Generator().manual_seed(3))
    assert compare(ref.bfloat16().float(), ref) is not None


def test_integers_and_bools_are_bit_exact() -> None:
    a = torch.arange(100, dtype=torch.int32)
    b = a.clone()
    assert compare(b, a) is None
    b[17] += 1
    m = compare(b, a)
    assert m is not None and m.reason == "not bit-exact" and m.bad_fraction == pytest.approx(0.01)
    assert compare(torch.tensor([True, False]), torch.tensor([True, True])) is not None


def test_nan_positions_must_match() -> None:
    ref = torch.tensor([1.0, float("nan"), 3.0])
    assert compare(ref.clone(), ref) is None
    assert compare(torch.tensor([1.0, 2.0, 3.0]), ref).reason == "NaN positions differ"
    assert compare(torch.tensor([float("nan")] * 3), ref).reason == "NaN positions differ"


def test_zeros_fail_and_structure_is_checked() -> None:
    ref = torch.randn(64, 64)
    assert compare(torch.zeros_like(ref), ref) is not None
    assert compare((ref,), (ref, ref)) is not None
    assert compare(ref.double(), ref).reason.startswith("dtype")
    assert compare(ref[:32], ref).reason.startswith("shape")
    assert compare(None, None) is None
    assert compare(3, 4) is not None


def test_result_records_are_compared_field_by_field() -> None:
    """A launcher that returns a record (a dataclass, a msgspec.Struct, a plain object) is compared by its fields,
    under the same tolerances, not by object identity: two runs of the same kernel agree, a wrong field is named,
    and a record of another kind or with other fields fails."""
    from dataclasses import dataclass
    from typing import NamedTuple

    from evaluator.runtime import tensors_of, zeros_like_output

    @dataclass
    class Result:
        indptr: torch.Tensor
        total: int

    class Struct:  # as msgspec.Struct lays a record out: slots named by __struct_fields__
        __slots__ = ("scale", "data")
        __struct_fields__ = ("data", "scale")

        def __init__(self, data: torch.Tensor, scale: torch.Tensor) -> None:
            self.data, self.scale = data, scale

    class Plain:
        def __init__(self, rows: torch.Tensor) -> None:
            self.rows = rows

    x = torch.randn(8)
    assert compare(Result(torch.arange(4), 3), Result(torch.arange(4), 3)) is None
    m = compare(Result(torch.tensor([0, 1, 2, 4]), 3), Result(torch.arange(4), 3))
    assert m is not None and m.path == "out.indptr" and "bit-exact" in m.reason
    assert compare(Result(torch.arange(4), 2), Result(torch.arange(4), 3)).path == "out.total"
    assert compare(Struct(x + 1e-7, x), Struct(x.clone(), x)) is None  # within fp32 tolerance
    assert compare(Struct(x + 1, x), Struct(x, x)).path == "out.data"
    assert compare(Plain(x), Plain(x.clone())) is None and compare(Plain(x), Result(x, 1)) is not None
    assert [t.shape for t in tensors_of(Struct(x, x[:2]))] == [torch.Size([8]), torch.Size([2])]
    zeros = zeros_like_output(Result(x, 3))
    assert torch.equal(zeros.indptr, torch.zeros(8)) and zeros.total == 3 and compare(zeros, Result(x, 3)) is not None
    Pair = NamedTuple("Pair", [("a", torch.Tensor), ("b", torch.Tensor)])
    assert torch.equal(zeros_like_output(Pair(x, x)).b, torch.zeros(8))  # a NamedTuple takes its fields one by one


def test_every_call_draws_the_same_random_numbers_for_one_seed() -> None:
    """A launcher that samples (``torch.rand`` inside rejection sampling) must be comparable with itself and with a
    candidate: each call starts the global generators from the case's seed."""
    from evaluator.correctness import call

    def sample(x: torch.Tensor) -> torch.Tensor:
        return x + torch.rand(x.shape)

    args = {"x": torch.zeros(5)}
    first, _, _ = call(sample, args, "cpu", poison=False, seed=7)
    again, _, _ = call(sample, args, "cpu", poison=False, seed=7)
    other, _, _ = call(sample, args, "cpu", poison=False, seed=8)
    assert torch.equal(first, again) and not torch.equal(first, other)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz])
def test_every_fp8_kind_has_a_row_so_poisoned_padding_matches(dtype: torch.dtype) -> None:
    """Poison (NaN) in rows a kernel leaves alone is the same in both runs: a bit-exact comparison of any fp8 kind,
    ROCm's included, must count matching NaNs as equal."""
    out = torch.full((4, 8), float("nan")).to(dtype)
    out[:2] = torch.randn(2, 8, generator=torch.Generator().manual_seed(0)).to(dtype)
    assert compare(out, out.clone(), exact=True) is None
    changed = out.clone()
    changed[0, 0] = (changed[0, 0].float() + 1).to(dtype)
    assert compare(changed, out, exact=True) is not None
