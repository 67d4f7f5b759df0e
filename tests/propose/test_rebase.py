"""Upstream moving on after extraction: a change elsewhere is harmless, a change to the kernel stops the proposal, and
``--rebase`` re-extracts the kernel at the new head, carries the change over and re-verifies it in a new run."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from evaluator import load_task
from smithbot import api
from smithbot.config import TARGETS_DIR
from smithbot.evolve import tune
from smithbot.evolve.db import RunDB
from smithbot.propose.pipeline import UpstreamMoved
from smithbot.propose.reinsert import ReinsertError, port

NORM = "minengine/kernels/norm.py"
LAUNCH = "    _rms_norm_kernel[(x.shape[0],)](x, weight, out, x.stride(0), x.shape[1], eps, BLOCK=32, num_warps=4)\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, path: str, old: str, new: str, message: str) -> str:
    f = repo / path
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new, 1))
    _git(repo, "commit", "-qam", message)
    return _git(repo, "rev-parse", "HEAD")


def test_port_carries_the_hunks_over_and_refuses_what_does_not_apply() -> None:
    before = "# EVOLVE-BLOCK-START\ndef f(x):\n    return g(x, BLOCK=32)\n# EVOLVE-BLOCK-END\n"
    after = before.replace("BLOCK=32", "BLOCK=64")
    onto = before.replace("def f(x):\n", "def f(x):\n    x = x.contiguous()\n")
    assert port(before, after, onto) == onto.replace("BLOCK=32", "BLOCK=64")
    with pytest.raises(ReinsertError, match="differ upstream"):
        port(before, after, before.replace("BLOCK=32", "BLOCK=BLOCK_SIZE"))


def test_upstream_moved_then_rebase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    db = tmp_path / "runs.db"
    upstream = tmp_path / "upstream"
    shutil.copytree(TARGETS_DIR / "demo", upstream, ignore=shutil.ignore_patterns("__pycache__"))
    _git(upstream, "init", "-q")
    _git(upstream, "add", "-A")
    _git(upstream, "commit", "-qm", "base")
    base = _git(upstream, "rev-parse", "HEAD")

    # A verified winner at the base commit: the launch line's BLOCK=32 raised to 1024.
    [row] = api.extract("demo", "rms_norm", out=tmp_path / "task", source=str(upstream), check=False)
    src = load_task(row.out).kernel_path.read_text()
    knobs = {k.name: k for k in tune.knobs(src)}
    replay = tmp_path / "replay.jsonl"
    cand = tune.set_knobs(src, {knobs["BLOCK"].id: 1024})
    replay.write_text(json.dumps({"response": f"```python\n{cand}```", "format": "full"}) + "\n")
    run = api.evolve(row.out, proposer="replay", replay=str(replay), iterations=1, backend="interpreter", db=db).run_id
    assert api.verify(run, top=1, db=db).winner

    # Upstream changes another file: nothing the winner touches moved, so it is proposed on the base commit.
    _commit(upstream, "minengine/kernels/activation.py", "import torch\n", "import torch  # touched\n", "unrelated")
    [(same, _)] = api.propose([run], source=str(upstream), out=tmp_path / "p1", db=db)
    assert same == run
    # the patch file applies to the commit it was made on, as a maintainer would apply it (it ends in a newline)
    applied = tmp_path / "applied"
    subprocess.run(["git", "clone", "-q", str(upstream), str(applied)], check=True)
    _git(applied, "checkout", "-q", base)
    _git(applied, "apply", "--check", str(tmp_path / "p1" / "rms_norm_kernel" / "patch.diff"))

    # Upstream changes rms_norm itself: the proposal stops and names the definition and both commits.
    head = _commit(upstream, NORM, "    out = torch.empty_like(x)\n",
                   "    x = x.contiguous()\n    out = torch.empty_like(x)\n", "rms_norm: contiguous input")
    with pytest.raises(UpstreamMoved, match=f"{NORM}::rms_norm changed between {base[:12]} and {head[:12]}; "
                                            f"`smithbot propose {run} --rebase`"):
        api.propose([run], source=str(upstream), out=tmp_path / "p2", db=db)

    # --rebase: a new run on the kernel re-extracted at head, verified, proposed on head with only the launch line.
    [(new_run, published)] = api.propose([run], source=str(upstream), out=tmp_path / "p3", db=db, rebase_moved=True)
    assert new_run != run
    with RunDB(db) as rdb:
        assert rdb.events(new_run, "rebased")[0]["head"] == head
        assert rdb.events(run, "superseded")[0]["by_run"] == new_run
        assert load_task(rdb.run(new_run).task_dir).provenance.commit == head
    patch = (tmp_path / "p3" / "rms_norm_kernel" / "patch.diff").read_text()
    kernel_part = patch.split("diff --git a/tests/")[0]
    assert [ln for ln in kernel_part.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")] == [
        "-" + LAUNCH.rstrip("\n"), "+" + LAUNCH.rstrip("\n").replace("BLOCK=32", "BLOCK=1024")]
    body = (tmp_path / "p3" / "rms_norm_kernel" / "pr.md").read_text()
    assert f'"base_commit": "{head}"' in body
    assert _git(upstream, "rev-parse", "HEAD") == head  # the user's checkout is left where it was
