"""The generated test and benchmark fitted to the line length the target's own linters check: read from its config,
and applied to comments and docstrings, which formatters leave as they are."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from smithbot.propose.lines import fit_prose, line_length


@pytest.mark.parametrize("files, width", [
    ({"pyproject.toml": "[tool.ruff]\nline-length = 120\n"}, 120),
    ({"pyproject.toml": "[tool.ruff.lint]\nselect = ['E']\n"}, 88),  # ruff configured, its default length
    ({"pyproject.toml": "[tool.black]\nline-length = 100\n"}, 100),
    ({"pyproject.toml": "[project]\nname = 'x'\n", "setup.cfg": "[flake8]\nmax-line-length = 110\n"}, 110),
    ({"tox.ini": "[flake8]\nselect = E\n"}, 79),
    ({"pyproject.toml": "[project]\nname = 'x'\n"}, None),
    ({"pyproject.toml": "not toml ["}, None),
    ({}, None),
])
def test_the_line_length_is_the_one_the_targets_tools_check(tmp_path: Path, files: dict[str, str], width) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert line_length(tmp_path) == width


SOURCE = '''"""Tests `pkg.mod.kernel` against the code it replaced, kept below as the reference, on every shape case of the table."""

import torch

# ----- the reference: the original launcher and its helpers, as extracted at 0123456789ab, kept as they were -----
x = torch.zeros(3)  # compared in float32: torch compares fp8 bitwise only, so every side is cast before comparing
y = torch.ones(3)  # noqa: E501 - a pinned comment stays on its line, whatever its length is, as the linter wants it


def f(a, b):
    """Stands in for the object the launcher reads as self, with every attribute the launcher reads from it,
    in the order the launcher reads them.
    """
    return {"a_key_that_is_long": a, "another_key_that_is_long": b, "a_third_key": a + b, "fourth": 1}
'''


def test_comments_and_docstrings_are_wrapped_and_code_is_left_to_the_formatter() -> None:
    out = fit_prose(SOURCE, 88)
    lines = out.splitlines()
    pinned = [ln for ln in lines if "noqa" in ln]
    code = [ln for ln in lines if ln.startswith("    return {")]
    assert all(len(ln) <= 88 for ln in lines if ln not in pinned + code), out
    assert pinned[0].startswith("y = torch.ones(3)  # noqa") and len(code) == 1  # left as they were
    # a trailing comment moves above its line; the code line keeps its text
    at = lines.index("x = torch.zeros(3)")
    assert lines[at - 1].startswith("# ") and "fp8 bitwise" in " ".join(lines[at - 2:at])
    assert ast.dump(ast.parse(out)) != ast.dump(ast.parse(SOURCE))  # the docstrings were rewrapped
    tree = ast.parse(out)
    assert " ".join(ast.get_docstring(tree).split()) == " ".join(ast.get_docstring(ast.parse(SOURCE)).split())
    # a paragraph is wrapped as a whole, and the closing quotes stay on their own line
    assert "    launcher reads from it, in the order the launcher reads them.\n    \"\"\"\n" in out, out
    assert fit_prose(out, 88) == out  # a second pass changes nothing
    assert fit_prose(SOURCE, 200) == SOURCE
    assert fit_prose("def broken(:\n", 10) == "def broken(:\n"  # what does not parse is left alone
