"""The whole job behind `smithbot run` and `smithbot demo`: scan, extract the hottest kernels, evolve, verify and
propose, one kernel after another within the time it is given, over the entry points of ``smithbot.api``."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from evaluator import TaskError, resolve_backend
from smithbot import api
from smithbot.config import TARGETS_DIR
from smithbot.errors import UsageError
from smithbot.evolve.db import RunDB
from smithbot.evolve.inductor import RECORDED
from smithbot.extract.pipeline import extract_glue_site, extract_sites
from smithbot.measure import Row, bandwidth, compute, headroom, own_time, reached, time_baseline
from smithbot.propose.forge import ForgeError
from smithbot.propose.pipeline import ProposeError
from smithbot.propose.reinsert import ReinsertError
from smithbot.repo import home
from smithbot.scan.fusion import FusionSite
from smithbot.types import KernelSite

# A kernel's share of --time-total, after its extraction: the search, then verification, which gets a tenth of it and
# at least VERIFY_S (on the H200 verification took 25-40 s: a fresh evaluator, and more rounds than the search's), but
# never more than half. The job aims to end END_MARGIN_S early: the interpreter's start and the workers' shutdown.
VERIFY_SHARE, VERIFY_S, END_MARGIN_S = 0.1, 40.0, 5.0
MIN_SHARE_S = 10.0  # less than this left of --time-total: no kernel can be extracted, searched and verified in it
# What one kernel needs at least: a self-check in a cold GPU worker (on the H200, 20-40 s to start torch and CUDA and
# compile the baseline at every case), a search, and VERIFY_S. When the time left would give each kernel still to do
# less, fewer kernels share it (one at least), rather than every one failing its self-check.
MIN_KERNEL_S = 90.0
# Measured first on a GPU: a pick already at this share of its nearer roof (copy bandwidth, or the dense matmul rate
# for tl.dot work) at its decode case has little left to gain, and one with under MIN_STEP_US a step of its preset to
# save, once an empty launch's cost is counted, too little to matter; both are skipped, with the number, before any
# search
NEAR_ROOFLINE, MIN_STEP_US = 0.9, 1.0


@dataclass
class JobRow:
    """One kernel's (or run of glue's) way through the job: the last stage it reached and why it stopped there, with
    what each stage left (the task, the search's run, the verification, the proposal's files)."""

    kernel: str
    presets: list[str]
    stage: str = "extract"  # extract, evolve, verify, propose, then proposed
    reach: str = ""
    undecided: list[str] = field(default_factory=list)
    default_path: str = ""
    why: str = ""
    task: str = ""
    run: str = ""
    best: float | None = None
    evaluated: int = 0
    gpu_busy: float | None = None
    capture_failures: list[str] = field(default_factory=list)
    verification: str = ""
    speedup: float | None = None
    preview: bool = False  # correct with fewer launches, not timed (no GPU)
    action: str = ""
    where: str = ""
    detail: str = ""
    pr: str = ""
    patch: str = ""
    test: str = ""
    us_per_step: float | None = None  # the baseline's µs a step of ``measured_on``, timed before the search (GPU)
    measured_on: str = ""
    skipped: bool = False  # measured first and left: near its roofline, or too small to matter
    marks: list[tuple[str, float]] = field(default_factory=list)  # (stage begun, time.monotonic()), then ("end", t)

    def mark(self, stage: str) -> None:
        self.marks.append((stage, time.monotonic()))

    @property
    def seconds(self) -> dict[str, float]:
        """Where the pick's time went: seconds per stage (extract, measure, search, verify, propose)."""
        out: dict[str, float] = {}
        for (stage, t0), (_, t1) in zip(self.marks, self.marks[1:]):
            out[stage] = out.get(stage, 0.0) + t1 - t0
        return out


