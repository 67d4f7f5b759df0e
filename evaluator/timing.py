"""Stage 4 of the cascade: paired, interleaved GPU timing (``cuda`` backend only).

Method, per shape case:
- every case and side is warmed up first (compiles every constexpr variant, runs autotuning), and one eager call of
  the baseline is timed: what a case's timing costs follows from it. Each side's autotuned kernels hold what they
  chose on this case (in the check, or in the baseline's timing of an earlier candidate), or tune on it, not on the
  case that came first (``runtime.Picks``);
- inputs are built once per side and copied ``n`` times; one timed sample calls the function once on each copy, so
  a sample's footprint is at least twice the L2 when that fits in the memory cap and in the case's time cap
  (``l2_cold``), and short decode calls are long enough to time;
- each side's sample is captured as a CUDA graph and replayed; if either side cannot be captured, both are timed
  eagerly between CUDA events, so the two sides are always measured the same way;
- cases are timed one after another; within a case, rounds interleave the sides and alternate which goes first. A
  case takes as many rounds as fit in its time cap (``case_s``, for both sides together), between ``MIN_ROUNDS`` and
  the rounds asked for: a screen asks few, a full evaluation more, verification most. The per-round ratio
  baseline/candidate gives a median and a bootstrap 95% interval; the geomean over cases has a joint
  bootstrap interval, and each case's sign test says how likely its wins are if the candidate were not faster there
  by the margin (a win is a round whose ratio exceeds 1 + margin). A case is timed at least ``sign_rounds(cases)``
  rounds where that many are asked, so that a gain on it can pass its test at ``SIGN_ALPHA`` / cases.
- nothing a candidate keeps between calls counts as speed: every timed call (and every call a CUDA graph captures) is
  handed new Python objects over the copies' memory (``fresh_args``), so an attribute set on an input, or an entry
  appended to a list, never reaches the next call; and after every round the last call's output and written
  arguments are compared with the baseline's last call on the same inputs (``TimedOutputMismatch``), so a call that
  does less while it is timed than while it is checked is caught.

The ``interpreter`` backend is timed the same way (interleaved rounds, the same statistics) with the wall clock around
eager calls (method ``interpreter_wall``). Those numbers measure the CPU interpreter only and do not predict GPU speed;
they let the offline search and the demo run end to end on a machine without a GPU.
"""

from __future__ import annotations

import math
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from evaluator import bounds
from evaluator.correctness import effects_mismatch, make_args, written_by
from evaluator.verdict import sign_p, sign_rounds
from evaluator.runtime import LaunchCounter, Picks, clone_args, fresh_args, tensors_of
from evaluator.task import Case

BOOTSTRAP = 2000
MIN_SAMPLE_US = 100.0  # a sample shorter than this is dominated by event resolution
MAX_COPIES = 256
COPY_CAP_BYTES = 4 << 30
MIN_ROUNDS = 10  # with 1 case, 7 rounds won are the fewest that can be significant (p = 1/128 < 0.01)


@dataclass(frozen=True)
class CaseTiming:
    name: str
    method: str  # cuda_graph | cuda_events | interpreter_wall
    copies: int
    rounds: int
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
    wins: int = 0  # rounds the candidate won by more than the margin
    sign_p: float = 1.0  # the sign test of those wins (``sign_p``)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio_ci"] = list(self.ratio_ci)
        return d


def default_bytes(args: dict[str, Any], out: Any, gathered: tuple[str, ...] = ()) -> int:
    """The bytes of the call's tensors, in and out, but the inputs it reads only through an index (the harness's
    ``GATHERED``): the rows it picks are in what it returns, and the rest of the table is not read."""
    given = [v for k, v in args.items() if k not in gathered]
    return sum(t.numel() * t.element_size() for t in [*tensors_of(given), *tensors_of(out)])


class TimedOutputMismatch(Exception):
    """A timed call's output or written arguments differ from the baseline's on the same inputs."""


class _Side:
    """One side's input copies for a case, called in turn, each call on new objects over a copy's memory; keeps the
    last pass's outputs (alive until the next pass, so no captured buffer is reused) and the last call's arguments."""

    def __init__(self, fn: Callable[..., Any], copies: list[dict[str, Any]]) -> None:
        self.fn, self.copies = fn, copies
        self.outs: list[Any] = [None] * len(copies)
        self.last_args: dict[str, Any] = {}

    def calls(self, passes: int) -> list[dict[str, Any]]:
        """The argument dicts of ``passes`` passes over the copies, made ahead so that making them is not timed."""
        return [fresh_args(a) for _ in range(passes) for a in self.copies]

    def run(self, calls: list[dict[str, Any]]) -> None:
        n = len(self.copies)
        with bounds.handed(*calls):  # under the interpreter, what a kernel may reach through a table of addresses
            for i, a in enumerate(calls):
                self.outs[i % n] = self.fn(**a)
        self.last_args = calls[-1]

    def one_pass(self) -> None:
        self.run(self.calls(1))


