"""Proposers: each turns a parent (plus inspirations and feedback) into a new candidate ``kernel.py`` text.

- ``tune`` (the offline default) edits launch configs and constexpr tiles with libcst (``tune.py``);
- ``llm`` asks any OpenAI-compatible endpoint, through the ``openai`` client, for a SEARCH/REPLACE diff, a full-block
  rewrite or a crossover of two parents; prompts are jinja2 files in ``templates/prompts/``;
- ``replay`` replays recorded responses from a JSONL file, for reproducible runs and tests;
- ``inductor`` (a fusion task) starts from torch.compile's own kernels for the glue (``inductor.py``), made standalone
  (``standalone.py``), then tunes them.

A proposal that cannot become a candidate (garbage, truncation, refusals, endpoint down) is returned with ``error`` set
and recorded as a failed proposal; only set-up problems (a missing API-key variable) raise :class:`ProposerError`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import jinja2

from evaluator.task import Task
from smithbot.config import ConfigError, EvolveConfig, LLMConfig, load_evolve_config, templates_dir
from smithbot.errors import SmithbotError
from smithbot.evolve import edits, inductor, tune
from smithbot.evolve.generated import InductorError
from smithbot.evolve.standalone import to_candidate
from smithbot.llm import LLMClient


class ProposerError(SmithbotError):
    """The proposer cannot start (missing API key variable, unreadable replay file). One line."""


class Exhausted(Exception):
    """The proposer has nothing new to offer (replay file ended, tune neighbourhood fully evaluated)."""


@dataclass(frozen=True)
class Parent:
    id: str | None  # None: the task's baseline, not (yet) a candidate of the run
    source: str
    result: dict[str, Any] | None = None
    fitness: float | None = None


@dataclass(frozen=True)
class Context:
    task: Task
    parent: Parent
    inspirations: tuple[Parent, ...] = ()
    second: Parent | None = None  # for crossover
    failures: tuple[dict[str, Any], ...] = ()  # recent failed children on this island: reason, detail
    rng: random.Random = field(default_factory=random.Random)
    seen: Callable[[str], bool] = lambda h: False


@dataclass(frozen=True)
class Proposal:
    source: str | None
    edit_format: str = ""
    prompt: str = ""
    response: str = ""
    model: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    error: str = ""
    screen: bool = False  # successive halving: screen on a subset of the cases first


class Proposer(Protocol):
    """What the search asks of a proposer (``PROPOSERS`` names each, with how it is made)."""

    name: str

    def configure(self, backend: str, regimes: set[str]) -> None:
        """Told, once the baseline is measured, the backend the candidates run on and the regimes of the cases."""

    def propose(self, ctx: Context) -> Proposal:
        """A new candidate from ``ctx.parent``; a failed one as ``Proposal(None, ..., error=...)``."""


class TuneProposer:
    """Random sampling and local search over the parent's knobs; proposals are screened on a case subset first."""

    name = "tune"

    def __init__(self, p_random: float = 0.3, attempts: int = 40, max_enumerate: int = 20000) -> None:
        self.p_random, self.attempts, self.max_enumerate = p_random, attempts, max_enumerate
        self.launch_kwargs, self.buckets = True, True

    def configure(self, backend: str, regimes: set[str]) -> None:
        """The interpreter ignores num_warps and num_stages, so it does not tune them; per-shape-bucket values need
        cases on both sides of the bucket (decode and prefill)."""
        self.launch_kwargs = backend != "interpreter"
        self.buckets = {"decode", "prefill"} <= regimes

    def _knobs(self, source: str) -> list[tune.Knob]:
        ks = [k for k in tune.knobs(source) if self.launch_kwargs or k.name not in ("num_warps", "num_stages")]
        if not self.buckets:
            ks = [dataclasses.replace(k, bucket=None) if not isinstance(k.value, tuple) else k for k in ks]
        return [k for k in ks if len(k.values()) > 1]

    def propose(self, ctx: Context) -> Proposal:
        ks = self._knobs(ctx.parent.source)
        if not ks:
            raise Exhausted("the program has no tunable launch configs, tiles or autotune configs")
        parent_hash = edits.source_hash(ctx.parent.source)
        for _ in range(self.attempts):
            if ctx.rng.random() < self.p_random:
                values = {k.id: ctx.rng.choice(k.values()) for k in ks if ctx.rng.random() < 0.5}
            else:
                moves = [k for k in ks if k.neighbours()]
                values = {k.id: ctx.rng.choice(k.neighbours()) for k in ctx.rng.sample(moves, min(len(moves),
                                                                                               ctx.rng.choice((1, 1, 2))))}
            source = tune.set_knobs(ctx.parent.source, values)
            h = edits.source_hash(source)
            if h != parent_hash and not ctx.seen(h):
                return Proposal(source, edit_format="tune", response=tune.describe(ks, values), screen=True)
        # The neighbourhood is used up: when the whole space is small, take any unseen point of it.
        if math.prod(len(k.values()) for k in ks) <= self.max_enumerate:
            grid = list(itertools.product(*(k.values() for k in ks)))
            ctx.rng.shuffle(grid)
            for point in grid:
                values = dict(zip((k.id for k in ks), point))
                source = tune.set_knobs(ctx.parent.source, values)
                h = edits.source_hash(source)
                if h != parent_hash and not ctx.seen(h):
                    return Proposal(source, edit_format="tune", response=tune.describe(ks, values), screen=True)
            raise Exhausted(f"every one of the {len(grid)} configs of the knobs has been evaluated")
        raise Exhausted(f"no unseen config near the parent after {self.attempts} tries")


