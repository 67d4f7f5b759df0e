"""``kill -9`` in the middle of a run, then ``--resume``: nothing evaluated is lost, nothing is evaluated twice."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.evolve.helpers import planted_silu


def _smithbot(*args: str, **kw: object) -> subprocess.Popen[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "smithbot", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True, **kw)  # type: ignore[call-overload]


def _done(db: Path) -> list[tuple[str, str, str, str]]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute("SELECT id, status, coalesce(result, ''), coalesce(source_hash, '') FROM candidates "
                            "WHERE status != 'pending' ORDER BY seq").fetchall()
    except sqlite3.OperationalError:  # the schema is not there yet
        return []
    finally:
        conn.close()


def test_sigkill_then_resume(tmp_path: Path) -> None:
    task = planted_silu(tmp_path / "silu")
    db = tmp_path / "runs.db"
    proc = _smithbot("evolve", str(task), "--iterations", "12", "--backend", "interpreter", "--islands", "2",
                     "--migrate-every", "2", "--seed", "5", "--db", str(db))
    deadline = time.monotonic() + 300
    while len(_done(db)) < 5:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    before = _done(db)
    conn = sqlite3.connect(db)
    run_id, status = conn.execute("SELECT id, status FROM runs").fetchone()
    conn.close()
    assert status == "running"  # killed: it never got to say otherwise

    resumed = _smithbot("evolve", "--resume", run_id, "--db", str(db))
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    assert f"run {run_id}: iteration budget reached (12)" in out
    after = _done(db)
    assert set(before) <= set(after)  # every evaluated candidate kept, with the same result
    hashes = [h for _, _, _, h in after if h]
    assert len(hashes) == len(set(hashes))  # nothing evaluated twice
    conn = sqlite3.connect(db)
    archive, counters, status = conn.execute("SELECT archive, counters, status FROM runs").fetchone()
    n_evaluated = conn.execute("SELECT count(*) FROM candidates WHERE proposer != 'baseline' AND status NOT IN "
                               "('pending', 'failed_proposal')").fetchone()[0]
    conn.close()
    assert status == "finished" and len(after) == 13  # the baseline plus 12 iterations
    islands = json.loads(archive)["islands"]
    assert len(islands) == 2 and sum(i["evaluated"] for i in islands) == n_evaluated
    assert json.loads(counters)["evaluated"] == n_evaluated

    runs = _smithbot("runs", "--db", str(db), "--json")
    listing = json.loads(runs.communicate(timeout=60)[0])
    assert listing[0]["id"] == run_id and listing[0]["best"] > 1.0
    # the table fits a CI log or a pipe: 80 columns, one row a run
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "80"}
    table = subprocess.run([sys.executable, "-m", "smithbot", "runs", "--db", str(db)], capture_output=True,
                           text=True, env=env, timeout=60).stdout.splitlines()
    assert max(len(line.rstrip()) for line in table) <= 80
    row = [line for line in table if run_id in line]
    assert len(row) == 1 and f"{listing[0]['best']:.3f}x" in row[0] and "silu_and_mul" in row[0]


def test_resume_unknown_run_is_one_line(tmp_path: Path) -> None:
    task = planted_silu(tmp_path / "silu")
    p = _smithbot("evolve", str(task), "--resume", "nope", "--db", str(tmp_path / "runs.db"))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2 and err.strip().splitlines() == [
        f"error: unknown run 'nope' in {tmp_path / 'runs.db'} (the database holds no runs)"]


def test_bad_evolve_inputs_are_one_line(tmp_path: Path) -> None:
    task = planted_silu(tmp_path / "silu")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "task.yaml").write_text("id: [unclosed\n")
    cases = [
        (["evolve", str(tmp_path / "missing")], "no such task directory or bundled task"),
        (["evolve", str(broken)], "broken/kernel.py: missing"),
        (["evolve", str(task), "--iterations", "0"], "Invalid value for '--iterations'"),
        (["evolve", str(task), "--proposer", "llm"], "needs an `llm:` section"),
        (["evolve", str(task), "--proposer", "replay"], "needs --replay FILE.jsonl"),
    ]
    for args, msg in cases:
        p = _smithbot(*args, "--db", str(tmp_path / "runs.db"), "--backend", "interpreter")
        out, err = p.communicate(timeout=120)
        lines = err.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and msg in lines[0], (args, err)
