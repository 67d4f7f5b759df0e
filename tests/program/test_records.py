"""The facts ``file_facts`` records have the shapes ``program.records`` declares: every key declared, none other,
each of its declared type; and the fixture engine uses every declared key, so no declaration outlives its key."""

from __future__ import annotations

import types
import typing
from collections import Counter
from typing import Any

from smithbot.program.facts import file_facts
from smithbot.program.records import ClassFacts, FileFacts, FunctionFacts, Unparsed
from tests.program.engine import FILES


def _kinds(hint: Any) -> tuple[type, ...]:
    """The runtime types a hint allows: ``str | None`` -> (str, NoneType), ``dict[str, X]`` -> (dict,)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(k for a in typing.get_args(hint) for k in _kinds(a))
    return (typing.get_origin(hint) or hint,)


def _problems(record: dict[str, Any], shape: Any, where: str, seen: Counter) -> list[str]:
    hints = typing.get_type_hints(shape)
    keys = set(record)
    out = [f"{where}: lacks {k}" for k in sorted(shape.__required_keys__ - keys)]
    out += [f"{where}: undeclared {k}" for k in sorted(keys - set(hints))]
    for key in keys & set(hints):
        seen[(shape.__name__, key)] += 1
        if not isinstance(record[key], _kinds(hints[key])):
            out.append(f"{where}.{key}: {type(record[key]).__name__}, not {hints[key]}")
    return out


def test_every_record_of_the_fixture_engine_has_its_declared_shape() -> None:
    seen: Counter = Counter()
    problems: list[str] = []
    for path, source in sorted(FILES.items()):
        facts = file_facts(path, source.encode(), path.removesuffix(".py").replace("/", "."))
        problems += _problems(facts, FileFacts, path, seen)
        for qual, fn in facts.get("functions", {}).items():
            problems += _problems(fn, FunctionFacts, f"{path}:{qual}", seen)
        for qual, cls in facts.get("classes", {}).items():
            problems += _problems(cls, ClassFacts, f"{path}:{qual}", seen)
    assert problems == []
    unused = [f"{shape.__name__}.{key}" for shape in (FileFacts, FunctionFacts, ClassFacts)
              for key in typing.get_type_hints(shape) if not seen[(shape.__name__, key)]]
    assert unused == []


def test_a_file_that_does_not_parse_is_recorded_as_such() -> None:
    facts = file_facts("bad.py", b"def f(:\n", "bad")
    assert _problems(facts, Unparsed, "bad.py", Counter()) == [] and facts["path"] == "bad.py"


def test_a_record_off_its_shape_is_caught() -> None:
    """The check itself: a missing key, an undeclared one and a value of another type are each reported."""
    fn = file_facts("m.py", b"def f(x):\n    return x\n", "m")["functions"]["f"]
    bad = {**fn, "leaves": "no", "extra": 1}
    del bad["params"]
    assert _problems(bad, FunctionFacts, "f", Counter()) == [
        "f: lacks params", "f: undeclared extra", "f.leaves: str, not <class 'bool'>"]
