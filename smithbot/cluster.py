"""Evaluation on a Ray cluster, for searches that outgrow one host (``--cluster ray[://HOST:PORT]``).

The evaluator's pool (``evaluator/pool.py``) takes its workers from here instead of starting them on this host. Each
worker is a Ray actor holding the same worker process the local pool runs (``evaluator.process.NodeHost``): one per
GPU of every node on ``cuda`` (``workers_per_gpu`` of them sharing it, as locally), one per CPU on the interpreter.
The task's files and each candidate's source travel with the requests, so the nodes need no shared disk, only torch
and triton; the evaluator's code goes to them through Ray's ``py_modules``. Everything smithbot records (the run
database, the candidates, the reports) stays with the driver, this process.

A node that dies takes its actors with it: their answers come back ``lost``, the pool drops those workers, and what
they were evaluating goes to another worker, so nothing evaluated is lost and the search goes on with fewer.

Ray is optional (``pip install 'smithbot[ray]'``); without ``--cluster`` the local pool is the default.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import evaluator
from evaluator.pool import BackendError
from evaluator.process import NodeHost, pack_task
from smithbot.errors import SmithbotError

DEFAULT_PORT = 6379  # where ``ray start --head`` listens unless told
CONNECT_TIMEOUT_S = 5.0  # to reach the head's port at all, before Ray's own (much longer) retries
PLACE_TIMEOUT_S = 120.0  # for every worker actor to start on some node
GRACE_S = 60.0  # beyond a request's own timeout (which the node enforces), before its worker counts as lost
CLUSTERS = ("local", "ray", "ray://HOST[:PORT]")


class ClusterError(SmithbotError):
    """The cluster cannot be used: Ray is not installed, or its head cannot be reached."""


def address(spec: str) -> str | None:
    """``local`` → None (this host's pool); ``ray`` → "" (Ray's own choice: ``RAY_ADDRESS`` where set, else a cluster
    of this host alone); ``ray://HOST[:PORT]`` → ``HOST:PORT``, the head's address as ``ray start --head`` prints it."""
    if spec == "local":
        return None
    if spec == "ray":
        return ""
    if spec.startswith("ray://") and spec[len("ray://"):]:
        host, _, port = spec[len("ray://"):].partition(":")
        if port and not port.isdigit():
            raise ClusterError(f"--cluster {spec}: the port must be a number")
        return f"{host}:{port or DEFAULT_PORT}"
    raise ClusterError(f"unknown cluster {spec!r} (choose {', '.join(CLUSTERS)})")


@contextlib.contextmanager
def connected(spec: str | None) -> Iterator[RayCluster | None]:
    """The cluster ``spec`` names, connected while the block runs; None for the local pool (``spec`` None or
    ``local``)."""
    where = address(spec or "local")
    if where is None:
        yield None
        return
    cluster = RayCluster(where)
    try:
        yield cluster
    finally:
        cluster.ray.shutdown()


def _reachable(where: str) -> None:
    host, _, port = where.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {where}: {exc.strerror or exc}") from None


