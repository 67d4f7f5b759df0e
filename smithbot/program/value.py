"""The call graph's abstract values (``callgraph._Resolver.expr``): what an expression may be, one class per kind.

Each is a tuple, equal to, hashing as and printing as the tagged tuple it stands for (``Func("m", "f", None)`` is
``("func", "m", "f", None)``): the resolver's memo tables key on values, sets deduplicate them, and the walk's order
and its output follow ``sorted(..., key=str)``, so the classes name the fields without changing any of that. Test a
value's kind with ``isinstance`` (a plain tuple with the same tag is equal to one, but is not an instance of it)."""

from __future__ import annotations


class _Tagged(tuple):
    """A tagged tuple, printed as one (``str`` is the tuple's text, as sorting by ``str`` reads it); pickled and
    copied through its class's constructor, from the fields after the tag."""

    __slots__ = ()
    kind = ""

    __repr__ = tuple.__repr__

    def __getnewargs__(self) -> tuple:
        return tuple(self[1:])


class Func(_Tagged):
    """A function or method (``mod``, ``qual``), with the class its ``self`` is bound to (``bound``: (module,
    qualname), or None for a plain function or an unbound method)."""

    __slots__ = ()
    kind = "func"

    def __new__(cls, mod: str, qual: str, bound: tuple[str, str] | None) -> Func:
        return tuple.__new__(cls, ("func", mod, qual, bound))

    @property
    def mod(self) -> str:
        return self[1]

    @property
    def qual(self) -> str:
        return self[2]

    @property
    def bound(self) -> tuple[str, str] | None:
        return self[3]


class Class(_Tagged):
    """A class itself (calling it makes an ``Inst``)."""

    __slots__ = ()
    kind = "class"

    def __new__(cls, mod: str, qual: str) -> Class:
        return tuple.__new__(cls, ("class", mod, qual))

    @property
    def mod(self) -> str:
        return self[1]

    @property
    def qual(self) -> str:
        return self[2]


class Inst(_Tagged):
    """An instance of a class, or of one of its live subclasses (``symbols.Symbols.concrete``)."""

    __slots__ = ()
    kind = "inst"

    def __new__(cls, mod: str, qual: str) -> Inst:
        return tuple.__new__(cls, ("inst", mod, qual))

    @property
    def mod(self) -> str:
        return self[1]

    @property
    def qual(self) -> str:
        return self[2]


class Method(_Tagged):
    """A method ``name`` of an instance of class ``cls`` (of ``mod``): which function runs depends on the live
    class the instance is, so it is looked up when called."""

    __slots__ = ()
    kind = "method"

    def __new__(cls, mod: str, klass: str, name: str) -> Method:
        return tuple.__new__(cls, ("method", mod, klass, name))

    @property
    def mod(self) -> str:
        return self[1]

    @property
    def cls(self) -> str:
        return self[2]

    @property
    def name(self) -> str:
        return self[3]


class Module(_Tagged):
    """A module (dotted name)."""

    __slots__ = ()
    kind = "module"

    def __new__(cls, mod: str) -> Module:
        return tuple.__new__(cls, ("module", mod))

    @property
    def mod(self) -> str:
        return self[1]


class Kernel(_Tagged):
    """A Triton kernel, a module-level function: its ``name`` is also its ``qual``, as a ``Func``'s."""

    __slots__ = ()
    kind = "kernel"

    def __new__(cls, mod: str, name: str) -> Kernel:
        return tuple.__new__(cls, ("kernel", mod, name))

    @property
    def mod(self) -> str:
        return self[1]

    @property
    def name(self) -> str:
        return self[2]

    @property
    def qual(self) -> str:
        return self[2]


class Registry(_Tagged):
    """A table named ``name`` that dispatch goes through: calling it calls what is registered in it."""

    __slots__ = ()
    kind = "registry"

    def __new__(cls, name: str) -> Registry:
        return tuple.__new__(cls, ("registry", name))

    @property
    def name(self) -> str:
        return self[1]


class Getter(_Tagged):
    """A registry's lookup method (``REGISTRY.get``): calling it gives the registry."""

    __slots__ = ()
    kind = "getter"

    def __new__(cls, name: str) -> Getter:
        return tuple.__new__(cls, ("getter", name))

    @property
    def name(self) -> str:
        return self[1]


class Super(_Tagged):
    """``super()`` in a method of class ``cls`` (of ``mod``), ``self`` an instance of the ``bound`` class ((module,
    qualname)): its attributes are looked up after ``cls`` in the bound class's method order."""

    __slots__ = ()
    kind = "super"

    def __new__(cls, mod: str, klass: str, bound: tuple[str, str]) -> Super:
        return tuple.__new__(cls, ("super", mod, klass, bound))

    @property
    def mod(self) -> str:
        return self[1]

    @property
    def cls(self) -> str:
        return self[2]

    @property
    def bound(self) -> tuple[str, str]:
        return self[3]


Value = Func | Class | Inst | Method | Module | Kernel | Registry | Getter | Super
VALUE_KINDS = (Func, Class, Inst, Method, Module, Kernel, Registry, Getter, Super)  # for isinstance