def run_pipeline(spec: str, kernels: list[str] | None = None, top: int = 1, iterations: int = 8,
                 time_s: float | None = None, budget_usd: float | None = None, proposer: str | None = None,
                 config: str | None = None, backend: str = "auto", source: str | None = None, submit: bool = False,
                 say: Callable[[str], None] = print, on_update: Callable[[Any], None] | None = None,
                 model: str | None = None, time_total_s: float | None = None,
                 profile: str | None = None, fusion: bool = False) -> list[JobRow]:
    """The whole job: scan -> extract the top-K hot kernels (or the named ones) -> evolve -> verify -> propose.
    One row per kernel says how far it got and why it stopped; a failure of one kernel does not stop the others.
    With ``profile`` (a trace that ``smithbot profile`` kept), the kernels are ranked by their measured share.

    With ``fusion``, the work is the torch glue on the default paths instead (scan's fusion sites, most launches a
    step first; ``kernels`` names them ``glue:FUNCTION[:LINE]``): each becomes a fusion task, seeded by the
    ``inductor`` proposer (the default there; ``tune`` is the default for kernels). Without a GPU, a recording of
    Inductor's output that the target ships for the glue seeds it, and verification judges a preview (``verify.py``).

    With ``time_total_s``, the job ends inside it: what is left is shared equally among the kernels still to do, and
    a kernel's share pays for its extraction, then its search (at most ``time_s``), then its verification (what the
    search leaves: ``VERIFY_SHARE`` of the share, at least ``VERIFY_S``, at most half), which is cut at the share's
    end."""
    t_start = time.monotonic()
    if time_total_s is not None and time_total_s <= 0:
        raise UsageError(f"--time-total must be positive, got {time_total_s}")
    if model:
        api.resolve_target(spec).preset(model)  # an unknown preset fails before anything is said or run
    used = resolve_backend(backend)
    if used == "interpreter":
        say("no GPU: every timing below comes from the Triton interpreter on the CPU and does not predict GPU speed")
    fusion = fusion or bool(kernels) and all(k.startswith("glue:") for k in kernels or ())  # --kernel glue:F
    measured = api.tasks_trace(api.resolve_target(spec).name, model) if model and used == "cuda" else None
    if profile is None and measured is not None:
        profile = str(measured)
        say(f"ranked by {model}'s step as `smithbot profile --from-tasks` measured it on this GPU: {measured}")
    result = api.scan(spec, source, model=model, profile=profile)
    t_scanned = time.monotonic()
    picks = _picks(result, fusion, kernels, model, say)
    job = _Job(spec, source, proposer or ("inductor" if fusion else "tune"), iterations, time_s, budget_usd, used,
               config, submit, say, on_update, model)
    rows: list[JobRow] = []
    wanted = len(kernels) if kernels else top
    said_fit = False
    for site in picks:
        done = len([r for r in rows if r.task and not r.skipped])
        if done >= wanted:
            break
        name = site.name
        row = JobRow(kernel=name, presets=list(site.presets), reach=site.reach, undecided=list(site.undecided))
        deadline = None
        if time_total_s is not None:
            left = time_total_s - END_MARGIN_S - (time.monotonic() - t_start)
            if left < MIN_SHARE_S or rows and left < MIN_KERNEL_S:  # (the first pick tries what there is)
                say(f"the total time budget ({time_total_s:.0f} s) is spent ({max(left, 0):.0f} s left, a kernel "
                    f"needs {MIN_KERNEL_S:.0f}): {name} and the rest are left")
                break
            share, fit = kernel_share(left, wanted - done)
            if fit < wanted - done and not said_fit:
                say(f"the time left ({left:.0f} s of --time-total) fits {fit} more kernel{'s' if fit > 1 else ''} "
                    f"at {MIN_KERNEL_S:.0f} s each, not {wanted - done}")
                said_fit = True
            deadline = time.monotonic() + share
        _say_pick(site, name, row, say)
        rows.append(row)
        row.mark("extract")
        try:
            _work_on(row, site, name, deadline, job, result)
        finally:
            row.mark("end")
    say(_time_line(rows, time.monotonic() - t_start, t_scanned - t_start, time_total_s))
    return rows


