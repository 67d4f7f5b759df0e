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
