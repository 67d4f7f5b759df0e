"""Re-insertion: put a verified candidate back into the target, changing only the definitions it changed.

For every definition the task's provenance names (``task.yaml``: name, file, qualified name):
- the baseline's and the candidate's versions are read from the EVOLVE-BLOCKs with libcst;
- when they differ, the upstream definition is re-located in the target file by its qualified name (its lines from
  the first decorator to its end) and the baseline -> candidate edit is applied to those lines as line hunks. The
  extraction may have rewritten a few lines of a definition (tl aliases, folded settings, dropped decorators; the rest
  it keeps byte for byte), so the upstream text is edited, not replaced: each hunk lands where its lines stand
  upstream (a line map of the extracted definition onto the upstream one), a changed line the extractor rewrote is
  merged token by token, and what cannot be placed stops the re-insertion with a reason;
- definitions new in the candidate (helpers) go right after the last changed definition of that file;
- everything else in the file stays byte for byte, and running it twice changes nothing.

Then the target's formatter runs on the changed files only; a formatter that is not installed is reported, not fatal.
"""

from __future__ import annotations

import ast
import difflib
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from evaluator import Task
from evaluator.task import Definition, split_evolve
from smithbot.config import Formatter
from smithbot.errors import SmithbotError
from smithbot.extract.glue import GlueError, glue_function, operand, served_condition, served_tests
from smithbot.propose.testcode import bound_names


class ReinsertError(SmithbotError):
    """The candidate cannot be put back as it is (a definition moved upstream, a hunk does not apply). One line."""


@dataclass(frozen=True)
class Result:
    changed_files: tuple[str, ...]
    replaced: tuple[str, ...]  # "path::qualname"
    added: tuple[str, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)


def _stmt_name(stmt: cst.CSTNode) -> str | None:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return stmt.name.value
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        s = stmt.body[0]
        if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name):
            return s.targets[0].target.value
        if isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name):
            return s.target.value
    return None


def definitions(source: str) -> dict[str, str]:
    """Top-level definitions of an EVOLVE-BLOCK, by name, as their code (decorators included, no leading blank
    lines or comments)."""
    parts = split_evolve(source)
    if parts is None:
        raise ReinsertError("the program has no single EVOLVE-BLOCK")
    module = cst.parse_module(parts[1])
    out = {}
    for stmt in module.body:
        name = _stmt_name(stmt)
        if name is not None:
            out[name] = module.code_for_node(stmt.with_changes(leading_lines=[])).strip("\n")
    return out


def _locate(text: str, qualname: str) -> tuple[int, int]:
    """0-based [first, last] line of the definition ``qualname`` (decorators included) in a module's text."""
    wrapper = MetadataWrapper(cst.parse_module(text))
    pos = wrapper.resolve(PositionProvider)
    path = qualname.split(".")

    def find(body: list[cst.CSTNode], depth: int) -> tuple[int, int] | None:
        for stmt in body:
            if _stmt_name(stmt) != path[depth]:
                continue
            if depth == len(path) - 1:
                start = pos[stmt].start.line
                if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.decorators:
                    start = min(start, *(pos[d].start.line for d in stmt.decorators))
                return start - 1, pos[stmt].end.line - 1
            if isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                return find(list(stmt.body.body), depth + 1)
        return None

    found = find(list(wrapper.module.body), 0)
    if found is None:
        raise ReinsertError(f"{qualname} is not defined in the target file any more")
    return found


def _indent(lines: list[str], prefix: str) -> list[str]:
    return [prefix + line if line.strip() else line for line in lines]


def _line_map(before: list[str], upstream: list[str]) -> dict[int, tuple[int, bool]]:
    """Where each line of the extracted definition stands upstream: ``{i: (j, same)}``. Lines the extractor kept are
    ``same``; a run of lines it rewrote one for one (an alias spelled out, a setting folded) maps line for line with
    ``same`` False; lines it dropped or joined map nowhere."""
    out: dict[int, tuple[int, bool]] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, upstream, autojunk=False).get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            out.update({i1 + k: (j1 + k, tag == "equal") for k in range(i2 - i1)})
    return out


