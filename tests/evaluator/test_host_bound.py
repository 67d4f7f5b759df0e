"""Host-bound launchers are recognised, not searched (issue 21): the verdict, where a capture failed, and on a GPU the
probe itself on a launcher that syncs with the host before it launches."""

import shutil
import statistics
import time
from pathlib import Path

import pytest
import triton
import triton.language as tl
import yaml

from evaluator.timing import HOST_BOUND, _where, host_bound

TASKS = Path(__file__).resolve().parents[2] / "smithbot" / "tasks"


def probe(case: str, share: float | None) -> dict:
    if share is None:
        return {"case": case, "captured": True}
    return {"case": case, "captured": False, "capture_error": "kernel.py:7: n = x.max().item() (RuntimeError: x)",
            "call_us": 200.0, "gpu_us": 200.0 * share, "share": share}


def test_the_verdict_needs_every_probed_case_uncapturable_and_the_gpu_mostly_idle() -> None:
    verdict = host_bound([probe("decode-bs1", 0.03), probe("prefill-4k", 0.1)])
    assert verdict.startswith("host-bound: kernel 10% of the call (20.0 of 200.0 us on prefill-4k)")
    assert "kernel.py:7: n = x.max().item()" in verdict
    assert host_bound([probe("decode-bs1", 0.03), probe("prefill-4k", None)]) == ""  # prefill is captured
    assert host_bound([probe("decode-bs1", 0.03), probe("prefill-4k", HOST_BOUND)]) == ""  # prefill keeps the GPU busy
    assert host_bound([]) == ""  # the interpreter probes nothing


def test_where_a_capture_failed_names_the_tasks_own_line(tmp_path: Path) -> None:
    (tmp_path / "kernel.py").write_text("def launch(x):\n    n = int(x)\n    return n\n")
    scope: dict = {}
    exec(compile((tmp_path / "kernel.py").read_text(), str(tmp_path / "kernel.py"), "exec"), scope)
    with pytest.raises(ValueError) as info:
        scope["launch"]("not a number")
    assert _where(info.value) == "kernel.py:2: n = int(x) (ValueError: invalid literal for int() with base 10: " \
                                 "'not a number')"


SYNCING = '''    n_cols = two_i // 2
    if x.abs().max().item() > 1e30:  # a host sync before the launch, as a launcher sizing its grid from data does
        raise ValueError("overflow")
    time.sleep(0.002)  # host work of a heavy launcher
'''


@pytest.mark.gpu
def test_a_launcher_that_syncs_with_the_host_is_host_bound_and_a_plain_one_is_not(tmp_path: Path) -> None:
    from evaluator import Evaluator

    task = tmp_path / "syncing"
    shutil.copytree(TASKS / "silu_and_mul", task, ignore=shutil.ignore_patterns("candidates", "__pycache__"))
    kernel = task / "kernel.py"
    src = kernel.read_text()
    kernel.write_text("import time\n" + src.replace("    n_cols = two_i // 2\n", SYNCING))
    spec = yaml.safe_load((task / "task.yaml").read_text())
    spec["cases"] = [c for c in spec["cases"] if c["regime"] == "decode"]
    (task / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with Evaluator(task, backend="cuda", workers_per_gpu=1) as ev:
        ev.prepare()
        assert ev.host_bound.startswith("host-bound: kernel "), ev.host
        assert "kernel.py" in ev.host_bound and ".item()" in ev.host_bound
        assert [f.split(":")[0] for f in ev.capture_failures] == ["llama3-8b-decode-bs1"]
        assert all(0 < p["gpu_us"] < 0.5 * p["call_us"] for p in ev.host), ev.host  # 2 ms of host work a call
    # the search stops at the verdict, having evaluated nothing, and says where capture failed
    from smithbot import api

    status = api.evolve(task, "tune", iterations=20, backend="cuda", db=tmp_path / "runs.db")
    assert status.host_bound and status.message.startswith("host-bound") and status.evaluated == 0
    assert status.capture_failures and ".item()" in status.capture_failures[0]
    with Evaluator(TASKS / "silu_and_mul", backend="cuda", workers_per_gpu=1) as ev:
        ev.prepare()
        assert ev.host_bound == "" and ev.capture_failures == []
        assert {p["case"] for p in ev.host} == {"llama3-8b-decode-bs1", "qwen3-8b-prefill-2k"}


@triton.jit
def _copy(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@pytest.mark.gpu
def test_the_probe_times_the_kernel_not_the_hosts_launch() -> None:
    """Behind a slow host the GPU idles between calls; the events around each launch must still bracket only the
    kernel: their median agrees with the kernel's time in a CUDA graph, where no host launch comes between."""
    import torch

    from evaluator.runtime import LaunchCounter

    LaunchCounter.install()
    x = torch.randn(1 << 22, device="cuda")
    y = torch.empty_like(x)

    def launch() -> None:
        _copy[(x.numel() // 1024,)](x, y, BLOCK=1024)

    launch()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()  # the kernel's time with no host in the way: 50 launches replayed as a graph
    with torch.cuda.graph(graph):
        for _ in range(50):
            launch()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    queued_us = start.elapsed_time(end) * 1e3 / 50
    LaunchCounter.timed = []
    try:
        for _ in range(20):
            time.sleep(0.002)  # host work: the GPU has drained its queue before each launch
            launch()
        torch.cuda.synchronize()
        each = [a.elapsed_time(b) * 1e3 for _, a, b in LaunchCounter.timed]
    finally:
        LaunchCounter.timed = None
    assert len(each) == 20
    # (an event pair and a kernel's start cost the GPU about 2 us more than a kernel after a kernel in a graph; a host
    # launch between them, what the spin keeps out, costs 10 us or more)
    assert 0.7 * queued_us < statistics.median(each) < queued_us + 3.0, (each, queued_us)


@pytest.mark.gpu
def test_only_as_many_workers_as_the_gpus_memory_holds(tmp_path: Path) -> None:
    """A case of model size times eight workers would not fit on one GPU: the first preparation measures the
    baseline's peak and keeps the workers that fit, and an evaluation then runs without running out of memory."""
    from evaluator import Evaluator
    from evaluator.pool import MEMORY_MARGIN_BYTES, WORKER_OVERHEAD_BYTES
    from evaluator.timing import COPY_CAP_BYTES

    task = tmp_path / "large"
    shutil.copytree(TASKS / "silu_and_mul", task, ignore=shutil.ignore_patterns("candidates", "__pycache__"))
    spec = yaml.safe_load((task / "task.yaml").read_text())
    spec["cases"] = [{"name": "tiny-decode", "regime": "decode", "dtype": "bf16",  # (a task needs one the
                      "dims": {"tokens": 3, "intermediate": 128}, "interpreter": True},  # interpreter runs)
                     {"name": "large-prefill", "regime": "prefill", "dtype": "bf16",  # 2 GB in
                      "dims": {"tokens": 35_000, "intermediate": 14336}, "interpreter": False}]
    (task / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with Evaluator(task, backend="cuda", workers_per_gpu=8) as ev:
        ev.prepare(every_worker=True)
        mem = ev.memory
        assert mem["peak"] > 2 << 30
        assert 1 <= ev.capacity < 8
        room = mem["free"] - COPY_CAP_BYTES - MEMORY_MARGIN_BYTES
        assert ev.capacity == 1 or ev.capacity * (2 * mem["peak"] + WORKER_OVERHEAD_BYTES) <= room
        r = ev.submit(task / "kernel.py").result()
        assert r.status == "correct", (r.status, r.detail)
