"""Every definition and launch form of TARGETS.md is found in a single file's facts."""

from __future__ import annotations

from smithbot.scan.parse import analyze
from tests.scan.fixtures import FILES


def facts(rel: str) -> dict:
    return analyze(rel, FILES[rel].encode("utf-8"), ("cached_triton_kernel",))


def test_definition_forms() -> None:
    f = facts("eng/kernels/norm.py")
    kernels = {(k["name"], k["line"]): k for k in f["kernels"]}
    names = sorted(k[0] for k in kernels)
    assert names == sorted(["rms_kernel", "plain_jit_alias", "dns_kernel", "late", "stacked_kernel", "cached_kernel",
                            "softplus", "softplus", "guarded", "inner"])
    by = {k["name"]: k for k in f["kernels"]}
    assert by["late"]["form"] == "call" and by["rms_kernel"]["form"] == "decorator"
    assert by["stacked_kernel"]["autotune"] and by["stacked_kernel"]["heuristics"] == 8
    assert by["inner"]["nested"] and by["inner"]["qualname"] == "make.inner"
    assert by["guarded"]["conditional"] and all(k["conditional"] for k in f["kernels"] if k["name"] == "softplus")
    assert f["tl_aliases"] == {"exp": "triton.language.exp"}
    assert f["constants"] == {"SCALE": "tl.constexpr(4)"}
    assert f["imports"]["fast_exp"] == "eng.utils.fast_exp"


def test_launch_forms() -> None:
    f = facts("eng/kernels/norm.py")
    launches = {la["kernel"]: la for la in f["launches"]}
    assert launches["rms_kernel"]["wrapper"] == "rmsnorm"
    assert launches["rms_kernel"]["kwargs"] == ["BLOCK", "num_stages", "num_warps"]
    assert launches["stacked_kernel"]["grid_lambda"] and launches["dns_kernel"]["kwargs"] == ["launch_pdl"]
    assert launches["cached_kernel"]["branches"] == [{"test": "is_hip()", "in": "body"}]
    assert launches["plain_jit_alias"]["branches"] == [{"test": "is_hip()", "in": "orelse"}]
    assert launches["softplus"]["wrapper"] == "Op.launch"
    assert launches["guarded"]["wrapper"] == "Fn.forward"
    fn = {x["qualname"]: x for x in f["functions"]}
    assert fn["Fn.forward"]["autograd_forward"] is False or fn["Fn.forward"]["class"] == "Fn"


def test_relative_import_of_package_init() -> None:
    f = facts("eng/kernels/__init__.py")
    assert f["module"] == "eng.kernels" and f["imports"]["rms_kernel"] == "eng.kernels.norm.rms_kernel"


def test_bom_and_unparsable_files() -> None:
    assert [k["name"] for k in facts("eng/bom.py")["kernels"]] == ["bom_kernel"]
    broken = facts("eng/broken.py")
    assert "error" in broken and broken["error"].startswith("line ")


def test_triton_as_the_engine_hands_it_on() -> None:
    """vLLM's kernels say ``from vllm.triton_utils import tl, triton``: the package imports Triton behind a check
    that it is installed and hands its modules on. Read through that, ``@triton.jit`` is Triton's decorator, and the
    kernel is found; without it, none is."""
    from smithbot.scan.index import triton_reexports

    utils = (b"from typing import TYPE_CHECKING\nHAS_TRITON = True\nif TYPE_CHECKING or HAS_TRITON:\n"
             b"    import triton\n    import triton.language as tl\n    import triton.language.extra.libdevice as tldevice"
             b"  # its math\nelse:\n    triton = None\n")
    kernel = (b"from eng.triton_utils import tl, triton\n\n\n@triton.jit\ndef _k(X, BLOCK: tl.constexpr):\n"
              b"    tl.store(X + tl.arange(0, BLOCK), 1.0)\n\n\ndef launch(x):\n    _k[(1,)](x, BLOCK=8)\n")
    texts = {"eng/__init__.py": b"", "eng/triton_utils/__init__.py": utils, "eng/ops.py": kernel}
    found = triton_reexports(texts, {"eng", "eng/triton_utils"})
    assert found == {"eng.triton_utils.triton": "triton", "eng.triton_utils.tl": "triton.language",
                     "eng.triton_utils.tldevice": "triton.language.extra.libdevice"}
    f = analyze("eng/ops.py", kernel, (), "eng.ops", found)
    assert [k["name"] for k in f["kernels"]] == ["_k"] and f["launches"][0]["wrapper"] == "launch"
    assert f["imports"]["tl"] == "triton.language"
    assert analyze("eng/ops.py", kernel, (), "eng.ops")["kernels"] == []
