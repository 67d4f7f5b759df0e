"""``smithbot export-dataset``: Kernel-Smith-style step data in chat format, one JSON object a line.

A step is one parent -> child edit: ``system`` is the proposer's system prompt, ``user`` the parent program with its
evaluator feedback (the recorded prompt for LLM steps, the same template rendered for tune steps), ``assistant`` the
edit (the recorded response for LLM steps; for tune steps the change as SEARCH/REPLACE blocks).

Modes:
- ``best-steps``: for each run, walk the lineage of its best candidate and keep the steps that were correct and beat
  their parent by more than ``threshold`` (relative);
- ``improving``: every correct step of the run that beat its parent by more than ``threshold``.
Rows are deduplicated on (user, assistant).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from evaluator import load_task
from smithbot.errors import UsageError
from smithbot.evolve import edits
from smithbot.evolve.db import Candidate, RunDB
from smithbot.evolve.proposers import Context, Parent, Prompter
from smithbot.report import lineage

MODES = ("best-steps", "improving")


def _split_prompt(prompt: str) -> tuple[str, str] | None:
    if not prompt.startswith("[system]\n") or "\n[user]\n" not in prompt:
        return None
    system, user = prompt[len("[system]\n"):].split("\n[user]\n", 1)
    return system, user


def _parent_fitness(db: RunDB, c: Candidate) -> float | None:
    return db.candidate(c.parent_id).fitness if c.parent_id else 1.0


def _step(db: RunDB, c: Candidate, prompter: Prompter, task: Any) -> dict[str, Any]:
    parent = db.candidate(c.parent_id) if c.parent_id else None
    parent_src = parent.source if parent else task.kernel_path.read_text(encoding="utf-8")
    split = _split_prompt(c.prompt)
    if split is None:  # a tune step: render the same prompt an LLM would have seen, in diff format
        ctx = Context(task, Parent(parent.id if parent else None, parent_src or "", parent.result if parent else None,
                                   parent.fitness if parent else None))
        split = prompter.render(ctx, "diff")
        answer = edits.to_search_replace(parent_src or "", c.source or "")
    else:
        answer = c.response
    system, user = split
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user},
                         {"role": "assistant", "content": answer}],
            "meta": {"run": c.run_id, "candidate": c.id, "parent": c.parent_id, "proposer": c.proposer,
                     "task": task.id, "parent_fitness": _parent_fitness(db, c), "fitness": c.fitness}}


def export(db: RunDB, run_ids: list[str], out: Path, mode: str = "best-steps", threshold: float = 0.01) -> int:
    """Write the steps of the runs to ``out`` (JSONL); returns how many rows were written."""
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r} (choose {', '.join(MODES)})")
    prompter = Prompter()
    seen: set[str] = set()
    rows = []
    for run_id in run_ids:
        run = db.run(run_id)
        task = load_task(run.task_dir)
        if mode == "best-steps":
            steps = [c for c in lineage(db, db.best(run_id)) if c.proposer != "baseline"]
        else:
            steps = [c for c in db.candidates(run_id) if c.proposer != "baseline"]
        for c in steps:
            pf = _parent_fitness(db, c)
            if not c.correct or c.fitness is None or pf is None or c.fitness <= pf * (1 + threshold):
                continue
            row = _step(db, c, prompter, task)
            m = row["messages"]
            key = hashlib.sha256((m[1]["content"] + "\0" + m[2]["content"]).encode()).hexdigest()
            if key not in seen:
                seen.add(key)
                rows.append(row)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(out)
    return len(rows)
