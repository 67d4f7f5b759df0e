"""The typer CLI: argument parsing and display only; the work is in ``api.py``. This module holds the commands up to
extraction and the entry point; ``cli_search.py`` the search and everything after it."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich import box
from rich.progress import Progress
from rich.table import Table

from evaluator import EvalResult, load_task
from evaluator.pool import BACKENDS
from evaluator.task import check_candidate_files
from smithbot import __version__, api
from smithbot.cli_common import _fail, app, err, one_of, out, out_folder, positive
from smithbot.config import get_target, target_names
from smithbot.errors import SmithbotError
from smithbot.measure import bandwidth, compute, headroom

_STYLE = {"promoted": "bold green", "correct": "green", "flagged": "yellow", "incorrect": "red", "rejected": "red"}


def _table(task: str, results: list[EvalResult]) -> Table:
    t = Table(title=f"{task}: {results[0].backend if results else ''}", show_lines=False)
    for col in ("candidate", "status", "speedup [95% CI]", "why"):
        t.add_column(col)
    for r in results:
        speed = f"{r.speedup:.3f}x [{r.speedup_ci[0]:.3f}, {r.speedup_ci[1]:.3f}]" if r.speedup and r.speedup_ci else "-"
        why = "; ".join(r.flags) or (f"{r.reason}: {r.detail}" if r.reason else r.detail)
        t.add_row(Path(r.candidate).name, f"[{_STYLE.get(r.status, 'magenta')}]{r.status}[/]", speed, why)
    return t


def _case_table(r: EvalResult) -> Table:
    t = Table(title=f"{Path(r.candidate).name}: per case ({r.timing_method})")
    for col in ("case", "base µs", "cand µs", "ratio [95% CI]", "GB/s", "of copy BW", "L2"):
        t.add_column(col, justify="right")
    for c in r.cases:
        lo, hi = c["ratio_ci"]
        t.add_row(c["name"], f"{c['base_us']:.2f}", f"{c['cand_us']:.2f}", f"{c['ratio']:.3f} [{lo:.3f}, {hi:.3f}]",
                  f"{c['cand_gbps']:.0f}", f"{c['cand_bw_fraction']:.0%}", "cold" if c["l2_cold"] else "warm")
    return t


@app.command("eval")
def eval_cmd(
    task: str = typer.Argument(..., help="task directory, or a bundled task name (see `smithbot tasks`)"),
    candidates: List[Path] = typer.Argument(..., help="candidate kernel.py files"),
    backend: str = typer.Option("auto", callback=one_of(*BACKENDS), help="cuda (time on a GPU), interpreter (CPU; its timings do not predict GPU speed) or auto"),
    rounds: Optional[int] = typer.Option(None, min=1, help="interleaved timing rounds per shape case (default: 30 on cuda, "
                                                     "7 on the interpreter)"),
    timeout: float = typer.Option(300.0, callback=positive, help="seconds per candidate, compile plus run"),
    min_gain: float = typer.Option(0.02, min=0, help="promotion needs the interval's lower bound above 1 + this, and each "
                                              "case claimed faster by this much to pass its sign test"),
    as_json: bool = typer.Option(False, "--json", help="print JSON results instead of tables"),
) -> None:
    """Evaluate candidates against a task's baseline: guard, compile, correctness, timing and a verdict."""
    try:
        check_candidate_files(candidates)
        with err.status("evaluating (the first candidate also prepares the task)..."):
            warnings, results = api.evaluate(task, list(candidates), backend=backend, timeout_s=timeout,
                                             rounds=rounds, min_gain=min_gain)
    except SmithbotError as exc:
        _fail(str(exc))
        return
    for w in warnings:
        err.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    if as_json:
        for r in results:
            print(json.dumps(r.to_dict()))
        return
    out.print(_table(task, results))
    for r in results:
        if r.cases:
            out.print(_case_table(r))
    if results and results[0].backend == "interpreter":
        err.print("note: interpreter timings measure the CPU interpreter and do not predict GPU speed")


