"""GitHubForge through PyGithub against a local fake of the GitHub REST API, with local bare repositories as the
upstream and the fork."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from pathlib import Path
from typing import Iterator

import git
import pytest

from smithbot.propose.forge import PreparedPR
from smithbot.propose.github import BOT_EMAIL, ForgeError, GitHubConfig, GitHubForge
from tests.propose.fake_github import FakeGitHub

TOKEN = "ghp_fake_secret_0123456789"
BOT = git.Actor("smithbot", BOT_EMAIL)


def _meta(variant: str) -> str:
    return f"<!-- smithbot-metadata: {json.dumps({'variant': variant})} -->"


class World:
    def __init__(self, tmp: Path) -> None:
        self.upstream = git.Repo.init(tmp / "upstream.git", bare=True)
        self.fork = git.Repo.init(tmp / "fork.git", bare=True)
        self.work = git.Repo.init(tmp / "work")
        (tmp / "work" / "ops.py").write_text("BLOCK = 32\n")
        self.work.index.add(["ops.py"])
        dev = git.Actor("dev", "dev@example.com")
        self.base = self.work.index.commit("base", author=dev, committer=dev).hexsha
        self.work.git.checkout("-b", "smithbot/engine/rms")
        (tmp / "work" / "ops.py").write_text("BLOCK = 1024\n")
        self.work.index.add(["ops.py"])
        self.head = self.work.index.commit("faster", author=BOT, committer=BOT).hexsha
        self.gh = FakeGitHub()
        self.gh.add_repo("up/engine", str(tmp / "upstream.git"))
        paths = {"up/engine": str(tmp / "upstream.git"), "smithbot-bot/engine": str(tmp / "fork.git")}
        self.cfg = GitHubConfig(upstream="up/engine", base_url=self.gh.url, max_open_prs=1, push_url=paths.__getitem__,
                                cache=tmp / "cache" / "github.json")

    def pr(self, body: str = "Faster.", variant: str = "v1") -> PreparedPR:
        return PreparedPR("engine", "rms", "smithbot/engine/rms", "Faster rms", f"{body}\n{_meta(variant)}",
                          Path(self.work.working_dir), self.base, self.work.head.commit.hexsha, "", {}, variant,
                          ("_rms_norm_kernel",), ("ops.py",))

    def forge(self) -> GitHubForge:
        return GitHubForge(self.cfg, sleep=lambda s: None)

    def fork_head(self) -> str | None:
        try:
            return self.fork.commit("smithbot/engine/rms").hexsha
        except (git.BadName, ValueError):
            return None


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("SMITHBOT_GITHUB_TOKEN", TOKEN)
    w = World(tmp_path)
    yield w
    w.gh.close()


def test_opens_exactly_one_pr_then_updates_it(world: World) -> None:
    first = world.forge().publish(world.pr())
    assert first.action == "opened" and world.fork_head() == world.head
    assert [p["number"] for p in world.gh.pulls["up/engine"]] == [1]
    assert world.gh.pulls["up/engine"][0]["maintainer_can_modify"] is True
    assert not list(world.upstream.refs)  # nothing was ever pushed to the upstream
    again = world.forge().publish(world.pr())
    assert again.action == "unchanged" and len(world.gh.pulls["up/engine"]) == 1
    assert not any(m == "PATCH" for m, *_ in world.gh.log)  # same body: not edited
    changed = world.forge().publish(world.pr(body="Faster, with a new table."))
    assert changed.action == "updated" and len(world.gh.pulls["up/engine"]) == 1
    assert world.gh.pulls["up/engine"][0]["body"].startswith("Faster, with a new table.")


def test_open_pr_cap(world: World) -> None:
    world.gh.add_pull("up/engine", "smithbot-bot", "smithbot/engine/other")
    r = world.forge().publish(world.pr())
    assert r.action == "skipped" and "cap is 1" in r.detail and world.fork_head() is None


def test_closed_pr_is_never_reopened(world: World) -> None:
    world.gh.add_pull("up/engine", "smithbot-bot", "smithbot/engine/rms", state="closed", body=_meta("v1"))
    r = world.forge().publish(world.pr())
    assert r.action == "skipped" and "closed unmerged" in r.detail
    assert len(world.gh.pulls["up/engine"]) == 1 and world.gh.pulls["up/engine"][0]["state"] == "closed"
    assert world.fork_head() is None


def test_an_open_upstream_pr_on_the_kernel_or_its_file_stops_the_proposal(world: World) -> None:
    """Duplicating work in flight is why kernel PRs stall most often: a PR that names the kernel, or one that edits
    its file, stops the proposal before anything is pushed; the bot's own PRs do not count."""
    world.gh.add_pull("up/engine", "someone", "faster-norm", title="Speed up _rms_norm_kernel for decode")
    r = world.forge().publish(world.pr())
    assert r.action == "skipped" and world.fork_head() is None and len(world.gh.pulls["up/engine"]) == 1
    assert r.detail == ("open upstream pull requests on this kernel: #1 (https://github.test/up/engine/pull/1) names "
                        "_rms_norm_kernel")
    world.gh.pulls["up/engine"][0]["state"] = "closed"
    world.gh.add_pull("up/engine", "other", "refactor", title="Refactor", body="Moves code out of ops.py",
                      files=("ops.py", "README.md"))
    world.cfg = dataclasses.replace(world.cfg, cache=None)  # the cached answer would still show the closed PR
    r = world.forge().publish(world.pr())
    assert r.action == "skipped" and "#2 (https://github.test/up/engine/pull/2) edits ops.py" in r.detail


