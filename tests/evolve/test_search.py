"""The search end to end under the interpreter: tune finds a planted config, islands diverge then migrate, sources
are deduplicated, and budgets end the run cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smithbot import api
from smithbot.errors import UsageError
from smithbot.evolve.db import RunDB
from smithbot.evolve.proposers import ProposerError
from tests.evolve.helpers import TASKS, planted_silu


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    root = tmp_path_factory.mktemp("tune")
    task = planted_silu(root / "silu_planted")
    status = api.evolve(str(task), iterations=12, backend="interpreter", islands=2, migrate_every=3, seed=3,
                        patience=100, db=root / "runs.db")
    return root / "runs.db", status.run_id, task


def test_tune_finds_the_planted_config(tuned: tuple[Path, str, Path]) -> None:
    db_file, run_id, _ = tuned
    with RunDB(db_file) as db:
        run, best = db.run(run_id), db.best(run_id)
        assert run.status == "finished" and run.message == "iteration budget reached (12)"
        assert best is not None and best.proposer == "tune" and best.fitness > 1.3, best
        assert best.result["speedup_ci"][0] > 1.0 and best.result["timing_method"] == "interpreter_wall"
        assert 'triton.Config({"BLOCK": 16}, num_warps=4)' not in best.source  # the planted config is gone
        hashes = [c.source_hash for c in db.candidates(run_id) if c.source_hash]
        assert len(hashes) == len(set(hashes))  # dedupe: no source evaluated twice


def test_islands_diverge_then_migrate(tuned: tuple[Path, str, Path]) -> None:
    db_file, run_id, _ = tuned
    with RunDB(db_file) as db:
        cands = {c.id: c for c in db.candidates(run_id)}
        base = next(c.id for c in cands.values() if c.proposer == "baseline")
        migrations = db.events(run_id, "migration")
        elites = db.events(run_id, "elite")
        assert len(migrations) == 2  # after 6 and 12 evaluations (2 islands x every 3)
        first = migrations[0]["time"]
        early = [c for c in cands.values() if c.proposer == "tune" and c.created < first]
        assert early and all(c.parent_id in (None, base) or cands[c.parent_id].island == c.island for c in early)
        # Diverge: before the first migration, every new elite is its own island's candidate, and the grids differ.
        early_elites = [e for e in elites if e["time"] < first]
        assert early_elites and all(cands[e["candidate"]].island == e["island"] for e in early_elites)
        grids = [{cell: e[0] for cell, e in isl["grid"].items()} for isl in db.run(run_id).archive["islands"]]
        assert grids[0] != grids[1]
        # Migrate: a move carries an island's own best to the next island on the ring.
        moves = [m for ev in migrations for m in ev["moves"]]
        assert moves and all(cands[cid].island == src and dst == (src + 1) % 2 for src, dst, cid in moves)
        assert any(cid in grids[dst].values() for _, dst, cid in moves)


def test_replay_dedupes_and_records_garbage(tmp_path: Path) -> None:
    task = planted_silu(tmp_path / "silu")
    good = ('<<<<<<< SEARCH\n        triton.Config({"BLOCK": 16}, num_warps=4),\n=======\n'
            '        triton.Config({"BLOCK": 256}, num_warps=4),\n>>>>>>> REPLACE')
    lines = [{"response": good}, {"response": good},
             {"response": good.replace("num_warps=4),\n>>>", "num_warps=4),  # same, with a comment\n>>>")},
             "not json", {"response": "Sure! Use a bigger block."}]
    replay = tmp_path / "replay.jsonl"
    replay.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    status = api.evolve(str(task), proposer="replay", replay=str(replay), backend="interpreter", islands=1,
                        db=tmp_path / "runs.db")
    assert status.message.startswith("the replay proposer is exhausted")
    with RunDB(tmp_path / "runs.db") as db:
        cands = db.candidates(status.run_id)
    assert cands[0].proposer == "baseline" and cands[0].correct
    assert cands[1].correct and cands[1].speedup > 1.0  # BLOCK 16 -> 256
    # Two proposer threads: the order of the failed proposals in the database may differ from the file's.
    assert sorted((c.status, c.reason.split(" (")[0]) for c in cands[2:]) == sorted([
        ("failed_proposal", "duplicate of an earlier candidate"), ("failed_proposal", "duplicate of an earlier candidate"),
        ("failed_proposal", f"{replay} line 4: not a replay record"),
        ("failed_proposal", "no SEARCH/REPLACE block in the response")])
    assert cands[1].diff.startswith("--- a/kernel.py") and "BLOCK\": 256" in cands[1].diff


def test_time_budget_and_bad_budgets(tmp_path: Path) -> None:
    task = planted_silu(tmp_path / "silu")
    status = api.evolve(str(task), time_s=0.01, backend="interpreter", db=tmp_path / "runs.db")
    # the budget counts the task's preparation, and ends before the baseline is measured
    assert status.message == "time budget reached (0 s) before the baseline was measured" and status.evaluated == 0
    with RunDB(tmp_path / "runs.db") as db:
        [base] = db.candidates(status.run_id)
        assert base.proposer == "baseline" and base.status == "cancelled" and base.reason == "time budget"
    for kw in ({"iterations": 0}, {"budget_usd": 0.0}, {"time_s": -1.0}):
        with pytest.raises(UsageError, match="must be positive"):
            api.evolve(str(task), backend="interpreter", db=tmp_path / "runs.db", **kw)


def test_a_time_budget_is_kept_and_what_it_cut_short_is_not_evaluated_again(tmp_path: Path) -> None:
    """``evolve --time 40`` on a bundled task returns within 42 s of search time, the baseline's evaluation included
    (about 20 s of it on this machine's interpreter: preparing the task and timing the baseline's autotuned configs);
    evaluations still queued or running at the end come back cancelled, and ``--resume`` does not evaluate them
    again."""
    import time

    db_file = tmp_path / "runs.db"
    t0 = time.monotonic()
    status = api.evolve("silu_and_mul", time_s=40, backend="interpreter", db=db_file, patience=None)
    wall = time.monotonic() - t0
    with RunDB(db_file) as db:
        run = db.run(status.run_id)
        assert run.message == "time budget reached (40 s)", run.message
        assert run.counters["elapsed_s"] <= 42.0 and wall <= 42.0 + 5.0, (run.counters["elapsed_s"], wall)
        cut = {c.id: c.evaluated for c in db.candidates(status.run_id, "cancelled")}
        assert cut, "nothing was in flight at the budget's end"  # tune keeps the one worker's queue full
        assert all(c.reason == "time budget" for c in db.candidates(status.run_id, "cancelled"))
        assert status.evaluated == db.totals(status.run_id)["evaluated"] >= 1  # cancelled ones are not counted
    resumed = api.evolve(resume=status.run_id, time_s=600, iterations=status.evaluated + 1, db=db_file)
    with RunDB(db_file) as db:
        after = {c.id: c for c in db.candidates(status.run_id)}
        assert all(after[i].status == "cancelled" and after[i].evaluated == at for i, at in cut.items())
        assert resumed.evaluated > status.evaluated


def test_tune_refuses_a_fusion_task_without_a_triton_candidate(tmp_path: Path) -> None:
    with pytest.raises(ProposerError, match="fusion task.*--proposer llm"):
        api.evolve(str(TASKS / "decode_metadata"), backend="interpreter", db=tmp_path / "runs.db", iterations=1)


def test_report_is_self_contained_html(tuned: tuple[Path, str, Path], tmp_path: Path) -> None:
    import base64
    import html.parser
    import re
    import xml.etree.ElementTree as ET

    from smithbot.report import report

    db_file, run_id, _ = tuned
    with RunDB(db_file) as db:
        r = report(db, run_id, tmp_path / "rep")
        best = db.best(run_id)
    text = r.html.read_text()
    html.parser.HTMLParser().feed(text)
    images = re.findall(r'<img alt="([^"]+)" src="data:image/svg\+xml;base64,([^"]+)"', text)
    assert [alt for alt, _ in images] == ["best speedup per island against iteration", "correct rate against iteration"]
    for _, data in images:
        assert ET.fromstring(base64.b64decode(data)).tag.endswith("svg")
    assert best is not None and best.id in text
    assert "They do not predict GPU speed" in text and "<pre>--- a/kernel.py" in text  # the lineage's diffs
    md = r.markdown.read_text()
    assert "![best speedup per island](progress.svg)" in md and (r.markdown.parent / "progress.svg").exists()


def test_export_dataset_jsonl(tuned: tuple[Path, str, Path], tmp_path: Path) -> None:
    from smithbot.dataset import export

    db_file, run_id, _ = tuned
    with RunDB(db_file) as db:
        n_best = export(db, [run_id], tmp_path / "best.jsonl", "best-steps")
        n_all = export(db, [run_id, run_id], tmp_path / "all.jsonl", "improving")  # twice: deduplicated
        assert export(db, [run_id], tmp_path / "once.jsonl", "improving") == n_all
    assert 1 <= n_best <= n_all
    rows = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert len(rows) == n_all
    for row in rows:
        assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
        assert "<<<<<<< SEARCH" in row["messages"][2]["content"] and row["meta"]["fitness"] > row["meta"]["parent_fitness"]


def test_patience_stops_a_run_that_stops_improving(tmp_path: Path) -> None:
    task = planted_silu(tmp_path / "silu")
    worse = ('<<<<<<< SEARCH\n        triton.Config({"BLOCK": 16}, num_warps=4),\n=======\n'
             '        triton.Config({"BLOCK": %d}, num_warps=4),\n>>>>>>> REPLACE')
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"response": worse % b}) + "\n" for b in (8, 4, 32, 64, 128, 256, 512, 1024)))
    status = api.evolve(str(task), proposer="replay", replay=str(replay), backend="interpreter", islands=1,
                        patience=2, db=tmp_path / "runs.db")
    assert status.message == "no better candidate in 2 evaluations (patience)"
    assert status.evaluated <= 6  # the baseline, two past patience, and what was already in flight; not all eight
