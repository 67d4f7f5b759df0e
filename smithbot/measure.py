"""A step's cost measured from extracted tasks (``smithbot profile TARGET --model PRESET --from-tasks``), for a GPU
that has no engine installed: the preset's hottest kernels and runs of torch glue are extracted, each baseline is
timed by the evaluator at the preset's decode case (batch 64) and a prefill case, and the time of one launch is
multiplied by the launches per step the call graph counts. Under the interpreter the times are the CPU's, labelled so.

Each row also gets its headroom: the bytes the call moves per second against the copy bandwidth measured on this
GPU and, where its kernels call ``tl.dot``, the work they do per second against the dense matmul rate measured on it
(``evaluator.flops``); the nearer roof is what it reaches. What is left is capped by the cost of an empty launch,
which no kernel goes below. A site that does not extract, or whose baseline fails, is a row with
its reason. The table is written as a compact trace (``source: tasks``) that ``scan --profile`` reads like one taken
by ``smithbot profile`` with the engine, and in full as JSON beside it.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

from evaluator import Evaluator, TaskError
from evaluator.pool import resolve_backend
from smithbot.config import ConfigError, ModelPreset
from smithbot.extract.build import self_check
from smithbot.extract.pipeline import extract_glue_site, extract_sites
from smithbot.inputs.sizes import DIMS
from smithbot.scan.fusion import FusionSite
from smithbot.types import Failure, KernelSite

DECODE_BATCH = 64
# a bandwidth fraction above this says the call reads less than the bytes it is given: its roofline is not known
STREAMS = 1.1


@dataclass(frozen=True)
class Row:
    """One kernel's or glue run's measured cost in a step of the preset."""

    name: str  # the kernel's name, or glue:FUNCTION:LINE
    kind: str  # kernel | glue
    reach: str  # default | possible, for the preset
    per_step: int  # launches (a kernel) or runs (a glue run) in a step of the preset
    task: str = ""  # the task directory, once extracted
    decode_case: str = ""
    us: float | None = None  # one launch (or run) at the decode case, µs
    prefill_case: str = ""
    prefill_us: float | None = None
    # the bytes it is given and returns, per second at the decode case, over the measured copy bandwidth: what it
    # moves when it reads all it is given; above 1 it reads less (a block table, the experts top-k picks)
    bw_fraction: float | None = None
    # its tl.dot work per second at the decode case over the measured dense matmul rate of its operands' width
    flop_fraction: float | None = None
    flops: int | None = None  # that work, multiply-adds × 2 per call
    why: str = ""  # why it has no time
    note: str = ""  # what its time is, where its task's call launches other kernels too

    @property
    def us_per_step(self) -> float | None:
        return None if self.us is None else self.us * self.per_step


@dataclass(frozen=True)
class Table:
    target: str
    preset: str
    backend: str  # cuda | interpreter: whose times they are
    rows: tuple[Row, ...]
    launch_us: float | None = None  # an empty launch in a CUDA graph on this GPU: the least any call costs

    @property
    def measured_us(self) -> float:
        """The µs per step of the rows that have a time: the measured part of the step."""
        return sum(r.us_per_step or 0.0 for r in self.rows)

    def share(self, row: Row) -> float | None:
        return None if row.us_per_step is None or not self.measured_us else row.us_per_step / self.measured_us

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "preset": self.preset, "backend": self.backend, "source": "tasks",
                "decode_batch": DECODE_BATCH, "measured_us_per_step": round(self.measured_us, 3),
                "launch_us": self.launch_us,
                "rows": [{**asdict(r), "us_per_step": r.us_per_step, "share": self.share(r),
                          "headroom": headroom(r, self.launch_us)} for r in self.rows]}

    def write(self, trace: Path) -> None:
        """The compact trace (one step: each timed kernel's µs per step as its GPU time; glue runs as other GPU
        work) and the full table beside it (``.table.json``)."""
        meta = {"target": self.target, "preset": self.preset, "phase": "decode", "batch": DECODE_BATCH, "steps": 1,
                "source": "tasks", "backend": self.backend}
        events = [{"ph": "X", "cat": "kernel", "name": r.name, "dur": r.us_per_step,
                   "args": {"headroom": headroom(r, self.launch_us)}} for r in self.rows if r.us_per_step is not None]
        trace.parent.mkdir(parents=True, exist_ok=True)
        for path, text in ((trace, json.dumps({"smithbot": meta, "traceEvents": events}, separators=(",", ":"))),
                           (table_path(trace), json.dumps(self.to_dict(), indent=1))):
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(path)


def reached(row: Row) -> float | None:
    """The share of its nearer roof a call reaches: its copy-bandwidth fraction (where its bytes can be what it
    moves) or its dense-rate fraction, whichever is higher; None where neither is known."""
    known = [f for f in (None if row.bw_fraction is None or row.bw_fraction > STREAMS else row.bw_fraction,
                         row.flop_fraction) if f is not None]
    return max(known) if known else None


def headroom(row: Row, launch_us: float | None = None) -> float:
    """The share of a call's time a call at its roofline would not spend (1 where no roof is known), capped where
    even an empty launch costs more than that leaves: what a step could save is ``us_per_step × headroom``."""
    got = reached(row)
    room = 1.0 if got is None else max(0.0, 1.0 - got)
    if launch_us and row.us:
        room = min(room, max(0.0, 1.0 - launch_us / row.us))
    return room


def bandwidth(fraction: float | None) -> str:
    """A row's share of the copy bandwidth, as the table says it: over 100% the inputs' bytes overstate what it
    reads, and nothing is claimed."""
    if fraction is None:
        return "-"
    if fraction > STREAMS:
        return f"reads less than it is given ({fraction:.0%} if all)"
    return f"{fraction:.1%}" if fraction < 0.1 else f"{fraction:.0%}"


def compute(row: Row) -> str:
    """A row's share of the dense matmul rate, as the table says it."""
    if row.flop_fraction is None:
        return "-" if row.flops is None else "no rate for its width"
    return f"{row.flop_fraction:.1%}" if row.flop_fraction < 0.1 else f"{row.flop_fraction:.0%}"


