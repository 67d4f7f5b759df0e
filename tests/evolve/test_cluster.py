"""Evaluation spread over devices and machines: two stand-in devices of the local pool on the interpreter, and a real
local Ray cluster of two worker nodes (skipped where Ray is not installed; CI installs it), one of them killed
mid-search. The same replayed search, on the local pool and on Ray, judges the same candidates correct."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import Evaluator
from smithbot import api
from smithbot.evolve.db import RunDB
from tests.evolve.helpers import planted_silu

ROOT = Path(__file__).resolve().parents[2]
PLANTED = 'triton.Config({"BLOCK": 16}, num_warps=4)'


def _replay(task: Path, dst: Path) -> Path:
    """Full-source responses: three launch configs (correct), a wrong product (incorrect) and a block that is no
    power of two (fails under the interpreter)."""
    src = (task / "kernel.py").read_text()
    variants = [src.replace(PLANTED, f'triton.Config({{"BLOCK": {b}}}, num_warps=4)') for b in (32, 64, 128)]
    variants.append(src.replace("* up\n", "* up * 1.01\n"))
    variants.append(src.replace(PLANTED, 'triton.Config({"BLOCK": 48}, num_warps=4)'))
    assert all(v != src for v in variants)
    dst.write_text("".join(json.dumps({"response": f"```python\n{v}```", "format": "full"}) + "\n" for v in variants))
    return dst


def _judged(db_file: Path, run_id: str) -> dict[str, str]:
    with RunDB(db_file) as db:
        return {c.source_hash or "": c.status for c in db.candidates(run_id) if c.proposer != "baseline"}


def test_two_stand_in_devices_share_the_work_and_each_result_names_its_one_device(tmp_path: Path) -> None:
    task = planted_silu(tmp_path / "silu")
    with Evaluator(task, backend="interpreter", devices=2) as ev:
        results = [f.result() for f in [ev.submit(task / "kernel.py") for _ in range(4)]]
    devices = {r.env["device"] for r in results}
    assert all(r.correct for r in results), [r.why for r in results]
    # both devices took work, and every result's baseline and candidate timings came from the one that checked it
    assert {d.rpartition("/")[2] for d in devices} == {"interpreter0", "interpreter1"}


# CI installs Ray and sets SMITHBOT_REQUIRE_RAY, so there a missing Ray fails these tests instead of skipping them
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None and not os.environ.get("SMITHBOT_REQUIRE_RAY"),
                               reason="Ray is not installed (pip install 'smithbot[ray]')")


@pytest.fixture(scope="module")
def two_nodes():
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})  # the driver's node runs no worker
    nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    yield cluster, nodes
    cluster.shutdown()


@needs_ray
def test_a_search_on_ray_loses_nothing_when_a_node_dies_and_judges_as_the_local_pool(two_nodes, tmp_path: Path) -> None:
    cluster, nodes = two_nodes
    task = planted_silu(tmp_path / "silu")
    replay = _replay(task, tmp_path / "replay.jsonl")
    db_file = tmp_path / "runs.db"
    local = api.evolve(str(task), proposer="replay", replay=str(replay), backend="interpreter", seed=5, islands=1,
                       db=db_file)
    killed: list[int] = []

    def kill_a_node(status) -> None:  # once the baseline and two candidates are in, one node goes, mid-evaluation
        if not killed and status.evaluated >= 3 and status.inflight:
            killed.append(status.inflight)
            cluster.remove_node(nodes[0])

    remote = api.evolve(str(task), proposer="replay", replay=str(replay), backend="interpreter", seed=5, islands=1,
                        db=db_file, cluster=f"ray://{cluster.address}", on_update=kill_a_node)
    assert killed, "the search ended before a node could be killed"
    assert remote.message.startswith("the replay proposer is exhausted"), remote.message
    judged, on_ray = _judged(db_file, local.run_id), _judged(db_file, remote.run_id)
    assert sorted(judged.values()).count("incorrect") == 1 and len(judged) == 5, judged
    assert on_ray == judged  # every candidate evaluated to the end, each judged as the local pool judged it
    assert len(remote.lost) == 1 and len(remote.busy) == 2, (remote.lost, remote.busy)
    with RunDB(db_file) as db:
        assert all(c.status != "pending" for c in db.candidates(remote.run_id))
        assert db.run(remote.run_id).config["cluster"] == f"ray://{cluster.address}"


def test_the_config_names_the_cluster_and_a_bad_one_is_an_error_at_its_key(tmp_path: Path) -> None:
    from smithbot.config import ConfigError, load_evolve_config

    (tmp_path / "ray.yaml").write_text("evaluator: {cluster: 'ray://head.example:6380'}\n")
    assert load_evolve_config(tmp_path / "ray.yaml").cluster == "ray://head.example:6380"
    assert load_evolve_config(None).cluster is None
    (tmp_path / "bad.yaml").write_text("evaluator: {cluster: 'ray://head:port'}\n")
    with pytest.raises(ConfigError, match="evaluator.cluster: --cluster ray://head:port: the port must be a number"):
        load_evolve_config(tmp_path / "bad.yaml")
    (tmp_path / "typo.yaml").write_text("evaluator: {clusters: ray}\n")
    with pytest.raises(ConfigError, match="clusters"):
        load_evolve_config(tmp_path / "typo.yaml")


def _cli(*args: str, env: dict[str, str] | None = None, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}import sys; sys.argv = ['smithbot', *sys.argv[1:]]; from smithbot.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("spec, prelude, why", [
    pytest.param("ray://unreachable.invalid", "", "cannot reach the Ray cluster at unreachable.invalid:6379",
                 marks=needs_ray),
    ("ray", "import sys; sys.modules['ray'] = None; ", "--cluster ray needs Ray, which is not installed"),
    ("slurm", "", "unknown cluster 'slurm'"),
])
def test_a_cluster_that_cannot_be_used_gets_one_line_and_exit_2(spec: str, prelude: str, why: str,
                                                                tmp_path: Path) -> None:
    r = _cli("evolve", "rmsnorm", "--backend", "interpreter", "--iterations", "1", "--cluster", spec,
             "--db", str(tmp_path / "runs.db"), prelude=prelude)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and why in lines[0], r.stderr
