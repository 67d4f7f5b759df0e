"""The shape of the code, read from its imports with ``ast``: no import circles in ``smithbot/`` and ``evaluator/``
(function-local imports count: they run too), no import from a lower layer of smithbot to a higher one, and an
evaluator that imports nothing of smithbot and no third-party package but torch, triton, numpy and yaml. An import
inside a function is only for an optional heavy dependency, loaded where it is needed: torch and triton (and the
evaluator's modules that import them, which the parent process does not load), the ``openai`` client and PyGithub.

The layers, lowest first: the shared values and the program model (``types``, ``program``, with ``config``, ``repo``,
``cache``, ``llm``, ``errors`` and the package's version), then ``scan``, ``inputs``, ``extract``, ``evolve`` (with ``measure``
and ``profile``, which time tasks), ``verify``, ``propose`` (with ``report`` and ``dataset``), the job (``api``,
``job``) and the command line. Imports under ``if TYPE_CHECKING:`` do not run and are left out."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = [
    ["smithbot", "smithbot.errors", "smithbot.types", "smithbot.program", "smithbot.config", "smithbot.repo",
     "smithbot.cache", "smithbot.llm", "smithbot.cluster"],
    ["smithbot.scan"],
    ["smithbot.inputs"],
    ["smithbot.extract"],
    ["smithbot.evolve", "smithbot.measure", "smithbot.profile"],
    ["smithbot.verify"],
    ["smithbot.propose", "smithbot.report", "smithbot.dataset"],
    ["smithbot.api", "smithbot.job"],
    ["smithbot.cli", "smithbot.cli_common", "smithbot.cli_search", "smithbot.__main__"],
]
EVALUATOR_MAY_IMPORT = {"torch", "triton", "numpy", "yaml"}
# what a function may import where it runs, not at the top of its module
HEAVY = {"torch", "triton", "openai", "ray", "evaluator.correctness", "evaluator.runtime", "evaluator.timing",
         "evaluator.bounds", "evaluator.ahead", "smithbot.propose.github"}


def _modules() -> dict[str, Path]:
    out = {}
    for package in ("smithbot", "evaluator"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that runs, and whether it sits inside a function: module level or inside a function,
    not under ``if TYPE_CHECKING:``."""
    out: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, inside: bool) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.orelse:
                visit(child, inside)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append((node, inside))
        for child in ast.iter_child_nodes(node):
            visit(child, inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return out


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import names, relative imports resolved; ``from pkg import mod`` names ``pkg.mod``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        here = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(here[:len(here) - node.level + 1] + ([base] if base else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def _own(name: str) -> str | None:
    """The module of this code base an imported name is, or is in (None: another package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[module] = {own for node, _ in _imports(tree) for t in _targets(module, node)
                         for own in [_own(t)] if own and own != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of the import graph with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for v in sorted(graph):
            if v not in index:
                connect(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _layer(module: str) -> int | None:
    best = None
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best[1])):
                best = (i, name)
    return best[0] if best else None


def test_the_checks_read_the_code_base() -> None:
    graph = _graph()
    assert len(graph) > 100 and "smithbot.scan.parse" in graph["smithbot.scan.index"]
    assert "smithbot.program.syntax" in graph["smithbot.program.facts"]
    # a function-local import counts (the job's proposers are imported where they are chosen)
    assert "smithbot.evolve.proposers" in graph["smithbot.api"]


def test_no_import_circles() -> None:
    assert _cycles(_graph()) == []


def test_a_circle_is_found() -> None:
    """The check itself: a circle of three and one of two, beside a chain."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["d", "e"]]


def test_every_smithbot_module_has_a_layer() -> None:
    assert [m for m in MODULES if m.startswith("smithbot") and _layer(m) is None] == []


def test_no_import_runs_from_a_lower_layer_to_a_higher_one() -> None:
    wrong = [f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})" for m, targets in _graph().items()
             if m.startswith("smithbot") for t in sorted(targets)
             if t.startswith("smithbot") and (_layer(t) or 0) > (_layer(m) or 0)]
    assert wrong == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("evaluator")))
def test_the_evaluator_imports_nothing_of_smithbot_and_no_other_package(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    stdlib = sys.stdlib_module_names
    outside = sorted({t.split(".")[0] for node, _ in _imports(tree) for t in _targets(module, node)
                      if t and t.split(".")[0] not in stdlib | EVALUATOR_MAY_IMPORT | {"evaluator", "__future__"}})
    assert outside == []


# exceptions that never reach the user: signals between two parts of the code, each caught where it is raised for
INTERNAL = {
    "smithbot.extract.constants.NotConstant": "an expression the constant folder cannot fold; the closure keeps it",
    "smithbot.evolve.proposers.Exhausted": "a proposer with nothing left to propose; the search stops that island",
    "evaluator.timing.TimedOutputMismatch": "a timed run whose output differs; the evaluator records it as incorrect",
    "evaluator.forks.DeepLinkStandInError": "an Ascend kernel the interpreter cannot run; its task records the reason",
    "evaluator.pool.WorkerLost": "a cluster worker whose machine died; the pool drops it and gives its work to another",
    "evaluator.bounds.OutOfBounds": "a kernel's access past its tensors under the interpreter; the worker reports it "
                                    "as a crash with what was read past",
}


def _exception_classes() -> list[str]:
    """The classes deriving from an exception class by its name (``...Error``, ``...Exception``, a signal's)."""
    signals = {name.rpartition(".")[2] for name in INTERNAL}
    out = []
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith(("Error", "Exception"))
                                                      or ast.unparse(b) in signals for b in node.bases):
                out.append(f"{module}.{node.name}")
    return out


def test_every_error_a_user_sees_is_a_smithbot_error() -> None:
    """One base for the command line to catch: every exception class of the code base derives from SmithbotError,
    but for the internal signals listed, each with where it is caught."""
    from smithbot.errors import SmithbotError

    found = _exception_classes()
    assert len(found) > 15 and "smithbot.config.ConfigError" in found and "evaluator.task.TaskError" in found
    wrong = []
    for name in found:
        module, _, cls = name.rpartition(".")
        klass = getattr(importlib.import_module(module), cls)
        if issubclass(klass, SmithbotError) == (name in INTERNAL):
            wrong.append(name)
    assert wrong == []


def test_a_function_imports_only_heavy_optional_dependencies() -> None:
    """torch and its kin where they run, the endpoint client and PyGithub where they are asked for; everything else
    at the top of the module, where the import graph above sees it."""
    wrong = []
    for module, path in MODULES.items():
        for node in (n for n, inside in _imports(ast.parse(path.read_text(encoding="utf-8"))) if inside):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if not any(name == h or name.startswith(h + ".") for h in HEAVY):
                    wrong.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    assert wrong == []


# functions allowed over MAX_LINES, each with its reason (none today)
LONG_FUNCTIONS: dict[str, str] = {}
MAX_LINES = 80


def test_no_function_in_smithbot_is_longer_than_80_lines() -> None:
    """A function that mixes concerns grows: over 80 lines, it is split into steps of their own."""
    long = {f"{module}.{node.name}": node.end_lineno - node.lineno + 1  # type: ignore[operator]
            for module, path in MODULES.items() if module.startswith("smithbot")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_LINES}  # type: ignore[operator]
    assert sorted(long) == sorted(LONG_FUNCTIONS), long
    assert len([m for m in MODULES if m.startswith("smithbot")]) > 80  # the walk saw the package
