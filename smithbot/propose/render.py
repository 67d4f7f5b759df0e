"""PR bodies, generated tests and benchmark scripts, rendered from ``templates/`` for a target's style.

The PR body follows the target's template headings (``templates/pr/<style>.md.j2``), carries the benchmark table,
method, environment, correctness evidence, what changed and why, a reproduce command, the closing-stops-it note and a
hidden metadata comment. It stays under 60,000 characters: the ``<details>`` blocks are truncated first. Text that
an LLM wrote is cleaned of @-mentions and ``#123`` references before it goes in.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import jinja2

from evaluator import Task
from evaluator.pool import DEFAULT_ROUNDS
from evaluator.task import Definition
from evaluator.tolerances import DTYPES, TOLERANCES
from evaluator.verdict import changed_cases
from smithbot import __version__
from smithbot.config import Engine, Target, templates_dir
from smithbot.errors import SmithbotError
from smithbot.evolve import tune
from smithbot.extract.glue import served_condition, served_tests
from smithbot.measure import batch_of, decode_case
from smithbot.propose.reinsert import changed_definitions
from smithbot.propose.testcode import inputs_code, needed_imports, reference_code

MAX_BODY = 60_000
class RenderError(SmithbotError):
    """A proposal that cannot be written within the forge's limits."""
# a generated test stays a test a maintainer reads through: its most lines for a launch-config change, for a new kernel
MAX_TEST_LINES = {"tune": 150, "kernel": 300}
# What a preview's body (a fusion verified on the interpreter) says first: it is no pull request to open as it stands
PREVIEW_BANNER = ("> **Preview, not a pull request.** Verified on the Triton interpreter, without a GPU: the new code "
                  "matches the glue on every case and launches fewer kernels, but it has not been timed. "
                  "`smithbot propose --submit` refuses a preview; the timing section below says how to time it.\n\n")
METADATA = re.compile(r"<!-- smithbot-metadata: (\{.*?\}) -->")


def sanitize(text: str) -> str:
    """No pings and no cross-references from generated text: drop '@' before names and '#' before numbers."""
    text = re.sub(r"(?<![\w.`])@([A-Za-z0-9][\w-]*)", r"\1", text)
    return re.sub(r"(?<![\w&/`])#(\d+)\b", r"\1", text)


def module_of(path: str) -> str:
    """The import path of a target file (sglang keeps its package under python/)."""
    p = path.removesuffix(".py").removeprefix("python/")
    return p.replace("/", ".").removesuffix(".__init__")


def knob_changes(base: str, cand: str) -> list[str]:
    """Plain-words launch-config changes between two programs, by knob location and name."""
    def table(src: str) -> dict[tuple[str, str, int], Any]:
        seen: dict[tuple[str, str], int] = {}
        out = {}
        for k in tune.knobs(src):
            i = seen.get((k.where, k.name), 0)
            seen[(k.where, k.name)] = i + 1
            out[(k.where, k.name, i)] = k
        return out

    b, c = table(base), table(cand)
    lines = []
    for key, kc in c.items():
        kb = b.get(key)
        before = kb.value if kb else None
        if kc.value != before:
            def show(v: Any, k: tune.Knob) -> str:
                if v is None:  # not set in the base (Triton's default), or computed by an expression
                    return "the original setting"
                if isinstance(v, tuple):
                    return f"{v[0]} when {k.bucket} <= {tune.BUCKET}, else {v[1]}"
                return str(v)
            lines.append(f"{kc.where}: `{kc.name}` {show(before, kc)} → {show(kc.value, kc)}")
    return lines


@dataclass(frozen=True)
class Rendered:
    body: str
    test_path: str
    test: str
    bench_path: str  # "" where the target's PRs carry no benchmark script
    bench: str


def _split_module(src: str) -> tuple[list[str], str]:
    """A module's top-level imports and the rest of its code, without the module docstring or the EVOLVE markers:
    the generated files gather every import at their top, once."""
    tree = ast.parse(src)
    lines = src.splitlines()
    imports, drop = [], set()
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            drop.update(range(node.lineno - 1, node.end_lineno or node.lineno))  # the docstring
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            drop.update(range(node.lineno - 1, node.end_lineno or node.lineno))
            imports.append(ast.unparse(node))
    body = [line for i, line in enumerate(lines) if i not in drop
            and line.strip() not in ("# EVOLVE-BLOCK-START", "# EVOLVE-BLOCK-END")]
    return imports, re.sub(r"\n{3,}", "\n\n\n", "\n".join(body)).strip() + "\n"


