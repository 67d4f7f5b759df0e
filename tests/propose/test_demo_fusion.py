"""`smithbot demo --fusion` without a GPU: the whole fusion path on the interpreter, to a preview. The demo runs once
for this module; its generated test then runs against the patched mini-engine, and a submit of the preview is
refused."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


def _smithbot(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SMITHBOT_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "smithbot", *args], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict[str, str], Path]:
    home = tmp_path_factory.mktemp("demo-fusion") / "home"
    p = _smithbot(home, "demo", "--fusion", "--backend", "interpreter")
    assert p.returncode == 0, p.stderr
    paths = dict(re.findall(r"^(patch|PR body|test|verification):\s+(\S+)$", p.stdout, flags=re.M))
    paths["checkout"] = re.search(r"^branch \S+ at \w+ in (\S+)$", p.stdout, flags=re.M).group(1)  # type: ignore[union-attr]
    return p, paths, home


def test_demo_fusion_goes_from_the_glue_to_a_preview_patch(demo: tuple) -> None:
    p, paths, home = demo
    said = " ".join(p.stderr.split())  # the live view wraps its lines
    # (its two .to() casts convert what the step hands in, whose dtype the engine's code does not say: not counted)
    assert "pick: glue:LlamaModel.forward:46 (minengine/models/llama.py:46-48, default): .clamp, -, minimum, " \
           ".clamp; 4 torch ops a step, by scan's count (the evaluator counts the kernels they launch)" in said
    assert "TODO: fuse these small ops" in said
    assert "the seed is the Inductor output the target ships for this glue" in said
    assert re.search(r"verify: \w+ accepted: correct on all 2 verification cases, launching fewer kernels a call "
                     r"than the glue \(5 -> 1\); speed not judged", said)
    assert p.stdout.startswith("preview: correct on every verification case with fewer kernel launches, not timed")
    v = json.loads(Path(paths["verification"]).read_text())
    assert v["preview"] is True and v["backend"] == "interpreter" and v["winner"]
    [winner] = [c for c in v["candidates"] if c["candidate"] == v["winner"]]
    assert {c["name"]: c["launches"] for c in winner["cases"]} == {
        "irregular-decode-bs3": [5, 1], "verify-irregular-decode-tokens5": [5, 1]}
    # the glue's three lines (and the TODO that asked for this) become one call of the new module's launcher
    patch = Path(paths["patch"]).read_text()
    assert re.findall(r"^diff --git a/(\S+) ", patch, flags=re.M) == [
        "minengine/kernels/fused_lens_positions.py", "minengine/models/llama.py",
        "tests/kernels/test_fused_lens_positions.py"]
    model_hunk = patch.split("diff --git a/minengine/models/llama.py")[1].split("diff --git")[0]
    assert re.findall(r"^-(?!--).*$", model_hunk, flags=re.M) == [
        "-        # TODO: fuse these small ops into one kernel: the step's lengths and rotary positions take six launches",
        "-        lens = lens.clamp(min=1).to(torch.int32)",
        "-        positions = torch.minimum(positions, (lens - 1).to(positions.dtype))",
        "-        positions = positions.clamp(min=0)"]
    assert "+        lens, positions = fused_lens_positions(lens, positions)" in model_hunk
    body = Path(paths["PR body"]).read_text()
    assert body.startswith("# [Kernel] Fuse the torch glue of LlamaModel.forward into one kernel (preview: correct "
                           "on 2 model shapes, not yet timed on a GPU)")
    assert "**Preview, not a pull request.**" in body
    assert "LlamaModel_forward_glue" not in body  # the task's entry is no name in the patch: fused_lens_positions is
    assert "| `irregular-decode-bs3` | 5 | 1 |" in body
    assert "µs" not in body and not re.search(r"\d× \[", body)  # no interpreter time is shown as a speed
    assert f"smithbot verify {v['run']} --backend cuda" in body


def _pytest(checkout: Path, test: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(checkout), "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=checkout,
                          capture_output=True, text=True, env=env, timeout=300)


def test_the_generated_test_passes_on_the_fusion_and_catches_a_wrong_one(demo: tuple) -> None:
    _, paths, _ = demo
    checkout = Path(paths["checkout"])
    test = "tests/kernels/test_fused_lens_positions.py"
    assert (checkout / test).read_text() == Path(paths["test"]).read_text()
    ok = _pytest(checkout, test)
    assert ok.returncode == 0 and re.search(r"^\d+ passed", ok.stdout, re.M), ok.stdout + ok.stderr
    fused = checkout / "minengine/kernels/fused_lens_positions.py"
    src = fused.read_text()
    assert src.count("tl.store(new_lens_ptr + offsets, new_lens, mask)") == 1
    fused.write_text(src.replace("tl.store(new_lens_ptr + offsets, new_lens, mask)",  # lens - 1 stored for lens
                                 "tl.store(new_lens_ptr + offsets, new_lens - const, mask)"))
    try:
        bad = _pytest(checkout, test)
    finally:
        fused.write_text(src)
    assert bad.returncode == 1 and "failed" in bad.stdout, bad.stdout + bad.stderr


def test_a_preview_is_never_submitted(demo: tuple) -> None:
    _, paths, home = demo
    run_id = json.loads(Path(paths["verification"]).read_text())["run"]
    p = _smithbot(home, "propose", run_id, "--submit")
    assert p.returncode != 0 and "was verified as a preview" in p.stderr and "--backend cuda" in p.stderr, p.stderr


def test_a_preview_run_can_be_verified_on_a_gpu_later(demo: tuple) -> None:
    """The search's interpreter timings of a fusion say nothing, so `smithbot verify RUN --backend cuda` must still
    find its correct candidates to time (for a Triton kernel task, only those the search found faster count)."""
    from smithbot.evolve.db import RunDB
    from smithbot.verify import top_candidates

    _, paths, home = demo
    run_id = json.loads(Path(paths["verification"]).read_text())["run"]
    with RunDB(home / "runs.db") as db:
        fused = top_candidates(db, run_id, 2, fusion=True)
        assert fused and all(c.correct and (c.fitness or 0.0) < 1.0 for c in fused)
        assert fused[0].proposer == "inductor"
        assert top_candidates(db, run_id, 2) == []  # as timed candidates, none was faster


def test_a_fusion_preview_shows_launches_everywhere_not_a_speed(demo: tuple, tmp_path: Path) -> None:
    """The console, `runs` and `report` show the verified figure of a preview, its launches, and no 0.000x headline
    outside its own interval (the search's fitness counts a speedup below 1 as 0)."""
    p, paths, home = demo
    said = " ".join(p.stderr.split())
    assert "0.000x" not in said and "its speed is not judged on the interpreter" in said
    runs = json.loads(_smithbot(home, "runs", "--json").stdout)
    [run] = [r for r in runs if r["task"].startswith("demo-LlamaModel_forward-glue")]
    assert run["launches"] == [[5, 1]] and run["best"] is None and run["best_ci"] is None
    assert "5->1 launches" in _smithbot(home, "runs").stdout
    rep = _smithbot(home, "report", run["id"], "--out", str(tmp_path / "rep"))
    assert rep.returncode == 0, rep.stderr
    summary = (tmp_path / "rep" / "summary.md").read_text()
    assert "5 -> 1 kernel launches a call (speed not judged)" in summary and "0.000x" not in summary


def test_the_fused_module_and_its_test_read_as_written_by_hand(demo: tuple) -> None:
    """No Inductor serial names in the fused module, nothing pyflakes flags in it or in its test, and the test's
    cases carry no dtype label that its tensors do not have (the glue's inputs are int32 and int64 whatever the
    case)."""
    from pyflakes.api import check
    from pyflakes.reporter import Reporter

    _, paths, _ = demo
    checkout = Path(paths["checkout"])
    fused = (checkout / "minengine/kernels/fused_lens_positions.py").read_text()
    test = Path(paths["test"]).read_text()
    assert not re.search(r"\b(_?tmp\d+|buf\d+|x(index|offset|mask|numel)|r0_\w+|ks\d+|XBLOCK)\b", fused), fused
    for name, text in (("fused", fused), ("test", test)):
        out, err = __import__("io").StringIO(), __import__("io").StringIO()
        assert check(text, name, Reporter(out, err)) == 0, out.getvalue() + err.getvalue()
    assert "import triton" not in test  # the reference is torch glue
    assert '"dtype"' not in test.split("CASES = ")[1].split("]")[0] and "make_inputs(case, gen)" in test
    assert "TOLERANCES = {}" in test  # integers only: compared exactly
