"""The worker child: ``python -m evaluator.worker RESULT_FD BACKEND``.

It reads one JSON request per line on stdin and writes one JSON answer per line to RESULT_FD, so nothing a candidate
prints can forge an answer. It keeps torch, triton, the loaded baselines and the task checks between requests. The
parent (``pool.py``) enforces the timeouts, kills it on a hang and replaces it after a crash.

Requests: ``{"op": "prepare", "task": DIR, "host_first": bool, "probe": bool}``, ``{"op": "baseline", "task": DIR,
"cases": [NAME...] or null, "rounds": N, "case_s": S}`` (the baseline timed against itself) and ``{"op": "eval", "task": DIR,
"candidate": FILE, "rounds": N, "case_s": S, "margin": M, "cases": [NAME...] or null}`` (null: every case the
backend runs; at most N timed rounds per case, within about S seconds of samples on the GPU; a round is won above
1 + M; N = 0 checks correctness only and answers ``checked``). ``host_first`` probes the baseline's host work and
stops there; ``probe`` false skips the probe (another worker made it). Before an evaluation's answer comes
``{"progress": "compiled"}``, once the candidate has compiled, so that the parent can hold compiling to a limit of
its own. An ``ahead`` worker (no GPU) answers ``{"op": "compile", "task": DIR, "candidate": FILE, "cases": [NAME...] or
null}``: the candidate's kernels built for the GPU, into Triton's cache (``ahead.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
import traceback
from typing import Any, Iterator

_T0 = time.perf_counter()  # before torch's import: the worker's own start is part of what a task's preparation costs

import torch  # noqa: E402

from evaluator import correctness  # noqa: E402
from evaluator.env import copy_bandwidth_gbps, dense_tflops, fingerprint, launch_us
from evaluator import ahead, bounds, flops, standin  # noqa: E402
from evaluator.runtime import (LaunchCounter, Picks, clone_args, forget_autotuning, load_module,  # noqa: E402
                               untimed_autotuning)
from evaluator.task import Case, Task, TaskError, load_task  # noqa: E402


class _Prepared:
    def __init__(self, task: Task, backend: str, host_first: bool = False, probe: bool = True) -> None:
        """Load the task, compile the baseline on every case, validate it and (with ``probe``, on the GPU) probe its
        host work. With ``host_first`` (a search about to start), only the probe is done (``complete`` is False;
        ``finish`` does the rest): a host-bound verdict means nothing will be searched, so nothing else is worth
        compiling yet."""
        t0 = time.perf_counter()
        self.task = task
        self.interpreter = backend == "interpreter"
        self.device = "cpu" if self.interpreter else "cuda"
        self.cases = task.cases_for(backend)
        self.harness = load_module(task.harness_path, "harness", self.interpreter)
        self.base = getattr(load_module(task.kernel_path, "baseline", self.interpreter), task.entry)
        self.picks = Picks(self.base)  # the baseline's autotuned configs, case by case, kept between evaluations
        self.elapsed_s = {"load": time.perf_counter() - t0}  # phases of the preparation, for the throughput benchmark
        self.host: list[dict[str, Any]] = []
        self.kernels: list[str] = []
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.complete = False
        self.peak_bytes = 0  # the GPU memory the baseline's preparation reserved at most (finish() measures it)
        probe = probe and not self.interpreter
        if host_first and probe:
            t0 = time.perf_counter()
            self.host = self._probe_host()
            self.elapsed_s["probe"] = time.perf_counter() - t0
            return
        self.finish(probe)

    def finish(self, probe: bool) -> None:
        """Compile the baseline on every case, validate it, and probe its host work unless that is done or not
        wanted."""
        t0 = time.perf_counter()
        if not self.interpreter:
            torch.cuda.reset_peak_memory_stats()
        LaunchCounter.names.clear()
        with untimed_autotuning():  # outside the GPU lock: autotuners pick when checked and timed, under it
            for i, case in enumerate(self.cases):  # warm-up: compiles every baseline variant
                correctness.warm_call(self.base, self.harness, case, correctness.seed_for(i, 0), self.device)
            self.kernels = sorted(LaunchCounter.names)  # the Triton kernels the baseline launches on these cases
            t1 = time.perf_counter()
            self.errors, self.warnings = correctness.validate_task(self.task, self.base, self.harness, self.cases,
                                                                   self.device)
        forget_autotuning(self.base)
        t2 = time.perf_counter()
        self.elapsed_s.update(compile=t1 - t0, validate=t2 - t1)
        self.peak_bytes = 0 if self.interpreter else torch.cuda.max_memory_reserved()
        if probe and not self.interpreter and not self.errors and not self.host:
            self.host = self._probe_host()
            self.elapsed_s["probe"] = time.perf_counter() - t2
        self.complete = True

    def _probe_host(self) -> list[dict[str, Any]]:
        """Capture and, where capture fails, the GPU's share of each call, on the first case of each regime (decode
        calls are where host work shows), with the GPU to itself."""
        from evaluator.timing import host_probe

        firsts = {}
        for i, case in enumerate(self.cases):
            firsts.setdefault(case.regime, (i, case))
        with gpu_lock():
            return [host_probe(self.base, self.harness, case, correctness.seed_for(i, 0))
                    for i, case in firsts.values()]

    def select(self, names: list[str] | None) -> tuple[Case, ...]:
        """The cases named (all when None), in task order; an unknown name is the caller's bug."""
        if names is None:
            return self.cases
        unknown = set(names) - {c.name for c in self.cases}
        if unknown:
            raise TaskError(f"unknown case(s) for this backend: {', '.join(sorted(unknown))}")
        return tuple(c for c in self.cases if c.name in names)