def _picks(result: api.ScanResult, fusion: bool, kernels: list[str] | None, model: str | None,
           say: Callable[[str], None]) -> Sequence[KernelSite | FusionSite]:
    """The job's candidates in the scan's ranking (the named ones, where ``kernels`` names them): runs of torch glue
    with ``fusion``, else launched kernels; a line says what the scan found."""
    on = f"{'the ' + model if model else 'a preset'}'s default serving path"
    if fusion:
        n = len(result.fusion)
        say(f"scan: {n} run{'' if n == 1 else 's'} of torch glue on {on}; most torch ops a step: "
            + ", ".join(f"{g.name} ({g.per_step})" for g in result.fusion[:4]))
        if kernels:
            return [api.find_glue(result, k.removeprefix("glue:")) for k in kernels]
        return _decided(result.fusion, "runs of glue", say)
    launched = [s for s in result.sites if s.role == "launched"]
    say(f"scan: {len(launched)} launched kernels in {result.target.name}, {len([s for s in launched if s.presets])} "
        f"on {on}; hottest: " + ", ".join(f"{s.name} ({s.hotness:g})" for s in launched[:4]))
    return [api.find_kernel(result, k) for k in kernels] if kernels else _decided(launched, "kernels", say)


def _decided(sites: list[Any], what: str, say: Callable[[str], None]) -> list[Any]:
    """The sites that default serving runs (every if-test on their path decided for them): a proposal for code that
    it may not run is one a maintainer closes. Those it only possibly runs are named in one line, to be asked for by
    name, and are the picks only where the scan decided no site for default serving at all; then each pick's line,
    the summary and the PR list the tests left open. (A default site that fails to extract does not let a possible
    one in: that once proposed glue that default serving may never run.)"""
    kept = [s for s in sites if s.reach == "default"]
    left = [s for s in sites if s.reach != "default" and s.presets]
    if left and kept:
        say(f"not picked: {len(left)} {what} that default serving only possibly runs (an if-test on the path is not "
            f"decided), e.g. {', '.join(s.name for s in left[:3])}; name one with --kernel to work on it")
    elif left:
        say(f"no {what} decided for default serving: the picks are those it possibly runs (an if-test on the path is "
            f"not decided), {len(left)} in the scan's order, each with its open tests")
    return kept or left


def _time_line(rows: list[JobRow], spent: float, scan_s: float, total_s: float | None) -> str:
    """Where the job's time went, in one line: the scan and ranking, then the picks (their stages are in the
    summary)."""
    picks = sum(sum(r.seconds.values()) for r in rows)
    return (f"time: {spent:.0f} s" + (f" of --time-total {total_s:.0f}" if total_s is not None else "")
            + f"; the scan and ranking {scan_s:.0f} s, {len(rows)} pick{'' if len(rows) == 1 else 's'} "
              f"{picks:.0f} s (each pick's stages are in the summary)")



@dataclass
class _Job:
    """The settings every pick of one job is worked on with."""

    spec: str
    source: str | None
    proposer: str
    iterations: int
    time_s: float | None
    budget_usd: float | None
    backend: str  # the resolved one: cuda or interpreter
    config: str | None
    submit: bool
    say: Callable[[str], None]
    on_update: Callable[[Any], None] | None
    model: str | None = None


def _say_pick(site: KernelSite | FusionSite, name: str, row: JobRow, say: Callable[[str], None]) -> None:
    """The pick's line: where it runs, whether default or only possible, and the tests left open."""
    open_tests = "; ".join(site.undecided)
    if isinstance(site, FusionSite):
        say(f"pick: {name} ({site.path}:{site.first}-{site.last}, {site.reach}): {', '.join(site.ops)}; "
            f"{site.per_step} torch ops a step, by scan's count (the evaluator counts the kernels they launch)"
            + (f" ({site.frequency})" if site.frequency else "")
            + (f"; {site.todos[0]}" if site.todos else "") + (f"; undecided: {open_tests}" if open_tests else ""))
    elif site.default_path:
        row.default_path = site.default_path
        say(f"pick: {name} ({site.reach}): {site.default_path}" + (f"; undecided: {open_tests}" if open_tests else ""))


