"""The ``tl.dot`` work count (``evaluator/flops.py``): the instrumented source, and the count one call makes."""

from pathlib import Path

import pytest

from evaluator import Evaluator
from evaluator.flops import HELPER, PARAM, instrument

MATMUL = Path(__file__).resolve().parents[1] / "fixtures" / "tasks" / "matmul"


def test_a_module_without_dots_is_not_instrumented() -> None:
    src = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x):\n    tl.store(x, tl.load(x) + 1)\n"
    assert instrument(src) is None


def test_dots_are_counted_through_helpers_and_other_spellings() -> None:
    """A dot in a helper makes its caller take the counter too; ``from triton import language as T`` is seen; a
    parameter after defaulted ones gets a default; a jit function without dots and plain Python are left as they
    were."""
    src = (
        "import triton\nfrom triton import language as T\n\n"
        "@triton.jit\ndef inner(a, b):\n    return T.dot(a, b)\n\n"
        "@triton.jit(do_not_specialize=['n'])\ndef outer(p, n, BLOCK: T.constexpr = 16):\n    x = inner(p, p)\n\n"
        "@triton.jit\ndef other(p):\n    T.store(p, 1)\n\n"
        "def host(x):\n    return x.dot(x)\n"
    )
    out = instrument(src)
    assert out is not None
    assert f"T.dot({HELPER}(a, b, {PARAM}), b)" in out
    assert f"inner(p, p, {PARAM}={PARAM})" in out
    assert f"def outer(p, n, BLOCK: T.constexpr=16, {PARAM}=None):" in out
    assert "def other(p):" in out and "return x.dot(x)" in out
    assert "T.atomic_add(counter" in out  # the helper speaks the module's name for triton.language
    compile(out, "<instrumented>", "exec")


def test_the_baseline_timing_counts_the_dot_work_of_each_case() -> None:
    """The fixture's tiles are 16 cubed: 32x32x32 in fp16 is exactly 2·M·N·K; a ragged 20x40x24 fp32 product does
    2x3x2 whole tiles (the tensor cores do the masked tails too). The interpreter claims no share of a peak."""
    with Evaluator(MATMUL, backend="interpreter") as ev:
        even, ragged = ev.time_baseline()
    assert {int(k): v for k, v in even["flops"].items()} == {16: 2 * 32 * 32 * 32}
    assert {int(k): v for k, v in ragged["flops"].items()} == {32: 2 * (2 * 16) * (3 * 16) * (2 * 16)}
    assert even["flop_fraction"] is None and ragged["flop_fraction"] is None


def test_a_task_without_dots_reports_no_work() -> None:
    task = Path(__file__).resolve().parents[2] / "smithbot" / "tasks" / "silu_and_mul"
    with Evaluator(task, backend="interpreter") as ev:
        [case] = ev.time_baseline([ev.case_names[0]])
    assert "flops" not in case and "flops_error" not in case


@pytest.mark.gpu
def test_the_gpu_counts_what_the_interpreter_counts() -> None:
    """A scalar atomic runs once per program on the GPU too, so the GPU's count is the same; its share of the
    measured dense rate is a fraction."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    with Evaluator(MATMUL, backend="cuda") as ev:
        even, ragged = ev.time_baseline()
    assert {int(k): v for k, v in even["flops"].items()} == {16: 2 * 32 * 32 * 32}
    assert {int(k): v for k, v in ragged["flops"].items()} == {32: 2 * 32 * 48 * 32}
    assert 0 < even["flop_fraction"] < 1
