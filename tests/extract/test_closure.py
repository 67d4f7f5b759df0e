"""The closure follows what real packages do: star re-exports, imports inside functions, typing.overload stubs,
constants computed at import time by runtime helpers, environment reads, and standard-library types."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from evaluator.guard import check
from smithbot.extract.closure import ClosureBuilder, ExtractError


def _closure(tmp_path: Path, module: str, source: str, stubs: dict | None = None) -> ClosureBuilder:
    """The closure of ``launch`` in ``pkg/{module}.py``, written with ``source``."""
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / f"{module}.py").write_text(source)
    b = ClosureBuilder(tmp_path, {f"pkg.{module}": f"pkg/{module}.py"}, "pkg", stubs or {}, ())
    b.add(f"pkg.{module}", "launch")
    return b


def _source(b: ClosureBuilder) -> str:
    """The closure as a task's kernel.py lays it out: imports, stubs, then the definitions."""
    return "\n".join(sorted(b.c.imports.values())) + "\n\n" + "".join(b.c.stubs.values()) + "\n\n".join(
        d.source for d in b.render_definitions())


def _run(b: ClosureBuilder) -> dict:
    """The namespace the closure's source leaves when run as a module."""
    ns: dict = {}
    exec(compile(_source(b), "task", "exec"), ns)
    return ns


COMMON = '''from typing import overload


def ceil_div(a, b):
    return (a + b - 1) // b


@overload
def pick(x: int) -> int: ...
@overload
def pick(x: float) -> float: ...
def pick(x):
    return x * 2


def is_fnuz():
    import subprocess  # what a runtime probe may do; never reached in a task
    return subprocess.run(["nvidia-smi"]).returncode == 0
'''

OPS = '''import enum
import os
import warnings

from pkg.utils import ceil_div, is_fnuz

_FNUZ = is_fnuz()
_WIDTH = 1 if is_fnuz() else 2
_STEP = int(os.getenv("PKG_STEP", "1"))
_SIZES = [8, 16]


class Mode(enum.Enum):
    FAST = 1


def launch(n):
    from pkg.utils.common import pick
    from .extra import offset
    if _FNUZ:
        return -1
    if os.environ.get("PKG_DEBUG") is not None:
        warnings.warn("debugging")
    return pick(ceil_div(n, 4)) + offset + Mode.FAST.value + _STEP + _WIDTH + _SIZES[1]
'''


def test_star_reexports_local_imports_overloads_and_stubbed_constants(tmp_path: Path) -> None:
    files = {"pkg/__init__.py": "", "pkg/utils/__init__.py": "from .common import *\n", "pkg/utils/common.py": COMMON,
             "pkg/ops.py": OPS, "pkg/extra.py": "offset = 100\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    modules = {"pkg": "pkg/__init__.py", "pkg.utils": "pkg/utils/__init__.py", "pkg.utils.common": "pkg/utils/common.py",
               "pkg.ops": "pkg/ops.py", "pkg.extra": "pkg/extra.py"}
    b = ClosureBuilder(tmp_path, modules, "pkg", {"is_fnuz": False}, ())
    b.add("pkg.ops", "launch")
    assert b.c.blockers == []
    defs = {d.name: d for d in b.render_definitions()}
    assert defs["ceil_div"].path == "pkg/utils/common.py"  # found through `from .common import *`
    assert "@overload" not in defs["pick"].source and "return x * 2" in defs["pick"].source
    assert defs["_FNUZ"].source == "_FNUZ = False\n"  # the stub's value, not a call at import time
    assert defs["_WIDTH"].source == "_WIDTH = 2\n"  # and the branch it picks
    assert "import" not in defs["launch"].source  # the local imports became `pass`; their names are inlined
    assert defs["offset"].source == "offset = 100\n"
    assert defs["_STEP"].source == '_STEP = int("1")\n'  # environment reads pinned to their defaults
    assert defs["_SIZES"].source == "_SIZES = (8, 16)\n"  # a constant list becomes a tuple: no state to grow
    assert "os." not in defs["launch"].source and "import os" not in b.c.imports.values()
    src = _source(b)
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    assert ns["launch"](10) == 2 * 3 + 100 + 1 + 1 + 2 + 16


def test_a_reexported_flag_read_by_two_constants_is_no_cycle_and_fromhex_is_a_constant(tmp_path: Path) -> None:
    """vLLM's sampling constants: two module-level constants each read ``HAS_TRITON``, which the package's __init__
    re-exports; the second read once blocked as "an import cycle". ``float.fromhex`` of a literal is a float."""
    files = {"pkg/__init__.py": "", "pkg/flags/__init__.py": "from pkg.flags.probe import HAS_FAST\n",
             "pkg/flags/probe.py": "HAS_FAST = True\n",
             "pkg/ops.py": "from pkg.flags import HAS_FAST\n\n"
                           "TINY = float.fromhex('0x1p-126') if HAS_FAST else 0.0\n"
                           "ONE_MINUS = float.fromhex('0x1.fffffep-1') if HAS_FAST else 1.0\n\n\n"
                           "def launch(u):\n    return min(max(u, TINY), ONE_MINUS)\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    modules = {"pkg": "pkg/__init__.py", "pkg.flags": "pkg/flags/__init__.py", "pkg.flags.probe": "pkg/flags/probe.py",
               "pkg.ops": "pkg/ops.py"}
    b = ClosureBuilder(tmp_path, modules, "pkg", {}, ())
    b.add("pkg.ops", "launch")
    assert b.c.blockers == []
    ns = _run(b)
    assert ns["launch"](2.0) == float.fromhex("0x1.fffffep-1") and ns["launch"](0.0) == 2.0 ** -126


def test_a_triton_forks_module_blocks_with_its_name_unless_the_interpreter_stands_in(tmp_path: Path) -> None:
    """DeepLink's fork module is imported as the target does (the evaluator's interpreter stands in for it); another
    fork's module blocks, named; a local import in a branch for an older triton does not block."""
    b = _closure(tmp_path, "npu",
                 "import triton\nfrom triton.language.extra import deeplink as dl\nfrom triton.language.extra import "
                 "libdevice\nfrom triton.language.extra import mlu\n\n\ndef launch(x):\n"
                 "    return dl.compile_hint(x), libdevice.exp, mlu.cast(x), pick_exp()\n"
                 "\n\ndef pick_exp():\n    if triton.__version__ >= '3.0.0':\n"
                 "        from triton.language.extra.cuda.libdevice import fast_expf as tl_exp\n    else:\n"
                 "        from triton.language.math import fast_expf as tl_exp\n    return tl_exp\n")
    assert b.c.blockers == ["triton.language.extra.mlu (mlu) is not in the installed triton (a fork's or an older "
                            "triton's)"]
    assert b.c.imports["dl"].startswith("import triton.language.extra.deeplink as dl  # DeepLink's triton fork")


