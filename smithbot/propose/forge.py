"""The forge: where a prepared change goes. ``LocalForge`` (the default, a dry run) writes it to disk.

A :class:`PreparedPR` is made by ``pipeline.prepare``: a commit on the branch ``smithbot/<target>/<kernel>`` in a
local git worktree, the PR title and body, the generated test and benchmark, and the patch. A forge publishes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from smithbot.errors import SmithbotError


class ForgeError(SmithbotError):
    """A forge operation failed in a way the user must act on. One line, never containing the token."""


@dataclass(frozen=True)
class PreparedPR:
    target: str
    kernel_id: str
    branch: str
    title: str
    body: str
    worktree: Path
    base_commit: str
    head_commit: str
    patch: str
    files: dict[str, str]  # repository path -> text: the generated test and benchmark
    variant: str
    kernels: tuple[str, ...] = ()  # the names of the upstream definitions the change replaces
    touched: tuple[str, ...] = ()  # the upstream files the change edits (not the generated test and benchmark)
    preview: bool = False  # verified without timing (a fusion on the interpreter): written locally, never submitted


@dataclass(frozen=True)
class Published:
    action: str  # written | opened | updated | unchanged | skipped
    where: str  # a folder or a PR URL
    detail: str = ""


class Forge(Protocol):
    def publish(self, pr: PreparedPR) -> Published: ...


class LocalForge:
    """Writes ``pr.md``, ``patch.diff`` and the generated test and benchmark into ``out_dir``; the branch stays in
    the local worktree."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    def publish(self, pr: PreparedPR) -> Published:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "pr.md").write_text(f"# {pr.title}\n\n{pr.body}", encoding="utf-8")
        (self.out_dir / "patch.diff").write_text(pr.patch, encoding="utf-8")
        for rel, text in pr.files.items():
            dest = self.out_dir / Path(rel).name
            dest.write_text(text, encoding="utf-8")
        return Published("written", str(self.out_dir),
                         f"branch {pr.branch} at {pr.head_commit[:12]} in {pr.worktree}")