class Prompter:
    """Renders the system and user prompts from ``templates/prompts/``."""

    def __init__(self) -> None:
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir() / "prompts"),
                                      undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
        self._fusion: dict[str, dict[str, Any]] = {}

    def recorded(self, ctx: Context, fmt: str) -> tuple[str, str, str]:
        """(system, user, the prompt as the run database records it)."""
        system, user = self.render(ctx, fmt)
        return system, user, f"[system]\n{system}\n[user]\n{user}"

    def render(self, ctx: Context, fmt: str) -> tuple[str, str]:
        task = ctx.task
        cases = [c.as_dict() for c in task.cases]
        system = self.env.get_template("system.j2").render(task=task, fmt=fmt)
        user = self.env.get_template("user.j2").render(
            task=task, cases=cases, fmt=fmt, parent=ctx.parent, parent_block=edits.block_of(ctx.parent.source),
            second=ctx.second, second_block=edits.block_of(ctx.second.source) if ctx.second else "",
            inspirations=[(p, edits.block_of(p.source)) for p in ctx.inspirations], failures=ctx.failures,
            fusion=self.fusion(task))
        return system, user

    def fusion(self, task: Task) -> dict[str, Any] | None:
        """For a fusion task: where its glue sits in the engine (file, function, lines, the TODO beside it), how hot it
        is (launches a step, the profile's share, the presets that run it), its original source, and the Inductor
        seed made from the output recorded beside the task, when there is one. Worked out once per task."""
        if task.kind != "fusion":
            return None
        if task.id not in self._fusion:
            base = task.kernel_path.read_text(encoding="utf-8")
            compiled = inductor.recorded(task.root)
            try:
                seed = edits.block_of(to_candidate(base, task.entry, compiled)) if compiled else ""
            except InductorError:
                seed = ""
            self._fusion[task.id] = {"glue": task.provenance.glue, "hotness": task.hotness,
                                     "original": edits.block_of(base), "seed": seed}
        return self._fusion[task.id]


def _answer(parent: str, fmt: str, text: str, finish: str = "", **recorded: Any) -> Proposal:
    """The candidate a response describes, or a failed proposal that keeps everything recorded about it."""
    try:
        return Proposal(edits.apply(fmt, parent, text), edit_format=fmt, response=text, **recorded)
    except edits.EditError as exc:
        why = f"{exc} (the response was cut at max_tokens)" if finish == "length" else str(exc)
        return Proposal(None, edit_format=fmt, response=text, error=why, **recorded)


def _choose(rng: random.Random, weights: dict[str, float]) -> str:
    keys = [k for k, w in weights.items() if w > 0]
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]


class LLMProposer:
    """Any OpenAI-compatible chat-completions endpoint, with retries and backoff on 429, 5xx and timeouts."""

    name = "llm"

    def __init__(self, cfg: EvolveConfig, sleep: Callable[[float], None] = time.sleep) -> None:
        try:
            self.endpoint = LLMClient(cfg.llm, sleep)
        except ConfigError as exc:
            raise ProposerError(f"--proposer llm: {exc}") from None
        self.llm: LLMConfig = self.endpoint.llm
        self.cfg = cfg
        self.prompter = Prompter()

    def configure(self, backend: str, regimes: set[str]) -> None:
        """Nothing to set: the model writes whatever the task needs."""

    def propose(self, ctx: Context) -> Proposal:
        formats = dict(self.llm.edit_formats)
        if ctx.second is None:
            formats.pop("crossover", None)
        fmt = _choose(ctx.rng, formats or {"diff": 1.0})
        system, user, prompt = self.prompter.recorded(ctx, fmt)
        model = ctx.rng.choices([m.name for m in self.llm.models], weights=[m.weight for m in self.llm.models])[0]
        try:
            text, finish, t_in, t_out = self.endpoint.ask(model, system, user)
        except RuntimeError as exc:
            return Proposal(None, fmt, prompt, model=model, error=str(exc))
        return _answer(ctx.parent.source, fmt, text, finish, prompt=prompt, model=model, tokens_in=t_in,
                       tokens_out=t_out, cost=self.cfg.cost(model, t_in, t_out))


