"""The whole job behind `smithbot run` and `smithbot demo`: scan, extract the hottest kernels, evolve, verify and
propose, one kernel after another within the time it is given, over the entry points of ``smithbot.api``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from evaluator import TaskError
from smithbot import api

# A kernel's share of --time-total, after its extraction: the search, then verification, which gets a tenth of it and
# at least VERIFY_S (on the H200 verification took 25-40 s: a fresh evaluator, and more rounds than the search's), but
# never more than half. The job aims to end END_MARGIN_S early: the interpreter's start and the workers' shutdown.
VERIFY_SHARE, VERIFY_S, END_MARGIN_S = 0.1, 40.0, 5.0
MIN_SHARE_S = 10.0  # less than this left of --time-total: no kernel can be extracted, searched and verified in it


def run_pipeline(spec: str, kernels: list[str] | None = None, top: int = 1, iterations: int = 8,
                 time_s: float | None = None, budget_usd: float | None = None, proposer: str = "tune",
                 config: str | None = None, backend: str = "auto", source: str | None = None, submit: bool = False,
                 say: Callable[[str], None] = print, on_update: Callable[[Any], None] | None = None,
                 model: str | None = None, time_total_s: float | None = None,
                 profile: str | None = None) -> list[dict[str, Any]]:
    """The whole job: scan -> extract the top-K hot kernels (or the named ones) -> evolve -> verify -> propose.
    One row per kernel says how far it got and why it stopped; a failure of one kernel does not stop the others.
    With ``profile`` (a trace that ``smithbot profile`` kept), the kernels are ranked by their measured share.

    With ``time_total_s``, the job ends inside it: what is left is shared equally among the kernels still to do, and
    a kernel's share pays for its extraction, then its search (at most ``time_s``), then its verification (what the
    search leaves: ``VERIFY_SHARE`` of the share, at least ``VERIFY_S``, at most half), which is cut at the share's
    end."""
    from evaluator import resolve_backend
    from smithbot.propose.github import ForgeError
    from smithbot.propose.pipeline import ProposeError
    from smithbot.propose.reinsert import ReinsertError

    t_start = time.monotonic()
    if time_total_s is not None and time_total_s <= 0:
        raise ValueError(f"--time-total must be positive, got {time_total_s}")
    if model:
        api.resolve_target(spec).preset(model)  # an unknown preset fails before anything is said or run
    used = resolve_backend(backend)
    if used == "interpreter":
        say("no GPU: every timing below comes from the Triton interpreter on the CPU and does not predict GPU speed")
    result = api.scan(spec, source, model=model, profile=profile)
    launched = [s for s in result.sites if s.role == "launched"]
    on_path = [s for s in launched if s.presets]
    say(f"scan: {len(launched)} launched kernels in {result.target.name}, {len(on_path)} on "
        f"{'the ' + model if model else 'a preset'}'s default serving path; hottest: "
        + ", ".join(f"{s.name} ({s.hotness:g})" for s in launched[:4]))
    rows: list[dict[str, Any]] = []
    picks = [api.find_kernel(result, k) for k in kernels] if kernels else launched
    wanted = len(kernels) if kernels else top
    for site in picks:
        done = len([r for r in rows if r.get("task")])
        if done >= wanted:
            break
        row: dict[str, Any] = {"kernel": site.name, "stage": "extract", "presets": list(site.presets),
                               "default_path": site.default_path}
        deadline = None
        if time_total_s is not None:
            left = time_total_s - END_MARGIN_S - (time.monotonic() - t_start)
            if left < MIN_SHARE_S:
                say(f"the total time budget ({time_total_s:.0f} s) is spent: {site.name} and the rest are left")
                break
            deadline = time.monotonic() + left / (wanted - done)
        if site.default_path:
            say(f"pick: {site.name}: {site.default_path}")
        rows.append(row)
        # the self-check's two steps (prepare, evaluate) fit in the kernel's share
        check_s = 300.0 if deadline is None else max(1.0, min(300.0, (deadline - time.monotonic()) / 4))
        [cov] = api.extract(spec, f"{site.path}::{site.qualname}", source=source, timeout_s=check_s)
        if not cov.checked or cov.out is None:
            row["why"] = cov.why
            say(f"extract: {site.name} skipped: {cov.why}")
            continue
        row["task"] = str(cov.out)
        say(f"extract: {cov.kernel} -> {cov.out} (self-check passed)")
        row["stage"] = "evolve"
        search_s = time_s
        if deadline is not None:
            left = deadline - time.monotonic()
            share = max(1.0, left - min(max(VERIFY_S, VERIFY_SHARE * left), left / 2))
            search_s = min(search_s, share) if search_s is not None else share
        try:
            status = api.evolve(cov.out, proposer=proposer, iterations=iterations, time_s=search_s,
                                budget_usd=budget_usd, islands=2, seed=0, backend=used, config=config,
                                on_update=on_update)
        except TaskError as exc:  # the task broke where the self-check did not look (more workers, the search's cases)
            row["why"] = f"the search could not start: {exc}"
            say(f"evolve: {site.name} stopped: {exc}")
            continue
        row.update(run=status.run_id, best=status.best, evaluated=status.evaluated, gpu_busy=status.gpu_busy,
                   capture_failures=status.capture_failures)
        say(f"evolve: run {status.run_id}, {status.message}; best {status.best or 0:.3f}x over {status.evaluated} "
            "evaluated candidates" + (f"; GPU busy {status.gpu_busy:.0%} of the search" if status.gpu_busy else ""))
        if status.host_bound:
            row["why"] = status.host_bound
            continue
        row["stage"] = "verify"
        v = api.verify(status.run_id, top=2, backend=used, deadline=deadline)
        for verdict in v.verdicts:
            say(f"verify: {verdict.candidate} {'accepted' if verdict.accepted else 'rejected'}: {verdict.reason}")
        row["verification"] = str(v.path)
        if v.winner is None:
            row["why"] = "no candidate passed verification"
            continue
        row["speedup"] = next(d.speedup for d in v.verdicts if d.candidate == v.winner)
        row["stage"] = "propose"
        try:
            [(_, published)] = api.propose([status.run_id], submit=submit, source=source)
        except (ProposeError, ReinsertError, ForgeError) as exc:
            row["why"] = str(exc)
            continue
        out = Path(published.where) if published.action == "written" else None
        row.update(stage="proposed", action=published.action, where=published.where, detail=published.detail)
        if out is not None:
            row.update(pr=str(out / "pr.md"), patch=str(out / "patch.diff"), test=str(next(out.glob("test_*.py"))))
    return rows


def summary_markdown(target: str, rows: list[dict[str, Any]], backend_note: str = "") -> str:
    """The run's markdown summary (also appended to $GITHUB_STEP_SUMMARY by the CLI)."""
    lines = [f"## smithbot run: {target}", ""]
    if backend_note:
        lines += [f"> {backend_note}", ""]
    lines += ["| kernel | reached | best in search | verified | GPU busy | outcome |", "|---|---|---|---|---|---|"]
    for r in rows:
        best = f"{r['best']:.3f}x" if r.get("best") else "-"
        ver = f"{r['speedup']:.3f}x" if r.get("speedup") else "-"
        busy = f"{r['gpu_busy']:.0%}" if r.get("gpu_busy") is not None else "-"
        outcome = r.get("where") or r.get("why", "")
        lines.append(f"| `{r['kernel']}` | {r['stage']} | {best} | {ver} | {busy} | "
                     f"{str(outcome).replace('|', '/')[:300]} |")
    syncs = [(r["kernel"], where) for r in rows for where in r.get("capture_failures") or ()]
    if syncs:
        lines += ["", "Calls no CUDA graph captures (a host sync or CPU work on the serving path is a finding in "
                  "itself):", ""]
        lines += [f"- `{k}`, {where}" for k, where in syncs]
    return "\n".join(lines) + "\n"


