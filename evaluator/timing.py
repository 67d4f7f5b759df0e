"""Stage 4 of the cascade: paired, interleaved GPU timing (``cuda`` backend only).

Method, per shape case:
- inputs are built once per side and copied ``n`` times; one timed sample calls the function once on each copy, so
  a sample's footprint is at least twice the L2 when that fits in the memory cap (``l2_cold``), and short decode calls
  are long enough to time;
- every case and side is warmed up first (compiles every constexpr variant, runs autotuning);
- each side's sample is captured as a CUDA graph and replayed; if either side cannot be captured, both are timed
  eagerly between CUDA events, so the two sides are always measured the same way;
- rounds interleave the sides and alternate which goes first; the per-round ratio baseline/candidate gives a median
  and a bootstrap 95% interval; the geomean over cases has a joint bootstrap interval.
"""

from __future__ import annotations

import math
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
    method: str  # cuda_graph | cuda_events
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


def _sample(fn: Callable[..., Any], copies: list[dict[str, Any]]) -> Callable[[], None]:
    def run() -> None:
        for a in copies:
            fn(**a)
    return run


def _capture(run: Callable[[], None]) -> Callable[[], None] | None:
    """A graph replay of ``run``, or None when it cannot be captured (host syncs, CPU work)."""
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
    return graph.replay


def _median_ci(x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    idx = rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))
    meds = np.median(x[idx], axis=1)
    return float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))


def time_cases(base_fn: Callable[..., Any], cand_fn: Callable[..., Any], harness: Any, cases: tuple[Case, ...],
               rounds: int, l2_bytes: int, copy_gbps: float, seed: int = 12345) -> tuple[list[CaseTiming], dict]:
    bytes_fn = getattr(harness, "bytes_moved", None)
    plans = []
    for i, case in enumerate(cases):
        args = make_args(harness, case, seed + i, "cuda")
        footprint = sum(t.numel() * t.element_size() for t in tensors_of(list(args.values())))
        probe = clone_args(args)
        out = base_fn(**probe)
        moved = int(bytes_fn(**args)) if bytes_fn is not None else default_bytes(args, out)
        copies = max(1, min(MAX_COPIES, math.ceil(2 * l2_bytes / max(moved, 1)),
                            COPY_CAP_BYTES // max(footprint, 1)))
        sides = {}
        for side, fn in (("base", base_fn), ("cand", cand_fn)):
            bufs = [clone_args(args) for _ in range(copies)]
            run = _sample(fn, bufs)
            for _ in range(3):  # warm-up: compiles every variant and runs autotuning before anything is timed
                run()
            sides[side] = (run, bufs)
        torch.cuda.synchronize()
        graphs = {side: _capture(run) for side, (run, _) in sides.items()}
        if all(g is not None for g in graphs.values()):
            method, runners = "cuda_graph", graphs
        else:
            method, runners = "cuda_events", {side: run for side, (run, _) in sides.items()}
        # A sample must be long enough to time; repeat the copies within a sample if one pass is short.
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        runners["base"]()
        end.record()
        torch.cuda.synchronize()
        reps = max(1, math.ceil(MIN_SAMPLE_US / max(start.elapsed_time(end) * 1e3, 1e-3)))
        plans.append((case, method, copies, copies * moved >= 2 * l2_bytes, moved, runners, reps))

    times = {(p[0].name, side): [] for p in plans for side in ("base", "cand")}
    for r in range(rounds):
        events = []
        for case, _, copies, _, _, runners, reps in plans:
            order = ("base", "cand") if r % 2 == 0 else ("cand", "base")
            for side in order:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(reps):
                    runners[side]()
                e.record()
                events.append((case.name, side, s, e, copies * reps))
        torch.cuda.synchronize()
        for name, side, s, e, calls in events:
            times[(name, side)].append(s.elapsed_time(e) * 1e3 / calls)

    rng = np.random.default_rng(seed)
    results: list[CaseTiming] = []
    ratios = []
    for case, method, copies, cold, moved, _, _ in plans:
        tb, tc = np.array(times[(case.name, "base")]), np.array(times[(case.name, "cand")])
        ratio = tb / tc
        ratios.append(ratio)
        cand_us, base_us = float(np.median(tc)), float(np.median(tb))
        cand_gbps = moved / (cand_us * 1e-6) / 1e9
        results.append(CaseTiming(
            name=case.name, method=method, copies=copies, l2_cold=cold,
            base_us=base_us, base_p20_us=float(np.percentile(tb, 20)), base_p80_us=float(np.percentile(tb, 80)),
            cand_us=cand_us, cand_p20_us=float(np.percentile(tc, 20)), cand_p80_us=float(np.percentile(tc, 80)),
            ratio=float(np.median(ratio)), ratio_ci=_median_ci(ratio, rng), bytes=moved, cand_gbps=cand_gbps,
            base_gbps=moved / (base_us * 1e-6) / 1e9, cand_bw_fraction=cand_gbps / copy_gbps))
    logs = np.log(np.stack(ratios))  # [cases, rounds]
    geo = float(np.exp(np.mean(np.median(logs, axis=1))))
    boot = np.empty(BOOTSTRAP)
    n_cases, n_rounds = logs.shape
    for b in range(BOOTSTRAP):
        idx = rng.integers(0, n_rounds, size=(n_cases, n_rounds))
        boot[b] = np.exp(np.mean(np.median(np.take_along_axis(logs, idx, axis=1), axis=1)))
    summary = {"geomean": geo, "ci": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
               "rounds": rounds}
    return results, summary


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
