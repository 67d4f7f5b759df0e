"""The runs of torch glue (``scan.glue.file_glue``) on each preset's default path, as fusion sites: where each run
sits on the path, the if-tests the defaults leave open, how often a step runs it, and whether torch.compile already
compiles it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smithbot import cache
from smithbot.program.callgraph import OPEN_ODDS
from smithbot.program.evaluate import Env, evaluate
from smithbot.program.modules import Program
from smithbot.scan.rank import short_path
from smithbot.program.tensors import tensor_question
from smithbot.scan.glue import GLUE_VERSION, MEMO, MIN_LAUNCHES, file_glue

_AT = re.compile(r"^(.*) \((.+):(\d+)\)$")  # a path's test: "forward_batch.x is None (python/a/b.py:389)"


@dataclass(frozen=True)
class FusionSite:
    """A run of torch glue on a preset's default path: a candidate for one fused kernel."""

    function: str  # qualified name
    module: str
    path: str
    first: int
    last: int
    ops: tuple[str, ...]  # the launching ops, in order
    launches: int  # per call
    syncs: tuple[str, ...] = ()
    todos: tuple[str, ...] = ()
    # casts left out of ``ops``: the engine's code does not decide whether the tensor has that dtype already
    unsure: tuple[str, ...] = ()
    # preset -> {"phases", "per_layer", "layers", "per_step", "path", "undecided", "tests", "inputs": {what the run
    # reads: its traced dtype and shape, or the constant it is}}
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the if-tests the run is under, its own included, each with the branch it takes: (source, taken)
    branches: tuple[tuple[str, bool], ...] = ()
    measured_share: float | None = None  # its share of a profile's step (``scan --profile``), where it has a row
    measured_of: str = ""  # what that profile measured (``Profile.phase_label``)

    @property
    def name(self) -> str:
        """How ``run``, ``extract`` and a table from tasks name it: ``glue:FUNCTION:FIRST_LINE``."""
        return f"glue:{self.function}:{self.first}"

    @property
    def reach(self) -> str:
        """default when some preset's path to it, and its own if-tests, are all decided for it; else possible."""
        return "default" if any(not p["tests"] for p in self.presets.values()) else "possible"

    @property
    def folds(self) -> dict[str, bool]:
        """The run's if-tests that every preset it is on decides (none leaves it open), each with the branch taken:
        its ``if``s that an extraction takes as serving does."""
        return {t: taken for t, taken in self.branches
                if not any(o.startswith(f"{t} (") for p in self.presets.values() for o in p["tests"])}

    @property
    def phases(self) -> tuple[str, ...]:
        """The serving phases some preset's path runs it in, decode first (as a kernel site's)."""
        return tuple(sorted({ph for p in self.presets.values() for ph in p["phases"]}, reverse=True))

    @property
    def undecided(self) -> tuple[str, ...]:
        """The if-tests and dispatches left open on the most certain preset's path."""
        return tuple(min((p["tests"] for p in self.presets.values()), key=len, default=[]))

    def runs(self, preset: str) -> int:
        """How many times a step of the preset runs this glue (its launches a step over its launches a call)."""
        return max(1, self.presets[preset]["per_step"] // max(self.launches, 1))

    @property
    def per_step(self) -> int:
        """Estimated launches per step, the most over presets (per-layer code times the preset's layers)."""
        return max((p["per_step"] for p in self.presets.values()), default=self.launches)

    @property
    def score(self) -> float:
        """What ranks it: launches per step, times ``OPEN_ODDS`` for each bit of uncertainty on its path: each if-test
        it leaves undecided, log2(n) for each call that may go to n functions (``Reach.undecided``)."""
        return max((p["per_step"] * OPEN_ODDS ** p["undecided"] for p in self.presets.values()), default=0.0)

    @property
    def frequency(self) -> str:
        """How often it runs, said for the preset with the most launches: ``per layer (48 layers)``."""
        best = max(self.presets.values(), key=lambda p: p["per_step"], default=None)
        if best is None:
            return ""
        if best["per_layer"]:
            return f"per layer ({best['layers']} layers)" if best["layers"] else "per layer"
        return "once per step"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "fusion", "function": self.function, "module": self.module, "path": self.path,
                "lines": [self.first, self.last], "ops": list(self.ops), "launches_per_call": self.launches,
                "launches_per_step": self.per_step, "frequency": self.frequency, "score": round(self.score, 2),
                "reach": self.reach, "undecided": list(self.undecided), "host_syncs": list(self.syncs),
                **({"casts_not_counted": list(self.unsure)} if self.unsure else {}),
                "todos": list(self.todos), "presets": self.presets,
                **({"measured_share": self.measured_share, "measured_of": self.measured_of}
                   if self.measured_share is not None else {})}