def _import_groups(imports: list[str]) -> list[list[str]]:
    """Imports as isort lays them out: the standard library, then third-party packages, each sorted, once."""
    def top(imp: str) -> str:
        return imp.split()[1].split(".")[0]

    unique = sorted(set(imports), key=lambda i: (i.startswith("from "), top(i), i))
    groups = [[i for i in unique if top(i) in sys.stdlib_module_names],
              [i for i in unique if top(i) not in sys.stdlib_module_names]]
    return [g for g in groups if g]


def _gains(cases: list[dict[str, Any]], min_gain: float) -> str:
    """Which shapes gain: the cases the verdict shows faster, and those left unchanged (within the noise)."""
    named = changed_cases(cases, min_gain)
    faster, same = named["faster"], named["unchanged"]
    if not same:
        return f"Faster by over {min_gain:.0%} on every case, each by its own sign test."
    return (f"Faster by over {min_gain:.0%} on {len(faster)} of {len(cases)} cases ({', '.join(f'`{n}`' for n in faster)}), "
            f"each by its own sign test; unchanged within the noise on {', '.join(f'`{n}`' for n in same)}.")


def _cases(task: Task, with_dtype: bool) -> str:
    """The cases as a Python list, a row each; ``cpu``: small enough for the Triton interpreter. A case's dtype only
    ``with_dtype`` (the inputs read it): a label the tensors do not have would mislead."""
    rows = [{"name": c.name, **({"dtype": DTYPES[c.dtype]} if with_dtype else {}), **c.dims, **c.params,
             "cpu": c.interpreter} for c in task.cases]
    text = ",\n".join("    " + json.dumps(r).replace("true", "True").replace("false", "False").replace("null", "None")
                      for r in rows)
    return f"[\n{text},\n]"


def _hot_spot(hotness: dict[str, Any], engine: Engine | None = None) -> str:
    """Where the kernel runs, for the Motivation: the profile's share, else the default serving path, and whether
    that path is decided (default) or only possible, with the tests smithbot could not decide; where the target has
    several engines, which of the presets run this one by default and which need its flag."""
    out = ""
    if hotness.get("measured"):
        out += f" It takes {hotness['measured']}."
    possible = hotness.get("reach") == "possible"
    if hotness.get("default_path"):
        presets = ", ".join(hotness.get("presets", []))
        out += f" Default serving {'may run' if possible else 'runs'} it for {presets}: `{hotness['default_path']}`."
    if possible and hotness.get("undecided"):
        out += (" smithbot could not decide these tests on the way there, so this path is possible, not certain: "
                + "; ".join(f"`{t}`" for t in hotness["undecided"]) + ".")
    if engine is not None and hotness.get("presets"):
        out += " " + engine.note(list(hotness["presets"]))
    return out


def _entry_def(task: Task, added: tuple[str, ...] = ()) -> Any:
    """The task's entry point among its provenance definitions (the first one when none has its name); for a fusion
    task made from torch glue, in the module the proposal adds (``added``: ``path::name``), else the glue's file."""
    if task.provenance.glue:
        path, _, name = next(iter(added), f"{task.provenance.glue['path']}::{task.entry}").partition("::")
        return Definition(name, path, name)
    return next((d for d in task.provenance.definitions if d.name == task.entry), task.provenance.definitions[0])


def _kernel_def(task: Task, base_src: str) -> Any:
    """The Triton kernel a kernel task's entry launches, among its provenance definitions: the first one the task's
    code decorates with ``triton.jit`` (or an autotuner) and launches with a grid, else the first jitted one, else
    the first that is not the entry (a helper such as ``_unsqueeze_to_3d`` is no kernel)."""
    try:
        tree = ast.parse(base_src)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    jitted = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
              and any("jit" in ast.unparse(d) or "autotune" in ast.unparse(d) for d in n.decorator_list)}
    launched = {ast.unparse(n.value) for n in ast.walk(tree) if isinstance(n, ast.Subscript)} & jitted
    others = [d for d in task.provenance.definitions if d.name != task.entry]
    return next((d for d in others if d.name in launched), None) or next(
        (d for d in others if d.name in jitted), None) or next(iter(others), _entry_def(task))