def _work_on(row: JobRow, site: KernelSite | FusionSite, name: str, deadline: float | None, job: _Job,
             result: api.ScanResult) -> None:
    """One pick: extract it from the job's own scan (its ``--model`` and profile: the share its task carries to
    the PR) with a self-check in a quarter of its share, then search, verify and propose, each within the share's
    ``deadline``; ``row`` records how far it got and why it stopped."""
    say = job.say
    check_s = 300.0 if deadline is None else max(1.0, min(300.0, (deadline - time.monotonic()) / 4))
    base = home() / "workspaces" / result.target.name / "tasks"
    if isinstance(site, FusionSite):
        cov = extract_glue_site(result, site, None, base, True, check_s)
    else:
        [cov] = extract_sites(result, [site], lambda name: base / name, timeout_s=check_s)
    if not cov.checked or cov.out is None:
        row.why = cov.why
        say(f"extract: {name} skipped: {cov.why}")
        return
    row.task = str(cov.out)
    say(f"extract: {cov.kernel} -> {cov.out} (self-check passed)")
    row.mark("measure")
    if job.backend == "cuda" and _measured_first(row, site, name, cov.out, job, check_s):
        return
    if isinstance(site, FusionSite) and job.proposer == "inductor" and job.backend != "cuda" \
            and _recorded_seed(result.target.name, site.function, cov.out):
        say("inductor: no GPU here, so the seed is the Inductor output the target ships for this glue")
    run_id = _search(row, cov.out, name, isinstance(site, FusionSite), deadline, job)
    if run_id:
        _verify_and_propose(row, run_id, deadline, job)


def _search(row: JobRow, task: Path, name: str, fusion: bool, deadline: float | None, job: _Job) -> str:
    """The pick's search, in what its share leaves after verification's part: the run's id, or "" (with
    ``row.why``) where nothing is worth verifying."""
    say = job.say
    row.stage = "evolve"
    row.mark("search")
    search_s = job.time_s
    if deadline is not None:  # the search gets the share but what verification needs
        left = deadline - time.monotonic()
        share = max(1.0, left - min(max(VERIFY_S, VERIFY_SHARE * left), left / 2))
        search_s = min(search_s, share) if search_s is not None else share
    try:
        status = api.evolve(task, proposer=job.proposer, iterations=job.iterations, time_s=search_s,
                            budget_usd=job.budget_usd, islands=2, seed=0, backend=job.backend, config=job.config,
                            on_update=job.on_update)
    except TaskError as exc:  # the task broke where the self-check did not look (more workers, the search's cases)
        row.why = f"the search could not start: {exc}"
        say(f"evolve: {name} stopped: {exc}")
        return ""
    row.run, row.best, row.evaluated = status.run_id, status.best, status.evaluated
    row.gpu_busy = status.gpu_busy
    row.capture_failures = list(status.capture_failures or [])
    best = (f"the search's best {status.best:.3f}x (verification measures again)" if status.best
            else "no correct candidate yet")  # (not "0.000x": nothing was timed)
    if fusion and job.backend != "cuda":
        best = "its speed is not judged on the interpreter (verification counts launches)"
    say(f"evolve: run {status.run_id}, {status.message}; {status.evaluated} evaluated candidates, {best}"
        + (f"; {status.busy_line()}" if status.busy_line() else ""))
    if status.host_bound:
        row.why = status.host_bound
        return ""
    nothing = _none_correct(status.run_id, status.message)
    if nothing:  # verification would only say "no candidate passed"; the search's own failures say why
        row.why = nothing
        say(f"evolve: {name}: {nothing}")
        return ""
    return status.run_id


