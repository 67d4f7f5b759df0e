"""Scanning a fixture checkout: cross-file linking, dispatch branches, classes, hotness reasons, cache and errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from smithbot.config import generic_target
from smithbot.scan.index import index, sources
from smithbot.scan.rank import link, merged_answers
from smithbot.scan.reach import preset_reach
from tests.scan.fixtures import write


def scan(tmp_path: Path, **hints):
    root = write(tmp_path / "src")
    target = generic_target(str(root))
    target = dataclasses.replace(target, hints=dataclasses.replace(
        target.hints, custom_jit_decorators=("cached_triton_kernel",), hot_paths=("eng/kernels/**",), **hints))
    idx = index(root, sources(root, target.include, target.exclude), target.hints.custom_jit_decorators,
                tmp_path / "cache", workers=1)
    # the launches' if-tests as the call graph decides them (is_hip() through its body, on the target's GPU)
    answers = merged_answers(preset_reach(root, idx, target, list(target.models[:1]), None))
    return idx, {(s.name, s.line): s for s in link(idx, target, answers=answers)}, root, target


def test_every_kernel_found_and_linked(tmp_path: Path) -> None:
    idx, sites, _, _ = scan(tmp_path)
    assert idx.errors and idx.errors[0][0] == "eng/broken.py"  # reported, and the scan went on
    by = {name: s for (name, _), s in sites.items()}
    assert len([s for s in sites.values() if s.name == "softplus"]) == 2
    rms = by["rms_kernel"]
    # launched in its own file and, through the package re-export, from eng/layers/act.py
    assert {(la.path, la.wrapper) for la in rms.launches} == {("eng/kernels/norm.py", "rmsnorm"),
                                                               ("eng/layers/act.py", "fused")}
    assert {la.path for la in by["dns_kernel"].launches} == {"eng/kernels/norm.py", "eng/layers/act.py"}
    assert by["late"].role == "launched" and by["late"].form == "call"
    assert by["fast_exp"].role == "helper" and by["inner"].role == "unused"
    assert by["guarded"].launches[0].wrapper == "Fn.forward"


def test_dispatch_branches_and_hotness(tmp_path: Path) -> None:
    _, sites, _, _ = scan(tmp_path)
    by = {name: s for (name, _), s in sites.items()}
    cached, plain = by["cached_kernel"], by["plain_jit_alias"]
    assert cached.launches[0].fallback_only and any("fallback-only" in r for r in cached.reasons)
    assert plain.launches[0].cuda_branch and "CUDA branch +1" in plain.reasons
    assert plain.hotness > cached.hotness
    assert "called from eng/layers/act.py and more +3" in by["rms_kernel"].reasons
    ranked = sorted(sites.values(), key=lambda s: -s.hotness)
    assert ranked[0].role == "launched" and not ranked[0].launches[0].fallback_only


def test_extraction_classes(tmp_path: Path) -> None:
    _, sites, _, _ = scan(tmp_path)
    by = {name: s for (name, _), s in sites.items()}
    assert by["dns_kernel"].extraction == "cross-file" and "fast_exp" in by["dns_kernel"].blockers
    assert by["stacked_kernel"].extraction == "stubs" and "exp" in by["stacked_kernel"].blockers
    assert by["rms_kernel"].extraction == "torch+triton"


def test_warm_scan_parses_nothing(tmp_path: Path) -> None:
    idx1, _, root, target = scan(tmp_path)
    assert idx1.parsed > 0 and idx1.cached == 0
    idx2 = index(root, sources(root, target.include, target.exclude), target.hints.custom_jit_decorators,
                 tmp_path / "cache", workers=1)
    assert idx2.parsed == 0 and idx2.cached == idx1.parsed
    (root / "eng" / "layers" / "act.py").write_text((root / "eng" / "layers" / "act.py").read_text() + "\n# edit\n")
    idx3 = index(root, sources(root, target.include, target.exclude), target.hints.custom_jit_decorators,
                 tmp_path / "cache", workers=1)
    assert idx3.parsed == 1


def test_profile_ranks_by_measured_time(tmp_path: Path, monkeypatch) -> None:
    import json

    from smithbot import api

    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "_store_kernel", "dur": 40.0},
        {"ph": "X", "cat": "kernel", "name": "_store_kernel_0d1d2d", "dur": 2.0},
        {"ph": "X", "cat": "kernel", "name": "_rms_norm_kernel", "dur": 5.0},
        {"ph": "X", "cat": "cpu_op", "name": "_decode_stage1", "dur": 999.0},
    ]}))
    sites = api.scan("demo", profile=str(trace)).sites
    assert [s.name for s in sites[:2]] == ["_store_kernel", "_rms_norm_kernel"]
    # one step (no step markers in this trace): 42 of the 47 µs of GPU kernel time
    assert sites[0].measured_us == 42.0 and sites[0].measured_share == pytest.approx(42 / 47)
    assert sites[0].reasons[0] == "measured 89.4% of the GPU time per step (42.0 µs)"