def reads_case_dtype(inputs: str) -> bool:
    """Whether the test's ``make_inputs`` code makes any tensor in the case's dtype (else every dtype is its own)."""
    return bool(re.search(r"""case(\[|\.get\()["']dtype["']""", inputs))


def kernel_dtypes(task: Task, code: str, case_dtype: bool) -> list[str]:
    """The torch dtypes this kernel's task works in: its cases' dtypes (where its inputs take them) and those its
    ``code`` (the kernel and the harness) names (an fp8 output, fp32 scales), so that the PR lists only their
    tolerances."""
    used = {DTYPES[c.dtype] for c in task.cases if case_dtype} | {
        d for d in TOLERANCES if re.search(rf"\b(torch|tl)\.{d}\b", code)}
    return [d for d in TOLERANCES if d in used and d != "float64"]


def shown_cases(cases: list[dict[str, Any]], task: Task, models: tuple[str, ...]) -> list[dict[str, Any]]:
    """The verified cases a maintainer reads: those of the presets that run the kernel (where scan knows them) and the
    irregular ones, one row per distinct shape; a row lists the other presets' names for the same shape."""
    presets = set(task.hotness.get("presets") or ())
    shapes = {c.name: (c.regime, c.dtype, tuple(sorted(c.dims.items())), tuple(sorted(c.params.items())))
              for c in task.cases}
    rows: dict[Any, dict[str, Any]] = {}
    for c in cases:
        preset = next((m for m in models if c["name"].startswith(f"{m}-")), None)
        if presets and preset is not None and preset not in presets:
            continue
        key = shapes.get(c["name"], c["name"])
        if key in rows:
            rows[key]["also"].append(c["name"])
        else:
            rows[key] = {**c, "also": []}
    return list(rows.values())


def launched_kernels(source: str) -> list[str]:
    """The Triton kernels a candidate's code launches (``name[grid](...)`` of its ``@triton.jit`` functions)."""
    tree = ast.parse(source)
    jit = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
           and any("jit" in ast.unparse(d) for d in f.decorator_list)}
    return sorted({n.value.id for n in ast.walk(tree) if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
                   and n.value.id in jit})


def _kernels_phrase(n: int) -> str:
    return "one kernel" if n <= 1 else f"{n} Triton kernels"


def title(task: Task, verdict: dict[str, Any], config_only: bool, source: str = "", preview: bool = False,
          interpreter: bool = False) -> str:
    """The PR title: an area tag as engines' maintainers tag kernel PRs, and a config-only change says so; a fusion
    says how many kernels its candidate (``source``) launches in place of the glue; a preview says it is not timed,
    and a speedup timed on the Triton interpreter says so."""
    glue = task.provenance.glue
    names = " ".join([_entry_def(task).path, *(d.name for d in task.provenance.definitions),
                      glue["function"] if glue else ""]).lower()
    tag = "[MoE]" if "moe" in names else ("[Perf]" if config_only else "[Kernel]")
    # a launcher that reads an object's attributes is entered through a flat stand-in extraction wrote
    # (``BlockTable_compute_slot_mapping_flat``): the engine has no such name, so the title names the kernel, which
    # extraction writes first in the description
    name = task.description.split(" ", 1)[0] if task.kind == "triton" and task.entry.endswith("_flat") else task.entry
    what = (f"Retune the launch config of {name} (config only)" if config_only else
            f"Fuse the torch glue of {glue['function']} into {_kernels_phrase(len(launched_kernels(source)))}"
            if glue else f"Faster {name}")
    if preview:
        return f"{tag} {what} (preview: correct on {len(verdict['cases'])} model shapes, not yet timed on a GPU)"
    where = " on the Triton interpreter (CPU)" if interpreter else ""
    return f"{tag} {what}: {verdict['speedup']:.2f}x{where} on {len(verdict['cases'])} model shapes"


