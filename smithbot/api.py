"""The entry points behind the CLI, for programmatic use."""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import yaml

from evaluator import EvalResult, Evaluator, TaskError, load_task
from smithbot import cache
from smithbot.cluster import connected
from smithbot.config import (ConfigError, Target, generic_target, get_target, load_evolve_config, load_target,
                             target_names)
from smithbot.errors import UsageError
from smithbot.evolve import proposers
from smithbot.evolve.db import RunDB
from smithbot.evolve.search import Budget, Search, SearchConfig
from smithbot.inputs.llm import asker
from smithbot.extract.pipeline import Coverage, extract_glue_site, extract_sites
from smithbot.measure import DECODE_BATCH, measure
from smithbot.profile import compact, read_trace, run_profile
from smithbot.propose.forge import LocalForge
from smithbot.propose.pipeline import ProposeError, UpstreamMoved, prepare, target_for, winner
from smithbot.propose.reinsert import ReinsertError, port
from smithbot.repo import checkout, home
from smithbot.report import preview_launches
from smithbot.scan.fusion import fusion_sites
from smithbot.scan.index import index, sources
from smithbot.scan.rank import REACH_ORDER, link, merged_answers
from smithbot.scan.reach import env_for, preset_reach, program_for
from smithbot.types import KernelSite, ScanResult
from smithbot.verify import verify as _verify

BUNDLED_TASKS = Path(__file__).resolve().parent / "tasks"


def bundled_tasks() -> list[str]:
    """Names of the example tasks shipped with smithbot."""
    return sorted(p.name for p in BUNDLED_TASKS.iterdir() if (p / "task.yaml").is_file())


def resolve_task(task: str | Path) -> Path:
    """A task directory, or the name of a bundled task."""
    path = Path(task)
    if path.is_dir():
        return path
    if isinstance(task, str) and task in bundled_tasks():
        return BUNDLED_TASKS / task
    raise TaskError(f"{task}: no such task directory or bundled task (bundled: {', '.join(bundled_tasks())})")


def evaluate(task: str | Path, candidates: list[str | Path], backend: str = "auto", timeout_s: float = 300.0,
             rounds: int | None = None, min_gain: float = 0.02) -> tuple[list[str], list[EvalResult]]:
    """Evaluate candidate files against a task's baseline. Returns the task's warnings and one result each."""
    root = resolve_task(task)
    with Evaluator(root, backend=backend, timeout_s=timeout_s, rounds=rounds, min_gain=min_gain) as ev:
        warnings = ev.prepare()
        return warnings, ev.evaluate(list(candidates))


def resolve_target(spec: str) -> Target:
    """A bundled target name, a target YAML of one's own, a git URL, or a local path (generic defaults for the last
    two)."""
    if spec in target_names():
        return get_target(spec)
    if spec.endswith((".yaml", ".yml")) and Path(spec).is_file():
        return load_target(Path(spec))
    if "://" in spec or spec.startswith("git@") or spec.endswith(".git"):
        return generic_target(spec)
    if Path(spec).is_dir():
        return generic_target(str(Path(spec).resolve()))
    raise ConfigError(f"unknown target {spec!r} (known: {', '.join(target_names())}; or pass a git URL or a path)")


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (``--set attention_backend=triton``), each value read as YAML (``false``, ``null``, 8)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: expected KEY=VALUE")
        try:
            out[key] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            out[key] = value
    return out


