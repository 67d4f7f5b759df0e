"""One evaluation worker, as the pool holds it: a ``python -m evaluator.worker`` child in its own process group, with
a scrubbed environment, pinned to one GPU (``CUDA_VISIBLE_DEVICES``) on the ``cuda`` backend, answering one JSON line
per request with a hard timeout. ``NodeHost`` holds one on a machine that does not share the driver's files (a Ray
node, ``smithbot/cluster.py``): the task's files and the candidate's source travel with the requests.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evaluator.env import cache_dir, scrubbed_environ


class WorkerProcess:
    """One child process and the pipe it answers on."""

    def __init__(self, backend: str, gpu: int | None, target: str = "") -> None:
        self.backend, self.gpu, self.target = backend, gpu, target  # target: an ``ahead`` worker's GPU
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tempfile.NamedTemporaryFile(prefix="smithbot-worker-", suffix=".log", delete=False)
        self._buf = b""

    def start(self) -> None:
        """Start the child now (it imports torch and triton while the caller goes on); a request waits for it."""
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.kill()
            self._start()

    def device(self) -> str:
        """The device this worker checks and times on, as its results name it (``env["device"]``, after the host):
        ``gpu<id>`` (the physical GPU), ``interpreter<i>`` (a stand-in id), or ``ahead``."""
        if self.backend in ("interpreter", "ahead"):
            return f"interpreter{self.gpu or 0}" if self.backend == "interpreter" else "ahead"
        visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
        gpu = self.gpu or 0
        return f"gpu{visible[gpu] if gpu < len(visible) else gpu}"

    @property
    def running(self) -> bool:
        """False once killed or dead: the next request starts a fresh process, which must prepare its task again."""
        return self.proc is not None

    def _start(self) -> None:
        env = scrubbed_environ()
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("TRITON_INTERPRET", None)
        env["SMITHBOT_DEVICE"] = self.device()
        if self.backend == "interpreter":
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        elif self.backend == "ahead":  # compiles for the GPU without one (ahead.py)
            env["CUDA_VISIBLE_DEVICES"] = ""
            env["SMITHBOT_AHEAD_TARGET"] = self.target
            env["OMP_NUM_THREADS"] = "1"  # one core each: there is one such worker per core the GPU workers leave
        else:
            physical = self.device().removeprefix("gpu")
            env["CUDA_VISIBLE_DEVICES"] = physical
            lock_dir = cache_dir()
            lock_dir.mkdir(parents=True, exist_ok=True)
            env["SMITHBOT_GPU_LOCK"] = str(lock_dir / f"gpu{physical}.lock")
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
        r, w = os.pipe()
        self.proc = subprocess.Popen([sys.executable, "-m", "evaluator.worker", str(w), self.backend],
                                     stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
                                     pass_fds=(w,), env=env, start_new_session=True, cwd=tempfile.gettempdir())
        os.close(w)
        self._r = r
        self._buf = b""

    def _log_tail(self, start: int, n: int = 3000) -> str:
        self.log.flush()
        with open(self.log.name, "rb") as f:
            f.seek(start)
            return f.read().decode("utf-8", "replace")[-n:]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        if self.proc is not None:
            os.close(self._r)
        self.proc = None

    def request(self, req: dict[str, Any], timeout_s: float, compile_s: float | None = None) -> dict[str, Any]:
        """Send one request; return the answer, or a timeout/crash answer. Never raises for the child's faults.
        With ``compile_s``, an evaluation whose candidate is still compiling after that many seconds (the worker says
        when compiling ends) is killed too, and its answer says so."""
        self.start()
        assert self.proc is not None and self.proc.stdin is not None
        log_start = os.path.getsize(self.log.name)
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        compiled_by = t0 + compile_s if compile_s is not None and compile_s < timeout_s else None
        while True:
            while b"\n" not in self._buf:
                now = time.monotonic()
                if compiled_by is not None and now >= compiled_by:
                    self.kill()
                    return {"status": "timeout", "stage": "compile", "log": self._log_tail(log_start),
                            "detail": f"still compiling after {compile_s:.0f} s (the limit for this task, from its "
                                      "baseline's compile time); the worker was killed"}
                if now >= deadline:
                    self.kill()
                    return {"status": "timeout", "detail": f"no answer within {timeout_s:.0f} s; the worker was "
                            "killed", "log": self._log_tail(log_start)}
                wait = min(deadline, compiled_by or deadline) - now
                ready, _, _ = select.select([self._r], [], [], min(wait, 1.0))
                if ready:
                    chunk = os.read(self._r, 1 << 20)
                    if not chunk:
                        code = self.proc.wait()
                        self.kill()
                        why = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
                        return {"status": "crash", "detail": f"the worker {why}", "log": self._log_tail(log_start)}
                    self._buf += chunk
            line, self._buf = self._buf.split(b"\n", 1)
            answer: dict[str, Any] = json.loads(line)
            if answer.get("progress") == "compiled":  # a note on the way, not the answer
                compiled_by = None
                continue
            break
        if answer.get("fatal"):
            self.kill()
        if "log" not in answer and answer.get("status") not in ("ok", "measured", "correct"):
            answer["log"] = self._log_tail(log_start)
        return answer

    def close(self) -> None:
        self.kill()
        self.log.close()
        os.unlink(self.log.name)


def pack_task(root: Path) -> tuple[str, dict[str, bytes]]:
    """A task directory's files (caches left out) and their digest: what a ``NodeHost`` needs to run the task."""
    files = {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*"))
             if f.is_file() and "__pycache__" not in f.parts}
    h = hashlib.sha256()
    for name, data in files.items():
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()[:16], files


class NodeHost:
    """A ``WorkerProcess`` on a machine that does not share the driver's files. Each request names its task by digest,
    with the files the first time this host sees it (``pack_task``), and carries the candidate's source: the host
    writes both under its own directory and rewrites the request's paths. ``index`` is the worker's device id on the
    interpreter; on ``cuda`` the host sees one GPU (the cluster sets ``CUDA_VISIBLE_DEVICES``) and takes it."""

    def __init__(self, backend: str, index: int) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="smithbot-node-"))
        self.tasks: dict[str, Path] = {}
        self.worker = WorkerProcess(backend, index if backend == "interpreter" else 0)
        self.worker.start()

    def where(self) -> str:
        """The host and device its results will name (``env["device"]``)."""
        return f"{platform.node()}/{self.worker.device()}"

    def request(self, req: dict[str, Any], task: tuple[str, dict[str, bytes] | None], timeout_s: float,
                compile_s: float | None = None) -> dict[str, Any]:
        """``req`` as ``WorkerProcess.request`` takes it, with ``source`` and ``name`` in place of a candidate's path.
        The answer says whether the worker process still runs (``running``)."""
        digest, files = task
        if digest not in self.tasks:
            if files is None:
                return {"status": "crash", "detail": f"this host has no copy of task {digest}", "running": True}
            root = self.dir / "tasks" / digest
            for name, data in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_bytes(data)
            self.tasks[digest] = root
        req = dict(req, task=str(self.tasks[digest]))
        if "source" in req:
            path = self.dir / "candidates" / Path(req.pop("name")).name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(req.pop("source"), encoding="utf-8")
            req["candidate"] = str(path)
        ans = self.worker.request(req, timeout_s, compile_s)
        return {**ans, "running": self.worker.running}

    def close(self) -> None:
        self.worker.close()
        shutil.rmtree(self.dir, ignore_errors=True)
