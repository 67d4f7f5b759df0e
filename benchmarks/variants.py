"""Candidate variants of the bundled rmsnorm task for the evaluator's benchmarks, made by plain text edits of its
baseline kernel.py (the offline tuner does this with libcst; here a fixed, reviewable list is the point)."""

from __future__ import annotations

from pathlib import Path

TASK = Path(__file__).resolve().parent.parent / "smithbot" / "tasks" / "rmsnorm"
BASELINE = (TASK / "kernel.py").read_text()
FASTER = (TASK / "candidates" / "single_pass.py").read_text()

_RSTD = "    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)\n"


def slower(extra_fraction: int) -> str:
    """The baseline plus a third pass that re-reads 1/extra_fraction of each row: more bytes, same result.

    The re-read is folded into rstd multiplied by zero, which the compiler cannot drop (0 * x is NaN for x = inf)."""
    extra = (
        _RSTD
        + "    extra = tl.zeros([BLOCK], dtype=tl.float32)\n"
        + f"    for start in range(0, n_cols // {extra_fraction}, BLOCK):\n"
        + "        cols = start + tl.arange(0, BLOCK)\n"
        + "        extra += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)\n"
        + "    rstd += 0.0 * tl.sum(extra, axis=0)\n"
    )
    assert _RSTD in BASELINE
    return BASELINE.replace(_RSTD, extra)


def launch_variant(block: int, warps: int) -> str:
    """The baseline launched with another chunk width and warp count: a distinct source, compiled anew."""
    old = "BLOCK=256, num_warps=4)"
    assert old in BASELINE
    return BASELINE.replace(old, f"BLOCK={block}, num_warps={warps})")


def fresh(k: int) -> str:
    """The baseline with a comment inside its kernel: the same code, but a source no compile cache has seen, so that
    the worker evaluating it compiles (busy work beside another worker's timing)."""
    assert _RSTD in BASELINE
    return BASELINE.replace(_RSTD, _RSTD + f"    # fresh variant {k}\n")


def write(directory: Path, name: str, source: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.py"
    path.write_text(source)
    return path