def scan(spec: str, source: str | None = None, rev: str | None = None, profile: str | None = None,
         progress: Callable[[int, int], None] | None = None, model: str | None = None,
         sets: dict[str, Any] | None = None) -> ScanResult:
    """Find every Triton kernel of a target, link its launches and rank it. Writes scan.json in the workspace.

    Kernels on a model preset's default serving path rank first (``model`` ranks for one preset, else over all
    of the target's presets); ``sets`` overrides serving defaults; ``profile`` (a torch-profiler Chrome trace)
    ranks by measured share of GPU time.

    The cyclic garbage collector is paused meanwhile: a scan builds millions of small, acyclic objects (its caches'
    facts), and the collector's passes over them were a fifth of a warm scan."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _scan(spec, source, rev, profile, progress, model, sets)
    finally:
        if collecting:
            gc.enable()


def _scan(spec: str, source: str | None, rev: str | None, profile: str | None,
          progress: Callable[[int, int], None] | None, model: str | None, sets: dict[str, Any] | None) -> ScanResult:
    target = resolve_target(spec)
    presets = [target.preset(model)] if model else list(target.models)
    if sets:
        target = target.with_settings(sets)
    measured = read_trace(profile) if profile else None
    if source is None and target.file is None and Path(spec).is_dir():
        source = spec  # a local checkout given as the target itself
    co = checkout(target, source, rev)
    texts = sources(co.root, target.include, target.exclude)
    if measured is None:
        key = _result_key(target, presets, texts)
        scanned = _cached_result(target.name, key)
        if scanned is None:
            scanned = _ranked(co.root, texts, target, presets, None, None, progress)
            cache.store_keyed(_result_path(target.name), key, scanned)
    else:
        scanned = _ranked(co.root, texts, target, presets, profile, measured, progress)
    out = home() / "workspaces" / target.name / "scan.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    names = {s.name for s in scanned.sites}
    tmp.write_text(json.dumps({"target": target.name, "root": str(co.root), "commit": co.commit, "url": co.url,
                               "files": len(texts), "errors": [list(e) for e in scanned.errors],
                               "model": model, "sets": sets or {},
                               "profile": measured.summary(names) if measured else None,
                               "default_paths": scanned.default_paths,
                               "kernels": [s.to_dict() for s in scanned.sites],
                               "fusion": [f.to_dict() for f in scanned.fusion]}))  # no indent: the C encoder
    tmp.replace(out)
    return ScanResult(target, co, scanned.sites, scanned.errors, scanned.modules, len(texts), scanned.parsed,
                      scanned.cached, out, scanned.fusion)


@dataclass(frozen=True)
class _Scanned:
    """What a scan computes from a checkout's files: kept whole, so that a scan of unchanged files under unchanged
    code and settings reads it back instead of linking, walking and ranking again."""

    sites: list[KernelSite]
    fusion: list[Any]
    errors: list[tuple[str, str]]
    modules: dict[str, str]
    default_paths: dict[str, str | None] | None
    parsed: int
    cached: int


@functools.lru_cache(maxsize=1)
def _scanner() -> Any:
    """A digest of every module of smithbot's own: a scan's result depends on the scanner, its graph, the target's
    config code and the types it is kept as. Made on the first scan, not at import."""
    return hashlib.sha1(b"".join(p.read_bytes() for p in sorted(Path(__file__).resolve().parent.rglob("*.py"))))


def _result_key(target: Target, presets: list[Any], texts: dict[str, bytes]) -> str:
    h = _scanner().copy()
    h.update(repr((target, presets)).encode())
    for rel in sorted(texts):
        h.update(rel.encode() + b"\0")
        h.update(texts[rel])
    return h.hexdigest()


def _result_path(name: str) -> Path:
    return home() / "cache" / "result" / f"{name}.pickle"


def _cached_result(name: str, key: str) -> _Scanned | None:
    """The last scan of this target when its key matches (one kept per target), else None. Read back, nothing is
    parsed and every file's facts count as cached."""
    found = cache.load_keyed(_result_path(name), key)
    return replace(found, parsed=0, cached=found.parsed + found.cached) if isinstance(found, _Scanned) else None