def test_a_tl_alias_imported_from_another_module_stays_a_tl_call(tmp_path: Path) -> None:
    """``fast_expf = tl.math.exp`` in one module, ``from .act import fast_expf`` in the next: the interpreter patches
    ``tl.math.exp`` when it launches, not a module-level copy of it, so the call must name tl."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "act.py").write_text(
        "import triton\nimport triton.language as tl\n\nif triton.__version__ >= '3.0.0':\n"
        "    fast_expf = tl.math.exp\nelse:\n    fast_expf = tl.math.fast_expf\n")
    (tmp_path / "pkg" / "k.py").write_text(
        "import triton\nimport triton.language as tl\nfrom .act import fast_expf\n\n\n@triton.jit\n"
        "def _k(X):\n    tl.store(X, fast_expf(tl.load(X)))\n\n\ndef launch(x):\n    _k[(1,)](x)\n")
    b = ClosureBuilder(tmp_path, {"pkg.act": "pkg/act.py", "pkg.k": "pkg/k.py"}, "pkg", {}, ())
    b.add("pkg.k", "launch")
    assert b.c.blockers == []
    defs = {d.name: d.source for d in b.render_definitions()}
    assert set(defs) == {"_k", "launch"}
    assert "tl.store(X, tl.math.exp(tl.load(X)))" in defs["_k"]


def test_an_optional_import_takes_the_targets_own_fallback(tmp_path: Path) -> None:
    """``try: from fast_pkg import f / except ImportError: HAS_F = False``: the target runs without fast_pkg, on
    its fallback, and so does the task; a required import of the same package still blocks."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "rot.py").write_text(
        "import torch\n\ntry:\n    from fast_pkg import rotate as _fast_rotate\n\n    HAS_FAST = True\n"
        "except ImportError:\n    HAS_FAST = False\n\n\ndef launch(x):\n    if HAS_FAST:\n"
        "        return _fast_rotate(x)\n    return torch.flip(x, [0])\n")
    b = ClosureBuilder(tmp_path, {"pkg.rot": "pkg/rot.py"}, "pkg", {}, ())
    b.add("pkg.rot", "launch")
    assert b.c.blockers == []
    src = _source(b)
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    import torch

    assert ns["HAS_FAST"] is False and torch.equal(ns["launch"](torch.arange(3)), torch.tensor([2, 1, 0]))
    b = _closure(tmp_path, "hard", "from fast_pkg import rotate\n\n\ndef launch(x):\n    return rotate(x)\n")
    assert b.c.blockers == ["import of fast_pkg.rotate (rotate)"]


def test_an_extensions_arithmetic_helper_is_that_arithmetic(tmp_path: Path) -> None:
    """``from deep_gemm import ceil_div`` inside a launcher (DLBlas's TMA alignment): the task defines it."""
    b = _closure(tmp_path, "align", "def launch(m):\n    from deep_gemm import ceil_div\n"
                                    "    return ceil_div(m, 16) * 16\n")
    assert b.c.blockers == []
    ns = _run(b)
    assert [ns["launch"](m) for m in (1, 16, 17)] == [16, 16, 32]


def test_a_version_check_compares_release_numbers_without_packaging(tmp_path: Path) -> None:
    """Also what surrounds such checks in real launchers: a device probe cached in a global, and a ROCm test."""
    b = _closure(tmp_path, "attn",
                 "import torch\nimport triton\nfrom packaging import version\n\n"
                 "TRITON_VERSION = version.parse(triton.__version__)\nVERSION_320 = version.parse('3.2.0')\n"
                 "_cap = None\n\n\n"
                 "def launch(block):\n    global _cap\n    if _cap is None:\n        _cap = (9, 0)\n"
                 "    if getattr(torch.version, 'hip', None) is not None:\n        return 32\n"
                 "    return 64 if block >= 512 and TRITON_VERSION < VERSION_320 else block + _cap[0]\n")
    assert b.c.blockers == []
    src = _source(b)
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    import triton

    assert ns["VERSION_320"] == (3, 2, 0)
    assert ns["TRITON_VERSION"][:2] == tuple(map(int, triton.__version__.split(".")[:2]))
    assert ns["launch"](512) == 521  # triton here is newer than 3.2; not ROCm; the probe asked on each call
    evolved = f"# EVOLVE-BLOCK-START\n{src}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok  # no module-level call's result, no global: as the guard wants


HELPERS = '''import functools
import logging
import os
from collections import OrderedDict

import torch
from fastext import fused_quant

_CACHE = OrderedDict()
_FLAG = False
logger = logging.getLogger(__name__)


def _padding(use_fast):
    if use_fast:
        return 128
    return 64 if bool(int(os.getenv("PKG_PAD", "1"))) else 0


PADDING = _padding(_FLAG)


def quant(x):
    return fused_quant(x)


def cached_quant(x):
    if x.shape not in _CACHE:
        _CACHE[x.shape] = x.abs().max()
    return _CACHE[x.shape]


def set_allocator():
    global _FLAG
    _FLAG = True


@functools.lru_cache(maxsize=8)
def pick_block(n):
    return 32 if n < 1024 else 128


def launch(x, use_fp8: bool = False):
    logger.debug("launch %s", x.shape)
    logger.debug_once("launched")  # vLLM's logger logs some lines once
    if use_fp8:
        set_allocator()
        return quant(x), cached_quant(x)
    return x * pick_block(x.numel()) + PADDING
'''


