"""The run database: SQLite, one file holding every run, candidate and event (DESIGN.md, "Search").

Durability rules the search relies on:
- a proposal is written (``pending``, with its prompt, response, tokens and cost) before it is evaluated, so a kill
  never loses what an LLM was paid for; on resume, pending candidates are evaluated again;
- an evaluated candidate, the archive state it changed and the run's counters are committed in one transaction before
  the next proposal is drawn, so ``kill -9`` at any moment leaves a consistent database;
- ``(run, source_hash)`` is unique: the same normalised source is never evaluated twice in a run.

The schema version lives in ``PRAGMA user_version``; a database from another version is refused with one line.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smithbot.errors import SmithbotError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    task_dir TEXT NOT NULL,
    task_id TEXT NOT NULL,
    config TEXT NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL,          -- running | finished | stopped | failed
    message TEXT NOT NULL DEFAULT '',
    archive TEXT NOT NULL DEFAULT '{}',
    counters TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE candidates (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    parent_id TEXT,
    second_parent_id TEXT,
    island INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    proposer TEXT NOT NULL,
    edit_format TEXT NOT NULL DEFAULT '',
    source_hash TEXT,
    source TEXT,
    diff TEXT NOT NULL DEFAULT '',
    prompt TEXT NOT NULL DEFAULT '',
    response TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    status TEXT NOT NULL,          -- pending | failed_proposal | screened_out | an EvalResult status
    reason TEXT NOT NULL DEFAULT '',
    result TEXT,
    screen_result TEXT,
    speedup REAL,
    fitness REAL,
    features TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    evaluated REAL,
    UNIQUE (run_id, seq)
);
CREATE UNIQUE INDEX candidates_source ON candidates(run_id, source_hash) WHERE source_hash IS NOT NULL;
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    time REAL NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL DEFAULT '{}'
);
"""


class DBError(SmithbotError):
    """The run database cannot be used (incompatible version, unknown run, unreadable file)."""


@dataclass(frozen=True)
class Run:
    id: str
    task_dir: str
    task_id: str
    config: dict[str, Any]
    seed: int
    status: str
    message: str
    archive: dict[str, Any]
    counters: dict[str, Any]
    created: float
    updated: float


@dataclass(frozen=True)
class Candidate:
    id: str
    run_id: str
    seq: int
    parent_id: str | None
    second_parent_id: str | None
    island: int
    generation: int
    proposer: str
    edit_format: str
    source_hash: str | None
    source: str | None
    diff: str
    prompt: str
    response: str
    model: str
    tokens_in: int
    tokens_out: int
    cost: float
    status: str
    reason: str
    result: dict[str, Any] | None
    screen_result: dict[str, Any] | None
    speedup: float | None
    fitness: float | None
    features: dict[str, Any]
    created: float
    evaluated: float | None

    @property
    def correct(self) -> bool:
        return self.status in ("flagged", "correct", "promoted")


_JSON_COLS = {"result", "screen_result", "features", "config", "archive", "counters"}


def _row(cls: type, row: sqlite3.Row) -> Any:
    d = {k: row[k] for k in row.keys()}
    for k in _JSON_COLS & d.keys():
        d[k] = json.loads(d[k]) if d[k] is not None else None
    return cls(**d)


