"""Values written as source text, the form in which the call graph hands constants between functions and keeps
them in its memos: a constant, an enum member, the model's config, each index of a loop, one of several constants
(``__one_of__(a, b)``); and the elements of a tuple or a dict a source spells out."""

from __future__ import annotations

import ast
import functools
from typing import Any

from smithbot.program.kinds import CONFIG, EACH_SOURCE, ONE_OF_SOURCE, DType, Member, ModelConfig, Several, Unknown
from smithbot.program.syntax import parse_expr


def source_of(value: Any) -> str | None:
    """A source that evaluates to ``value`` (a constant, an enum member, the model's config), or None."""
    if isinstance(value, ModelConfig):
        return CONFIG
    if isinstance(value, Member):
        return f"Enum.{value.name}"
    if isinstance(value, DType):
        return f"torch.{value.name}"
    if isinstance(value, Several) and value.each and isinstance(value.items, range):
        return f"{EACH_SOURCE}({value.items.start}, {value.items.stop})"  # each index of a loop, handed on
    if value is not Unknown and isinstance(value, (bool, int, float, str, type(None))):
        return repr(value)
    return None


@functools.lru_cache(maxsize=65536)
def is_literal(src: str) -> bool:
    try:
        ast.literal_eval(src)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def element_of(src: str, i: int | str) -> str | None:
    """The source of element ``i`` (an index or a key) of what ``src`` is: an item of a tuple or a dict it spells
    out, else ``src[i]`` where it is a name or a call (which the call graph follows further); None otherwise."""
    node = parse_expr(src)
    if isinstance(node, (ast.Tuple, ast.List)) and isinstance(i, int):
        return ast.unparse(node.elts[i]) if -len(node.elts) <= i < len(node.elts) \
            and not any(isinstance(e, ast.Starred) for e in node.elts) else None
    if isinstance(node, ast.Dict) and isinstance(i, str) and None not in node.keys:  # (no **other)
        found = [v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and k.value == i]
        return ast.unparse(found[-1]) if found else None
    return f"{src}[{i!r}]" if isinstance(node, (ast.Name, ast.Call)) else None


def element_split(src: str) -> tuple[str, int | str | None]:
    """``state[1]`` -> ("state", 1), ``state['mode']`` -> ("state", "mode"), for a name or a call indexed by a
    constant; (src, None) otherwise."""
    node = parse_expr(src)
    if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Name, ast.Call)) \
            and isinstance(node.slice, ast.Constant) and type(node.slice.value) in (int, str):
        return ast.unparse(node.value), node.slice.value
    return src, None


def one_of(items: list[str]) -> str:
    """The source of a value that is one of these constants', not known which."""
    return f"{ONE_OF_SOURCE}({', '.join(items)})"


def one_of_items(src: str) -> list[str]:
    """The constants a source stands for: the items of ``__one_of__(a, b)``, else the source itself."""
    if not src.startswith(f"{ONE_OF_SOURCE}("):
        return [src]
    call = ast.parse(src, mode="eval").body
    return [ast.unparse(a) for a in call.args] if isinstance(call, ast.Call) else [src]


def constant_source(value: Any, several: bool) -> str | None:
    """A value's source; with ``several``, one of several constants (``__one_of__(a, b)``); else None."""
    found = source_of(value)
    if found is None and several and isinstance(value, Several) and not value.each:
        items = [source_of(v) for v in value.items]
        found = None if None in items else one_of(items)  # type: ignore[arg-type]
    return found