_TOKEN = re.compile(r"\w+|\s+|.")


def _merge_line(before: str, after: str, upstream: str) -> str | None:
    """The edit ``before -> after`` of one line carried onto ``upstream``, the same line as the target spells it (the
    extractor rewrote it): each changed run of tokens is found, with a token of context either side, once in the
    upstream line. None where it is not."""
    def tokens(line: str) -> list[str]:  # the line's ends are tokens too: a change at one is anchored there
        return ["\0"] + _TOKEN.findall(line) + ["\0"]

    b, a, u = tokens(before), tokens(after), tokens(upstream)
    for tag, i1, i2, j1, j2 in reversed(difflib.SequenceMatcher(None, b, a, autojunk=False).get_opcodes()):
        if tag == "equal":
            continue
        lo, hi = max(i1 - 1, 0), min(i2 + 1, len(b))
        ctx = b[lo:hi]
        hits = [k for k in range(len(u) - len(ctx) + 1) if u[k:k + len(ctx)] == ctx]
        if len(hits) != 1:
            return None
        k = hits[0]
        u[k:k + len(ctx)] = b[lo:i1] + a[j1:j2] + b[i2:hi]
    return "".join(u[1:-1])


def _apply(upstream: list[str], before: list[str], after: list[str], where: str) -> list[str]:
    """Apply the line edit ``before -> after`` (the extracted definition, and the candidate's) to the upstream lines of
    the same definition, by position: each hunk lands where its lines stand upstream (``_line_map``), so repeated
    lines (two launches with the same keywords) cannot be confused. A changed line the extractor had rewritten is
    merged token by token (``_merge_line``). Where every changed line already stands upstream, nothing is done: applying
    it twice changes nothing."""
    out = list(upstream)
    where_is = _line_map(before, upstream)
    hunks = [op for op in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes() if op[0] != "equal"]
    now = _line_map(after, upstream)
    if all(all(now.get(j, (0, False))[1] for j in range(j1, j2)) and
           not any(where_is.get(i, (0, False))[1] for i in range(i1, i2) if before[i] not in after[j1:j2])
           for _, i1, i2, j1, j2 in hunks):
        return out  # applied by an earlier run

    def refuse(line: str) -> ReinsertError:
        return ReinsertError(f"{where}: the candidate changes lines that differ upstream ({line.strip()!r}): upstream "
                             "moved on, or the extractor rewrote them; re-extract the kernel from the current target")

    for _, i1, i2, j1, j2 in reversed(hunks):
        new = after[j1:j2]
        if i1 == i2:  # an insertion: after the line before it, or before the line after it
            if i1 - 1 in where_is:
                at = where_is[i1 - 1][0] + 1
            elif i1 in where_is:
                at = where_is[i1][0]
            else:
                raise refuse(before[i1 - 1] if i1 else after[j1])
            out[at:at] = new
            continue
        spots = [where_is.get(i) for i in range(i1, i2)]
        if any(s is None for s in spots) or [s[0] for s in spots] != list(range(spots[0][0], spots[0][0] + i2 - i1)):  # type: ignore[index]
            raise refuse(before[i1])
        at = spots[0][0]  # type: ignore[index]
        if all(same for _, same in spots):  # type: ignore[misc]
            out[at:at + i2 - i1] = new
            continue
        if i2 - i1 != j2 - j1:
            raise refuse(next(before[i] for i, s in zip(range(i1, i2), spots) if not s[1]))  # type: ignore[index]
        for k in range(i2 - i1):
            if not spots[k][1]:  # type: ignore[index]
                merged = _merge_line(before[i1 + k], new[k], out[at + k])
                if merged is None and _merge_line(new[k], before[i1 + k], out[at + k]) is None:
                    raise refuse(before[i1 + k])
                out[at + k] = merged or out[at + k]  # (None: merged by an earlier run, whose edit undoes)
            else:
                out[at + k] = new[k]
    return out