def end_to_end(task: Task, verdict: dict[str, Any], interpreter: bool) -> str:
    """What the change saves per step, in absolute terms: the verified time saved per call at the decode case of
    batch 64 (else the nearest batch) times the calls per step the call graph counts ("saves 18 µs per decode step of
    deepseek-v3 at batch 64 (61 launches × 0.30 µs)"), and at the preset's other decode batches where the verified
    interval says it moved; then the share the kernel has of a profile, labelled as the share of the measured part
    when the profile was measured from tasks. No claim about the whole step is made without an engine's profile."""
    per_step = task.hotness.get("per_step") or {}
    cases = {c["name"]: c for c in verdict["cases"]}
    saving = ""
    for preset, n in per_step.items():
        case = cases.get(decode_case(list(cases), preset) or "")
        if case is None or interpreter or case.get("base_us") is None:
            continue
        batch = batch_of(case["name"])
        each = case["base_us"] - case["cand_us"]
        calls = ("launch" if task.kind == "triton" else "run") + ("" if n == 1 else "es" if task.kind == "triton"
                                                                 else "s")
        times = f"`{case['name']}`: {case['base_us']:.2f} → {case['cand_us']:.2f} µs"
        lo, hi = case.get("ratio_ci") or (1.0, 1.0)
        if lo > 1.0 or hi < 1.0:  # the case's interval says which way it went
            saving = (f"Per step: {'saves' if each >= 0 else 'costs'} {abs(n * each):.1f} µs per decode step of "
                      f"{preset} at batch {batch} ({n} {calls} × {abs(each):.2f} µs, from the verified times of "
                      f"{times}). ")
        else:
            saving = (f"Per step: no measurable change per decode step of {preset} at batch {batch} ({n} {calls}; "
                      f"{times}, ratio interval [{lo:.3f}, {hi:.3f}]). ")
        for other in sorted((c for name, c in cases.items() if name.startswith(f"{preset}-decode-")
                             and c is not case and c.get("base_us") is not None and c.get("ratio_ci")
                             and (c["ratio_ci"][0] > 1.0 or c["ratio_ci"][1] < 1.0)),
                            key=lambda c: batch_of(c["name"])):  # the preset's other decode batches that moved
            d = other["base_us"] - other["cand_us"]
            saving += (f"At batch {batch_of(other['name'])} it {'saves' if d >= 0 else 'costs'} {abs(n * d):.1f} µs "
                       f"per decode step ({n} {calls} × {abs(d):.2f} µs, `{other['name']}`: {other['base_us']:.2f} → "
                       f"{other['cand_us']:.2f} µs). ")
        break
    share, measured = task.hotness.get("share"), task.hotness.get("measured") or ""
    if share and "from extracted tasks" in measured:
        return saving + (f"Its share: {measured}: the part of the step `smithbot profile --from-tasks` timed, not the "
                         "whole step; end to end is not measured (no engine run).")
    if share:
        step = (1 - share) + share / verdict["speedup"]
        return saving + (f"End to end (an estimate from an engine's profile, not a measurement): the kernel takes "
                         f"{measured or f'{share:.1%} of a step'}; at {verdict['speedup']:.3f}× that step would take "
                         f"{step:.2%} of its time, {1 - step:.2%} less (Amdahl's law).")
    return saving + ("End to end: not measured (no engine run), and no profile to estimate it from; the kernel-level "
                     "table above is the evidence.")


def compiled_bar(verdict: dict[str, Any], shown: list[dict[str, Any]]) -> tuple[bool, str]:
    """(whether the table has torch.compile's column, the sentence that says how the change fares against it). A
    fusion's verification times the original code under torch.compile too (``EvalResult.compiled``); each shown row
    gets its time there (``compiled_us``) and the new code's speed against it (``vs_compiled``)."""
    bar = verdict.get("compiled") or {}
    if not bar:
        return False, ""
    if "error" in bar:
        return False, (f"torch.compile (`{bar['mode']}`) of the original code failed, so the engine cannot compile "
                       f"this path as it stands: {bar['error'].splitlines()[0][:300]}")
    by_name = {c["name"]: c for c in bar["cases"]}
    for row in shown:
        c = by_name.get(row["name"])
        row["compiled_us"] = c["us"] if c else None
        row["vs_compiled"] = c["us"] / row["cand_us"] if c and row["cand_us"] else None
    ratio = verdict["speedup"] / bar["geomean"]
    said = (f"torch.compile (`{bar['mode']}`) of the original code is {bar['geomean']:.2f}× eager on the geomean "
            f"[{bar['ci'][0]:.2f}, {bar['ci'][1]:.2f}]; the new code is {ratio:.2f}× torch.compile's speed. ")
    said += ("It beats torch.compile on the geomean" if bar["ci"][1] < verdict["ci"][0] else
             "It does not beat torch.compile: compiling this code would do as well" if ratio < 1 else
             "It is about even with torch.compile (the intervals overlap); unlike it, it needs no compile step in "
             "the engine")
    behind = [r["vs_compiled"] for r in shown if r.get("vs_compiled") and r["vs_compiled"] < 1]
    if behind and ratio >= 1:
        said += (f"; on {len(behind)} of the {len(shown)} shapes shown torch.compile is faster, by up to "
                 f"{(1 / min(behind) - 1) * 100:.0f}%")
    return True, said + "."