def _describe(exc: BaseException) -> str:
    """`Type: message`; a bare `assert` names its failing line instead of an empty message."""
    text = str(exc)
    if not text.strip():
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            last = frames[-1]
            text = f"{os.path.basename(last.filename)}:{last.lineno}: {(last.line or '').strip()}"
    if "out of memory" in text:  # torch's: what was asked and what the card has, without its allocator advice
        text = text.split(" Of the allocated memory")[0].split(" Including non-PyTorch memory")[0]
    return f"{type(exc).__name__}: {text}"


def _last_line(exc: BaseException) -> str:
    """The last line of an exception's description: why a hint could not be had."""
    return _describe(exc).strip().splitlines()[-1][:300]


def _classify(exc: BaseException) -> tuple[str, bool]:
    """(status, fatal): fatal errors leave the CUDA context unusable, so the worker must be replaced."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in text or "can't allocate memory" in text:
        return "oom", False
    if isinstance(exc, MemoryError):
        return "oom", False
    if "CUDA error" in text or "illegal memory access" in text or "device-side assert" in text:
        return "crash", True
    if bounds.OUT_OF_BOUNDS in text:  # the interpreter's illegal memory access, caught before it happens
        return "crash", False
    module = type(exc).__module__ or ""
    if module.startswith("triton") and ("Compil" in type(exc).__name__ or "compiler" in module):
        return "compile_error", False
    return "runtime_error", False


@contextlib.contextmanager
def gpu_lock() -> Iterator[None]:
    """Exclusive use of this worker's GPU while it checks and times, shared with the other workers on the same GPU
    (named by SMITHBOT_GPU_LOCK). Loading and compiling a candidate happen outside the lock, in parallel."""
    path = os.environ.get("SMITHBOT_GPU_LOCK")
    if not path:
        yield
        return
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class Worker:
    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.tasks: dict[str, _Prepared] = {}
        self.env = fingerprint(backend)
        self.copy_gbps: float | None = None
        if backend == "ahead":  # a CPU worker that only compiles (``ahead.py``)
            ahead.install(os.environ["SMITHBOT_AHEAD_TARGET"])
            self.ahead: dict[str, tuple[Task, Any, ahead.Inputs]] = {}
        else:
            LaunchCounter.install()
        if backend == "interpreter":
            standin.install()
            bounds.install()
        self.started_s = time.perf_counter() - _T0
        self.emit: Any = lambda note: None  # a note to the parent ahead of the answer (main() writes it)

    def prepare(self, task_dir: str, host_first: bool = False, probe: bool = True) -> _Prepared:
        key = os.path.realpath(task_dir)
        prep = self.tasks.get(key)
        if prep is None:
            prep = _Prepared(load_task(task_dir), self.backend, host_first, probe)
            self.tasks[key] = prep
        elif not (prep.complete or host_first):  # probed first: the modules it loaded serve the rest
            prep.finish(probe)
        return prep

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        """One request's answer; a failed one carries what a kernel read past, where one did (``out_of_bounds``)."""
        bounds.last = None
        ans = self._handle(req)
        if bounds.last is not None and ans.get("status") not in ("ok", "checked", "measured"):
            ans["out_of_bounds"] = dict(bounds.last)
        return ans

    def _handle(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] == "compile":
            return self.compile_ahead(req)
        try:
            first = req["op"] == "prepare"
            prep = self.prepare(req["task"], first and bool(req.get("host_first")), not first or req.get("probe", True))
        except TaskError as exc:
            return {"status": "task_error", "detail": str(exc)}
        except Exception as exc:
            status, fatal = _classify(exc)
            # (the cause first and no path: the caller knows which task it asked for)
            detail = f"preparing the baseline failed: {_describe(exc)}"
            if status == "oom":
                detail = f"a shape case's inputs do not fit in memory: {exc}".splitlines()[0]
            return {"status": "task_error", "detail": detail, "cause": status, "fatal": fatal,
                    "log": traceback.format_exc()}
        if prep.errors:
            return {"status": "task_error", "detail": prep.errors[0], "warnings": prep.warnings}
        if req["op"] == "prepare":
            memory = {}
            if prep.complete and not prep.interpreter:  # how many workers the GPU holds at this task's peak
                torch.cuda.empty_cache()
                free, total = torch.cuda.mem_get_info()
                memory = {"peak": prep.peak_bytes, "free": free, "total": total}
            return {"status": "ok", "warnings": prep.warnings, "env": self.env, "kernels": prep.kernels,
                    "host": prep.host, "complete": prep.complete, "memory": memory,
                    "elapsed_s": {"start": self.started_s, **prep.elapsed_s}}
        if req["op"] == "baseline":
            return self.time_baseline(prep, req)
        return self.evaluate(prep, req)

    def compile_ahead(self, req: dict[str, Any]) -> dict[str, Any]:
        """``{"op": "compile", "task": DIR, "candidate": FILE, "cases": [NAME...] or null}`` on an ``ahead`` worker:
        the candidate's entry called on each of the GPU's cases, its launches compiled into Triton's cache and not run
        (``ahead.install``). The answer: ``compiled`` (with the seconds it took), ``compile_error`` (Triton's), or
        ``skipped`` with why (the GPU worker compiles it then)."""
        key = os.path.realpath(req["task"])
        try:
            if key not in self.ahead:
                task = load_task(key)
                self.ahead[key] = (task, load_module(task.harness_path, "harness", False), ahead.Inputs())
            task, harness, inputs = self.ahead[key]
            names = req.get("cases")
            cases = [(i, c) for i, c in enumerate(task.cases_for("cuda")) if names is None or c.name in names]
            entry = getattr(load_module(req["candidate"], "candidate", False), task.entry)
        except Exception as exc:  # the GPU worker meets the same, and says it as it always has
            return {"status": "skipped", "detail": _describe(exc).strip()[:300]}
        t0 = time.perf_counter()
        for i, case in cases:
            try:
                entry(**inputs.of(harness, case, correctness.seed_for(i, 0)))
            except Exception as exc:  # Triton's compile error is the verdict; the rest is left to the GPU worker
                if _classify(exc)[0] == "compile_error":
                    return {"status": "compile_error", "reason": type(exc).__name__,
                            "detail": _describe(exc).strip()[:2000]}
                return {"status": "skipped", "detail": f"case {case.name}: {_describe(exc).strip()[:300]}"}
        return {"status": "compiled", "elapsed_s": time.perf_counter() - t0}

    def time_baseline(self, prep: _Prepared, req: dict[str, Any]) -> dict[str, Any]:
        """The baseline timed against itself on the named cases: what one call costs, and the bytes it moves per
        second (``cand_bw_fraction``: of the copy bandwidth), with what ``_looked_into`` adds (the ``tl.dot`` work,
        an empty launch's cost, each kernel's own time). What a step spends in it, before anything is searched."""
        from evaluator.timing import time_cases

        try:
            cases = prep.select(req.get("cases"))
            with gpu_lock():
                if self.copy_gbps is None and not prep.interpreter:
                    self.copy_gbps = copy_bandwidth_gbps(self.env)
                timings, _ = time_cases(prep.base, prep.base, prep.harness, cases, int(req.get("rounds", 10)),
                                        int(self.env.get("l2_bytes") or 50 << 20), self.copy_gbps, 0.0,
                                        float(req.get("case_s", 0.05)))
                rows = self._looked_into(prep, cases, timings)
        except TaskError as exc:
            return {"status": "task_error", "detail": str(exc)}
        except Exception as exc:
            status, fatal = _classify(exc)
            return {"status": status, "detail": _describe(exc).strip()[:2000], "fatal": fatal,
                    "log": traceback.format_exc()[-4000:]}
        return {"status": "measured", "cases": rows, "env": self.env, "copy_gbps": self.copy_gbps}

    def _looked_into(self, prep: _Prepared, cases: tuple[Case, ...], timings: list[Any]) -> list[dict[str, Any]]:
        """Each timed case's row, with its ``tl.dot`` work (``flops``, and on the GPU ``flop_fraction`` of the
        measured dense rate) and, on the GPU, an empty launch's cost (``launch_us``) and each Triton kernel's own
        time in the call (``kernel_us``). Both are hints: where one cannot be had, ``flops_error`` or
        ``kernel_us_error`` says why and the call's own timing stands."""
        from evaluator.timing import kernel_times

        floor = {} if prep.interpreter else {"launch_us": launch_us(self.env)}
        rows = []
        with contextlib.ExitStack() as stack:
            try:
                counted = stack.enter_context(flops.counting(prep.task.kernel_path, prep.task.entry,
                                                             prep.interpreter))
                load_error = ""
            except Exception as exc:  # the rewrite broke the module: times stand, work is not known
                counted, load_error = None, _last_line(exc)
            for i, (case, t) in enumerate(zip(cases, timings)):
                args = correctness.make_args(prep.harness, case, correctness.seed_for(i, 0), prep.device)
                row = {**t.as_dict(), **floor, **({"flops_error": load_error} if load_error else {})}
                if counted is not None:
                    try:
                        work = flops.count(counted, args, prep.device)
                        row.update(flops=work, flop_fraction=self._dense_share(work, t.base_us, prep.interpreter))
                    except Exception as exc:
                        row["flops_error"] = _last_line(exc)
                if not prep.interpreter:
                    try:
                        row["kernel_us"] = kernel_times(prep.base, args, t.base_us)
                    except Exception as exc:
                        row["kernel_us_error"] = _last_line(exc)
                rows.append(row)
                del args
        return rows

    def _dense_share(self, work: dict[int, int], us: float, interpreter: bool) -> float | None:
        """The share of the measured dense matmul rate that ``work`` done in ``us`` reaches (None under the
        interpreter, or for a width with no measured rate)."""
        if interpreter or not work:
            return None
        peak = dense_tflops(self.env)
        if not all(bits in peak for bits in work):
            return None
        return sum(n / (peak[bits] * 1e12) for bits, n in work.items()) / (us * 1e-6)

    def evaluate(self, prep: _Prepared, req: dict[str, Any]) -> dict[str, Any]:
        try:
            cases = prep.select(req.get("cases"))
        except TaskError as exc:
            return {"status": "task_error", "detail": str(exc)}
        out: dict[str, Any] = {"warnings": prep.warnings, "env": self.env, "elapsed_s": {}, "stage": "compile",
                               "kernels": prep.kernels}
        t0 = time.perf_counter()
        try:
            cand = getattr(load_module(req["candidate"], "candidate", prep.interpreter), prep.task.entry)
            with untimed_autotuning():  # compile every variant (each config once) before checking anything
                for i, case in enumerate(cases):
                    correctness.warm_call(cand, prep.harness, case, correctness.seed_for(i, 0), prep.device)
            forget_autotuning(cand)
            if prep.device == "cuda":
                torch.cuda.synchronize()
            out["elapsed_s"]["compile"] = time.perf_counter() - t0
            self.emit({"progress": "compiled"})
            with gpu_lock():
                out = self._check_and_time(prep, cand, cases, int(req.get("rounds", 30)),
                                           float(req.get("case_s", 0.2)), float(req.get("margin", 0.0)), out)
                if out.get("status") == "measured" and req.get("compile") and not prep.interpreter:
                    out["compiled"] = self._compiled_bar(prep, cases, str(req["compile"]), int(req.get("rounds", 30)),
                                                         float(req.get("case_s", 0.2)))
                return out
        except Exception as exc:
            status, fatal = _classify(exc)
            out.update(status=status, reason=status if status in ("oom", "crash") else type(exc).__name__,
                       detail=_describe(exc).strip()[:2000], fatal=fatal,
                       log=traceback.format_exc()[-4000:])
            return out
        finally:
            if prep.device == "cuda":  # up to 8 workers share a GPU: an idle one holds no cached inputs
                with contextlib.suppress(Exception):
                    torch.cuda.empty_cache()

    def _check_and_time(self, prep: _Prepared, cand: Any, cases: tuple[Case, ...], rounds: int, case_s: float,
                        margin: float, out: dict[str, Any]) -> dict[str, Any]:
        t1 = time.perf_counter()
        out["stage"] = "correctness"
        picks = (prep.picks, Picks(cand))  # each side tunes on a case once, and times the configs it was checked on
        for i, case in enumerate(cases):
            with picks[0].on(case.name), picks[1].on(case.name):
                failure = correctness.check_case(prep.task, prep.base, cand, prep.harness, case, i, prep.device)
            if failure is not None:
                out.update(status="incorrect", reason=failure.reason, detail=failure.detail)
                out["elapsed_s"]["correctness"] = time.perf_counter() - t1
                return out
        out["elapsed_s"]["correctness"] = time.perf_counter() - t1
        if rounds <= 0:
            out.update(status="checked")
            return out
        from evaluator.timing import TimedOutputMismatch, time_cases

        t2 = time.perf_counter()
        out["stage"] = "timing"
        if self.copy_gbps is None and not prep.interpreter:
            self.copy_gbps = copy_bandwidth_gbps(self.env)
        try:
            timings, summary = time_cases(prep.base, cand, prep.harness, cases, rounds,
                                          int(self.env.get("l2_bytes") or 50 << 20), self.copy_gbps, margin, case_s,
                                          picks=picks)
        except TimedOutputMismatch as exc:
            out.update(status="incorrect", reason="timed_output_mismatch", detail=str(exc))
            return out
        finally:
            out["elapsed_s"]["timing"] = time.perf_counter() - t2
        rows = [t.as_dict() for t in timings]
        if prep.task.kind == "fusion":  # what a fusion saves: [baseline, candidate] kernel launches a call, per case
            for i, (case, row) in enumerate(zip(cases, rows)):
                args = correctness.make_args(prep.harness, case, correctness.seed_for(i, 0), prep.device)
                row["launches"] = [correctness.launches(fn, clone_args(args), prep.device) for fn in (prep.base, cand)]
        out.update(status="measured", cases=rows, summary=summary, copy_gbps=self.copy_gbps)
        return out

    def _compiled_bar(self, prep: _Prepared, cases: tuple[Case, ...], mode: str, rounds: int, case_s: float
                      ) -> dict[str, Any]:
        """The baseline under ``torch.compile(mode=mode)`` timed against itself eager, case by case: what a fusion
        has to beat. A compile failure is reported, not raised: the candidate's own verdict stands."""
        from evaluator.timing import time_cases

        t0 = time.perf_counter()
        try:
            torch._dynamo.reset()
            compiled = torch.compile(prep.base, mode=mode)
            timings, summary = time_cases(prep.base, compiled, prep.harness, cases, rounds,
                                          int(self.env.get("l2_bytes") or 50 << 20), self.copy_gbps, 0.0, case_s)
        except Exception as exc:  # noqa: BLE001 - Inductor's failure is the bar's outcome
            return {"mode": mode, "error": _describe(exc).strip()[:500]}
        return {"mode": mode, "geomean": summary["geomean"], "ci": summary["ci"],
                "seconds": round(time.perf_counter() - t0, 1),
                "cases": [{"name": t.name, "us": t.cand_us, "speedup": t.ratio} for t in timings]}


def main() -> None:
    result_fd, backend = int(sys.argv[1]), sys.argv[2]
    answers = os.fdopen(result_fd, "w", encoding="utf-8")
    worker = Worker(backend)

    def emit(note: dict[str, Any]) -> None:
        answers.write(json.dumps(note) + "\n")
        answers.flush()

    worker.emit = emit
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = worker.handle(json.loads(line))
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
        if answer.get("fatal"):
            return  # a broken CUDA context: let the parent start a fresh worker


if __name__ == "__main__":
    main()