def definition_lines(text: str, qualname: str) -> list[str] | None:
    """The lines of ``qualname`` in a module's text, or None when it is not defined there."""
    try:
        first, last = _locate(text, qualname)
    except ReinsertError:
        return None
    return text.splitlines()[first:last + 1]


def _changed(task: Task, base_defs: dict[str, str], cand_defs: dict[str, str]) -> list[Definition]:
    prov = {d.name: d for d in task.provenance.definitions}
    return [d for name, d in prov.items() if name in base_defs and name in cand_defs
            and base_defs[name] != cand_defs[name]]


def changed_definitions(task: Task, candidate: str) -> list[Definition]:
    """The task's provenance entries whose code the candidate changes."""
    return _changed(task, definitions(task.kernel_path.read_text(encoding="utf-8")), definitions(candidate))


def port(before: str, after: str, onto: str) -> str:
    """Carry the edit ``before -> after`` (two versions of a task's kernel.py) over to ``onto``: the same kernel
    re-extracted from a newer commit. Changed definitions get the same line hunks; new helpers follow the first one."""
    b, a, o = definitions(before), definitions(after), definitions(onto)
    text, first = onto, None
    for name in b:
        if name not in a or a[name] == b[name]:
            continue
        if name not in o:
            raise ReinsertError(f"{name} is not in the kernel extracted from the new head")
        new = "\n".join(_apply(o[name].splitlines(), b[name].splitlines(), a[name].splitlines(), name))
        text = text.replace(o[name], new, 1)
        first = first or new
    helpers = [a[n] for n in a if n not in b and n not in o]
    if helpers:
        if first is None:
            raise ReinsertError("the candidate only adds definitions; nothing to port them next to")
        text = text.replace(first, "\n\n\n".join([first] + helpers), 1)
    return text


def reinsert(task: Task, candidate: str, root: Path) -> Result:
    """Apply ``candidate`` (a whole kernel.py) to the checkout at ``root``. Raises ReinsertError."""
    base_defs = definitions(task.kernel_path.read_text(encoding="utf-8"))
    cand_defs = definitions(candidate)
    prov = {d.name: d for d in task.provenance.definitions}
    files: dict[str, list[str]] = {}
    replaced, added, last_line = [], [], {}
    for d in _changed(task, base_defs, cand_defs):
        name = d.name
        path = root / d.path
        if d.path not in files:
            if not path.is_file():
                raise ReinsertError(f"{d.path} is not in the checkout")
            files[d.path] = path.read_text(encoding="utf-8").splitlines(keepends=True)
        text = "".join(files[d.path])
        try:
            first, last = _locate(text, d.qualname)
        except cst.ParserSyntaxError as exc:
            raise ReinsertError(f"{d.path}: libcst cannot parse it ({str(exc).splitlines()[0]})") from None
        lines = [line.rstrip("\n") for line in files[d.path][first:last + 1]]
        prefix = lines[0][:len(lines[0]) - len(lines[0].lstrip())]
        new = _apply(lines, _indent(base_defs[name].splitlines(), prefix), _indent(cand_defs[name].splitlines(), prefix),
                     f"{d.path}::{d.qualname}")
        if new != lines:
            files[d.path][first:last + 1] = [line + "\n" for line in new]
            replaced.append(f"{d.path}::{d.qualname}")
        last_line[d.path] = first + len(new) - 1
    new_names = [n for n in cand_defs if n not in base_defs]
    if new_names:
        target = next(iter(last_line), None) or next((d.path for d in prov.values()), None)
        if target is None:
            raise ReinsertError("the candidate adds definitions but the task names no target file")
        if target not in files:
            files[target] = (root / target).read_text(encoding="utf-8").splitlines(keepends=True)
        text = "".join(files[target])
        at = last_line.get(target, len(files[target]) - 1)
        block = []
        for n in new_names:
            if f"def {n}(" in text or f"\n{n} = " in text:
                continue  # already inserted by an earlier run
            block += ["\n", "\n"] + [line + "\n" for line in cand_defs[n].splitlines()]
            added.append(f"{target}::{n}")
        files[target][at + 1:at + 1] = block
    changed = []
    for rel, lines in files.items():
        text = "".join(lines)
        if text != (root / rel).read_text(encoding="utf-8"):
            (root / rel).write_text(text, encoding="utf-8")
            changed.append(rel)
    return Result(tuple(changed), tuple(replaced), tuple(added))


