"""`smithbot demo`: the whole job offline on the bundled mini-engine, as the README's first command runs it."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path


def test_demo_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "SMITHBOT_HOME": str(tmp_path / "home"), "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("OPENAI_API_KEY", None)
    p = subprocess.run([sys.executable, "-m", "smithbot", "demo"], capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    assert "timing below comes from the Triton interpreter on the CPU and does not predict GPU speed" in p.stderr
    paths = dict(re.findall(r"^(patch|PR body|test|verification):\s+(\S+)$", p.stdout, flags=re.M))
    patch = Path(paths["patch"]).read_text()
    touched = re.findall(r"^diff --git a/(\S+) ", patch, flags=re.M)
    assert touched == ["minengine/kernels/norm.py", "tests/kernels/test_rms_norm.py"]  # no benchmark script: the table
    kernel_hunk = patch.split("diff --git a/tests/")[0]
    assert re.findall(r"^-(?!--).*$", kernel_hunk, flags=re.M) == [
        "-    _rms_norm_kernel[(x.shape[0],)](x, weight, out, x.stride(0), x.shape[1], eps, BLOCK=32, num_warps=4)"]
    body = Path(paths["PR body"]).read_text()
    assert re.search(r"^\| `irregular-decode-bs3` \| [\d.]+ \| [\d.]+ \| [\d.]+× \[[\d.]+, [\d.]+\] \| — \|$", body, re.M)
    assert "They do not predict GPU speed" in body
    ast.parse(Path(paths["test"]).read_text())
    v = json.loads(Path(paths["verification"]).read_text())
    assert v["winner"] and v["backend"] == "interpreter" and v["seeds"] == 6
    assert any(c.startswith("verify-irregular-decode-") for c in v["cases"])
