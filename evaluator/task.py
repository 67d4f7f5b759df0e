"""The task: a directory holding ``task.yaml``, ``kernel.py`` and ``harness.py`` (DESIGN.md, "The task").

``load_task(path)`` validates ``task.yaml`` into frozen dataclasses. Every problem a user can cause is raised as a
:class:`TaskError` whose message is one line naming the file and the key, e.g.::

    tasks/rmsnorm/task.yaml: cases[2].dims.hidden: must be a positive integer, got -4
"""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evaluator.errors import SmithbotError
from evaluator.tolerances import DTYPES

EVOLVE_START = "# EVOLVE-BLOCK-START"
EVOLVE_END = "# EVOLVE-BLOCK-END"
KINDS = ("triton", "fusion")
REGIMES = ("decode", "prefill")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
# CPython 3.11 builds Python AST objects with a per-interpreter recursion counter: two threads parsing at once (a
# proposer thread and the evaluator's guard) can raise "SystemError: AST constructor recursion depth mismatch"
# (python/cpython#106905). Every parse that may run beside another thread goes through ``parse``.
_PARSING = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """``ast.parse``, one thread at a time."""
    with _PARSING:
        return ast.parse(source, filename=filename, mode=mode)


def split_evolve(src: str) -> tuple[str, str, str] | None:
    """(head, block, tail) around the EVOLVE-BLOCK markers, or None unless there is exactly one of each."""
    if src.count(EVOLVE_START) != 1 or src.count(EVOLVE_END) != 1:
        return None
    head, rest = src.split(EVOLVE_START)
    block, tail = rest.split(EVOLVE_END)
    return head, block, tail


class TaskError(SmithbotError):
    """A task directory or its ``task.yaml`` is invalid. The message is one line a user can act on. Where the
    baseline failed on its own inputs, ``cause`` is the worker's status for the failure (``oom``, ``crash``...) and
    ``out_of_bounds`` what a kernel read past (``bounds.OutOfBounds.found``)."""

    def __init__(self, message: str, cause: str = "", out_of_bounds: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.cause, self.out_of_bounds = cause, out_of_bounds


@dataclass(frozen=True)
class Definition:
    """One extracted definition and where it came from (what re-insertion needs)."""

    name: str
    path: str
    qualname: str


@dataclass(frozen=True)
class Provenance:
    repo: str
    commit: str | None
    definitions: tuple[Definition, ...]
    # a fusion task made from torch glue: the lines it replaces, {"path", "module", "function", "lines": [first,
    # last], "inputs": {parameter: what it stands for in the engine}, "outputs": [what the entry returns, in order: a
    # stored attribute's dotted name, a local's name, or "return"], "inplace": [parameters it writes], "traced":
    # {parameter: its dtype and shape in serving, traced through the engine's code}, "folded": [[an if-test's
    # source, the branch serving takes], ...]: the tests the entry takes as serving decides them}
    glue: dict[str, Any] | None = None


@dataclass(frozen=True)
class Case:
    """One shape case. ``dims`` are the sizes ``make_inputs`` builds tensors from; ``params`` are other scalars."""

    name: str
    regime: str
    dtype: str
    dims: dict[str, int]
    params: dict[str, Any] = field(default_factory=dict)
    interpreter: bool = True  # small enough to run under TRITON_INTERPRET=1 on a CPU

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "regime": self.regime, "dtype": self.dtype, "dims": dict(self.dims),
                "params": dict(self.params)}


@dataclass(frozen=True)
class Task:
    root: Path
    id: str
    kind: str
    entry: str
    description: str
    provenance: Provenance
    cases: tuple[Case, ...]
    seeds: int
    deterministic: bool
    tunables: dict[str, Any]
    # why the kernel matters, from scan: the presets whose default serving path runs it, that path, and the share of
    # a profiled step, when measured (free text the PR's Motivation quotes); for torch glue, its kernel launches a
    # step and the TODO comments near it that ask for a kernel
    hotness: dict[str, Any] = field(default_factory=dict)
    # preset cases extraction left out, each with why (inputs too large for the GPU beside the other workers)
    skipped: tuple[dict[str, str], ...] = ()

    @property
    def kernel_path(self) -> Path:
        return self.root / "kernel.py"

    @property
    def harness_path(self) -> Path:
        return self.root / "harness.py"

    def cases_for(self, backend: str) -> tuple[Case, ...]:
        return self.cases if backend == "cuda" else tuple(c for c in self.cases if c.interpreter)