def demo(kernel: str = "rms_norm", iterations: int = 8, backend: str = "auto",
         say: Callable[[str], None] = print, on_update: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """The whole job on the bundled demo target, offline, through the local forge. Returns the paths it wrote."""
    from smithbot.propose.pipeline import ProposeError

    [row] = run_pipeline("demo", [kernel], iterations=iterations, backend=backend, say=say, on_update=on_update)
    if row["stage"] != "proposed":
        raise ProposeError(f"the demo stopped at {row['stage']}: {row.get('why', '')}")
    return row


def demo_fusion(iterations: int = 4, backend: str = "auto", say: Callable[[str], None] = print,
                on_update: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """The fusion path on the demo mini-engine: scan finds its torch glue on the default path, extraction makes the
    glue a fusion task, the ``inductor`` proposer seeds a search with torch.compile's kernels for it (compiled on a
    GPU; without one, the Inductor output recorded for the demo's glue), verification judges the result, and a
    verified winner is re-inserted in place of the glue's lines through the local forge. Returns how far it got."""
    import shutil

    from evaluator import resolve_backend
    from smithbot.config import TARGETS_DIR
    from smithbot.evolve.inductor import RECORDED

    used = resolve_backend(backend)
    result = api.scan("demo")
    if not result.fusion:
        raise ValueError("the demo engine's scan found no torch glue")
    glue = result.fusion[0]
    say(f"scan: torch glue in {glue.function} ({glue.path}:{glue.first}-{glue.last}): {', '.join(glue.ops)}; "
        f"{glue.per_step} launches a step" + (f"; {glue.todos[0]}" if glue.todos else ""))
    [cov] = api.extract("demo", f"glue:{glue.function}")
    row: dict[str, Any] = {"kernel": f"glue:{glue.function}", "stage": "extract", "task": str(cov.out)}
    if not cov.checked or cov.out is None:
        row["why"] = cov.why
        return row
    say(f"extract: the glue as fusion task {cov.out} (its baseline is the glue itself; self-check passed)")
    recording = TARGETS_DIR / "demo" / "inductor" / f"{glue.function}.json"
    if used != "cuda" and recording.exists():
        shutil.copy(recording, cov.out / RECORDED)
        say("inductor: no GPU here, so the seed is the Inductor output recorded for this glue on an H200")
    row["stage"] = "evolve"
    status = api.evolve(cov.out, proposer="inductor", iterations=iterations, islands=1, seed=0, backend=used,
                        on_update=on_update)
    row.update(run=status.run_id, best=status.best, evaluated=status.evaluated)
    say(f"evolve: run {status.run_id}, {status.message}; {status.correct} of {status.evaluated} candidates correct, "
        f"best {status.best or 0:.3f}x")
    if not status.correct:
        row["why"] = status.message
        return row
    if not status.best:  # correct, and slower than the glue: nothing for verification to re-measure
        row["why"] = ("the Inductor seed is correct on every case, and slower: the interpreter runs Triton in "
                      "Python, so torch's CPU ops beat an interpreted kernel; on a GPU (`--backend cuda`) the same "
                      "path goes on to verification and the patch" if used == "interpreter" else
                      "no candidate was faster than the glue")
        return row
    row["stage"] = "verify"
    v = api.verify(status.run_id, top=1, backend=used)
    for verdict in v.verdicts:
        say(f"verify: {verdict.candidate} {'accepted' if verdict.accepted else 'rejected'}: {verdict.reason}")
    row["verification"] = str(v.path)
    if v.winner is None:
        row["why"] = "no candidate passed verification"
        return row
    row["stage"] = "propose"
    [(_, published)] = api.propose([status.run_id])
    out = Path(published.where)
    row.update(stage="proposed", pr=str(out / "pr.md"), patch=str(out / "patch.diff"),
               test=str(next(out.glob("test_*.py"))))
    return row