def add_import(text: str, module: str, name: str) -> str:
    """``text`` (a module's source) with ``from MODULE import NAME`` where isort (profile black, the targets' setting)
    puts it among the top-level imports: in the first-party ``from`` imports (those of the same top-level package),
    in module order; else as a section of its own, before the relative imports or after the last import."""
    lines = text.splitlines(keepends=True)
    at, blank = _import_at(ast.parse(text), module)
    line = f"from {module} import {name}\n"
    lines[at:at] = [line, "\n"] if blank == "before" else ["\n", line] if blank == "after" else [line]
    return "".join(lines)


def _import_at(tree: ast.Module, module: str) -> tuple[int, str]:
    """Where ``add_import`` puts the line (a 0-based line index), and on which side of it a blank line opens its
    section ("before", "after" or "")."""
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    package = module.split(".")[0]
    ours = [n for n in imports if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module
            and n.module.split(".")[0] == package]
    if ours:
        later = next((n for n in ours if (n.module or "") > module), None)
        return ((later.lineno - 1) if later else (ours[-1].end_lineno or ours[-1].lineno)), ""
    relative = next((n for n in imports if isinstance(n, ast.ImportFrom) and n.level > 0), None)
    if relative is not None:
        return relative.lineno - 1, "before"
    return max((n.end_lineno or n.lineno for n in imports), default=0), "after" if imports else ""


def run_formatters(root: Path, files: tuple[str, ...], formatters: tuple[Formatter, ...],
                   originals: dict[str, str] | None = None) -> list[str]:
    """Run the target's formatters (their command lines from its YAML) on the changed files only. A file that was not already clean for a formatter
    before the change (``originals``: its text at the base commit) is left alone, since formatting it would rewrite
    lines the change did not touch. Returns notes for the PR (a formatter not installed, a file left alone)."""
    notes: list[str] = []
    if not files:
        return notes
    for fmt in formatters:
        f, exe = fmt.name, shutil.which(fmt.name)
        if exe is None:
            note = f"`{f}` is not installed here, so the changed files were not formatted with it"
            notes.extend([note] if note not in notes else [])  # (one tool may be two hooks: ruff and its isort)
            continue
        todo = []
        for rel in files:
            before = (originals or {}).get(rel)
            if before is not None:
                probe = root / Path(rel).with_name(f".smithbot-base-{Path(rel).name}")
                probe.write_text(before, encoding="utf-8")
                try:
                    clean = subprocess.run([exe, *fmt.run[1:], *fmt.check, str(probe.relative_to(root))],
                                           cwd=root, capture_output=True, text=True, timeout=300).returncode == 0
                finally:
                    probe.unlink()
                if not clean:
                    notes.append(f"`{rel}` was not `{f}`-clean before this change; it was left unformatted so that "
                                 "the diff holds only the change")
                    continue
            todo.append(rel)
        if not todo:
            continue
        proc = subprocess.run([exe, *fmt.run[1:], *todo], cwd=root, capture_output=True,
                              text=True, timeout=300)
        if proc.returncode != 0:
            notes.append(f"`{f}` failed on the changed files: {(proc.stderr or proc.stdout).strip()[:300]}")
    return notes


