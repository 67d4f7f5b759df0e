"""Turning a proposer's text into a whole candidate ``kernel.py``, and the helpers every proposer shares.

Edit formats (what an LLM answers with):
- ``diff``: one or more SEARCH/REPLACE blocks, applied inside the EVOLVE-BLOCK only::

      <<<<<<< SEARCH
      exact lines of the current program
      =======
      their replacement
      >>>>>>> REPLACE

- ``full`` and ``crossover``: a fenced Python block holding the new EVOLVE-BLOCK body (with or without its markers),
  spliced between the markers of the parent.

Every failure is an :class:`EditError` with a one-line reason that becomes a recorded failed proposal.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re

from evaluator.task import EVOLVE_END, EVOLVE_START, parse, split_evolve
from smithbot.errors import SmithbotError

FORMATS = ("diff", "full", "crossover")
_SR = re.compile(r"<{5,9} ?SEARCH\s*?\n(.*?)\n?={5,9}\s*?\n(.*?)\n?>{5,9} ?REPLACE", re.DOTALL)
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


class EditError(SmithbotError):
    """A response that cannot be turned into a candidate (empty, off-format, truncated, not matching)."""


def source_hash(source: str) -> str:
    """Hash of the normalised source: formatting and comments do not make a new candidate."""
    try:
        norm = ast.unparse(parse(source))
    except SyntaxError:
        norm = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(norm.encode()).hexdigest()[:16]


def unified_diff(parent: str, child: str, name: str = "kernel.py") -> str:
    return "".join(difflib.unified_diff(parent.splitlines(True), child.splitlines(True), f"a/{name}", f"b/{name}"))


def block_of(source: str) -> str:
    parts = split_evolve(source)
    if parts is None:
        raise EditError("the program has no single EVOLVE-BLOCK")
    return parts[1]


def with_block(parent: str, block: str) -> str:
    head, _, tail = split_evolve(parent) or ("", "", "")
    if not block.startswith("\n"):
        block = "\n" + block
    if not block.endswith("\n"):
        block += "\n"
    return f"{head}{EVOLVE_START}{block}{EVOLVE_END}{tail}"


def apply_diff(parent: str, response: str) -> str:
    blocks = _SR.findall(response)
    if not blocks:
        raise EditError("no SEARCH/REPLACE block in the response")
    body = block_of(parent)
    for i, (search, replace) in enumerate(blocks, 1):
        if not search.strip():
            raise EditError(f"SEARCH/REPLACE block {i} has an empty SEARCH part")
        if search not in body:
            stripped = [line.rstrip() for line in search.splitlines()]
            lines = [line.rstrip() for line in body.splitlines()]
            hit = next((j for j in range(len(lines) - len(stripped) + 1) if lines[j:j + len(stripped)] == stripped),
                       None)
            if hit is None:
                raise EditError(f"SEARCH/REPLACE block {i}: the SEARCH text is not in the EVOLVE-BLOCK")
            search = "\n".join(body.splitlines()[hit:hit + len(stripped)])
        body = body.replace(search, replace, 1)
    return with_block(parent, body)


def apply_full(parent: str, response: str) -> str:
    fences = _FENCE.findall(response)
    if not fences:
        raise EditError("no fenced ```python block in the response (truncated or off-format)")
    code = max(fences, key=len)
    if EVOLVE_START in code or EVOLVE_END in code:
        parts = split_evolve(code)
        if parts is None:
            raise EditError("the response's EVOLVE-BLOCK markers are unbalanced (truncated?)")
        code = parts[1]
    if not code.strip():
        raise EditError("the response's code block is empty")
    return with_block(parent, code)


def apply(fmt: str, parent: str, response: str) -> str:
    """The candidate a response describes; raises EditError for anything unusable."""
    if not response or not response.strip():
        raise EditError("empty response")
    child = apply_diff(parent, response) if fmt == "diff" else apply_full(parent, response)
    try:
        parse(child)
    except SyntaxError as exc:
        raise EditError(f"the edited program does not parse: line {exc.lineno}: {exc.msg}") from None
    if source_hash(child) == source_hash(parent):
        raise EditError("the edit changes nothing")
    return child


def to_search_replace(parent: str, child: str, context: int = 1) -> str:
    """The change from parent to child (whole programs) as SEARCH/REPLACE blocks over their EVOLVE-BLOCKs, with a
    line of context on each side so every SEARCH part is non-empty and unique enough to apply."""
    a, b = block_of(parent).splitlines(), block_of(child).splitlines()
    out = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        i1, i2 = group[0][1], group[-1][2]
        j1, j2 = group[0][3], group[-1][4]
        if i1 == i2:  # a pure insertion at the very start: anchor on the next line
            i2, j2 = i2 + 1, j2 + 1
        out.append("<<<<<<< SEARCH\n" + "\n".join(a[i1:i2]) + "\n=======\n" + "\n".join(b[j1:j2]) + "\n>>>>>>> REPLACE")
    return "\n".join(out)