def case_span(ratios: dict[str, float]) -> str:
    """The speedups of the decode cases and of the prefill cases, each as its range: ``decode cases 1.04–1.15×;
    prefill cases 2.13×`` (one figure where the range rounds to one)."""
    spans = []
    for label in ("decode", "prefill"):
        got = [f"{r:.2f}" for n, r in ratios.items() if label in n]
        if got:
            low, high = min(got, key=float), max(got, key=float)
            spans.append(f"{label} cases {low}×" if low == high else f"{label} cases {low}–{high}×")
    return "; ".join(spans)


def _story(task: Task, cand: Any, v: dict[str, Any], kernel_def: Any, op: str, base_src: str, interpreter: bool,
           preview: bool) -> tuple[str, str]:
    """The PR's "What changed" and its Motivation: a launch retune's knobs, a search's explanation, or Inductor's
    kernels for a glue; the speedup with the span of decode and prefill cases, or for a preview the launches saved."""
    glue = task.provenance.glue
    span = case_span({c["name"]: c["ratio"] for c in v["cases"]})
    if cand.proposer == "tune":
        changes = knob_changes(base_src, cand.source)
        what = ("Only the launch configuration changed:\n" + "\n".join(f"- {c}" for c in changes) +
                "\n\nThe arithmetic and the memory traffic are the same as before; "
                + (f"the gain was timed on the Triton interpreter (CPU) at these shapes: {span}; how the launch maps "
                   "onto a GPU is for a GPU run to show." if interpreter else
                   "the gain comes from how the work maps onto the GPU (warps per program, pipeline stages, tile "
                   f"sizes) at these shapes: {span}."))
        motivation = (f"`{kernel_def.name}` ({kernel_def.path}) runs faster with a different launch configuration: "
                      f"{(v['speedup'] - 1) * 100:.1f}% on the geomean of the model shapes below ({span}), with the "
                      "same results.")
    else:
        explanation = re.sub(r"```.*?```|<{5,}.*?>{5,} ?REPLACE", "", cand.response or "", flags=re.DOTALL).strip()
        what = sanitize(explanation[:3000]) or "The kernel was rewritten; the diff below shows how."
        if glue:  # the search's words name the task's entry; the patch names the launcher for what it computes
            what = re.sub(rf"\b{re.escape(task.entry)}\b", op, what)
        if cand.proposer == "inductor":  # torch.compile's kernels for the glue, made standalone, perhaps retuned
            what = (f"The glue's ops run as {_kernels_phrase(len(launched_kernels(cand.source)))} "
                    f"({', '.join(f'`{k}`' for k in launched_kernels(cand.source))}): the code torch.compile "
                    "(Inductor) generates for these lines, made standalone by smithbot (plain `@triton.jit` kernels, "
                    "Inductor's helpers inlined, no `torch._inductor` import, no compile step in the engine)"
                    + (f", with its launch retuned on the shapes below: {what}" if cand.edit_format == "tune"
                       else "") + ".")
        motivation = (f"`{kernel_def.name}` ({kernel_def.path}): {(v['speedup'] - 1) * 100:.1f}% faster on the geomean "
                      f"of the model shapes below ({span}), with the same results.")
        if glue:
            first, last = glue["lines"]
            todo = next(iter(task.hotness.get("todos") or ()), "").split(": ", 1)[-1]  # "45: TODO: fuse ..."
            n = len(launched_kernels(cand.source or ""))
            # what the glue launches: the evaluator's count a call on the verified cases, else scan's estimate a step
            counted = sorted({c["launches"][0] for c in v["cases"] if c.get("launches")})
            per_step = task.hotness.get("launches_per_step")
            span_n = (str(counted[0]) if len(counted) == 1 else f"{counted[0]}-{counted[-1]}") if counted else ""
            launches = (f" launches {span_n} kernels a call" if counted else
                        f" launches {per_step} small kernels a step" if per_step else "")
            gain = ("the same results in fewer launches on every model shape below (not yet timed: no GPU)." if preview
                    else f"{v['speedup']:.2f}× as fast on the geomean of the model shapes below ({span}), with the "
                         "same results.")
            served = served_tests(glue.get("folded"), glue.get("pinned"), glue.get("inputs") or {})
            motivation = (f"The torch glue of `{glue['function']}()` ({glue['path']}:{first}-{last}){launches}. "
                          + (f"One Triton kernel, launched by `{op}` ({kernel_def.path}), replaces" if n <= 1
                             else f"{n} Triton kernels, launched by `{op}` ({kernel_def.path}), replace")
                          + f" those lines: {gain}"
                          + (f" It does what the code's own `{todo.strip()}` asked for." if todo else "")
                          + (f" The kernel computes these lines where `{served_condition(served)}`, as "
                             "default serving has it; elsewhere the original lines still run." if served else ""))
    return what, motivation