def table_path(trace: Path) -> Path:
    return trace.with_name(trace.name.removesuffix(".json") + ".table.json")


def pick(kernels: list[KernelSite], glue: list[FusionSite], preset: str, top: int
         ) -> list[tuple[KernelSite | FusionSite, str, int]]:
    """The preset's first ``top`` sites, kernels and glue, default ones before possible ones, each in the scan's
    order: (site, reach for the preset, launches or runs per step)."""
    out: list[tuple[int, int, KernelSite | FusionSite, str, int]] = []
    for i, k in enumerate(kernels):
        if k.role == "launched" and preset in k.presets and k.reach in ("default", "possible"):
            out.append((k.reach != "default", i, k, k.reach, dict(k.per_step).get(preset, 1)))
    for i, g in enumerate(glue):
        p = g.presets.get(preset)
        if p is not None:
            reach = "possible" if p["tests"] else "default"
            out.append((reach != "default", len(kernels) + i, g, reach, g.runs(preset)))
    return [(site, reach, n) for _, _, site, reach, n in sorted(out, key=lambda r: r[:2])[:top]]


def time_baseline(task_dir: Path, presets: list[str], timeout_s: float) -> dict[str, Any]:
    """The task's baseline timed against itself at the decode case (batch 64, else the nearest) and the first
    prefill case of the first of ``presets`` it has cases of, on the GPU; under the interpreter, on its interpreter
    cases. ``{backend, preset, decode_case, us, bw_fraction, flop_fraction, flops, launch_us, prefill_case,
    prefill_us, entry, kernel_us, prefill_kernel_us}`` (``preset`` None under the interpreter; ``kernel_us``: each
    Triton kernel's own µs in the call, on the GPU); raises TaskError when the task cannot run, or on the GPU
    has no case of any of ``presets`` (another model's shapes would say nothing of these), unless its inputs take no
    model dim at all: then the cases, named after whichever preset came first, are the same for every preset."""
    with Evaluator(task_dir, workers_per_gpu=1, timeout_s=timeout_s, prepare_timeout_s=timeout_s) as ev:
        names = ev.case_names
        preset = next((p for p in presets if any(n.startswith(f"{p}-") for n in names)), None)
        mine = [n for n in names if n.startswith(f"{preset}-")] or names
        if preset is None and ev.backend == "cuda":
            if any(set(c.dims) & set(DIMS) for c in ev.task.cases):
                raise TaskError(f"its task has no case of {' or '.join(presets)} (its cases: {', '.join(names[:6])})")
            # no model dim in its inputs (a step's lengths): its cases, named after one preset, are every preset's
            preset = presets[0]
        decode = decode_case(mine)
        prefill = [n for n in mine if "-prefill-" in n]
        cases = ([decode] if decode else []) + prefill[:1] or names[:1]
        by = {c["name"]: c for c in ev.time_baseline(cases)}
        first = by[cases[0]]
        second = by.get(prefill[0]) if prefill else None
        return {"backend": ev.backend, "preset": preset, "decode_case": first["name"], "us": first["base_us"],
                "bw_fraction": first["cand_bw_fraction"] or None, "flop_fraction": first.get("flop_fraction"),
                "flops": sum(first["flops"].values()) if first.get("flops") else None,
                "launch_us": first.get("launch_us"), "prefill_case": second["name"] if second else "",
                "prefill_us": second["base_us"] if second else None, "entry": ev.task.entry,
                "kernel_us": first.get("kernel_us") or {},
                "prefill_kernel_us": (second.get("kernel_us") or {}) if second else {}}