def _check_round(sides: dict[str, _Side], written: list[str], where: str) -> None:
    m = effects_mismatch(sides["cand"].outs[-1], sides["cand"].last_args, sides["base"].outs[-1],
                         sides["base"].last_args, written)
    if m is not None:
        raise TimedOutputMismatch(f"{where}: the last timed call differs from the baseline's on the same inputs: {m}")


def _capture(run: Callable[[], None]) -> tuple[Any, str]:
    """A CUDA graph of ``run`` and ``""``, or None and where capture failed (host syncs, CPU work)."""
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
    except Exception as exc:  # capture fails for many legitimate reasons; eager timing is the fallback
        torch.cuda.synchronize()
        return None, _where(exc)
    torch.cuda.synchronize()
    return graph, ""


def _where(exc: BaseException) -> str:
    """The task's own line an exception came from (the innermost frame outside torch, triton and the evaluator), and
    the error's first line: ``kernel.py:57: n = int(lens.max().item()) (RuntimeError: ...)``."""
    own = [f for f in traceback.extract_tb(exc.__traceback__)
           if "site-packages" not in f.filename and "dist-packages" not in f.filename
           and Path(f.filename).parent != Path(__file__).parent and not f.filename.startswith("<")]
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    what = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    if not own:
        return what
    f = own[-1]
    return f"{Path(f.filename).name}:{f.lineno}: {(f.line or '').strip()} ({what})"


def _sync_site(call: Callable[[], Any]) -> str:
    """Where ``call`` first makes the host wait for the GPU (an ``.item()``, a ``.tolist()``, a copy to or from a CPU
    tensor), by torch's sync debug mode, which raises there; ``""`` when it makes no such wait. A failed capture only
    says that capture failed, at the capture's end."""
    before = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        call()
    except Exception as exc:
        return _where(exc)
    finally:
        torch.cuda.set_sync_debug_mode(before)
        torch.cuda.synchronize()
    return ""


HOST_BOUND = 0.2  # an uncapturable call whose Triton kernels take under this share of its wall time is host-bound
PROBE_CALLS = 20


def host_probe(fn: Callable[..., Any], harness: Any, case: Case, seed: int) -> dict[str, Any]:
    """Whether one case's call can be captured as a CUDA graph, and when it cannot (so that it must be timed eagerly,
    host work included): its time per call between CUDA events, and its Triton kernels' own GPU time per call (each
    launch bracketed by events, ``LaunchCounter.timed``)."""
    args = make_args(harness, case, seed, "cuda")
    fn(**args)
    torch.cuda.synchronize()
    graph, error = _capture(lambda: fn(**args))
    if graph is not None:
        del graph
        return {"case": case.name, "captured": True}
    error = _sync_site(lambda: fn(**args)) or error
    s, e = _elapsed_us(lambda: fn(**args), PROBE_CALLS)
    torch.cuda.synchronize()
    call_us = s.elapsed_time(e) * 1e3 / PROBE_CALLS
    LaunchCounter.timed = []  # the Triton kernels' own GPU time: what a launch config can change
    try:
        for _ in range(PROBE_CALLS):
            fn(**args)
        torch.cuda.synchronize()
        gpu_us = sum(a.elapsed_time(b) for _, a, b in LaunchCounter.timed) * 1e3 / PROBE_CALLS
    finally:
        LaunchCounter.timed = None
    return {"case": case.name, "captured": False, "capture_error": error, "call_us": call_us, "gpu_us": gpu_us,
            "share": gpu_us / max(call_us, 1e-3)}