def test_a_helper_off_the_path_that_a_task_cannot_have_becomes_a_stub_that_says_so(tmp_path: Path) -> None:
    """An extension, module-level state, a global: in a helper the launcher calls only on other inputs (an fp8 path),
    the helper is replaced by one that raises with the reason; the launcher itself extracts and runs. A module
    constant a plain helper computes at import is computed at extraction, memoisation is dropped, and the logger
    logs nothing."""
    b = _closure(tmp_path, "ops", HELPERS)
    assert b.c.blockers == []
    defs = {d.name: d.source for d in b.render_definitions()}
    assert defs["PADDING"].startswith("PADDING = 64  #") and "lru_cache" not in defs["pick_block"]
    assert {"quant", "cached_quant", "set_allocator", "logger"} <= set(b.c.stubs) and "_CACHE" not in defs
    src = _source(b)
    evolved = f"# EVOLVE-BLOCK-START\n{src}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok, check(evolved, evolved, "launch")
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    import pytest
    import torch

    assert torch.equal(ns["launch"](torch.ones(4)), torch.full((4,), 32.0 + 64))
    with pytest.raises(NotImplementedError, match="set_allocator is not in this task: it does what a task may not"):
        ns["launch"](torch.ones(4), use_fp8=True)
    assert "external extension fastext" in b.c.stubs["quant"] or "import of fastext" in b.c.stubs["quant"]
    assert "_CACHE is module-level state" in b.c.stubs["cached_quant"]
    b = _closure(tmp_path, "direct", "from fastext import fused_quant\n\n\ndef launch(x):\n"
                                     "    return fused_quant(x)\n")
    assert b.c.blockers == ["import of fastext.fused_quant (fused_quant)"]  # the launcher's own need still blocks


def test_a_table_the_module_only_reads_extracts_and_a_debug_wrapper_is_dropped(tmp_path: Path) -> None:
    """``_SCALE = {...}`` that the module only reads is a constant, not state; ``@debug_api`` (a logging wrapper
    that would need the target's logging setup) only watches calls, so the task drops it."""
    src = ("import torch\n\n_SCALE = {torch.float32: 2.0, torch.float16: 4.0}\n\n\n"
           "def debug_api(f):\n    try:\n        return f\n    except Exception:\n        return f\n\n\n"
           "@debug_api\ndef launch(x):\n    return x * _SCALE[x.dtype] if x.dtype in _SCALE else x\n")
    b = _closure(tmp_path, "tables", src)
    assert b.c.blockers == []
    evolved = f"# EVOLVE-BLOCK-START\n{_source(b)}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok, check(evolved, evolved, "launch")
    ns = _run(b)
    import torch

    assert torch.equal(ns["launch"](torch.ones(3)), torch.full((3,), 2.0)) and "debug_api" not in _source(b)
    b = _closure(tmp_path, "written", src.replace("    return x *", "    _SCALE[x.dtype] = 1.0\n    return x *"))
    assert b.c.blockers == ["_SCALE is module-level state (a mutable container)"]


def test_an_autotune_decorator_applied_by_hand_is_written_out(tmp_path: Path) -> None:
    """``tune = triton.autotune(...)`` then ``k_tuned = tune(k)``: the task applies the decorator itself, so the
    guard sees a decorated kernel, not the result of a call."""
    src = ("import triton\nimport triton.language as tl\n\n"
           "tune = triton.autotune(configs=[triton.Config(kwargs={'BLOCK': 32}, num_warps=1)], key=['n'])\n\n\n"
           "@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n\n\nk_tuned = tune(k)\n\n\n"
           "def launch(x):\n    k_tuned[(1,)](x, x.numel())\n    return x\n")
    b = _closure(tmp_path, "tuned", src)
    assert b.c.blockers == []
    defs = {d.name: d.source for d in b.render_definitions()}
    assert defs["k_tuned"].startswith("k_tuned = triton.autotune(configs=[") and "tune" not in defs
    evolved = f"# EVOLVE-BLOCK-START\n{_source(b)}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok, check(evolved, evolved, "launch")


UTILS = '''import math

import triton
import triton.language as tl
from packaging import version


def get_tl_exp():
    if is_npu():
        from triton.language.math import exp as tl_exp
    elif triton.__version__ >= "3.0.0":
        from triton.language.extra.cuda.libdevice import fast_expf as tl_exp
    else:
        from triton.language.math import fast_expf as tl_exp
    return tl_exp


exp = get_tl_exp()
LOG2 = math.log(2)

if version.parse(triton.__version__) <= version.parse("2.2.0"):

    def meta():
        from triton.runtime.jit import get_cuda_stream
        return get_cuda_stream(0)
else:

    def meta():
        return 1


@triton.jit
def _k(X):
    tl.store(X, exp(tl.load(X)) * LOG2)


def launch(x):
    _k[(1,)](x)
    return meta()
'''


def test_import_time_choices_by_triton_version_are_made_for_the_installed_triton(tmp_path: Path) -> None:
    """``exp = get_tl_exp()`` picks a tl function by version: an alias of it. ``math.log(2)`` is a number. Of a
    module-level ``if`` on the version, the branch this triton takes is the one extracted."""
    b = _closure(tmp_path, "utils", UTILS, {"is_npu": False})
    assert b.c.blockers == []
    defs = {d.name: d.source for d in b.render_definitions()}
    assert "tl.extra.cuda.libdevice.fast_expf(tl.load(X))" in defs["_k"] and "exp" not in defs
    assert defs["LOG2"].startswith(f"LOG2 = {math.log(2)!r}") and defs["meta"].strip().endswith("return 1")


def test_a_helper_whose_closure_runs_into_the_serving_stack_becomes_a_stub(tmp_path: Path) -> None:
    from smithbot.extract.closure import HELPER_DEFINITIONS

    chain = "".join(f"def h{i}(x):\n    return h{i + 1}(x)\n\n\n" for i in range(HELPER_DEFINITIONS + 10))
    b = _closure(tmp_path, "deep", chain + f"def h{HELPER_DEFINITIONS + 10}(x):\n    return x\n\n\n"
                 "def small(x):\n    return x + 1\n\n\ndef launch(x, debug=False):\n"
                 "    return h0(x) if debug else small(x)\n")
    assert b.c.blockers == [] and "small" in {d.name for d in b.c.definitions}
    assert f"needs more than {HELPER_DEFINITIONS} definitions" in b.c.stubs["h0"]
    assert len(b.c.definitions) < 5  # the chain was given up, not copied


