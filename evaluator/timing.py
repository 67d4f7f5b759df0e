"""Stage 4 of the cascade: paired, interleaved GPU timing (``cuda`` backend only).

Method, per shape case:
- inputs are built once per side and copied ``n`` times; one timed sample calls the function once on each copy, so
  a sample's footprint is at least twice the L2 when that fits in the memory cap (``l2_cold``), and short decode calls
  are long enough to time;
- every case and side is warmed up first (compiles every constexpr variant, runs autotuning);
- each side's sample is captured as a CUDA graph and replayed; if either side cannot be captured, both are timed
  eagerly between CUDA events, so the two sides are always measured the same way;
- cases are timed one after another; within a case, rounds interleave the sides and alternate which goes first; the
  per-round ratio baseline/candidate gives a median and a bootstrap 95% interval; the geomean over cases has a joint
  bootstrap interval, and a sign test over every round of every case says how likely that many wins are if the
  candidate were not faster by the margin (a win is a round whose ratio exceeds 1 + margin).

The ``interpreter`` backend is timed the same way (interleaved rounds, the same statistics) with the wall clock around
eager calls (method ``interpreter_wall``). Those numbers measure the CPU interpreter only and do not predict GPU speed;
they let the offline search and the demo run end to end on a machine without a GPU.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
import torch

from evaluator.correctness import make_args
from evaluator.runtime import clone_args, tensors_of
from evaluator.task import Case

BOOTSTRAP = 2000
MIN_SAMPLE_US = 100.0  # a sample shorter than this is dominated by event resolution
MAX_COPIES = 256
COPY_CAP_BYTES = 4 << 30


@dataclass(frozen=True)
class CaseTiming:
    name: str
    method: str  # cuda_graph | cuda_events | interpreter_wall
    copies: int
    l2_cold: bool
    base_us: float
    base_p20_us: float
    base_p80_us: float
    cand_us: float
    cand_p20_us: float
    cand_p80_us: float
    ratio: float
    ratio_ci: tuple[float, float]
    bytes: int
    cand_gbps: float
    base_gbps: float
    cand_bw_fraction: float

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio_ci"] = list(self.ratio_ci)
        return d


def default_bytes(args: dict[str, Any], out: Any) -> int:
    return sum(t.numel() * t.element_size() for t in [*tensors_of(list(args.values())), *tensors_of(out)])


def _sample(fn: Callable[..., Any], copies: list[dict[str, Any]], keep: list[Any]) -> Callable[[], None]:
    def run() -> None:
        keep.clear()
        for a in copies:
            keep.append(fn(**a))  # outputs stay alive until the next sample, so no captured buffer is reused
    return run


def _capture(run: Callable[[], None]) -> Any:
    """A CUDA graph of ``run``, or None when it cannot be captured (host syncs, CPU work)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            run()
    except Exception:  # capture fails for many legitimate reasons; eager timing is the fallback
        torch.cuda.synchronize()
        return None
    torch.cuda.synchronize()
    return graph


def _median_ci(x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    idx = rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))
    meds = np.median(x[idx], axis=1)
    return float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))


def _elapsed_us(fn: Callable[[], None], reps: int) -> tuple[Any, Any]:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    return s, e