def reinsert_glue(task: Task, candidate: str, root: Path, kernels_dir: str, header: str = "") -> Result:
    """A fusion task's winner put back into the checkout at ``root``: the candidate becomes a module in
    ``kernels_dir`` (where the target keeps its kernels) under the target's file ``header``, the glue's lines
    (``provenance.glue``) become one call of its entry on the engine's own expressions, assigning what the glue
    assigned, and the glue's file imports the entry. Raises ReinsertError when those lines are no longer the glue the task was made from."""
    glue = task.provenance.glue
    if not glue or not glue.get("module") or "outputs" not in glue:
        raise ReinsertError(f"{task.id} is not a task made from torch glue: no line span to replace")
    rel, (first, last) = glue["path"], glue["lines"]
    path = root / rel
    if not path.is_file():
        raise ReinsertError(f"{rel} is not in the checkout")
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text)
        now = glue_function(tree, glue["function"], first, last, task.entry, dict(glue.get("folded") or []))
    except (GlueError, SyntaxError) as exc:
        raise ReinsertError(f"{rel}:{first}-{last} is no longer the glue the task was made from: {exc}") from None
    if now.origins != glue.get("inputs") or list(now.outputs) != glue["outputs"]:
        raise ReinsertError(f"{rel}:{first}-{last} is no longer the glue the task was made from: its inputs or "
                            "outputs differ")
    # the kernel's module: its import name drops the leading directories the glue's module name drops (`python/`)
    drop = len(rel.removesuffix(".py").split("/")) - len(glue["module"].split("."))
    name = launcher_name(glue["function"], glue["outputs"], root / kernels_dir,
                         {n for node in tree.body for n in bound_names(node)})
    kernel_rel = f"{kernels_dir.rstrip('/')}/{name}.py"
    module = ".".join(kernel_rel.removesuffix(".py").split("/")[drop:])
    parts = split_evolve(candidate)
    if parts is None:
        raise ReinsertError("the candidate has no EVOLVE-BLOCK")
    head, block, tail = parts
    imports = [line for line in head.splitlines() if line.startswith(("import ", "from "))]
    future = [i for i in imports if i.startswith("from __future__")]
    groups = [g for g in (future, [i for i in imports if i not in future]) if g]
    code = re.sub(rf"\b{re.escape(task.entry)}\b", name, (block + tail).strip())
    doc = textwrap.fill(f"{name}: one fused kernel in place of the torch glue of {glue['function']}() ({rel}); "
                        "written by smithbot.", 100)
    body = (f"{header}\n" if header else "") + f'"""{doc}\n"""\n\n' + "\n\n".join("\n".join(g) for g in groups) \
        + "\n\n\n" + code + "\n"  # (under the header the target's files open with: its copyright line)
    (root / kernel_rel).parent.mkdir(parents=True, exist_ok=True)
    (root / kernel_rel).write_text(body, encoding="utf-8")
    # the call, where the glue was
    lines = text.splitlines(keepends=True)
    indent = lines[first - 1][:len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    call = f"{name}({', '.join(now.origins.values())})"
    outs = list(now.outputs)
    returns = outs[-1:] == ["return"]
    targets = outs[:-1] + ["_returned"] if returns else outs
    new = [f"{', '.join(targets)} = {call}" if targets else call] + (["return _returned"] if returns else [])
    served = served_tests(now.folded, glue.get("pinned"), now.origins)
    if served:  # the kernel computes the branches serving takes, at its values; the engine's lines stay for the rest
        new = [*_if_head(served_condition(served), len(indent)), *("    " + n for n in new), "else:"]
        rest = lines[first - 1:last]
        if len(served) == 1 and len(now.folded) == 1:  # the else is where that one test goes the other way
            rest = _taken(tree, rest, first, served[0][0], not served[0][1])
        kept = ["    " + line if line.strip() else line for line in rest]
    else:
        kept = []
    lines[first - 1:last] = [indent + n + "\n" for n in new] + kept
    above = first - 2  # a TODO right above the glue that asks for this kernel is done now
    if above >= 0 and re.match(r"\s*#\s*(TODO|FIXME)\b.*\b(fus|kernel|triton)", lines[above], re.IGNORECASE):
        del lines[above]
    path.write_text(add_import("".join(lines), module, name), encoding="utf-8")
    said = f"lines {first}-{last} of {rel} became one call of {name}" + (
        f", where `{served_condition(served)}` (as serving has it); the original lines stay for the other "
        "cases" if served else "")
    return Result((rel, kernel_rel), (f"{rel}::{glue['function']}",), (f"{kernel_rel}::{name}",), (said,))


def _taken(tree: ast.Module, lines: list[str], first: int, test: str, value: bool) -> list[str]:
    """``lines`` (the file's, from line ``first``) with the ``if`` among them that tests ``test`` replaced by the
    branch that ``value`` takes, dedented to the ``if``'s place: what the engine's lines come to where the test is
    known; a test known false with no ``else`` drops the ``if``. Lines left as they are where no ``if`` among them
    tests ``test``."""
    want = ast.unparse(ast.parse(test, mode="eval").body)
    last = first + len(lines) - 1
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test) == want
                 and first <= n.lineno and (n.end_lineno or 0) <= last), None)
    if node is None:
        return lines
    after = lines[(node.end_lineno or node.lineno) - first + 1:]
    branch = node.body if value else node.orelse
    if not branch:  # a test known false with no else: the if goes, where statements are left around it
        rest = lines[:node.lineno - first] + after
        return rest if any(line.strip() and not line.lstrip().startswith("#") for line in rest) else lines
    if not value and isinstance(branch[0], ast.If) and branch[0].col_offset == node.col_offset:
        return lines  # an elif: left as written
    if branch[0].lineno <= (node.test.end_lineno or node.lineno):
        return lines  # `if x: y` on one line: left as written
    if value:  # the body: from the line after the header's colon (comments above its first statement included)
        head = node.test.end_lineno or node.lineno
        while head < branch[0].lineno - 1 and not lines[head - first].split("#")[0].rstrip().endswith(":"):
            head += 1
        start, end = head + 1, node.body[-1].end_lineno or node.body[-1].lineno
    else:  # the else's block: from the line after `else:`
        start, end = (node.body[-1].end_lineno or node.body[-1].lineno) + 1, node.end_lineno or node.lineno
        while start < branch[0].lineno and not lines[start - first].lstrip().startswith("else"):
            start += 1
        start += 1
    cut = branch[0].col_offset - node.col_offset
    body = [line[cut:] if line.strip() and not line[:cut].strip() else line
            for line in lines[start - first:end - first + 1]]
    return lines[:node.lineno - first] + body + after


