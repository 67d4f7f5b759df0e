"""Extraction of many kernels at once: a task per launcher (kernels one launcher launches share its task), each
self-checked (on the GPU when there is one, else under the interpreter), and, when a task fails, built again without
what extraction chose by itself (layouts that bound by themselves, an op around the launcher), grown to what its
kernel reads, at the kernel's other launchers, or its inputs written by an LLM; a task that cannot be built at its
first launcher is built at another; a task whose kernels store where an atomic says is built around the op above its
launcher; a kernel its launcher's task never launches gets a task of its own down its branch. ``api.extract`` scans
the target and picks the kernels; this module does the rest."""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from smithbot.config import Target
from smithbot.extract.attempts import Attempt, plan_attempts
from smithbot.extract.build import (NEVER_LAUNCHED, NeedsInputs, atomic_order, branch_values, extract as build,
                                    extract_glue, launched_at, launcher, launchers, self_check)
from smithbot.extract.closure import ExtractError
from smithbot.inputs.grow import grow
from smithbot.inputs.harness import layouts_of
from smithbot.inputs.llm import write_inputs
from smithbot.types import Check, Failure, KernelSite, ScanResult

if TYPE_CHECKING:
    from smithbot.scan.fusion import FusionSite


@dataclass(frozen=True)
class Coverage:
    kernel: str
    path: str
    extracted: bool
    checked: bool
    why: str
    out: Path | None
    failure: Failure | None = None  # how its task's first self-check failed, where it did


def extract_sites(result: ScanResult, sites: list[KernelSite], task_dir_of: Callable[[str], Path], check: bool = True,
                  progress: Callable[[int, int], None] | None = None, jobs: int | None = None,
                  llm: Any = None, timeout_s: float = 300.0,
                  finished_row: Callable[[Coverage], None] | None = None) -> list[Coverage]:
    """A row per kernel of ``sites`` (of the scan ``result``), its task written to ``task_dir_of(name)``; see
    ``api.extract``."""
    run = _Extraction(result, sites, task_dir_of, check, progress, llm, timeout_s, finished_row)
    run.build_all()
    with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
        list(pool.map(run.checked, run.todo))
        run.share_outcomes()
        list(pool.map(run.branch, run.branches))
    return run.rows