@app.command("tasks")
def tasks_cmd() -> None:
    """List the bundled example tasks."""
    t = Table(title="bundled tasks")
    for col in ("name", "kind", "entry", "cases"):
        t.add_column(col)
    for name in api.bundled_tasks():
        task = load_task(api.BUNDLED_TASKS / name)
        t.add_row(name, task.kind, task.entry, ", ".join(c.name for c in task.cases))
    out.print(t)


@app.command("targets")
def targets_cmd() -> None:
    """List the bundled targets (a target YAML of your own, any git URL or local path also works as a target)."""
    t = Table(title="targets")
    for col in ("name", "repository", "include", "models", "open-PR cap"):
        t.add_column(col)
    try:
        for name in target_names():
            tg = get_target(name)
            t.add_row(name, tg.repo if not tg.bundled else f"bundled ({tg.repo}/)", ", ".join(tg.include),
                      ", ".join(m.name for m in tg.models), str(tg.conventions.max_open_prs))
    except SmithbotError as exc:
        _fail(str(exc))
    out.print(t)


@app.command("scan")
def scan_cmd(
    target: str = typer.Argument("demo", help="a bundled target (see `smithbot targets`), a target YAML, a git URL "
                                                "or a local path"),
    source: Optional[Path] = typer.Option(None, help="scan this existing checkout; no network"),
    rev: Optional[str] = typer.Option(None, help="pin a commit, tag or branch"),
    model: Optional[str] = typer.Option(None, help="rank for one model preset's default serving path (default: "
                                                   "over all of the target's presets)"),
    sets: Optional[List[str]] = typer.Option(None, "--set", help="override a serving default, KEY=VALUE "
                                                                 "(e.g. attention_backend=triton); repeatable"),
    profile: Optional[Path] = typer.Option(None, help="torch-profiler Chrome trace (see `smithbot profile`): rank "
                                                      "by measured share of GPU time"),
    as_json: bool = typer.Option(False, "--json", help="print the ranked kernels as JSON"),
    limit: int = typer.Option(30, min=0, help="rows to show (0: all)"),
    show_all: bool = typer.Option(False, "--all", help="also list helpers and kernels that are never launched"),
) -> None:
    """Find a target's Triton kernels, link their launches and wrappers, and rank them: measured share of a step
    when a profile is given, else the kernels the presets' default serving path reaches first (the call graph under
    the target's declared serving defaults), with the path in `why`."""
    try:
        with Progress(console=err, transient=True) as bar:
            task_id = bar.add_task("parsing", total=None)
            result = api.scan(target, str(source) if source else None, rev, str(profile) if profile else None,
                              progress=lambda n, total: bar.update(task_id, completed=n, total=total), model=model,
                              sets=api.parse_sets(list(sets or [])))
    except SmithbotError as exc:
        _fail(str(exc))
        return
    _print_sites(result, [s for s in result.sites if show_all or s.role == "launched"], as_json, limit)
    if not as_json:
        _print_fusion(result.fusion, limit)
    for path, why in result.errors:
        err.print(f"[yellow]skipped[/yellow] {path}: {why}", highlight=False)
    err.print(f"{result.files} files, {result.parsed} parsed, {result.cached} from cache; "
              f"wrote {result.path}", highlight=False)


def _print_sites(result: "api.ScanResult", sites: list, as_json: bool, limit: int) -> None:
    shown = sites[:limit] if limit else sites
    if as_json:
        fusion = result.fusion[:limit] if limit else result.fusion
        print(json.dumps([s.to_dict() for s in shown] + [f.to_dict() for f in fusion], indent=1))
        return
    t = Table(title=f"{result.target.name} @ {(result.checkout.commit or 'bundled')[:12]}: "
                    f"{len(sites)} kernels", show_lines=False)
    for col in ("#", "kernel", "file:line", "family", "class", "hotness", "why"):
        t.add_column(col, overflow="fold")
    for i, s in enumerate(shown, 1):
        cls = s.extraction + (f" ({', '.join(s.blockers[:3])})" if s.blockers else "")
        why = "; ".join(s.reasons) + (f"\n{s.default_path}" if s.default_path else "")
        t.add_row(str(i), s.name, f"{s.path}:{s.line}", s.family, cls, f"{s.hotness:g}\n{s.reach}".strip(), why)
    out.print(t)


