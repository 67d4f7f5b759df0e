"""The call graph's abstract values (``callgraph._Resolver.expr``): what an expression may be, one class per kind.

Each is a tuple, equal to, hashing as and printing as the tagged tuple it stands for (``Func("m", "f", None)`` is
``("func", "m", "f", None)``): the resolver's memo tables key on values, sets deduplicate them, and the walk's order
and its output follow ``sorted(..., key=str)``, so the classes name the fields without changing any of that. Test a
value's kind with ``isinstance`` (a plain tuple with the same tag is equal to one, but is not an instance of it)."""

from __future__ import annotations

from operator import itemgetter
from typing import Any


class _Tagged(tuple):
    """A tagged tuple, ``(kind, *fields)``, printed as one (``str`` is the tuple's text, as sorting by ``str`` reads
    it); pickled and copied through its class's constructor, from the fields after the tag."""

    __slots__ = ()
    kind = ""
    fields: tuple[str, ...] = ()

    def __new__(cls, *values: Any) -> Any:
        if len(values) != len(cls.fields):
            raise TypeError(f"{cls.__name__} takes {', '.join(cls.fields)}, not {values!r}")
        return tuple.__new__(cls, (cls.kind, *values))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each of the class's ``fields`` is read by name: ``Func(...).qual`` is the field after ``mod``."""
        super().__init_subclass__(**kwargs)
        for i, name in enumerate(cls.fields):
            setattr(cls, name, _field(i))

    __repr__ = tuple.__repr__

    def __getnewargs__(self) -> tuple:
        return tuple(self[1:])


def _field(i: int) -> Any:
    """The ``i``-th field after the tag, read by name."""
    return property(itemgetter(i + 1))


class Func(_Tagged):
    """A function or method (``mod``, ``qual``), with the class its ``self`` is bound to (``bound``: (module,
    qualname), or None for a plain function or an unbound method)."""

    __slots__ = ()
    kind, fields = "func", ("mod", "qual", "bound")


class Class(_Tagged):
    """A class itself (calling it makes an ``Inst``)."""

    __slots__ = ()
    kind, fields = "class", ("mod", "qual")


class Inst(_Tagged):
    """An instance of a class, or of one of its live subclasses (``symbols.Symbols.concrete``)."""

    __slots__ = ()
    kind, fields = "inst", ("mod", "qual")


class Method(_Tagged):
    """A method ``name`` of an instance of class ``cls`` (of ``mod``): which function runs depends on the live
    class the instance is, so it is looked up when called."""

    __slots__ = ()
    kind, fields = "method", ("mod", "cls", "name")


class Module(_Tagged):
    """A module (dotted name)."""

    __slots__ = ()
    kind, fields = "module", ("mod",)


class Kernel(_Tagged):
    """A Triton kernel, a module-level function: its ``name`` is also its ``qual``, as a ``Func``'s."""

    __slots__ = ()
    kind, fields = "kernel", ("mod", "name")
    qual = _field(1)


class Registry(_Tagged):
    """A table named ``name`` that dispatch goes through: calling it calls what is registered in it."""

    __slots__ = ()
    kind, fields = "registry", ("name",)


class Getter(_Tagged):
    """A registry's lookup method (``REGISTRY.get``): calling it gives the registry."""

    __slots__ = ()
    kind, fields = "getter", ("name",)


class Super(_Tagged):
    """``super()`` in a method of class ``cls`` (of ``mod``), ``self`` an instance of the ``bound`` class ((module,
    qualname)): its attributes are looked up after ``cls`` in the bound class's method order."""

    __slots__ = ()
    kind, fields = "super", ("mod", "cls", "bound")


Value = Func | Class | Inst | Method | Module | Kernel | Registry | Getter | Super
VALUE_KINDS = (Func, Class, Inst, Method, Module, Kernel, Registry, Getter, Super)  # for isinstance
