"""The run database and the MAP-Elites archive as units."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from smithbot.evolve import archive as arc
from smithbot.evolve.db import DBError, RunDB
from tests.evolve.helpers import TASKS


def test_schema_version_and_unknown_run(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with RunDB(path) as db:
        run = db.create_run("t", "t", {"search": {}}, 0)
        with pytest.raises(DBError, match="unknown run 'nope'.*" + run.id):
            db.run("nope")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=99")
    conn.commit()
    conn.close()
    with pytest.raises(DBError, match="incompatible smithbot \\(schema version 99"):
        RunDB(path)
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(DBError, match="not a usable run database"):
        RunDB(tmp_path / "junk.db")


def test_one_source_once_per_run(tmp_path: Path) -> None:
    with RunDB(tmp_path / "runs.db") as db:
        a, b = db.create_run("t", "t", {}, 0), db.create_run("t", "t", {}, 0)
        db.add_candidate(a.id, island=0, generation=1, proposer="tune", source_hash="h1", source="x", status="pending")
        db.add_candidate(b.id, island=0, generation=1, proposer="tune", source_hash="h1", source="x", status="pending")
        with pytest.raises(sqlite3.IntegrityError):
            db.add_candidate(a.id, island=1, generation=1, proposer="tune", source_hash="h1", source="x",
                             status="pending")
        assert [(c.seq, c.source_hash) for c in db.candidates(a.id)] == [(0, "h1")]


def test_fitness_rules() -> None:
    assert arc.fitness("promoted", 1.4) == 1.4
    assert arc.fitness("correct", 0.93) == 0.0  # slower counts as 0
    assert arc.fitness("incorrect", 3.0) is None and arc.fitness("rejected", None) is None
    assert arc.fitness("correct", 0.99, baseline=True) == 1.0
    assert arc.fitness("flagged", 40.0) == 0.0  # implausible: no credit until a human looks


def test_features_read_the_kernel() -> None:
    f = arc.features((TASKS / "silu_and_mul" / "kernel.py").read_text())
    assert f["tile"] == 2048 and f["num_warps"] == 8 and f["loads"] == 2 and f["stores"] == 1 and f["dots"] == 0
    f2 = arc.features((TASKS / "rmsnorm" / "kernel.py").read_text())
    assert f2["loops"] >= 1 and f2["tile"] == 256
    assert arc.cell(f) != arc.cell(f2)


def test_islands_sample_only_their_own_grid_and_migrate_along_a_ring() -> None:
    a = arc.Archive.new(3)
    for i in range(3):
        a.add(i, f"i{i}-a", 1.0 + i, f"c{i}")
        a.add(i, f"i{i}-b", 0.5, "shared")
    rng = random.Random(0)
    for i in range(3):
        for _ in range(50):
            parent, insp = a.sample(i, rng)
            assert parent is not None and parent.startswith(f"i{i}-") and all(x.startswith(f"i{i}-") for x in insp)
    cells = {f"i{i}-a": f"c{i}" for i in range(3)}
    moves = a.migrate(cells)
    assert moves == [(0, 1, "i0-a"), (1, 2, "i1-a"), (2, 0, "i2-a")]
    assert a.islands[1].grid["c0"].id == "i0-a" and a.islands[0].grid["c2"].id == "i2-a"
    assert arc.Archive.from_dict(a.to_dict()).to_dict() == a.to_dict()
