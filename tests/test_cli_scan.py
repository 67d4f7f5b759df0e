"""`smithbot scan` and `smithbot targets` from the command line: offline on the demo, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.evaluator.test_cli import assert_one_line_error

DEMO_TRACE = ROOT / "tests" / "fixtures" / "demo-llama3-8b-decode-bs8.trace.json.gz"


def run(*args: str, home: Path, columns: str = "200") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SMITHBOT_HOME": str(home), "COLUMNS": columns}
    return subprocess.run([sys.executable, "-m", "smithbot", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_scan_demo_offline(tmp_path: Path) -> None:
    p = run("scan", "demo", "--json", "--limit", "0", home=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    kernels = [r for r in rows if r.get("kind") != "fusion"]
    names = [k["name"] for k in kernels]
    # the demo engine's torch glue, after the kernels: the step's lengths and positions, with its TODO; the two casts
    # convert what the step hands in, whose dtype the engine's code does not say: listed, not counted
    [glue] = [r for r in rows if r.get("kind") == "fusion"]
    assert glue["function"] == "LlamaModel.forward" and glue["launches_per_call"] == 4 and glue["todos"]
    assert [c.split(":")[0] for c in glue["casts_not_counted"]] == ["lens.clamp(min=1).to() at line 46",
                                                                    "(lens - 1).to() at line 47"]
    assert "_decode_stage1" in names and "_softplus_kernel" in names
    assert names.index("_decode_stage1") < names.index("_softplus_kernel")  # the HIP-only kernel ranks low
    assert (tmp_path / "workspaces" / "demo" / "scan.json").is_file()
    table = run("scan", "demo", home=tmp_path)
    assert table.returncode == 0 and "_rms_norm_kernel" in table.stdout and "from cache" in table.stderr
    assert "demo" in run("targets", home=tmp_path).stdout


def test_scan_bad_inputs(tmp_path: Path) -> None:
    assert_one_line_error(run("scan", "tgi", home=tmp_path), "unknown target 'tgi'")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("x = 1\n")
    assert_one_line_error(run("scan", str(plain), home=tmp_path), "not a git checkout")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    subprocess.run(["git", "-C", str(empty), "add", "."], check=True)
    subprocess.run(["git", "-C", str(empty), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    assert_one_line_error(run("scan", str(empty), home=tmp_path), "no Triton kernels found")
    assert_one_line_error(run("scan", "https://127.0.0.1:9/nothing.git", home=tmp_path), "pass --source PATH")
    assert_one_line_error(run("run", "demo", "--model", "llama-99b", home=tmp_path), "unknown model preset 'llama-99b'")
    assert_one_line_error(run("scan", "demo", "--set", "is_hip", home=tmp_path), "--set 'is_hip': expected KEY=VALUE")


def test_extract_cli(tmp_path: Path) -> None:
    p = run("extract", "demo", "rms_norm", "--out", str(tmp_path / "rms"), "--no-check", home=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "rms" / "task.yaml").is_file() and "wrote" in p.stdout
    assert_one_line_error(run("extract", "demo", "nope_kernel", home=tmp_path), "no launched kernel or wrapper named")
    assert_one_line_error(run("extract", "demo", "scale_heads", "--no-check", home=tmp_path),
                          "_scale_rows_kernel: external extension einops (rearrange)")
    assert_one_line_error(run("extract", "demo", home=tmp_path), "name a kernel (or pass --all)")
    # in a pipe (80 columns) the coverage table folds a long reason over lines rather than cutting it
    table = run("extract", "demo", "--all", "--no-check", "--out", str(tmp_path / "all"), home=tmp_path,
                columns="80")
    assert table.returncode == 0 and "(rearrange)" in table.stdout and "…" not in table.stdout, table.stdout


def test_extract_top_takes_the_hottest_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from smithbot import api

    p = run("extract", "demo", "--top", "2", "--no-check", "--out", str(tmp_path / "top"), home=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "the 2 hottest launched kernels: 2 extracted" in p.stderr
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    hottest = [s.name.strip("_") for s in api.scan("demo").sites if s.role == "launched"][:2]
    assert all(f"_{k}" in p.stdout for k in hottest)  # both rows, each launcher's task once
    assert sorted(d.name for d in (tmp_path / "top").iterdir()) == sorted(hottest)
    assert_one_line_error(run("extract", "demo", "rms_norm", "--top", "2", home=tmp_path), "--top takes the hottest")


def test_the_coverage_table_fits_80_columns_and_json_has_every_row(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SMITHBOT_HOME": str(tmp_path), "COLUMNS": "80", "NO_COLOR": "1"}
    cmd = [sys.executable, "-m", "smithbot", "extract", "demo", "--all", "--no-check", "--out", str(tmp_path / "t")]
    table = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    rows = json.loads(subprocess.run(cmd + ["--json"], capture_output=True, text=True, env=env, timeout=300).stdout)
    assert {r["kernel"] for r in rows} >= {"_rms_norm_kernel", "_decode_stage1"}
    assert all(not r["checked"] and r["why"] for r in rows)
    blocked = next(r for r in rows if not r["extracted"])  # the demo's kernel behind an extension
    assert "external extension einops" in blocked["why"]
    shown = [line for line in lines if blocked["kernel"] in line]
    assert len(shown) == 1 and "external extension" in shown[0]  # one line a kernel, its reason cut to fit


def test_run_ends_inside_its_total_time(tmp_path: Path) -> None:
    """`smithbot run --time-total` shares the job among its parts (extraction, search and verification each count)
    and the whole process ends inside it, though the search alone would take far longer (1000 iterations). One named
    kernel whose self-check fits its share on a slow CPU: the hottest demo kernels' interpreted self-checks take
    longer than a 40 s job gives them, so which of them reached a search depended on the machine's speed."""
    import time

    t0 = time.monotonic()
    r = run("run", "demo", "--kernel", "rms_norm", "--iterations", "1000", "--time-total", "90", "--backend",
            "interpreter", "--profile", str(DEMO_TRACE), home=tmp_path)
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    assert wall <= 90, f"the job took {wall:.1f} s of its 90"
    assert "## smithbot run: demo" in r.stdout and "| kernel |" in r.stdout
    assert "evolve:" in r.stderr  # a kernel got as far as its search
    # the task comes from the job's own scan, ranked by the profile: its share reaches the task (and so the PR)
    [task] = (tmp_path / "workspaces" / "demo" / "tasks").glob("*/task.yaml")
    assert yaml.safe_load(task.read_text())["hotness"]["share"] > 0