def _print_fusion(fusion: list, limit: int) -> None:
    """Torch glue on the default paths (kind: fusion), after the kernels: short, the rest is in scan.json."""
    if not fusion:
        return
    t = Table(title=f"fusion candidates: {len(fusion)} run{'' if len(fusion) == 1 else 's'} of torch glue on default paths", show_lines=False,
              caption="default runs first, then by launches per step, a third per undecided test on the path; all in scan.json; "
                      "`smithbot extract TARGET glue:FUNCTION[:LINE]` makes one a fusion task")
    for col in ("#", "glue", "launches/step", "ops"):
        t.add_column(col, overflow="fold")
    for i, f in enumerate(fusion[:limit] if limit else fusion, 1):
        ops = " ".join(f.ops[:8]) + (f" …+{len(f.ops) - 8}" if len(f.ops) > 8 else "")
        todo = f"\nTODO {f.todos[0].split(': ', 1)[-1][:40]}" if f.todos else ""
        t.add_row(str(i), f"{f.function}\n{f.path.split('/')[-1]}:{f.first}-{f.last}\n{f.reach}",
                  f"{f.per_step}\n{f.frequency}", ops + todo)
    out.print(t)


@app.command("profile")
def profile_cmd(
    target: str = typer.Argument(..., help="a bundled target, a target YAML, a git URL or a local path"),
    model: Optional[str] = typer.Option(None, help="the model preset to run (its config.json is written from "
                                                   "targets/models.yaml; weights are random)"),
    batch: int = typer.Option(8, min=1, help="requests in the batch"),
    phase: str = typer.Option("decode", callback=one_of(*api.PHASES), help="decode or prefill"),
    trace: Optional[Path] = typer.Option(None, help="read this torch-profiler Chrome trace instead of running "
                                                    "the target's benchmark"),
    source: Optional[str] = typer.Option(None, help="an existing checkout of the target (with the engine "
                                                    "installed, to run its benchmark)"),
    limit: int = typer.Option(20, min=0, help="rows to show (0: all)"),
    from_tasks: bool = typer.Option(False, "--from-tasks", help="no engine needed: extract the preset's hottest "
                                    "kernels and glue runs, time each baseline at its decode (batch 64) and prefill "
                                    "cases, and multiply by the launches per step"),
    top: int = typer.Option(30, min=1, help="with --from-tasks: how many kernels and glue runs to measure"),
) -> None:
    """Measure where a step's GPU time goes: run the target's own benchmark on random weights under the torch
    profiler (the `profile:` command in its target YAML; needs the engine and a GPU), or read a trace you have, and
    rank the target's Triton kernels by their share of it. With --from-tasks, the step is measured from extracted
    tasks instead (on the GPU, or under the interpreter on a CPU, labelled so). The trace is kept in the workspace;
    `smithbot scan --profile TRACE` ranks by it again."""
    if from_tasks:
        if trace is not None:
            _fail("--from-tasks measures the step from tasks; --trace reads one measured otherwise: pass one of them")
        _profile_tasks(target, model, top, source, limit)
        return
    try:
        result = api.profile(target, model, batch, phase, str(trace) if trace else None, source)
    except SmithbotError as exc:
        _fail(str(exc))
        return
    measured = [s for s in result.sites if s.measured_share]
    t = Table(title=f"{result.target.name}: GPU time per {result.profile.phase_label()}, "
                    f"{result.profile.total_us / result.profile.steps:.1f} µs in all")
    for col in ("#", "kernel", "file:line", "share", "µs per step", "default path"):
        t.add_column(col, overflow="fold")
    for i, s in enumerate(measured[:limit] if limit else measured, 1):
        t.add_row(str(i), s.name, f"{s.path}:{s.line}", f"{s.measured_share:.1%}", f"{s.measured_us:.1f}",
                  s.default_path or "-")
    out.print(t)
    names = {s.name for s in result.sites}
    ops = result.profile.ops(names, top=8)
    if ops:
        o = Table(title="other GPU work in the step (torch ops and libraries: what a fusion would replace)")
        for col in ("kernel", "µs per step", "launches per step"):
            o.add_column(col, overflow="fold")
        for name, us, n in ops:
            o.add_row(name[:100], f"{us:.1f}", f"{n:g}")
        out.print(o)
    err.print(f"trace: {result.trace}", highlight=False)


