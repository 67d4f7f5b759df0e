"""The shapes of what ``program.facts.file_facts`` records of one file: plain JSON (it is cached by content hash), so
typed here as ``TypedDict``s, one per record, each key with what it holds. The call graph reads these keys and no
others; ``tests/program/test_records.py`` holds every record that the fixture engines give to these shapes.

Lists of fixed length stand for small records, each spelled out beside its key: ``Tests`` is the if-tests around a
statement, ``[[source, taken], ...]`` (``taken`` is False in the else branch)."""

from __future__ import annotations

from typing import Any, TypedDict

Tests = list[list[Any]]  # [[if-test source, taken], ...]: the enclosing if-tests, outermost first


# (functional form: one key is "class")
_FunctionRequired = TypedDict("_FunctionRequired", {
    "line": int,
    "class": "str | None",  # the enclosing class's qualified name; None for a module-level function
    "decorators": list[list[Any]],  # [[dotted name, [its string arguments]], ...]
    # [[callee, tests, in a loop, line, [positional argument sources] or None where one is starred,
    #   {keyword: source} ("**": a **kwargs whose keys are unknown, "**known": a local dict's name)], ...]
    "calls": list[list[Any]],
    "returns": list[list[Any]],  # [[returned name or call (dotted, resolved), tests + its branch], ...]
    "values": list[list[Any]],  # [[returned expression's source, tests], ...]: for predicates an if-test calls
    "forwards": list[list[Any]],  # [[callee, [argument sources]], ...]: a return that hands its parameters on
    # [[class name, [positional sources], {keyword: source}, {argument: what its loop iterates}, tests], ...]
    "constructs": list[list[Any]],
    "locals": dict[str, list[list[Any]]],  # name -> [[value text, tests], ...] (a parameter's: its annotation)
    "stores": list[str],  # subscripted names stored into (REGISTRY[key] = fn: a registration)
    "flags": dict[str, list[str]],  # local name -> the sources of its assignments that decide if-tests
    "leaves": bool,  # it never runs off its end (it returns or raises on every path)
    "defaults": dict[str, str],  # parameter -> a default that names something (layer_type=DecoderLayer)
    "constants": dict[str, str],  # parameter -> a constant default's source
    "super_kwargs": dict[str, str],  # keyword -> what super().__init__(...) is handed (a name, resolved)
    "params": list[str],  # in order, self included
    "annotated": dict[str, str],  # parameter -> its type hint's text
})


class FunctionFacts(_FunctionRequired, total=False):
    returns_hint: str  # def get_flags() -> Flags: what it returns is an instance of Flags
    filled: list[str]  # collections made empty or spelled out, then filled: their literal is not their value
    before: dict[str, list[str]]  # if-test source -> the names assigned before it
    assigned_before: dict[str, dict[str, int]]  # if-test source -> name -> how many of its assignments precede it
    assigned: dict[str, list[list[Any]]]  # name -> [[source, tests], ...]: every assignment of a local flag
    sets: dict[str, list[list[Any]]]  # attribute -> [[object name, value source, tests], ...] on other objects


class _ClassRequired(TypedDict):
    line: int
    bases: list[str]  # as written (dotted)
    attrs: dict[str, list[list[Any]]]  # self attribute -> [[value text or hint, assigning function, tests], ...]
    registries: list[str]  # class attributes made an empty dict (filled by a decorator)
    flags: dict[str, list[list[Any]]]  # attribute -> [[source, assigning function or None, tests], ...]
    assigned_at: dict[str, list[list[Any]]]  # attribute -> [[assigning function or None, tests], ...]
    decorators: list[str]  # dotted names


class ClassFacts(_ClassRequired, total=False):
    factories: dict[str, str]  # field -> the class its default_factory makes


class FileFacts(TypedDict):
    path: str
    module: str
    stars: list[str]  # modules imported with *
    imports: dict[str, str]  # bound name -> dotted target
    registers: list[list[Any]]  # [[callee, [string keys], [names handed]], ...]: Registry.register("fa3", fn)
    assigns: dict[str, str]  # module-level name -> its value's source
    rebound: dict[str, list[str]]  # module-level name -> the functions that assign it (global x)
    mutated: dict[str, list[str]]  # module-level name -> the functions that change the object it holds
    classes: dict[str, ClassFacts]
    functions: dict[str, FunctionFacts]


class Unparsed(TypedDict):
    path: str
    error: str  # why it does not parse
