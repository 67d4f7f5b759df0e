"""The call graph's abstract values (``smithbot.program.value``) are the tagged tuples they stand for: equal, hashing
and printing alike, so memo tables, sets and ``sorted(..., key=str)`` treat them as before; with named fields, and
pickled and copied as themselves."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from smithbot.program.value import (VALUE_KINDS, Class, Func, Getter, Inst, Kernel, Method, Module, Registry, Super,
                                    Value)

# each value, and the tagged tuple the call graph used to build for it
PAIRS: list[tuple[Value, tuple]] = [
    (Func("pkg.mod", "f", None), ("func", "pkg.mod", "f", None)),
    (Func("pkg.mod", "Base.forward", ("pkg.sub", "Sub")), ("func", "pkg.mod", "Base.forward", ("pkg.sub", "Sub"))),
    (Class("pkg.mod", "Outer.Inner"), ("class", "pkg.mod", "Outer.Inner")),
    (Inst("pkg.mod", "Cls"), ("inst", "pkg.mod", "Cls")),
    (Method("pkg.mod", "Cls", "run"), ("method", "pkg.mod", "Cls", "run")),
    (Module("pkg.mod"), ("module", "pkg.mod")),
    (Kernel("pkg.kernels", "_fwd_kernel"), ("kernel", "pkg.kernels", "_fwd_kernel")),
    (Registry("BACKENDS"), ("registry", "BACKENDS")),
    (Getter("BACKENDS"), ("getter", "BACKENDS")),
    (Super("pkg.mod", "Base", ("pkg.sub", "Sub")), ("super", "pkg.mod", "Base", ("pkg.sub", "Sub"))),
]


@pytest.mark.parametrize("value, old", PAIRS, ids=[old[0] + str(i) for i, (_, old) in enumerate(PAIRS)])
def test_a_value_is_its_tagged_tuple(value: Value, old: tuple) -> None:
    assert value == old and old == value and not value != old
    assert hash(value) == hash(old)
    assert str(value) == str(old) and repr(value) == repr(old)
    assert str((value, 3)) == str((old, 3))  # inside another tuple (a memo key, the walk's callers) too
    assert isinstance(value, tuple) and isinstance(value, VALUE_KINDS) and value.kind == old[0]
    assert list(value) == list(old) and len(value) == len(old) and value[0] == old[0]
    assert {value: 1}[old] == 1 and len({value, old}) == 1
    assert json.dumps(value) == json.dumps(old)  # as the caches would keep it


@pytest.mark.parametrize("value", [v for v, _ in PAIRS], ids=[old[0] + str(i) for i, (_, old) in enumerate(PAIRS)])
def test_pickle_and_copy_give_the_same_class(value: Value) -> None:
    for again in (pickle.loads(pickle.dumps(value, protocol=p)) for p in range(2, pickle.HIGHEST_PROTOCOL + 1)):
        assert type(again) is type(value) and again == value and str(again) == str(value)
    for again in (copy.copy(value), copy.deepcopy(value)):
        assert type(again) is type(value) and again == value


def test_named_fields() -> None:
    f = Func("m", "C.f", ("m2", "D"))
    assert (f.mod, f.qual, f.bound) == ("m", "C.f", ("m2", "D")) and Func("m", "f", None).bound is None
    c, i = Class("m", "C"), Inst("m", "C")
    assert (c.mod, c.qual, i.mod, i.qual) == ("m", "C", "m", "C")
    m = Method("m", "C", "run")
    assert (m.mod, m.cls, m.name) == ("m", "C", "run")
    assert Module("a.b").mod == "a.b"
    k = Kernel("m", "_k")
    assert (k.mod, k.name, k.qual) == ("m", "_k", "_k")
    assert Registry("R").name == "R" and Getter("R").name == "R"
    s = Super("m", "Base", ("m2", "Sub"))
    assert (s.mod, s.cls, s.bound) == ("m", "Base", ("m2", "Sub"))
    with pytest.raises(AttributeError):
        f.mod = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        f.extra = 1  # type: ignore[attr-defined]  # no __dict__: as small as the tuple


def test_kinds_are_told_apart_by_class() -> None:
    assert Class("m", "C") != Inst("m", "C") and Registry("R") != Getter("R")
    assert [type(v).__name__.lower() for v, _ in PAIRS] == [old[0] for _, old in PAIRS]
    assert not isinstance(("func", "m", "f", None), Func)  # a raw tuple is not one: build values with the classes


def test_sorted_by_str_as_the_tuples() -> None:
    values = [v for v, _ in PAIRS] + [Func("a", "z", None), Func("a", "b", ("a", "B")), Inst("a", "B"),
                                      Kernel("a", "k"), Class("z", "A")]
    olds = [tuple(v) for v in values]
    assert [tuple(v) for v in sorted(values, key=str)] == sorted(olds, key=str)
    assert [tuple(v) for v in sorted(values)] == sorted(olds)
    pairs = [(v, i) for i, v in enumerate(values)]  # the walk's callers: (node, index of the call)
    assert [(tuple(v), i) for v, i in sorted(pairs, key=str)] == sorted(((tuple(v), i) for v, i in pairs), key=str)
