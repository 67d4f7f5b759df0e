"""Compiling ahead (evaluator/ahead.py): a CPU worker with no GPU builds a candidate's kernels for an sm90 GPU into
Triton's cache, each autotuned config once; Triton's compile errors are a verdict there, and what the CPU cannot run
is left to the GPU worker. On a GPU, the GPU worker then finds every binary in the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator import Evaluator
from evaluator.process import WorkerProcess
from tests.conftest import TASKS

RMSNORM = TASKS / "rmsnorm"
BASE = (RMSNORM / "kernel.py").read_text()


def _cubins(cache: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in cache.glob("*/*.cubin"):
        out[f.stem] = out.get(f.stem, 0) + 1
    return out


@pytest.fixture
def ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    w = WorkerProcess("ahead", None, "cuda:90:32")
    yield lambda candidate: w.request({"op": "compile", "task": str(RMSNORM), "candidate": str(candidate),
                                       "cases": None}, 600)
    w.close()


def _write(tmp_path: Path, name: str, src: str) -> Path:
    assert src != BASE
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    return path


def test_a_candidate_is_compiled_for_the_gpu_on_a_cpu_worker(ahead, tmp_path: Path) -> None:
    ans = ahead(RMSNORM / "kernel.py")
    assert ans["status"] == "compiled", ans
    n = _cubins(tmp_path / "cache")["_rmsnorm_kernel"]  # one per specialisation the cases make (dtype, sizes)
    assert n >= 1
    # an autotuned candidate: each config compiled, none timed
    tuned = BASE.replace("@triton.jit", "@triton.autotune(configs=[triton.Config({}, num_warps=2), "
                                        "triton.Config({}, num_warps=8)], key=['n_cols'])\n@triton.jit")
    assert ahead(_write(tmp_path, "tuned", tuned.replace(", num_warps=4)", ")")))["status"] == "compiled"
    assert _cubins(tmp_path / "cache") == {"_rmsnorm_kernel": 3 * n}
    # a tuner that prunes by the GPU it runs on (as lmdeploy's MoE does): only the configs it keeps on sm90
    pruned = BASE.replace("@triton.jit", "@triton.autotune(configs=[triton.Config({}, num_warps=1), "
                                         "triton.Config({}, num_warps=16)], key=['n_cols'], prune_configs_by="
                                         "{'early_config_prune': lambda configs, nargs, **kw: configs[:1] if "
                                         "torch.cuda.get_device_capability()[0] >= 9 else configs[1:]})\n@triton.jit")
    assert ahead(_write(tmp_path, "pruned", pruned.replace(", num_warps=4)", ")")))["status"] == "compiled"
    assert _cubins(tmp_path / "cache") == {"_rmsnorm_kernel": 4 * n}  # num_warps=1 only, not 16


def test_a_compile_error_is_a_verdict_and_what_the_cpu_cannot_run_is_left_to_the_gpu(ahead, tmp_path: Path
                                                                                   ) -> None:
    bad = ahead(_write(tmp_path, "bad", BASE.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK + 1)", 1)))
    assert bad["status"] == "compile_error" and "power of 2" in bad["detail"], bad
    asks_cuda = BASE.replace("    _rmsnorm_kernel[", "    torch.cuda.current_device()\n    _rmsnorm_kernel[", 1)
    left = ahead(_write(tmp_path, "asks_cuda", asks_cuda))
    assert left["status"] == "skipped" and "case " in left["detail"], left
    assert _cubins(tmp_path / "cache") == {}


@pytest.mark.gpu
def test_the_gpu_worker_finds_every_binary_compiled_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluator.ahead import target_of_gpu

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    variant = _write(tmp_path, "w8", BASE.replace("BLOCK=256, num_warps=4", "BLOCK=512, num_warps=8"))
    w = WorkerProcess("ahead", None, target_of_gpu())
    try:
        assert w.request({"op": "compile", "task": str(RMSNORM), "candidate": str(variant), "cases": None},
                         600)["status"] == "compiled"
    finally:
        w.close()
    ahead = sum(_cubins(tmp_path / "cache").values())
    with Evaluator(RMSNORM, backend="cuda", workers_per_gpu=1, ahead=False) as ev:
        result = ev.submit(variant).result()
    assert result.correct, result.why
    # the GPU worker compiled the baseline (as many specialisations as the candidate has) and found the candidate's
    # binaries where the CPU worker left them: had it compiled them again under other keys, there would be 3 x ahead
    assert sum(_cubins(tmp_path / "cache").values()) == 2 * ahead


def test_large_float_draws_are_left_unfilled_and_everything_else_is_drawn() -> None:
    """A MoE case's weights cost more to draw on the CPU than the compile they feed; indices and lengths, which a
    launcher may compute from, are drawn as on the GPU."""
    import torch

    from evaluator.ahead import UNFILLED_ELEMENTS, UnfilledDraws

    g = torch.Generator().manual_seed(3)
    with UnfilledDraws():
        state = g.get_state()
        big = torch.randn((UNFILLED_ELEMENTS // 64, 64), generator=g, dtype=torch.bfloat16)
        like = torch.rand_like(big)
        filled_in_place = torch.empty(UNFILLED_ELEMENTS).normal_(generator=g)
        assert torch.equal(g.get_state(), state)  # nothing was drawn for them
        small = torch.randn(3, 5, generator=g)
        ids = torch.randint(0, 7, (UNFILLED_ELEMENTS,), generator=g)
    assert big.shape == (UNFILLED_ELEMENTS // 64, 64) and big.dtype == like.dtype == torch.bfloat16
    assert filled_in_place.shape == (UNFILLED_ELEMENTS,)
    expect = torch.Generator().manual_seed(3)
    assert torch.equal(small, torch.randn(3, 5, generator=expect))
    assert torch.equal(ids, torch.randint(0, 7, (UNFILLED_ELEMENTS,), generator=expect))