def test_a_settings_object_read_takes_its_declared_default(tmp_path: Path) -> None:
    """``envs = Envs()`` is module-level state that no task may hold, but ``envs.FLAG.get()`` only reads a setting
    whose default the class declares (``EnvBool(False)``, ``Gated("NAME", 3)``): that default, as a clean environment
    gives it, replaces the read, in the launcher and at module level, and ``envs`` is not needed."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "environ.py").write_text(
        "import os\n\n\nclass EnvBool:\n    def __init__(self, default):\n        self.default = default\n\n"
        "    def get(self):\n        return os.environ.get('X', self.default)\n\n\n"
        "class Envs:\n    USE_FAST = EnvBool(False)\n    BLOCK = Gated('BLOCK', 3)\n\n\nenvs = Envs()\n")
    b = _closure(tmp_path, "op", "import torch\nfrom pkg.environ import envs\n\n_FAST = envs.USE_FAST.get()\n\n\n"
                 "def debug(m):\n    if envs.USE_FAST.get():\n        print(m)\n\n\n"  # its whole body goes
                 "def launch(x):\n    debug(x)\n    if _FAST or envs.USE_FAST.get():\n"
                 "        raise RuntimeError('fast path')\n    return x * envs.BLOCK.get()\n")
    assert b.c.blockers == []
    src = _source(b)
    assert "envs" not in src.replace("_FAST = False  # envs.USE_FAST.get(), at extraction", "")
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    assert ns["launch"](2) == 6
    # a stub named after the setting wins over its default: the target's YAML steers off a path a task cannot take
    (tmp_path / "pkg" / "op.py").unlink()
    b = _closure(tmp_path, "op", "import torch\nfrom pkg.environ import envs\n\n\n"
                 "def launch(x):\n    return x * envs.BLOCK.get()\n", stubs={"BLOCK": 5})
    ns = _run(b)
    assert ns["launch"](2) == 10


def test_an_environment_table_module_reads_as_a_clean_environment_gives_it(tmp_path: Path) -> None:
    """``import pkg.envs as envs`` where the module answers ``envs.X`` from a dict of getters through its
    ``__getattr__``: the task holds a stand-in class with each attribute the launcher's module reads, as its getter
    computes it with no variable set. A getter that is not a constant leaves the import a blocker."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "envs.py").write_text(
        "import os\n\n\ndef as_bool(v):\n    if v is None:\n        return None\n    return bool(int(v))\n\n\n"
        "environment_variables = {\n    'FAST': lambda: bool(int(os.getenv('FAST', '0'))),\n"
        "    'BLOCK': lambda: int(os.getenv('BLOCK', '3')),\n    'MODE': lambda: os.getenv('MODE', 'Auto').lower(),\n"
        "    'V2': lambda: as_bool(os.getenv('V2', None)),\n    'HOST': lambda: open('/etc/hostname').read(),\n"
        "    'PORT': 8000,\n}\n\n\ndef __getattr__(name):\n    return environment_variables[name]()\n")
    b = _closure(tmp_path, "op", "import torch\nimport pkg.envs as envs\n\n_FAST = envs.FAST\n\n\n"
                 "def launch(x):\n    if _FAST or envs.V2:\n        raise RuntimeError('fast path')\n"
                 "    return x * envs.BLOCK if envs.MODE == 'auto' else x\n")
    assert b.c.blockers == []
    ns = _run(b)
    assert ns["launch"](2) == 6
    assert (ns["envs"].FAST, ns["envs"].V2, ns["envs"].MODE) == (False, None, "auto")
    (tmp_path / "pkg" / "op.py").unlink()
    b = _closure(tmp_path, "op", "import torch\nimport pkg.envs as envs\n\n\n"
                 "def launch(x):\n    return x if envs.HOST else -x\n")
    assert b.c.blockers == ["envs is a module of the target (pkg.envs); only definitions inline"]
    (tmp_path / "pkg" / "op.py").unlink()  # beside a constant one, a getter that is none is left out
    b = _closure(tmp_path, "op", "import torch\nimport pkg.envs as envs\n\n\n"
                 "def host():\n    return envs.HOST\n\n\ndef launch(x):\n    return x * envs.BLOCK\n")
    ns = _run(b)
    assert ns["launch"](2) == 6 and not hasattr(ns["envs"], "HOST")


def test_a_package_probe_answers_as_a_task_is_installed(tmp_path: Path) -> None:
    """``importlib.util.find_spec(name) is not None`` asks whether a package is installed: in a task, torch and triton
    are, and nothing else, so the launcher takes its Triton path."""
    b = _closure(tmp_path, "op", "import importlib\nimport torch\n\n\ndef _has(name):\n"
                 "    return importlib.util.find_spec(name) is not None\n\n\n"
                 "def launch(x):\n    if _has('cutlass') or not _has('triton.language'):\n"
                 "        raise RuntimeError('cute path')\n    return x + 1\n")
    assert b.c.blockers == []
    ns = _run(b)
    assert ns["launch"](1) == 2


def test_what_only_other_paths_or_profilers_need_does_not_block(tmp_path: Path) -> None:
    """A call into a module a task cannot import, on a branch the CUDA path may not take (``if on_cpu:
    ext.f_cpu(x)``), becomes a stub that raises and names it; a profiler label does nothing; the target's logger
    module logs nothing. Called on every path, the same import still blocks (see the optional-import test)."""
    (tmp_path / "pkg" / "utils").mkdir(parents=True)
    (tmp_path / "pkg" / "utils" / "logger.py").write_text("def info(*args):\n    print(*args)\n")
    (tmp_path / "pkg" / "op.py").write_text(
        "import torch\nfrom torch.profiler import record_function\nfrom cpu_ext import add_one_cpu\n"
        "from pkg.utils import logger\n\n\ndef launch(x, on_cpu=False):\n    logger.info('launch')\n"
        "    with record_function('launch'):\n        if on_cpu:\n            return add_one_cpu(x)\n"
        "        return x + 1\n")
    b = ClosureBuilder(tmp_path, {"pkg.op": "pkg/op.py", "pkg.utils.logger": "pkg/utils/logger.py"}, "pkg", {}, ())
    b.add("pkg.op", "launch")
    assert b.c.blockers == []
    ns = _run(b)
    assert ns["launch"](1) == 2
    with pytest.raises(NotImplementedError, match="add_one_cpu is not in this task: it comes from cpu_ext"):
        ns["launch"](1, on_cpu=True)


