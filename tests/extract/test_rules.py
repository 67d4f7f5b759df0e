"""The closure's quirk rules (``smithbot/extract/rules.py``): a fixture per rule, each shown to hold with the rule and
to fail without it, so that no rule in the table is dead."""

from __future__ import annotations

from pathlib import Path

import pytest

from smithbot.extract import rules
from smithbot.extract.closure import ClosureBuilder
from tests.extract.test_closure import _source

# rule name -> (pkg/op.py's source, the target's stubs, text the closure has with the rule, text it has without)
FIXTURES = {
    "decided branches": (
        "import torch\nfrom pkg.platform import is_hip\n\n\n"
        "def launch(x):\n    if is_hip():\n        return x * 2\n    return x + 1\n",
        {"is_hip": False}, "return x + 1", "return x * 2"),
    "environment reads": (
        "import os\n\n\ndef launch(x):\n    return x + int(os.environ.get('SMITH_N', '4'))\n",
        {}, "return x + int('4')", "os.environ.get"),
    "autotune keyword arguments": (
        "import triton\n\nKW = {'cache_results': True}\n\n\n"
        "@triton.autotune(configs=[triton.Config({})], key=[], **KW)\n@triton.jit\ndef _k(X, n):\n    pass\n\n\n"
        "def launch(x):\n    _k[(1,)](x, 4)\n",
        {}, "cache_results=True", "**KW"),
    "declared settings": (
        "from pkg.environ import envs\n\n\ndef launch(x):\n    return x * envs.BLOCK.get()\n",
        {}, "return x * 3", "envs.BLOCK.get()"),
    "profiler labels": (
        "import torch\n\n\ndef launch(x):\n    with torch.profiler.record_function('op'):\n        return x + 1\n",
        {}, "with record_function('op'):", "torch.profiler.record_function("),
    "record options": (
        "import msgspec\n\n\nclass Plan(msgspec.Struct, frozen=True):\n    n: int\n\n\n"
        "def launch(x):\n    return x + Plan(1).n\n",
        {}, "class Plan(msgspec.Struct):", "frozen=True"),
    "triton spellings": (
        "import torch\n\n\ndef launch(x):\n    if x.device.type == 'cuda':\n        return x + 1\n    return x\n",
        {}, "if x.is_cuda:", "x.device.type == 'cuda'"),
    "ROCm version": (
        "import torch\n\n\ndef launch(x):\n    if torch.version.hip:\n        return x * 2\n    return x + 1\n",
        {}, "if None:", "torch.version.hip"),
    "watching decorators": (
        "import functools\n\n\n@functools.lru_cache(maxsize=8)\ndef launch(n):\n    return n + 1\n",
        {}, "def launch(n):", "lru_cache"),
    "lazy globals": (
        "_cap = None\n\n\ndef probe():\n    return 9\n\n\n"
        "def launch(x):\n    global _cap\n    if _cap is None:\n        _cap = probe()\n    return x + _cap\n",
        {}, "_cap = probe()", "global _cap"),
}


def _closure_text(tmp_path: Path, source: str, stubs: dict) -> str:
    pkg = tmp_path / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "op.py").write_text(source)
    (pkg / "platform.py").write_text("def is_hip():\n    return False\n")
    (pkg / "environ.py").write_text(
        "class Gated:\n    def __init__(self, name, default):\n        self.default = default\n\n"
        "    def get(self):\n        return self.default\n\n\nclass Envs:\n    BLOCK = Gated('BLOCK', 3)\n\n\n"
        "envs = Envs()\n")
    modules = {f"pkg.{m}": f"pkg/{m}.py" for m in ("op", "platform", "environ")}
    b = ClosureBuilder(tmp_path, modules, "pkg", stubs, ())
    b.add("pkg.op", "launch")
    return _source(b)


def test_every_rule_has_a_fixture_and_a_reason() -> None:
    assert [r.name for r in rules.RULES] == list(FIXTURES)
    assert all(len(r.why) > 40 for r in rules.RULES)


@pytest.mark.parametrize("name", list(FIXTURES))
def test_a_rule_rewrites_its_fixture_and_only_it_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      name: str) -> None:
    source, stubs, with_rule, without_rule = FIXTURES[name]
    text = _closure_text(tmp_path / "with", source, stubs)
    assert with_rule in text and without_rule not in text, text
    monkeypatch.setattr(rules, "RULES", tuple(r for r in rules.RULES if r.name != name))
    text = _closure_text(tmp_path / "without", source, stubs)
    assert without_rule in text, text