def fusion_sites(reached: list[Any], program: Program, envs: dict[str, Env], layers: dict[str, int],
                 cache_dir: Path | None) -> list[FusionSite]:
    """The glue runs of every function on a preset's default path (``reached``: ``scan.reach.PresetReach``), but
    those under torch.compile (``compiled``: the function itself, or its path goes through the forward of a model class
    the engine compiles, a ``region``), which Inductor fuses already.

    A run's own if-tests are evaluated under the preset's serving defaults (``envs``) per phase the function runs
    in: a run in a branch the defaults decide against is left out of that phase, one they leave open adds a bit of
    uncertainty to its path. Default runs (every test on the path and its own decided) before possible ones, decode
    before prefill-only, then by launches per step (per-layer code times ``layers``, the preset's layer count), halved
    for each test or dispatch left open."""
    found: dict[tuple[str, str, int], FusionSite] = {}
    for pr in reached:
        forwards: dict[str, list[str]] = {}  # a ``Reach.path`` step (a qualname) -> the modules it may be in
        for m, q in pr.functions:
            if q.endswith(".forward"):
                forwards.setdefault(q, []).append(m)
        regions: dict[str, bool] = {}  # a step -> whether it is a compiled forward, asked as paths need it
        for (mod, qual), rs in pr.functions.items():
            runs = runs_of(program, mod, cache_dir).get(qual, [])
            if not runs or compiled(program, mod, qual) or all(_below_region(program, r.path, forwards, regions)
                                                                for r in rs):
                continue  # torch.compile fuses its ops already: it runs compiled, or below a compiled forward
            rel = program.modules[mod]
            types = pr.types.get((mod, qual), {})
            on_path = [_held(program, cache_dir, [(*m.groups()[:2], int(m.group(3))) for t in r.tests
                                                  for m in [_AT.match(t)] if m]) for r in rs]
            for run in runs:
                ops, open_casts, not_counted = _with_casts(run, types, rel)
                if len(ops) < MIN_LAUNCHES:
                    continue  # (its casts convert what has that dtype already)
                asked = pr.answers.get((mod, qual), {})
                mine = _held(program, cache_dir, [(t, rel, run["first"]) for t, taken in run["tests"] if taken])
                kept = [(r, own, held | mine) for r, held in zip(rs, on_path)
                        for own in [_decide(program, mod, qual, run["tests"], envs[pr.preset].with_phase(r.phase),
                                            asked)] if own is not None]
                kept = [(r, own, held) for r, own, held in kept if "self" not in held]
                if not kept:
                    continue  # work an object redoes only when what it keeps changes: not a step's
                k = (mod, qual, run["first"], run["last"], ops)
                if k not in found:
                    found[k] = FusionSite(qual, mod, rel, run["first"], run["last"], ops, len(ops),
                                          tuple(run["syncs"]), tuple(run["todos"]), not_counted, {},
                                          tuple((t, taken) for t, taken in run["tests"]))
                per_layer = any(r.per_layer and not held for r, _, held in kept)
                n = layers.get(pr.preset, 0) if per_layer else 1
                best, own, _ = min(kept, key=lambda rb: (bool(rb[0].tests) or bool(rb[1]), not rb[0].per_layer,
                                                         rb[0].undecided + len(rb[1])))
                found[k].presets[pr.preset] = {
                    "phases": sorted({r.phase for r, _, _ in kept}, reverse=True), "per_layer": per_layer,
                    "layers": n if per_layer and n > 1 else None, "per_step": len(ops) * max(n, 1),
                    "path": short_path(best.path),
                    "undecided": round(best.undecided + len(own) + len(open_casts), 2),
                    "tests": [*best.tests, *(f"{t} ({rel}:{run['first']})" for t in own), *open_casts],
                    "inputs": {src: t for src in run["reads"] for t in [_traced_input(types, run["first"], src)] if t}}
    order = sorted(found.values(), key=lambda s: (s.reach != "default",
                                                  "decode" not in s.phases,
                                                  -s.score, -len(s.todos), s.path, s.first))
    # of the runs a stretch makes through its branches, the first in that order stands for them
    kept: dict[tuple[str, str, int], FusionSite] = {}
    for site in order:
        kept.setdefault((site.module, site.function, site.first), site)
    return list(kept.values())


