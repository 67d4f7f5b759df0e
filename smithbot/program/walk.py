"""The walk of the call graph: from the entries down to Triton kernel launches, per phase, each kernel with its
cheapest path (per layer first, then the fewest undecided tests and dispatches), and why what is off the path is off.
Expressions are resolved by ``callgraph._Resolver``; see ``callgraph``'s docstring for how calls are followed."""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any, Callable
from smithbot.program.callgraph import Reach, _qual, _Resolver
from smithbot.program.evaluate import Env, Platform
from smithbot.program.kinds import EACH
from smithbot.program.modules import Program
from smithbot.program.value import Func, Kernel, Value


def reach(program: Program, kernels: set[tuple[str, str]], env: Env, model: list[Func], engine: list[Func],
          startup: list[Func], other_platforms: tuple[str, ...] = (),
          phases: tuple[str, ...] = ("decode", "prefill"), decode_only: frozenset[tuple[str, str]] = frozenset(),
          functions: dict[tuple[str, str], list[Reach]] | None = None,
          cuts: dict[tuple[str, str], str] | None = None,
          questions: Callable[[set[tuple[str, str]]], dict[tuple[str, str], set[str]]] | None = None,
          answers: dict[tuple[str, str], dict[str, dict[str, Any]]] | None = None,
          tensor_questions: Callable[[set[tuple[str, str]]], dict[tuple[str, str], set[str]]] | None = None,
          types: dict[tuple[str, str], dict[str, Any]] | None = None
          ) -> dict[tuple[str, str], list[Reach]]:
    """Every kernel reached from the ``model`` entries (its forward: a loop there runs per layer) and the ``engine``
    entries (per-step code: its loops are not layers; those in ``decode_only`` run in decode steps only), per phase,
    with the best path: per layer first, then the fewest undecided branches.

    ``startup`` functions (the entry classes' constructors, the engine's set-up) run once and make classes live;
    kernels reached only from them are not counted. ``functions``, when given, is filled the same way with every
    function the model and engine entries reach (its path ends at the function): where torch glue may run. ``cuts``,
    when given, gets for each function or kernel a cut call names the if-test decided against it: why it is off.

    ``questions``, when given, is asked (with every function the walks reached) for more if-tests to decide, by
    function: a launch's enclosing tests, a glue run's. ``answers`` gets, per function and test, its value in each
    phase as the walks left the graph (callers, live classes, attributes), and ``platform``: whether the value is the
    serving GPU's (it is unknown without it). ``tensor_questions`` is asked the same way for tensors and dtypes to
    trace (``tensors.tensor_question``: the receiver of a cast in a glue run, the run's inputs); ``types`` gets their
    answers (``TensorTypes.answer``), traced through the callers the walks left."""
    out: dict[tuple[str, str], list[Reach]] = {}
    # one resolver for both phases: what an expression means rarely depends on the phase, and its memo is most of
    # the work; the if-test decisions are kept per phase
    r = _Resolver(program, kernels, env.with_phase(phases[0]), other_platforms)
    _enter(r, model, engine, startup)
    best: dict[str, dict[tuple[str, str], Reach]] = {}
    funcs: dict[str, dict[tuple[str, str], Reach]] = {}
    graph: dict[str, _Graph] = {}
    entry_classes = set(r.live)
    for _ in range(6):  # until the classes made, the functions visited and their callers stop changing
        before = set(r.live)
        r.made_now, r.made_in_now = set(), {}
        r.reset()
        r.visited, r.surely_now = set(), set()
        r.env = env.with_phase(phases[0])
        _walk(r, startup, False, {}, True)
        if cuts is not None:
            cuts.clear()  # kept from the last round only, when the live classes have settled
        for phase in phases:
            r.env = env.with_phase(phase)
            best[phase], funcs[phase], graph[phase] = {}, {}, _Graph()
            _walk(r, model, True, best[phase], True, funcs[phase], cuts, graph[phase])
            steps = [e for e in engine if phase == "decode" or (e.mod, e.qual) not in decode_only]
            _walk(r, steps, True, best[phase], False, funcs[phase], cuts, graph[phase])
        ran, surely = frozenset(r.visited), frozenset(r.surely_now)
        callers, r.callers_now = r.callers_now, {}
        made = r.made_now | entry_classes
        if made == before and ran == r.ran and surely == r.surely and callers == r.callers:
            break
        r.ran, r.surely, r.callers, r.live, r.made_in = ran, surely, callers, made, r.made_in_now
    if cuts is not None:
        _behind_cuts(r, cuts)
    for phase in phases:
        for key, rc in best[phase].items():
            out.setdefault(key, []).append(graph[phase].settled(key, rc, True))
        if functions is not None:
            for key, rc in funcs[phase].items():
                functions.setdefault(key, []).append(graph[phase].settled(key, rc, False))
    reached = {k for phase in phases for k in funcs[phase]}
    traced = tensor_questions(reached) if tensor_questions is not None and types is not None else {}
    asked = sorted((key, q) for key, qs in traced.items() for q in qs)
    _answer_types(r, env.with_phase(phases[0]), types, [(k, q) for k, q in asked if not q.startswith("value@")])
    if questions is not None and answers is not None:
        _answer(r, env, questions(reached), phases, answers)
    # the constants last: a constructor met while evaluating one makes its class live, after the tests' answers
    _answer_types(r, env.with_phase(phases[0]), types, [(k, q) for k, q in asked if q.startswith("value@")])
    return out


