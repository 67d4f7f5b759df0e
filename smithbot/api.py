"""The entry points behind the CLI, for programmatic use."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from evaluator import EvalResult, Evaluator, TaskError
from smithbot.config import ConfigError, Target, generic_target, get_target, target_names
from smithbot.repo import Checkout, checkout, home
from smithbot.scan.index import index
from smithbot.scan.rank import link
from smithbot.types import KernelSite

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
             rounds: int = 30, min_gain: float = 0.02) -> tuple[list[str], list[EvalResult]]:
    """Evaluate candidate files against a task's baseline. Returns the task's warnings and one result each."""
    root = resolve_task(task)
    with Evaluator(root, backend=backend, timeout_s=timeout_s, rounds=rounds, min_gain=min_gain) as ev:
        warnings = ev.prepare()
        return warnings, ev.evaluate(list(candidates))


def resolve_target(spec: str) -> Target:
    """A bundled target name, a git URL, or a local path (generic defaults for the last two)."""
    if spec in target_names():
        return get_target(spec)
    if "://" in spec or spec.startswith("git@") or spec.endswith(".git"):
        return generic_target(spec)
    if Path(spec).is_dir():
        return generic_target(str(Path(spec).resolve()))
    raise ConfigError(f"unknown target {spec!r} (known: {', '.join(target_names())}; or pass a git URL or a path)")


def read_profile(path: str | Path) -> dict[str, float]:
    """Total GPU time in µs per kernel name from a torch-profiler Chrome trace."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable Chrome trace JSON ({exc})") from None
    events = data.get("traceEvents", data) if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ConfigError(f"{path}: no traceEvents list")
    totals: dict[str, float] = {}
    for ev in events:
        if isinstance(ev, dict) and ev.get("ph") == "X" and str(ev.get("cat", "")).lower() == "kernel":
            totals[str(ev.get("name"))] = totals.get(str(ev.get("name")), 0.0) + float(ev.get("dur", 0.0))
    return totals


def _match_profile(sites_names: set[str], totals: dict[str, float]) -> dict[str, float]:
    """Trace names are the kernel's function name, sometimes with a specialisation suffix (name_0d1d2d)."""
    out: dict[str, float] = {}
    for trace_name, us in totals.items():
        base = trace_name if trace_name in sites_names else trace_name.rsplit("_", 1)[0]
        if base in sites_names:
            out[base] = out.get(base, 0.0) + us
    return out


@dataclass(frozen=True)
class ScanResult:
    target: Target
    checkout: Checkout
    sites: list[KernelSite]
    errors: list[tuple[str, str]]
    files: int
    parsed: int
    cached: int
    path: Path  # where scan.json was written


def scan(spec: str, source: str | None = None, rev: str | None = None, profile: str | None = None,
         progress: Callable[[int, int], None] | None = None) -> ScanResult:
    """Find every Triton kernel of a target, link its launches and rank it. Writes scan.json in the workspace."""
    target = resolve_target(spec)
    if source is None and target.file is None and Path(spec).is_dir():
        source = spec  # a local checkout given as the target itself
    co = checkout(target, source, rev)
    idx = index(co.root, target.include, target.exclude, target.hints.custom_jit_decorators,
                home() / "cache" / "scan", progress=progress)
    totals = read_profile(profile) if profile else {}
    names = {k["name"] for f in idx.facts for k in f["kernels"]}
    sites = link(idx, target, _match_profile(names, totals) if totals else None)
    if not sites:
        raise ConfigError(f"no Triton kernels found in {co.root} (include: {', '.join(target.include)})")
    out = home() / "workspaces" / target.name / "scan.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"target": target.name, "root": str(co.root), "commit": co.commit, "url": co.url,
                               "files": len(idx.texts), "errors": [list(e) for e in idx.errors],
                               "kernels": [s.to_dict() for s in sites]}, indent=1))
    tmp.replace(out)
    return ScanResult(target, co, sites, idx.errors, len(idx.texts), idx.parsed, idx.cached, out)
