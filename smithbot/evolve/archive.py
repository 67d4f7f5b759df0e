"""Islands of MAP-Elites grids, with kernel-aware features read from a candidate's source.

- ``features(source)`` reads the EVOLVE-BLOCK: the largest block/tile size, ``num_warps`` and ``num_stages``, the
  counts of ``tl.load``, ``tl.store`` and ``tl.dot``, the loop count and the code size. ``cell()`` bins them.
- Each island keeps its own grid (cell -> elite). Parents and inspirations are drawn from the island alone, so islands
  stay separate; only ``migrate()`` moves elites, along a ring (island i's best to island i+1).
- Fitness is the evaluator's geomean speedup, with anything below 1.0 counted as 0; the baseline is 1.0 by
  definition. Incorrect candidates never enter a grid.

The archive is plain data (``to_dict``/``from_dict``) and is committed with every evaluated candidate.
"""

from __future__ import annotations

import ast
import math
import random
from dataclasses import dataclass, field
from typing import Any

from evaluator.task import parse, split_evolve

_TILE_WORDS = ("BLOCK", "TILE", "CHUNK", "SPLIT")


def _int(node: ast.AST) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def features(source: str) -> dict[str, int]:
    """Kernel-aware features of a candidate (its EVOLVE-BLOCK, or the whole text if it has none)."""
    parts = split_evolve(source)
    block = parts[1] if parts else source
    try:
        tree = parse(block)
    except SyntaxError:
        return {}
    tiles, warps, stages = [], [], []
    counts = {"loads": 0, "stores": 0, "dots": 0, "loops": 0}
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While)):
            counts["loops"] += 1
        elif isinstance(node, ast.Call):
            name = _dotted(node.func).rsplit(".", 1)[-1]
            if name == "load":
                counts["loads"] += 1
            elif name == "store" or name.startswith("atomic_"):
                counts["stores"] += 1
            elif name == "dot":
                counts["dots"] += 1
            for kw in node.keywords:
                v = _int(kw.value)
                if v is None or kw.arg is None:
                    continue
                if kw.arg == "num_warps":
                    warps.append(v)
                elif kw.arg == "num_stages":
                    stages.append(v)
                elif any(w in kw.arg.upper() for w in _TILE_WORDS):
                    tiles.append(v)
        elif isinstance(node, ast.Dict):  # triton.Config({"BLOCK": 128}, ...)
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and _int(v) is not None:
                    if any(w in k.value.upper() for w in _TILE_WORDS):
                        tiles.append(_int(v) or 0)
        elif isinstance(node, ast.Assign) and _int(node.value) is not None:
            for t in node.targets:
                if isinstance(t, ast.Name) and any(w in t.id.upper() for w in _TILE_WORDS):
                    tiles.append(_int(node.value) or 0)
    return {"tile": max(tiles, default=0), "num_warps": max(warps, default=4), "num_stages": max(stages, default=3),
            **counts, "lines": sum(1 for line in block.splitlines() if line.strip())}


def cell(f: dict[str, int]) -> str:
    """The MAP-Elites cell of a feature dict: log2 tile, log2 warps, stages, memory ops, dots, loops, size."""
    if not f:
        return "unparsed"
    memops = f["loads"] + f["stores"]
    key = (
        min(int(math.log2(f["tile"])) if f["tile"] > 0 else 0, 14),
        int(math.log2(max(f["num_warps"], 1))),
        min(f["num_stages"], 6),
        0 if memops <= 2 else 1 if memops <= 4 else 2 if memops <= 8 else 3,
        min(f["dots"], 2),
        min(f["loops"], 3),
        0 if f["lines"] < 40 else 1 if f["lines"] < 100 else 2 if f["lines"] < 200 else 3,
    )
    return "-".join(map(str, key))


def fitness(status: str, speedup: float | None, baseline: bool = False) -> float | None:
    """None for anything that may not be an elite; otherwise the speedup, with below 1.0 counting as 0."""
    if status not in ("correct", "promoted", "flagged"):
        return None
    if baseline:
        return 1.0
    if status == "flagged" or speedup is None:
        return 0.0  # an implausible measurement earns nothing until a human looks at it
    return speedup if speedup >= 1.0 else 0.0


@dataclass
class Elite:
    id: str
    fitness: float


@dataclass
class Island:
    grid: dict[str, Elite] = field(default_factory=dict)
    evaluated: int = 0

    def best(self) -> Elite | None:
        return max(self.grid.values(), key=lambda e: e.fitness, default=None)

    def add(self, cand_id: str, fit: float, where: str) -> bool:
        cur = self.grid.get(where)
        if cur is None or fit > cur.fitness:
            self.grid[where] = Elite(cand_id, fit)
            return True
        return False


@dataclass
class Archive:
    islands: list[Island]
    migrations: int = 0

    @classmethod
    def new(cls, n: int) -> Archive:
        return cls([Island() for _ in range(n)])

    def add(self, island: int, cand_id: str, fit: float | None, where: str) -> bool:
        self.islands[island].evaluated += 1
        return fit is not None and self.islands[island].add(cand_id, fit, where)

    def seed_all(self, cand_id: str, fit: float, where: str) -> None:
        for isl in self.islands:
            isl.add(cand_id, fit, where)

    def best(self) -> Elite | None:
        elites = [e for e in (i.best() for i in self.islands) if e is not None]
        return max(elites, key=lambda e: e.fitness, default=None)

    def sample(self, island: int, rng: random.Random, n_top: int = 2, n_diverse: int = 2,
               exploit: float = 0.6, explore: float = 0.3) -> tuple[str | None, list[str]]:
        """A parent and inspirations from one island: exploitation (fitness-weighted), exploration (uniform) or the
        island's elite; inspirations are its top other elites plus random diverse cells."""
        elites = list(self.islands[island].grid.values())
        if not elites:
            return None, []
        ranked = sorted(elites, key=lambda e: -e.fitness)
        r = rng.random()
        if r < exploit:
            parent = rng.choices(ranked, weights=[e.fitness + 0.05 for e in ranked])[0]
        elif r < exploit + explore:
            parent = rng.choice(elites)
        else:
            parent = ranked[0]
        others = [e for e in ranked if e.id != parent.id]
        top = others[:n_top]
        rest = [e for e in others[n_top:]]
        diverse = rng.sample(rest, min(n_diverse, len(rest)))
        return parent.id, [e.id for e in top + diverse]

    def migrate(self, cells: dict[str, str]) -> list[tuple[int, int, str]]:
        """Ring migration: each island's best goes to the next island's grid (in its own cell). Returns the moves
        that placed an elite, as (from, to, candidate id)."""
        if len(self.islands) < 2:
            return []
        bests = [i.best() for i in self.islands]
        moves = []
        for src, elite in enumerate(bests):
            if elite is None:
                continue
            dst = (src + 1) % len(self.islands)
            if self.islands[dst].add(elite.id, elite.fitness, cells[elite.id]):
                moves.append((src, dst, elite.id))
        self.migrations += 1
        return moves

    def to_dict(self) -> dict[str, Any]:
        return {"migrations": self.migrations,
                "islands": [{"evaluated": i.evaluated, "grid": {c: [e.id, e.fitness] for c, e in i.grid.items()}}
                            for i in self.islands]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Archive:
        return cls([Island({c: Elite(v[0], v[1]) for c, v in i["grid"].items()}, i["evaluated"]) for i in d["islands"]],
                   d.get("migrations", 0))
