"""A local fake of the GitHub REST API, enough of it for PyGithub's calls in GitHubForge, over HTTP on loopback."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


class FakeGitHub:
    def __init__(self, bot: str = "smithbot-bot") -> None:
        self.bot = bot
        self.repos: dict[str, dict[str, Any]] = {}
        self.pulls: dict[str, list[dict[str, Any]]] = {}
        self.files: dict[tuple[str, str], str] = {}
        self.fail: list[tuple[str, str, int, dict[str, str]]] = []  # (method, path regex, status, headers), once each
        self.log: list[tuple[str, str, dict[str, str], str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                fake.log.append((method, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                for i, (m, pat, status, headers) in enumerate(fake.fail):
                    if m == method and re.search(pat, url.path):
                        del fake.fail[i]
                        msg = "API rate limit exceeded" if headers.get("x-ratelimit-remaining") == "0" else "scripted"
                        return self._send(status, {"message": msg}, headers)
                status, data = fake.route(method, url.path, parse_qs(url.query), json.loads(body) if body else {})
                self._send(status, data)

            def _send(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:  # noqa: N802
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

            def do_PATCH(self) -> None:  # noqa: N802
                self._handle("PATCH")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # state

    def add_repo(self, full: str, clone_url: str, fork: bool = False) -> dict[str, Any]:
        owner, name = full.split("/")
        repo = {"id": len(self.repos) + 1, "name": name, "full_name": full, "fork": fork, "default_branch": "main",
                "owner": {"login": owner, "id": 1, "type": "User"}, "html_url": f"https://github.test/{full}",
                "url": f"{self.url}/repos/{full}", "clone_url": clone_url}
        self.repos[full] = repo
        self.pulls.setdefault(full, [])
        return repo

    def add_pull(self, full: str, head_owner: str, ref: str, state: str = "open", merged: bool = False,
                 body: str = "", title: str = "t", files: tuple[str, ...] = ()) -> dict[str, Any]:
        n = sum(len(v) for v in self.pulls.values()) + 1
        pr = {"id": n, "number": n, "state": state, "merged": merged, "title": title, "body": body, "files": list(files),
              "html_url": f"https://github.test/{full}/pull/{n}", "url": f"{self.url}/repos/{full}/pulls/{n}",
              "head": {"ref": ref, "label": f"{head_owner}:{ref}", "sha": "0" * 40, "user": {"login": head_owner}},
              "base": {"ref": "main"}, "user": {"login": head_owner}, "maintainer_can_modify": True}
        self.pulls[full].append(pr)
        return pr

    def _search(self, q: str) -> tuple[int, Any]:
        """``/search/issues`` for ``repo:O/N is:pr is:open "term"``: open PRs whose title or body holds the term."""
        repo = re.search(r"repo:(\S+)", q)
        term = re.search(r'"([^"]+)"', q)
        if repo is None or term is None or "is:pr" not in q:
            return 422, {"message": f"fake GitHub cannot search {q!r}"}
        items = [{**p, "pull_request": {"url": p["url"]}} for p in self.pulls.get(repo.group(1), [])
                 if p["state"] == "open" and term.group(1) in f"{p['title']} {p['body']}"]
        return 200, {"total_count": len(items), "incomplete_results": False, "items": items}

    def _compare(self, full: str, base: str, head: str) -> tuple[int, Any]:
        """``/compare/base...head`` from the repository's bare git directory (its clone_url)."""
        git_dir = self.repos[full]["clone_url"]

        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", git_dir, *args], capture_output=True, text=True, check=True).stdout

        try:
            names = git("diff", "--name-only", base, head).split()
            shas = git("rev-list", "--reverse", f"{base}..{head}").split()
        except subprocess.CalledProcessError:
            return 404, {"message": "Not Found"}
        return 200, {"status": "ahead", "ahead_by": len(shas), "behind_by": 0, "total_commits": len(shas),
                     "url": f"{self.url}/repos/{full}/compare/{base}...{head}",
                     "commits": [{"sha": s, "url": f"{self.url}/repos/{full}/commits/{s}"} for s in shas],
                     "files": [{"filename": n, "status": "modified"} for n in names]}

    def route(self, method: str, path: str, query: dict[str, list[str]], body: dict[str, Any]) -> tuple[int, Any]:
        if method == "GET" and path == "/user":
            return 200, {"login": self.bot, "id": 99, "type": "User"}
        if method == "GET" and path == "/search/issues":
            return self._search(query.get("q", [""])[0])
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)(/.*)?", path)
        if not m or m.group(1) not in self.repos:
            return 404, {"message": "Not Found"}
        full, rest = m.group(1), m.group(2) or ""
        if method == "GET" and rest == "":
            return 200, self.repos[full]
        if method == "GET" and rest.startswith("/contents/"):
            text = self.files.get((full, rest.removeprefix("/contents/")))
            if text is None:
                return 404, {"message": "Not Found"}
            return 200, {"type": "file", "encoding": "base64", "name": rest.rsplit("/", 1)[-1], "path": rest[10:],
                         "sha": "1" * 40, "content": base64.b64encode(text.encode()).decode()}
        if method == "POST" and rest == "/forks":
            fork_full = f"{self.bot}/{self.repos[full]['name']}"
            if fork_full not in self.repos:
                self.add_repo(fork_full, f"fork-of-{full}", fork=True)
            return 202, self.repos[fork_full]
        if method == "GET" and rest == "/pulls":
            state, head = query.get("state", ["open"])[0], query.get("head", [None])[0]
            out = [p for p in self.pulls[full] if (state == "all" or p["state"] == state)
                   and (head is None or p["head"]["label"] == head)]
            return 200, out
        if method == "POST" and rest == "/pulls":
            owner, ref = body["head"].split(":")
            if any(p["state"] == "open" and p["head"]["label"] == body["head"] for p in self.pulls[full]):
                return 422, {"message": "A pull request already exists"}
            pr = self.add_pull(full, owner, ref, body=body["body"], title=body["title"])
            pr["maintainer_can_modify"] = body.get("maintainer_can_modify", False)
            return 201, pr
        if method == "GET" and rest.startswith("/compare/"):
            base, _, head = rest.removeprefix("/compare/").partition("...")
            return self._compare(full, base, head)
        m3 = re.fullmatch(r"/pulls/(\d+)(/files)?", rest)
        if method == "GET" and m3:
            pr = next((p for p in self.pulls[full] if p["number"] == int(m3.group(1))), None)
            if pr is None:
                return 404, {"message": "Not Found"}
            if m3.group(2):
                return 200, [{"sha": "2" * 40, "filename": f, "status": "modified"} for f in pr["files"]]
            return 200, pr
        m2 = re.fullmatch(r"/pulls/(\d+)", rest)
        if method == "PATCH" and m2:
            pr = next(p for p in self.pulls[full] if p["number"] == int(m2.group(1)))
            pr.update({k: v for k, v in body.items() if k in ("title", "body", "state")})
            return 200, pr
        return 404, {"message": f"fake GitHub has no {method} {path}"}