def _held(program: Program, cache_dir: Path | None, tests: list[tuple[str, str, int]]) -> set[str]:
    """The names that hold what these taken ``if``s fill (``glue.MEMO``; each test with its file and a line under
    it: a path's undecided tests, or a run's own). ``self``: the object keeps it across steps; a parameter
    (``forward_batch``): the step's object keeps it, so the run goes once a step, not once a layer."""
    return {root for test, rel, line in tests for first, last, src, root in
            _file_glue(program, rel, cache_dir).get(MEMO, []) if first <= line <= last and src == test}


def _traced_input(types: dict[str, Any], line: int, src: str) -> dict[str, Any] | None:
    """What the walk traced of a glue run's input ``src``: the tensor (``{dtype, shape, made}``) where its dtype or
    its whole shape is known, else the constant serving makes of it (``{value}``, a literal's source), else None."""
    t = types.get(tensor_question("tensor", line, src))
    if t and (t.get("dtype") or (t.get("shape") and None not in t["shape"])):
        return t
    value = types.get(tensor_question("value", line, src))
    return {"value": value} if value is not None else None


def _below_region(program: Program, path: tuple[str, ...], forwards: dict[str, list[str]],
                  regions: dict[str, bool]) -> bool:
    """Whether a step before the end of ``path`` is a compiled ``region`` (``forwards``: the modules each forward's
    qualname may be in; ``regions``: the answers so far)."""
    for step in path[:-1]:
        if step not in regions:
            regions[step] = any(region(program, m, step) for m in forwards.get(step, ()))
        if regions[step]:
            return True
    return False


