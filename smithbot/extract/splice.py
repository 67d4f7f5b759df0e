"""One definition's source rewritten to a transformed parse of it, re-emitting only the nodes that differ."""

from __future__ import annotations

import ast
import difflib
from typing import Any, Callable

_STMT_LISTS = ("body", "orelse", "finalbody", "decorator_list")


def splice(source: str, new: ast.stmt) -> str:
    """``source``, one definition's text, rewritten to ``new`` (a transformed copy of its parse) by re-emitting only
    the nodes that differ: every other line keeps its text byte for byte (comments, layout, quotes), so that a
    candidate's edit to any of them maps back onto the target. Statements and decorators dropped from a body are
    dropped with their lines. Where no smaller edit says it, the whole definition is re-emitted."""
    edit = _Splice(source)
    if not edit.walk(ast.parse(source).body[0], new):
        return ast.unparse(new) + "\n"
    data = edit.data
    for lo, hi, text in sorted(edit.edits, reverse=True):
        data = data[:lo] + text + data[hi:]
    return data.decode()


class _Splice:
    """The byte edits that turn one definition's source into a rewritten parse of it (``splice``)."""

    def __init__(self, source: str) -> None:
        self.data = source.encode()
        self.starts = [0]  # each line's offset
        for line in self.data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))
        self.edits: list[tuple[int, int, bytes]] = []

    def span(self, n: ast.AST) -> tuple[int, int] | None:
        if getattr(n, "end_lineno", None) is None:
            return None
        return (self.starts[n.lineno - 1] + n.col_offset,  # type: ignore[attr-defined]
                self.starts[n.end_lineno - 1] + n.end_col_offset)  # type: ignore[attr-defined]

    def emit(self, o: ast.AST, n: ast.AST) -> bool:
        where = self.span(o)
        if where is None:
            return False
        pad = "\n" + " " * o.col_offset  # type: ignore[attr-defined]
        self.edits.append((*where, ast.unparse(n).replace("\n", pad).encode()))
        return True

    def drop(self, o: ast.AST) -> bool:
        """The whole lines of a statement or decorator that has them to itself, dropped."""
        where = self.span(o)
        if where is None:
            return False
        first, last = self.starts[o.lineno - 1], self.starts[o.end_lineno]  # type: ignore[attr-defined]
        if self.data[first:where[0]].strip() not in (b"", b"@") \
                or self.data[where[1]:last].strip() not in (b"", b";"):
            return False
        self.edits.append((first, last, b""))
        return True

    def pair(self, a: Any, b: Any) -> bool:
        if _same(a, b):
            return True
        if not (isinstance(a, ast.AST) and isinstance(b, ast.AST)):
            return False
        return self.walk(a, b) or self.emit(a, b)

    def align(self, a: list, b: list, by: Callable[[ast.AST], str]) -> bool:
        """Statements (or decorators) kept, changed or dropped: aligned by their code, then by what they are."""
        ops = difflib.SequenceMatcher(None, [by(x) for x in a], [by(y) for y in b], autojunk=False).get_opcodes()
        for tag, i1, i2, j1, j2 in ops:
            if tag == "delete":
                ok = all(self.drop(x) for x in a[i1:i2])
            elif tag == "replace" and i2 - i1 == j2 - j1:
                ok = all(self.pair(x, y) for x, y in zip(a[i1:i2], b[j1:j2]))
            elif tag == "replace" and by is not _kind:
                ok = self.align(a[i1:i2], b[j1:j2], _kind)
            else:  # equal: by their code, or by what they are (then paired, which is free where nothing changed)
                ok = tag == "equal" and all(self.pair(x, y) for x, y in zip(a[i1:i2], b[j1:j2]))
            if not ok:
                return False
        return True

    def walk(self, o: ast.AST, n: ast.AST) -> bool:
        """Edits that turn ``o`` into ``n`` below ``o`` itself; False where ``o`` must be re-emitted whole."""
        if type(o) is not type(n):
            return False
        mark = len(self.edits)
        for field in o._fields:
            a, b = getattr(o, field, None), getattr(n, field, None)
            if isinstance(a, list) and isinstance(b, list):
                if len(a) == len(b):
                    ok = all(self.pair(x, y) for x, y in zip(a, b))
                elif field in _STMT_LISTS:
                    ok = self.align(a, b, ast.dump)
                else:
                    ok = False
            else:
                ok = self.pair(a, b)
            if not ok:
                del self.edits[mark:]
                return False
        return True


def _same(a: Any, b: Any) -> bool:
    return ast.dump(a) == ast.dump(b) if isinstance(a, ast.AST) and isinstance(b, ast.AST) else a == b


def _kind(x: ast.AST) -> str:
    """What a statement or decorator is, whatever a rewrite changed inside it."""
    if isinstance(x, ast.Call):
        return "call " + ast.unparse(x.func)
    if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return "def " + x.name
    if isinstance(x, ast.Assign):
        return "assign " + " ".join(map(ast.unparse, x.targets))
    return type(x).__name__


