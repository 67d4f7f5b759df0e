"""Measured hotness: torch-profiler traces read, kernel names folded onto their definitions, and the demo engine's
ranking checked against a real trace taken on an H200 (tests/fixtures/demo-llama3-8b-decode-bs8.trace.json.gz: four
decode steps of the demo's Llama model at llama3-8b's sizes, batch 8, written by `smithbot profile demo --model
llama3-8b`; only GPU kernel events are kept)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from smithbot import api
from smithbot.config import ConfigError
from smithbot.extract.pipeline import extract_glue_site
from smithbot.profile import fold, read_trace
from tests.conftest import ROOT
from tests.test_cli_scan import run
from tests.evaluator.test_cli import assert_one_line_error

H200_TRACE = ROOT / "tests" / "fixtures" / "demo-llama3-8b-decode-bs8.trace.json.gz"


def trace(tmp_path: Path, events: list[dict], name: str = "trace.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def k(name: str, dur: float) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "dur": dur}


def test_names_fold_onto_definitions() -> None:
    names = {"_rms_norm_kernel", "fused_moe_kernel", "kernel"}
    assert fold("_rms_norm_kernel", names) == "_rms_norm_kernel"
    assert fold("fused_moe_kernel_0d1d2d3de4de", names) == "fused_moe_kernel"  # an older triton's signature suffix
    assert fold("kernel_2", names) == "kernel" and fold("fused_moe_kernel_gptq", names) is None
    assert fold("void at::native::vectorized_elementwise_kernel<4>", names) is None


def test_shares_per_step(tmp_path: Path) -> None:
    path = trace(tmp_path, [
        k("_rms_norm_kernel", 30.0), k("_rms_norm_kernel_0d1d2de", 10.0),  # two specialisations, one definition
        k("_rms_norm_kernel", 40.0),  # an autotuned variant: the same name
        k("void at::native::elementwise_kernel<128, 2>", 20.0),
        {"ph": "X", "cat": "cpu_op", "name": "_rms_norm_kernel", "dur": 999.0},  # host time is not GPU time
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "dur": 50.0},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "dur": 50.0},
        {"ph": "i", "cat": "kernel", "name": "_rms_norm_kernel"},  # not a complete event
    ])
    p = read_trace(path)
    assert p.steps == 2 and p.total_us == 100.0
    us, share = p.match({"_rms_norm_kernel"})["_rms_norm_kernel"]
    assert us == pytest.approx(40.0) and share == pytest.approx(0.8)
    assert p.ops({"_rms_norm_kernel"}) == [("void at::native::elementwise_kernel<128, 2>", 10.0, 0.5)]


@pytest.mark.parametrize("text, why", [
    ("not json", "not a readable Chrome trace JSON"),
    ('{"events": []}', "not a Chrome trace (no traceEvents list)"),
    ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "dur": 1}]}', "holds no GPU kernel"),
])
def test_bad_traces(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "t.json").write_text(text)
    with pytest.raises(ConfigError, match=re.escape(why)):
        read_trace(tmp_path / "t.json")


def test_h200_trace_ranks_the_demo_by_measured_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path))
    p = read_trace(H200_TRACE)
    assert p.meta["gpu"] == "NVIDIA H200" and p.steps == 4
    sites = [s for s in api.scan("demo", profile=str(H200_TRACE)).sites if s.measured_share]
    # what the H200 measured: the demo's deliberately mistuned RMSNorm (BLOCK=32 for a 4096 row) dominates, then
    # the split-KV decode attention; the rotary, SiLU and reduce kernels are each under 1%
    assert [s.name for s in sites[:2]] == ["_rms_norm_kernel", "_decode_stage1"]
    assert sites[0].measured_share > 0.3 and sites[0].reasons[0].startswith("measured 3")
    assert {s.name for s in sites} == {"_rms_norm_kernel", "_decode_stage1", "_rotary_kernel", "_silu_and_mul_kernel",
                                       "_decode_stage2"}
    assert all(0 < s.measured_share < 0.01 for s in sites[2:])
    # each measured kernel is also on the Llama model's default path, per layer
    assert all(s.presets == ("llama3-8b",) and "per layer" in s.default_path for s in sites)


def test_profile_command(tmp_path: Path) -> None:
    p = run("profile", "demo", "--trace", str(H200_TRACE), "--model", "llama3-8b", home=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "decode step on llama3-8b (batch 8)" in p.stdout and "_rms_norm_kernel" in p.stdout
    assert "nvjet" in p.stdout  # the GEMMs between the kernels, kept as torch glue
    kept = tmp_path / "workspaces" / "demo" / "profiles" / "llama3-8b-decode-bs8.json"
    assert read_trace(kept).match({"_rms_norm_kernel"}) == read_trace(H200_TRACE).match({"_rms_norm_kernel"})
    scan = run("scan", "demo", "--profile", str(kept), "--json", home=tmp_path)
    assert json.loads(scan.stdout)[0]["name"] == "_rms_norm_kernel"


def test_profile_bad_input(tmp_path: Path) -> None:
    (tmp_path / "garbage.json").write_text("{")
    assert_one_line_error(run("profile", "demo", "--trace", str(tmp_path / "garbage.json"), home=tmp_path),
                          "not a readable Chrome trace JSON")
    other = trace(tmp_path, [k("some_other_engines_kernel", 5.0)], "other.json")
    assert_one_line_error(run("scan", "demo", "--profile", str(other), home=tmp_path),
                          "no kernel in the trace is a Triton kernel of demo")
    assert_one_line_error(run("profile", "demo", "--model", "llama-99b", home=tmp_path),
                          "unknown model preset 'llama-99b'")
    assert_one_line_error(run("scan", "demo", "--set", "attention_backend=triton", home=tmp_path),
                          "--set attention_backend: not a serving default of demo")
    assert_one_line_error(run("profile", "demo", "--phase", "verify", "--trace", str(H200_TRACE), home=tmp_path),
                          "'--phase': 'verify' is not one of decode, prefill")
    no_gpu = run("profile", "demo", "--model", "llama3-8b", home=tmp_path)
    if no_gpu.returncode != 0:  # without a GPU the demo's benchmark says so, and so does the command
        assert_one_line_error(no_gpu, "the profile command failed (exit 2): minengine.bench: needs a CUDA GPU")


def test_profile_from_tasks_offline(tmp_path: Path) -> None:
    """With no engine and no GPU, the step is measured from extracted tasks under the interpreter, labelled so: the
    preset's first default kernel is extracted and timed, its time multiplied by its launches a step (per layer:
    llama3-8b's 32), and the table is kept as a trace that `scan --profile` ranks by."""
    p = run("profile", "demo", "--model", "llama3-8b", "--from-tasks", "--top", "1", home=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "under the interpreter (CPU times, not a GPU's)" in p.stdout
    profiles = tmp_path / "workspaces" / "demo" / "profiles"
    kept = profiles / "llama3-8b-tasks-decode-bs64-interpreter.json"
    table = json.loads((profiles / "llama3-8b-tasks-decode-bs64-interpreter.table.json").read_text())
    first = next(s for s in api.scan("demo", model="llama3-8b").sites if s.reach == "default")
    [row] = table["rows"]
    assert (table["backend"], table["source"], row["name"], row["kind"]) == ("interpreter", "tasks", first.name,
                                                                             "kernel")
    assert row["per_step"] == 32 and "per layer" in first.default_path
    assert row["decode_case"] == "irregular-decode-bs3" and row["us"] > 0  # the interpreter's case
    assert row["us_per_step"] == pytest.approx(row["us"] * 32) and row["share"] == 1.0 and not row["why"]
    measured = read_trace(kept)
    assert measured.meta["source"] == "tasks" and "from extracted tasks, interpreter times" in measured.phase_label()
    scan = run("scan", "demo", "--profile", str(kept), "--json", home=tmp_path)
    assert json.loads(scan.stdout)[0]["name"] == first.name


def test_profile_from_tasks_picks_default_sites_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels and glue runs of the preset, default ones before possible ones, each in the scan's order, with the
    launches (a kernel) or runs (glue) a step; no site of another preset."""
    from smithbot.measure import pick

    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path))
    result = api.scan("demo", model="llama3-8b")
    chosen = pick(result.sites, result.fusion, "llama3-8b", 50)
    reaches = [reach for _, reach, _ in chosen]
    assert reaches == sorted(reaches, key=lambda r: r != "default") and "default" in reaches
    kernels = [s for s, _, _ in chosen if s in result.sites]
    assert [s.name for s in kernels] == [s.name for s in result.sites if s in kernels]  # the scan's order
    assert all("llama3-8b" in s.presets for s in kernels)
    [glue] = [(s, n) for s, _, n in chosen if s not in result.sites]
    assert glue[0].function == "LlamaModel.forward" and glue[1] == 1  # once per step
    assert len(pick(result.sites, result.fusion, "llama3-8b", 2)) == 2


def test_profile_from_tasks_bad_input(tmp_path: Path) -> None:
    assert_one_line_error(run("profile", "demo", "--from-tasks", home=tmp_path),
                          "--from-tasks measures one model preset's step: name it with --model")
    assert_one_line_error(run("profile", "demo", "--from-tasks", "--model", "llama-99b", home=tmp_path),
                          "unknown model preset 'llama-99b'")
    assert_one_line_error(run("profile", "demo", "--from-tasks", "--model", "llama3-8b", "--trace", str(H200_TRACE),
                              home=tmp_path), "pass one of them")
    assert_one_line_error(run("profile", "demo", "--from-tasks", "--model", "llama3-8b", "--top", "0",
                              home=tmp_path), "Invalid value for '--top'")


def test_a_rows_bandwidth_is_claimed_only_where_its_bytes_can_be_what_it_moves() -> None:
    """Over the copy bandwidth, the bytes a call is given overstate what it reads (a block table, the experts top-k
    picks): the table says so and claims nothing; the decode case is the one nearest batch 64, whatever its suffix."""
    from smithbot.measure import bandwidth, batch_of

    assert bandwidth(None) == "-" and bandwidth(0.004) == "0.4%" and bandwidth(0.93) == "93%"
    assert bandwidth(5.92) == "reads less than it is given (592% if all)"
    assert batch_of("deepseek-v3-decode-bs64-128experts") == 64 and batch_of("deepseek-v3-prefill-4k") == 0


def test_a_table_measured_from_tasks_ranks_within_reach_by_what_a_step_could_save(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table from tasks says what a kernel costs if it runs, not that it runs: default kernels still come first,
    then each by its µs a step times its headroom (a kernel at its roofline has nothing to give)."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({"smithbot": {"source": "tasks", "preset": "llama3-8b", "phase": "decode", "batch": 64,
                                             "steps": 1, "backend": "cuda"},
                                "traceEvents": [
                                    {**k("_rms_norm_kernel", 100.0), "args": {"headroom": 0.1}},  # saves <= 10
                                    {**k("_rotary_kernel", 50.0), "args": {"headroom": 1.0}},  # saves <= 50
                                    {**k("_softplus_kernel", 1000.0), "args": {"headroom": 1.0}},  # never runs
                                ]}))
    measured = read_trace(path)
    assert measured.from_tasks and measured.headroom == {"_rms_norm_kernel": 0.1, "_rotary_kernel": 1.0,
                                                         "_softplus_kernel": 1.0}
    sites = [s for s in api.scan("demo", profile=str(path)).sites if s.role == "launched"]
    names = [s.name for s in sites]
    assert names[:2] == ["_rotary_kernel", "_rms_norm_kernel"]
    assert names.index("_softplus_kernel") > max(names.index(s.name) for s in sites if s.reach == "default")
    assert "from extracted tasks" in sites[0].measured_of


def _broken_engine(tmp_path: Path, broken: tuple[str, ...]) -> str:
    """The fake engine of ``tests/program/engine.py`` with the named kernels failing to compile."""
    from tests.conftest import git_repo
    from tests.program.engine import FILES, TARGET_YAML

    def breaks(text: str) -> str:
        for name in broken:
            text = text.replace(f"def {name}(x):\n    pass\n", f"def {name}(x):\n    tl.static_assert(False)\n")
        return text

    root = git_repo(tmp_path / "eng", {rel: breaks(text) for rel, text in FILES.items()})
    yaml = tmp_path / "eng.yaml"
    yaml.write_text(TARGET_YAML.format(root=root))
    return str(yaml)


def test_a_task_that_fails_is_a_row_with_its_reason_and_the_table_is_still_written(tmp_path: Path) -> None:
    """The first of llama3-8b's two first default kernels does not compile: it is a row with its reason, the second
    is timed, and the table is written; where no site can be timed at all, one line and exit 2."""
    yaml = _broken_engine(tmp_path, ("plain_quant_kernel",))
    p = run("profile", yaml, "--model", "llama3-8b", "--from-tasks", "--top", "2", home=tmp_path / "home")
    assert p.returncode == 0, p.stderr
    table = json.loads((tmp_path / "home" / "workspaces" / "eng" / "profiles" /
                        "llama3-8b-tasks-decode-bs64-interpreter.table.json").read_text())
    broken, timed = table["rows"]
    assert broken["name"] == "plain_quant_kernel" and broken["us"] is None
    assert "preparing the baseline failed" in broken["why"] and broken["share"] is None
    assert timed["us"] > 0 and timed["share"] == 1.0 and not timed["why"]

    none = _broken_engine(tmp_path / "all", ("plain_quant_kernel", "router_kernel"))
    assert_one_line_error(run("profile", none, "--model", "llama3-8b", "--from-tasks", "--top", "2",
                              home=tmp_path / "home2"),
                          "none of the 2 sites on llama3-8b's default paths could be timed; the first: "
                          "plain_quant_kernel:")


def test_headroom_is_to_the_nearer_roof_and_no_call_saves_below_an_empty_launch() -> None:
    """A kernel's headroom is 1 minus the higher of its copy-bandwidth and dense-rate fractions (bytes over
    ``STREAMS`` of the copy bandwidth say nothing); no call can save more than its time less an empty launch."""
    from smithbot.measure import Row, compute, headroom, reached

    row = Row("k", "kernel", "default", 10, us=20.0)
    assert reached(row) is None and headroom(row) == 1.0
    assert reached(replace(row, bw_fraction=0.3, flop_fraction=0.8)) == 0.8
    assert headroom(replace(row, bw_fraction=0.3, flop_fraction=0.8)) == pytest.approx(0.2)
    assert headroom(replace(row, bw_fraction=5.0)) == 1.0  # reads less than it is given: no roof known
    assert headroom(replace(row, bw_fraction=0.95)) == pytest.approx(0.05)
    assert headroom(row, launch_us=5.0) == pytest.approx(0.75)  # 20 µs of which an empty launch takes 5
    assert headroom(replace(row, us=2.0), launch_us=3.0) == 0.0
    assert compute(row) == "-" and compute(replace(row, flops=10**9)) == "no rate for its width"
    assert compute(replace(row, flops=10**9, flop_fraction=0.42)) == "42%"


def test_a_table_from_tasks_gives_glue_runs_their_share_and_ranks_them(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A glue run's row in a table from tasks (``glue:FUNCTION:LINE``) gives the fusion site its share of the measured
    part, which its task carries to the PR; glue runs are ranked like kernels: reach first, then what a step could
    save."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    glue = [g for g in api.scan("demo", model="llama3-8b").fusion]
    assert glue, "the demo has glue on llama3-8b's default path"
    first = glue[0]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({"smithbot": {"source": "tasks", "preset": "llama3-8b", "phase": "decode", "batch": 64,
                                             "steps": 1, "backend": "cuda"},
                                "traceEvents": [{**k("_rms_norm_kernel", 300.0), "args": {"headroom": 0.5}},
                                                {**k(first.name, 100.0), "args": {"headroom": 1.0}}]}))
    result = api.scan("demo", model="llama3-8b", profile=str(path))
    [site] = [g for g in result.fusion if g.name == first.name]
    assert site.measured_share == pytest.approx(0.25) and "from extracted tasks" in site.measured_of
    assert all(g.measured_share is None for g in result.fusion if g.name != first.name)
    assert result.fusion[0].name == first.name
    cov = extract_glue_site(result, site, None, tmp_path / "tasks", False, 120.0)
    hot = yaml.safe_load((Path(cov.out) / "task.yaml").read_text())["hotness"]
    assert hot["share"] == pytest.approx(0.25) and "from extracted tasks" in hot["measured"]


def test_a_kernel_in_an_op_that_launches_others_gets_its_own_time_and_no_roofline() -> None:
    """A kernel's task may be the op that launches it among others (a fused MoE's sorting kernels): its row takes the
    kernel's own time in the call, not the op's (on the H200 three sorting kernels each took the whole MoE's 1.4 ms),
    and claims no roofline, since the call's bytes and work are not its own."""
    from evaluator import TaskError
    from smithbot.measure import own_time

    got = {"us": 1428.0, "prefill_us": 5000.0, "bw_fraction": 0.95, "flop_fraction": 0.64, "flops": 10**11,
           "entry": "fused_moe_blocked_fp8", "kernel_us": {"_fill_block_meta_kernel": 3.5, "fused_moe_kernel": 1400.0},
           "prefill_kernel_us": {"_fill_block_meta_kernel": 9.0, "fused_moe_kernel": 4900.0}}
    own = own_time(got, "_fill_block_meta_kernel")
    assert (own["us"], own["prefill_us"]) == (3.5, 9.0)
    assert own["bw_fraction"] is own["flop_fraction"] is own["flops"] is None
    assert own["note"] == ("its own time in fused_moe_blocked_fp8(), which also launches fused_moe_kernel: "
                           "no roofline")
    alone = {**got, "kernel_us": {"fused_moe_kernel": 1400.0}}
    assert own_time(alone, "fused_moe_kernel") is alone  # the call is the kernel's: its time and roofline stand
    # at the timed case the op takes a path without this kernel (on the H200 it then took the MoE's whole 1.4 ms)
    with pytest.raises(TaskError, match=r"fused_moe_blocked_fp8\(\) does not launch it at deepseek-v3-decode-bs64; "
                                        r"it launches fused_moe_kernel there"):
        own_time({**alone, "decode_case": "deepseek-v3-decode-bs64"}, "_fill_block_meta_kernel")


@pytest.mark.gpu
def test_each_kernel_of_a_call_is_timed_on_its_own() -> None:
    """The bundled moe_routing call launches two kernels: the baseline's timing gives each one's own time, and they
    add up to no more than the call's (eager events around a tiny launch hold more than the kernel: the call's graph
    time is then shared out in their proportions)."""
    import torch

    from evaluator import Evaluator

    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    with Evaluator(ROOT / "smithbot" / "tasks" / "moe_routing", backend="cuda") as ev:
        [case] = ev.time_baseline([ev.case_names[0]])
    assert set(case["kernel_us"]) == {"_expert_count_kernel", "_topk_softmax_kernel"}
    assert all(us > 0 for us in case["kernel_us"].values())
    assert sum(case["kernel_us"].values()) <= case["base_us"] * 1.0001


def test_only_a_gpu_table_ranks_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run --model` ranks by the preset's table from tasks only where the GPU made it: an interpreter's table (CPU
    times) is kept under its own name and ranks nothing by itself."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path))
    profiles = tmp_path / "workspaces" / "demo" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "llama3-8b-tasks-decode-bs64-interpreter.json").write_text("{}")
    assert api.tasks_trace("demo", "llama3-8b") is None
    gpu = profiles / "llama3-8b-tasks-decode-bs64.json"
    gpu.write_text("{}")
    assert api.tasks_trace("demo", "llama3-8b") == gpu