def kernel_times(fn: Callable[..., Any], args: dict[str, Any], call_us: float | None = None,
                 calls: int = 3) -> dict[str, float]:
    """Each Triton kernel's own GPU time in one call of ``fn`` (its launches summed), in µs, the median of ``calls``
    calls: every launch bracketed by CUDA events behind a spin (``LaunchCounter.timed``), so that a call which
    launches several kernels says what each of them costs. An eager launch's events hold a few µs of their own: a
    tiny kernel measured so takes longer than in the CUDA graph that timed the call (``call_us``; on the H200 two
    sorting kernels took 6.6 µs this way in a call of 2.6), so where their sum exceeds the call's time, the call's
    time is shared out in their proportions."""
    fn(**args)
    torch.cuda.synchronize()
    per_call: list[dict[str, float]] = []
    try:
        for _ in range(calls):
            LaunchCounter.timed = []
            fn(**args)
            torch.cuda.synchronize()
            spent: dict[str, float] = {}
            for name, a, b in LaunchCounter.timed:
                spent[name] = spent.get(name, 0.0) + a.elapsed_time(b) * 1e3
            per_call.append(spent)
    finally:
        LaunchCounter.timed = None
    own = {name: float(np.median([c.get(name, 0.0) for c in per_call])) for name in per_call[0]}
    total = sum(own.values())
    if call_us is not None and total > call_us > 0:
        own = {name: us * call_us / total for name, us in own.items()}
    return own


def host_bound(probes: list[dict[str, Any]]) -> str:
    """The verdict on a task's probes: why no launch config can speed it up (every probed case uncapturable, and the
    GPU busy under ``HOST_BOUND`` of each call), or ``""``."""
    if not probes or any(p["captured"] or p["share"] >= HOST_BOUND for p in probes):
        return ""
    p = max(probes, key=lambda q: q["share"])
    return (f"host-bound: kernel {p['share']:.0%} of the call ({p['gpu_us']:.1f} of {p['call_us']:.1f} us on "
            f"{p['case']}); no CUDA graph captures it: {p['capture_error']}")


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


