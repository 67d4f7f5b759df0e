"""Checkouts with real git: a local bare repository is the remote."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import git
import pytest

from smithbot.config import generic_target
from smithbot.repo import RepoError, checkout


@pytest.fixture()
def remote(tmp_path: Path) -> tuple[Path, git.Repo]:
    work = git.Repo.init(tmp_path / "work", initial_branch="main")
    for rel in ("pkg/kern.py", "docs/big.md"):
        (tmp_path / "work" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "work" / rel).write_text("import triton\n")
    work.index.add(["pkg/kern.py", "docs/big.md"])
    work.index.commit("first")
    bare = tmp_path / "remote.git"
    git.Repo.clone_from(tmp_path / "work", bare, bare=True)
    work.create_remote("up", str(bare))
    return bare, work


def _target(bare: Path, **kw):
    return dataclasses.replace(generic_target(f"file://{bare}"), branch="main", **kw)


def test_shallow_sparse_clone_update_and_pin(remote, tmp_path: Path, monkeypatch) -> None:
    bare, work = remote
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    target = _target(bare, sparse_paths=("pkg",))
    co = checkout(target)
    first = co.commit
    assert (co.root / "pkg" / "kern.py").exists() and not (co.root / "docs").exists()  # sparse
    assert co.root.is_relative_to(tmp_path / "home")
    assert len(list(git.Repo(co.root).iter_commits())) == 1  # shallow
    (tmp_path / "work" / "pkg" / "kern.py").write_text("import triton  # v2\n")
    work.index.add(["pkg/kern.py"])
    second = work.index.commit("second").hexsha
    work.remote("up").push("main")
    co2 = checkout(target)  # updated on the next run
    assert co2.root == co.root and co2.commit == second and "v2" in (co2.root / "pkg" / "kern.py").read_text()
    co3 = checkout(target, rev=first)  # pinned
    assert co3.commit == first and "v2" not in (co3.root / "pkg" / "kern.py").read_text()


def test_offline_uses_cache_or_suggests_source(remote, tmp_path: Path, monkeypatch) -> None:
    bare, _ = remote
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    target = _target(bare)
    co = checkout(target)
    bare.rename(tmp_path / "gone.git")  # the remote is unreachable now
    assert checkout(target).commit == co.commit  # the cached checkout still serves
    with pytest.raises(RepoError, match="cannot fetch .*pass --source PATH"):
        checkout(_target(tmp_path / "never.git"))


def test_source_must_be_a_git_checkout(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(RepoError, match="not a git checkout"):
        checkout(generic_target(str(tmp_path / "plain")), source=tmp_path / "plain")
    with pytest.raises(RepoError, match="no such directory"):
        checkout(generic_target("x"), source=tmp_path / "missing")
