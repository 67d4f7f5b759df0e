"""Content-keyed caches (scan's per-file facts, the call graph's facts and results): best effort both ways, since a
missing or unwritable cache only costs recomputing.

A value is kept as JSON would keep it (lists, string keys), in Python's ``marshal`` format, which reads several
times faster than JSON: a warm scan of sglang reads some 800 of them. A file written by another Python version, or
not in that format, reads as no cache."""

from __future__ import annotations

import json
import marshal
import os
import pickle
from pathlib import Path
from typing import Any


def load(path: Path | None) -> Any:
    """The cached value, or None when there is none or it cannot be read."""
    if path is None:
        return None
    try:
        return marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None


def store(path: Path | None, value: Any, as_json: bool = True) -> None:
    """Write ``value`` at ``path`` atomically (a reader never sees half a file); a failure is ignored. ``as_json``:
    kept as JSON would keep it (tuples as lists, keys as strings); else as it is (a parsed YAML's integer keys)."""
    if path is None:
        return
    try:
        _write(path, marshal.dumps(json.loads(json.dumps(value)) if as_json else value))
    except (ValueError, TypeError):
        pass


def load_keyed(path: Path, key: str) -> Any:
    """A value ``store_keyed`` kept at ``path`` under ``key`` (a hex digest), or None when the file holds another
    key, or none, or cannot be read. For smithbot's own objects (dataclasses), which ``marshal`` cannot hold: the
    file is pickled, by this code (the key says which)."""
    try:
        data = path.read_bytes()
        return pickle.loads(data[len(key):]) if data[:len(key)] == key.encode() else None
    except Exception:  # noqa: BLE001 - a cache that fails to read in any way is no cache
        return None


def store_keyed(path: Path, key: str, value: Any) -> None:
    """Keep ``value`` at ``path`` under ``key``, replacing what was there (one value per path); best effort."""
    _write(path, key.encode() + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def _write(path: Path, data: bytes) -> None:
    """``data`` at ``path`` atomically (a reader never sees half a file); a failure is ignored."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        pass