def render(target: Target, task: Task, verification: dict[str, Any], verdict: dict[str, Any], cand: Any,
           replaced: tuple[str, ...], added: tuple[str, ...], notes: list[str], patch: str,
           base_commit: str, taken: Callable[[str], bool] = lambda rel: False) -> Rendered:
    """The PR body, the generated test and, where the target wants one, the benchmark script. ``taken``: whether the
    target already has a file at a path (its own tests of the op): the generated files never replace one."""
    style = target.conventions.pr_style  # (a template of that name exists: the target YAML is checked on load)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir()), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    glue = task.provenance.glue
    entry_def = _entry_def(task, added)
    base_src = task.kernel_path.read_text(encoding="utf-8")
    kernel_def = entry_def if glue else _kernel_def(task, base_src)
    op = entry_def.name  # the fused launcher's name, for glue; the task's entry, for a kernel
    area = Path(entry_def.path).parent.name
    test_path = _free(target.conventions.test_layout.format(op=op, area=area), taken)
    bench_path = _free(str(Path(test_path).parent / f"bench_{op}.py"), taken)
    harness_src = task.harness_path.read_text(encoding="utf-8")
    interpreter = verification["backend"] == "interpreter"
    preview = bool(verification.get("preview"))  # a fusion checked on the interpreter: correct, fewer launches, untimed
    v = {"speedup": verdict["speedup"], "ci": verdict["ci"], "cases": verdict["cases"]}
    ratios = {c["name"]: c["ratio"] for c in verdict["cases"]}
    what, motivation = _story(task, cand, v, kernel_def, op, base_src, interpreter, preview)
    if interpreter and not preview:
        motivation = "Timed on the Triton interpreter on a CPU (this does not predict GPU speed): " + motivation
    motivation += _hot_spot(task.hotness, target.serving.engine)
    e = verification.get("env", {})
    env_line = ", ".join(f"{k} {e[k]}" for k in ("gpu", "driver", "torch", "triton") if e.get(k)) or "CPU (Triton interpreter)"
    case_keys = {"name", "dtype", *(k for c in task.cases for k in (*c.dims, *c.params))}
    input_imports, inputs = inputs_code(harness_src, {DTYPES[c.dtype] for c in task.cases}, case_keys)
    case_dtype = reads_case_dtype(inputs)
    dtypes = kernel_dtypes(task, base_src + inputs, case_dtype)
    # (none where its code names no float dtype: the template then says the evaluator's tolerance applies)
    tol = "per output dtype: " + ", ".join(f"{d} atol {TOLERANCES[d].atol:g} rtol {TOLERANCES[d].rtol:g} "
                                           f"relative RMS {TOLERANCES[d].rel_rms:g}"
                                           for d in dtypes) if dtypes else ""
    shown = shown_cases(verdict["cases"], task, tuple(m.name for m in target.models))
    compiled, bar = compiled_bar(verdict, shown)
    presets = ", ".join(task.hotness.get("presets") or ())
    shown_note = (f"Shown: the {len(shown)} distinct shapes of the presets that run this kernel ({presets}) and the "
                  f"irregular ones; the geomean covers all {len(verdict['cases'])} verified cases."
                  if len(shown) < len(verdict["cases"]) else "")
    # a benchmark script only where the repository's kernel PRs carry one; otherwise the table above is the evidence
    with_bench = target.conventions.benchmark
    reproduce = (f"python -m pytest {test_path}   # on a CUDA GPU: the original against the new one, on these shapes\n"
                 f"TRITON_INTERPRET=1 python -m pytest {test_path}   # on a CPU: the Triton interpreter, small shapes "
                 "only (without the variable the test skips on a CPU)")
    if with_bench:
        reproduce += f"\npython {bench_path}   # both timed with triton.testing.do_bench_cudagraph"
    variant = cand.source_hash or ""
    meta = {"kernel": f"{kernel_def.path}::{kernel_def.qualname}", "base_commit": base_commit,
            "variant": variant, "smithbot": __version__, "task": task.id}
    rounds = verification.get("rounds", DEFAULT_ROUNDS["interpreter" if interpreter else "cuda"])
    gains = "" if preview else _gains(verdict["cases"], verification.get("min_gain", 0.02))
    ctx: dict[str, Any] = dict(
        v=v, shown=shown, shown_note=shown_note, e2e="" if preview else end_to_end(task, verdict, interpreter),
        interpreter=interpreter, fusion=bool(glue), compiled=compiled, bar=bar, preview=preview,
        run_id=verification.get("run", ""),
        rounds=rounds, env_line=env_line, gains=gains,
        commit=base_commit[:12], seeds=verification["seeds"], case_names=", ".join(ratios),
        tolerances=tol,
        test_path=test_path, bench_path=bench_path if with_bench else "", what_changed=what, replaced=replaced,
        added=added, notes=notes,
        version=__version__, proposer=cand.proposer, reproduce=reproduce, kernel=kernel_def.name,
        kernel_path=kernel_def.path, motivation=motivation, formatter=_formatted(target, notes),
        metadata=f"<!-- smithbot-metadata: {json.dumps(meta, sort_keys=True)} -->", patch=patch)
    template = env.get_template(f"pr/{style}.md.j2")
    banner = PREVIEW_BANNER if preview else ""
    body = banner + template.render(**ctx)
    if len(body) > MAX_BODY:  # the details (the diff) go first
        keep = max(0, len(patch) - (len(body) - MAX_BODY) - 200)
        ctx["patch"] = patch[:keep] + "\n... (truncated: the full diff is in the branch)"
        body = banner + template.render(**ctx)
    if len(body) > MAX_BODY:
        raise RenderError(f"the PR body is {len(body)} characters even without the diff (limit {MAX_BODY})")
    test, bench = _test_files(env, target, task, cand, op, module_of(entry_def.path), base_src, base_commit,
                              (input_imports, inputs, case_dtype), dtypes, bench_path if with_bench else "")
    return Rendered(body, test_path, test, bench_path if with_bench else "", bench)


