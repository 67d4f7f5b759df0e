"""The static guard lets the bundled baselines and candidates through and blocks what the rules say."""

from __future__ import annotations

import pytest

from evaluator import check
from tests.conftest import TASKS
from tests.evaluator.test_task import BUNDLED

RMS = (TASKS / "rmsnorm" / "kernel.py").read_text()


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_sources_pass(name: str) -> None:
    import yaml

    entry = yaml.safe_load((TASKS / name / "task.yaml").read_text())["entry"]
    base = (TASKS / name / "kernel.py").read_text()
    assert check(base, base, entry).ok
    for cand in (TASKS / name / "candidates").glob("*.py"):
        assert check(base, cand.read_text(), entry).ok, cand


@pytest.mark.parametrize("snippet, reason", [
    ("    from torch import empty\n", "import"),
    ("    x = getattr(torch, 'em' + 'pty')\n", "forbidden"),  # a computed name
    ("    t = getattr(x, '__class__', None)\n", "forbidden"),  # a literal one is judged as the attribute it reads
    ("    f = getattr(torch.cuda, 'synchronize', None)\n", "forbidden"),
    ("    t = x.__class__\n", "forbidden"),
    ("    global eps\n", "state"),
    ("    y = triton.testing.do_bench\n", "forbidden"),
    ("    y = torch.load\n", "forbidden"),
    ("    e = torch.cuda.Event(enable_timing=True)\n", "forbidden"),
    ("    y = torch.matmul(x, x)\n", "torch_compute"),
    ("    y = x.sum()\n", "torch_compute"),
    ("    n = tl.standard._max_tensor\n", "forbidden"),  # triton's private names, but for one helper
    ("    triton.knobs.amd.use_buffer_ops = False\n", "state"),  # a knob set for good: state between calls
    ("    with triton.knobs.amd.scope():\n        triton.knobs.cache.dir = 'x'\n", "state"),  # not a backend's
    ("    from triton.tools import disasm\n", "import"),  # of triton.tools, only the TMA descriptor
    ("    from triton.tools.tensor_descriptor import os\n", "import"),
    ("    y = torch.ops.aten.matmul.default(x, x)\n", "torch_compute"),  # ATen by its registered name: torch.matmul
    ("    y = torch.ops.aten.from_file('w')\n", "forbidden"),  # as torch.from_file
    ("    y = torch.ops.myext.fused(x)\n", "forbidden"),  # another library's operator
    ("    y = torch.ops.aten._local_scalar_dense(x)\n", "forbidden"),
])
def test_rules(snippet: str, reason: str) -> None:
    anchor = "    hidden = x.shape[-1]\n"
    res = check(RMS, RMS.replace(anchor, anchor + snippet), "rmsnorm")
    assert (res.ok, res.reason) == (False, reason), res


def test_allowed_launcher_code() -> None:
    anchor = "    hidden = x.shape[-1]\n"
    ok = ("    n = triton.next_power_of_2(hidden)\n    y = x.contiguous().view(-1).to(torch.float32)\n"
          "    props = torch.cuda.get_device_properties(x.device) if x.is_cuda else None\n"
          "    stages = tl.standard._log2(n)\n    assert triton.__version__ >= '3.0.0'\n"
          "    with triton.knobs.amd.scope():\n        triton.knobs.amd.use_buffer_ops = False\n"  # restored after
          "    from triton.tools.tensor_descriptor import TensorDescriptor\n"  # a TMA descriptor: data
          "    smem = getattr(props, 'shared_memory_per_multiprocessor', 228 * 1024)\n"  # a read with a fallback
          "    z = torch.ops.aten.zeros.default([2, 3], dtype=torch.float32)\n")  # torch.zeros, by ATen's name
    assert check(RMS, RMS.replace(anchor, anchor + ok), "rmsnorm").ok


