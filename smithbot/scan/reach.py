"""Which kernels the target's default serving path reaches, per model preset: the call graph of
``smithbot.program.walk`` run from each preset's model class and the target's per-step engine entries, under the
target's declared serving defaults (``serving:`` in the target YAML)."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smithbot import cache
from smithbot.config import ConfigError, ModelPreset, Target
from smithbot.program.callgraph import Reach, method_of
from smithbot.program.evaluate import Env, Platform
from smithbot.program.modules import FACTS_VERSION, Program
from smithbot.program.tensors import tensor_question
from smithbot.program.value import Func
from smithbot.program.walk import reach
from smithbot.scan.fusion import runs_of
from smithbot.scan.index import Indexed, matches
from smithbot.scan.parse import module_name

# the graph's own code is part of the cache key, and so is the scan's code that asks it questions after its walk
# (this module, the glue runs' finding): a changed rule invalidates what it computed
_HERE = Path(__file__).resolve().parent
_CODE = hashlib.sha1(b"".join(p.read_bytes() for p in sorted(
    [*(_HERE.parent / "program").glob("*.py"), _HERE / "reach.py", _HERE / "fusion.py", _HERE / "glue.py"]))).digest()


_VERSION = "7"  # what a cached result holds (2: the functions reached; 3: the undecided tests; 4: the cuts;
# 5: the answers; 6: the tensor types; 7: the constants glue runs read)


@dataclass(frozen=True)
class PresetReach:
    preset: str
    model_class: str  # module:Class, or "" when the model's class is not in the checkout
    kernels: dict[tuple[str, str], list[Reach]]  # (module, kernel name) -> one Reach per phase it runs in
    # (module, function qualname) -> one Reach per phase: every function on the default path (where glue runs)
    functions: dict[tuple[str, str], list[Reach]] = dataclasses.field(default_factory=dict)
    # (module, function or kernel) -> the if-test the defaults decide against a call of it: why it is off the path
    cuts: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    # (module, function) -> if-test -> phase -> its value after the walks, and "platform": whether the GPU decides it
    # (the tests around launches and glue runs, see walk.reach's questions)
    answers: dict[tuple[str, str], dict[str, dict[str, Any]]] = dataclasses.field(default_factory=dict)
    # (module, function) -> a tensor question (``program.tensors.tensor_question``) -> its answer: the tensor a glue
    # run's cast converts and its inputs, traced through the engine's code
    types: dict[tuple[str, str], dict[str, Any]] = dataclasses.field(default_factory=dict)


def program_for(root: Path, idx: Indexed, cache_dir: Path | None) -> Program:
    ancestors = {"/".join(rel.split("/")[:n]) for rel in idx.texts for n in range(1, rel.count("/") + 1)}
    packages = {d for d in ancestors if (root / d / "__init__.py").is_file()}
    modules = {module_name(rel, packages): rel for rel in idx.texts}
    return Program(idx.texts, modules, cache_dir)


def env_for(target: Target, preset: ModelPreset, program: Program | None = None) -> Env:
    """The serving defaults a preset's if-tests are evaluated under; with ``program``, also the defaults its
    environment-variable registry declares, its argument classes' literal defaults (``serving.arguments``), under
    the declared settings, and its own top-level packages as installed (``find_spec("sglang")`` where sglang
    serves)."""
    env = target.serving.for_model(preset).environment()
    if program is None:
        return env
    defaults: dict[str, Any] = {}
    for spec in target.serving.arguments:
        mod, _, cls = spec.partition(":")
        defaults.update(program.field_defaults(mod, cls))
        program.facts(mod)  # parsed before the walk: the engine builds its config objects there (VllmConfig(...))
    own = {m.split(".")[0]: True for m in program.modules}
    platform = Platform(env.platform.gpu, {**own, **env.platform.packages})
    return env.with_platform(platform).with_declared(program.env_declarations()).with_defaults(defaults)


def preset_reach(root: Path, idx: Indexed, target: Target, presets: list[ModelPreset], cache_dir: Path | None
                 ) -> list[PresetReach]:
    """The default path of each preset. A preset whose model class the checkout lacks still gets the engine's
    per-step entries (its kernels are the engine's, not the model's).

    The result is cached under a key of every file's bytes, the kernels found in them, the serving defaults and the
    presets, so a warm scan reads one file instead of walking the graph (up to a minute a preset on sglang, the
    presets walked in parallel where the machine allows)."""
    serving = json.dumps(dataclasses.asdict(target.serving), sort_keys=True, default=str)
    kernels = sorted((f["module"], k["name"]) for f in idx.facts for k in f["kernels"])  # as the parser found them
    h = hashlib.sha1(_CODE + f"{FACTS_VERSION}|{_VERSION}|{serving}|{target.hints.model_paths}|"
                     f"{[dataclasses.astuple(p) for p in presets]}|{kernels}".encode())
    for rel in sorted(idx.texts):
        h.update(rel.encode())
        h.update(idx.texts[rel])
    path = cache_dir / "reach" / f"{h.hexdigest()}.json" if cache_dir else None
    hit = cache.load(path)
    if hit is not None:
        try:
            return [_load(r) for r in hit]
        except (KeyError, TypeError):
            pass  # a cache of another shape: walk again
    dumped = _preset_reach(root, idx, target, presets, cache_dir)
    cache.store(path, dumped)
    return [_load(d) for d in dumped]


def _dump(r: PresetReach) -> dict:
    return {"preset": r.preset, "model_class": r.model_class,
            "kernels": [[m, n, [dataclasses.asdict(x) for x in rs]] for (m, n), rs in r.kernels.items()],
            "functions": [[m, n, [dataclasses.asdict(x) for x in rs]] for (m, n), rs in r.functions.items()],
            "cuts": [[m, n, why] for (m, n), why in r.cuts.items()],
            "answers": [[m, n, tests] for (m, n), tests in r.answers.items()],
            "types": [[m, n, got] for (m, n), got in r.types.items()]}


def _load(d: dict) -> PresetReach:
    def table(rows: list) -> dict[tuple[str, str], list[Reach]]:
        return {(m, n): [Reach(x["phase"], x["per_layer"], tuple(x["path"]), x["undecided"], tuple(x["tests"]))
                         for x in rs]
                for m, n, rs in rows}
    return PresetReach(d["preset"], d["model_class"], table(d["kernels"]), table(d["functions"]),
                       {(m, n): why for m, n, why in d["cuts"]}, {(m, n): tests for m, n, tests in d["answers"]},
                       {(m, n): got for m, n, got in d["types"]})


def _preset_reach(root: Path, idx: Indexed, target: Target, presets: list[ModelPreset], cache_dir: Path | None
                  ) -> list[dict]:
    """Each preset's default path, as the cache stores it (``_dump``)."""
    program = program_for(root, idx, cache_dir)
    kernels = {(f["module"], k["name"]) for f in idx.facts for k in f["kernels"]}
    model_files = [rel for rel in idx.texts if matches(rel, target.hints.model_paths)] if target.hints.model_paths \
        else list(idx.texts)
    engine: list[Func] = []
    startup: list[Func] = []
    for key in ("entries", "decode_entries", "startup"):
        for e in getattr(target.serving, key):
            mod, _, qual = e.partition(":")
            f = program.facts(mod)
            if f is None or qual not in f["functions"]:
                raise ConfigError(f"{target.name}: serving.{key} names {e!r}, which is not in this checkout")
            cls = f["functions"][qual]["class"]
            (startup if key == "startup" else engine).append(Func(mod, qual, (mod, cls) if cls else None))
            if cls and f"{cls}.__init__" in f["functions"]:
                startup.append(Func(mod, f"{cls}.__init__", (mod, cls)))
    for e in target.serving.arguments:  # the arguments' own resolution (a dataclass's __post_init__) runs at start
        mod, _, cls = e.partition(":")
        if f"{cls}.__post_init__" in ((program.facts(mod) or {}).get("functions") or {}):
            startup.append(Func(mod, f"{cls}.__post_init__", (mod, cls)))
    job = _Job(program, idx, target, kernels, model_files, engine, startup, cache_dir)
    workers = min(len(presets), os.cpu_count() or 1, _memory() // _WALK_BYTES)
    if workers < 2:
        out = []
        for p in presets:
            out.append(_dump(job.one(p)))
            gc.collect()  # the walk's resolver is a web of cycles, several GB on sglang: gone before the next one
        return out
    # the presets' walks are independent: one process each (forked, so each starts from the facts loaded here), its
    # result handed back as the cache stores it; a process per preset frees its walk's memory when it ends (no
    # collection: seconds of a cold walk on sglang, for memory the exit gives back)
    global _JOB
    _JOB = job
    try:
        with multiprocessing.get_context("fork").Pool(workers, maxtasksperchild=1) as pool:
            return pool.map(_one_dumped, presets, chunksize=1)
    finally:
        _JOB = None


# what one preset's walk holds at most: 2.2 GB for sglang's deepseek-v3, with room to spare
_WALK_BYTES = 3 << 30


def _memory() -> int:
    """The machine's memory in bytes (as much as one walk needs where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return _WALK_BYTES


_JOB: _Job | None = None  # the job the forked workers run (``_one_dumped``)


def _one_dumped(p: ModelPreset) -> dict:
    assert _JOB is not None
    return _dump(_JOB.one(p))


@dataclass
class _Job:
    """What every preset's walk shares: the program, the kernels, the model files and the engine's entries."""
    program: Program
    idx: Indexed
    target: Target
    kernels: set[tuple[str, str]]
    model_files: list[str]
    engine: list[Func]
    startup: list[Func]
    cache_dir: Path | None

    def one(self, p: ModelPreset) -> PresetReach:
        """One preset's default path: the model's forward per step, its constructor once (to build its layers)."""
        program, model, init = self.program, [], list(self.startup)
        found = program.find_class(p.architecture, self.model_files) if p.architecture else None
        if found is not None:
            model += [m for m in [method_of(program, *found, "forward")] if m]
            init += [m for m in [method_of(program, *found, "__init__")] if m]
        functions: dict[tuple[str, str], list[Reach]] = {}
        cuts: dict[tuple[str, str], str] = {}
        answers: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        types: dict[tuple[str, str], dict[str, Any]] = {}
        glue_dir = self.cache_dir.parent / "glue" if self.cache_dir else None
        decode_only = frozenset(tuple(e.split(":")) for e in self.target.serving.decode_entries)
        kernels_reached = reach(program, self.kernels, env_for(self.target, p, program), model, self.engine, init,
                                self.target.serving.other_platforms, decode_only=decode_only, functions=functions,
                                cuts=cuts,
                                questions=lambda reached: questions(program, self.idx, reached, glue_dir),
                                answers=answers,
                                tensor_questions=lambda reached: tensor_questions(program, reached, glue_dir),
                                types=types)
        return PresetReach(p.name, f"{found[0]}:{found[1]}" if found else "", kernels_reached, functions, cuts,
                           answers, types)


def questions(program: Program, idx: Indexed, reached: set[tuple[str, str]], cache_dir: Path | None
              ) -> dict[tuple[str, str], set[str]]:
    """The if-tests the call graph decides after its walk: around every kernel launch (in its wrapper), and around
    every glue run of a function it reached."""
    out: dict[tuple[str, str], set[str]] = {}
    for f in idx.facts:
        for la in f["launches"]:
            if la["branches"]:
                out.setdefault((f["module"], la["wrapper"]), set()).update(b["test"] for b in la["branches"])
    for mod, qual in reached:
        for run in runs_of(program, mod, cache_dir).get(qual, []):
            if run["tests"]:
                out.setdefault((mod, qual), set()).update(t for t, _ in run["tests"])
    return out


def tensor_questions(program: Program, reached: set[tuple[str, str]], cache_dir: Path | None
                     ) -> dict[tuple[str, str], set[str]]:
    """The tensors the call graph traces after its walk, for each glue run of a function it reached: what each cast
    converts (and the dtype it converts to, where an expression names it), and what the run reads at its start, as a
    tensor and as the constant serving makes of it (a router's ``num_fused_shared_experts``, 1 for DeepSeek-V3)."""
    out: dict[tuple[str, str], set[str]] = {}
    for mod, qual in reached:
        for run in runs_of(program, mod, cache_dir).get(qual, []):
            into = out.setdefault((mod, qual), set())
            for c in run["casts"]:
                into.add(tensor_question("tensor", c["line"], c["of"]))
                if c["to"] is None:
                    into.add(tensor_question("dtype", c["line"], c["to_src"]))
            into.update(tensor_question(kind, run["first"], src) for src in run["reads"]
                        for kind in ("tensor", "value"))
    return out
