"""What the CLI's modules share: the typer app, the consoles, the one-line failure, and the live view of a search."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from smithbot.evolve.search import Status

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="smithbot makes LLM inference engines faster by contributing better Triton kernels upstream.")
out = Console()
err = Console(stderr=True)


def _fail(msg: str) -> None:
    err.print(f"[red]error:[/red] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _live_table(s: "Status") -> Table:
    t = Table(title=f"run {s.run_id}", show_header=False)
    best = "-" if s.best is None else f"{s.best:.3f}x" + (f" [{s.best_ci[0]:.3f}, {s.best_ci[1]:.3f}]" if s.best_ci else "")
    rate = f"{s.correct}/{s.evaluated}" + (f" ({s.correct / s.evaluated:.0%})" if s.evaluated else "")
    for k, v in (("iteration", str(s.iteration)), ("best speedup", best), ("correct", rate),
                 ("cost", f"${s.cost:.4f}, {s.tokens} tokens"), ("in flight", str(s.inflight)),
                 ("islands' best", "  ".join(f"{b:.3f}" for b in s.island_best)), ("", s.message)):
        t.add_row(k, v)
    return t
