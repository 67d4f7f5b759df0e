"""Walk a checkout, keep the files that can hold Triton code, and analyse them in parallel behind a content cache.

- byte prefilter: a file is parsed only if it mentions triton and a decorator, holds a ``](`` launch, or is a
  package ``__init__.py`` (re-exports of kernels);
- cache: one JSON file per (parser version, custom decorators, file content) hash, so a warm re-scan parses nothing;
- a process pool for the misses, with a progress callback;
- a file that fails to parse is reported and skipped; the scan goes on.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from smithbot import cache
from smithbot.scan.parse import analyze, module_name

PARSER_VERSION = "9"
POOL_MIN_FILES = 24  # below this, starting processes costs more than it saves


@dataclass(frozen=True)
class Indexed:
    facts: list[dict[str, Any]]  # per parsed file, from parse.analyze
    errors: list[tuple[str, str]]  # (path, why) for files that failed to parse
    texts: dict[str, bytes]  # every included file's bytes (for cheap reference searches)
    parsed: int  # files analysed now (cache misses)
    cached: int  # files answered from the cache


@functools.lru_cache(maxsize=64)
def _compiled(patterns: tuple[str, ...]) -> re.Pattern[str]:
    # ** also matches no directory at all: a leading **/ matches at the top, and a/**/b matches a/b
    expanded = list(patterns) + [p[3:] for p in patterns if p.startswith("**/")]
    expanded += [p.replace("/**/", "/", 1) for p in expanded if "/**/" in p]
    alternatives = [fnmatch.translate(p) for p in expanded]
    return re.compile("|".join(alternatives) or "(?!)")


def matches(rel: str, patterns: tuple[str, ...]) -> bool:
    """Glob match where * and ** both cross '/', and ``**/`` also matches no directory (``a/**/*.py`` takes
    ``a/x.py``)."""
    return _compiled(tuple(patterns)).match(rel) is not None


def _walk_roots(root: Path, include: tuple[str, ...]) -> list[Path]:
    """The fixed directory prefixes of the include globs, so the walk skips trees no pattern can match."""
    roots = set()
    for pattern in include:
        fixed = []
        for part in pattern.split("/")[:-1]:
            if any(ch in part for ch in "*?["):
                break
            fixed.append(part)
        roots.add("/".join(fixed))
    if "" in roots:
        return [root]
    return [root / r for r in sorted(roots) if not any(r.startswith(o + "/") for o in roots)]


def list_files(root: Path, include: tuple[str, ...], exclude: tuple[str, ...]) -> list[str]:
    out = []
    for top in _walk_roots(root, include):
        out.extend(_walk(root, top, include, exclude))
    return sorted(out)


def _walk(root: Path, top: Path, include: tuple[str, ...], exclude: tuple[str, ...]) -> list[str]:
    out = []
    # a file's path is its walk root's relative path and the rest of its directory (not os.path.relpath per file:
    # a tenth of a warm scan)
    start, cut = top.relative_to(root).as_posix(), len(str(top))
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        here = "/".join(p for p in (start, dirpath[cut:].replace(os.sep, "/").strip("/")) if p and p != ".")
        here = here + "/" if here else ""
        for f in filenames:
            if f.endswith(".py"):
                rel = here + f
                if matches(rel, include) and not matches(rel, exclude):
                    out.append(rel)
    return out


def prefilter(data: bytes, custom_jit: tuple[str, ...]) -> bool:
    if b"](" in data:
        return True
    return b"triton" in data and (b"jit" in data or b"autotune" in data or any(c.encode() in data for c in custom_jit))


def _work(job: tuple[str, bytes, tuple[str, ...], str, dict[str, str]]) -> dict[str, Any]:
    return analyze(*job)


_IMPORT_TRITON = re.compile(rb"import (triton(?:\.\w+)*)(?: as (\w+))?[ \t]*(?:#.*)?$", re.M)


def triton_reexports(texts: dict[str, bytes], packages: set[str]) -> dict[str, str]:
    """Triton's modules as the target's own modules hand them on: ``vllm.triton_utils.tl`` -> ``triton.language``,
    where ``vllm/triton_utils/__init__.py`` says ``import triton.language as tl`` (behind ``if HAS_TRITON:`` as it
    may be), so that ``from vllm.triton_utils import tl, triton`` reads as Triton's own names everywhere. Read at each
    ``import triton`` that starts a line, not by a pattern over the whole file: every warm scan pays for this."""
    out: dict[str, str] = {}
    for rel, data in texts.items():
        at = data.find(b"import triton")
        mod = None
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            m = _IMPORT_TRITON.match(data, at) if not data[start:at].strip() else None
            if m is not None:
                mod = mod or module_name(rel, packages)
                name, alias = m.group(1).decode(), m.group(2)
                out[f"{mod}.{alias.decode() if alias else name.split('.')[0]}"] = name if alias else name.split(".")[0]
            at = data.find(b"import triton", at + 13)
    return out


def sources(root: Path, include: tuple[str, ...], exclude: tuple[str, ...]) -> dict[str, bytes]:
    """Every included Python file's bytes, by its path relative to ``root``."""
    return {rel: (root / rel).read_bytes() for rel in list_files(root, include, exclude)}


