"""Scan speed on real checkouts: cold (empty cache) and warm (everything cached), in process, on this machine's cores.

    python benchmarks/scan_speed.py sglang=/path/to/sglang lmdeploy=/path/to/lmdeploy engram=/path/to/DLBlas

Checkouts are fetched by the user and never committed. Also prints the kernel counts against a grep for triton.jit.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smithbot import api  # noqa: E402


def grep_count(root: Path, include: tuple[str, ...]) -> int:
    out = subprocess.run(["grep", "-rhoE", r"triton\.jit\b", "--include=*.py", str(root)], capture_output=True,
                         text=True).stdout
    return len(out.splitlines())


def main() -> None:
    for arg in sys.argv[1:]:
        name, _, path = arg.partition("=")
        home = tempfile.mkdtemp(prefix="scan-speed-")
        os.environ["SMITHBOT_HOME"] = home
        t0 = time.perf_counter()
        cold = api.scan(name, source=path)
        cold_s = time.perf_counter() - t0
        warm = []
        for _ in range(5):
            t0 = time.perf_counter()
            r = api.scan(name, source=path)
            warm.append(time.perf_counter() - t0)
        launched = sum(s.role == "launched" for s in r.sites)
        print(f"{name}: {r.files} files in scope, {cold.parsed} parsed cold; {len(r.sites)} kernel definitions "
              f"({launched} launched), grep 'triton.jit' in the whole checkout: {grep_count(Path(path), ())}; "
              f"{len(r.errors)} unparsable; cold {cold_s:.2f} s, warm median {statistics.median(warm):.2f} s "
              f"(min {min(warm):.2f}) on {os.cpu_count()} cores; commit {r.checkout.commit[:12]}")


if __name__ == "__main__":
    main()
