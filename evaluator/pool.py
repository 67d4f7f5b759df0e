"""The parent side of isolation: the asynchronous ``Evaluator`` API over worker processes (``process.py``).

A hang is killed with its worker's whole process group and becomes a ``timeout`` result; a death (segfault, abort, OOM
kill, illegal memory access) becomes a ``crash`` result with the tail of the log; in both cases the worker is
replaced. Healthy workers are reused, so torch is imported once. With a ``Cluster`` (``smithbot/cluster.py``) the
workers live on other machines; a worker whose machine is lost (its answer ``lost``) leaves the pool, and what it was
evaluating goes to another worker.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from evaluator import guard
from evaluator.errors import SmithbotError
from evaluator.process import WorkerProcess
from evaluator.result import EvalResult
from evaluator.task import Task, TaskError, load_task
from evaluator.verdict import changed_cases, sign_rounds, verdict

DEFAULT_ROUNDS = {"cuda": 30, "interpreter": 7}
# On the GPU, per effort: (rounds, as a multiple of the Evaluator's), seconds of timed samples per case. A screen only
# ranks a proposal against earlier screens; verification decides what is proposed upstream. The interpreter's wall
# clock predicts nothing on the GPU, so every effort takes its rounds as they are. A check (a task's self-check) runs
# the correctness stage only: its answer is ``correct`` with no speedup, since no round is timed.
EFFORT = {"check": (0.0, 0.0), "screen": (1 / 3, 0.05), "full": (1.0, 0.2), "verify": (2.0, 1.0)}
# A fusion task's verification on the GPU also times its PyTorch baseline under torch.compile in this mode: the bar a
# fusion has to clear, since a maintainer's first question is "why not just compile it"
COMPILE_MODE = "max-autotune-no-cudagraphs"
# A candidate may take this many times as long as the baseline did to compile (its first call on every case), and at
# least COMPILE_FLOOR_S. Beyond that it is stopped: a launch config that stalls an engine's warm-up that long is no
# proposal, and on a shared GPU its compile keeps the other candidates waiting.
COMPILE_FACTOR, COMPILE_FLOOR_S = 5.0, 10.0
# Workers that share a GPU each hold a case's inputs while they compile and check: as many are kept as the GPU's free
# memory holds at twice the baseline's peak, besides a margin and what a worker's CUDA context and kernels take.
WORKER_OVERHEAD_BYTES, MEMORY_MARGIN_BYTES = 1 << 30, 2 << 30


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)


def default_workers_per_gpu(gpus: int) -> int:
    """Workers per GPU when none is asked for: one per two CPU cores a GPU has (loading and compiling what was not
    compiled ahead is what they do in parallel, and it is CPU work), between 2 and 8. On a 16-core host with one GPU
    that is 8; the other 8 cores compile ahead."""
    return max(2, min(8, _cores() // (2 * max(gpus, 1))))


class BackendError(SmithbotError):
    """The requested backend cannot run here (e.g. ``cuda`` without a GPU)."""


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


BACKENDS = ("cuda", "interpreter", "auto")


def resolve_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r} (choose {', '.join(BACKENDS)})")
    if backend == "auto":
        return "cuda" if _cuda_count() else "interpreter"
    if backend == "cuda" and not _cuda_count():
        raise BackendError("--backend cuda needs a CUDA GPU, and none is visible; use --backend interpreter")
    return backend


def _changes_line(cases: list[dict[str, Any]], min_gain: float) -> str:
    """Which cases a candidate changes: ``faster by over 2% on 2 of 6 cases (a, b); unchanged on 4``."""
    named = changed_cases(cases, min_gain)
    faster = named["faster"]
    parts = [f"faster by over {min_gain:.0%} on {len(faster)} of {len(cases)} cases"
             + (f" ({', '.join(faster)})" if faster else "")]
    parts += [f"{v} on {len(named[v])}" + (f" ({', '.join(named[v])})" if v == "slower" else "")
              for v in ("unchanged", "slower") if named[v]]
    return "; ".join(parts)


def _local_workers(backend: str, per_gpu: int | None, devices: int | None) -> tuple[str, list[WorkerProcess], int]:
    """(the backend resolved, this host's workers, how many devices they spread over). Counting the GPUs imports torch
    (seconds): the first worker, which prepares first and makes a host-bound verdict, starts before that wherever a
    GPU's device node exists, and is dropped if no GPU is usable after all."""
    first = WorkerProcess("cuda", 0) if backend in ("auto", "cuda") and Path("/dev/nvidiactl").exists() else None
    if first is not None:
        first.start()
    try:
        backend = resolve_backend(backend)
    except BackendError:
        if first is not None:
            first.close()
        raise
    if first is not None and backend != "cuda":
        first.close()
        first = None
    gpus = _cuda_count() if backend == "cuda" else 0
    if gpus:
        gpus = min(gpus, devices or gpus)
        n = (per_gpu or default_workers_per_gpu(gpus)) * gpus
    else:  # the interpreter: one worker per stand-in device id
        n = gpus = devices or 1
    return backend, ([first] if first else []) + [WorkerProcess(backend, i % gpus)
                                                  for i in range(1 if first else 0, n)], gpus


class WorkerLost(Exception):
    """A worker's machine is gone (a cluster's node died): the evaluator drops it and gives its work to another."""

    def __init__(self, worker: Any, why: str) -> None:
        super().__init__(why)
        self.worker, self.why = worker, why


class Cluster(Protocol):
    """Workers on other machines (``smithbot/cluster.py``), each used as a ``WorkerProcess`` is (``start``,
    ``request``, ``running``, ``gpu``, ``close``); a worker whose machine is lost answers ``lost``, its ``detail``
    naming the machine."""

    def backend(self, asked: str) -> str:
        """``asked`` (cuda, interpreter or auto) resolved on the cluster's machines; BackendError if it cannot run."""
        ...

    def workers(self, backend: str, task_root: Path, per_gpu: int | None,
                devices: int | None) -> tuple[list[Any], int]:
        """(workers for the task at ``task_root``, how many devices they spread over)."""
        ...


class Evaluator:
    """Evaluate candidates for one task: ``submit(path)`` returns a Future of an :class:`EvalResult`.

    ``workers_per_gpu`` workers share each visible GPU on ``cuda`` (default: ``default_workers_per_gpu``): they load
    and compile candidates in parallel, and take the GPU in turns (a file lock) to check and time them, so no timing
    overlaps other GPU work. Candidates go to whichever worker is free, so to whichever GPU is, and one evaluation
    checks and times the baseline and the candidate on one GPU (its result's ``env["device"]``). ``devices`` caps the
    GPUs used (default: every visible one); on the interpreter it is how many stand-in device ids to run, one worker
    each (default 1): a multi-GPU host's scheduling, on a CPU. A ``cluster`` gives the workers instead (on its
    machines; ``smithbot/cluster.py``). With ``ahead`` (on this host's GPUs; ``SMITHBOT_COMPILE_AHEAD=1`` when not
    said), CPU workers, one per core the GPU workers leave, compile each candidate first (``ahead.py``): a GPU worker
    then loads the binaries from Triton's cache, and a candidate that does not compile never takes one. It is off by
    default: a MoE task's inputs, built on the CPU for every candidate, cost more than the compile they save. Every
    worker process starts (imports torch) as the Evaluator is made. The first use of a task in a worker prepares it
    (loads the baseline, checks it against the reference, checks that zeros fail) under ``prepare_timeout_s``; each
    candidate then gets ``timeout_s`` for compile plus run.
    """

    def __init__(self, task_dir: str | Path, backend: str = "auto", workers_per_gpu: int | None = None,
                 timeout_s: float = 300.0, prepare_timeout_s: float = 900.0, rounds: int | None = None,
                 min_gain: float = 0.02, compile_mode: str = COMPILE_MODE, ahead: bool | None = None,
                 devices: int | None = None, cluster: Cluster | None = None) -> None:
        self.task: Task = load_task(task_dir)
        self.compile_mode = compile_mode
        if devices is not None and devices < 1:
            raise BackendError(f"devices must be at least 1, got {devices}")
        if cluster is None:
            self.backend, self._workers, self.devices = _local_workers(backend, workers_per_gpu, devices)
        else:
            self.backend = cluster.backend(backend)
            self._workers, self.devices = cluster.workers(self.backend, self.task.root, workers_per_gpu, devices)
        n = len(self._workers)
        rounds = rounds or DEFAULT_ROUNDS[self.backend]
        self.baseline_src = self.task.kernel_path.read_text(encoding="utf-8")
        self.timeout_s, self.prepare_timeout_s = timeout_s, prepare_timeout_s
        self.rounds, self.min_gain = rounds, min_gain
        self._idle: queue.Queue[WorkerProcess] = queue.Queue()
        # on the GPU, CPU workers that compile each candidate ahead (ahead.py): one per core the GPU workers leave
        self._ahead: list[WorkerProcess] = []
        if ahead is None:  # off unless SMITHBOT_COMPILE_AHEAD=1: on MoE tasks it is slower for now (RESULTS.md)
            ahead = os.environ.get("SMITHBOT_COMPILE_AHEAD", "0") == "1"
        if self.backend == "cuda" and ahead and cluster is None:
            from evaluator.ahead import target_of_gpu

            target = target_of_gpu()
            self._ahead = [WorkerProcess("ahead", None, target) for _ in range(max(1, _cores() - n))]
        self._ahead_idle: queue.Queue[WorkerProcess] = queue.Queue()
        self._prepared: set[int] = set()
        self.lost: list[str] = []  # the workers lost with their machines, a line each
        self.kernels: tuple[str, ...] = ()  # filled by prepare()
        self.host: list[dict[str, Any]] = []  # filled by prepare() on cuda: see ``timing.host_probe``
        self.prepare_s: dict[str, float] = {}  # the first preparation's phases, in seconds: see ``worker._Prepared``
        self.memory: dict[str, int] = {}  # on cuda, from the first complete preparation: peak, free and total bytes
        self._fitted = False
        self._prepare_lock = threading.Lock()
        for w in self._workers:
            w.start()
            self._idle.put(w)
        for w in self._ahead:
            w.start()
            self._ahead_idle.put(w)
        self._pool = ThreadPoolExecutor(max_workers=n + len(self._ahead), thread_name_prefix="evaluator")

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for w in self._workers + self._ahead:
            w.close()

    def prepare(self, deadline: float | None = None, every_worker: bool = False, host_first: bool = False) -> list[str]:
        """Prepare the task in one worker (with ``every_worker``, then in all the others at once, so that no worker's
        warm-up runs beside another's timing later); raise TaskError if the task itself is broken (or not prepared by
        ``deadline``, a ``time.monotonic()`` instant). With ``host_first`` on the GPU, that worker probes the
        baseline's host work first, and a host-bound verdict (``host_bound``) ends the preparation there. The first
        preparation also sets how many workers the GPU's memory holds (``_fit``). Returns the task's warnings."""
        def left() -> float:
            return float("inf") if deadline is None else deadline - time.monotonic()

        with self._prepare_lock:
            while True:
                first = not self._fitted
                workers = [self._take() for _ in range(len(self._workers) if every_worker or first else 1)]
                try:
                    if host_first and self.backend == "cuda":
                        if not self.host:
                            self._prepare(workers[0], left(), host_first=True)
                        if self.host_bound:
                            return []
                    warnings = self._prepare(workers[0], left())
                    if first:
                        workers = self._fit(workers)
                        self._fitted = True
                    rest = workers[1:] if every_worker else []
                    if rest:
                        with ThreadPoolExecutor(max_workers=len(rest)) as pool:
                            for f in [pool.submit(self._prepare, w, left()) for w in rest]:
                                f.result()
                    return warnings
                except WorkerLost as exc:  # its machine is gone: prepare on the others
                    self._drop(exc)
                finally:
                    for w in workers:
                        if w in self._workers:
                            self._idle.put(w)

    def _take(self) -> WorkerProcess:
        """The next free worker; BackendError once none is left (every machine that held one was lost)."""
        while True:
            if not self._workers:
                raise BackendError("no evaluation worker is left: every machine that held one was lost"
                                   + (f" (the last: {self.lost[-1]})" if self.lost else ""))
            try:
                return self._idle.get(timeout=1.0)
            except queue.Empty:
                continue

    def _on_a_worker(self, fn: Callable[[WorkerProcess], Any]) -> Any:
        """``fn`` run with a free worker; where that worker's machine is lost, again with another."""
        while True:
            w = self._take()
            try:
                return fn(w)
            except WorkerLost as exc:
                self._drop(exc)
            finally:
                if w in self._workers:
                    self._idle.put(w)

    def _ask(self, w: WorkerProcess, req: dict[str, Any], timeout_s: float,
             compile_s: float | None = None) -> dict[str, Any]:
        """One request's answer; WorkerLost where the worker's machine is gone."""
        ans = w.request(req, timeout_s, compile_s)
        if ans["status"] == "lost":
            raise WorkerLost(w, ans.get("detail", "lost"))
        if not w.running:  # killed or died: the replacement must prepare the task again
            self._prepared.discard(id(w))
        return ans

    def _drop(self, lost: WorkerLost) -> None:
        """A worker whose machine was lost leaves the pool for good."""
        w = lost.worker
        if w in self._workers:
            self._workers.remove(w)
            self.lost.append(lost.why)
        self._prepared.discard(id(w))
        w.close()

    def _fit(self, workers: list[WorkerProcess]) -> list[WorkerProcess]:
        """Keep as many workers on each GPU as its free memory holds at twice the prepared worker's peak (one at a time
        also timing with up to ``COPY_CAP_BYTES`` of input copies); close the others. ``workers`` is every worker, the
        prepared one first."""
        from evaluator.timing import COPY_CAP_BYTES

        mem = self.memory
        if self.backend != "cuda" or not mem or len(workers) == 1:
            return workers
        each = 2 * mem["peak"] + WORKER_OVERHEAD_BYTES  # an evaluation holds both sides' outputs and input clones
        fits = max(1, int((mem["free"] - COPY_CAP_BYTES - MEMORY_MARGIN_BYTES) // each))  # per GPU, like them all
        per_gpu: dict[int | None, int] = {}
        keep, drop = [], []
        for w in workers:
            per_gpu[w.gpu] = per_gpu.get(w.gpu, 0) + 1
            (keep if per_gpu[w.gpu] <= fits else drop).append(w)
        for w in drop:
            self._workers.remove(w)
            w.close()
        return keep

    @property
    def host_bound(self) -> str:
        """Why no launch config can speed this task up on the GPU (its calls cannot be captured and the GPU idles
        through most of each), or ``""``; known once the task is prepared."""
        from evaluator.timing import host_bound

        return host_bound(self.host)

    @property
    def capture_failures(self) -> list[str]:
        """Where the baseline's calls could not be captured as a CUDA graph, per probed case: a host sync on the
        decode path is a finding in itself."""
        return [f"{h['case']}: {h['capture_error']}" for h in self.host if not h["captured"]]

    def _prepare(self, w: WorkerProcess, limit: float = float("inf"), host_first: bool = False) -> list[str]:
        if id(w) in self._prepared and w.running:
            return []
        # one probe of the baseline's host work per evaluator: it holds the GPU, and every worker would find the same
        ans = self._ask(w, {"op": "prepare", "task": str(self.task.root), "host_first": host_first,
                            "probe": not self.host}, min(self.prepare_timeout_s, limit))
        if ans["status"] != "ok":
            raise TaskError(ans.get("detail", "preparing the task failed").splitlines()[0], ans.get("cause", ""),
                            ans.get("out_of_bounds"))
        if ans.get("complete", True):
            self._prepared.add(id(w))
        self.kernels = tuple(ans.get("kernels", ()))  # the Triton kernels the baseline launched on the cases
        self.host = self.host or list(ans.get("host", ()))
        for phase, seconds in ans.get("elapsed_s", {}).items():
            self.prepare_s.setdefault(phase, seconds)
        if ans.get("memory") and not self.memory:
            self.memory = dict(ans["memory"])
        return list(ans.get("warnings", []))

    @property
    def compile_limit_s(self) -> float | None:
        """How long a candidate may compile (its first call on every case), once the baseline's compile time is known
        (on the GPU only: the interpreter compiles nothing)."""
        base = self.prepare_s.get("compile")
        if self.backend != "cuda" or base is None:
            return None
        return max(COMPILE_FLOOR_S, COMPILE_FACTOR * base)

    @property
    def capacity(self) -> int:
        """How many candidates can be evaluated at once: one per worker, those compiling ahead included."""
        return len(self._workers) + len(self._ahead)

    @property
    def case_names(self) -> list[str]:
        return [c.name for c in self.task.cases_for(self.backend)]

    def submit(self, candidate: str | Path, cases: list[str] | None = None, deadline: float | None = None,
               effort: str = "full") -> Future[EvalResult]:
        """Evaluate one candidate file, on the named cases only when ``cases`` is given (default: all), timed with the
        ``effort`` of ``EFFORT``. With ``deadline`` (a ``time.monotonic()`` instant: where a search's time budget
        ends), an evaluation still waiting for a worker then is not started, and one still running then is stopped;
        both come back ``cancelled``. The first submit of an Evaluator not yet prepared prepares it first, in the
        caller's thread, since that decides how many workers the GPU's memory holds."""
        if effort not in EFFORT:
            raise BackendError(f"unknown effort {effort!r} (choose {', '.join(EFFORT)})")
        path = Path(candidate).resolve()
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fut: Future[EvalResult] = Future()
            fut.set_result(self._result(path, "rejected", "guard", "unreadable", str(exc)))
            return fut
        g = guard.check(self.baseline_src, source, self.task.entry)
        if not g.ok:
            fut = Future()
            fut.set_result(self._result(path, "rejected", "guard", g.reason, g.detail))
            return fut
        if not self._fitted:  # the first preparation decides how many workers fit, before any runs in parallel
            try:
                self.prepare(deadline)
            except TaskError as exc:
                fut = Future()
                if deadline is not None and deadline <= time.monotonic():
                    fut.set_result(self._result(path, "cancelled", "prepare", "time budget",
                                                "the time budget ended while the task was prepared"))
                else:
                    fut.set_exception(exc)
                return fut
        return self._pool.submit(self._run, path, cases, deadline, effort)

    def time_baseline(self, cases: list[str] | None = None, effort: str = "screen") -> list[dict[str, Any]]:
        """The baseline alone, timed against itself on ``cases`` (default: all) with the timing of ``effort``: one
        ``CaseTiming`` dict per case (``base_us``, ``bytes``, ``cand_bw_fraction`` of the copy bandwidth), with the
        ``tl.dot`` work (``flops`` by operand bits, ``flop_fraction`` of the measured dense rate) and, on the GPU,
        ``launch_us``, an empty launch's cost. What a step spends in the task's code before any candidate; a fusion
        task's torch baseline too. Raises TaskError when it cannot run."""
        self.prepare()
        rounds, case_s = self.timing_plan(effort)

        def on(w: WorkerProcess) -> dict[str, Any]:
            self._prepare(w)
            return self._ask(w, {"op": "baseline", "task": str(self.task.root), "cases": cases, "rounds": rounds,
                                 "case_s": case_s}, self.timeout_s)

        ans = self._on_a_worker(on)
        if ans["status"] != "measured":
            raise TaskError(f"the baseline could not be timed: {ans['status']}: {ans.get('detail', '')}".strip())
        return list(ans["cases"])

    def evaluate(self, candidates: list[str | Path]) -> list[EvalResult]:
        return [f.result() for f in [self.submit(c) for c in candidates]]

    def _result(self, path: Path, status: str, stage: str, reason: str = "", detail: str = "", **kw: Any) -> EvalResult:
        return EvalResult(candidate=str(path), task=self.task.id, backend=self.backend, status=status, stage=stage,
                          reason=reason, detail=detail, **kw)

    def timing_plan(self, effort: str) -> tuple[int, float]:
        """(rounds at most, seconds of timed samples per case) for an evaluation of this ``effort``."""
        share, case_s = EFFORT[effort]
        if effort == "check":
            return 0, 0.0
        if self.backend != "interpreter":
            return max(1, round(self.rounds * share)), case_s
        # the interpreter takes its rounds as they are, but verification enough for a case's sign test to pass
        return (max(self.rounds, sign_rounds(len(self.case_names))) if effort == "verify" else self.rounds), case_s

    def _compile_ahead(self, path: Path, cases: list[str] | None, left: Any) -> tuple[dict[str, float],
                                                                                   EvalResult | None]:
        """({"ahead": seconds} where a CPU worker compiled the candidate, the result where its compile failed): on
        the GPU, before a GPU worker is taken, so that one only loads the binaries, checks and times. Anything else
        (a launcher the CPU cannot run, a timeout) leaves the compile to the GPU worker, as without it."""
        if not self._ahead or left() <= 0:
            return {}, None
        a = self._ahead_idle.get()
        try:
            t0 = time.perf_counter()
            # twice what the GPU worker may take to compile: beyond, the GPU worker compiles it (and may stop it)
            limit = min(self.timeout_s, left(), 2 * (self.compile_limit_s or self.timeout_s))
            ans = a.request({"op": "compile", "task": str(self.task.root), "candidate": str(path), "cases": cases},
                            limit)
        finally:
            self._ahead_idle.put(a)
        took = {"ahead": time.perf_counter() - t0}
        if ans["status"] == "compile_error":
            return took, self._result(path, "compile_error", "compile", ans.get("reason", ""), ans["detail"],
                                      env=ans.get("env", {}), elapsed_s={**took, "total": took["ahead"]})
        return (took if ans["status"] == "compiled" else {}), None

    def _run(self, path: Path, cases: list[str] | None, deadline: float | None, effort: str) -> EvalResult:
        def left() -> float:
            return float("inf") if deadline is None else deadline - time.monotonic()

        ahead_s, early = self._compile_ahead(path, cases, left)
        if early is not None:
            return early
        return self._on_a_worker(lambda w: self._run_on(w, path, cases, left, effort, ahead_s))

    def _run_on(self, w: WorkerProcess, path: Path, cases: list[str] | None, left: Callable[[], float], effort: str,
                ahead_s: dict[str, float]) -> EvalResult:
        if left() <= 0:
            return self._result(path, "cancelled", "queue", "time budget",
                                "the time budget ended before a worker was free")
        try:
            warnings = self._prepare(w, left())
        except TaskError:
            if left() > 0:
                raise
            return self._result(path, "cancelled", "prepare", "time budget",
                                "the time budget ended while this worker prepared the task")
        t0 = time.perf_counter()
        limit = min(self.timeout_s, left())
        rounds, case_s = self.timing_plan(effort)
        bar = self.compile_mode if effort == "verify" and self.task.kind == "fusion" and self.backend == "cuda" \
            else None
        ans = self._ask(w, {"op": "eval", "task": str(self.task.root), "candidate": str(path), "rounds": rounds,
                            "case_s": case_s, "margin": self.min_gain, "cases": cases, "compile": bar}, limit,
                        self.compile_limit_s)
        if ans["status"] == "timeout" and ans.get("stage") != "compile" and limit < self.timeout_s:
            # stopped by the budget, not by its own timeout
            return self._result(path, "cancelled", "eval", "time budget",
                                f"stopped after {time.perf_counter() - t0:.1f} s: the time budget ended")
        common = {"task_warnings": tuple(ans.get("warnings", warnings)), "env": ans.get("env", {}),
                  "baseline_kernels": tuple(ans.get("kernels", ())),
                  "elapsed_s": {**ans.get("elapsed_s", {}), **ahead_s, "total": time.perf_counter() - t0},
                  "log_tail": ans.get("log", "")[-3000:], "out_of_bounds": ans.get("out_of_bounds") or {}}
        status = ans["status"]
        if status == "checked":  # the correctness stage passed, and nothing was timed
            return self._result(path, "correct", "correctness", "", "correct on every case; not timed", **common)
        if status in ("timeout", "crash"):
            return self._result(path, status, ans.get("stage", "compile"), status, ans["detail"], **common)
        if status == "task_error":
            raise TaskError(ans["detail"], ans.get("cause", ""), ans.get("out_of_bounds"))
        if status != "measured":
            return self._result(path, status, ans.get("stage", ""), ans.get("reason", ""), ans.get("detail", ""),
                                **common)
        final, flags = verdict(ans, self.min_gain, self.backend == "interpreter")
        s = ans["summary"]
        return self._result(path, final, "verdict", "", _changes_line(ans["cases"], self.min_gain),
                            speedup=s["geomean"], speedup_ci=tuple(s["ci"]),
                            cases=tuple(ans["cases"]), flags=flags,
                            timing_method=",".join(sorted({c["method"] for c in ans["cases"]})),
                            compiled=ans.get("compiled") or {}, **common)