def test_an_upstream_commit_to_the_file_since_the_base_stops_the_proposal(world: World, tmp_path: Path) -> None:
    world.work.git.push(world.upstream.git_dir, f"{world.base}:refs/heads/main")
    up = git.Repo.clone_from(world.upstream.git_dir, tmp_path / "maintainer", branch="main")
    (Path(up.working_dir) / "ops.py").write_text("BLOCK = 64  # tuned upstream\n")
    up.index.add(["ops.py"])
    dev = git.Actor("dev", "dev@example.com")
    moved = up.index.commit("tune upstream", author=dev, committer=dev).hexsha
    up.git.push("origin", "main")
    r = world.forge().publish(world.pr())
    assert r.action == "skipped" and world.fork_head() is None and not world.gh.pulls["up/engine"]
    assert r.detail.startswith(f"upstream changed ops.py since {world.base[:12]} (1 commits, the last: {moved[:12]})")


def test_search_answers_are_cached(world: World) -> None:
    world.forge().publish(world.pr())  # nothing in flight: opened
    searches = [path for m, path, *_ in world.gh.log if path.startswith("/search/issues")]
    assert len(searches) == 2  # the kernel's name and the file's
    world.gh.pulls["up/engine"].clear()
    world.forge().publish(world.pr(variant="v2"))
    assert len([path for m, path, *_ in world.gh.log if path.startswith("/search/issues")]) == 2


def test_human_push_blocks_a_force_push(world: World) -> None:
    world.forge().publish(world.pr())
    human = git.Repo.clone_from(world.fork.git_dir, Path(world.work.working_dir).parent / "human",
                                branch="smithbot/engine/rms")
    (Path(human.working_dir) / "ops.py").write_text("BLOCK = 2048  # a maintainer's tweak\n")
    human.index.add(["ops.py"])
    someone = git.Actor("maintainer", "m@example.com")
    human.index.commit("tweak", author=someone, committer=someone)
    human.git.push("origin", "smithbot/engine/rms")
    theirs = world.fork_head()
    (Path(world.work.working_dir) / "ops.py").write_text("BLOCK = 512\n")
    world.work.index.add(["ops.py"])
    world.work.index.commit("another variant", author=BOT, committer=BOT)
    with pytest.raises(ForgeError, match="has commits by someone else \\(maintainer\\); not force-pushing"):
        world.forge().publish(world.pr(variant="v2"))
    assert world.fork_head() == theirs


def test_opt_out_is_respected(world: World) -> None:
    world.gh.files[("up/engine", ".github/smithbot.yml")] = "enabled: false\n"
    r = world.forge().publish(world.pr())
    assert r.action == "skipped" and "opted out" in r.detail and world.fork_head() is None and not world.gh.pulls["up/engine"]


def test_token_never_leaks(world: World, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    world.gh.fail.append(("POST", r"/pulls$", 422, {}))
    with pytest.raises(ForgeError) as exc:
        world.forge().publish(world.pr())
    assert TOKEN not in str(exc.value) and "will be reused next run" in str(exc.value)
    world.forge().publish(world.pr())  # the pushed branch is reused, the PR opened
    assert [p["head"]["ref"] for p in world.gh.pulls["up/engine"]] == ["smithbot/engine/rms"]
    assert all(TOKEN not in p["body"] for p in world.gh.pulls["up/engine"])
    assert TOKEN not in caplog.text
    for repo in (world.work, world.fork, world.upstream):
        assert TOKEN not in Path(repo.git_dir, "config").read_text()
    assert all(h.get("authorization") == f"token {TOKEN}" for _, _, h, _ in world.gh.log)  # only in the API header


@pytest.mark.parametrize("fail, message", [
    (("GET", r"^/repos/up/engine$", 403, {}), "reading the upstream repository: HTTP 403 scripted (the token lacks"),
    (("GET", r"^/repos/up/engine$", 401, {}), "HTTP 401 scripted (the token is invalid or expired)"),
    (("POST", r"/forks$", 404, {}), "creating or finding the fork: HTTP 404"),
])
def test_api_errors_are_one_clear_line(world: World, fail: tuple, message: str) -> None:
    world.gh.fail.append(fail)
    with pytest.raises(ForgeError, match=re.escape(message)):
        world.forge().publish(world.pr())


def test_rate_limit_is_retried(world: World) -> None:
    world.gh.fail.append(("GET", r"^/user$", 403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1"}))
    assert world.forge().publish(world.pr()).action == "opened"
    for _ in range(5):
        world.gh.fail.append(("GET", r"^/repos/up/engine$", 403, {"x-ratelimit-remaining": "0",
                                                                  "x-ratelimit-reset": "1"}))
    with pytest.raises(ForgeError, match="rate limit reached; try again later"):
        world.forge().publish(world.pr())


def test_missing_token_names_the_variable(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SMITHBOT_GITHUB_TOKEN")
    with pytest.raises(ForgeError, match="environment variable SMITHBOT_GITHUB_TOKEN"):
        world.forge()