def _verify_and_propose(row: JobRow, run_id: str, deadline: float | None, job: _Job) -> None:
    """Verify the search's best candidates within the share and propose the winner, if one is accepted."""
    say = job.say
    row.stage = "verify"
    row.mark("verify")
    v = api.verify(run_id, top=2, backend=job.backend, deadline=deadline)
    for verdict in v.verdicts:
        measured = (f" at {verdict.speedup:.3f}x [{verdict.ci[0]:.3f}, {verdict.ci[1]:.3f}]"
                    if verdict.speedup is not None and verdict.ci and not v.preview else "")
        say(f"verify: {verdict.candidate} {'accepted' if verdict.accepted else 'rejected'}{measured}: "
            f"{verdict.reason}")
    row.verification = str(v.path)
    if v.winner is None:
        row.why = "no candidate passed verification"
        return
    if v.preview:  # correct with fewer launches, not timed: its speed is the interpreter's, not a GPU's
        row.preview = True
    else:
        row.speedup = next(d.speedup for d in v.verdicts if d.candidate == v.winner)
    row.stage = "propose"
    row.mark("propose")
    try:
        [(_, published)] = api.propose([run_id], submit=job.submit, source=job.source)
    except (ProposeError, ReinsertError, ForgeError) as exc:
        row.why = str(exc)
        return
    row.stage, row.action, row.where, row.detail = "proposed", published.action, published.where, published.detail
    if published.action == "written":
        out = Path(published.where)
        row.pr, row.patch, row.test = str(out / "pr.md"), str(out / "patch.diff"), str(next(out.glob("test_*.py")))


def _measured_first(row: JobRow, site: KernelSite | FusionSite, name: str, task: Path, job: _Job,
                    timeout_s: float) -> bool:
    """Time the pick's baseline at its preset's decode case before any search (``measure.time_baseline``), keep its
    µs a step on the row, and say whether to skip it: within ``1 - NEAR_ROOFLINE`` of its nearer roof (copy
    bandwidth, or the dense matmul rate for ``tl.dot`` work), or with under ``MIN_STEP_US`` a step left to save once
    an empty launch's cost is counted. The preset is ``--model``, else the one whose step launches it most: the first of
    those the task has cases of."""
    counts = {p: site.runs(p) for p in site.presets} if isinstance(site, FusionSite) else dict(site.per_step)
    if not counts:
        return False
    order = sorted(counts, key=lambda p: (p != job.model, -counts[p]))  # --model's cases, else the busiest preset's
    try:
        got = time_baseline(task, order, timeout_s)
        if isinstance(site, KernelSite):
            got = own_time(got, site.name)
    except TaskError as exc:  # the search will say it again, with its own evaluator
        job.say(f"measure: {name}: its baseline could not be timed ({exc})")
        return False
    preset = got["preset"]
    n = counts[preset]
    measured = Row(name, "kernel", "", n, us=got["us"], bw_fraction=got["bw_fraction"],
                   flop_fraction=got["flop_fraction"], flops=got["flops"])
    step = measured.us_per_step or 0.0
    row.us_per_step, row.measured_on = step, preset
    each = (f"{n} {'launches' if isinstance(site, KernelSite) else 'runs'} × {measured.us:.2f} µs at "
            f"{got['decode_case']}")
    roofs = got.get("note") or f"of copy bandwidth: {bandwidth(measured.bw_fraction)}" + (
        f"; of the dense matmul rate: {compute(measured)}" if measured.flops else "")
    at = reached(measured)
    left = step * headroom(measured, got["launch_us"])
    if at is not None and at >= NEAR_ROOFLINE:
        roof = "the dense matmul rate" if at == measured.flop_fraction else "copy bandwidth"
        row.why = f"at {at:.0%} of {roof} ({each}): little left to gain"
    elif left < MIN_STEP_US:
        floor = f", an empty launch {got['launch_us']:.2f} µs" if got["launch_us"] else ""
        row.why = f"at most {left:.2f} µs a step of {preset} to save ({each}{floor}): too small to matter"
    else:
        phase = "prefill" if "-prefill-" in got["decode_case"] else "decode"  # (a prefill-only kernel's case)
        job.say(f"measure: {name}: {step:.1f} µs a {phase} step of {preset} ({each}), at most {left:.1f} to save; "
                f"{roofs}")
        return False
    row.skipped = True
    job.say(f"measure: {name} skipped: {row.why}")
    return True


