"""The line length a target's own linters hold its code to, and the files smithbot writes into it (the generated test
and benchmark) fitted to it. A formatter wraps code but leaves comments and docstrings as they are, so a linter that
checks line length (vLLM's ruff, at its default 88) would fail a generated test whose prose ran past it."""

from __future__ import annotations

import ast
import configparser
import io
import textwrap
import tokenize
import tomllib
from pathlib import Path

# where no length is given, the one each tool defaults to
_DEFAULTS = {"ruff": 88, "black": 88, "flake8": 79}
# trailing comments that name the line they sit on: they stay where they are
_PINNED = ("# noqa", "# type:", "# pragma", "# fmt:", "# pyright:", "# pylint:")


def line_length(root: Path) -> int | None:
    """The line length the target's tools check, read from its ``pyproject.toml`` (ruff's, then black's; each tool's
    default where it is configured without one), else from flake8's ``max-line-length`` in ``setup.cfg``, ``tox.ini``
    or ``.flake8``. None where no tool says."""
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            tools = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            tools = {}
        for name in ("ruff", "black"):
            if isinstance(tools.get(name), dict):
                return int(tools[name].get("line-length", _DEFAULTS[name]))
    for name in ("setup.cfg", "tox.ini", ".flake8"):
        cfg = configparser.ConfigParser(interpolation=None)
        try:
            cfg.read(root / name, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        if cfg.has_section("flake8"):
            return int(cfg["flake8"].get("max-line-length", cfg["flake8"].get("max_line_length",
                                                                                str(_DEFAULTS["flake8"]))))
    return None


def fit_prose(source: str, width: int) -> str:
    """``source`` with its comments and docstrings wrapped to ``width``: a paragraph of a docstring, or a block of
    full-line comments, with a line too long is wrapped again as a whole; a trailing comment that makes its line too
    long moves above it. Code is the formatter's to wrap and is left alone; so is anything that would no longer
    parse."""
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError):
        return source
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    comments = {tok.start[0]: tok.start[1] for tok in tokens if tok.type == tokenize.COMMENT}
    lines = source.splitlines()

    def indent(line: str) -> str:
        return line[:len(line) - len(line.lstrip())]

    def prose(n: int) -> bool:  # a docstring's line of text, not a blank line or its quotes alone
        return n in docstrings and lines[n - 1].strip() not in ("", '"""', "'''")

    def alone(n: int) -> bool:  # a comment with nothing before it on its line
        return n in comments and not lines[n - 1][:comments[n]].strip()

    out: list[str] = []
    n = 1
    while n <= len(lines):
        line = lines[n - 1]
        if prose(n):
            run = [n]
            while prose(run[-1] + 1):
                run.append(run[-1] + 1)
        elif alone(n):
            run = [n]
            while alone(run[-1] + 1) and indent(lines[run[-1]]) == indent(line):
                run.append(run[-1] + 1)
        else:
            run = [n]
        block = [lines[k - 1] for k in run]
        n = run[-1] + 1
        if max(map(len, block)) <= width:
            out.extend(block)
        elif run[0] in docstrings:
            out.extend(_wrap(" ".join(b.strip() for b in block), indent(line), "", width) or block)
        elif alone(run[0]):
            out.extend(_wrap(" ".join(b.strip().lstrip("#").strip() for b in block), indent(line), "# ", width))
        elif run[0] in comments and not line[comments[run[0]]:].startswith(_PINNED):
            code, comment = line[:comments[run[0]]].rstrip(), line[comments[run[0]]:]
            out.extend(_wrap(comment.lstrip("#").strip(), indent(line), "# ", width) + [code])
        else:
            out.append(line)
    fitted = "\n".join(out) + ("\n" if source.endswith("\n") else "")
    try:
        ast.parse(fitted)
    except SyntaxError:
        return source
    return fitted


def _wrap(text: str, indent: str, mark: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, initial_indent=indent + mark, subsequent_indent=indent + mark,
                         break_long_words=False, break_on_hyphens=False) or [indent + mark.rstrip()]
