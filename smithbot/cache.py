"""Content-keyed JSON caches (scan's per-file facts, the call graph's facts and results): best effort both ways, since
a missing or unwritable cache only costs recomputing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def load(path: Path | None) -> Any:
    """The cached value, or None when there is none or it cannot be read."""
    if path is None:
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def store(path: Path | None, value: Any) -> None:
    """Write ``value`` at ``path`` atomically (a reader never sees half a file); a failure is ignored."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value))
        tmp.replace(path)
    except OSError:
        pass