def _answer_types(r: _Resolver, env: Env, types: dict[Any, Any] | None, asked: list[tuple[Any, str]]) -> None:
    """``types[key][question]``: each question of ``tensors.tensor_question``'s form answered after the walks."""
    r.env = env
    for key, q in asked:
        types.setdefault(key, {})[q] = r.answer(*key, q)  # type: ignore[union-attr]


def _enter(r: _Resolver, model: list[Func], engine: list[Func], startup: list[Func]) -> None:
    """What the entries tell the resolver before any walk: which functions are entries (their parameters are what
    their callers leave to defaults), that the model class's constructor takes the model's config first, and that
    the entries' classes are live (the model, and the scheduler an engine entry's method runs on)."""
    for v in model + engine + startup:
        entry = (r.p.facts(v.mod) or {}).get("functions", {}).get(v.qual)
        if entry is not None:
            r.entries.add(id(entry))
    for v in model:
        init = r.method(*v.bound, "__init__") if isinstance(v, Func) and v.bound else []
        fn = (r.p.facts(init[0].mod) or {}).get("functions", {}).get(init[0].qual) if init else None
        if fn is not None and len(fn.get("params", [])) > 1:
            r.configs[id(fn)] = fn["params"][1]
    r.live.update(v.bound for v in model + engine if isinstance(v, Func) and v.bound)


def _answer(r: _Resolver, env: Env, asked: dict[tuple[str, str], set[str]], phases: tuple[str, ...],
            answers: dict[tuple[str, str], dict[str, dict[str, Any]]]) -> None:
    """Each asked test's value per phase (EACH, where it differs per layer, counts as true: the branch runs), then
    again without the platform, to tell which values the GPU decides."""
    def decide(mod: str, qual: str, test: str) -> Any:
        f = r.p.facts(mod)
        fn = f["functions"].get(qual) if f else None
        if fn is None:
            return None
        klass = r.bound_of.get((mod, qual)) or ((mod, fn["class"]) if fn.get("class") else None)
        d = r.decisions(mod, [[test, True]], fn, klass=klass)[0]
        return True if d is EACH else d

    for phase in phases:
        r.env = env.with_phase(phase)
        for (mod, qual), tests in asked.items():
            for t in tests:
                answers.setdefault((mod, qual), {}).setdefault(t, {})[phase] = decide(mod, qual, t)
    r.env = env.with_phase(None).with_platform(Platform())
    r.reset()
    for (mod, qual), tests in asked.items():
        for t in tests:
            got = answers[(mod, qual)][t]
            got["platform"] = any(v is not None for k, v in got.items() if k != "platform") \
                and decide(mod, qual, t) is None


def _behind_cuts(r: _Resolver, cuts: dict[tuple[str, str], str], limit: int = 5000) -> None:
    """Give what only a cut call leads to the reason of that cut: the functions and kernels its callees reach that no
    walk visited (``_step_a_q_kernel`` sits two calls behind ``is_kv_b_lora_active(self)``). Names only, nothing
    made live, within ``limit`` functions."""
    todo = deque(cuts.items())
    while todo and limit > 0:
        (mod, qual), why = todo.popleft()
        limit -= 1
        f = r.p.facts(mod)
        fn = f["functions"].get(qual) if f else None
        if fn is None:
            continue
        node = Func(mod, qual, (mod, fn["class"]) if fn.get("class") else None)
        for callee, *_ in fn["calls"]:
            for t in r.callees(node, fn, callee):
                key = (t.mod, t.qual)
                if key not in cuts and key not in r.visited:
                    cuts[key] = why
                    todo.append((key, why))