def _free(rel: str, taken: Callable[[str], bool]) -> str:
    """``rel``, or beside it ``<stem>_reference`` (then numbered) where the target already has that file."""
    path, n, out = Path(rel), 0, rel
    while taken(out):
        n += 1
        out = str(path.with_name(f"{path.stem}_reference{n if n > 1 else ''}{path.suffix}"))
    return out


def _new_side(task: Task, op: str, module: str, base_src: str) -> tuple[str, str]:
    """How the generated files reach the new code: ``(import, definition)``. The launcher is imported from the target
    as ``<entry>_new``; but where the task's entry is extraction's flat wrapper around a method (``Class_method_flat``
    builds a stand-in ``self`` and calls the method, which the target has only as ``Class.method``), the wrapper is
    written again as ``<entry>_new``, calling the target's own method on the same stand-in."""
    plain = (f"from {module} import {op} as {task.entry}_new", "")
    if task.entry in {d.name for d in task.provenance.definitions}:
        return plain
    try:
        tree = ast.parse(base_src)
    except SyntaxError:
        return plain
    flat = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == task.entry), None)
    called = {c.func.id for c in ast.walk(flat) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)} \
        if flat is not None else set()
    hit = [d for d in task.provenance.definitions if d.name in called and "." in d.qualname]
    if len(hit) != 1:
        return plain
    method = hit[0]

    class _ToTarget(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == method.name:
                node.func = ast.parse(method.qualname, mode="eval").body
            return node

    new = _ToTarget().visit(copy.deepcopy(flat))
    new.name = f"{task.entry}_new"
    return f"from {module_of(method.path)} import {method.qualname.split('.')[0]}", ast.unparse(new)


def _test_files(env: jinja2.Environment, target: Target, task: Task, cand: Any, op: str, module: str, base_src: str,
                base_commit: str, made: tuple[list[str], str, bool], dtypes: list[str],
                bench_path: str) -> tuple[str, str]:
    """The generated test, and the benchmark script where ``bench_path`` is given: the original code kept as the
    reference, the inputs of the task's harness (``made``: their imports, their code, whether they read the case's
    dtype), the new ``op`` imported from ``module``."""
    input_imports, inputs, case_dtype = made
    ref_imports, reference = _split_module(base_src)
    header = (target.conventions.header + "\n") if target.conventions.header else ""
    # A launch-config change keeps as the reference only the original versions of what it changed (the launcher);
    # the unchanged kernels are imported from the target. Any other change keeps the whole original code.
    changed = {d.name for d in changed_definitions(task, cand.source)} if cand.proposer == "tune" else set()
    from_target: list[str] = []
    if changed:
        upstream = {d.name: module_of(d.path) for d in task.provenance.definitions}
        ref_imports, from_target, reference = reference_code(reference, ref_imports, task.entry, changed, upstream)
    # The extractor keeps annotations as strings (``from __future__ import annotations``) and drops typing imports
    # that only they need, so the generated files keep the future import too.
    future = "from __future__ import annotations" in ref_imports
    # the imports the reference and the inputs read (a fusion's torch glue needs no triton), and the template's own
    found = [i for i in needed_imports(ref_imports + input_imports, reference + "\n" + inputs)
             if not i.startswith("from __future__")]
    what_ref = (f"the original {', '.join(sorted(changed | {task.entry}))}" if changed
                else "the original implementation") + f", as extracted at {base_commit[:12] or 'the base commit'}"
    new_import, new_def = _new_side(task, op, module, base_src)
    common = dict(header=header, module=module, entry=task.entry, launcher=op, version=__version__,
                  new_import=new_import, new_def=new_def, task_id=task.id, reference=reference, what_ref=what_ref,
                  inputs=inputs,
                  cases=_cases(task, case_dtype), case_dtype=case_dtype, future=future, from_target=from_target)
    test_style = target.conventions.test_style
    test = env.get_template("tests/kernel_test.py.j2").render(
        **common, imports=_import_groups(found + ["import os", "import torch"] + [
            "import unittest" if test_style == "unittest" else "import pytest"]), style=test_style, seeds=3,
        tolerances="{" + ", ".join(f'"{d}": ({TOLERANCES[d].atol:g}, {TOLERANCES[d].rtol:g}, {TOLERANCES[d].rel_rms:g})'
                                   for d in dtypes) + "}",
        class_name="".join(w.capitalize() for w in op.split("_")), register=target.conventions.test_register)
    if not bench_path:
        return test, ""
    bench = env.get_template("tests/bench.py.j2").render(
        **common, imports=_import_groups(found + ["import torch", "from triton.testing import do_bench_cudagraph"]),
        bench_path=bench_path)
    return test, bench


def metadata(body: str) -> dict[str, Any] | None:
    m = METADATA.search(body or "")
    return json.loads(m.group(1)) if m else None


def _formatted(target: Any, notes: list[str]) -> str:
    """The target's formatters that ran on the changed files (one not installed here did not), by name, once each;
    empty when none did."""
    missing = {n.split("`")[1] for n in notes if n.startswith("`") and "is not installed here" in n}
    return ", ".join(dict.fromkeys(f.name for f in target.conventions.formatter if f.name not in missing))