def test_module_level_constants_are_fine_but_state_is_not() -> None:
    anchor = "# EVOLVE-BLOCK-START\n"
    assert check(RMS, RMS.replace(anchor, anchor + "BLOCK_MAX = 8192\nSCALE = tl.constexpr(2)\n"), "rmsnorm").ok
    assert check(RMS, RMS.replace(anchor, anchor + 'BV = int("32")\nON = "1" == "1"\n'), "rmsnorm").ok  # pinned env
    helper = "int_of = triton.runtime.jit.constexpr_function(tl.core.get_int_dtype)\n"  # usable in kernels
    assert check(RMS, RMS.replace(anchor, anchor + helper), "rmsnorm").ok
    assert check(RMS, RMS.replace(anchor, anchor + "drv = triton.runtime.driver\n"), "rmsnorm").reason == "forbidden"
    for state in ("_buf = torch.empty(16)\n", "CACHE = dict()\n", "_cfg = {'a': [1, 2]}\n"):
        assert check(RMS, RMS.replace(anchor, anchor + state), "rmsnorm").reason == "state"


@pytest.mark.parametrize("line, ok", [
    ("_CFGS = (triton.Config(kwargs={'BLOCK': 64}, num_warps=4),)\n", True),
    ("_tuned = triton.autotune(configs=[triton.Config({'BLOCK': 64})], key=['n'])(rmsnorm)\n", True),
    ("_tuned = triton.autotune(configs=[torch.empty(1)], key=['n'])(rmsnorm)\n", False),
    ("_tuned = cached(configs=[])(rmsnorm)\n", False),
    ("_CFGS = (triton.Config({'BLOCK': [64]}),)\n", False),
])
def test_autotune_applied_by_hand_is_a_decorator(line: str, ok: bool) -> None:
    anchor = "# EVOLVE-BLOCK-END\n"
    res = check(RMS, RMS.replace(anchor, line + anchor), "rmsnorm")
    assert (res.ok, res.reason) == (ok, "" if ok else "state"), res


@pytest.mark.parametrize("use, ok", [
    ("    n = _T[x.dtype] + len(_C) + _T.get(x.dtype, 0) + int(x.dtype in _T)\n", True),
    ("    for c in _C:\n        n = c.num_warps\n", True),
    ("    _T[x.dtype] = 2\n", False),
    ("    _T.update({x.dtype: 2})\n", False),
    ("    _C.append(None)\n", False),
    ("    t = _T\n", False),  # an alias could be written through
    ("    n = dict(**_K)\n", True),  # unpacked: a copy
    ("    _K['waves_per_eu'] = 2\n", False),
])
def test_a_table_the_code_only_reads_is_a_constant(use: str, ok: bool) -> None:
    tables = ("_T = {torch.float16: 1, torch.bfloat16: 2}\n"
              "_K = {'waves_per_eu': 4} if _IS_HIP else {}\n"  # a choice of two tables
              "_C = [triton.Config({'BLOCK': b}, num_warps=w) for b in (32, 64) for w in (1, 2)]\n")
    anchor = "    hidden = x.shape[-1]\n"
    cand = RMS.replace("# EVOLVE-BLOCK-START\n", "# EVOLVE-BLOCK-START\n" + tables).replace(anchor, anchor + use)
    res = check(RMS, cand, "rmsnorm")
    assert (res.ok, res.reason) == (ok, "" if ok else "state"), res


def test_a_table_of_frozen_records_is_a_constant() -> None:
    """Launch settings kept as instances of a frozen dataclass or a NamedTuple are constants; a plain class's
    instances, or a frozen record holding a list, are state."""
    records = ("@dataclasses.dataclass(frozen=True)\nclass _Cfg:\n    nw: int\n    bs: int = 32\n\n\n"
               "class _Pair(typing.NamedTuple):\n    a: int\n    b: int\n\n\n"
               "class _Loose:\n    def __init__(self, nw):\n        self.nw = nw\n\n\n")
    anchor = "# EVOLVE-BLOCK-START\n"
    head = "import dataclasses\nimport typing\n"
    for table, ok in (("_T = {('hopper', 'bf16'): _Cfg(nw=8), ('ampere', 'bf16'): _Cfg(4, bs=16)}\n", True),
                      ("_P = _Pair(1, 2)\n", True),
                      ("_L = _Loose(8)\n", False),
                      ("_T = {'hopper': _Cfg(nw=[8])}\n", False)):
        cand = head + RMS.replace(anchor, anchor + records + table)
        res = check(head + RMS, cand, "rmsnorm")
        assert (res.ok, res.reason) == (ok, "" if ok else "state"), (table, res)


