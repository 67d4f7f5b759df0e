"""From a verified run to a prepared pull request: target, worktree at the base commit, re-insertion, formatter,
generated files, one commit on a stable branch, the rendered body.

The worktree lives under ``$SMITHBOT_HOME/workspaces/<target>/propose/<kernel>``, made with ``git worktree`` from the
target's checkout (for the bundled demo, a git repository made once from the demo sources), so a user's own checkout
is never touched. Preparing twice gives the same commit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import git

from evaluator import Task, load_task
from smithbot.config import ConfigError, Target, TARGETS_DIR, generic_target, get_target, target_names
from smithbot.errors import SmithbotError
from smithbot.evolve.db import Candidate, RunDB
from smithbot.propose.forge import PreparedPR
from smithbot.propose.reinsert import (changed_definitions, definition_lines, reinsert, reinsert_glue,
                                       run_formatters)
from smithbot.propose.render import render, title as pr_title
from smithbot.repo import Checkout, checkout, home

BOT = git.Actor("smithbot", "smithbot@users.noreply.github.com")


class ProposeError(SmithbotError):
    """A run cannot be proposed (not verified, no winner, the target moved). One line."""


class UpstreamMoved(ProposeError):
    """A definition the candidate changes is different at the target's head than at the task's commit."""

    def __init__(self, message: str, head: str) -> None:
        super().__init__(message)
        self.head = head


def target_for(task: Task) -> Target:
    """The target a task came from: the bundled demo, the target whose name prefixes the task id (``smithbot extract
    sglang ... --source PATH`` writes ``sglang-<kernel>``), the target with that repository URL, or generic defaults."""
    repo = task.provenance.repo
    if repo.startswith("bundled:"):
        return get_target(repo.split(":", 1)[1])
    for name in target_names():
        t = get_target(name)
        if task.id.startswith(f"{name}-") or t.repo.rstrip("/").removesuffix(".git") == repo.rstrip("/").removesuffix(".git"):
            return t
    return generic_target(repo)


def _demo_repo(target: Target) -> Checkout:
    """The bundled demo as a git repository (made once), so the demo's change is a real branch and diff."""
    dest = home() / "workspaces" / target.name / "upstream"
    if not (dest / ".git").exists():
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(TARGETS_DIR / target.repo, dest, ignore=shutil.ignore_patterns("__pycache__"))
        repo = git.Repo.init(dest)
        repo.git.add("-A")
        repo.index.commit("the demo mini-engine, as shipped with smithbot", author=BOT, committer=BOT)
    return Checkout(dest, git.Repo(dest).head.commit.hexsha, f"bundled:{target.name}")


def _base(target: Target, task: Task, source: str | None) -> Checkout:
    if task.provenance.repo.startswith("bundled:") and source is None:
        return _demo_repo(target)
    co = checkout(target, source, task.provenance.commit)
    if task.provenance.commit and co.commit and not co.commit.startswith(task.provenance.commit[:12]):
        try:
            git.Repo(co.root).commit(task.provenance.commit)
        except (git.BadName, ValueError):
            raise ProposeError(f"the task's base commit {task.provenance.commit[:12]} is not in {co.root}; fetch it, "
                               "or re-extract the kernel from the current target") from None
    return co


def kernels_dir(target: Target, near: str) -> str:
    """Where the target keeps its kernels: the directory of its first hot path (``minengine/kernels/**``), or the
    directory of ``near`` when it declares none."""
    for pattern in target.hints.hot_paths:
        head = pattern.split("*", 1)[0].rstrip("/")
        if head:
            return head
    return str(Path(near).parent)


def _upstream_moved(repo: git.Repo, task: Task, candidate: str, base: str, head: str) -> list[str]:
    """The definitions the candidate changes whose upstream text differs between ``base`` and ``head``."""
    def lines_at(rev: str, path: str, qualname: str) -> list[str] | None:
        try:
            return definition_lines(repo.git.show(f"{rev}:{path}"), qualname)
        except git.GitCommandError:
            return None  # the file is gone

    return [f"{d.path}::{d.qualname}" for d in changed_definitions(task, candidate)
            if lines_at(base, d.path, d.qualname) != lines_at(head, d.path, d.qualname)]


def winner(db: RunDB, run_id: str) -> tuple[dict[str, Any], dict[str, Any], Candidate]:
    """A verified run's verification.json, the winner's verdict and its candidate row. Raises ProposeError."""
    vpath = db.path.parent / "runs" / run_id / "verification.json"
    if not vpath.exists():
        raise ProposeError(f"run {run_id} is not verified yet: `smithbot verify {run_id}` first")
    verification = json.loads(vpath.read_text())
    best = verification.get("winner")
    if not best:
        reasons = "; ".join(f"{c['candidate']}: {c['reason']}" for c in verification["candidates"]) or "no candidate"
        raise ProposeError(f"run {run_id} has no verified winner ({reasons})")
    verdict = next(c for c in verification["candidates"] if c["candidate"] == best)
    return verification, verdict, db.candidate(best)