def own_time(got: dict[str, Any], kernel: str) -> dict[str, Any]:
    """A kernel's measurement from ``time_baseline``'s: where its task's call (an op) launches other Triton kernels
    too, the time is the kernel's own within the call (``kernel_us``), with no roofline (the call's bytes and work
    are not its own) and a ``note`` that says so; else the call's, as it is. A call that launches other kernels but
    not this one at the timed case (the op takes another path at that size) is a TaskError: the call's time is not
    the kernel's."""
    others = sorted(set(got["kernel_us"]) - {kernel})
    if others and kernel not in got["kernel_us"]:
        raise TaskError(f"{got['entry']}() does not launch it at {got.get('decode_case') or 'the timed case'}; it "
                        f"launches {', '.join(others)} there")
    if not others:
        return got
    return {**got, "us": got["kernel_us"][kernel], "prefill_us": got["prefill_kernel_us"].get(kernel),
            "bw_fraction": None, "flop_fraction": None, "flops": None,
            "note": f"its own time in {got['entry']}(), which also launches {', '.join(others)}: no roofline"}


def decode_case(names: list[str], preset: str = "") -> str | None:
    """Of the cases named (of ``preset``'s, when given), the decode case whose batch is nearest ``DECODE_BATCH``."""
    mine = [n for n in names if "-decode-bs" in n and n.startswith(f"{preset}-" if preset else "")]
    return min(mine, key=lambda n: abs(batch_of(n) - DECODE_BATCH)) if mine else None


def batch_of(case: str) -> int:
    """The batch a case's name gives (``deepseek-v3-decode-bs64-128experts`` -> 64), else 0."""
    m = re.search(r"-bs(\d+)", case)
    return int(m.group(1)) if m else 0


def measure(result: Any, preset: ModelPreset, top: int, base: Path, timeout_s: float = 300.0,
            progress: Callable[[str], None] | None = None) -> Table:
    """Extract the preset's ``top`` sites under ``base`` (see ``pick``), time each baseline, and return the table.
    ConfigError when the preset's default paths reach no site at all."""
    chosen = pick(result.sites, result.fusion, preset.name, top)
    if not chosen:
        raise ConfigError(f"{result.target.name}: no kernel or glue run on {preset.name}'s default paths to measure "
                          f"(`smithbot scan {result.target.name} --model {preset.name}` shows why)")
    kernels = [s for s, _, _ in chosen if isinstance(s, KernelSite)]
    rows_of: dict[int, Any] = {}  # id of a kernel site -> its extraction row (a Coverage)
    if kernels:
        for site, row in zip(kernels, extract_sites(result, kernels, lambda name: base / name, timeout_s=timeout_s)):
            rows_of[id(site)] = row
    rows: list[Row] = []
    for site, reach, n in chosen:
        if isinstance(site, KernelSite):
            cov, name, kind = rows_of[id(site)], site.name, "kernel"
        else:
            cov = extract_glue_site(result, site, None, base, True, timeout_s)
            name, kind = site.name, "glue"
        why = "" if cov.checked and cov.out else cov.why or "not extracted"
        if cov.failure is Failure.OUT_OF_MEMORY and cov.out:  # its self-check ran beside the others': again, alone
            got = self_check(Path(cov.out), timeout_s)
            why = "" if got.ok else got.why
        rows.append(Row(name, kind, reach, n, task=str(cov.out or ""), why=why))
    got: dict[int, dict[str, Any]] = {}

    def timed(i: int) -> None:
        if progress is not None:
            progress(rows[i].name)
        try:
            timing = time_baseline(Path(rows[i].task), [preset.name], timeout_s)
            # (a kernel its op does not launch at the timed case keeps no time: the op's is not its own)
            got[i] = own_time(timing, rows[i].name) if rows[i].kind == "kernel" else timing
        except TaskError as exc:
            rows[i] = replace(rows[i], why=f"not timed: {exc}")

    # Each baseline in its own evaluator: on a GPU, one loads and compiles while another times (the GPU's file lock
    # keeps the timing to one at a time); the interpreter's CPU times want the CPU to themselves.
    jobs = 1 if resolve_backend("auto") == "interpreter" else max(1, min(4, (os.cpu_count() or 1) // 4))
    todo = [i for i, r in enumerate(rows) if not r.why]
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(timed, todo))
    for i in todo:  # a baseline that ran out of memory beside the others is timed again, alone
        if jobs > 1 and "out of memory" in rows[i].why.lower():
            rows[i] = replace(rows[i], why="")
            timed(i)
    fields = set(Row.__dataclass_fields__)
    out = [replace(r, **{k: v for k, v in got[i].items() if k in fields}) if i in got else r for i, r in enumerate(rows)]
    first = next(iter(got.values()), {})
    backend, launch = first.get("backend", ""), first.get("launch_us")  # (the same for every task: the evaluator's)
    if all(r.us is None for r in out):
        raise ConfigError(f"none of the {len(out)} sites on {preset.name}'s default paths could be timed; the first: "
                          f"{out[0].name}: {out[0].why}")
    return Table(result.target.name, preset.name, backend or "none", tuple(out), launch)
