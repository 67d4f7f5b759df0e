"""What a task holds in place of what it may not import or run: stand-ins for modules a launcher needs
(``packaging.version``, a package probe), the stubs the target YAML's ``stubs:`` answer with, a logger that logs
nothing, and a custom kernel decorator that returns the kernel."""

from __future__ import annotations

import ast
import re
import textwrap
from typing import Any


def custom_decorator_stub(name: str) -> str:
    return (f"def {name}(*args, **kwargs):\n"
            f'    """Stub of the target\'s custom kernel decorator: the kernel is returned unchanged."""\n'
            f"    if len(args) == 1 and not kwargs and hasattr(args[0], \"run\"):\n"
            f"        return args[0]\n"
            f"    return lambda fn: fn\n")


_FIND_SPEC = ("@staticmethod\ndef find_spec(name):  # a task has torch and triton\n"
              "    return name if name.split('.')[0] in ('torch', 'triton') else None\n")
_RELEASE = 'tuple(int(p) if p.isdigit() else 0 for p in str(text).split("+")[0].split(".")[:3])'
# Modules and functions outside the allowed imports that a task gets a definition of instead: version checks
# (``version.parse(triton.__version__) >= version.parse("3.0.0")``) compare release numbers; an extension's
# arithmetic helper is that arithmetic.
STAND_INS = {
    "packaging.version": "class {name}:  # packaging.version, as far as comparing release numbers goes\n"
                         "    @staticmethod\n    def parse(text):\n        return " + _RELEASE + "\n",
    "packaging.version.parse": "def {name}(text):  # packaging.version.parse, for release numbers\n"
                               "    return " + _RELEASE + "\n",
    "msgspec": "class {name}:  # msgspec, as far as its Struct base class goes: a record of named fields\n"
               "    Struct = typing.NamedTuple\n",
    "torch.profiler.record_function": "class {name}:  # torch.profiler.record_function: a profiler label, none here\n"
                                      "    def __init__(self, *args, **kwargs):\n        pass\n\n"
                                      "    def __enter__(self):\n        return self\n\n"
                                      "    def __exit__(self, *exc):\n        return False\n\n"
                                      "    def __call__(self, fn):\n        return fn\n",
    "deep_gemm.ceil_div": "def {name}(a, b):  # deep_gemm.ceil_div: a division rounded up\n"
                          "    return (a + b - 1) // b\n",
    # `importlib.util.find_spec(name) is not None`, a package probe: a task has torch and triton, and no other
    "importlib": "class {name}:  # importlib, as far as asking whether a package is installed goes\n"
                 "    class util:\n" + textwrap.indent(_FIND_SPEC, " " * 8),
    "importlib.util": "class {name}:  # importlib.util, as far as asking whether a package is installed goes\n"
                      + textwrap.indent(_FIND_SPEC, " " * 4),
    # `if not isinstance(x, FakeTensor):` skips the launch while torch.compile traces; a task's tensors are real
    "torch._subclasses.fake_tensor.FakeTensor": "class {name}:  # torch.compile's fake tensor: none in a task\n"
                                                "    pass\n",
}


def stub_value(value: Any) -> str:
    """A stub's value as source: ``{source: EXPR}`` in the target YAML is EXPR itself (``[triton.Config({},
    num_warps=w) for w in (1, 2, 4)]``, what a helper that queries the device would build), anything else its repr."""
    if isinstance(value, dict) and set(value) == {"source"}:
        return str(value["source"])
    return repr(value)


def stub_source(name: str, value: Any, called: bool) -> str:
    if isinstance(value, dict) and set(value) == {"methods"}:  # an object whose methods answer (`platform.is_hip()`)
        methods = "".join(f"\n    @staticmethod\n    def {m}(*args, **kwargs):\n        return {stub_value(v)}\n"
                          for m, v in value["methods"].items())
        return f"class {name}:  # the target's {name}, as far as these methods go\n{methods}"
    if called:
        return f"def {name}(*args, **kwargs):\n    return {stub_value(value)}\n"
    return f"{name} = {stub_value(value)}\n"


LOGGER = ("class {name}:  # the target's logger: a task logs nothing\n"
          "    def debug(*args, **kwargs):\n        pass\n\n"
          "    info = warning = warning_once = info_once = debug_once = error = exception = critical = debug\n")


def is_logger(node: ast.stmt) -> bool:
    """``logger = get_logger("x")``, ``logger = logging.getLogger(__name__)``, ``logger = init_logger(...)``."""
    return isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and bool(
        re.search(r"(get_?logger|getLogger|init_logger)$", ast.unparse(node.value.func)))
