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


def _whole(out: torch.Tensor, ref: torch.Tensor) -> tuple[str | None, float | None, float | None, float | None]:
    """The comparison over the whole tensor at once, written out plainly: the reading chunks must agree with."""
    tol = TOLERANCES[str(ref.dtype).removeprefix("torch.")]
    o, r = out.double(), ref.double()
    if not torch.equal(o.isnan(), r.isnan()):
        return "NaN positions differ", None, None, float((o.isnan() ^ r.isnan()).double().mean())
    if not torch.equal(o.isinf(), r.isinf()) or not torch.equal(o[o.isinf()], r[r.isinf()]):
        return "infinity positions differ", None, None, None
    finite = ~(r.isnan() | r.isinf())
    o, r = o[finite], r[finite]
    err = (o - r).abs()
    bad = err > tol.atol + tol.rtol * r.abs()
    rel = float(torch.linalg.vector_norm(o - r)) / max(float(torch.linalg.vector_norm(r)), 1e-30)
    if bool(bad.any()) or rel > tol.rel_rms:
        return ("outside atol/rtol" if bool(bad.any()) else "relative RMS error too large", float(err.max()), rel,
                float(bad.double().mean()))
    return None, None, None, None


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("chunk", [7, 1000, 1 << 25])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_tensor_compared_in_chunks_gets_the_verdict_of_the_whole(dtype: torch.dtype, chunk: int, seed: int) -> None:
    """A large output (a KV cache) is compared a chunk of elements at a time, so that the comparison's float64
    copies stay small; the verdict and its numbers are those of the whole tensor, also for a strided view and with
    NaNs and infinities where the reference has them."""
    from evaluator.tolerances import compare_tensors

    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(3, 5, 17, 13, generator=g).to(dtype).transpose(1, 2)  # not contiguous
    ref[0, 1, 2] = float("nan")
    ref[2, 3, 4, 5] = float("inf")
    noise = ref.double() * (1 + 1e-7 * torch.randn(ref.shape, generator=g, dtype=torch.float64))
    wrong = ref.double().clone()
    wrong[1, 2, :3] += 5.0  # a few elements far off
    rms = ref.double() * (1 + 30 * TOLERANCES[str(dtype).removeprefix("torch.")].rel_rms)
    nan = ref.clone()
    nan[2, 0, 0, 0] = float("nan")
    inf = ref.clone()
    inf[2, 3, 4, 5] = float("-inf")
    for out in (noise.to(dtype), wrong.to(dtype), rms.to(dtype), nan, inf):
        got = compare_tensors(out, ref, "out", chunk=chunk)
        want = _whole(out, ref)
        assert (got.reason if got else None) == want[0]
        if got is not None:
            for value, expected in zip((got.max_abs, got.rel_rms, got.bad_fraction), want[1:]):
                assert value == pytest.approx(expected, rel=1e-9) if expected is not None else value is None
    exact = ref.clone()
    exact[0, 0, 0, 1] += 1
    got = compare_tensors(exact, ref, "out", exact=True, chunk=chunk)
    assert got is not None and got.reason == "not bit-exact" and got.bad_fraction == pytest.approx(1 / ref.numel())
    assert compare_tensors(ref.clone(), ref, "out", exact=True, chunk=chunk) is None