def test_syntax_error() -> None:
    res = check(RMS, RMS.replace("def rmsnorm(", "def rmsnorm(("), "rmsnorm")
    assert (res.ok, res.reason) == (False, "syntax")


def test_a_parameter_may_shadow_a_forbidden_builtin_but_not_smuggle_it() -> None:
    """A launcher's ``input`` tensor is its caller's value; a default or another function's use is the builtin."""
    anchor = "# EVOLVE-BLOCK-END\n"
    ok = "def helper(input, id):\n    return input.view(-1)[: id.numel()]\n\n\n"
    assert check(RMS, RMS.replace(anchor, ok + anchor), "rmsnorm").ok
    local = "def helper(n):\n    t = 0\n    for id in range(n):\n        t += id\n    return t\n\n\n"
    assert check(RMS, RMS.replace(anchor, local + anchor), "rmsnorm").ok  # a loop variable named id is a local
    for bad in ("def helper(open=open):\n    return open\n\n\n",
                "def helper(n):\n    def inner():\n        id = 1\n    return id(n)\n\n\n",  # inner's, not helper's
                "def helper(n):\n    return [id for id in range(n)] + [id(n)]\n\n\n",
                "def helper(input):\n    return input\n\n\ndef other():\n    return input('?')\n\n\n",
                "def helper(x, f=lambda open: open):\n    return f(eval)\n\n\n"):
        res = check(RMS, RMS.replace(anchor, bad + anchor), "rmsnorm")
        assert (res.ok, res.reason) == (False, "forbidden"), bad


@pytest.mark.parametrize("use, ok", [
    ("    x.cached = 1\n", False),  # on a parameter
    ("    weight.grad = x\n", False),  # a built-in attribute is state too
    ("    y = x2\n    y.seen = True\n", False),  # through a local bound from a parameter
    ("    box = [x]\n    box[0].seen = True\n", False),  # through a container
    ("    type(x).memo = 1\n", False),  # on the class of what was handed in
    ("    def remember():\n        x.memo = 1\n    remember()\n", False),  # from a nested function
    ("    del x.cached\n", False),
    ("    cfg = triton.Config({})\n    cfg.num_warps = 4\n", True),  # a new object the call made itself
])
def test_attributes_on_what_a_call_is_handed_are_state(use: str, ok: bool) -> None:
    anchor = "    hidden = x.shape[-1]\n"
    res = check(RMS, RMS.replace(anchor, anchor + use), "rmsnorm")
    assert (res.ok, res.reason) == (ok, "" if ok else "state_smuggling"), res


def test_an_attribute_the_baseline_stores_stays_allowed() -> None:
    """A method launcher keeps its output on its batch object (sglang's ``self.prefix_chunk_kv_indices``)."""
    anchor = "    return out.view(x.shape)\n"
    base = RMS.replace(anchor, "    x.normed = out\n" + anchor)
    assert check(base, base.replace("BLOCK=256", "BLOCK=512"), "rmsnorm").ok
    res = check(base, base.replace("x.normed = out", "x.normed = out\n    x.extra = out"), "rmsnorm")
    assert (res.ok, res.reason) == (False, "state_smuggling") and "x.extra" in res.detail


@pytest.mark.parametrize("head", [
    "class Lazy(torch.Tensor):\n    pass\n\n\n",
    "class Mode(torch.overrides.TorchFunctionMode):\n    pass\n\n\n",
    "class Later:\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
    "        return func(*args)\n\n\n",
])
def test_ways_to_defer_work_past_the_call_are_refused(head: str) -> None:
    res = check(RMS, RMS.replace("# EVOLVE-BLOCK-START\n", "# EVOLVE-BLOCK-START\n" + head), "rmsnorm")
    assert (res.ok, res.reason) == (False, "forbidden") and "deferred" in res.detail, res