class _Graph:
    """The calls one phase's walks followed, each with the undecided tests and dispatch it sits under, to tell
    which of the undecided on a kernel's cheapest path do not matter to it: a test both of whose branches reach it
    (``if inplace: inplace_experts(...) else: outplace_experts(...)``, both launching the same kernel), a dispatch
    all of whose targets do. Functions are the walk's nodes (a method with the class its ``self`` is bound to); a
    test is named ``("test", node, source)``, a dispatch ``("call", node, i)``."""

    def __init__(self) -> None:
        self.into: dict[Value, list[tuple[Value, int]]] = {}  # callee -> its calls
        self.calls: dict[tuple[Value, int], tuple[list[Value], frozenset, dict[str, bool]]] = {}
        self.by_caller: dict[Value, list[int]] = {}
        # (kernel?, key) -> the node of its cheapest path, and the undecided on the path as (text, name)
        self.opened: dict[tuple[bool, tuple[str, str]], tuple[Value, tuple[tuple[str, tuple], ...]]] = {}

    def call(self, caller: Value, i: int, targets: list[Value], opened: tuple, taken: dict[str, bool]) -> None:
        """Note call ``i`` of ``caller``, as each of the walks in the phase saw it (their undecided together)."""
        was = self.calls.get((caller, i))
        if was is None:
            self.by_caller.setdefault(caller, []).append(i)
            was = ([], frozenset(), taken)
        for t in targets:
            if t not in was[0]:
                was[0].append(t)
                self.into.setdefault(t, []).append((caller, i))
        self.calls[(caller, i)] = (was[0], was[1] | {x for _, x in opened}, taken)

    def settled(self, key: tuple[str, str], rc: Reach, kernel: bool) -> Reach:
        """``rc`` less the undecided that do not matter to ``key``: those where every way the test or dispatch goes
        still reaches it, through calls under no undecided beyond the path's own."""
        node, opened = self.opened.get((kernel, key), (None, ()))
        have = frozenset(x for _, x in opened)
        if not have:
            return rc
        allowed = set(have)
        while True:  # what reaches the node under the path's own undecided only, and dispatches that do not matter
            ancestors, todo, missing = {node}, [node], set()
            while todo:
                for c, i in self.into.get(todo.pop(), ()):
                    extra = self.calls[(c, i)][1] - allowed
                    missing |= extra
                    if c not in ancestors and not extra:
                        ancestors.add(c)
                        todo.append(c)
            # a dispatch off the path all of whose targets reach the node (sglang's prefill runner, the CUDA graph
            # one or the eager one, both setting attention metadata) does not matter to it either
            more = {x for x in missing if x[0] == "call" and all(t in ancestors for t in self.calls[(x[1], x[2])][0])}
            if not more:
                break
            allowed |= more
        moot, bits = set(), 0.0
        for x in have:
            kind, at, what = x
            if kind == "call":
                targets = self.calls[(at, what)][0]
                if all(t in ancestors for t in targets):
                    moot.add(x)
                    bits += math.log2(len(targets))
                continue
            ways = {taken.get(what) for targets, under, taken in (self.calls[(at, i)] for i in self.by_caller[at])
                    if under <= allowed and any(t in ancestors for t in targets)}
            if None in ways or {True, False} <= ways:
                moot.add(x)
                bits += 1
        if not moot:
            return rc
        return Reach(rc.phase, rc.per_layer, rc.path, max(0.0, rc.undecided - bits),
                     tuple(text for text, x in opened if x not in moot))


