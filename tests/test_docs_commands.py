"""Every `smithbot` command shown in the README and docs/ exists and its flags parse (parsed, not run)."""

import re
import shlex
from pathlib import Path

import pytest
import typer

from smithbot.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def shown_commands() -> list[tuple[str, str]]:
    """(where, command line) for each `smithbot ...` line inside the docs' code blocks."""
    out = []
    for doc in DOCS:
        inside = False
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("```"):
                inside = not inside
                continue
            for part in line.split(" #")[0].split("&&"):  # the set-up line chains its commands
                text = part.strip()
                if inside and text.startswith("smithbot"):
                    out.append((f"{doc.name}:{n}", text))
    return out


COMMANDS = shown_commands()


def test_the_docs_show_the_main_commands() -> None:
    shown = {shlex.split(c)[1] for _, c in COMMANDS}
    assert {"demo", "scan", "extract", "evolve", "verify", "propose", "run", "profile"} <= shown


@pytest.mark.parametrize("where,line", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_a_shown_command_exists_and_its_flags_parse(where: str, line: str) -> None:
    words = [w for w in shlex.split(re.sub(r"\[(--[^\]]+)\]", r"\1", line))[1:] if w != "..."]
    group = typer.main.get_command(app)
    with group.make_context("smithbot", list(words), resilient_parsing=False) as ctx:
        name, cmd, rest = group.resolve_command(ctx, list(words))
        assert cmd is not None, f"{where}: no command {words[0]!r}"
        cmd.make_context(name or "", list(rest), parent=ctx)  # raises on an unknown flag or a bad value
