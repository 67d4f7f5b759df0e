"""The CLI's commands from the search on: evolve, runs, report, export-dataset, verify, propose, and the whole job
(demo, run). Parsing and display only; the work is in ``api.py`` and ``job.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Optional

import typer
from rich import box
from rich.live import Live
from rich.table import Table

from evaluator.pool import BACKENDS
from smithbot import api, job
from smithbot.cli_common import _fail, _live_table, app, err, one_of, out, out_file, out_folder, positive
from smithbot.dataset import export
from smithbot.errors import SmithbotError
from smithbot.evolve.db import RunDB
from smithbot.evolve.search import run_dir
from smithbot.report import report


@app.command("evolve")
def evolve_cmd(
    task: Optional[str] = typer.Argument(None, help="task directory or bundled task name (optional with --resume)"),
    proposer: Optional[str] = typer.Option(None, callback=one_of(*api.PROPOSERS), help="tune (offline, the default), llm (an OpenAI-compatible "
                                                      "endpoint from --config), inductor (a fusion task: "
                                                      "torch.compile's kernels for its glue, then tuned; needs a "
                                                      "GPU) or replay (--replay FILE)"),
    iterations: Optional[int] = typer.Option(None, min=1, help="stop after this many proposals"),
    time_s: Optional[float] = typer.Option(None, "--time", callback=positive, help="stop after this many seconds, the baseline's "
                                                                 "evaluation included; what is in flight then is "
                                                                 "cancelled"),
    budget_usd: Optional[float] = typer.Option(None, callback=positive, help="stop when the LLM cost reaches this many dollars"),
    budget_tokens: Optional[int] = typer.Option(None, min=1, help="stop when this many LLM tokens are spent"),
    islands: Optional[int] = typer.Option(None, min=1, help="islands, each with its own MAP-Elites grid (default 4)"),
    workers: Optional[int] = typer.Option(None, min=1, help="evaluation workers per GPU (default: one per two CPU cores a GPU has, 2 to 8; 1 on the interpreter)"),
    seed: Optional[int] = typer.Option(None, min=0, help="random seed (default 0)"),
    patience: Optional[int] = typer.Option(None, min=1, help="stop after this many evaluations without a better best "
                                                      "(default 60)"),
    migrate_every: Optional[int] = typer.Option(None, min=1, help="evaluations per island between ring migrations "
                                                           "(default 6)"),
    resume: Optional[str] = typer.Option(None, help="continue this run (after a crash or kill -9)"),
    config: Optional[Path] = typer.Option(None, help="YAML with `llm:` (base_url, api_key_env, models...) and "
                                                     "`prices:` (USD per million tokens)"),
    replay: Optional[Path] = typer.Option(None, help="JSONL of recorded responses, for --proposer replay"),
    backend: Optional[str] = typer.Option(None, callback=one_of(*BACKENDS), help="cuda, interpreter or auto (default auto)"),
    db: Optional[Path] = typer.Option(None, help="run database (default $SMITHBOT_HOME/runs.db)"),
    cluster: Optional[str] = typer.Option(None, help="where candidates are evaluated: local (this host's GPUs; the "
                                                     "default), ray (RAY_ADDRESS, else a Ray cluster of this host) or "
                                                     "ray://HOST[:PORT] (a Ray cluster's head); also `evaluator: "
                                                     "{cluster: ...}` in --config. Needs smithbot[ray]"),
) -> None:
    """Evolve faster variants of a task's kernel: islands of MAP-Elites grids, every candidate through the evaluator,
    every outcome committed to the run database before the next proposal (so --resume loses nothing)."""
    try:
        with Live(Table(), console=err, refresh_per_second=4, transient=False) as live:
            status = api.evolve(task, proposer, iterations, time_s, budget_usd, budget_tokens, islands, workers, seed,
                                resume, str(config) if config else None, str(replay) if replay else None, backend,
                                patience, migrate_every, db, on_update=lambda s: live.update(_live_table(s)),
                                cluster=cluster)
    except SmithbotError as exc:
        _fail(str(exc))
        return
    if status.best_id:
        ci = f" [{status.best_ci[0]:.3f}, {status.best_ci[1]:.3f}]" if status.best_ci else ""
        out.print(f"run {status.run_id}: {status.message}; best {status.best:.3f}x{ci} (candidate {status.best_id}), "
                  f"{status.correct}/{status.evaluated} correct, ${status.cost:.4f}")
    else:
        out.print(f"run {status.run_id}: {status.message}; no correct candidate")
    if status.busy_line():
        out.print(status.busy_line())
    for line in status.lost:
        out.print(f"lost a worker with its machine (what it was evaluating went to another): {line}")
    for where in status.capture_failures:
        out.print(f"no CUDA graph captures the baseline's call on {where}")
    if status.best_id:
        err.print(f"next: smithbot report {status.run_id}")


@app.command("runs")
def runs_cmd(db: Optional[Path] = typer.Option(None, help="run database (default $SMITHBOT_HOME/runs.db)"),
             as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """List evolution runs with their best speedup."""
    try:
        rows = api.runs(db)
    except SmithbotError as exc:
        _fail(str(exc))
        return
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    # narrow enough for a CI log or a pipe (80 columns): proposer, interval and the rest are --json's
    t = Table(title="runs", box=box.SIMPLE)
    t.add_column("run", no_wrap=True)
    t.add_column("task", max_width=24, overflow="fold")
    t.add_column("correct", justify="right", no_wrap=True)
    t.add_column("best", justify="right", no_wrap=True)
    show_cost = any(r["cost"] for r in rows)
    if show_cost:
        t.add_column("cost", justify="right", no_wrap=True)
    task_w = min(24, max((len(r["task"]) for r in rows), default=4))
    t.add_column("why stopped", max_width=max(12, out.width - 22 - task_w - 7 - 7 - 16), overflow="ellipsis",
                 no_wrap=True)
    for r in rows:
        best = ("-" if r["best"] is None else f"{r['best']:.3f}x") if not r.get("launches") else \
            ", ".join(f"{a}->{b} launches" for a, b in r["launches"])
        cells = [r["id"], r["task"], f"{r['correct']}/{r['candidates']}", best]
        if show_cost:
            cells.append(f"${r['cost']:.2f}")
        t.add_row(*cells, r["message"] if r["status"] == "finished" else f"{r['status']}: {r['message']}")
    out.print(t)
    if not rows:
        err.print("no runs yet: `smithbot evolve TASK` starts one")


@app.command("report")
def report_cmd(run: str = typer.Argument(..., help="run id (see `smithbot runs`)"),
               out_dir: Optional[Path] = typer.Option(None, "--out", callback=out_folder, help="output folder (default: the run's folder)"),
               db: Optional[Path] = typer.Option(None, help="run database (default $SMITHBOT_HOME/runs.db)")) -> None:
    """Write a self-contained HTML report and a markdown summary of a run: progress per island, correct rate, and
    the lineage of the best candidate with its diffs."""
    path = api.db_path(db)
    if not path.exists():
        _fail(f"no run database at {path}; `smithbot evolve TASK` starts a run")
    try:
        with RunDB(path) as rdb:
            r = report(rdb, run, out_dir or run_dir(rdb, run))
    except SmithbotError as exc:
        _fail(str(exc))
        return
    out.print(f"wrote {r.html}\nwrote {r.markdown}")


@app.command("export-dataset")
def export_dataset_cmd(
    runs: List[str] = typer.Argument(..., help="run ids"),
    out_file: Path = typer.Option(..., "--out", callback=out_file, help="the JSONL file to write"),
    mode: str = typer.Option("best-steps", help="best-steps (the lineage of each run's best) or improving (every "
                                                "improving step)"),
    threshold: float = typer.Option(0.01, min=0, help="a step must beat its parent by more than this fraction"),
    db: Optional[Path] = typer.Option(None, help="run database (default $SMITHBOT_HOME/runs.db)"),
) -> None:
    """Export Kernel-Smith-style training steps in chat format (one {"messages": [...]} object a line)."""
    path = api.db_path(db)
    if not path.exists():
        _fail(f"no run database at {path}")
    try:
        with RunDB(path) as rdb:
            n = export(rdb, list(runs), out_file, mode, threshold)
    except SmithbotError as exc:
        _fail(str(exc))
        return
    out.print(f"wrote {n} steps to {out_file}")


@app.command("verify")
def verify_cmd(run: str = typer.Argument(..., help="run id (see `smithbot runs`)"),
               top: int = typer.Option(3, min=1, help="how many of the run's best candidates to re-measure"),
               backend: Optional[str] = typer.Option(None, callback=one_of(*BACKENDS), help="cuda, interpreter or auto (default: the run's)"),
               db: Optional[Path] = typer.Option(None, help="run database (default $SMITHBOT_HOME/runs.db)")) -> None:
    """Re-measure a run's best candidates on every case plus extra irregular shapes, with more seeds. A candidate
    slower than the baseline on any case (beyond its interval) is rejected. Writes verification.json."""
    try:
        v = api.verify(run, top, backend, db)
    except SmithbotError as exc:
        _fail(str(exc))
        return
    for d in v.verdicts:
        speed = f"{d.speedup:.3f}x [{d.ci[0]:.3f}, {d.ci[1]:.3f}]" if d.speedup and d.ci else "-"
        out.print(f"{d.candidate}: {'[green]accepted[/]' if d.accepted else '[red]rejected[/]'} {speed}: {d.reason}")
    if not v.verdicts:
        out.print("no candidate of this run beat the baseline in the search; nothing to verify")
    out.print(f"winner: {v.winner or 'none'}; wrote {v.path}")
    if v.backend == "interpreter":
        err.print("note: interpreter timings measure the CPU interpreter and do not predict GPU speed")


@app.command("propose")
def propose_cmd(runs: Optional[List[str]] = typer.Argument(None, help="run ids (default: every verified run not "
                                                                         "yet proposed)"),
                submit: bool = typer.Option(False, help="open or update the PR on GitHub through the bot's fork "
                                                        "(token in $SMITHBOT_GITHUB_TOKEN); default: a local dry run"),
                source: Optional[Path] = typer.Option(None, help="an existing checkout of the target to branch from"),
                out_dir: Optional[Path] = typer.Option(None, "--out", callback=out_folder, help="where pr.md and patch.diff go"),
                rebase: bool = typer.Option(False, help="when upstream changed the kernel since the task was extracted, "
                                                        "re-extract it at the new head, carry the change over and "
                                                        "re-verify it (a new run) instead of stopping"),
                db: Optional[Path] = typer.Option(None, help="run database (default $SMITHBOT_HOME/runs.db)")) -> None:
    """Turn verified winners into pull requests: the change re-inserted on a branch `smithbot/<target>/<kernel>`,
    formatted, with a generated test (and benchmark, by the target's conventions), and a PR body in the target's
    template. A dry run by default."""
    try:
        done = api.propose(list(runs or []), submit, str(source) if source else None, out_dir, db, rebase)
    except SmithbotError as exc:
        _fail(str(exc))
        return
    for run_id, p in done:
        out.print(f"{run_id}: {p.action} {p.where} ({p.detail})", soft_wrap=True, highlight=False)
    if not done:
        err.print("nothing to propose: no verified run is waiting")


@app.command("demo")
def demo_cmd(kernel: str = typer.Option("rms_norm", help="the demo kernel to improve (a wrapper name)"),
             iterations: int = typer.Option(8, min=1, help="search iterations"),
             backend: str = typer.Option("auto", callback=one_of(*BACKENDS), help="cuda, interpreter or auto"),
             fusion: bool = typer.Option(False, "--fusion", help="instead, the fusion path: the demo engine's torch "
                                                                 "glue found, made a fusion task, seeded with "
                                                                 "torch.compile's kernels, verified and put back in "
                                                                 "place of the glue's lines (without a GPU, as a "
                                                                 "preview: correct, fewer launches, not timed)")
             ) -> None:
    """The whole job, offline, on the bundled demo mini-engine: scan, extract, evolve with the offline tuner,
    verify, and write a patch and a PR body through the local forge. No network, GPU or API key needed."""

    try:
        with Live(Table(), console=err, refresh_per_second=4, transient=True) as live:
            say = lambda m: live.console.print(m, highlight=False)  # noqa: E731
            row = job.demo(kernel, iterations, backend, say=say, on_update=lambda s: live.update(_live_table(s)),
                             fusion=fusion)
    except SmithbotError as exc:
        _fail(str(exc))
        return
    if row.preview:
        out.print("preview: correct on every verification case with fewer kernel launches, not timed (no GPU); "
                  "the PR body says how to time it")
    out.print(f"patch:   {row.patch}\nPR body: {row.pr}\ntest:    {row.test}\n"
              f"verification: {row.verification}\n{row.detail}", soft_wrap=True, highlight=False)


@app.command("run")
def run_cmd(target: str = typer.Argument(..., help="a target name (see `smithbot targets`), a git URL or a path"),
            top: int = typer.Option(1, min=1, help="how many of the hottest extractable kernels to work on"),
            kernel: Optional[List[str]] = typer.Option(None, help="work on these kernels instead of the top K"),
            iterations: int = typer.Option(40, min=1, help="search iterations per kernel"),
            time_s: Optional[float] = typer.Option(None, "--time", callback=positive, help="search seconds per kernel"),
            time_total: Optional[float] = typer.Option(
                None, "--time-total", callback=positive, help="seconds for the whole job, shared among the kernels (extraction, "
                                           "search and verification each count); it ends inside them"),
            budget_usd: Optional[float] = typer.Option(None, callback=positive, help="LLM dollars per kernel"),
            proposer: Optional[str] = typer.Option(None, callback=one_of(*api.PROPOSERS), help="tune, llm or inductor (default: tune; inductor "
                                                               "with --fusion)"),
            fusion: bool = typer.Option(False, "--fusion", help="work on the torch glue on the default paths "
                                                                "instead of the Triton kernels: each run of glue "
                                                                "becomes a fusion task (--kernel glue:FUNCTION)"),
            config: Optional[Path] = typer.Option(None, help="evolve config YAML (for --proposer llm)"),
            backend: str = typer.Option("auto", callback=one_of(*BACKENDS), help="cuda, interpreter or auto"),
            source: Optional[str] = typer.Option(None, help="an existing checkout of the target"),
            model: Optional[str] = typer.Option(None, help="aim at one model preset's default serving path (default: "
                                                           "over all of the target's presets)"),
            profile: Optional[Path] = typer.Option(None, help="rank the kernels by this trace's measured shares (one "
                                                              "that `smithbot profile` kept)"),
            submit: bool = typer.Option(False, help="open or update PRs on GitHub (default: a local dry run)")) -> None:
    """The scheduled job: scan, extract the top-K hot kernels, evolve, verify and propose. Writes a markdown summary
    to stdout and appends it to $GITHUB_STEP_SUMMARY when that is set."""
    try:
        with Live(Table(), console=err, refresh_per_second=4, transient=True) as live:
            rows = job.run_pipeline(target, list(kernel or []) or None, top, iterations, time_s, budget_usd, proposer,
                                    str(config) if config else None, backend, source, submit,
                                    say=lambda m: live.console.print(m, highlight=False),
                                    on_update=lambda s: live.update(_live_table(s)), model=model,
                                    time_total_s=time_total, profile=str(profile) if profile else None,
                                    fusion=fusion)
    except SmithbotError as exc:
        _fail(str(exc))
        return
    md = job.summary_markdown(target, rows)
    print(md)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as f:
            f.write(md)
