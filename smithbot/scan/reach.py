"""Which kernels the target's default serving path reaches, per model preset: the call graph of
``smithbot.program.callgraph`` run from each preset's model class and the target's per-step engine entries, under the
target's declared serving defaults (``serving:`` in the target YAML)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from smithbot.config import ConfigError, ModelPreset, Target
from smithbot.program.callgraph import Program, Reach, reach
from smithbot.program.evaluate import Env
from smithbot.scan.index import Indexed, matches
from smithbot.scan.parse import module_name


@dataclass(frozen=True)
class PresetReach:
    preset: str
    model_class: str  # module:Class, or "" when the model's class is not in the checkout
    kernels: dict[tuple[str, str], list[Reach]]  # (module, kernel name) -> one Reach per phase it runs in
    parsed: int  # modules the call graph parsed now (cache misses)


def program_for(root: Path, idx: Indexed, cache_dir: Path | None) -> Program:
    ancestors = {"/".join(rel.split("/")[:n]) for rel in idx.texts for n in range(1, rel.count("/") + 1)}
    packages = {d for d in ancestors if (root / d / "__init__.py").is_file()}
    modules = {module_name(rel, packages): rel for rel in idx.texts}
    return Program(root, idx.texts, modules, cache_dir)


def env_for(target: Target, preset: str) -> Env:
    s = target.serving.for_model(preset)
    return Env(s.names, s.settings, s.env, s.phases)


def preset_reach(root: Path, idx: Indexed, target: Target, presets: list[ModelPreset], cache_dir: Path | None
                 ) -> list[PresetReach]:
    """The default path of each preset. A preset whose model class the checkout lacks still gets the engine's
    per-step entries (its kernels are the engine's, not the model's)."""
    program = program_for(root, idx, cache_dir)
    kernels = {(f["module"], k["name"]) for f in idx.facts for k in f["kernels"]}
    model_files = [rel for rel in idx.texts if matches(rel, target.hints.model_paths)] if target.hints.model_paths \
        else list(idx.texts)
    engine: list[tuple] = []
    startup: list[tuple] = []
    for key in ("entries", "startup"):
        for e in getattr(target.serving, key):
            mod, _, qual = e.partition(":")
            f = program.facts(mod)
            if f is None or qual not in f["functions"]:
                raise ConfigError(f"{target.name}: serving.{key} names {e!r}, which is not in this checkout")
            cls = f["functions"][qual]["class"]
            (engine if key == "entries" else startup).append(("func", mod, qual, (mod, cls) if cls else None))
            if cls and f"{cls}.__init__" in f["functions"]:
                startup.append(("func", mod, f"{cls}.__init__", (mod, cls)))
    out = []
    for p in presets:
        entries, init = list(engine), list(startup)
        found = program.find_class(p.architecture, model_files) if p.architecture else None
        if found is not None:
            mod, cls = found
            for name in ("forward", "__init__"):
                m = _method(program, mod, cls, name)
                if m is not None:
                    (entries if name == "forward" else init).append(m)
        out.append(PresetReach(p.name, f"{found[0]}:{found[1]}" if found else "",
                               reach(program, kernels, env_for(target, p.name), entries, init), program.parsed))
    return out


def _method(program: Program, mod: str, cls: str, name: str) -> tuple | None:
    from smithbot.program.callgraph import _Resolver

    r = _Resolver(program, set(), Env({}, {}, {}, {}))
    found = r.method(mod, cls, name)
    return found[0] if found else None
