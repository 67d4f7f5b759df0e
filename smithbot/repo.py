"""Checkouts of targets through gitpython: shallow (depth 1), blob-filtered and sparse, cached under $SMITHBOT_HOME
and brought up to date on the next run. ``--source PATH`` uses an existing checkout without touching the network."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import git

from evaluator.env import cache_dir
from smithbot.config import TARGETS_DIR, Target
from smithbot.errors import SmithbotError


class RepoError(SmithbotError):
    """A checkout cannot be made or used. One line, with a suggestion where one helps."""


@dataclass(frozen=True)
class Checkout:
    root: Path
    commit: str | None  # None for the bundled demo, which is not a git checkout
    url: str


home = cache_dir  # $SMITHBOT_HOME, or ~/.cache/smithbot: the evaluator's resolver, shared


def _head(root: Path) -> str:
    try:
        return git.Repo(root).head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        raise RepoError(f"{root}: not a git checkout (run it on a clone, or `git init` the directory)") from None


def _git_error(exc: git.GitCommandError) -> str:
    lines = [ln.strip() for ln in str(exc.stderr or exc).splitlines() if ln.strip()]
    return (lines[-1] if lines else str(exc)).removeprefix("stderr: ").strip("'")


def checkout(target: Target, source: str | Path | None = None, rev: str | None = None) -> Checkout:
    """The source tree to scan: ``source`` if given, the bundled tree for bundled targets, else a cached clone."""
    if source is not None:
        root = Path(source).resolve()
        if not root.is_dir():
            raise RepoError(f"{source}: no such directory")
        commit = _head(root)
        if rev is not None:
            try:
                commit = git.Repo(root).commit(rev).hexsha
            except (git.BadName, ValueError):
                raise RepoError(f"{source}: unknown revision {rev!r}") from None
        return Checkout(root, commit, str(root))
    if target.bundled:
        root = (TARGETS_DIR / target.repo).resolve()
        if not root.is_dir():
            root = Path(target.repo).resolve()
        if not root.is_dir():
            raise RepoError(f"{target.repo}: no such directory")
        if (root / ".git").exists():
            return Checkout(root, _head(root), str(root))
        if target.file is not None and target.file.parent == TARGETS_DIR:
            return Checkout(root, None, f"bundled:{target.name}")
        raise RepoError(f"{root}: not a git checkout (run it on a clone, or `git init` the directory)")
    return _clone_or_update(target, rev)


def _clone_or_update(target: Target, rev: str | None) -> Checkout:
    url = target.repo
    dest = home() / "checkouts" / f"{target.name}-{hashlib.sha1(url.encode()).hexdigest()[:8]}"
    ref = rev or target.branch or "HEAD"
    try:
        if (dest / ".git").exists():
            repo = git.Repo(dest)
            repo.git.fetch("--depth", "1", "--filter=blob:none", "origin", ref)
            repo.git.checkout("--force", "FETCH_HEAD")
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            repo = git.Repo.init(dest)
            repo.create_remote("origin", url)
            if target.sparse_paths:
                repo.git.sparse_checkout("set", *target.sparse_paths)
            repo.git.fetch("--depth", "1", "--filter=blob:none", "origin", ref)
            repo.git.checkout("--force", "FETCH_HEAD")
    except git.GitCommandError as exc:
        if (dest / ".git").exists() and git.Repo(dest).head.is_valid():
            # offline, but a cached checkout exists: use it as it is
            return Checkout(dest, git.Repo(dest).head.commit.hexsha, url)
        raise RepoError(f"cannot fetch {url} ({_git_error(exc)}); offline? pass --source PATH to scan an existing "
                        "checkout") from None
    return Checkout(dest, repo.head.commit.hexsha, url)
