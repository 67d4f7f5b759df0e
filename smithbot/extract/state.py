"""Engine state a launcher reads through a global accessor (sglang's ``get_req_to_token_pool()``), handed to the
task as an input instead: the one rewrite of a launcher's text that the target YAML asks for by naming the state."""

from __future__ import annotations

import ast


def state_as_params(source: str, state: tuple[str, ...]) -> str:
    """``source`` (a launcher's text) with each ``get_NAME()`` call (an accessor of the engine's global state:
    sglang's ``get_req_to_token_pool()``) for NAME in ``state`` replaced by NAME, a new parameter after ``self`` (or
    first): the task hands that state in as an input. Every other byte is kept."""
    fn = ast.parse(source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    at = lambda line, col: starts[line - 1] + len(lines[line - 1].encode()[:col].decode())  # noqa: E731
    edits: list[tuple[int, int, str]] = []
    used: list[str] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("get_") \
                and node.func.id[4:] in state and not node.args and not node.keywords:
            used.append(node.func.id[4:])
            edits.append((at(node.lineno, node.col_offset), at(node.end_lineno, node.end_col_offset),  # type: ignore
                          node.func.id[4:]))
    params = fn.args.posonlyargs + fn.args.args
    new = [n for n in dict.fromkeys(used) if n not in {a.arg for a in params + fn.args.kwonlyargs}]
    if new:
        first = params[0] if params else None
        if first is not None and first.arg == "self":
            pos = at(first.end_lineno, first.end_col_offset)  # type: ignore[arg-type]
            edits.append((pos, pos, "".join(f", {n}" for n in new)))
        else:
            pos = source.index("(", at(fn.lineno, fn.col_offset)) + 1
            edits.append((pos, pos, ", ".join(new) + (", " if params or fn.args.vararg or fn.args.kwonlyargs else "")))
    for begin, end, text in sorted(edits, reverse=True):
        source = source[:begin] + text + source[end:]
    return source