def casts(run: dict[str, Any], types: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A run's casts that launch (the tensor they convert is known to have another dtype), and those the engine's code
    does not decide (the tensor's dtype, or the one named, is not traced; ``types``: the walk's answers). Each with
    ``target``: the dtype it converts to, or the expression that names it."""
    launching: list[dict[str, Any]] = []
    unsure: list[dict[str, Any]] = []
    for c in run["casts"]:
        got = (types.get(tensor_question("tensor", c["line"], c["of"])) or {}).get("dtype")
        to = c["to"] or types.get(tensor_question("dtype", c["line"], c["to_src"]))
        if got and to:
            if got != to:
                launching.append(c)
        else:
            unsure.append({**c, "target": to or c["to_src"], "known": bool(got)})
    return launching, unsure


def _host_work(run: dict[str, Any], types: dict[str, Any]) -> set[int]:
    """The launches (their indices in ``run["ops"]``) of statements that read host tensors and nothing else that
    could be on the GPU (``seq_lens_cpu = seq_lens_cpu + 1``): host work, no kernel. Every read must be traced: a
    host tensor, or a constant serving makes of it."""
    out: set[int] = set()
    at = 0
    for n, reads in run.get("parts", []):
        seen = [_traced_input(types, run["first"], src) or {} for src in reads]
        if any(t.get("host") for t in seen) and all(t.get("host") or "value" in t for t in seen):
            out.update(range(at, at + n))
        at += n
    return out


def _with_casts(run: dict[str, Any], types: dict[str, Any], rel: str
                ) -> tuple[tuple[str, ...], list[str], tuple[str, ...]]:
    """A run's launching ops with the host's work left out (``_host_work``) and its casts decided (``casts``):
    those that launch, in their place; those not decided only where the run needs them to be a run at all, and then
    as open tests of its path (it is possible, not default). (ops, those open tests, the casts not counted, said)."""
    hosted = _host_work(run, types)
    launching, unsure = casts(run, types)
    ops = tuple(op for i, op in enumerate(run["ops"]) if i not in hosted)
    counted = launching if len(ops) + len(launching) >= MIN_LAUNCHES else launching + unsure
    for c in sorted(counted, key=lambda c: -c["at"]):
        at = c["at"] - sum(1 for i in hosted if i < c["at"])
        ops = ops[:at] + (c["op"],) + ops[at:]
    open_casts = [f"{c['of']}.dtype != {c['target']} ({rel}:{c['line']})" for c in unsure if c in counted]
    return ops, open_casts, tuple(_cast_said(c) for c in unsure if c not in counted)


def _cast_said(c: dict[str, Any]) -> str:
    return (f"{c['of']}{c['op']}() at line {c['line']}: a launch only if {c['of']} is not {c['target']} already, "
            f"and {'the target' if c['known'] else 'its dtype'} is not decided")


def compiled(program: Program, mod: str, qual: str) -> bool:
    """Whether the function runs under torch.compile: decorated with ``torch.compile`` or with a decorator of the
    engine's whose code leads to it (``@safe_torch_compile(dynamic=True)``), or a compiled ``region``."""
    fn = ((program.facts(mod) or {}).get("functions", {})).get(qual) or {}
    return _compiling(program, mod, [d for d, _ in fn.get("decorators", [])]) or region(program, mod, qual)


def region(program: Program, mod: str, qual: str) -> bool:
    """Whether the function is the ``forward`` of a class that a decorator of the engine's compiles (vLLM's
    ``@support_torch_compile`` on a model class): what it calls runs compiled too."""
    f = program.facts(mod) or {}
    fn = f.get("functions", {}).get(qual) or {}
    owner = f.get("classes", {}).get(fn.get("class") or "") if qual.endswith(".forward") else None
    return _compiling(program, mod, (owner or {}).get("decorators", []))


def _compiling(program: Program, mod: str, decorators: list[str]) -> bool:
    for dec in decorators:
        if (mod, dec) not in program.compiling:
            where = _defined(program, mod, dec)
            program.compiling[(mod, dec)] = dec.split(".")[-1] == "compile" and dec.split(".")[0] in (
                "torch", "compile") or where is not None and _compiles(program, *where)
        if program.compiling[(mod, dec)]:
            return True
    return False


def _defined(program: Program, mod: str, name: str) -> tuple[str, str] | None:
    """(module, qualname) of the function or class ``name`` (dotted, as module ``mod`` spells it) where the engine
    defines it."""
    f = program.facts(mod) or {}
    head, _, rest = name.partition(".")
    if head in f.get("functions", {}) or head in f.get("classes", {}):
        return mod, name
    imported = f.get("imports", {}).get(head)
    where = program.split(f"{imported}.{rest}".rstrip(".")) if imported else None
    return where if where is not None and where[1] else None


def _compiles(program: Program, mod: str, qual: str, depth: int = 3) -> bool:
    """Whether function (or class) ``qual`` of ``mod`` calls torch.compile, in its own body, in the functions nested
    in it, or through the engine's functions and methods it calls, ``depth`` calls down."""
    functions = (program.facts(mod) or {}).get("functions", {})
    own = [g for q, g in functions.items() if q == qual or q.startswith(qual + ".")]
    calls = [c[0] for g in own for c in g["calls"]]
    if any(c in ("torch.compile", "compile") for c in calls):
        return True
    if depth == 0:
        return False
    for callee in dict.fromkeys(c.removesuffix("()") for c in calls if "(" not in c.removesuffix("()")):
        where = _defined(program, mod, callee)
        if where is not None and where != (mod, qual) and _compiles(program, *where, depth=depth - 1):
            return True
    return False


def runs_of(program: Program, mod: str, cache_dir: Path | None) -> dict[str, list[dict[str, Any]]]:
    """The glue runs of a module's functions (``file_glue``), cached by content."""
    rel = program.modules.get(mod)
    return _file_glue(program, rel, cache_dir) if rel is not None else {}


def _file_glue(program: Program, rel: str, cache_dir: Path | None) -> dict[str, Any]:
    """``file_glue`` of one file of the program, cached by content."""
    if rel not in program.texts:
        return {}
    if rel not in program.glue:
        data = program.texts[rel]
        key = hashlib.sha256(f"{GLUE_VERSION}|".encode() + data).hexdigest()
        path = cache_dir / key[:2] / f"{key}.json" if cache_dir else None
        got = cache.load(path)
        if got is None:
            got = file_glue(data)
            cache.store(path, got)
        program.glue[rel] = got
    return program.glue[rel]


def _decide(program: Program, mod: str, qual: str, tests: list[list[Any]], env: Env,
            asked: dict[str, dict[str, Any]] | None = None) -> list[str] | None:
    """None when the defaults decide one of a run's if-tests against its branch, else the tests they leave open.
    A test the call graph answered after its walk (``asked``: test -> phase -> value) takes that answer; another
    reads the function's own flags, then the module's assignments."""
    f = program.facts(mod)
    fn = (f or {}).get("functions", {}).get(qual) or {}
    assigns, flags = (f or {}).get("assigns", {}), fn.get("flags", {})
    open_ = []
    for test, taken in tests:
        got = (asked or {}).get(test, {})
        d = got[env.phase] if env.phase in got else evaluate(test, env, lambda name: flags.get(name, assigns.get(name)))
        if d is None:
            open_.append(test)
        elif d != taken:
            return None
    return open_