def time_case(base_fn: Callable[..., Any], cand_fn: Callable[..., Any], harness: Any, case: Case, seed: int,
              rounds: int, l2_bytes: int, copy_gbps: float, rng: np.random.Generator) -> tuple[CaseTiming, np.ndarray]:
    """Time one case; returns its summary and the per-round ratios baseline/candidate."""
    args = make_args(harness, case, seed, "cuda")
    footprint = sum(t.numel() * t.element_size() for t in tensors_of(list(args.values())))
    out = base_fn(**clone_args(args))
    bytes_fn = getattr(harness, "bytes_moved", None)
    moved = int(bytes_fn(**args)) if bytes_fn is not None else default_bytes(args, out)
    del out
    copies = max(1, min(MAX_COPIES, math.ceil(2 * l2_bytes / max(moved, 1)), COPY_CAP_BYTES // max(footprint, 1)))
    runs: dict[str, Callable[[], None]] = {}
    keep: dict[str, list[Any]] = {}
    for side, fn in (("base", base_fn), ("cand", cand_fn)):
        keep[side] = []
        bufs = [clone_args(args) for _ in range(copies)]
        runs[side] = _sample(fn, bufs, keep[side])
        for _ in range(2):  # warm-up: compiles every variant and runs autotuning before anything is timed
            fn(**bufs[0])
    torch.cuda.synchronize()
    graphs = {side: _capture(run) for side, run in runs.items()}
    if all(g is not None for g in graphs.values()):
        method = "cuda_graph"
        runners = {side: g.replay for side, g in graphs.items()}
    else:
        method, runners = "cuda_events", runs
    # One pass over the copies may be too short to time; repeat it within a sample until it is long enough.
    s, e = _elapsed_us(runners["base"], 1)
    torch.cuda.synchronize()
    reps = max(1, math.ceil(MIN_SAMPLE_US / max(s.elapsed_time(e) * 1e3, 1e-3)))
    samples: dict[str, list[Any]] = {"base": [], "cand": []}
    for r in range(rounds):
        for side in (("base", "cand") if r % 2 == 0 else ("cand", "base")):
            samples[side].append(_elapsed_us(runners[side], reps))
    torch.cuda.synchronize()
    tb, tc = (np.array([s.elapsed_time(e) * 1e3 / (copies * reps) for s, e in samples[k]]) for k in ("base", "cand"))
    del graphs, runners, runs, keep
    torch.cuda.synchronize()
    ratio = tb / tc
    cand_us, base_us = float(np.median(tc)), float(np.median(tb))
    cand_gbps = moved / (cand_us * 1e-6) / 1e9
    timing = CaseTiming(
        name=case.name, method=method, copies=copies, l2_cold=copies * moved >= 2 * l2_bytes,
        base_us=base_us, base_p20_us=float(np.percentile(tb, 20)), base_p80_us=float(np.percentile(tb, 80)),
        cand_us=cand_us, cand_p20_us=float(np.percentile(tc, 20)), cand_p80_us=float(np.percentile(tc, 80)),
        ratio=float(np.median(ratio)), ratio_ci=_median_ci(ratio, rng), bytes=moved, cand_gbps=cand_gbps,
        base_gbps=moved / (base_us * 1e-6) / 1e9, cand_bw_fraction=cand_gbps / copy_gbps)
    return timing, ratio


def time_case_wall(base_fn: Callable[..., Any], cand_fn: Callable[..., Any], harness: Any, case: Case, seed: int,
                   rounds: int, rng: np.random.Generator) -> tuple[CaseTiming, np.ndarray]:
    """Interpreter timing: eager calls on the CPU between ``perf_counter`` reads, interleaved like the GPU path."""
    args = make_args(harness, case, seed, "cpu")
    out = base_fn(**clone_args(args))
    bytes_fn = getattr(harness, "bytes_moved", None)
    moved = int(bytes_fn(**args)) if bytes_fn is not None else default_bytes(args, out)
    del out
    bufs = {"base": clone_args(args), "cand": clone_args(args)}
    fns = {"base": base_fn, "cand": cand_fn}
    for side in fns:
        fns[side](**bufs[side])
    samples: dict[str, list[float]] = {"base": [], "cand": []}
    for r in range(rounds):
        for side in (("base", "cand") if r % 2 == 0 else ("cand", "base")):
            t0 = time.perf_counter()
            fns[side](**bufs[side])
            samples[side].append((time.perf_counter() - t0) * 1e6)
    tb, tc = np.array(samples["base"]), np.array(samples["cand"])
    ratio = tb / tc
    base_us, cand_us = float(np.median(tb)), float(np.median(tc))
    timing = CaseTiming(
        name=case.name, method="interpreter_wall", copies=1, l2_cold=False,
        base_us=base_us, base_p20_us=float(np.percentile(tb, 20)), base_p80_us=float(np.percentile(tb, 80)),
        cand_us=cand_us, cand_p20_us=float(np.percentile(tc, 20)), cand_p80_us=float(np.percentile(tc, 80)),
        ratio=float(np.median(ratio)), ratio_ci=_median_ci(ratio, rng), bytes=moved,
        cand_gbps=moved / (cand_us * 1e-6) / 1e9, base_gbps=moved / (base_us * 1e-6) / 1e9, cand_bw_fraction=0.0)
    return timing, ratio


def time_cases(base_fn: Callable[..., Any], cand_fn: Callable[..., Any], harness: Any, cases: tuple[Case, ...],
               rounds: int, l2_bytes: int, copy_gbps: float | None, margin: float = 0.0,
               seed: int = 12345) -> tuple[list[CaseTiming], dict]:
    """Time every case (each with its own interleaved rounds); summarise with the geomean and its interval, and the
    rounds won by more than ``margin``. ``copy_gbps=None`` selects the interpreter's wall-clock timing."""
    rng = np.random.default_rng(seed)
    results, ratios = [], []
    for i, case in enumerate(cases):
        if copy_gbps is None:
            timing, ratio = time_case_wall(base_fn, cand_fn, harness, case, seed + i, rounds, rng)
        else:
            timing, ratio = time_case(base_fn, cand_fn, harness, case, seed + i, rounds, l2_bytes, copy_gbps, rng)
        results.append(timing)
        ratios.append(ratio)
    return results, summarize(np.stack(ratios), margin, rng)


def summarize(ratios: np.ndarray, margin: float, rng: np.random.Generator) -> dict[str, Any]:
    """``ratios`` is [cases, rounds] of baseline/candidate: the geomean of the per-case medians with a joint bootstrap
    interval, and the rounds won by more than ``margin`` with their sign test."""
    logs = np.log(ratios)
    geo = float(np.exp(np.mean(np.median(logs, axis=1))))
    n_cases, n_rounds = logs.shape
    idx = rng.integers(0, n_rounds, size=(BOOTSTRAP, n_cases, n_rounds))
    boot = np.exp(np.mean(np.median(np.take_along_axis(logs[None], idx, axis=2), axis=2), axis=1))
    wins = int((logs > math.log1p(margin)).sum())
    return {"geomean": geo, "ci": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
            "rounds": n_rounds, "margin": margin, "wins": wins, "sign_p": sign_p(wins, logs.size)}


def sign_p(wins: int, n: int) -> float:
    """One-sided sign test: the chance of ``wins`` or more won rounds out of ``n`` when each round is won with
    probability 1/2 at most (the candidate's median ratio is not above the margin). Exact for any ``n``, where a
    bootstrap interval over a handful of rounds is too narrow: a self-comparison's 5 interpreter rounds can put its
    bootstrap interval above 1."""
    return float(sum(math.comb(n, k) for k in range(wins, n + 1)) / 2 ** n)


def measure_copy_gbps(n_bytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written (median of 20)."""
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    samples = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        torch.cuda.synchronize()
        samples.append(2 * n_bytes / (s.elapsed_time(e) * 1e-3) / 1e9)
    del src, dst
    torch.cuda.empty_cache()
    return float(np.median(samples))