class RayCluster:
    """A connection to a Ray cluster that makes evaluation workers on it (the ``evaluator.pool.Cluster`` protocol)."""

    def __init__(self, where: str) -> None:
        try:
            import ray
        except ImportError:
            raise ClusterError("--cluster ray needs Ray, which is not installed: pip install 'smithbot[ray]'") from None
        if where:
            _reachable(where)
        self.ray = ray
        try:
            ray.init(address=where or None, logging_level=logging.ERROR, log_to_driver=False, ignore_reinit_error=True,
                     runtime_env={"py_modules": [str(Path(evaluator.__file__).resolve().parent)]})
        except (ConnectionError, RuntimeError) as exc:
            raise ClusterError(f"cannot join the Ray cluster at {where or 'RAY_ADDRESS'}: {exc}") from None

    def backend(self, asked: str) -> str:
        gpus = self.ray.cluster_resources().get("GPU", 0)
        if asked == "auto":
            return "cuda" if gpus else "interpreter"
        if asked == "cuda" and not gpus:
            raise BackendError("--backend cuda needs GPUs, and the Ray cluster has none; use --backend interpreter")
        if asked not in ("cuda", "interpreter"):
            raise BackendError(f"unknown backend {asked!r} on a cluster (choose cuda, interpreter or auto)")
        return asked

    def workers(self, backend: str, task_root: Path, per_gpu: int | None,
                devices: int | None) -> tuple[list[RemoteWorker], int]:
        """Actors for one task, placed and started: on ``cuda`` ``per_gpu`` (default 2) to each GPU, on the
        interpreter one to each CPU; at most ``devices`` devices."""
        resources = self.ray.cluster_resources()
        kind = "GPU" if backend == "cuda" else "CPU"
        n = int(resources.get(kind, 0))
        n = min(n, devices or n)
        per = (per_gpu or 2) if backend == "cuda" else 1
        if n < 1:
            raise ClusterError(f"the Ray cluster has no {kind} for a worker")
        opts = {"num_gpus": 1 / per, "num_cpus": 0} if backend == "cuda" else {"num_cpus": 1}
        host = self.ray.remote(NodeHost)
        actors = [host.options(max_restarts=0, **opts).remote(backend, i % n) for i in range(n * per)]
        try:
            where = self.ray.get([a.where.remote() for a in actors], timeout=PLACE_TIMEOUT_S)
        except self.ray.exceptions.GetTimeoutError:
            for a in actors:
                self.ray.kill(a)
            raise ClusterError(f"the Ray cluster did not start {len(actors)} workers within {PLACE_TIMEOUT_S:.0f} s "
                               f"({kind} {resources.get(kind, 0):g} in all)") from None
        task = pack_task(task_root)
        return [RemoteWorker(self.ray, a, w, i % n, task) for i, (a, w) in enumerate(zip(actors, where))], n


class RemoteWorker:
    """A worker on a cluster node, with a ``WorkerProcess``'s face: its answer is ``lost`` when the node (or the actor)
    died, or did not answer within the request's timeout and ``GRACE_S``."""

    def __init__(self, ray: Any, actor: Any, where: str, gpu: int, task: tuple[str, dict[str, bytes]]) -> None:
        self.ray, self.actor, self.where, self.gpu = ray, actor, where, gpu
        self.running = True
        self._task, self._sent = task, False

    def start(self) -> None:
        """Started already, on its node."""

    def request(self, req: dict[str, Any], timeout_s: float, compile_s: float | None = None) -> dict[str, Any]:
        req = dict(req)
        if "candidate" in req:
            path = Path(req.pop("candidate"))
            req.update(source=path.read_text(encoding="utf-8"), name=path.name)
        task = (self._task[0], None if self._sent else self._task[1])
        errors = self.ray.exceptions
        try:
            ans: dict[str, Any] = self.ray.get(self.actor.request.remote(req, task, timeout_s, compile_s),
                                               timeout=timeout_s + GRACE_S)
        except errors.GetTimeoutError:
            return {"status": "lost", "detail": f"{self.where}: no answer within {timeout_s + GRACE_S:.0f} s"}
        except errors.RayTaskError as exc:  # the host's own code raised: a fault, not a lost node
            return {"status": "crash", "detail": f"the worker's host failed: {str(exc).splitlines()[0]}"}
        except errors.RayError as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            return {"status": "lost", "detail": f"{self.where}: {type(exc).__name__}: {why}".rstrip(": ")}
        self._sent = True
        self.running = bool(ans.pop("running", True))
        return ans

    def close(self) -> None:
        try:
            self.ray.get(self.actor.close.remote(), timeout=10)
        except self.ray.exceptions.RayError:
            pass
        self.ray.kill(self.actor)