def _ranked(root: Path, texts: dict[str, bytes], target: Target, presets: list[Any], profile: str | None,
            measured: Any, progress: Callable[[int, int], None] | None) -> _Scanned:
    idx = index(root, texts, target.hints.custom_jit_decorators, home() / "cache" / "scan", progress=progress)
    reached = preset_reach(root, idx, target, presets, home() / "cache" / "program")
    graph = any(r.model_class for r in reached) or bool(target.serving.entries)
    reaches: dict[tuple[str, str], dict[str, list[Any]]] = {}
    for pr in reached:
        for key, rs in pr.kernels.items():
            reaches.setdefault(key, {})[pr.preset] = rs
    names = {k["name"] for f in idx.facts for k in f["kernels"]}
    shares = measured.match(names) if measured else None
    if measured is not None and not shares:
        raise ConfigError(f"{profile}: no kernel in the trace is a Triton kernel of {target.name} "
                          f"({len(measured.kernels)} GPU kernels in it)")
    cuts = {key: f"{pr.preset}: {why}" for pr in reached for key, why in pr.cuts.items()}
    sites = link(idx, target, shares, reaches if graph else None, {p.name: p.layers for p in presets}, cuts,
                 merged_answers(reached))
    if measured is not None:
        sites = [replace(s, measured_of=measured.phase_label()) if s.measured_share else s for s in sites]
    if measured is not None and measured.from_tasks:  # what a kernel costs if it runs: reach first, then the time a
        # step would save at the kernel's roofline (its µs a step times its headroom)
        room = measured.headroom
        sites.sort(key=lambda s: (REACH_ORDER[s.reach], -(s.measured_share or 0.0) * room.get(s.name, 1.0),
                                  -s.hotness, s.path, s.line))
    if not sites:
        raise ConfigError(f"no Triton kernels found in {root} (include: {', '.join(target.include)})")
    program = program_for(root, idx, home() / "cache" / "program")
    fusion = fusion_sites(reached, program, {p.name: env_for(target, p, program) for p in presets},
                          {p.name: p.layers for p in presets}, home() / "cache" / "glue")
    if measured is not None:  # a table from tasks has rows for glue runs too
        glue_shares = measured.match({f.name for f in fusion})
        fusion = [replace(f, measured_share=glue_shares[f.name][1], measured_of=measured.phase_label())
                  if f.name in glue_shares else f for f in fusion]
        if measured.from_tasks:
            fusion.sort(key=lambda f: (REACH_ORDER[f.reach], -(f.measured_share or 0.0) * measured.headroom.get(f.name, 1.0)))
    return _Scanned(sites, fusion, idx.errors, {f["module"]: f["path"] for f in idx.facts},
                    {r.preset: r.model_class for r in reached} if graph else None, idx.parsed, idx.cached)


@dataclass(frozen=True)
class ProfileResult:
    target: Target
    trace: Path  # the compact trace kept in the workspace
    profile: Any  # smithbot.profile.Profile
    sites: list[KernelSite]  # the target's kernels, ranked by measured share


def profile(spec: str, model: str | None = None, batch: int = 8, phase: str = "decode", trace: str | None = None,
            source: str | None = None, rev: str | None = None) -> ProfileResult:
    """Measure where a step's GPU time goes: run the target's own benchmark for a preset on random weights under
    the torch profiler (``trace=None``: needs the engine installed and a GPU), or read a trace a user has. The trace
    is kept as ``workspaces/TARGET/profiles/PRESET-PHASE-bsN.json`` and the scan ranked by it."""
    target = resolve_target(spec)
    if phase not in PHASES:
        raise ConfigError(f"--phase {phase!r}: expected {' or '.join(PHASES)}")
    preset = target.preset(model) if model else None
    if trace is None and preset is None:
        raise ConfigError("name a model preset (--model) to run the target's benchmark, or pass --trace FILE")
    where = home() / "workspaces" / target.name / "profiles"
    label = f"{preset.name if preset else 'trace'}-{phase}-bs{batch}"
    out = where / f"{label}.json"
    if trace is not None:
        measured = read_trace(trace)  # a bad trace fails here, before anything is written
        where.mkdir(parents=True, exist_ok=True)
        meta = {"target": target.name, "phase": phase, "batch": batch, **measured.meta}
        if preset is not None:
            meta["preset"] = preset.name
        compact(Path(trace), out, meta)
    else:
        assert preset is not None
        co = checkout(target, source, rev)
        run_profile(target, co.root, preset, batch, phase, out)
    result = scan(spec, source, rev, profile=str(out), model=model)
    return ProfileResult(target, out, read_trace(out), result.sites)


def profile_tasks(spec: str, model: str, top: int = 30, source: str | None = None, rev: str | None = None,
                  timeout_s: float = 300.0, progress: Callable[[str], None] | None = None) -> tuple[Any, Path]:
    """``smithbot profile --from-tasks``: the preset's ``top`` hottest kernels and glue runs extracted and their
    baselines timed (``smithbot.measure``), with no engine installed. Returns the table and the compact trace it is
    kept as (``workspaces/TARGET/profiles/PRESET-tasks-decode-bs64[-interpreter].json``); ``scan --profile`` reads
    that trace."""
    target = resolve_target(spec)
    preset = target.preset(model)  # an unknown preset fails here, before the scan
    result = scan(spec, source, rev, model=model)
    table = measure(result, preset, top, home() / "workspaces" / target.name / "profiles" / f"{preset.name}-tasks",
                    timeout_s, progress)
    trace = _tasks_trace_path(target.name, preset.name, table.backend)
    table.write(trace)
    return table, trace