def test_a_fusion_pick_whose_task_breaks_is_a_row_with_its_reason(tmp_path: Path) -> None:
    """`run --fusion` on a copy of the demo engine whose glue cannot run on its own inputs (a reshape to rows of 7
    lengths): the pick's task fails its self-check, and the job says so in its row and summary, and ends cleanly,
    where a fusion pick's error once became an AttributeError (``site.name`` on a FusionSite)."""
    import shutil

    engine = tmp_path / "engine"
    shutil.copytree(ROOT / "targets" / "demo", engine)
    llama = engine / "minengine" / "models" / "llama.py"
    text = llama.read_text()
    glue = "        lens = lens.clamp(min=1).to(torch.int32)\n"
    assert text.count(glue) == 1
    llama.write_text(text.replace(glue, "        lens = lens.clamp(min=1).to(torch.int32).view(-1, 7)\n"))
    for git in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "engine"]):
        subprocess.run(["git", *git], cwd=engine, check=True, capture_output=True)
    r = run("run", str(ROOT / "targets" / "demo.yaml"), "--source", str(engine), "--fusion", "--kernel",
            "glue:LlamaModel.forward", "--iterations", "2", "--backend", "interpreter", home=tmp_path / "home")
    assert "Traceback" not in r.stderr and "AttributeError" not in r.stderr, r.stderr[-3000:]
    said = " ".join(r.stderr.split())
    assert "extract: glue:LlamaModel.forward" in said and "skipped:" in said, said[-2000:]
    row = next(line for line in r.stdout.splitlines() if line.startswith("| `glue:LlamaModel.forward"))
    # the reason, cause first and without the workspace's path: the reshape the glue cannot do
    assert "| preparing the baseline failed: RuntimeError: shape '[-1, 7]' is invalid" in row, row
    assert str(tmp_path) not in row, row
