"""``smithbot verify RUN``: re-measure a run's best candidates before anything is proposed upstream.

For the run's top candidates (correct, fastest first, distinct sources):
- a copy of the task with twice the seeds and extra irregular shapes (odd row counts per regime) is evaluated;
- each candidate is checked and timed again from scratch on every case, paired and interleaved, with intervals;
- a candidate is **rejected** when any single case is slower than the baseline beyond its interval (the interval's
  upper bound below 1, less a 1% noise floor), even if the geomean improved, or when it is not ``promoted``
  (``evaluator.verdict``: the geomean's interval clears 1 + min_gain, and each case it claims faster passes its own
  sign test, corrected for the number of cases); the cases within the noise are *unchanged*, and the verdict says
  which shapes gain.
The first accepted candidate is the winner; the ones after it are not measured. ``verification.json`` in the run's
folder holds the environment fingerprint and every number; the run database gets a ``verified`` event.

A fusion task on the interpreter is judged as a **preview**: there the glue's torch ops run natively on the CPU and
the candidate's Triton runs in Python, so the timing says nothing of either on a GPU (not even its direction, unlike
a Triton kernel against a Triton kernel). A candidate is accepted for a preview when it is correct on the whole
verification task and launches fewer kernels a call than the glue on every case; ``propose`` then writes the patch
and the test marked as a preview, and never submits one.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from evaluator import Evaluator, TaskError, load_task
from evaluator.pool import Cluster
from evaluator.verdict import NOISE_FLOOR, SIGN_ALPHA, changed_cases, slower_cases
from smithbot.evolve.db import Candidate, RunDB
from smithbot.evolve.search import run_dir

ROW_DIMS = ("tokens", "num_tokens", "batch", "bs", "seq_len", "rows", "m", "M", "T")
EXTRA_ROWS = {"decode": 5, "prefill": 13}  # decode: a small odd batch; prefill: rows + 13, an odd count


@dataclass(frozen=True)
class Verdict:
    candidate: str
    accepted: bool
    reason: str
    status: str
    speedup: float | None
    ci: tuple[float, float] | None
    cases: list[dict[str, Any]]
    compiled: dict[str, Any]  # a fusion's original code under torch.compile, timed against eager (EvalResult)


@dataclass(frozen=True)
class Verification:
    run: str
    task: str
    backend: str
    winner: str | None
    verdicts: list[Verdict]
    path: Path
    preview: bool = False  # a fusion judged on the interpreter: correct with fewer launches, speed not judged


def extra_cases(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One extra irregular case per regime: the regime's first case with its row count made odd."""
    out = []
    for regime, bump in EXTRA_ROWS.items():
        pool = [c for c in cases if c["regime"] == regime]
        base = next((c for c in pool if c.get("interpreter", True)), pool[0] if pool else None)
        if base is None:
            continue
        dim = next((d for d in ROW_DIMS if d in base["dims"]), None)
        if dim is None:
            continue
        rows = bump if regime == "decode" else base["dims"][dim] + bump
        if rows == base["dims"][dim]:
            rows += 2
        c = json.loads(json.dumps(base))
        c["dims"][dim] = rows
        c["name"] = f"verify-irregular-{regime}-{dim}{rows}"
        out.append(c)
    return out