def tasks_trace(target: str, model: str) -> Path | None:
    """The GPU table ``profile --from-tasks`` keeps for a preset, if it has made one (an interpreter's ranks nothing
    by itself)."""
    path = _tasks_trace_path(target, model, "cuda")
    return path if path.is_file() else None


def _tasks_trace_path(target: str, model: str, backend: str) -> Path:
    label = "" if backend == "cuda" else f"-{backend}"
    return home() / "workspaces" / target / "profiles" / f"{model}-tasks-decode-bs{DECODE_BATCH}{label}.json"


def find_kernel(result: ScanResult, spec: str) -> KernelSite:
    """A launched kernel by kernel name, wrapper name, or ``file::qualname``. Ambiguity lists the matches."""
    launched = [s for s in result.sites if s.role == "launched"]
    if "::" in spec:
        path, _, qual = spec.partition("::")
        found = [s for s in launched if s.path == path and (s.qualname == qual or any(
            la.wrapper == qual and la.path == path for la in s.launches))]
    else:
        found = [s for s in launched if s.name == spec] or [
            s for s in launched if any(la.wrapper.split(".")[-1] == spec for la in s.launches)]
    if not found:
        near = list(dict.fromkeys(s.name for s in launched if spec.lower() in s.name.lower()))[:5]
        hint = f"; did you mean {', '.join(near)}?" if near else "; `smithbot scan` lists them"
        raise ConfigError(f"no launched kernel or wrapper named {spec!r} in {result.target.name}{hint}")
    if len({(s.path, s.line) for s in found}) > 1 and not all(
            any(la.wrapper.split(".")[-1] == spec for la in s.launches) for s in found):
        listing = ", ".join(f"{s.path}::{s.qualname} (line {s.line})" for s in found)
        raise ConfigError(f"{spec!r} is ambiguous: {listing}; pass file::qualname")
    return found[0]


def find_glue(result: ScanResult, spec: str) -> Any:
    """A fusion site of the scan (torch glue on a default path) by its function's name or qualified name, with
    ``:LINE`` (its first line) where the function has more than one run."""
    name, _, line = spec.partition(":")
    found = [f for f in result.fusion if name in (f.function, f.function.rpartition(".")[2])
             and (not line or str(f.first) == line)]
    if not found:
        raise ConfigError(f"no torch glue of a function {name!r}{' at line ' + line if line else ''} on "
                          f"{result.target.name}'s default paths; `smithbot scan` lists them under fusion")
    if len(found) > 1:
        listing = ", ".join(f.name for f in found)
        raise ConfigError(f"{spec!r} is ambiguous: {listing}")
    return found[0]