def _profile_tasks(target: str, model: str | None, top: int, source: str | None, limit: int) -> None:
    if not model:
        _fail("--from-tasks measures one model preset's step: name it with --model")

    try:
        with err.status("extracting and timing…") as status:
            table, trace = api.profile_tasks(target, model, top, source,
                                             progress=lambda name: status.update(f"timing {name}…"))
    except SmithbotError as exc:
        _fail(str(exc))
        return
    where = "on the GPU" if table.backend == "cuda" else "under the interpreter (CPU times, not a GPU's)"
    t = Table(title=f"{table.target}: {table.preset}'s step measured from tasks {where}, "
                    f"{table.measured_us:.1f} µs/step in the measured part")
    for col in ("#", "kernel or glue", "reach", "a step", "µs (decode)", "µs/step (share of the measured part)",
                "µs (prefill)", "of copy bw", "of dense matmul rate", "µs/step to save at most", "note"):
        t.add_column(col, overflow="fold")
    rows = sorted(table.rows, key=lambda r: -(r.us_per_step or -1.0))
    for i, r in enumerate(rows[:limit] if limit else rows, 1):
        share = table.share(r)
        timed = r.us_per_step is not None and share is not None
        t.add_row(str(i), r.name, r.reach, f"{r.per_step}", _us(r.us),
                  f"{r.us_per_step:.1f} ({share:.1%})" if timed else "-", _us(r.prefill_us),
                  bandwidth(r.bw_fraction), compute(r),
                  f"{r.us_per_step * headroom(r, table.launch_us):.1f}" if timed else "-", r.why or r.note)
    if table.launch_us:
        err.print(f"an empty launch costs {table.launch_us:.2f} µs here: no call saves more than its time less that",
                  highlight=False)
    out.print(t)
    err.print(f"trace: {trace}", highlight=False)


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@app.command("extract")
def extract_cmd(
    target: str = typer.Argument(..., help="a bundled target, a target YAML, a git URL or a local path"),
    kernel: Optional[str] = typer.Argument(None, help="kernel name, wrapper name, file::qualname, or glue:FUNCTION[:LINE] for torch glue (scan lists it under fusion)"),
    out_dir: Optional[Path] = typer.Option(None, "--out", callback=out_folder, help="task directory (default: the workspace's tasks/)"),
    source: Optional[Path] = typer.Option(None, help="use this existing checkout; no network"),
    rev: Optional[str] = typer.Option(None, help="pin a commit, tag or branch"),
    all_kernels: bool = typer.Option(False, "--all", help="extract every launched kernel and print the coverage"),
    top: Optional[int] = typer.Option(None, "--top", min=1, help="extract the N hottest launched kernels (scan's "
                                      "ranking) and print their coverage"),
    check: bool = typer.Option(True, help="self-check each task: on the GPU's cases when there is a GPU, else under "
                               "the Triton interpreter"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="self-checks run at once (default: one per "
                                                                          "CPU core)"),
    config: Optional[Path] = typer.Option(None, "--config", help="an evolve config whose llm: section writes the "
                                          "inputs that inference could not (kept only if the baseline then passes "
                                          "its self-check)"),
    timeout: float = typer.Option(300.0, "--check-timeout", callback=positive, help="seconds one self-check evaluation may "
                                  "take before the task is reported as too slow"),
    as_json: bool = typer.Option(False, "--json", help="with --all or --top: print every row in full, as JSON"),
) -> None:
    """Turn a kernel and its launcher into a standalone task directory (task.yaml, kernel.py, harness.py)."""
    try:
        with Progress(console=err, transient=True) as bar:
            task_id = bar.add_task("extracting, then self-checking", total=None)
            rows = api.extract(target, kernel, out_dir, str(source) if source else None, rev, all_kernels, check,
                               progress=lambda n, total: bar.update(task_id, completed=n, total=total), jobs=jobs,
                               config=config, timeout_s=timeout, top=top)
    except SmithbotError as exc:
        _fail(str(exc))
        return
    if not all_kernels and top is None:
        row = rows[0]
        if not row.extracted:
            _fail(row.why)
        out.print(f"wrote {row.out}")
        if check and not row.checked:
            _fail(f"self-check failed: {row.why}")
        if check:
            err.print(f"self-check: {row.why}")
        return
    if as_json:
        print(json.dumps([{"kernel": r.kernel, "path": r.path, "extracted": r.extracted, "checked": r.checked,
                           "why": r.why, "task": str(r.out) if r.out else None} for r in rows], indent=1))
    else:  # one line a row in a terminal; in a CI log or a pipe every reason whole, folded over lines
        t = Table(title=f"{target}: extraction coverage", box=box.SIMPLE)
        wide = out.width >= 120  # the file column only where there is room for it
        kernel_w = min(32, max((len(r.kernel) for r in rows), default=6))
        t.add_column("kernel", max_width=32, overflow="fold")
        if wide:
            t.add_column("file", max_width=30, overflow="fold")
        t.add_column("result", no_wrap=True)
        t.add_column("why not", max_width=max(16, out.width - kernel_w - (30 if wide else 0) - 9 - 12),
                     overflow="ellipsis" if out.is_terminal else "fold", no_wrap=out.is_terminal)
        for r in rows:
            why = "" if r.checked else r.why.removeprefix(f"{r.kernel}: ")
            result = "passed" if r.checked else ("extracted" if r.extracted else "failed")
            t.add_row(r.kernel, *(["/".join(Path(r.path).parts[-2:])] if wide else []), result, why)
        out.print(t)
    n = len(rows)
    which = f"the {n} hottest" if top else str(n)
    err.print(f"{which} launched kernels: {sum(r.extracted for r in rows)} extracted, "
              f"{sum(r.checked for r in rows)} passed the self-check ({sum(r.checked for r in rows) / max(n, 1):.0%})")


importlib.import_module("smithbot.cli_search")  # its commands (evolve ... run) come after those above


@app.command("version")
def version_cmd() -> None:
    """Print smithbot's version."""
    print(__version__)


def main() -> None:
    """Run the CLI. A usage error (an unknown option, a value out of its range) is one line on stderr naming the
    command and the option as typed, and exit 2, before any work starts."""
    # typer's own copy of click's exceptions (recent typers vendor click; older ones use click itself)
    usage, clicks = (next(c for c in typer.BadParameter.__mro__ if c.__name__ == n)
                     for n in ("UsageError", "ClickException"))
    try:
        code = app(prog_name="smithbot", standalone_mode=False)
    except usage as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `smithbot`: its help
            print(e.ctx.get_help())
            sys.exit(0)
        where = e.ctx.command_path if e.ctx is not None else "smithbot"
        err.print(f"error: {where}: {' '.join(e.format_message().split())}", highlight=False, soft_wrap=True,
                  markup=False)
        sys.exit(2)
    except clicks as e:
        err.print(f"error: {e.format_message()}", highlight=False, soft_wrap=True, markup=False)
        sys.exit(e.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        err.print("interrupted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)

