"""``GitHubForge``: open or update a pull request through PyGithub, with the habits of well-behaved bots.

State is read back from the forge every time, never from local memory:
- the fork of the upstream under the bot's account is made if missing; nothing is ever pushed to the upstream;
- an opt-out file in the upstream (``.github/smithbot.yml`` with ``enabled: false``) stops everything;
- a PR for this variant that was closed unmerged is never reopened or proposed again (the variant hash is in the
  PR body's hidden metadata);
- at most ``max_open_prs`` open smithbot PRs per target;
- no duplicate work: before a new PR, open upstream PRs that name a kernel the change replaces or the file it edits
  (the search API; a hit's files are listed to say whether it touches the file), and upstream commits to that file
  since the change's base (the compare API), stop the proposal with a line that names them. Search answers are
  cached for ``CACHE_TTL_S`` in ``cache`` (the search API allows 30 requests a minute);
- the branch ``smithbot/<target>/<kernel>`` is pushed to the fork; if someone else pushed to it, it is not
  force-pushed, and the run says so;
- an open PR for the branch is updated (its body only when the normalised body changed); otherwise a PR is opened
  with ``maintainer_can_modify``;
- a branch pushed without a PR (a failure between the two) is reported and reused on the next run.

The token comes from the environment variable the config names. It is handed to git through an environment-only
header for the one push command, so it never lands in ``.git/config``, a remote URL, a log or an exception.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import git
import yaml
from github import Auth, Github, GithubException, RateLimitExceededException

from smithbot.propose.forge import ForgeError, PreparedPR, Published
from smithbot.propose.render import metadata

BOT_EMAIL = "smithbot@users.noreply.github.com"
CACHE_TTL_S = 600.0


def normalised_hash(body: str) -> str:
    return hashlib.sha256(re.sub(r"\s+", " ", body).strip().encode()).hexdigest()


@dataclass(frozen=True)
class GitHubConfig:
    upstream: str  # owner/name
    token_env: str = "SMITHBOT_GITHUB_TOKEN"
    base_url: str = "https://api.github.com"
    max_open_prs: int = 1
    push_url: Callable[[str], str] | None = None  # fork full name -> git URL (tests use local bare repositories)
    cache: Path | None = None  # a JSON file for search answers (None: no cache)


class GitHubForge:
    def __init__(self, cfg: GitHubConfig, retries: int = 3, sleep: Callable[[float], None] = time.sleep) -> None:
        token = os.environ.get(cfg.token_env)
        if not token:
            raise ForgeError(f"--submit needs a GitHub token in the environment variable {cfg.token_env}")
        self.cfg, self._token, self.retries, self.sleep = cfg, token, retries, sleep
        self.gh = Github(auth=Auth.Token(token), base_url=cfg.base_url, retry=None)

    # helpers

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***")

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        """One API call with a clear message for 401/403/404/422 and a bounded retry on rate limits and 5xx."""
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except RateLimitExceededException as exc:
                if attempt == self.retries:
                    raise ForgeError(f"{what}: GitHub rate limit reached; try again later") from None
                reset = (exc.headers or {}).get("x-ratelimit-reset") or (exc.headers or {}).get("retry-after")
                wait = 1.0
                if reset and str(reset).isdigit():
                    wait = max(0.0, min(60.0, float(reset) - time.time())) if int(reset) > 1e9 else float(reset)
                self.sleep(wait)
            except GithubException as exc:
                msg = self._scrub(str((exc.data or {}).get("message", "") if isinstance(exc.data, dict) else exc.data))
                if exc.status >= 500 and attempt < self.retries:
                    self.sleep(2.0 ** attempt)
                    continue
                hint = {401: "the token is invalid or expired", 403: "the token lacks permission (a classic PAT with "
                        "public_repo is needed), or the action is forbidden", 404: "not found (or not visible to "
                        "this token)", 422: "GitHub refused the request as invalid"}.get(exc.status, "")
                raise ForgeError(f"{what}: HTTP {exc.status} {msg}".rstrip() + (f" ({hint})" if hint else "")) from None
        raise ForgeError(f"{what}: gave up")  # unreachable

    def _opted_out(self, upstream: Any) -> bool:
        try:
            content = upstream.get_contents(".github/smithbot.yml")
        except GithubException as exc:
            if exc.status == 404:
                return False
            raise
        try:
            data = yaml.safe_load(base64.b64decode(content.content).decode()) or {}
        except (yaml.YAMLError, ValueError):
            return False
        return isinstance(data, dict) and data.get("enabled") is False

    def _push(self, pr: PreparedPR, fork: Any) -> str:
        """Push the branch to the fork unless someone else's commits are on it there. Returns what happened."""
        url = self.cfg.push_url(fork.full_name) if self.cfg.push_url else fork.clone_url
        repo = git.Repo(pr.worktree)
        header = "AUTHORIZATION: basic " + base64.b64encode(f"x-access-token:{self._token}".encode()).decode()
        env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"http.{url}.extraheader", "GIT_CONFIG_VALUE_0": header,
               "GIT_TERMINAL_PROMPT": "0"}
        try:
            with repo.git.custom_environment(**env):
                remote_head = repo.git.ls_remote(url, f"refs/heads/{pr.branch}").split("\t")[0].strip()
                if remote_head == pr.head_commit:
                    return "unchanged"
                if remote_head:
                    repo.git.fetch(url, f"refs/heads/{pr.branch}")
                    fetched = repo.commit("FETCH_HEAD")
                    foreign = [c for c in repo.iter_commits(f"{pr.base_commit}..{fetched.hexsha}")
                               if c.author.email != BOT_EMAIL or c.committer.email != BOT_EMAIL]
                    if foreign:
                        raise ForgeError(f"{pr.branch} on the fork has commits by someone else "
                                         f"({foreign[0].author.name}); not force-pushing over them")
                repo.git.push("--force", url, f"HEAD:refs/heads/{pr.branch}")
        except git.GitCommandError as exc:
            raise ForgeError(f"pushing {pr.branch} to the fork failed: {self._scrub(str(exc.stderr).strip())[-300:]}") \
                from None
        return "pushed"

    def _cached(self, key: str, fetch: Callable[[], Any]) -> Any:
        """``fetch()``'s JSON-able answer, from the cache file while it is younger than ``CACHE_TTL_S``."""
        path = self.cfg.cache
        cache: dict[str, Any] = {}
        if path is not None and path.exists():
            try:
                cache = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                cache = {}  # a broken cache is only a cache
        hit = cache.get(key)
        if isinstance(hit, list) and len(hit) == 2 and time.time() - hit[0] < CACHE_TTL_S:
            return hit[1]
        value = fetch()
        if path is not None:
            cache = {k: v for k, v in cache.items() if isinstance(v, list) and time.time() - v[0] < CACHE_TTL_S}
            cache[key] = [time.time(), value]
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(cache), encoding="utf-8")
            tmp.replace(path)
        return value

    def _in_flight(self, up: Any, pr: PreparedPR, me: str) -> str:
        """Work upstream that this change would duplicate or collide with: one line naming it, or ``""``."""
        found: dict[int, str] = {}
        for term in dict.fromkeys([*pr.kernels, *(Path(f).name for f in pr.touched)]):
            query = f'repo:{up.full_name} is:pr is:open "{term}"'
            hits = self._cached(f"search {query}", lambda: self._call("searching open pull requests", lambda: [
                {"number": i.number, "url": i.html_url, "user": i.user.login}
                for i in list(self.gh.search_issues(query))[:10]]))
            for h in hits:
                if h["user"] == me or h["number"] in found:
                    continue
                files = self._cached(f"files {up.full_name}#{h['number']}", lambda: self._call(
                    f"listing the files of pull request #{h['number']}",
                    lambda: [f.filename for f in up.get_pull(h["number"]).get_files()]))
                touches = [f for f in pr.touched if f in files]
                found[h["number"]] = f"#{h['number']} ({h['url']}) " + (
                    f"edits {touches[0]}" if touches else f"names {term}")
        if found:
            return f"open upstream pull requests on this kernel: {'; '.join(found.values())}"
        try:
            diff = self._call("comparing the base with the upstream head",
                              lambda: up.compare(pr.base_commit, up.default_branch))
        except ForgeError as exc:
            if "HTTP 404" in str(exc):  # the base is not an upstream commit (a mirror's): nothing to compare
                return ""
            raise
        moved = sorted({f.filename for f in diff.files} & set(pr.touched))
        if moved:
            shas = ", ".join(c.sha[:12] for c in list(diff.commits)[-3:])
            return (f"upstream changed {', '.join(moved)} since {pr.base_commit[:12]} ({diff.total_commits} commits, "
                    f"the last: {shas}); re-run on the new head (`smithbot propose RUN --rebase`)")
        return ""

    # the one entry point

    def publish(self, pr: PreparedPR) -> Published:
        up = self._call("reading the upstream repository", lambda: self.gh.get_repo(self.cfg.upstream))
        if self._call("reading the opt-out file", lambda: self._opted_out(up)):
            return Published("skipped", up.html_url, "the repository opted out (.github/smithbot.yml: enabled: false)")
        me = self._call("reading the bot account", lambda: self.gh.get_user().login)
        if up.owner.login == me:
            raise ForgeError("the upstream belongs to the bot account itself; smithbot only pushes to its fork")
        head = f"{me}:{pr.branch}"
        pulls = self._call("listing pull requests", lambda: list(up.get_pulls(state="all", head=head)))
        for p in pulls:
            meta = metadata(p.body or "") or {}
            if p.state == "closed" and not p.merged and meta.get("variant") == pr.variant:
                return Published("skipped", p.html_url, "this variant's PR was closed unmerged; it is not proposed again")
        open_pr = next((p for p in pulls if p.state == "open"), None)
        if open_pr is None:
            mine = self._call("counting open smithbot PRs", lambda: [
                p for p in up.get_pulls(state="open") if p.user.login == me and p.head.ref.startswith("smithbot/")])
            if len(mine) >= self.cfg.max_open_prs:
                return Published("skipped", up.html_url, f"{len(mine)} smithbot PRs are open already (the cap is "
                                 f"{self.cfg.max_open_prs}); not opening another")
            clash = self._in_flight(up, pr, me)
            if clash:
                return Published("skipped", up.html_url, clash)
        fork = self._call("creating or finding the fork", lambda: up.create_fork())
        if fork.full_name == up.full_name:
            raise ForgeError("the fork resolved to the upstream itself; refusing to push")
        pushed = self._push(pr, fork)
        if open_pr is not None:
            if normalised_hash(open_pr.body or "") == normalised_hash(pr.body) and open_pr.title == pr.title:
                return Published("unchanged" if pushed == "unchanged" else "updated", open_pr.html_url,
                                  f"branch {pushed}; the body is unchanged")
            self._call("updating the pull request", lambda: open_pr.edit(title=pr.title, body=pr.body))
            return Published("updated", open_pr.html_url, f"branch {pushed}; body updated")
        try:
            new = self._call("opening the pull request", lambda: up.create_pull(
                title=pr.title, body=pr.body, base=up.default_branch, head=head, maintainer_can_modify=True))
        except ForgeError as exc:
            raise ForgeError(f"{exc}; the branch {pr.branch} is on the fork and will be reused next run") from None
        return Published("opened", new.html_url, f"branch {pushed}")