def _if_head(condition: str, indent: int, width: int = 88) -> list[str]:
    """``if condition:``, one operand of its ``and``/``or`` a line in parentheses where one line is too wide (as black
    writes it: the target's formatter may not be installed where the proposal is made)."""
    node = ast.parse(condition, mode="eval").body
    if indent + len(condition) + 4 <= width or not isinstance(node, ast.BoolOp):
        return [f"if {condition}:"]
    op = "and" if isinstance(node.op, ast.And) else "or"
    return ["if (", *(f"    {'' if i == 0 else op + ' '}{operand(v)}" for i, v in enumerate(node.values)), "):"]


# methods whose name says nothing of what their glue computes: the glue's outputs name the launcher instead
_GENERIC = {"forward", "call", "run", "apply", "execute", "compute", "process", "step"}


def launcher_name(function: str, outputs: list[str], kernels: Path, taken: set[str]) -> str:
    """The fused launcher's name, and its module's, in snake_case for what the glue computes: ``fused_`` and the glue's
    ``function`` (``DefaultRouterNoauxTCImpl.renorm`` -> ``fused_renorm``), or its ``outputs`` where the name is
    generic (``LlamaModel.forward`` assigning ``lens, positions`` -> ``fused_lens_positions``); ``_glue`` is added
    while a module of that name is already in ``kernels`` or the glue's file binds the name (``taken``: its own
    ``fused_moe``, which the import would shadow)."""
    method = function.rsplit(".", 1)[-1].strip("_")
    named = [o for o in outputs if o.isidentifier() and o != "return"]
    words = method if method and method.lower() not in _GENERIC else "_".join(named[:3]) or "glue"
    name = "fused_" + re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", words).lower().removeprefix("fused_")
    while (kernels / f"{name}.py").exists() or name in taken:
        name += "_glue"
    return name