def _walk(r: _Resolver, starts: list[Func], count: bool, best: dict[tuple[str, str], Reach], loops: bool,
          funcs: dict[tuple[str, str], Reach] | None = None, cuts: dict[tuple[str, str], str] | None = None,
          graph: _Graph | None = None) -> None:
    """Cheapest paths first, where an edge costs its uncertainty in bits: one per if-test on it that the defaults
    leave undecided, and log2(n) for a call that may go to n functions. A kernel behind fewer bits is more surely
    on the default path. ``funcs`` gets each function visited, kept as kernels are: per layer first, then the
    fewest bits. ``graph`` gets the calls followed and each kept path's undecided (see ``_Graph``)."""
    graph = graph if graph is not None else _Graph()
    cost: dict[tuple[Value, bool], float] = {}
    parent: dict[tuple[Value, bool], tuple[Value, bool] | None] = {}
    # the undecided tests on the cheapest path there: (text, name) pairs, as _Graph names them
    open_tests: dict[tuple[Value, bool], tuple[tuple[str, tuple], ...]] = {}
    heap: list[tuple[float, int, Value, bool]] = []
    tick = 0
    for s in starts:
        cost[(s, False)] = 0
        parent[(s, False)] = None
        heap.append((0, tick := tick + 1, s, False))
    heapq.heapify(heap)
    while heap:
        c, _, node, loop = heapq.heappop(heap)
        if c > cost.get((node, loop), c):
            continue
        f = r.p.facts(node.mod)
        fn = f["functions"].get(node.qual) if f else None
        if fn is None:
            continue
        r.visited.add((node.mod, node.qual))
        r.bound_of[(node.mod, node.qual)] = node.bound
        if c == 0:
            r.surely_now.add((node.mod, node.qual))
        if funcs is not None:
            old = funcs.get((node.mod, node.qual))
            if old is None or (loop, -c) > (old.per_layer, -old.undecided):
                opened = open_tests.get((node, loop), ())
                funcs[(node.mod, node.qual)] = Reach(r.env.phase or "", loop, _path(parent, (node, loop)), c,
                                                     tuple(text for text, _ in opened))
                graph.opened[(False, (node.mod, node.qual))] = (node, opened)
        r.at = node
        where = r.p.modules.get(node.mod, node.mod)
        r.qual_of[id(fn)] = (node.mod, node.qual)
        for i, (callee, tests, in_loop, line, *_) in enumerate(fn["calls"]):
            if r.cut(node.mod, tests, fn, klass=node.bound, phased=True):
                if count and cuts is not None:  # why what this call reaches is off the default path
                    against = next(t for (t, taken), d in zip(tests, r.decisions(node.mod, tests, fn, klass=node.bound,
                                                                                 phased=True))
                                   if d not in (None, EACH) and d != taken)
                    for t in r.callees(node, fn, callee):
                        cuts.setdefault((t.mod, t.qual), f"`{against}` is decided against it ({where}:{line})")
                continue
            undecided = r.undecided(node.mod, tests, fn, node.bound, phased=True)
            now, step = loop or (in_loop and loops), c + len(undecided)
            mine = tuple((f"{t} ({where}:{line})", ("test", node, t)) for t in undecided)
            found = [t for t in r.site(node, fn, callee) if not r.foreign(t)]
            # a call that may go to n places: each is one of n alternatives, as an undecided test is one of 2 (not
            # where each is the one some instances take: some layers' MoE block, the others' MLP)
            every = len(found) > 1 and r.every_one(node, fn, callee)
            step += math.log2(len(found)) if len(found) > 1 and not every else 0.0
            if len(found) > 1 and not every:  # an undecided dispatch, as an undecided test
                mine += ((f"{callee.removesuffix('[]')}() may call any of {len(found)} ({where}:{line})",
                          ("call", node, i)),)
            graph.call(node, i, found, mine, dict(map(tuple, tests)))
            here = open_tests.get((node, loop), ()) + mine
            for t in found:
                if isinstance(t, Func):
                    r.callers_now.setdefault((t.mod, t.qual), set()).add((node, i))
                if isinstance(t, Kernel):
                    if count:
                        old = best.get((t.mod, t.name))
                        if old is None or (now, -step) > (old.per_layer, -old.undecided):
                            best[(t.mod, t.name)] = Reach(r.env.phase or "", now,
                                                          _path(parent, (node, loop)) + (t.name,), step,
                                                          tuple(text for text, _ in here))
                            graph.opened[(True, (t.mod, t.name))] = (t, here)
                    continue
                if step < cost.get((t, now), 1 << 30):
                    cost[(t, now)] = step
                    parent[(t, now)] = (node, loop)
                    open_tests[(t, now)] = here
                    heapq.heappush(heap, (step, tick := tick + 1, t, now))


def _path(parent: dict, at: tuple[Value, bool]) -> tuple[str, ...]:
    out = []
    cur: tuple[Value, bool] | None = at
    while cur is not None and len(out) < 64:
        out.append(_qual(cur[0]))
        cur = parent.get(cur)
    return tuple(reversed(out))