def verification_task(task_dir: Path, dest: Path, seed_factor: int = 2) -> Path:
    """A copy of the task with more seeds and the extra irregular cases (the task contract is unchanged)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(task_dir, dest, ignore=shutil.ignore_patterns("candidates", "__pycache__"))
    data = yaml.safe_load((dest / "task.yaml").read_text())
    data["seeds"] = int(data.get("seeds", 3)) * seed_factor
    data["cases"] = list(data["cases"]) + extra_cases(data["cases"])
    (dest / "task.yaml").write_text(yaml.safe_dump(data, sort_keys=False, width=120))
    load_task(dest)  # fails loudly if the extra cases broke the task
    return dest


# The names of the shapes no model has: extraction's irregular cases and verification's; they test correctness on ragged
# sizes, and a gain on them alone is not a gain in serving
SYNTHETIC = ("irregular-", "verify-irregular-")


def judge(r: Any, min_gain: float) -> tuple[bool, str]:
    """Accepted when the evaluator promotes it (faster on the geomean, no case slower, each claimed case shown) and
    it is shown faster on at least one model's shape, not only on the synthetic ragged ones (``SYNTHETIC``), where it
    was measured on any (an extracted task's interpreter case is a ragged one alone)."""
    if not r.correct:
        return False, r.why
    slower = slower_cases(r.cases)
    if slower:
        worst = min(slower, key=lambda c: c["ratio"])
        return False, (f"{len(slower)} case(s) slower than the baseline beyond their interval and the "
                       f"{NOISE_FLOOR:.0%} noise floor, worst "
                       f"{worst['name']} at {worst['ratio']:.3f}x [{worst['ratio_ci'][0]:.3f}, {worst['ratio_ci'][1]:.3f}]")
    if r.status != "promoted":
        lo = r.speedup_ci[0] if r.speedup_ci else float("nan")
        why = "; ".join([r.status, *r.flags, *([r.detail] if r.detail else [])])
        alpha = SIGN_ALPHA / max(len(r.cases), 1)
        unshown = [c for c in r.cases if c["ratio_ci"][0] > 1.0 + min_gain and c.get("sign_p", 1.0) >= alpha]
        if r.status == "correct" and lo > 1.0 + min_gain and unshown:
            # the geomean clears, but a case it claims faster is a lucky interval: its rounds' sign test fails
            c = unshown[0]
            lo_c, hi_c = c["ratio_ci"]
            return False, (f"not shown faster on every case it claims: {len(unshown)} case(s) with an interval above "
                           f"{1 + min_gain:.2f} whose rounds fail the sign test (p >= {alpha:.2g}), first {c['name']} "
                           f"at {c['ratio']:.3f}x [{lo_c:.3f}, {hi_c:.3f}], p {c.get('sign_p', 1.0):.2g} ({why})")
        return False, f"not shown faster: geomean interval starts at {lo:.3f} ({why})"
    faster = changed_cases(r.cases, min_gain)["faster"]
    models = [c["name"] for c in r.cases if not c["name"].startswith(SYNTHETIC)]
    if models and faster and all(name.startswith(SYNTHETIC) for name in faster):
        return False, (f"faster only on shapes no model has ({', '.join(faster)}); unchanged on every model's shape"
                       + (f" ({r.detail})" if r.detail else ""))
    return True, "faster on the geomean, and on no case slower" + (f": {r.detail}" if r.detail else "")


def judge_preview(r: Any) -> tuple[bool, str]:
    """A fusion on the interpreter: correct on every verification case, and fewer kernel launches a call than the
    glue on each (``launches``: [glue, candidate], counted by the evaluator); its speed is left to a GPU."""
    if not r.correct:
        return False, r.why
    counts = [(c["name"], *c["launches"]) for c in r.cases if c.get("launches")]
    if not counts or len(counts) < len(r.cases):
        return False, "the evaluator counted no kernel launches for this fusion"
    more = [f"{n} ({b} -> {c})" for n, b, c in counts if c >= b]
    if more:
        return False, f"launches no fewer kernels than the glue on {len(more)} case(s): {', '.join(more)}"
    spans = sorted({f"{b} -> {c}" for _, b, c in counts})
    return True, (f"correct on all {len(counts)} verification cases, launching fewer kernels a call than the glue "
                  f"({', '.join(spans)}); speed not judged: the interpreter runs the glue's torch ops natively and "
                  "the Triton kernel in Python, so only a GPU can time the two")


def top_candidates(db: RunDB, run_id: str, k: int, fusion: bool = False) -> list[Candidate]:
    """The run's fastest distinct candidates, those with no case slower in the search first: the search ranks by the
    geomean alone, verification also needs every case. A ``fusion`` candidate the search timed on the interpreter
    (native torch against interpreted Triton: its speedup means nothing) is one whatever that timing said, so a run
    searched without a GPU can be verified on one."""
    def untimed(c: Candidate) -> bool:
        return fusion and (c.result or {}).get("backend") == "interpreter"

    seen, out = set(), []
    cands = sorted((c for c in db.candidates(run_id) if c.correct and c.proposer != "baseline"
                    and (c.fitness or untimed(c))),
                   key=lambda c: (bool(slower_cases((c.result or {}).get("cases", []))), -(c.fitness or 0.0)))
    for c in cands:
        if c.source_hash not in seen and (untimed(c) or (c.fitness or 0.0) > 1.0):
            seen.add(c.source_hash)
            out.append(c)
        if len(out) == k:
            break
    return out


def verify(db: RunDB, run_id: str, top: int = 3, backend: str | None = None, rounds: int | None = None,
           deadline: float | None = None, cluster: Cluster | None = None) -> Verification:
    """Re-measure the run's ``top`` candidates on the verification task; with ``deadline`` (a ``time.monotonic()``
    instant), a candidate not measured by then is rejected as cancelled."""
    run = db.run(run_id)
    out_dir = run_dir(db, run_id)
    vtask = verification_task(Path(run.task_dir), out_dir / "verify-task")
    verdicts: list[Verdict] = []
    env: dict[str, Any] = {}
    with Evaluator(vtask, backend=backend or run.config.get("backend", "auto"), workers_per_gpu=1,
                   rounds=rounds or None, cluster=cluster) as ev:  # one candidate at a time
        preview = ev.task.kind == "fusion" and ev.backend == "interpreter"
        cands = top_candidates(db, run_id, top, ev.task.kind == "fusion")
        try:
            ev.prepare(deadline)
        except TaskError:
            if deadline is None or time.monotonic() < deadline:
                raise
            cands, verdicts = [], [Verdict(c.id, False, "cancelled: the time budget ended while verification's "
                                           "evaluator was preparing", "cancelled", None, None, [], {}) for c in cands]
        used = ev.backend
        for c in cands:
            path = out_dir / "verify-task" / f"candidate-{c.id}.py"
            path.write_text(c.source or "")
            r = ev.submit(path, deadline=deadline, effort="verify").result()
            env = env or r.env
            ok, why = judge_preview(r) if preview else judge(r, ev.min_gain)
            verdicts.append(Verdict(c.id, ok, why, r.status, r.speedup, r.speedup_ci, list(r.cases), r.compiled))
            if ok:  # the first accepted is the winner: measuring the ones after it would not change that
                break
    winner = next((v.candidate for v in verdicts if v.accepted), None)
    path = out_dir / "verification.json"
    doc = {"run": run_id, "task": run.task_id, "task_dir": run.task_dir, "backend": used, "env": env,
           "seeds": ev.task.seeds, "cases": ev.case_names, "rounds": ev.timing_plan("verify")[0],
           "min_gain": ev.min_gain,
           "winner": winner, "preview": preview, "candidates": [asdict(v) for v in verdicts],
           "note": "interpreter timings do not predict GPU speed" if used == "interpreter" else ""}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)
    db.event(run_id, "verified", {"winner": winner, "backend": used, "checked": [v.candidate for v in verdicts]})
    return Verification(run_id, run.task_id, used, winner, verdicts, path, preview)