class _Gate:
    """Self-checks share the GPU (``shared``), but one that ran out of memory beside the others runs again alone
    (``alone``): it waits for the running ones to end, and new ones wait for it."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.active: list[list[bool]] = []  # each running check's [crowded]
        self.exclusive = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[list[bool]]:
        """Yields ``[crowded]``: whether another check ran beside this one at any time."""
        crowded = [False]
        with self.cond:
            self.cond.wait_for(lambda: not self.exclusive)
            self.active.append(crowded)
            if len(self.active) > 1:
                for box in self.active:
                    box[0] = True
        try:
            yield crowded
        finally:
            with self.cond:
                self.active = [box for box in self.active if box is not crowded]  # by identity: boxes compare equal
                self.cond.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        with self.cond:
            self.cond.wait_for(lambda: not self.exclusive)
            self.exclusive = True  # no new shared check starts
            self.cond.wait_for(lambda: not self.active)
        try:
            yield
        finally:
            with self.cond:
                self.exclusive = False
                self.cond.notify_all()


# a kernel's own task with its launcher's flags set down its branch: (row, its target, flags, own inputs, whether
# around an op, what its row says of the branch where the flags do not say it)
Branch = tuple[int, Target, dict[str, Any], dict[str, Any], bool, str]


class _Extraction:
    """One ``extract_sites`` run: its rows, and the self-checks, rebuilds and branch tasks that fill them in (the
    self-checks run on a thread pool, a row each)."""

    def __init__(self, result: ScanResult, sites: list[KernelSite], task_dir_of: Callable[[str], Path], check: bool,
                 progress: Callable[[int, int], None] | None, llm: Any, timeout_s: float,
                 finished_row: Callable[[Coverage], None] | None) -> None:
        self.result, self.sites, self.task_dir_of, self.check = result, list(sites), task_dir_of, check
        self.progress, self.llm, self.timeout_s, self.finished_row = progress, llm, timeout_s, finished_row
        # a task directory per kernel, named after it; kernels of one name in several files also after their file
        named = collections.Counter(s.name.strip("_") for s in sites)
        self.names = [s.name.strip("_") if named[s.name.strip("_")] == 1 else
                      f"{s.name.strip('_')}-{s.path.removesuffix('.py').replace('/', '.')}" for s in sites]
        # (path, wrapper) each task is built from: the launcher, or the op around it (extract/entry.py)
        self.launchers = [launcher(result.checkout.root, s, result.modules, result.target.inputs) for s in sites]
        self.rows: list[Coverage] = []
        self.no_inputs: set[int] = set()  # rows whose task has no harness yet, for the LLM to write
        self.owner: list[int] = []  # per kernel: the row of the first kernel of its launcher
        self.todo: list[int] = []
        self.finished = 0
        self.launched: dict[Path, tuple[str, ...]] = {}  # task -> the kernels its baseline launched in its self-check
        self.branches: list[Branch] = []
        self.elsewhere: dict[int, str] = {}  # rows built at another launcher than the first: where, and why
        self.gate = _Gate()

    def build_all(self) -> None:
        """Each launcher's task written once (kernels launched by one launcher share its task)."""
        by_wrapper: dict[tuple[str, str], int] = {}
        for site, name, via in zip(self.sites, self.names, self.launchers):
            out = self.task_dir_of(name)
            self.owner.append(by_wrapper.setdefault(via or (site.path, site.name), len(self.rows)))
            if self.owner[-1] != len(self.rows):
                self.rows.append(Coverage(site.name, site.path, False, False, "", None))  # filled in from its owner
                continue
            try:
                done = self._build_somewhere(len(self.rows), out)
            except NeedsInputs as exc:
                self.rows.append(Coverage(site.name, site.path, True, False, str(exc), exc.out))
                self.no_inputs.add(len(self.rows) - 1)
            except ExtractError as exc:
                self.rows.append(Coverage(site.name, site.path, False, False, str(exc), None))
            except Exception as exc:  # noqa: BLE001 - a construct the extractor does not handle yet (a parse error,
                # a recursion too deep...): reported per kernel with its type, and the batch goes on
                self.rows.append(Coverage(site.name, site.path, False, False, f"{site.name}: extractor error: "
                                          f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}", None))
            else:
                self.rows.append(Coverage(site.name, site.path, True, False, self._said("not checked", len(self.rows)),
                                          done))
        self.todo = [i for i, r in enumerate(self.rows) if r.out is not None and self.check]

    def _build_somewhere(self, i: int, out: Path) -> Path:
        """Row ``i``'s task, built at its launcher (or the op around it); where that cannot be built (an import of
        a package serving does not have, in that launcher's module), at the kernel's other launchers in turn (two at
        most), and from then on the row's site is the kernel as that launcher launches it."""
        result, site = self.result, self.sites[i]

        def at(s: KernelSite) -> Path:
            return build(result.checkout.root, result.checkout.commit, result.checkout.url,
                         replace(result.target, reach_presets=s.presets, reach_phases=s.phases), s,
                         result.modules, out, without_inputs=self.llm is not None, name=self.names[i])
        try:
            return at(site)
        except NeedsInputs:
            raise
        except ExtractError as first:
            chosen = launcher(result.checkout.root, site)
            for other in [w for w in launchers(site) if w not in (chosen, self.launchers[i])][:2]:
                try:
                    done = at(launched_at(site, other))
                except ExtractError:
                    continue
                self.sites[i] = launched_at(site, other)
                self.launchers[i] = launcher(result.checkout.root, self.sites[i], result.modules, result.target.inputs)
                first_at = chosen[1] if chosen else None
                self.elsewhere[i] = f"built at its other launcher {other[1]}(); at {first_at}(): {str(first)[:200]}"
                return done
            raise first

    def _said(self, why: str, i: int) -> str:
        """``why`` with where row ``i`` was built, where not at its first launcher."""
        note = self.elsewhere.get(i)
        return f"{why} ({note})" if note else why

    def check_one(self, task_dir: Path) -> Check:
        """The self-check; one that ran out of GPU memory beside others, again alone."""
        with self.gate.shared() as crowded:
            got = self_check(task_dir, self.timeout_s)
        if got.failure is Failure.OUT_OF_MEMORY and crowded[0]:
            with self.gate.alone():
                got = self_check(task_dir, self.timeout_s)
            got = replace(got, why=f"{got.why} (checked alone: it ran out of memory beside other checks)")
        self.launched[task_dir] = got.launched
        return got

    def verified(self, task_dir: Path) -> Check:
        """The self-check, and, when the kernel reads past an inferred input, the inputs grown to what it reads."""
        got = self.check_one(task_dir)
        return got if got.ok else grow(task_dir, got, self.check_one, self.result.target.inputs)

    def ended(self, row: Coverage) -> None:
        """One more self-check done: its row handed on, the progress moved."""
        self.finished += 1
        if self.finished_row is not None:
            self.finished_row(row)
        if self.progress is not None:
            self.progress(self.finished, len(self.todo) + len(self.branches))

    def rebuilt(self, i: int, task_dir: Path, why: str, attempt: Attempt) -> tuple[bool, str]:
        """The failed task of row ``i`` built another way (``attempt``) and checked; kept in its place if that
        passes and launches the row's kernel."""
        site, result = self.sites[i], self.result
        site = launched_at(site, attempt.at) if attempt.at else site
        dest = task_dir.with_name(task_dir.name + ".retry")
        try:
            build(result.checkout.root, result.checkout.commit, result.checkout.url,
                  replace(result.target, reach_presets=site.presets, reach_phases=site.phases,
                          layouts_by_themselves=attempt.by_themselves), site, result.modules, dest,
                  name=self.names[i], op=attempt.op)
            if not attempt.by_themselves and _layouts(dest) == _layouts(task_dir):  # the specs named them all
                shutil.rmtree(dest, ignore_errors=True)
                return False, why
            got = self.verified(dest)
            ok, again = got.ok, got.why
            if ok and self.sites[i].name not in got.launched:  # it passes, but not with this row's kernel
                ok, again = False, f"{NEVER_LAUNCHED} (they launch {', '.join(got.launched) or 'no Triton kernel'})"
        except Exception as exc:  # noqa: BLE001 - the first outcome stands, with this one's reason beside it
            ok, again = False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        if not ok:
            shutil.rmtree(dest, ignore_errors=True)
            return False, f"{why}; {attempt.how}: {again}"
        shutil.rmtree(task_dir, ignore_errors=True)
        dest.rename(task_dir)
        self.launched[task_dir] = self.launched.pop(dest, ())
        return True, f"{again} ({attempt.how}; as first built: {why[:200]})"

    def retried(self, i: int, task_dir: Path, failed: Check) -> tuple[bool, str]:
        """A task that failed its self-check, built again the ways ``plan_attempts`` lists for its failure, until one
        passes."""
        result = self.result
        plain = launcher(result.checkout.root, self.sites[i])
        caller = launcher(result.checkout.root, self.sites[i], result.modules, result.target.inputs, caller=True) \
            if failed.failure is Failure.DISAGREES else None
        ok, why = False, failed.why
        for attempt in plan_attempts(failed.failure or Failure.BROKEN,
                                     bool(_layouts(task_dir)),  # a layout bound by itself
                                     self.launchers[i], plain, caller, launchers(self.sites[i])):
            ok, why = self.rebuilt(i, task_dir, why, attempt)
            if ok:
                break
        return ok, why

    def in_order(self, i: int, task_dir: Path, why: str) -> str:
        """A passing task whose kernels store where an atomic says (``atomic_order``): its outputs follow the order its
        programs run in, which a self-check need not show (the interpreter runs them one by one; a GPU may happen to
        keep one order twice). Built around the op that calls its launcher, whose result does not depend on that
        order, where there is one, and kept if that passes; else it stays as it is, and its row says so. Returns the
        row's line: the task passes either way."""
        ordered = atomic_order((task_dir / "kernel.py").read_text())
        if not ordered:
            return why
        result = self.result
        caller = launcher(result.checkout.root, self.sites[i], result.modules, result.target.inputs, caller=True)
        if caller is None or caller == self.launchers[i]:
            return why
        how = (f"around the op {caller[1]}() that calls it ({', '.join(ordered)} stores where an atomic says: its "
               "outputs follow the order the programs run in)")
        return self.rebuilt(i, task_dir, why, Attempt(how, op="caller"))[1]

    def checked(self, i: int) -> None:
        """Row ``i``'s task self-checked; built again, or its inputs asked of the LLM, where that fails."""
        rows = self.rows
        task_dir: Path = rows[i].out  # type: ignore[assignment]
        failure = None
        if i in self.no_inputs:
            ok, why = False, rows[i].why
        else:
            got = self.verified(task_dir)
            ok, why = self.retried(i, task_dir, got) if not got.ok else (True, self.in_order(i, task_dir, got.why))
            failure = got.failure
        if not ok and self.llm is not None:
            ok, why = write_inputs(task_dir, why, self.llm[0], self.llm[1], self.check_one)
        why = self._said(why, i)
        if i in self.no_inputs and not ok:  # no inputs, none written: the task is not kept
            shutil.rmtree(task_dir, ignore_errors=True)
            rows[i] = Coverage(rows[i].kernel, rows[i].path, False, False, f"{rows[i].why}; {why}", None)
        else:
            rows[i] = Coverage(rows[i].kernel, rows[i].path, True, ok, why, task_dir, None if ok else failure)
        self.ended(rows[i])

    def share_outcomes(self) -> None:
        """Kernels that share a launcher share its task, and its outcome if it ran; a kernel its launcher's task did
        not launch gets a task of its own down its branch (``branches``)."""
        rows = self.rows
        firsts = {o: rows[o] for o in set(self.owner)}
        for i, site in enumerate(self.sites):
            first = firsts[self.owner[i]]
            ran = self.launched.get(first.out) if first.out is not None else None
            if first.checked and ran is not None and site.name not in ran:
                rows[i] = Coverage(site.name, site.path, True, False, f"{NEVER_LAUNCHED} (they launch "
                                   f"{', '.join(ran) or 'no Triton kernel'})", first.out)
            elif self.owner[i] != i:
                rows[i] = replace(first, kernel=site.name, path=site.path)
            if self.check and (self.owner[i] != i or rows[i].why.startswith(NEVER_LAUNCHED)) and rows[i].extracted \
                    and not rows[i].checked and site.name not in (ran or ()):
                branch = self._branch_for(i, site)
                if branch is not None:
                    self.branches.append(branch)

    def _branch_for(self, i: int, site: KernelSite) -> Branch | None:
        """The task that takes kernel ``i``'s branch of its launcher: the launcher's flags set down it (parameters,
        or its module's settings, as stubs), with the kernel's own specs; or its own launcher's task, where an op
        takes its path only where this check does not run."""
        result = self.result
        wrapper, values, settings = branch_values(result.checkout.root, site, result.modules, result.target.inputs)
        wrapper = wrapper.replace(".", "_")  # a method launcher's inputs are those of Cls_method
        target = replace(result.target.for_launcher((self.launchers[i] or ("", ""))[0], wrapper),
                         reach_presets=site.presets, reach_phases=site.phases)
        kernels = target.inputs.get(wrapper, {}).get("_kernels", {})
        own = kernels.get(site.name, {})
        # the shared task took another kernel's own specs: this kernel's are the launcher's plain ones
        plain = self.sites[self.owner[i]].name in kernels
        at = launcher(result.checkout.root, site)
        if values or own or settings or plain:
            target = target.with_stubs(settings)
            return i, target.with_inputs(wrapper, {**values, **own}), {**values, **settings}, own, True, ""
        if at is not None and at != self.launchers[i]:
            # an op that takes this kernel's path only where this check does not run (lmdeploy's compact MoE GEMM,
            # on an SM90 GPU alone): the task of its own launcher
            return (i, replace(result.target.for_launcher(at[0], at[1].replace(".", "_")),
                               reach_presets=site.presets, reach_phases=site.phases), {}, {}, False, "")
        # the shared task kept the branch serving takes (`if residual is not None:`, and serving passes none): this
        # kernel's own task keeps its branch, by its own launches' decisions
        mine = {test for launch in site.launches for test, _ in launch.decided}
        against = [f"`{test}` is {taken}" for launch in self.sites[self.owner[i]].launches
                   for test, taken in launch.decided if test not in mine]
        if against:
            return i, target, {}, {}, True, f"its own branch, which serving does not take ({'; '.join(against)})"
        return None

    def branch(self, item: Branch) -> None:
        """Its own task, with the launcher's flags (parameters, or its module's settings, as stubs) set to take the
        branch that launches this kernel; without ``op``, built around its launcher, not the op."""
        i, target, values, own, op, said = item
        site, rows, result = self.sites[i], self.rows, self.result
        said = said or ", ".join([f"{k}={v!r}" for k, v in values.items() if k not in own]
                                 + ["its own inputs"] * bool(own)) or (
            "the launcher's plain inputs" if op else  # not another kernel's specs
            f"its launcher's task, not the op {(self.launchers[i] or ('', ''))[1]}()'s")
        final = self.task_dir_of(self.names[i])
        if any(r.out == final and r.checked for r in rows):  # another kernel's passing task: keep it
            final = final.with_name(final.name + "-branch")
        dest = final.with_name(final.name + ".tmp")
        shutil.rmtree(dest, ignore_errors=True)
        try:
            done = build(result.checkout.root, result.checkout.commit, result.checkout.url, target, site,
                         result.modules, dest, name=self.names[i], op=op)
            got = self.verified(done)
            ok, why = got.ok, got.why
        except Exception as exc:  # noqa: BLE001 - reported in the row, as in the first pass
            ok, why = False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        if ok and site.name in self.launched.get(dest, ()):
            shutil.rmtree(final, ignore_errors=True)
            dest.rename(final)
            rows[i] = Coverage(site.name, site.path, True, True, f"{why} (with {said})", final)
        else:
            shutil.rmtree(dest, ignore_errors=True)
            rows[i] = Coverage(site.name, site.path, rows[i].extracted, False, f"{rows[i].why}; with {said}: "
                               f"{why if not ok else 'still not launched'}", rows[i].out)
        self.ended(rows[i])


def extract_glue_site(result: ScanResult, site: FusionSite, out: Path | None, base: Path, check: bool,
                      timeout_s: float) -> Coverage:
    """The fusion task of one run of torch glue (at ``out``, else under ``base``), self-checked: its torch baseline
    must run on every case. Its cases are those of the presets whose default path runs it, in the phases they run it
    in, as a kernel's are."""
    label = site.name
    dest = out or base / f"{site.function.replace('.', '_').strip('_')}_glue_{site.first}"
    target = replace(result.target, reach_presets=tuple(site.presets), reach_phases=site.phases)
    try:
        task = extract_glue(result.checkout.root, result.checkout.commit, result.checkout.url, target, site,
                            result.modules, dest)
    except ExtractError as exc:
        return Coverage(label, site.path, False, False, str(exc), None)
    if not check:
        return Coverage(label, site.path, True, False, "not checked", task)
    got = self_check(task, timeout_s)
    return Coverage(label, site.path, True, got.ok, got.why, task, got.failure)


def _layouts(task_dir: Path) -> set[str]:
    """The layouts a task's inputs come from."""
    return layouts_of((task_dir / "harness.py").read_text())