def prepare(db: RunDB, run_id: str, source: str | None = None) -> tuple[PreparedPR, Target]:
    """Re-insert a verified run's winner on a branch at the task's commit. Raises UpstreamMoved when a definition it
    changes is different at the target's head (``--rebase`` re-extracts and re-verifies there instead)."""
    run = db.run(run_id)
    verification, verdict, cand = winner(db, run_id)
    task = load_task(run.task_dir)
    try:
        target = target_for(task)
    except ConfigError as exc:
        raise ProposeError(str(exc)) from None
    bundled = task.provenance.repo.startswith("bundled:") and source is None
    head = None if bundled else checkout(target, source).commit  # fetched first: the base fetch below checks out last
    base = _base(target, task, source)
    commit = task.provenance.commit or base.commit
    if commit is None:
        raise ProposeError(f"{base.root}: no base commit to branch from")
    if head and head != commit:
        moved = _upstream_moved(git.Repo(base.root), task, cand.source or "", commit, head)
        if moved:
            raise UpstreamMoved(f"upstream moved on: {', '.join(moved)} changed between {commit[:12]} and {head[:12]}; "
                                f"`smithbot propose {run_id} --rebase` re-extracts and re-verifies the change on the "
                                "new head", head)
    kernel_id = task.id.removeprefix(f"{target.name}-").strip("_-")
    branch = f"smithbot/{target.name}/{kernel_id}"
    wt = home() / "workspaces" / target.name / "propose" / kernel_id
    repo = git.Repo(base.root)
    try:
        if wt.exists():
            try:
                repo.git.worktree("remove", "--force", str(wt))
            except git.GitCommandError:
                shutil.rmtree(wt)
        repo.git.worktree("prune")  # also forgets worktrees whose folders were deleted
        repo.git.worktree("add", "--force", "-B", branch, str(wt), commit)
    except git.GitCommandError as exc:
        why = str(exc.stderr).strip().splitlines()[-1].removeprefix("stderr: ").replace("'", "") if exc.stderr else str(exc)
        hint = ("; another smithbot home has it checked out: `git -C {} worktree remove --force PATH` frees it"
                .format(base.root) if "checked out at" in why else "")
        raise ProposeError(f"cannot make a worktree of {base.root} on {branch}: {why}{hint}") from None
    wrepo = git.Repo(wt)
    try:
        if task.provenance.glue:  # a fused kernel in place of torch glue: a new module, and a call where the glue was
            result = reinsert_glue(task, cand.source or "", wt, kernels_dir(target, task.provenance.glue["path"]))
        else:
            result = reinsert(task, cand.source or "", wt)
    except Exception:
        repo.git.worktree("remove", "--force", str(wt))
        raise
    at_base = set(wrepo.git.ls_tree("--name-only", commit, "--", *result.changed_files).splitlines())
    originals = {rel: wrepo.git.show(f"{commit}:{rel}") + "\n" for rel in result.changed_files if rel in at_base}
    notes = run_formatters(wt, result.changed_files, target.conventions.formatter, originals)
    patch_kernel = wrepo.git.diff(commit, "--", *result.changed_files) if result.changed_files else ""
    args = (target, task, verification, verdict, cand, result.replaced, result.added)
    rendered = render(*args, notes, patch_kernel, commit)
    files = {rendered.test_path: rendered.test}
    if rendered.bench_path:
        files[rendered.bench_path] = rendered.bench
    for rel, text in files.items():
        dest = wt / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
    more = [n for n in run_formatters(wt, tuple(files), target.conventions.formatter)
            if n not in notes]
    files = {rel: (wt / rel).read_text(encoding="utf-8") for rel in files}  # as formatted: what is committed
    body = render(*args, notes + more, patch_kernel, commit).body if more else rendered.body
    wrepo.git.add("-A")
    preview = bool(verification.get("preview"))
    title = pr_title(task, verdict, config_only=cand.proposer == "tune", source=cand.source or "", preview=preview,
                     interpreter=verification["backend"] == "interpreter")
    if wrepo.is_dirty(index=True, untracked_files=True):
        wrepo.index.commit(f"{title}\n\nGenerated by smithbot; see the PR body for the evidence.", author=BOT,
                           committer=BOT)
    patch = wrepo.git.diff(commit, "HEAD")
    names = tuple(dict.fromkeys(r.rsplit("::", 1)[-1].rsplit(".", 1)[-1] for r in result.replaced))
    return PreparedPR(target.name, kernel_id, branch, title, body, wt, commit, wrepo.head.commit.hexsha, patch,
                      files, cand.source_hash or "", names, tuple(result.changed_files), preview), target