class ReplayProposer:
    """Replays a JSONL file of recorded responses: ``{"response": ..., "format": "diff", "model": ...}`` a line."""

    name = "replay"

    def __init__(self, path: Path, start: int = 0) -> None:
        try:
            self.lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            raise ProposerError(f"{path}: cannot read the replay file ({exc})") from None
        self.path, self.pos = path, start
        self.prompter = Prompter()

    def configure(self, backend: str, regimes: set[str]) -> None:
        """Nothing to set: the responses are recorded already."""

    def propose(self, ctx: Context) -> Proposal:
        if self.pos >= len(self.lines):
            raise Exhausted(f"the replay file {self.path} has no more responses ({len(self.lines)} replayed)")
        line, self.pos = self.lines[self.pos], self.pos + 1
        try:
            rec = json.loads(line)
            text, fmt = str(rec["response"]), str(rec.get("format", "diff"))
        except (ValueError, KeyError, TypeError) as exc:
            return Proposal(None, "diff", error=f"{self.path} line {self.pos}: not a replay record ({exc})")
        if fmt not in edits.FORMATS:
            return Proposal(None, fmt, response=text, error=f"unknown edit format {fmt!r}")
        return _answer(ctx.parent.source, fmt, text, prompt=self.prompter.recorded(ctx, fmt)[2],
                       model=str(rec.get("model", "replay")), tokens_in=int(rec.get("tokens_in", 0)),
                       tokens_out=int(rec.get("tokens_out", 0)))


class InductorProposer:
    """``--proposer inductor``: first Inductor's code for the fusion task's glue, made a candidate (a compile failure
    is a failed proposal with Inductor's message): its reductions reading a row in one pass, then, where that made a
    difference, as Inductor's loops (for rows longer than one block serves well), so that the search keeps the
    faster; then the ``tune`` proposer, on the best candidate so far, or on a seed while none has knobs to move
    (the PyTorch baseline has none)."""

    name = "inductor"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seeded = False
        self.seeds: list[str] = []
        self.offered = 0
        self.why = ""
        self.where = ""
        self.tune = TuneProposer()

    def configure(self, backend: str, regimes: set[str]) -> None:
        self.tune.configure(backend, regimes)

    def propose(self, ctx):  # type: ignore[no-untyped-def]
        with self.lock:  # the seeds are made once; the other proposer threads wait for them
            if not self.seeded:
                self.seeded = True
                if ctx.task.kind != "fusion":
                    raise ProposerError(f"{ctx.task.id} is a {ctx.task.kind} task: the inductor proposer compiles a "
                                        "fusion task's PyTorch glue; use --proposer tune or llm")
                try:
                    compiled, self.where = inductor.seed(ctx.task.root)
                    base = ctx.task.kernel_path.read_text()
                    self.seeds = list(dict.fromkeys(to_candidate(base, ctx.task.entry, compiled, one_row=one_row)
                                                    for one_row in (True, False)))
                except InductorError as exc:
                    self.why = f"inductor: {exc}"
                    return Proposal(None, "inductor", error=self.why)
            if self.offered < len(self.seeds):
                seed = self.seeds[self.offered]
                self.offered += 1
                kernels = re.findall(r"^def (_\w+_kernel\d*)\(", seed, re.M)
                form = "" if len(self.seeds) == 1 else " (each row in one pass)" if self.offered == 1 else \
                    " (Inductor's loops over each row)"
                return Proposal(seed, "inductor", response=f"Inductor's {len(kernels)} kernels for the glue "
                                                           f"({self.where}){form}: {', '.join(kernels)}")
        if not self.seeds:
            raise Exhausted(f"no Inductor seed to tune ({self.why})")
        try:
            return self.tune.propose(ctx)
        except Exhausted:
            if ctx.parent.source in self.seeds:
                raise
            return self.tune.propose(dataclasses.replace(ctx, parent=Parent(None, self.seeds[0])))


@dataclass(frozen=True)
class ProposerOptions:
    """What making a proposer may need: an evolve config file (the ``llm`` proposer's endpoint), and the ``replay``
    proposer's JSONL file and the line it starts at (a resumed run's proposals so far)."""

    config: str | None = None
    replay: str | None = None
    start: int = 0


def _replay(o: ProposerOptions) -> Proposer:
    if not o.replay:
        raise ProposerError("--proposer replay needs --replay FILE.jsonl")
    return ReplayProposer(Path(o.replay), o.start)


# every proposer by the name ``--proposer`` takes, and how it is made
PROPOSERS: dict[str, Callable[[ProposerOptions], Proposer]] = {
    "tune": lambda o: TuneProposer(),
    "llm": lambda o: LLMProposer(load_evolve_config(Path(o.config) if o.config else None)),
    "inductor": lambda o: InductorProposer(),
    "replay": _replay,
}


def make_proposer(name: str, options: ProposerOptions) -> Proposer:
    """The proposer ``name`` names, made with ``options``; an unknown name is a ProposerError."""
    if name not in PROPOSERS:
        raise ProposerError(f"unknown proposer {name!r} (choose {', '.join(PROPOSERS)})")
    return PROPOSERS[name](options)
