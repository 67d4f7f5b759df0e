"""The evolutionary search: proposals and evaluations overlap, every outcome is committed before the next draw.

Data flow for one iteration::

    archive.sample(island) -> Context -> proposer.propose (thread pool) -> pending row -> Evaluator.submit
        -> [screen on a case subset -> promote to all cases] -> fitness, features, cell -> one DB transaction

- The baseline is evaluated first and seeds every island (fitness 1.0 by definition); for a fusion task it is plain
  PyTorch, fails "no launch", and the islands start empty.
- Islands are drawn in turn; every ``migrate_every`` evaluations per island a ring migration runs.
- Successive halving: a proposal marked ``screen`` (tune's) is first timed on about a third of the cases, with the
  evaluator's screening effort (fewer rounds, a shorter time cap per case); it goes on
  to all cases only when its screen speedup is at least the median of the run's earlier screens (asynchronous
  successive halving with eta = 2).
- The run stops on the first budget reached (iterations, wall time, tokens, dollars), on patience (no better best in
  N evaluations), when the proposer is exhausted, or after too many failed proposals in a row; the reason is stored.
- The time budget counts from before the task is prepared (the baseline's evaluation is part of it) and is kept:
  every evaluation is handed its end as a deadline, so that one still queued or running then comes back
  ``cancelled`` (recorded, not counted as evaluated, and not evaluated again on ``--resume``), and proposals still
  being written then are dropped.
- On the GPU the task is prepared first. When no CUDA graph captures its calls and the GPU is busy through only a
  small part of each (``evaluator.timing.host_bound``), the run stops there with that verdict: the time is the
  launcher's host work, which no launch config changes. Where capture fails is kept either way (a host sync on the
  decode path is a finding), and so is the share of the search's wall time the GPU spent checking and timing.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from evaluator import EvalResult, Evaluator
from evaluator.task import Task, TaskError
from smithbot.errors import UsageError
from smithbot.evolve import archive as arc
from smithbot.evolve import edits
from smithbot.evolve.db import Candidate, Run, RunDB
from smithbot.evolve.proposers import Context, Exhausted, Parent, Proposal, Proposer

ROOFLINE_SKIP = 0.90  # tune leaves cases whose baseline already reaches this fraction of the copy bandwidth
MAX_FAILED_IN_A_ROW = 10


@dataclass(frozen=True)
class Budget:
    iterations: int | None = None
    time_s: float | None = None
    tokens: int | None = None
    usd: float | None = None

    def check(self) -> None:
        for name, v in asdict(self).items():
            if v is not None and v <= 0:
                raise UsageError(f"budget {name} must be positive, got {v}")


@dataclass(frozen=True)
class SearchConfig:
    proposer: str = "tune"
    islands: int = 4
    migrate_every: int = 6  # evaluations per island between ring migrations
    patience: int | None = 60  # evaluations without a better best before stopping; None: never
    seed: int = 0
    budget: Budget = field(default_factory=Budget)
    n_top: int = 2
    n_diverse: int = 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SearchConfig:
        d = dict(d)
        d["budget"] = Budget(**d.get("budget", {}))
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass
class Status:
    """What the live view shows; updated after every committed outcome."""

    run_id: str
    iteration: int = 0
    evaluated: int = 0
    correct: int = 0
    best: float | None = None
    best_ci: tuple[float, float] | None = None
    best_id: str | None = None
    cost: float = 0.0
    tokens: int = 0
    inflight: int = 0
    message: str = ""
    island_best: list[float] = field(default_factory=list)
    host_bound: str = ""  # why no launch config can speed the task up (evaluator.timing.host_bound), or ""
    capture_failures: list[str] = field(default_factory=list)  # where the baseline defeats CUDA-graph capture
    gpu_busy: float | None = None  # the share of the search's wall time the GPUs spent checking and timing (mean)
    busy: dict[str, float] = field(default_factory=dict)  # that share per device (``EvalResult.env["device"]``)
    lost: list[str] = field(default_factory=list)  # workers lost with their machines (a cluster's nodes), a line each

    def busy_line(self) -> str:
        """``GPU busy 72% of the search (gpu0 70%, gpu1 74%)``: on the GPU, and per device wherever there are
        several (the interpreter's stand-in devices included); "" otherwise."""
        one_host = len({d.partition("/")[0] for d in self.busy}) == 1  # then the device alone names it
        each = ", ".join(f"{d.partition('/')[2] if one_host else d} {b:.0%}" for d, b in self.busy.items()) \
            if len(self.busy) > 1 else ""
        if self.gpu_busy is None:
            return f"workers busy checking and timing: {each}" if each else ""
        return f"GPU busy {self.gpu_busy:.0%} of the search" + (f" ({each})" if each else "")


def run_dir(db: RunDB, run_id: str) -> Path:
    return db.path.parent / "runs" / run_id


class Search:
    def __init__(self, db: RunDB, run: Run, task: Task, evaluator: Evaluator, proposer: Proposer,
                 on_update: Callable[[Status], None] | None = None, started: float | None = None) -> None:
        """``started``: the ``time.monotonic()`` instant the run's clock starts (default: now); the caller's own
        preparation of the task before this counts against the time budget from there."""
        self.db, self.task, self.ev, self.proposer = db, task, evaluator, proposer
        self.run_id = run.id
        self.cfg = SearchConfig.from_dict(run.config["search"])
        self.on_update = on_update or (lambda s: None)
        self.archive = arc.Archive.from_dict(run.archive) if run.archive.get("islands") else arc.Archive.new(self.cfg.islands)
        self.counters: dict[str, Any] = dict(run.counters)
        self.cands: dict[str, Candidate] = {c.id: c for c in db.candidates(run.id)}
        self.hashes = {c.source_hash for c in self.cands.values() if c.source_hash}
        self.inflight_hashes: set[str] = set()
        n_done = sum(1 for c in self.cands.values() if c.status != "pending")
        self.rng = random.Random(f"{self.cfg.seed}:{n_done}")  # a resumed run draws a fresh, reproducible stream
        self.dir = run_dir(db, run.id) / "candidates"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.status = Status(run.id)
        self.failed_in_a_row = 0
        self.started = time.monotonic() if started is None else started
        self.elapsed_before = float(self.counters.get("elapsed_s", 0.0))

    # helpers

    def _file(self, cand_id: str, source: str) -> Path:
        path = self.dir / f"{cand_id}.py"
        path.write_text(source, encoding="utf-8")
        return path

    def _elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self.started

    def _deadline(self) -> float | None:
        """The ``time.monotonic()`` instant the time budget ends; None without one."""
        b = self.cfg.budget.time_s
        return None if b is None else time.monotonic() + b - self._elapsed()

    def _refresh(self, message: str = "") -> None:
        t = self.db.totals(self.run_id)
        best = self.db.best(self.run_id)
        s = self.status
        s.iteration, s.evaluated, s.correct, s.cost, s.tokens = t["done"], t["evaluated"], t["correct"], t["cost"], int(t["tokens"])
        if best is not None and best.result:
            s.best, s.best_id = best.fitness, best.id
            ci = best.result.get("speedup_ci")
            s.best_ci = tuple(ci) if ci else None
        s.island_best = [(i.best().fitness if i.best() else 0.0) for i in self.archive.islands]
        s.host_bound = self.counters.get("host_bound", "")
        s.capture_failures = list(self.counters.get("capture_failures", []))
        elapsed = self._elapsed()
        by_device = self.counters.get("busy_s", {})
        s.busy = {d: t / elapsed for d, t in sorted(by_device.items())} if elapsed > 0 else {}
        s.gpu_busy = sum(by_device.values()) / (elapsed * self.ev.devices) \
            if elapsed > 0 and self.ev.backend == "cuda" else None
        s.lost = list(self.ev.lost)
        s.message = message
        self.on_update(s)

    def _cases_for_run(self, base: EvalResult) -> list[str]:
        names = self.ev.case_names
        if self.cfg.proposer != "tune" or self.ev.backend != "cuda" or not base.cases:
            return names
        keep = [c["name"] for c in base.cases if c["cand_bw_fraction"] < ROOFLINE_SKIP]
        skipped = [c["name"] for c in base.cases if c["cand_bw_fraction"] >= ROOFLINE_SKIP]
        if skipped:
            self.db.event(self.run_id, "roofline_skip", {"cases": skipped, "threshold": ROOFLINE_SKIP})
        return keep

    # the baseline

    def _baseline(self) -> None:
        if "cases" in self.counters:
            return
        src = self.task.kernel_path.read_text(encoding="utf-8")
        h = edits.source_hash(src)
        cand = next((c for c in self.cands.values() if c.proposer == "baseline"), None)
        if cand is None:
            cand = self.db.add_candidate(self.run_id, island=0, generation=0, proposer="baseline", source_hash=h,
                                         source=src, status="pending")
        res = self.ev.submit(self._file(cand.id, src), deadline=self._deadline()).result()
        self._count_gpu(res)
        if res.status == "cancelled":  # the budget ended first: nothing to search from
            self.db.record(cand.id, self.run_id, res.status, self.archive.to_dict(), self.counters, reason=res.reason,
                           result=res.to_dict())
            self.cands[cand.id] = self.db.candidate(cand.id)
            return
        fit = arc.fitness(res.status, res.speedup, baseline=True)
        feats = arc.features(src)
        where = arc.cell(feats)
        if fit is not None:
            self.archive.seed_all(cand.id, fit, where)
        cases = self._cases_for_run(res) if res.correct else self.ev.case_names
        self.counters.update(cases=cases, screen=self._screen_cases(cases), evaluated=0, best=fit, since_best=0)
        self.db.record(cand.id, self.run_id, res.status, self.archive.to_dict(), self.counters, reason=res.reason,
                       result=res.to_dict(), speedup=res.speedup, fitness=fit, features={**feats, "cell": where})
        self.cands[cand.id] = self.db.candidate(cand.id)
        self.hashes.add(h)

    @staticmethod
    def _screen_cases(cases: list[str]) -> list[str] | None:
        if len(cases) < 3:
            return None
        k = math.ceil(len(cases) / 3)
        step = len(cases) / k
        return [cases[int(i * step)] for i in range(k)]

    # drawing proposals

    def _parent(self, cand_id: str | None) -> Parent:
        if cand_id is None:
            return Parent(None, self.task.kernel_path.read_text(encoding="utf-8"))
        c = self.cands[cand_id]
        return Parent(c.id, c.source or "", c.result, c.fitness)

    def _context(self, island: int) -> Context:
        parent_id, insp = self.archive.sample(island, self.rng, self.cfg.n_top, self.cfg.n_diverse)
        second = None
        if insp and self.rng.random() < 0.5:
            second = self._parent(insp[0])
        fails = [c for c in self.cands.values() if c.island == island and c.parent_id == parent_id
                 and c.status not in ("pending", "correct", "promoted", "flagged")][-3:]
        return Context(self.task, self._parent(parent_id), tuple(self._parent(i) for i in insp), second,
                       tuple({"status": c.status, "reason": c.reason, "detail": (c.result or {}).get("detail", "")}
                             for c in fails), random.Random(self.rng.random()),
                       lambda h: h in self.hashes or h in self.inflight_hashes)

    def _budget_reason(self, inflight: int) -> str:
        b = self.cfg.budget
        t = self.db.totals(self.run_id)
        if b.iterations is not None and t["done"] - 1 + inflight >= b.iterations:  # the baseline is not an iteration
            return f"iteration budget reached ({b.iterations})"
        if b.time_s is not None and self._elapsed() >= b.time_s:
            return f"time budget reached ({b.time_s:.0f} s)"
        if b.tokens is not None and t["tokens"] >= b.tokens:
            return f"token budget reached ({int(t['tokens'])} of {b.tokens})"
        if b.usd is not None and t["cost"] >= b.usd:
            return f"dollar budget reached (${t['cost']:.4f} of ${b.usd:.2f})"
        if self.cfg.patience is not None and self.counters.get("since_best", 0) >= self.cfg.patience:
            return f"no better candidate in {self.cfg.patience} evaluations (patience)"
        return ""

    # outcomes

    def _on_proposal(self, island: int, parent: Parent, prop: Proposal) -> tuple[str, bool] | None:
        """Record a proposal; return (candidate id, screen) to evaluate, or None."""
        gen = (self.cands[parent.id].generation + 1) if parent.id else 1
        common = dict(island=island, generation=gen, proposer=self.proposer.name, parent_id=parent.id,
                      edit_format=prop.edit_format, prompt=prop.prompt, response=prop.response, model=prop.model,
                      tokens_in=prop.tokens_in, tokens_out=prop.tokens_out, cost=prop.cost)
        if prop.source is None or prop.error:
            c = self.db.add_candidate(self.run_id, status="failed_proposal", reason=prop.error[:500], **common)
            self.cands[c.id] = c
            self.failed_in_a_row += 1
            return None
        self.failed_in_a_row = 0
        h = edits.source_hash(prop.source)
        if h in self.hashes or h in self.inflight_hashes:
            c = self.db.add_candidate(self.run_id, status="failed_proposal", reason="duplicate of an earlier candidate",
                                      **common)
            self.cands[c.id] = c
            return None
        diff = edits.unified_diff(parent.source, prop.source)
        c = self.db.add_candidate(self.run_id, status="pending", source_hash=h, source=prop.source, diff=diff,
                                  second_parent_id=None, **common)
        self.cands[c.id] = c
        self.inflight_hashes.add(h)
        return c.id, prop.screen and self.counters.get("screen") is not None

    def _screen_passes(self, res: EvalResult) -> tuple[bool, str]:
        if not res.correct or res.speedup is None:
            return False, ""
        prior = self.counters.setdefault("screen_speedups", [])
        bar = statistics.median(prior) if len(prior) >= 4 else 0.0
        prior.append(res.speedup)
        if res.speedup >= bar:
            return True, ""
        return False, f"screen speedup {res.speedup:.3f} below the median of earlier screens {bar:.3f}"

    def _count_gpu(self, res: EvalResult) -> None:
        """Add what an evaluation held its device for (its correctness checks and timing, which take the GPU's lock)."""
        if res.device_s and res.device:
            by_device = self.counters.setdefault("busy_s", {})
            by_device[res.device] = by_device.get(res.device, 0.0) + res.device_s

    def _on_result(self, cand_id: str, res: EvalResult) -> None:
        c = self.cands[cand_id]
        fit = arc.fitness(res.status, res.speedup)
        feats = arc.features(c.source or "")
        where = arc.cell(feats)
        placed = self.archive.add(c.island, c.id, fit, where)
        best = self.counters.get("best")
        improved = fit is not None and (best is None or fit > best * 1.001)
        if improved:
            self.counters["best"] = fit
        self._commit(c, res.status, improved, reason=res.reason, result=res.to_dict(), speedup=res.speedup,
                     fitness=fit, features={**feats, "cell": where})
        if placed:
            self.db.event(self.run_id, "elite", {"island": c.island, "candidate": c.id, "fitness": fit, "cell": where})
        self._maybe_migrate()

    def _cancelled(self, cand_id: str, res: EvalResult) -> None:
        """An evaluation the time budget cut short: recorded as such, not counted as evaluated."""
        self.db.record(cand_id, self.run_id, res.status, self.archive.to_dict(), self.counters, reason=res.reason,
                       result=res.to_dict())
        self.cands[cand_id] = self.db.candidate(cand_id)
        self.hashes.add(self.cands[cand_id].source_hash or "")
        self.inflight_hashes.discard(self.cands[cand_id].source_hash or "")

    def _screened_out(self, cand_id: str, res: EvalResult, why: str) -> None:
        c = self.cands[cand_id]
        self.archive.islands[c.island].evaluated += 1
        self._commit(c, "screened_out" if res.correct else res.status, False, reason=why or res.reason,
                     screen_result=res.to_dict(), result=None if res.correct else res.to_dict())
        self._maybe_migrate()

    def _commit(self, c: Candidate, status: str, improved: bool, **fields: Any) -> None:
        """Count the evaluation, commit it with the archive and counters, and mark its source as seen."""
        self.counters["evaluated"] = self.counters.get("evaluated", 0) + 1
        self.counters["since_best"] = 0 if improved else self.counters.get("since_best", 0) + 1
        self.counters["elapsed_s"] = self._elapsed()
        self.db.record(c.id, self.run_id, status, self.archive.to_dict(), self.counters, **fields)
        self.cands[c.id] = self.db.candidate(c.id)
        self.hashes.add(c.source_hash or "")
        self.inflight_hashes.discard(c.source_hash or "")

    def _maybe_migrate(self) -> None:
        n = len(self.archive.islands)
        if n > 1 and self.counters["evaluated"] % (self.cfg.migrate_every * n) == 0:
            cells = {cid: (cc.features or {}).get("cell", "") for cid, cc in self.cands.items()}
            moves = self.archive.migrate(cells)
            self.db.save_state(self.run_id, self.archive.to_dict(), self.counters, "migration",
                               {"moves": [list(m) for m in moves], "after": self.counters["evaluated"]})

    # the loop

    def _probe_host(self) -> str:
        """On the GPU, before the baseline's evaluation: prepare the task in every worker at once (so that no warm-up
        runs beside a timing later), keep where its calls defeat CUDA-graph capture, and return the host-bound verdict
        ("" when a launch config can matter), which the workers reach before compiling anything else."""
        if self.ev.backend != "cuda" or "cases" in self.counters:
            return ""
        try:
            self.ev.prepare(self._deadline(), every_worker=True, host_first=True)
        except TaskError:
            if self._deadline() is None or self._deadline() > time.monotonic():
                raise
            return ""  # out of time: the baseline's step says so
        self.counters["capture_failures"] = self.ev.capture_failures
        if self.ev.host_bound:
            self.counters["host_bound"] = self.ev.host_bound
            self.db.event(self.run_id, "host_bound", {"verdict": self.ev.host_bound, "probes": self.ev.host})
        return self.ev.host_bound

    def run(self, prop_threads: int = 2) -> Status:
        host_bound = self._probe_host()
        if host_bound:
            return self._stop(f"{host_bound}; no launch config can change host work, so nothing was searched")
        self._baseline()
        if "cases" not in self.counters:  # the baseline's evaluation was cut short by the time budget
            return self._stop(f"time budget reached ({self.cfg.budget.time_s:.0f} s) before the baseline was "
                              "measured")
        names = set(self.counters["cases"])
        self.proposer.configure(self.ev.backend, {c.regime for c in self.task.cases if c.name in names})
        self._refresh("baseline measured")
        cap = self.ev.capacity
        evals: dict[Future[EvalResult], tuple[str, bool]] = {}
        props: dict[Future[Proposal], tuple[int, Parent]] = {}

        def submit_eval(cand_id: str, screen: bool) -> None:
            c = self.cands[cand_id]
            cases = self.counters["screen"] if screen else self.counters["cases"]
            evals[self.ev.submit(self._file(c.id, c.source or ""), cases=cases, deadline=self._deadline(),
                                 effort="screen" if screen else "full")] = (cand_id, screen)

        for c in list(self.cands.values()):  # resume: evaluate what was proposed but not evaluated
            if c.status == "pending" and c.proposer != "baseline":
                self.inflight_hashes.add(c.source_hash or "")
                submit_eval(c.id, c.screen_result is None and self.counters.get("screen") is not None
                            and c.edit_format == "tune")
        stop = ""
        island = self.counters.get("next_island", 0)
        pool = ThreadPoolExecutor(max_workers=prop_threads, thread_name_prefix="proposer")
        try:
            while True:
                stop = stop or self._stop_reason(len(props) + len(evals))
                while not stop and len(props) < prop_threads and len(props) + len(evals) < cap + prop_threads \
                        and not self._budget_reason(len(props) + len(evals)):
                    ctx = self._context(island)
                    props[pool.submit(self.proposer.propose, ctx)] = (island, ctx.parent)
                    island = (island + 1) % len(self.archive.islands)
                    self.counters["next_island"] = island
                self.status.inflight = len(props) + len(evals)
                deadline = self._deadline()
                out_of_time = deadline is not None and deadline <= time.monotonic()
                if not evals and (not props or out_of_time):  # proposals still being written then are dropped
                    break
                # woken at the budget's end too, when only a slow proposal (an LLM's) is in flight
                done, _ = wait(list(props) + list(evals), return_when=FIRST_COMPLETED,
                               timeout=None if deadline is None or evals else max(0.0, deadline - time.monotonic()))
                for f in done:
                    if f in props:
                        isl, parent = props.pop(f)  # type: ignore[arg-type]
                        try:
                            prop = f.result()
                        except Exhausted as exc:
                            stop = stop or f"the {self.proposer.name} proposer is exhausted: {exc}"
                            continue
                        todo = self._on_proposal(isl, parent, prop)
                        if todo is not None:
                            submit_eval(*todo)
                    else:
                        cand_id, screen = evals.pop(f)  # type: ignore[arg-type]
                        if self._evaluated(cand_id, screen, f.result()):
                            submit_eval(cand_id, False)
                    self._refresh()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return self._stop(stop or "finished")

    def _stop_reason(self, in_flight: int) -> str:
        """Why the search takes no more proposals: a budget spent, or too many proposals failed in a row; or ""."""
        reason = self._budget_reason(in_flight)
        if not reason and self.failed_in_a_row >= MAX_FAILED_IN_A_ROW:
            last = next((c.reason for c in reversed(list(self.cands.values())) if c.status == "failed_proposal"), "")
            reason = f"{MAX_FAILED_IN_A_ROW} proposals failed in a row; the last: {last}"
        return reason

    def _evaluated(self, cand_id: str, screen: bool, res: EvalResult) -> bool:
        """One evaluation's outcome recorded; True when it was a screen the candidate passed, so that its full
        evaluation comes next."""
        self._count_gpu(res)
        if res.status == "cancelled":
            self._cancelled(cand_id, res)
        elif screen:
            ok, why = self._screen_passes(res)
            if ok:
                self.db.record(cand_id, self.run_id, "pending", self.archive.to_dict(), self.counters,
                               screen_result=res.to_dict())
                self.cands[cand_id] = self.db.candidate(cand_id)
                return True
            self._screened_out(cand_id, res, why)
        else:
            self._on_result(cand_id, res)
        return False

    def _stop(self, reason: str) -> Status:
        self.counters["elapsed_s"] = self._elapsed()
        self.db.save_state(self.run_id, self.archive.to_dict(), self.counters, "stop", {"reason": reason})
        self.db.set_status(self.run_id, "finished", reason)
        self._refresh(reason)
        return self.status