def index(root: Path, texts: dict[str, bytes], custom_jit: tuple[str, ...], cache_dir: Path,
          workers: int | None = None, progress: Callable[[int, int], None] | None = None) -> Indexed:
    """The facts of every file in ``texts`` (``sources``) that may hold a kernel or re-export one."""
    ancestors = {"/".join(rel.split("/")[:n]) for rel in texts for n in range(1, rel.count("/") + 1)}
    packages = {d for d in ancestors if (root / d / "__init__.py").is_file()}
    reexports = triton_reexports(texts, packages)
    salt = f"{PARSER_VERSION}|{','.join(custom_jit)}|{sorted(reexports.items())}|".encode()
    facts: list[dict[str, Any]] = []
    misses: list[tuple[str, str, str]] = []  # (path, cache key, module name)
    for rel, data in texts.items():
        if not (prefilter(data, custom_jit) or rel.endswith("__init__.py")):  # package inits carry re-exports
            continue
        modname = module_name(rel, packages)
        key = hashlib.sha256(salt + modname.encode() + b"|" + data).hexdigest()
        cached = cache.load(cache_dir / key[:2] / f"{key}.json")
        if cached is None:
            misses.append((rel, key, modname))
        else:
            cached["path"] = rel  # the same content may live at another path
            facts.append(cached)
    cached_n = len(facts)
    jobs = [(rel, texts[rel], custom_jit, modname, reexports) for rel, _, modname in misses]
    n_workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    if len(jobs) >= POOL_MIN_FILES and n_workers > 1:
        with ProcessPoolExecutor(max_workers=n_workers) as pool:
            results = pool.map(_work, jobs, chunksize=max(1, len(jobs) // (4 * n_workers)))
            done = _collect(results, misses, cache_dir, facts, len(jobs), progress)
    else:
        done = _collect(map(_work, jobs), misses, cache_dir, facts, len(jobs), progress)
    errors = [(f["path"], f["error"]) for f in facts if "error" in f]
    return Indexed(facts=[f for f in facts if "error" not in f], errors=errors, texts=texts, parsed=done,
                   cached=cached_n)


def _collect(results: Any, misses: list[tuple[str, str, str]], cache_dir: Path, facts: list[dict[str, Any]], total: int,
             progress: Callable[[int, int], None] | None) -> int:
    n = 0
    for (_, key, _), result in zip(misses, results):
        facts.append(result)
        cache.store(cache_dir / key[:2] / f"{key}.json", result)
        n += 1
        if progress is not None:
            progress(n, total)
    return n
