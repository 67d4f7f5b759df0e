"""The environment a measurement was made in, the scrubbed environment candidates run in, and per-device caches."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

SECRET_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD")


def scrubbed_environ(base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without any variable whose name mentions a token, key, secret or password."""
    env = dict(os.environ if base is None else base)
    return {k: v for k, v in env.items() if not any(m in k.upper() for m in SECRET_MARKERS)}


def cache_dir() -> Path:
    root = os.environ.get("SMITHBOT_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "smithbot")
    return Path(root)


def _nvidia_smi(fields: str) -> list[str] | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [x.strip() for x in out.strip().splitlines()[0].split(",")] if out.strip() else None


def fingerprint(backend: str) -> dict[str, Any]:
    import torch
    import triton

    env: dict[str, Any] = {"backend": backend, "torch": torch.__version__, "triton": triton.__version__,
                           "python": platform.python_version(), "host": platform.node()}
    # the device that checked and timed, named by the pool that started this worker: ``gpu<id>`` (the physical GPU),
    # ``interpreter<i>``; on a cluster, the node comes with it. A result's timings all come from this one device.
    env["device"] = f"{platform.node()}/{os.environ.get('SMITHBOT_DEVICE') or backend}"
    if backend == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, sm_count=props.multi_processor_count, cuda=torch.version.cuda,
                   l2_bytes=int(getattr(props, "L2_cache_size", 0)))
        smi = _nvidia_smi("driver_version,clocks.sm,clocks.max.sm,clocks.mem")
        if smi is not None and len(smi) == 4:
            env.update(driver=smi[0], sm_clock_mhz=smi[1], sm_clock_max_mhz=smi[2], mem_clock_mhz=smi[3])
    elif backend == "ahead":
        env.update(gpu=None, note="compiles for the GPU on the CPU, and runs nothing")
    else:
        env.update(gpu=None, note="Triton interpreter on the CPU: its timings measure the interpreter and do not predict GPU speed")
    return env


def copy_bandwidth_gbps(env: dict[str, Any]) -> float:
    """The device's measured copy bandwidth, measured once per device and driver and cached on disk."""
    from evaluator.timing import measure_copy_gbps

    return float(_measured_once(env, "copy_bandwidth.json", measure_copy_gbps))


def dense_tflops(env: dict[str, Any]) -> dict[int, float]:
    """The device's measured dense matmul rate by operand bits (``timing.measure_dense_tflops``), measured once per
    device and driver and cached on disk."""
    from evaluator.timing import measure_dense_tflops

    return {int(k): float(v) for k, v in _measured_once(env, "dense_tflops.json", measure_dense_tflops).items()}


def launch_us(env: dict[str, Any]) -> float:
    """What an empty kernel's launch costs in a CUDA graph on this device (``timing.measure_launch_us``), measured
    once per device and driver and cached on disk."""
    from evaluator.timing import measure_launch_us

    return float(_measured_once(env, "launch_us.json", measure_launch_us))


def _measured_once(env: dict[str, Any], file: str, measure: Any) -> Any:
    key = f"{env.get('gpu')}|{env.get('driver')}|{env.get('cuda')}|{env.get('torch')}"
    path = cache_dir() / file
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if key in cached:
        return cached[key]
    value = measure()
    cached[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cached, indent=1))
        tmp.replace(path)
    except OSError:
        pass  # a read-only home only costs a re-measurement next time
    return value