def _plan(call_us: float, moved: int, footprint: int, l2_bytes: int, rounds: int, case_s: float) -> int:
    """Input copies per sample: enough for twice the L2, within the memory cap and the time cap, where a sample must
    leave room for ``MIN_ROUNDS`` rounds of both sides."""
    l2_copies = math.ceil(2 * l2_bytes / max(moved, 1))
    timed = int(case_s * 1e6 / (2 * min(rounds, MIN_ROUNDS) * max(call_us, 1e-3)))
    return max(1, min(MAX_COPIES, l2_copies, COPY_CAP_BYTES // max(footprint, 1), timed))


def time_case(base_fn: Callable[..., Any], cand_fn: Callable[..., Any], harness: Any, case: Case, seed: int,
              rounds: int, case_s: float, l2_bytes: int, copy_gbps: float,
              rng: np.random.Generator, min_rounds: int = MIN_ROUNDS) -> tuple[CaseTiming, np.ndarray]:
    """Time one case within about ``case_s`` seconds of samples; returns its summary and the per-round ratios
    baseline/candidate."""
    args = make_args(harness, case, seed, "cuda")
    footprint = sum(t.numel() * t.element_size() for t in tensors_of(list(args.values())))
    probe = clone_args(args)
    out = base_fn(**probe)
    bytes_fn = getattr(harness, "bytes_moved", None)
    moved = int(bytes_fn(**args)) if bytes_fn is not None else \
        default_bytes(args, out, getattr(harness, "GATHERED", ()))
    written = written_by(probe, args)
    del out, probe
    warm = {"base": _Side(base_fn, [clone_args(args)]), "cand": _Side(cand_fn, [clone_args(args)])}
    for side in warm.values():
        for _ in range(2):  # warm-up: compiles every variant and runs autotuning before anything is timed
            side.one_pass()
    torch.cuda.synchronize()
    calls = warm["base"].calls(3)
    s, e = _elapsed_us(lambda: warm["base"].run(calls), 1)
    torch.cuda.synchronize()
    copies = _plan(s.elapsed_time(e) * 1e3 / 3, moved, footprint, l2_bytes, rounds, case_s)
    del warm, calls
    sides = {"base": _Side(base_fn, [clone_args(args) for _ in range(copies)]),
             "cand": _Side(cand_fn, [clone_args(args) for _ in range(copies)])}
    graphs = {k: _capture(side.one_pass)[0] for k, side in sides.items()}
    captured = all(g is not None for g in graphs.values())
    method = "cuda_graph" if captured else "cuda_events"
    # One pass over the copies may be too short to time; repeat it within a sample until it is long enough.
    passes: dict[str, float] = {}
    for k, side in sides.items():  # both sides, so that every copy has had as many calls on each side
        run = graphs[k].replay if captured else side.one_pass
        s, e = _elapsed_us(run, 1)
        torch.cuda.synchronize()
        passes[k] = max(s.elapsed_time(e) * 1e3, 1e-3)
    pass_us = passes["base"]
    reps = max(1, math.ceil(MIN_SAMPLE_US / pass_us))
    rounds = max(min(rounds, min_rounds), min(rounds, int(case_s * 1e6 / (2 * reps * pass_us))))
    samples: dict[str, list[Any]] = {"base": [], "cand": []}
    for r in range(rounds):
        for k in (("base", "cand") if r % 2 == 0 else ("cand", "base")):
            if captured:
                samples[k].append(_elapsed_us(graphs[k].replay, reps))
            else:
                calls = sides[k].calls(reps)
                samples[k].append(_elapsed_us(lambda: sides[k].run(calls), 1))
        _check_round(sides, written, f"case {case.name} round {r}")
    torch.cuda.synchronize()
    tb, tc = (np.array([s.elapsed_time(e) * 1e3 / (copies * reps) for s, e in samples[k]]) for k in ("base", "cand"))
    del graphs, sides
    torch.cuda.synchronize()
    ratio = tb / tc
    cand_us, base_us = float(np.median(tc)), float(np.median(tb))
    cand_gbps = moved / (cand_us * 1e-6) / 1e9
    timing = CaseTiming(
        name=case.name, method=method, copies=copies, rounds=rounds, l2_cold=copies * moved >= 2 * l2_bytes,
        base_us=base_us, base_p20_us=float(np.percentile(tb, 20)), base_p80_us=float(np.percentile(tb, 80)),
        cand_us=cand_us, cand_p20_us=float(np.percentile(tc, 20)), cand_p80_us=float(np.percentile(tc, 80)),
        ratio=float(np.median(ratio)), ratio_ci=_median_ci(ratio, rng), bytes=moved, cand_gbps=cand_gbps,
        base_gbps=moved / (base_us * 1e-6) / 1e9, cand_bw_fraction=cand_gbps / copy_gbps)
    return timing, ratio


def time_case_wall(base_fn: Callable[..., Any], cand_fn: Callable[..., Any], harness: Any, case: Case, seed: int,
                   rounds: int, rng: np.random.Generator) -> tuple[CaseTiming, np.ndarray]:
    """Interpreter timing: eager calls on the CPU between ``perf_counter`` reads, interleaved like the GPU path, each
    on new objects, with the same check of the last call of every round."""
    args = make_args(harness, case, seed, "cpu")
    probe = clone_args(args)
    with bounds.handed(probe):
        out = base_fn(**probe)
    bytes_fn = getattr(harness, "bytes_moved", None)
    moved = int(bytes_fn(**args)) if bytes_fn is not None else \
        default_bytes(args, out, getattr(harness, "GATHERED", ()))
    written = written_by(probe, args)
    del out, probe
    sides = {"base": _Side(base_fn, [clone_args(args)]), "cand": _Side(cand_fn, [clone_args(args)])}
    for side in sides.values():
        side.one_pass()
    samples: dict[str, list[float]] = {"base": [], "cand": []}
    for r in range(rounds):
        for k in (("base", "cand") if r % 2 == 0 else ("cand", "base")):
            calls = sides[k].calls(1)
            t0 = time.perf_counter()
            sides[k].run(calls)
            samples[k].append((time.perf_counter() - t0) * 1e6)
        _check_round(sides, written, f"case {case.name} round {r}")
    tb, tc = np.array(samples["base"]), np.array(samples["cand"])
    ratio = tb / tc
    base_us, cand_us = float(np.median(tb)), float(np.median(tc))
    timing = CaseTiming(
        name=case.name, method="interpreter_wall", copies=1, rounds=rounds, l2_cold=False,
        base_us=base_us, base_p20_us=float(np.percentile(tb, 20)), base_p80_us=float(np.percentile(tb, 80)),
        cand_us=cand_us, cand_p20_us=float(np.percentile(tc, 20)), cand_p80_us=float(np.percentile(tc, 80)),
        ratio=float(np.median(ratio)), ratio_ci=_median_ci(ratio, rng), bytes=moved,
        cand_gbps=moved / (cand_us * 1e-6) / 1e9, base_gbps=moved / (base_us * 1e-6) / 1e9, cand_bw_fraction=0.0)
    return timing, ratio


def time_cases(base_fn: Callable[..., Any], cand_fn: Callable[..., Any], harness: Any, cases: tuple[Case, ...],
               rounds: int, l2_bytes: int, copy_gbps: float | None, margin: float = 0.0, case_s: float = 0.2,
               seed: int = 12345, picks: tuple[Picks, Picks] | None = None) -> tuple[list[CaseTiming], dict]:
    """Time every case (each with its own interleaved rounds, at most ``rounds``, within about ``case_s`` seconds on
    the GPU); summarise with the geomean and its interval, and the rounds won by more than ``margin``.
    ``copy_gbps=None`` selects the interpreter's wall-clock timing, which always takes ``rounds``. Each side runs
    the configs its autotuners chose on the case (``picks``: base's and cand's; by default each tunes afresh)."""
    rng = np.random.default_rng(seed)
    results, ratios = [], []
    floor = max(MIN_ROUNDS, sign_rounds(len(cases)))
    base_picks, cand_picks = picks or (Picks(base_fn), Picks(cand_fn))
    for i, case in enumerate(cases):
        with base_picks.on(case.name), cand_picks.on(case.name):
            if copy_gbps is None:
                timing, ratio = time_case_wall(base_fn, cand_fn, harness, case, seed + i, rounds, rng)
            else:
                timing, ratio = time_case(base_fn, cand_fn, harness, case, seed + i, rounds, case_s, l2_bytes,
                                          copy_gbps, rng, floor)
        wins = int((np.asarray(ratio) > 1.0 + margin).sum())
        results.append(replace(timing, wins=wins, sign_p=sign_p(wins, len(ratio))))
        ratios.append(ratio)
    return results, summarize(ratios, margin, rng)


def summarize(ratios: list[np.ndarray], margin: float, rng: np.random.Generator) -> dict[str, Any]:
    """``ratios`` holds each case's per-round ratios baseline/candidate (cases may have different numbers of rounds):
    the geomean of the per-case medians with a joint bootstrap interval (cases resampled independently), and the
    rounds won by more than ``margin`` over all cases, with their sign test."""
    logs = [np.log(np.asarray(r, dtype=float)) for r in ratios]
    geo = float(np.exp(np.mean([np.median(x) for x in logs])))
    boot = np.exp(np.mean([np.median(x[rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))], axis=1) for x in logs],
                          axis=0))
    wins = sum(int((x > math.log1p(margin)).sum()) for x in logs)
    n = sum(len(x) for x in logs)
    return {"geomean": geo, "ci": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
            "rounds": n, "margin": margin, "wins": wins, "sign_p": sign_p(wins, n)}


