"""Isolation: the evaluator imports nothing of smithbot's world, and workers run scrubbed, killable and replaceable."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

from evaluator.env import scrubbed_environ
from evaluator.process import WorkerProcess
from tests.conftest import ROOT, TASKS

BANNED = ("smithbot", "libcst", "git", "github", "openai", "typer", "rich", "jinja2")


def test_evaluator_source_imports_only_what_it_may() -> None:
    allowed_roots = {"torch", "triton", "numpy", "yaml", "evaluator"} | set(sys.stdlib_module_names)
    for path in (ROOT / "evaluator").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for n in names:
                assert n.split(".")[0] in allowed_roots, f"{path.name} imports {n}"


def test_loaded_evaluator_pulls_in_no_banned_module() -> None:
    code = ("import sys, evaluator, evaluator.worker, evaluator.timing, evaluator.__main__\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {BANNED!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout.strip()
    assert out == "[]"


def test_scrubbed_environment() -> None:
    env = scrubbed_environ({"OPENAI_API_KEY": "s", "GITHUB_TOKEN": "t", "db_password": "p", "MY_SECRET_X": "x",
                            "PATH": "/bin", "HOME": "/root"})
    assert env == {"PATH": "/bin", "HOME": "/root"}


def test_worker_environment_has_no_secrets_and_is_replaced_after_a_kill(monkeypatch) -> None:
    monkeypatch.setenv("SMITHBOT_TEST_API_KEY", "do-not-leak")
    monkeypatch.setenv("GH_TOKEN", "do-not-leak")
    w = WorkerProcess("interpreter", None)
    try:
        ans = w.request({"op": "prepare", "task": str(TASKS / "decode_metadata")}, 300)
        assert ans["status"] == "ok"
        pid = w.proc.pid
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        names = {e.split(b"=", 1)[0] for e in environ if e}
        assert b"SMITHBOT_TEST_API_KEY" not in names and b"GH_TOKEN" not in names
        assert b"TRITON_INTERPRET" in names
        # a healthy worker is reused: the same process answers the next request
        assert w.request({"op": "prepare", "task": str(TASKS / "decode_metadata")}, 60)["status"] == "ok"
        assert w.proc.pid == pid
        # a hang is killed at the deadline and the next request gets a fresh process
        t0 = time.monotonic()
        os.kill(pid, 19)  # SIGSTOP: the worker hangs
        ans = w.request({"op": "prepare", "task": str(TASKS / "decode_metadata")}, 2)
        assert ans["status"] == "timeout" and time.monotonic() - t0 < 10
        assert w.request({"op": "prepare", "task": str(TASKS / "decode_metadata")}, 300)["status"] == "ok"
        assert w.proc.pid != pid
    finally:
        w.close()


def test_a_candidate_still_compiling_at_its_limit_is_stopped(tmp_path: Path) -> None:
    """The worker says when compiling ends; until then the parent holds it to the compile limit, after that only to
    the evaluation's own timeout."""
    task = TASKS / "silu_and_mul"
    base = (task / "kernel.py").read_text()
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(60)  # stands in for a compile that takes a minute\n" + base)
    same = tmp_path / "same.py"
    same.write_text(base)
    w = WorkerProcess("interpreter", None)
    try:
        assert w.request({"op": "prepare", "task": str(task)}, 300)["status"] == "ok"
        req = {"op": "eval", "task": str(task), "rounds": 3, "case_s": 0.05, "margin": 0.02, "cases": None}
        t0 = time.monotonic()
        ans = w.request({**req, "candidate": str(slow)}, 120, compile_s=2)
        assert (ans["status"], ans["stage"]) == ("timeout", "compile"), ans
        assert "still compiling after 2 s" in ans["detail"] and time.monotonic() - t0 < 10
        ans = w.request({**req, "candidate": str(same)}, 300, compile_s=60)  # a fresh worker; the limit ends at
        assert ans["status"] == "measured", ans                             # "compiled", not at the answer
    finally:
        w.close()
