"""What the call graph resolver's mixins (``values.EngineValues``, ``calls.CallValues``, ``args.CallerArgs``,
``tensors.TensorTypes``) share of ``callgraph._Resolver``: its attributes, declared once for the type checker, and the
bookkeeping of what is being worked out (an expression, or a memo table's entry with a guard standing in for it)."""

from __future__ import annotations

from typing import Any, Callable

from smithbot.program.modules import Program
from smithbot.program.value import Func


class ParsedIndex:
    """An index over the modules a program has parsed so far, brought up to date when more were parsed: ``add(entries,
    module, facts)`` files one module's entries (a class name -> the functions constructing one; a callee's last name
    -> its calls; an attribute -> the stores of it on other objects)."""

    def __init__(self, add: Callable[[dict[str, Any], str, dict[str, Any]], None]) -> None:
        self._add = add
        self._entries: dict[str, Any] = {}
        self._done: set[str] = set()
        self._seen = -1  # how many modules had been parsed when it was last brought up to date

    def get(self, program: Program, key: str, default: Any) -> Any:
        if self._seen != program.parsed_count():
            self._seen = program.parsed_count()
            for mod, f in program.parsed():
                if mod not in self._done:
                    self._done.add(mod)
                    self._add(self._entries, mod, f)
        return self._entries.get(key, default)


class ResolverState:
    """What the resolver's mixins (``EngineValues``, ``ObjectStores``, ``CallValues``, ``CallerArgs``,
    ``TensorTypes``) read of ``callgraph._Resolver``, declared once for the type checker."""

    p: Program
    env: Any
    targets: Any
    callers: dict[tuple[str, str], set[tuple[Func, int]]] | None
    qual_of: dict[int, tuple[str, str]]
    entries: set[int]
    configs: dict[int, str]
    _filtering: int
    _predicates: dict[tuple, str | list[str] | None]
    _anywhere_args: dict[tuple, tuple]
    _active: dict[tuple, int]
    _low: int
    expr: Any
    look: Any

    # --- what is being worked out: an expression, or an entry of a memo table with a guard standing in for it -----
    _prov: dict[tuple, tuple[Any, int]]
    _heads: dict[int, list[tuple]]

    def _begin(self, key: tuple) -> tuple[int, int]:
        """Start working out ``key``: its depth in the stack of what is being worked out, and the caller's cycle
        mark, for ``_end``."""
        pos = len(self._active)
        self._active[key] = pos
        outer, self._low = self._low, 1 << 30
        return pos, outer

    def _end(self, key: tuple, pos: int, outer: int, value: Any) -> bool:
        """Done with ``key``: whether its value is final, that is, no cycle reached above it. Below the head of a
        cycle a value read what stood in for something still being worked out (an empty value, a guard), and so
        depends on the order things were asked in: it is kept only until the head is done (``_recall``)."""
        del self._active[key]
        if self._low >= pos:
            self._low = outer
            for low in [low for low in self._heads if low >= pos]:
                for k in self._heads.pop(low):
                    self._prov.pop(k, None)
            return True
        self._prov[key] = (value, self._low)
        self._heads.setdefault(self._low, []).append(key)
        self._low = min(outer, self._low)
        return False

    def _recall(self, key: tuple) -> tuple[bool, Any]:
        """Whether ``key`` has a provisional value, and it: one worked out inside a cycle whose head is still being
        worked out (reading it makes the reader provisional too)."""
        got = self._prov.get(key)
        if got is None:
            return False, None
        self._low = min(self._low, got[1])
        return True, got[0]

    def _cycle(self, key: tuple) -> None:
        """``key`` was asked while being worked out: what is above it, down to it, is provisional."""
        self._low = min(self._low, self._active[key])

    def _work_out(self, key: tuple, standin: Callable[[], Any], compute: Callable[[], Any]) -> tuple[Any, bool]:
        """``compute()`` for ``key``, and whether the value is final (the caller memoises only a final one):
        ``standin()`` where ``key`` is asked while being worked out (a cycle), the provisional value where its cycle's
        head is still being worked out."""
        if key in self._active:
            self._cycle(key)
            return standin(), False
        hit, value = self._recall(key)
        if hit:
            return value, False
        pos, outer = self._begin(key)
        value = standin()
        try:
            value = compute()
        finally:
            final = self._end(key, pos, outer, value)
        return value, final