def test_an_extension_imported_inside_a_function_is_judged_by_that_function(tmp_path: Path) -> None:
    """``if ue8m0: from ext import relayout`` then ``relayout(s)``: only that branch needs the extension, so the
    name becomes a stub that raises there, even where another function of the module calls it on every path. A
    function that needs it on every path still blocks."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "quant.py").write_text(
        "def launch(x, ue8m0=False):\n    y = x * 2\n    if ue8m0:\n        from ext import relayout\n\n"
        "        y = relayout(y)\n    return y\n\n\ndef always(x):\n    from ext import relayout\n\n"
        "    return relayout(x)\n")
    b = ClosureBuilder(tmp_path, {"pkg.quant": "pkg/quant.py"}, "pkg", {}, ("ext",))
    b.add("pkg.quant", "launch")
    assert b.c.blockers == []
    ns = _run(b)
    assert ns["launch"](3) == 6
    with pytest.raises(NotImplementedError, match="relayout is not in this task: it comes from the external "
                                                  "extension ext"):
        ns["launch"](3, ue8m0=True)
    b = ClosureBuilder(tmp_path, {"pkg.quant": "pkg/quant.py"}, "pkg", {}, ("ext",))
    b.add("pkg.quant", "always")
    assert b.c.blockers == ["external extension ext (relayout)"]


def test_a_list_a_stub_chooses_is_a_constant_tuple(tmp_path: Path) -> None:
    """``NUM_WARPS = [2, 4] if is_hopper() else [2, 4, 8]``: the stub's value picks the list, which becomes a tuple
    (a module-level list is state to the evaluator's guard)."""
    b = _closure(tmp_path, "warps", "def is_hopper():\n    return False\n\n\nNUM_WARPS = [2, 4] if is_hopper() else "
                 "[2, 4, 8]\n\n\ndef launch():\n    return max(NUM_WARPS)\n", stubs={"is_hopper": True})
    assert b.c.blockers == []
    src = _source(b)
    assert "NUM_WARPS = (2, 4)" in src
    evolved = f"# EVOLVE-BLOCK-START\n{src}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    assert ns["launch"]() == 4


def test_a_stub_may_be_source_for_what_a_device_query_builds(tmp_path: Path) -> None:
    """``configs=tune_configs()`` asks the device for its warp size; the target YAML's ``{source: ...}`` stub gives
    the list of configs it would build, as code."""
    src = ("import triton\nimport triton.language as tl\n\n\ndef tune_configs():\n"
           "    return [triton.Config({}, num_warps=w) for w in range(getattr(object(), 'warps', 3))]\n\n\n"
           "@triton.autotune(configs=tune_configs(), key=['n'])\n@triton.jit\ndef k(x_ptr, n):\n    pass\n\n\n"
           "def launch():\n    return len(k.configs)\n")
    b = _closure(tmp_path, "tuned", src, stubs={
        "tune_configs": {"source": "[triton.Config({}, num_warps=w) for w in (1, 2, 4)]"}})
    assert b.c.blockers == []
    assert b.c.stubs["tune_configs"] == ("def tune_configs(*args, **kwargs):\n"
                                         "    return [triton.Config({}, num_warps=w) for w in (1, 2, 4)]\n")
    import importlib.util

    (tmp_path / "task_tuned.py").write_text(_source(b))  # triton.jit reads its function's source from a file
    spec = importlib.util.spec_from_file_location("task_tuned", tmp_path / "task_tuned.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    assert mod.launch() == 3


def test_what_the_installed_triton_offers_is_asked_at_extraction(tmp_path: Path) -> None:
    """``hasattr(tl, ...)``, ``... in dir(tl)`` and ``inspect.signature(triton.autotune).parameters`` are asked of
    the installed triton, as the target asks at import; a settings dict that a decorator splats is written out."""
    import inspect

    import triton
    import triton.language as tl

    b = _closure(tmp_path, "probe", "import inspect\nimport triton\nimport triton.language as tl\n\n"
                 "HAS_GATHER = hasattr(tl, 'gather')\nHAS_NOPE = 'no_such_thing' in dir(tl)\n"
                 "CACHES = 'cache_results' in inspect.signature(triton.autotune).parameters\n"
                 "cache_kwargs = {'cache_results': True} if CACHES else {}\n\n\n"
                 "@triton.autotune(configs=[triton.Config({})], key=[], **cache_kwargs)\n@triton.jit\n"
                 "def _k(X):\n    pass\n\n\ndef launch(x):\n    _k[(1,)](x)\n    return HAS_GATHER, HAS_NOPE\n")
    assert b.c.blockers == []
    src = _source(b)
    caches = "cache_results" in inspect.signature(triton.autotune).parameters
    assert ("cache_results=True" in src) == caches and "cache_kwargs" not in src
    (tmp_path / "task_probe.py").write_text(src)  # @triton.jit reads its source from a file
    spec = importlib.util.spec_from_file_location("task_probe", tmp_path / "task_probe.py")
    task = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(task)  # type: ignore[union-attr]
    assert (task.HAS_GATHER, task.HAS_NOPE) == (hasattr(tl, "gather"), False)


def test_a_msgspec_result_record_becomes_a_named_tuple(tmp_path: Path) -> None:
    """``class Result(msgspec.Struct, frozen=True)`` with annotated fields: msgspec is no import a task may make, and
    a NamedTuple (immutable already: the struct's options go) is the same record, built by keyword, read by attribute,
    and compared field by field by the evaluator."""
    b = _closure(tmp_path, "rec", "import msgspec\nimport torch\n\n\nclass Result(msgspec.Struct, frozen=True):\n"
                 "    rows: torch.Tensor\n    total: int\n\n\ndef launch(x):\n"
                 "    return Result(rows=x + 1, total=int(x.numel()))\n")
    assert b.c.blockers == [] and "import typing" in b.c.imports.values()
    src = _source(b)
    evolved = f"# EVOLVE-BLOCK-START\n{src}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    import torch

    r = ns["launch"](torch.zeros(3))
    assert r.total == 3 and torch.equal(r.rows, torch.ones(3)) and isinstance(r, tuple)


def test_a_class_method_that_never_uses_its_class_extracts_as_a_function(tmp_path: Path) -> None:
    src = ("class Pack:\n    @classmethod\n    def run(cls, x):\n        return x + 1\n\n"
           "    @classmethod\n    def again(cls, x):\n        return cls.run(x)\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pack.py").write_text(src)
    b = ClosureBuilder(tmp_path, {"pkg.pack": "pkg/pack.py"}, "pkg", {}, ())
    fn = b.add_method("pkg.pack", "Pack", "run", "Pack_run")
    assert [a.arg for a in fn.args.args] == ["x"] and not fn.decorator_list
    with pytest.raises(ExtractError, match="not classmethod"):  # it calls through cls: no plain function
        ClosureBuilder(tmp_path, {"pkg.pack": "pkg/pack.py"}, "pkg", {}, ()).add_method(
            "pkg.pack", "Pack", "again", "Pack_again")


def test_a_profiler_label_written_out_does_nothing(tmp_path: Path) -> None:
    b = _closure(tmp_path, "labelled", "import torch\n\n\ndef launch(x):\n"
                 "    with torch.profiler.record_function('gemm'):\n        return x + 1\n")
    assert b.c.blockers == [] and "torch.profiler.record_function(" not in _source(b)
    evolved = f"# EVOLVE-BLOCK-START\n{_source(b)}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok
    ns = _run(b)
    assert ns["launch"](1) == 2


def test_a_tl_function_imported_by_name_is_called_by_its_qualified_name(tmp_path: Path) -> None:
    """``from triton.language.math import rsqrt`` binds the compiler's builtin at import, which the interpreter cannot
    call; the task calls ``tl.math.rsqrt``, which both run. A libdevice import stays: the stand-in serves it. And
    ``tl.math.round``, which the installed triton keeps in libdevice only, is called there."""
    b = _closure(tmp_path, "norm", "import triton\nimport triton.language as tl\n"
                 "from triton.language.math import rsqrt\n"
                 "from triton.language.extra.libdevice import tanh\n\n\n@triton.jit\n"
                 "def _k(X, N: tl.constexpr):\n    x = tl.load(X + tl.arange(0, N))\n"
                 "    tl.store(X + tl.arange(0, N), tanh(rsqrt(x)) + tl.math.round(x))\n\n\n"
                 "def launch(x):\n    _k[(1,)](x, x.numel())\n")
    src = _source(b)
    assert "tanh(tl.math.rsqrt(x))" in src and "import rsqrt" not in src, src
    # older triton's tl.math held libdevice's functions; the installed one keeps them in libdevice
    assert "tl.extra.cuda.libdevice.round(x)" in src
    assert "from triton.language.extra.libdevice import tanh" in src
    import os
    import subprocess
    import sys

    run = src + "\n\nimport torch\nx = torch.rand(8) * 3 + 0.5\nwant = torch.tanh(torch.rsqrt(x)) + torch.round(x)\n" \
                "launch(x)\n" \
                "assert torch.allclose(x, want), (x, want)\n"
    (tmp_path / "task.py").write_text("from evaluator import standin\nstandin.install()\n" + run)
    from tests.conftest import ROOT
    out = subprocess.run([sys.executable, str(tmp_path / "task.py")], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"})
    assert out.returncode == 0, out.stderr[-1500:]


TUNED_LATER = '''import torch
import triton
import triton.language as tl

from pkg.utils import is_cpu

_is_cpu = is_cpu()

tuned = triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in [16, 32] for w in [2, 4]],
    key=["n"],
)


@triton.jit
def _scale_kernel(X, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)


if not _is_cpu:
    _scale_kernel = tuned(_scale_kernel)
else:
    _scale_kernel = None


def launch(x):
    _scale_kernel[lambda META: (triton.cdiv(x.numel(), META["BLOCK"]),)](x, x.numel())
'''


def test_an_autotuner_made_at_module_level_and_applied_on_a_decided_branch_follows_the_kernel(tmp_path: Path) -> None:
    """``tuned = triton.autotune(configs=[... for ...])`` at module level, applied under ``if not _is_cpu:``: the
    task applies it to the kernel, with its configs written out (a module-level list would be state to the guard),
    and the CPU branch's rebinding is not taken."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "utils.py").write_text("def is_cpu():\n    return False\n")
    b = _closure(tmp_path, "ops", TUNED_LATER, stubs={"is_cpu": False})
    text = _source(b)
    assert "_scale_kernel = triton.autotune(configs=(triton.Config({'BLOCK': 16}, num_warps=2), " in text, text
    assert text.count("triton.Config(") == 4 and "for b in" not in text and "_scale_kernel = None" not in text
    evolved = f"# EVOLVE-BLOCK-START\n{text}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok, check(evolved, evolved, "launch")
    (tmp_path / "task_kernel.py").write_text(text)  # triton reads a kernel's source from its file
    spec = importlib.util.spec_from_file_location("task_kernel", tmp_path / "task_kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [c.kwargs["BLOCK"] for c in module._scale_kernel.configs] == [16, 16, 32, 32]


def test_a_second_definition_imported_under_another_name_raises_where_it_is_called(tmp_path: Path) -> None:
    """``launch`` calls this module's ``scale``, and on one branch imports another module's ``scale`` as ``_fast``:
    one task cannot hold both definitions, so ``_fast`` raises if its path is taken, and the launcher still
    extracts."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "fast.py").write_text("def scale(x):\n    return x * 3\n")
    b = _closure(tmp_path, "ops", "def scale(x):\n    return x * 2\n\n\n"
                                  "def launch(x, fast=False):\n    if fast:\n"
                                  "        from pkg.fast import scale as _fast\n\n        return _fast(x)\n"
                                  "    return scale(x)\n")
    assert b.c.blockers == []
    ns = _run(b)
    assert ns["launch"](2) == 4
    with pytest.raises(NotImplementedError, match="pkg.fast.scale is not in this task: it has another definition"):
        ns["launch"](2, fast=True)


def test_an_autotune_key_keeps_only_the_kernels_parameters() -> None:
    """Older triton skipped a key name that is no parameter of the kernel (``block_size`` here, a launcher's
    variable); newer triton refuses it. The task's key keeps the parameters, in order."""
    import ast

    from smithbot.extract.rewrite import for_the_task

    src = ("@triton.autotune(configs=[triton.Config({}, num_warps=4)], key=['n', 'block_size', 'HAS_SINK'])\n"
           "@triton.jit\ndef k(x_ptr, n, HAS_SINK: tl.constexpr):\n    pass\n")
    out = for_the_task(ast.parse(src).body[0], lambda module, name: True)
    assert out is not None and "key=['n', 'HAS_SINK']" in ast.unparse(out)
    assert for_the_task(ast.parse(src.replace("'block_size', ", "")).body[0], lambda module, name: True) is None


def test_a_constant_bound_on_both_sides_of_a_decided_if_takes_the_side_taken(tmp_path: Path) -> None:
    """``if is_fp8_fnuz(): fp8_dtype = fnuz else: fp8_dtype = fn``, with ``is_fp8_fnuz`` stubbed False: the task
    takes the second binding (the first in the file is the ROCm one, which NVIDIA's triton cannot even compile)."""
    source = '''import torch


def is_fp8_fnuz():
    return torch.cuda.get_device_properties(0).gcnArchName == "gfx942"


if is_fp8_fnuz():
    fp8_dtype = torch.float8_e4m3fnuz
    fp8_max = 224.0
else:
    fp8_dtype = torch.float8_e4m3fn
    fp8_max = 448.0


def launch(x):
    return x.to(fp8_dtype).clamp(-fp8_max, fp8_max)
'''
    text = _source(_closure(tmp_path, "quant", source, stubs={"is_fp8_fnuz": False}))
    assert "fp8_dtype = torch.float8_e4m3fn\n" in text and "fp8_max = 448.0" in text, text
    assert "fnuz" not in text.replace("is_fp8_fnuz", "")
    text = _source(_closure(tmp_path, "quant", source, stubs={"is_fp8_fnuz": True}))
    assert "fp8_dtype = torch.float8_e4m3fnuz\n" in text and "fp8_max = 224.0" in text, text


def test_a_fake_tensor_check_becomes_a_class_no_task_tensor_is(tmp_path: Path) -> None:
    """``if not isinstance(x, FakeTensor):`` (skip the launch while torch.compile traces): torch's private module is
    no import a task may make; a stand-in class keeps the check, and a real tensor takes the launch path."""
    b = _closure(tmp_path, "fake", "import torch\nfrom torch._subclasses.fake_tensor import FakeTensor\n\n\n"
                 "def launch(x):\n    if not isinstance(x, FakeTensor):\n        return x + 1\n    return x\n")
    assert b.c.blockers == [], b.c.blockers
    src = _source(b)
    assert "_subclasses" not in src
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    import torch

    assert torch.equal(ns["launch"](torch.zeros(2)), torch.ones(2))


def test_a_platform_object_stub_answers_its_methods(tmp_path: Path) -> None:
    """``current_platform`` (a lazy module attribute, bound nowhere at module level) stubbed as ``{methods: {is_hip:
    false}}``: a class whose methods answer, which the guard accepts (no state) and the launcher calls."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "platforms.py").write_text("def __getattr__(name):\n    raise AttributeError(name)\n")
    b = _closure(tmp_path, "mod", "import torch\nfrom pkg.platforms import current_platform\n\n\n"
                 "def launch(x):\n    return x * 2 if current_platform.is_hip() else x + 1\n",
                 stubs={"current_platform": {"methods": {"is_hip": False, "is_cuda": True}}})
    assert b.c.blockers == [], b.c.blockers
    src = _source(b)
    evolved = f"# EVOLVE-BLOCK-START\n{src}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok, check(evolved, evolved, "launch")
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    import torch

    assert torch.equal(ns["launch"](torch.zeros(2)), torch.ones(2)) and ns["current_platform"].is_cuda()


def test_a_type_check_against_an_engine_class_goes_with_its_import(tmp_path: Path) -> None:
    """sglang's FA3 metadata launcher imports SWAKVPool inside a branch only to assert an argument's type: the
    class's module (a memory pool with ctypes, env reads, module state) would block the task. The assert and the
    import go; the branch, and a use of the class beyond the check, stay."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pool.py").write_text("import ctypes\nimport os\n\n\nclass Pool:\n    lib = ctypes.CDLL(os."
                                              "environ['LIB'])\n")
    b = _closure(tmp_path, "meta", '''import torch


def launch(x, pool=None):
    if pool is not None:
        from pkg.pool import Pool

        assert isinstance(pool, Pool)
        x = x + pool.offset
    return x * 2
''')
    assert b.c.blockers == []
    src = _source(b)
    assert "Pool" not in src and "assert" not in src and "pool.offset" in src
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    import torch

    assert torch.equal(ns["launch"](torch.arange(3)), torch.tensor([0, 2, 4]))
    # a class used for more than the check stays, as a stub that says why it is not in the task (its module needs
    # ctypes): the task extracts, and the branch that uses it fails when it runs
    b = _closure(tmp_path, "uses", '''def launch(x, pool=None):
    if pool is not None:
        from pkg.pool import Pool

        assert isinstance(pool, Pool)
        return Pool(pool)
    return x
''')
    assert b.c.blockers == [] and "import of ctypes" in b.c.stubs["Pool"], b.c.stubs
    ns = _run(b)
    assert ns["launch"](3) == 3
    with pytest.raises(NotImplementedError, match="Pool is not in this task: import of ctypes"):
        ns["launch"](3, pool=object())


TUNING = '''import json
import os


class BlockConfigs:
    """A tuning table read from JSON files beside the module (LightLLM's kernel configs)."""

    @classmethod
    def try_to_get_best_config(cls, n):
        with open(os.path.join(os.path.dirname(__file__), f"{n}.json")) as f:
            return json.load(f)


def launch(x, **run_config):
    if not run_config:
        run_config = BlockConfigs.try_to_get_best_config(x.numel())
    return x * run_config["BLOCK"]
'''


def test_a_class_off_the_path_that_a_task_cannot_have_becomes_a_stub_that_says_so(tmp_path: Path) -> None:
    """A tuning-table class that reads files (os, json, ``__file__``), asked only when the launcher is handed no
    settings: the class becomes one whose methods raise with the reason, and the launcher extracts and runs on the
    settings its task passes."""
    import pytest
    import torch

    b = _closure(tmp_path, "tuned", TUNING)
    assert b.c.blockers == [] and "BlockConfigs" in b.c.stubs
    src = _source(b)
    evolved = f"# EVOLVE-BLOCK-START\n{src}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok, check(evolved, evolved, "launch")
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    assert torch.equal(ns["launch"](torch.ones(4), BLOCK=8), torch.full((4,), 8.0))
    with pytest.raises(NotImplementedError, match="BlockConfigs is not in this task: import of"):
        ns["launch"](torch.ones(4))


STATE_AND_CONSTEXPR = '''import math

import torch
import triton
import triton.language as tl

from pkg.manager import g_manager

_ALPHA = triton.language.constexpr(math.sqrt(2.0 / math.pi))


@triton.jit
def _gelu(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(Y + offs, x * tl.sigmoid(_ALPHA * x), mask=offs < n)


def launch(x, use_custom_allocator=False):
    if use_custom_allocator:
        y = g_manager.alloc_tensor(x.shape, x.dtype)
    else:
        y = torch.empty_like(x)
    _gelu[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return y
'''

MANAGER = '''class Manager:
    def __init__(self):
        self.buffers = {}

    def alloc_tensor(self, shape, dtype):
        return self.buffers.setdefault((shape, dtype), None)


global g_manager
g_manager = Manager()
'''


def test_a_constexpr_a_plain_expression_gives_and_an_allocator_object_off_the_path(tmp_path: Path) -> None:
    """``_ALPHA = tl.constexpr(math.sqrt(2 / pi))`` is a constant computed at extraction, and stays a constexpr (the
    only globals a kernel may read); ``g_manager = Manager()``, module-level state that the launcher only calls a
    method of on a branch its default flag skips, stands in as an object whose methods raise and say why, instead
    of blocking the kernel."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "manager.py").write_text(MANAGER)
    (tmp_path / "pkg" / "ops.py").write_text(STATE_AND_CONSTEXPR)
    b = ClosureBuilder(tmp_path, {"pkg.ops": "pkg/ops.py", "pkg.manager": "pkg/manager.py"}, "pkg", {}, ())
    b.add("pkg.ops", "launch")
    assert b.c.blockers == []
    defs = {d.name: d.source for d in b.render_definitions()}
    assert defs["_ALPHA"].startswith(f"_ALPHA = triton.language.constexpr({math.sqrt(2.0 / math.pi)!r})")
    assert "g_manager" in b.c.stubs and "Manager" not in defs
    src = _source(b)
    evolved = f"# EVOLVE-BLOCK-START\n{src}\n# EVOLVE-BLOCK-END\n"
    assert check(evolved, evolved, "launch").ok, check(evolved, evolved, "launch")
    path = tmp_path / "task_kernel.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("task_kernel", path)
    ns = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(ns)  # type: ignore[union-attr]
    import torch

    with pytest.raises(NotImplementedError, match="g_manager is not in this task: it is module-level state"):
        ns.launch(torch.ones(4), use_custom_allocator=True)
    # passed on as an argument, the object is more than its methods: it still blocks, as before
    (tmp_path / "pkg" / "ops.py").write_text(STATE_AND_CONSTEXPR.replace(
        "g_manager.alloc_tensor(x.shape, x.dtype)", "torch.empty_like(x, out=g_manager)"))
    b = ClosureBuilder(tmp_path, {"pkg.ops": "pkg/ops.py", "pkg.manager": "pkg/manager.py"}, "pkg", {}, ())
    b.add("pkg.ops", "launch")
    assert b.c.blockers == ["g_manager is module-level state (the result of Manager())"]


def test_a_module_that_hands_triton_on_is_read_as_triton(tmp_path: Path) -> None:
    """``from pkg.triton_utils import tl, triton``, where the package imports Triton behind a check that it is
    installed and binds placeholders otherwise (vLLM's ``triton_utils``): the task imports Triton itself, not the
    placeholder, and its kernel runs."""
    (tmp_path / "pkg" / "triton_utils").mkdir(parents=True)
    (tmp_path / "pkg" / "triton_utils" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n\nHAS_TRITON = True\nif TYPE_CHECKING or HAS_TRITON:\n    import triton\n"
        "    import triton.language as tl\nelse:\n    triton = object()\n    tl = object()\n")
    (tmp_path / "pkg" / "op.py").write_text(
        "import torch\nfrom pkg.triton_utils import tl, triton\n\n\n@triton.jit\ndef _k(X, BLOCK: tl.constexpr):\n"
        "    tl.store(X + tl.arange(0, BLOCK), 1.0)\n\n\ndef launch(x):\n    _k[(1,)](x, BLOCK=8)\n    return x\n")
    b = ClosureBuilder(tmp_path, {"pkg.op": "pkg/op.py", "pkg.triton_utils": "pkg/triton_utils/__init__.py"}, "pkg",
                       {}, ())
    b.add("pkg.op", "launch")
    assert b.c.blockers == []
    assert b.c.imports["triton"] == "import triton" and b.c.imports["tl"] == "import triton.language as tl"
    assert "object()" not in _source(b)


def test_module_state_a_platform_method_or_the_task_s_own_packages_decide_is_a_constant(tmp_path: Path) -> None:
    """vLLM computes kernel constants at import: ``is_hip_ = current_platform.is_rocm()``, ``HAS_TRITON =
    find_spec("triton") is not None``, ``_TINY = float.fromhex(...)``. The platform stub, the packages every task
    has (torch and triton) decide the first two at extraction, so they are literals, not state; a pure float parse
    is no state at all, and stays as written."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "platforms.py").write_text("def __getattr__(name):\n    raise AttributeError(name)\n")
    b = _closure(tmp_path, "mod", "from importlib.util import find_spec\n\nimport torch\n"
                 "from pkg.platforms import current_platform\n\n"
                 "is_hip_ = current_platform.is_rocm()\n"
                 "HAS_TRITON = find_spec('triton') is not None or find_spec('other-triton') is not None\n"
                 "HAS_OTHER = find_spec('some_plugin') is not None\n"
                 "_TINY = float.fromhex('0x1p-126')\n\n\n"
                 "def launch(x):\n    return x * 2 if is_hip_ or not HAS_TRITON else x + _TINY\n\n\n"
                 "def other():\n    return HAS_OTHER\n",
                 stubs={"current_platform": {"methods": {"is_rocm": False}}})
    assert b.c.blockers == [], b.c.blockers
    src = _source(b)
    assert "is_hip_ = False" in src and "HAS_TRITON = True" in src and "_TINY = float.fromhex('0x1p-126')" in src
    ns: dict = {}
    exec(compile(src, "task", "exec"), ns)
    import torch

    assert torch.equal(ns["launch"](torch.zeros(2)), torch.full((2,), 2.0 ** -126))
    # a package a task need not have stays undecided: its module-level test is state, which blocks
    b = _closure(tmp_path, "mod", "from importlib.util import find_spec\n\n"
                 "HAS_OTHER = find_spec('some_plugin') is not None\n\n\ndef launch(x):\n    return HAS_OTHER\n")
    assert any("HAS_OTHER is module-level state" in x for x in b.c.blockers), b.c.blockers