def extract(spec: str, kernel: str | None, out: str | Path | None = None, source: str | None = None,
            rev: str | None = None, all_kernels: bool = False, check: bool = True,
            progress: Callable[[int, int], None] | None = None, jobs: int | None = None,
            config: str | Path | None = None, timeout_s: float = 300.0,
            finished_row: Callable[[Coverage], None] | None = None, top: int | None = None) -> list[Coverage]:
    """Extract one kernel (or, with ``all_kernels``, every launched kernel; with ``top``, the first ``top`` launched
    kernels of the ranking: those default serving runs most) into task directories and self-check
    them (``jobs`` at a time, each in its own interpreter process; default: one per CPU core). A task whose kernel
    reads past an inferred input has that input grown to what it reads (``inputs/grow.py``) and is checked again. A
    kernel its launcher's task does not launch gets a task of its own, with the launcher's flags set down its branch
    (``branch_values``) and the inputs the YAML gives for it (``_kernels:``: a launcher that picks its kernel by
    shape). With ``config`` (an evolve config with an ``llm:`` section), the LLM writes the inputs of
    the tasks whose inputs could not be inferred or failed the self-check; they are kept only if the baseline then
    passes. A self-check gets ``timeout_s`` seconds to prepare the baseline (its warm-up on every case) and as many
    again to evaluate it. ``finished_row`` is handed each row as its self-check ends, so that a long ``--all`` run
    killed part-way keeps what it had checked."""
    llm = asker(config) if config and check else None  # a missing key or a bad config fails here, before any work
    result = scan(spec, source, rev)
    base = Path(out) if out else home() / "workspaces" / result.target.name / "tasks"
    if kernel and kernel.startswith("glue:") and not all_kernels and top is None:
        return [extract_glue_site(result, find_glue(result, kernel[len("glue:"):]), Path(out) if out else None,
                                  base, check, timeout_s)]
    if top is not None and (all_kernels or kernel):
        raise ConfigError("--top takes the hottest kernels itself: name no kernel and leave out --all")
    if all_kernels or top is not None:
        sites = [s for s in result.sites if s.role == "launched"][:top]
        all_kernels = True  # a directory per kernel
    else:
        if not kernel:
            raise ConfigError("name a kernel (or pass --all)")
        sites = [find_kernel(result, kernel)]
    one_dir = not all_kernels and out is not None  # `--out DIR` for one kernel: its task is DIR itself
    return extract_sites(result, sites, lambda name: base if one_dir else base / name, check=check,
                         progress=progress, jobs=jobs, llm=llm, timeout_s=timeout_s, finished_row=finished_row)


def db_path(db: str | Path | None = None) -> Path:
    """The run database: ``--db``, or ``$SMITHBOT_HOME/runs.db``."""
    return Path(db) if db else home() / "runs.db"


PROPOSERS = tuple(proposers.PROPOSERS)
PHASES = ("decode", "prefill")


def evolve(task: str | Path | None = None, proposer: str | None = None, iterations: int | None = None,
           time_s: float | None = None, budget_usd: float | None = None, budget_tokens: int | None = None,
           islands: int | None = None, workers: int | None = None, seed: int | None = None,
           resume: str | None = None, config: str | None = None, replay: str | None = None,
           backend: str | None = None, patience: int | None = None, migrate_every: int | None = None,
           db: str | Path | None = None, on_update: Callable[[Any], None] | None = None,
           cluster: str | None = None) -> Any:
    """Start (or, with ``resume``, continue) an evolutionary search on a task. Returns the final Status.

    On resume, the run's stored settings apply; options given here override them (e.g. a larger budget). ``cluster``
    (``smithbot/cluster.py``; default: the config's ``evaluator.cluster``, else this host) is where candidates are
    evaluated; the run database stays here."""
    with RunDB(db_path(db)) as rdb:
        if resume:
            run = rdb.run(resume)
            if task is not None and Path(resolve_task(task)).resolve() != Path(run.task_dir).resolve():
                raise TaskError(f"run {resume} belongs to task {run.task_dir}, not {task}")
            stored = run.config
        else:
            if task is None:
                raise TaskError("name a task directory (or a bundled task), or pass --resume RUN")
            stored = {"search": SearchConfig().to_dict(), "backend": "auto", "workers": None, "config": None,
                      "replay": None}
        search = SearchConfig.from_dict(stored["search"])
        b = search.budget
        budget = Budget(iterations if iterations is not None else b.iterations,
                        time_s if time_s is not None else b.time_s,
                        budget_tokens if budget_tokens is not None else b.tokens,
                        budget_usd if budget_usd is not None else b.usd)
        budget.check()
        if islands is not None and islands < 1:
            raise UsageError(f"--islands must be at least 1, got {islands}")
        if migrate_every is not None and migrate_every < 1:
            raise UsageError(f"--migrate-every must be at least 1, got {migrate_every}")
        if resume and islands is not None and islands != search.islands:
            raise UsageError(f"run {resume} has {search.islands} islands; --islands cannot change on resume")
        search = SearchConfig(proposer=proposer or search.proposer, islands=islands or search.islands,
                              migrate_every=migrate_every or search.migrate_every,
                              patience=patience if patience is not None else search.patience,
                              seed=seed if seed is not None else search.seed, budget=budget)
        settings = {"search": search.to_dict(), "backend": backend or stored["backend"],
                    "workers": workers if workers is not None else stored["workers"],
                    "config": config or stored["config"], "replay": replay or stored["replay"],
                    "cluster": cluster or stored.get("cluster")
                    or load_evolve_config(Path(config) if config else None).cluster}
        task_dir = Path(run.task_dir) if resume else resolve_task(task)  # type: ignore[arg-type]
        replayed = 0
        if resume:
            replayed = sum(1 for c in rdb.candidates(resume) if c.proposer == "replay")
        prop = proposers.make_proposer(search.proposer, proposers.ProposerOptions(settings["config"], settings["replay"],
                                                                                  replayed))
        ev_kw = {"workers_per_gpu": settings["workers"]} if settings["workers"] else {}
        started = time.monotonic()  # the time budget counts the task's preparation: the baseline's evaluation
        with connected(settings["cluster"]) as cl, Evaluator(task_dir, backend=settings["backend"], cluster=cl,
                                                             **ev_kw) as ev:
            if search.proposer == "tune" and ev.task.kind == "fusion" and not (
                    resume and any(c.correct and c.proposer != "baseline" for c in rdb.candidates(resume))):
                raise proposers.ProposerError(f"{ev.task.id} is a fusion task (a PyTorch baseline): tune needs a Triton "
                                    "candidate first; use --proposer llm")
            # broken tasks fail here, before a run is recorded; on the GPU a host-bound verdict comes first, and every
            # worker is prepared at once, within the time budget (past it, the search records the budget's stop)
            deadline = started + budget.time_s if budget.time_s else None
            try:
                ev.prepare(deadline, every_worker=True, host_first=True)
            except TaskError:
                if deadline is None or deadline > time.monotonic():
                    raise
            if resume:
                rdb.conn.execute("UPDATE runs SET config = ? WHERE id = ?", (json.dumps(settings), resume))
                rdb.set_status(resume, "running", "resumed")
                run = rdb.run(resume)
            else:
                run = rdb.create_run(str(task_dir.resolve()), ev.task.id, settings, search.seed)
            return Search(rdb, run, ev.task, ev, prop, on_update, started=started).run()