_TOP_KEYS = {
    "id": True, "kind": True, "entry": True, "description": False, "provenance": True, "cases": True,
    "seeds": False, "deterministic": False, "tunables": False, "hotness": False, "skipped": False,
}
_CASE_KEYS = {"name": True, "regime": True, "dtype": True, "dims": True, "params": False, "interpreter": False}
_PROV_KEYS = {"repo": True, "commit": False, "definitions": False, "glue": False}
_GLUE_KEYS = {"path": True, "module": False, "function": True, "lines": True, "inputs": False, "outputs": False,
              "inplace": False, "traced": False, "folded": False, "pinned": False}
_DEF_KEYS = {"name": True, "path": True, "qualname": True}


class YamlChecker:
    """Validation helpers whose errors name the file and the key (shared with smithbot's config loader)."""

    def __init__(self, file: Path) -> None:
        self.file = file

    error: type[Exception] = TaskError

    def fail(self, key: str, msg: str) -> Exception:
        return self.error(f"{self.file}: {key}: {msg}")

    def mapping(self, value: Any, key: str, spec: dict[str, bool]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a mapping, got {type(value).__name__}")
        prefix = f"{key}." if key else ""
        for k in value:
            if k not in spec:
                raise self.fail(f"{prefix}{k}", f"unknown key (allowed: {', '.join(spec)})")
        for k, required in spec.items():
            if required and k not in value:
                raise self.fail(f"{prefix}{k}", "missing required key")
        return value

    def string(self, value: Any, key: str, pattern: re.Pattern[str] | None = None) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"must be a non-empty string, got {value!r}")
        if pattern is not None and not pattern.match(value):
            raise self.fail(key, f"{value!r} is not a valid name (letters, digits, _ . + -)")
        return value

    def choice(self, value: Any, key: str, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(key, f"must be one of {', '.join(choices)}, got {value!r}")
        return str(value)

    def items(self, value: Any, key: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(key, f"must be a list, got {type(value).__name__}")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def positive_int(self, value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.fail(key, f"must be a positive integer, got {value!r}")
        return value


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A safe loader that refuses a key given twice in one mapping, which plain YAML loading would let the later
    one win silently (two specs for one launcher: one of them is lost). libyaml's parser when PyYAML has it: the
    pure-Python one takes a quarter of a second over sglang's target file, half a warm scan."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: dict[str, int] = {}
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                if key.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key.value!r} (first on line {seen[key.value] + 1})",
                        key.start_mark)
                seen[key.value] = key.start_mark.line
        return super().construct_mapping(node, deep)


def read_yaml(file: Path, error: type[Exception] = TaskError) -> Any:
    """Parse a YAML file; a syntax error, or a key given twice in one mapping, becomes one line naming the file and
    the line."""
    try:
        return yaml.load(file.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "?"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"{file}: {where}: malformed YAML: {problem}") from None
    except UnicodeDecodeError:
        raise error(f"{file}: not UTF-8 text") from None


def load_task(path: str | Path) -> Task:
    """Load and validate a task directory. Raises :class:`TaskError` with one line on any problem."""
    root = Path(path)
    if not root.is_dir():
        raise TaskError(f"{root}: task directory does not exist")
    file = root / "task.yaml"
    for needed in (file, root / "kernel.py", root / "harness.py"):
        if not needed.is_file():
            raise TaskError(f"{needed}: missing (a task directory holds task.yaml, kernel.py and harness.py)")
    data = read_yaml(file)
    c = YamlChecker(file)
    data = c.mapping(data, "", _TOP_KEYS)
    task_id = c.string(data["id"], "id", _NAME)
    kind = c.choice(data["kind"], "kind", KINDS)
    entry = c.string(data["entry"], "entry")
    if not entry.isidentifier():
        raise c.fail("entry", f"{entry!r} is not a Python identifier")

    provenance = _provenance(c, data["provenance"])
    cases = _cases(c, data["cases"])

    seeds = c.positive_int(data.get("seeds", 3), "seeds")
    if seeds < 3:
        raise c.fail("seeds", f"at least 3 seeds per case are required, got {seeds}")
    tunables = data.get("tunables") or {}
    if not isinstance(tunables, dict):
        raise c.fail("tunables", "must be a mapping")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise c.fail("description", "must be a string")

    kernel_src = (root / "kernel.py").read_text(encoding="utf-8")
    if kernel_src.count(EVOLVE_START) != 1 or kernel_src.count(EVOLVE_END) != 1:
        raise TaskError(f"{root / 'kernel.py'}: must hold exactly one {EVOLVE_START} and one {EVOLVE_END} marker")
    return Task(root=root.resolve(), id=task_id, kind=kind, entry=entry, description=description.strip(),
                provenance=provenance, cases=cases, seeds=seeds,
                deterministic=c.boolean(data.get("deterministic", True), "deterministic"), tunables=dict(tunables),
                hotness=dict(c.mapping(data.get("hotness") or {}, "hotness",
                                       {"presets": False, "default_path": False, "measured": False,
                                        "share": False, "launches_per_step": False, "todos": False,
                                        "reach": False, "undecided": False, "per_step": False})),
                skipped=tuple(dict(c.mapping(s, f"skipped[{i}]", {"name": True, "why": True}))
                              for i, s in enumerate(c.items(data.get("skipped") or [], "skipped"))))


def _provenance(c: YamlChecker, raw_prov: Any) -> Provenance:
    """task.yaml's ``provenance``: where the task came from (the target's definitions, a glue's line span)."""
    prov = c.mapping(raw_prov, "provenance", _PROV_KEYS)
    defs_raw = prov.get("definitions") or []
    if not isinstance(defs_raw, list):
        raise c.fail("provenance.definitions", "must be a list")
    defs = []
    for i, d in enumerate(defs_raw):
        key = f"provenance.definitions[{i}]"
        d = c.mapping(d, key, _DEF_KEYS)
        defs.append(Definition(c.string(d["name"], f"{key}.name"), c.string(d["path"], f"{key}.path"),
                               c.string(d["qualname"], f"{key}.qualname")))
    commit = prov.get("commit")
    if commit is not None:
        commit = c.string(commit, "provenance.commit")
    glue = None
    if prov.get("glue") is not None:
        glue = dict(c.mapping(prov["glue"], "provenance.glue", _GLUE_KEYS))
        lines = glue["lines"]
        if not (isinstance(lines, list) and len(lines) == 2 and all(isinstance(n, int) for n in lines)
                and 0 < lines[0] <= lines[1]):
            raise c.fail("provenance.glue.lines", "must be [first, last], line numbers")
        c.string(glue["path"], "provenance.glue.path")
        c.string(glue["function"], "provenance.glue.function")
    return Provenance(c.string(prov["repo"], "provenance.repo"), commit, tuple(defs), glue)


def _cases(c: YamlChecker, cases_raw: Any) -> tuple[Case, ...]:
    """task.yaml's ``cases``: named, distinct, each with a known dtype and its dims; one at least small enough for the
    interpreter."""
    if not isinstance(cases_raw, list) or not cases_raw:
        raise c.fail("cases", "must be a non-empty list of shape cases")
    cases: list[Case] = []
    seen: set[str] = set()
    for i, raw in enumerate(cases_raw):
        key = f"cases[{i}]"
        raw = c.mapping(raw, key, _CASE_KEYS)
        name = c.string(raw["name"], f"{key}.name", _NAME)
        if name in seen:
            raise c.fail(f"{key}.name", f"duplicate case name {name!r}")
        seen.add(name)
        dtype = raw["dtype"]
        if dtype not in DTYPES:
            raise c.fail(f"{key}.dtype", f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
        dims_raw = raw["dims"]
        if not isinstance(dims_raw, dict) or not dims_raw:
            raise c.fail(f"{key}.dims", "must be a non-empty mapping of dimension name to size")
        dims = {str(k): c.positive_int(v, f"{key}.dims.{k}") for k, v in dims_raw.items()}
        params = raw.get("params") or {}
        if not isinstance(params, dict):
            raise c.fail(f"{key}.params", "must be a mapping")
        for k, v in params.items():
            if not isinstance(v, (int, float, str, bool)):
                raise c.fail(f"{key}.params.{k}", f"must be a scalar, got {type(v).__name__}")
        cases.append(Case(name=name, regime=c.choice(raw["regime"], f"{key}.regime", REGIMES), dtype=dtype,
                          dims=dims, params=dict(params),
                          interpreter=c.boolean(raw.get("interpreter", True), f"{key}.interpreter")))
    if not any(cs.interpreter for cs in cases):
        raise c.fail("cases", "at least one case must be small enough for the interpreter (interpreter: true)")
    return tuple(cases)


def check_candidate_files(paths: list[str] | list[Path]) -> None:
    """Refuse bad input before any work: every candidate must exist and parse as Python. Raises TaskError."""
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise TaskError(f"{p}: candidate file does not exist")
        try:
            parse(path.read_bytes(), filename=str(p))
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            raise TaskError(f"{p}: not a Python file (line {line}: {getattr(exc, 'msg', exc)})") from None
