"""``smithbot report RUN``: one self-contained HTML file and a markdown summary, with plots as SVG images.

Plots: the best speedup per island against the iteration, and the correct rate (rolling and cumulative). Then the
lineage of the best candidate, from the baseline, with each step's diff; then every candidate in a table.
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from smithbot.config import templates_dir
from smithbot.evolve.db import Candidate, Run, RunDB

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _ticks(lo: float, hi: float, whole: bool = False) -> list[float]:
    """Round axis ticks (steps of 1, 2 or 5 times a power of ten, whole numbers with ``whole``) that cover
    [lo, hi], about five of them; an axis of values that are all at least 0 (speedups, fractions) starts at 0 or
    above, never below."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / 4
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    if whole:
        step = max(1.0, round(step))
    first, last = math.floor(lo / step) * step, math.ceil(hi / step) * step
    if lo >= 0:
        first = max(first, 0.0)
    n = int(round((last - first) / step))
    return [round(first + i * step, 10) for i in range(n + 1)]


def svg_lines(series: dict[str, list[tuple[float, float]]], title: str, xlabel: str, ylabel: str,
              width: int = 640, height: int = 300) -> str:
    """A small line chart as standalone SVG text (no plotting dependency)."""
    pts = [p for s in series.values() for p in s]
    left, right, top, bottom = 56, 130, 30, 40
    xs = _ticks(*((min(p[0] for p in pts), max(p[0] for p in pts)) if pts else (0.0, 1.0)), whole=True)
    ys = _ticks(*((min(p[1] for p in pts), max(p[1] for p in pts)) if pts else (0.0, 1.0)))
    x0, x1, y0, y1 = xs[0], xs[-1], ys[0], ys[-1]
    w, h = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * w

    def sy(y: float) -> float:
        return top + h - (y - y0) / (y1 - y0) * h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13">{html.escape(title)}</text>',
           f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#444"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="#444"/>',
           f'<text x="{left + w / 2}" y="{height - 6}" text-anchor="middle">{html.escape(xlabel)}</text>',
           f'<text x="12" y="{top + h / 2}" text-anchor="middle" transform="rotate(-90 12 {top + h / 2})">'
           f'{html.escape(ylabel)}</text>']
    for yv in ys:
        out.append(f'<text x="{left - 4}" y="{sy(yv) + 4:.1f}" text-anchor="end">{yv:g}</text>')
        out.append(f'<line x1="{left}" y1="{sy(yv):.1f}" x2="{left + w}" y2="{sy(yv):.1f}" stroke="#eee"/>')
    for xv in xs:
        out.append(f'<text x="{sx(xv):.1f}" y="{top + h + 14}" text-anchor="middle">{xv:g}</text>')
    for i, (name, s) in enumerate(series.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        if s:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.8" points="{path}"/>')
        out.append(f'<rect x="{left + w + 12}" y="{top + 4 + 16 * i}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{left + w + 26}" y="{top + 13 + 16 * i}">{html.escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def island_progress(cands: list[Candidate], n_islands: int) -> dict[str, list[tuple[float, float]]]:
    """Per island, the best fitness among its evaluated candidates after each iteration (the baseline is 1.0)."""
    best = [1.0 if any(c.proposer == "baseline" and c.fitness is not None for c in cands) else 0.0] * n_islands
    series: dict[str, list[tuple[float, float]]] = {f"island {i}": [(0, best[i])] for i in range(n_islands)}
    for c in cands:
        if c.proposer == "baseline" or c.status == "pending":
            continue
        if c.fitness is not None and c.fitness > best[c.island]:
            best[c.island] = c.fitness
        for i in range(n_islands):
            series[f"island {i}"].append((c.seq, best[i]))
    return series


def correct_rate(cands: list[Candidate], window: int = 10) -> dict[str, list[tuple[float, float]]]:
    done = [c for c in cands if c.proposer != "baseline" and c.status != "pending"]
    flags = [1.0 if c.correct or c.status == "screened_out" else 0.0 for c in done]
    cum, roll = [], []
    for i, c in enumerate(done):
        cum.append((c.seq, sum(flags[:i + 1]) / (i + 1)))
        w = flags[max(0, i + 1 - window):i + 1]
        roll.append((c.seq, sum(w) / len(w)))
    return {"cumulative": cum, f"last {window}": roll}


def lineage(db: RunDB, best: Candidate | None) -> list[Candidate]:
    chain = []
    c = best
    while c is not None:
        chain.append(c)
        c = db.candidate(c.parent_id) if c.parent_id else None
    return list(reversed(chain))


@dataclass(frozen=True)
class Report:
    html: Path
    markdown: Path


def _data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def preview_launches(result: dict[str, Any] | None) -> list[tuple[int, int]]:
    """A fusion measured on the interpreter: its kernel launches a call (glue, new) per distinct count, which is what
    it shows instead of a speed (the interpreter runs the glue's torch ops natively and the Triton in Python); else
    empty."""
    res = result or {}
    if res.get("backend") != "interpreter":
        return []
    return sorted({(c["launches"][0], c["launches"][1]) for c in res.get("cases", []) if c.get("launches")})


def headline(best: Candidate) -> str:
    """The best candidate's figure: its measured speedup inside its interval, or a fusion preview's launches."""
    res = best.result or {}
    launches = preview_launches(res)
    if launches:
        return ", ".join(f"{a} -> {b} kernel launches a call" for a, b in launches) + " (speed not judged)"
    ci = res.get("speedup_ci")
    return f"{res.get('speedup', best.fitness):.3f}x" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def report(db: RunDB, run_id: str, out_dir: Path) -> Report:
    run: Run = db.run(run_id)
    cands = db.candidates(run_id)
    best = db.best(run_id)
    n_islands = run.config["search"]["islands"]
    plots = {
        "progress": svg_lines(island_progress(cands, n_islands), "best speedup per island", "iteration",
                              "speedup (below 1 counts as 0)"),
        "correct": svg_lines(correct_rate(cands), "correct rate", "iteration", "fraction correct"),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, svg in plots.items():
        (out_dir / f"{name}.svg").write_text(svg)
    base = next((c for c in cands if c.proposer == "baseline"), None)
    env_info: dict[str, Any] = ((best or base).result or {}).get("env", {}) if (best or base) else {}
    totals = db.totals(run_id)
    ctx = {"run": run, "cands": cands, "best": best, "headline": headline(best) if best else "",
           "chain": lineage(db, best), "totals": totals, "env": env_info,
           "migrations": db.events(run_id, "migration"),
           "interpreter": ((best or base).result or {}).get("backend") == "interpreter" if (best or base) else False,
           "images": {k: _data_uri(v) for k, v in plots.items()}, "files": {k: f"{k}.svg" for k in plots}}
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir() / "report"), autoescape=jinja2.select_autoescape(["html"]),
                             undefined=jinja2.StrictUndefined)
    html_path, md_path = out_dir / "report.html", out_dir / "summary.md"
    html_path.write_text(env.get_template("report.html.j2").render(**ctx))
    md_env = jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir() / "report"), undefined=jinja2.StrictUndefined)
    md_path.write_text(md_env.get_template("summary.md.j2").render(**ctx))
    return Report(html_path, md_path)