def runs(db: str | Path | None = None) -> list[dict[str, Any]]:
    """Every run with its task, status, counts and best speedup."""
    path = db_path(db)
    if not path.exists():
        return []
    out = []
    with RunDB(path) as rdb:
        for r in rdb.runs():
            best = rdb.best(r.id)
            t = rdb.totals(r.id)
            res = (best.result or {}) if best else {}
            launches = preview_launches(res)  # a fusion on the interpreter: launches a call, not a speed
            preview = bool(launches)
            out.append({"id": r.id, "task": r.task_id, "status": r.status, "message": r.message,
                        "proposer": r.config["search"]["proposer"], "candidates": t["candidates"],
                        "correct": t["correct"], "cost": t["cost"],
                        "best": None if preview or not best else res.get("speedup", best.fitness),
                        "best_ci": None if preview else res.get("speedup_ci"),
                        "launches": [list(x) for x in launches] if preview else None,
                        "best_id": best.id if best else None, "created": r.created})
    return out


def verify(run_id: str, top: int = 3, backend: str | None = None, db: str | Path | None = None,
           deadline: float | None = None) -> Any:
    """Re-measure a run's best candidates on every case plus extra irregular shapes; writes verification.json. With
    ``deadline`` (a ``time.monotonic()`` instant), what is not measured by then is rejected as cancelled."""
    with RunDB(db_path(db)) as rdb, connected(rdb.run(run_id).config.get("cluster")) as cluster:
        return _verify(rdb, run_id, top, backend, deadline=deadline, cluster=cluster)