class RunDB:
    """A connection to one run database file. Use as a context manager, or call ``close()``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            version = self.conn.execute("PRAGMA user_version").fetchone()[0]
            tables = self.conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise DBError(f"{self.path}: not a usable run database ({exc})") from None
        if version == 0 and tables == 0:
            self.conn.executescript(f"BEGIN;\n{_SCHEMA}\nPRAGMA user_version={SCHEMA_VERSION};\nCOMMIT;")
        elif version != SCHEMA_VERSION:
            self.conn.close()
            raise DBError(f"{self.path}: written by an incompatible smithbot (schema version {version}, this one "
                          f"reads {SCHEMA_VERSION}); use another --db or move the file away")

    def __enter__(self) -> RunDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def transaction(self) -> Any:
        db = self

        class _Tx:
            def __enter__(self) -> sqlite3.Connection:
                db.conn.execute("BEGIN IMMEDIATE")
                return db.conn

            def __exit__(self, exc_type: Any, *rest: object) -> None:
                db.conn.execute("ROLLBACK" if exc_type else "COMMIT")

        return _Tx()

    # runs

    def create_run(self, task_dir: str, task_id: str, config: dict[str, Any], seed: int) -> Run:
        now = time.time()
        run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + "-" + uuid.uuid4().hex[:6]
        with self.transaction() as c:
            c.execute("INSERT INTO runs (id, task_dir, task_id, config, seed, status, created, updated) "
                      "VALUES (?, ?, ?, ?, ?, 'running', ?, ?)",
                      (run_id, task_dir, task_id, json.dumps(config), seed, now, now))
            c.execute("INSERT INTO events (run_id, time, kind, data) VALUES (?, ?, 'start', ?)",
                      (run_id, now, json.dumps({"seed": seed})))
        return self.run(run_id)

    def run(self, run_id: str) -> Run:
        row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            known = [r[0] for r in self.conn.execute("SELECT id FROM runs ORDER BY created DESC LIMIT 5")]
            hint = f" (recent: {', '.join(known)})" if known else " (the database holds no runs)"
            raise DBError(f"unknown run {run_id!r} in {self.path}{hint}")
        return _row(Run, row)

    def runs(self) -> list[Run]:
        return [_row(Run, r) for r in self.conn.execute("SELECT * FROM runs ORDER BY created")]

    def set_status(self, run_id: str, status: str, message: str = "") -> None:
        now = time.time()
        with self.transaction() as c:
            c.execute("UPDATE runs SET status = ?, message = ?, updated = ? WHERE id = ?", (status, message, now, run_id))
            c.execute("INSERT INTO events (run_id, time, kind, data) VALUES (?, ?, 'status', ?)",
                      (run_id, now, json.dumps({"status": status, "message": message})))

    def event(self, run_id: str, kind: str, data: dict[str, Any]) -> None:
        with self.transaction() as c:
            c.execute("INSERT INTO events (run_id, time, kind, data) VALUES (?, ?, ?, ?)",
                      (run_id, time.time(), kind, json.dumps(data)))

    def events(self, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        q = "SELECT time, kind, data FROM events WHERE run_id = ?" + (" AND kind = ?" if kind else "") + " ORDER BY id"
        rows = self.conn.execute(q, (run_id, kind) if kind else (run_id,))
        return [{"time": t, "kind": k, **json.loads(d)} for t, k, d in rows]

    # candidates

    def add_candidate(self, run_id: str, **fields: Any) -> Candidate:
        """Insert a proposal (``pending`` or ``failed_proposal``) with the next sequence number."""
        now = time.time()
        fields.setdefault("id", uuid.uuid4().hex[:12])
        fields.setdefault("features", {})
        for k in _JSON_COLS & fields.keys():
            fields[k] = json.dumps(fields[k]) if fields[k] is not None else None
        with self.transaction() as c:
            seq = c.execute("SELECT coalesce(max(seq), -1) + 1 FROM candidates WHERE run_id = ?",
                            (run_id,)).fetchone()[0]
            cols = {"run_id": run_id, "seq": seq, "created": now, **fields}
            c.execute(f"INSERT INTO candidates ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                      tuple(cols.values()))
            if fields.get("status") != "pending":
                c.execute("UPDATE runs SET updated = ? WHERE id = ?", (now, run_id))
        return self.candidate(fields["id"])

    def record(self, cand_id: str, run_id: str, status: str, archive: dict[str, Any], counters: dict[str, Any],
               **fields: Any) -> None:
        """Commit an evaluation outcome together with the archive and counters it produced (one transaction)."""
        now = time.time()
        for k in _JSON_COLS & fields.keys():
            fields[k] = json.dumps(fields[k]) if fields[k] is not None else None
        cols = {"status": status, "evaluated": now, **fields}
        with self.transaction() as c:
            c.execute(f"UPDATE candidates SET {', '.join(f'{k} = ?' for k in cols)} WHERE id = ?",
                      (*cols.values(), cand_id))
            c.execute("UPDATE runs SET archive = ?, counters = ?, updated = ? WHERE id = ?",
                      (json.dumps(archive), json.dumps(counters), now, run_id))

    def save_state(self, run_id: str, archive: dict[str, Any], counters: dict[str, Any], event: str,
                   data: dict[str, Any]) -> None:
        now = time.time()
        with self.transaction() as c:
            c.execute("UPDATE runs SET archive = ?, counters = ?, updated = ? WHERE id = ?",
                      (json.dumps(archive), json.dumps(counters), now, run_id))
            c.execute("INSERT INTO events (run_id, time, kind, data) VALUES (?, ?, ?, ?)",
                      (run_id, now, event, json.dumps(data)))

    def candidate(self, cand_id: str) -> Candidate:
        row = self.conn.execute("SELECT * FROM candidates WHERE id = ?", (cand_id,)).fetchone()
        if row is None:
            raise DBError(f"unknown candidate {cand_id!r}")
        return _row(Candidate, row)

    def candidates(self, run_id: str, status: str | None = None) -> list[Candidate]:
        q = "SELECT * FROM candidates WHERE run_id = ?" + (" AND status = ?" if status else "") + " ORDER BY seq"
        return [_row(Candidate, r) for r in self.conn.execute(q, (run_id, status) if status else (run_id,))]

    def best(self, run_id: str) -> Candidate | None:
        row = self.conn.execute(
            "SELECT * FROM candidates WHERE run_id = ? AND fitness IS NOT NULL AND status IN "
            "('correct', 'promoted', 'flagged') ORDER BY fitness DESC, seq LIMIT 1", (run_id,)).fetchone()
        return _row(Candidate, row) if row else None

    def totals(self, run_id: str) -> dict[str, float]:
        row = self.conn.execute(
            "SELECT count(*), coalesce(sum(tokens_in + tokens_out), 0), coalesce(sum(cost), 0), "
            "sum(status NOT IN ('pending', 'cancelled')), sum(status IN ('correct', 'promoted', 'flagged')), "
            "sum(status NOT IN ('pending', 'failed_proposal', 'cancelled')) "
            "FROM candidates WHERE run_id = ?", (run_id,)).fetchone()
        return {"candidates": row[0], "tokens": row[1], "cost": row[2], "done": row[3] or 0, "correct": row[4] or 0,
                "evaluated": row[5] or 0}