def summary_markdown(target: str, rows: list[JobRow], backend_note: str = "") -> str:
    """The run's markdown summary (also appended to $GITHUB_STEP_SUMMARY by the CLI)."""
    lines = [f"## smithbot run: {target}", ""]
    if backend_note:
        lines += [f"> {backend_note}", ""]
    lines += ["| kernel | reached | µs/step (share of the measured part) | best in search | verified | GPU busy | "
              "seconds | outcome |", "|---|---|---|---|---|---|---|---|"]
    measured = sum(r.us_per_step or 0.0 for r in rows)
    for r in rows:
        best = f"{r.best:.3f}x" if r.best else "-"
        ver = f"{r.speedup:.3f}x" if r.speedup else "preview: correct, fewer launches" if r.preview else "-"
        busy = f"{r.gpu_busy:.0%}" if r.gpu_busy is not None else "-"
        step = f"{r.us_per_step:.1f} ({r.us_per_step / measured:.0%}, {r.measured_on})" if r.us_per_step else "-"
        outcome = r.where or r.why
        spent = ", ".join(f"{stage} {s:.0f}" for stage, s in r.seconds.items() if s >= 0.5) or "-"
        lines.append(f"| `{r.kernel}` | {r.stage} | {step} | {best} | {ver} | {busy} | {spent} | "
                     f"{outcome.replace('|', '/')[:300]} |")
    syncs = [(r.kernel, where) for r in rows for where in r.capture_failures]
    if syncs:
        lines += ["", "Calls no CUDA graph captures (a host sync or CPU work on the serving path is a finding in "
                  "itself):", ""]
        lines += [f"- `{k}`, {where}" for k, where in syncs]
    return "\n".join(lines) + "\n"


def demo(kernel: str = "rms_norm", iterations: int = 8, backend: str = "auto",
         say: Callable[[str], None] = print, on_update: Callable[[Any], None] | None = None,
         fusion: bool = False) -> JobRow:
    """The whole job on the bundled demo target, offline, through the local forge. Returns the paths it wrote. With
    ``fusion``, the demo engine's torch glue instead of ``kernel``: without a GPU its seed is the Inductor output
    recorded for it on an H200, and the result is a preview (correct, fewer launches, not timed)."""
    [row] = run_pipeline("demo", None if fusion else [kernel], iterations=iterations, backend=backend, say=say,
                         on_update=on_update, fusion=fusion)
    if row.stage != "proposed":
        raise ProposeError(f"the demo stopped at {row.stage}: {row.why}")
    return row


def _none_correct(run_id: str, message: str) -> str:
    """Why a run has no correct candidate but the baseline (its last distinct failures, or why the search stopped
    when it proposed nothing), or "" when it has one."""
    with RunDB(api.db_path()) as db:
        tried = [c for c in db.candidates(run_id) if c.proposer != "baseline"]
    if any(c.correct for c in tried):
        return ""
    why = "; ".join(dict.fromkeys(f"{c.status}: {c.reason}"[:300] for c in tried[-3:]))
    return f"no correct candidate in the search ({why or 'nothing was proposed: ' + message})"


def kernel_share(left_s: float, to_do: int) -> tuple[float, int]:
    """The seconds the next kernel gets of ``left_s``, and how many of the ``to_do`` kernels still fit: an equal
    share, but no kernel's below ``MIN_KERNEL_S`` unless only one is left to try."""
    fit = min(to_do, max(1, int(left_s // MIN_KERNEL_S)))
    return left_s / fit, fit


def _recorded_seed(target: str, function: str, task_dir: Path) -> bool:
    """Put the Inductor output a target ships for a glue function (``targets/TARGET/inductor/FUNCTION.json``,
    recorded on a GPU) beside its task, where the ``inductor`` proposer reads it without a GPU. Whether there was one."""
    shipped = TARGETS_DIR / target / "inductor" / f"{function}.json"
    if not shipped.exists():
        return False
    shutil.copy(shipped, task_dir / RECORDED)
    return True
