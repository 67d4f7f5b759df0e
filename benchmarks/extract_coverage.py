"""Extraction coverage per repository: launched kernels -> extracted -> self-check passed under the interpreter.

    python benchmarks/extract_coverage.py demo sglang=/path/to/sglang lmdeploy=/path/to/lmdeploy engram=/path/to/DLBlas

Prints, per target, the counts and the most common reasons a kernel was not extracted or did not pass.
"""

from __future__ import annotations

import collections
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smithbot import api  # noqa: E402


def main() -> None:
    for arg in sys.argv[1:]:
        name, _, path = arg.partition("=")
        out = Path(tempfile.mkdtemp(prefix=f"coverage-{name}-"))
        t0 = time.perf_counter()
        rows = api.extract(name, None, out=out, source=path or None, all_kernels=True, check=True)
        n, ext, ok = len(rows), sum(r.extracted for r in rows), sum(r.checked for r in rows)
        print(f"{name}: {n} launched kernels, {ext} extracted ({ext / max(n, 1):.0%}), {ok} passed the self-check "
              f"({ok / max(n, 1):.0%}) in {time.perf_counter() - t0:.0f} s")
        reasons = collections.Counter(re.sub(r"^[^:]*: ", "", r.why).split(";")[0][:100]
                                      for r in rows if not r.checked)
        for why, count in reasons.most_common(8):
            print(f"  {count:4d}  {why}")


if __name__ == "__main__":
    main()
