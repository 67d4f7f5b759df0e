"""What the CLI's modules share: the typer app, the consoles, the one-line failure, and the live view of a search."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TextIO

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from smithbot.evolve.search import Status

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="smithbot makes LLM inference engines faster by contributing better Triton kernels upstream.")
# in a log or a pipe, rich would fold every table to 80 columns (a profile's eleven, one letter wide): there, lines
# are as wide as their content needs, up to LOG_WIDTH, unless COLUMNS says how wide the log is
LOG_WIDTH = 200


def _width(stream: TextIO) -> int | None:
    return None if stream.isatty() or os.environ.get("COLUMNS") else LOG_WIDTH


out = Console(width=_width(sys.stdout))
err = Console(stderr=True, width=_width(sys.stderr))


def _fail(msg: str) -> None:
    err.print(f"[red]error:[/red] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def positive(value: float | None) -> float | None:
    """The parse-time check of a time or a budget: more than 0 (typer's ``min`` cannot exclude its bound)."""
    if value is not None and value <= 0:
        raise typer.BadParameter(f"{value:g} is not more than 0")
    return value


def one_of(*allowed: str) -> Callable[[str | None], str | None]:
    """The parse-time check of a choice."""
    def check(value: str | None) -> str | None:
        if value is not None and value not in allowed:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)}")
        return value
    return check


def out_folder(path: Path | None) -> Path | None:
    """The parse-time check of an output folder: it is made now, so a path that cannot be is an error before any
    work starts."""
    if path is not None:
        _make(path)
    return path


def out_file(path: Path | None) -> Path | None:
    """The parse-time check of an output file: its folder is made now."""
    if path is not None:
        _make(path.expanduser().absolute().parent)
    return path


def _make(folder: Path) -> None:
    try:
        folder.expanduser().mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise typer.BadParameter(f"cannot make the folder {folder}: {e.strerror or e}") from None


def _live_table(s: "Status") -> Table:
    t = Table(title=f"run {s.run_id}", show_header=False)
    best = "-" if s.best is None else f"{s.best:.3f}x" + (f" [{s.best_ci[0]:.3f}, {s.best_ci[1]:.3f}]" if s.best_ci else "")
    rate = f"{s.correct}/{s.evaluated}" + (f" ({s.correct / s.evaluated:.0%})" if s.evaluated else "")
    for k, v in (("iteration", str(s.iteration)), ("best speedup", best), ("correct", rate),
                 ("cost", f"${s.cost:.4f}, {s.tokens} tokens"), ("in flight", str(s.inflight)),
                 ("islands' best", "  ".join(f"{b:.3f}" for b in s.island_best)), ("", s.message)):
        t.add_row(k, v)
    return t
