"""Measured hotness: run a target's own benchmark on random weights under the torch profiler, read the Chrome trace,
and give each Triton kernel its share of the GPU time of a step.

- ``run_profile`` writes the preset's ``config.json`` (from ``targets/models.yaml``; no hub download), runs the
  command of the target's ``profile:`` section in the checkout, and ingests the trace it writes;
- ``read_trace`` reads a torch-profiler Chrome trace, ours or a user's: GPU kernel events (``cat: kernel``) summed
  per name, divided by the steps profiled (our metadata's, else the profiler's ``ProfilerStep#N`` markers), and our
  own metadata (target, preset, phase, batch, steps) read back when the trace was written by ``smithbot profile``;
- ``Profile.match`` maps trace names to scanned ``@triton.jit`` names: Triton names a kernel after its function;
  older releases append a specialisation suffix (``_0d1d2de``), and autotuned variants share one name, so variants
  fold onto their definition. Everything else on the GPU (ATen's elementwise and index kernels, cuBLAS GEMMs) is kept
  as ``ops``: the torch glue between the kernels, which is what a fusion replaces.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smithbot.config import ConfigError, ModelPreset, Target

_SPECIALISED = re.compile(r"^(?P<base>.+?)_(?:\d+[a-z]*)+$")  # name_0d1d2de: an older triton's signature suffix
_STEP = re.compile(r"^ProfilerStep#\d+$")


@dataclass(frozen=True)
class Profile:
    """GPU time per kernel name in one trace, with what the trace says about how it was taken."""

    kernels: dict[str, tuple[float, int]]  # trace kernel name -> (total µs, launches)
    steps: int  # profiled steps (ProfilerStep markers), at least 1
    meta: dict[str, Any] = field(default_factory=dict)  # target, preset, phase, batch when smithbot took it
    # a table measured from tasks: kernel name -> the share of its time a kernel at its roofline would not spend
    headroom: dict[str, float] = field(default_factory=dict)

    @property
    def from_tasks(self) -> bool:
        """Whether the table was measured from extracted tasks (``profile --from-tasks``), not by running the engine:
        it says what a kernel costs if it runs, not that it runs."""
        return self.meta.get("source") == "tasks"

    @property
    def total_us(self) -> float:
        return sum(us for us, _ in self.kernels.values())

    def match(self, names: set[str]) -> dict[str, tuple[float, float]]:
        """Scanned kernel name -> (µs per step, share of all GPU kernel time), variants folded."""
        total = self.total_us or 1.0
        out: dict[str, list[float]] = {}
        for name in self.kernels:
            base = fold(name, names)
            if base is not None:
                us = self.kernels[name][0]
                acc = out.setdefault(base, [0.0, 0.0])
                acc[0] += us / self.steps
                acc[1] += us / total
        return {k: (v[0], v[1]) for k, v in out.items()}

    def ops(self, names: set[str], top: int = 20) -> list[tuple[str, float, float]]:
        """The GPU kernels that are not the target's Triton kernels: (name, µs per step, launches per step)."""
        rest = [(n, us / self.steps, c / self.steps) for n, (us, c) in self.kernels.items() if fold(n, names) is None]
        return sorted(rest, key=lambda r: -r[1])[:top]

    def phase_label(self) -> str:
        """``decode step on qwen3-30b-a3b (batch 8)``, or ``step`` when the trace does not say."""
        m = self.meta
        what = f"{m['phase']} step" if m.get("phase") else "step"
        on = f" on {m['preset']}" if m.get("preset") else ""
        batch = f" (batch {m['batch']})" if m.get("batch") else ""
        source = ", from extracted tasks" if m.get("source") == "tasks" else ""
        cpu = ", interpreter times" if m.get("backend") == "interpreter" else ""
        return f"{what}{on}{batch}{source}{cpu}"

    def summary(self, names: set[str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {**self.meta, "steps": self.steps,
                               "gpu_us_per_step": round(self.total_us / self.steps, 2)}
        if names is not None:
            out["ops"] = [{"name": n[:160], "us_per_step": round(us, 2), "launches_per_step": c}
                          for n, us, c in self.ops(names)]
        return out


def fold(trace_name: str, names: set[str]) -> str | None:
    """The scanned kernel a trace name is a variant of, or None."""
    if trace_name in names:
        return trace_name
    m = _SPECIALISED.match(trace_name)
    return m.group("base") if m and m.group("base") in names else None


def _load(path: str | Path) -> Any:
    """A trace's JSON, gzipped or not (engines write ``.trace.json.gz``)."""
    raw = Path(path).read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def read_trace(path: str | Path) -> Profile:
    """A torch-profiler Chrome trace; ConfigError (one line) when it is not one or holds no GPU kernel."""
    try:
        data = _load(path)
    except (OSError, ValueError, EOFError) as exc:
        raise ConfigError(f"{path}: not a readable Chrome trace JSON ({str(exc).splitlines()[0]})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ConfigError(f"{path}: not a Chrome trace (no traceEvents list)")
    kernels: dict[str, list[float]] = {}
    headroom: dict[str, float] = {}
    steps = 0
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat, name = str(ev.get("cat", "")).lower(), str(ev.get("name", ""))
        if cat == "kernel":
            acc = kernels.setdefault(name, [0.0, 0])
            acc[0] += float(ev.get("dur", 0.0))
            acc[1] += 1
            if isinstance(ev.get("args"), dict) and isinstance(ev["args"].get("headroom"), (int, float)):
                headroom[name] = float(ev["args"]["headroom"])
        elif _STEP.match(name) and cat in ("user_annotation", "cpu_op", "python_function", ""):
            steps += 1
    if not kernels:
        raise ConfigError(f"{path}: the trace holds no GPU kernel events (was it taken with ProfilerActivity.CUDA?)")
    meta = data.get("smithbot", {}) if isinstance(data, dict) else {}
    meta = meta if isinstance(meta, dict) else {}
    if isinstance(meta.get("steps"), int) and meta["steps"] > 0:
        steps = meta["steps"]  # smithbot profile ran this many steps under the profiler
    return Profile({k: (v[0], int(v[1])) for k, v in kernels.items()}, max(steps, 1), meta, headroom)


def compact(src: Path, dst: Path, meta: dict[str, Any]) -> None:
    """A small copy of a trace: GPU kernel events and step markers only, plus our metadata."""
    data = _load(src)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    keep = [{k: ev[k] for k in ("ph", "cat", "name", "dur", "args") if k in ev} for ev in events
            if isinstance(ev, dict) and ev.get("ph") == "X" and (str(ev.get("cat", "")).lower() == "kernel"
                                                                  or _STEP.match(str(ev.get("name", ""))))]
    tmp = dst.with_suffix(".tmp")
    tmp.write_text(json.dumps({"smithbot": meta, "traceEvents": keep}, separators=(",", ":")))
    tmp.replace(dst)


def run_profile(target: Target, root: Path, preset: ModelPreset, batch: int, phase: str, out: Path,
                steps: int = 4, timeout_s: float = 1800.0) -> Path:
    """Run the target's profile command for a preset in checkout ``root``; the compact trace lands at ``out``."""
    if not target.profile:
        raise ConfigError(f"{target.name} has no profile: section in its target YAML; pass --trace FILE instead")
    with tempfile.TemporaryDirectory(prefix="smithbot-profile-") as tmp:
        model_dir = Path(tmp) / preset.name
        model_dir.mkdir()
        (model_dir / "config.json").write_text(json.dumps(preset.config_json(), indent=1))
        raw = Path(tmp) / "trace.json"
        steps = steps if phase == "decode" else 1  # a prefill is one step
        values = {"python": sys.executable, "model_dir": str(model_dir), "config": str(model_dir / "config.json"),
                  "batch": str(batch), "phase": phase, "steps": str(steps), "trace": str(raw), "trace_dir": tmp}
        cmd = [part.format(**values) for part in shlex.split(target.profile)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
        try:
            proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ConfigError(f"the profile command ran past {timeout_s:.0f} s: {shlex.join(cmd)}") from None
        except OSError as exc:
            raise ConfigError(f"the profile command did not start ({exc}): {shlex.join(cmd)}") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
            raise ConfigError(f"the profile command failed (exit {proc.returncode}): {last}")
        if not raw.is_file():  # an engine that names its own trace file in {trace_dir} (sglang's one_batch)
            written = sorted((p for p in Path(tmp).rglob("*.json*") if p.name != "config.json"),
                             key=lambda p: p.stat().st_mtime)
            if not written:
                raise ConfigError(f"the profile command wrote no trace ({{trace}} or a .json[.gz] in {{trace_dir}}): "
                                  f"{shlex.join(cmd)}")
            raw = written[-1]
        out.parent.mkdir(parents=True, exist_ok=True)
        compact(raw, out, {"target": target.name, "preset": preset.name, "phase": phase, "batch": batch,
                           "steps": steps})
    return out