def rebase(run_id: str, head: str, source: str | None = None, db: str | Path | None = None) -> str:
    """Carry a verified winner over to the target's new head: re-extract the kernel there, port the change, evaluate
    and verify it in a new run. Returns that run's id; raises ProposeError when any step fails."""
    with RunDB(db_path(db)) as rdb:
        run = rdb.run(run_id)
        _, _, cand = winner(rdb, run_id)
    task = load_task(run.task_dir)
    target = target_for(task)
    entry = next(d for d in task.provenance.definitions if d.name == task.entry)
    dest = Path(run.task_dir).parent / f"{task.id}@{head[:12]}"
    [row] = extract(target.name if target.file else target.repo, f"{entry.path}::{entry.qualname}", out=dest,
                    source=source)
    if not row.checked or row.out is None:
        raise ProposeError(f"rebase: {entry.qualname} extracted at {head[:12]} does not pass its self-check ({row.why})")
    try:
        ported = port(task.kernel_path.read_text(encoding="utf-8"), cand.source or "",
                      load_task(row.out).kernel_path.read_text(encoding="utf-8"))
    except ReinsertError as exc:
        raise ProposeError(f"rebase: the change does not carry over to {head[:12]}: {exc}") from None
    replay = dest / "rebased.jsonl"
    response = f"The change of candidate {cand.id}, carried over to {head[:12]}.\n```python\n{ported}```\n"
    replay.write_text(json.dumps({"response": response, "format": "full", "model": "rebase"}) + "\n")
    status = evolve(row.out, proposer="replay", replay=str(replay), iterations=1, backend=run.config.get("backend"),
                    db=db)
    ver = verify(status.run_id, top=1, db=db)
    with RunDB(db_path(db)) as rdb:
        rdb.event(status.run_id, "rebased", {"from_run": run_id, "from_candidate": cand.id, "head": head})
        rdb.event(run_id, "superseded", {"by_run": status.run_id, "head": head})
    if ver.winner is None:
        reasons = "; ".join(v.reason for v in ver.verdicts) or "the ported change was not evaluated correct"
        raise ProposeError(f"rebase: the change no longer verifies on {head[:12]} ({reasons})")
    return status.run_id


def propose(run_ids: list[str] | None = None, submit: bool = False, source: str | None = None,
            out: str | Path | None = None, db: str | Path | None = None, rebase_moved: bool = False
            ) -> list[tuple[str, Any]]:
    """Turn verified winners into pull requests: a branch, pr.md, patch.diff, a generated test (and a benchmark where
    the target's conventions have one). With no run ids, every verified run not proposed yet. The local forge (a dry
    run) by default; ``submit`` opens or updates the PR on GitHub (token in $SMITHBOT_GITHUB_TOKEN; API base in
    $SMITHBOT_GITHUB_API, default api.github.com). When upstream changed a definition the winner touches, it stops;
    ``rebase_moved`` re-extracts and re-verifies the change on the new head instead (a new run) and proposes that.
    """
    done = []
    with RunDB(db_path(db)) as rdb:
        ids = run_ids or [r.id for r in rdb.runs() if rdb.events(r.id, "verified")
                          and not rdb.events(r.id, "proposed") and not rdb.events(r.id, "superseded")]
    for run_id in ids:
        with RunDB(db_path(db)) as rdb:
            try:
                pr, target = prepare(rdb, run_id, source)
            except UpstreamMoved as exc:
                if not rebase_moved:
                    raise
                run_id = rebase(run_id, exc.head, source, db)
                pr, target = prepare(rdb, run_id, source)
            if submit and pr.preview:
                raise ProposeError(f"run {run_id} was verified as a preview (a fusion checked on the interpreter, "
                                   f"not timed): `smithbot verify {run_id} --backend cuda` on a GPU host first")
            if submit:
                m = re.fullmatch(r"(?:https://github\.com/|git@github\.com:)([^/]+/[^/]+?)(?:\.git)?/?", target.repo)
                if m is None:
                    raise ProposeError(f"--submit needs a GitHub repository; {target.name}'s repo is {target.repo}")
                from smithbot.propose.github import GitHubConfig, GitHubForge  # (PyGithub, only to submit)

                forge: Any = GitHubForge(GitHubConfig(
                    upstream=m.group(1), base_url=os.environ.get("SMITHBOT_GITHUB_API", "https://api.github.com"),
                    max_open_prs=target.conventions.max_open_prs, cache=home() / "cache" / "github.json"))
            else:
                dest = Path(out) / pr.kernel_id if out else home() / "workspaces" / target.name / "proposals" / pr.kernel_id
                forge = LocalForge(dest)
            published = forge.publish(pr)
            rdb.event(run_id, "proposed", {"forge": "github" if submit else "local", "action": published.action,
                                           "where": published.where, "branch": pr.branch, "variant": pr.variant})
            done.append((run_id, published))
    return done