def _sampled_ms(fn: Callable[[], Any], samples: int, warm: int = 3) -> list[float]:
    """``fn``'s GPU time in ms, one CUDA-event pair per call (``_elapsed_us``), after ``warm`` calls."""
    for _ in range(warm):
        fn()
    out = []
    for _ in range(samples):
        s, e = _elapsed_us(fn, 1)
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e))
    return out


def measure_copy_gbps(n_bytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written (median of 20)."""
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms = _sampled_ms(lambda: dst.copy_(src), 20)
    del src, dst
    torch.cuda.empty_cache()
    return float(np.median([2 * n_bytes / (t * 1e-3) / 1e9 for t in ms]))


def measure_dense_tflops(n: int = 8192) -> dict[int, float]:
    """The dense matmul rate of the tensor cores in TFLOP/s, by operand bits: fp8 (``torch._scaled_mm``), bf16, and
    fp32 as tf32 (what ``tl.dot`` makes of fp32 by default); the best of 10 ``n``-cubed products each. A width whose
    product this torch cannot run is left out."""
    def best(fn: Callable[[], Any]) -> float:
        return 2 * n**3 / (min(_sampled_ms(fn, 10)) * 1e-3) / 1e12

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    out = {16: best(lambda: a @ b)}
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        af, bf = a.float(), b.float()
        out[32] = best(lambda: af @ bf)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        out[8] = best(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    except (AttributeError, RuntimeError, TypeError):
        pass  # no fp8 product in this torch or on this GPU: fp8 dots get no compute roofline
    return out


def measure_launch_us(launches: int = 200) -> float:
    """What one launch of an empty Triton kernel costs inside a CUDA graph, in µs (median of 20 replays of
    ``launches``): the floor no kernel goes below, however little it does."""
    import triton

    @triton.jit
    def _empty(x_ptr):
        pass

    x = torch.empty(1, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        _empty[(1,)](x)  # compiled outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(launches):
            _empty[(1,)](x)
    return float(np.median(_sampled_ms(graph.replay, 20, warm=1))) * 1e3 / launches
