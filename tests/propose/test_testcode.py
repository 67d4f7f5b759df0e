"""The inputs written out as plain code, in the task's harness and in the generated test, draw the same tensors as an
independent reading of the spec language (``tests/inputs/spec_reference.py``)."""

from __future__ import annotations

import pytest
import torch

from evaluator.tolerances import DTYPES
from smithbot.inputs.harness import harness_source, literal, plan_of, respec
from smithbot.types import InputPlan, LiteralSpec, SpecError, TensorSpec
from smithbot.propose.testcode import InputsError, inputs_code
from tests.evolve.helpers import TASKS
from tests.inputs import spec_reference as reference

# every init kind, dtype kind and spec form the interpreter knows
SPEC = {
    "x": {"shape": ["tokens", "2 * intermediate + 200"]},
    "w": {"shape": ["hidden", "pow2(hidden // 3)"], "init": "around1", "transposed": True},
    "p": {"shape": ["tokens", "experts"], "dtype": "fp32", "init": "rand"},
    "q8": {"shape": ["tokens", "hidden"], "dtype": "fp8_e4m3"},
    "ids": {"shape": ["tokens", "top_k"], "dtype": "int32", "init": "randint:0:experts"},
    "slots": {"shape": ["tokens * top_k"], "dtype": "int32", "init": "perm:tokens"},
    "pos": {"shape": ["tokens"], "dtype": "int64", "init": "arange:2:5"},
    "ar": {"shape": [2, "tokens"], "dtype": "int32", "init": "arange"},
    "ev": {"shape": ["experts"], "dtype": "int32", "init": "even:tokens"},
    "eve": {"shape": ["experts"], "dtype": "int32", "init": "even_end:tokens"},
    "sp": {"shape": ["experts"], "dtype": "int32", "init": "split:tokens"},
    "cu": {"shape": ["experts + 1"], "dtype": "int32", "init": "cuts:tokens"},
    "lens": {"shape": ["batch"], "dtype": "int32", "init": "randint:1:9"},
    "starts": {"shape": ["batch + 1"], "dtype": "int32", "init": "starts:lens"},
    "ready": {"shape": ["batch"], "dtype": "int32", "init": "upto:lens"},
    "chunk_indices": {"shape": ["tokens", 2], "dtype": "int32", "init": "chunks:starts:4"},
    "hot": {"shape": ["tokens", "experts"], "dtype": "int32", "init": "onehot"},
    "fp4": {"shape": ["tokens", 8], "dtype": "fp4x2"},
    "scale": {"shape": ["tokens"], "dtype": "e8m0", "init": "randint:120:130"},
    "plan": {"object": {"seq_lens": {"shape": ["batch"], "dtype": "int32", "init": "randint:1:5"},
                        "cu": {"shape": ["batch + 1"], "dtype": "int32", "init": "starts:seq_lens"},
                        "max_len": {"returns": "context"}, "n": "batch"}},
    "weights": {"items": [{"shape": ["hidden"]}, {"shape": ["hidden"], "dtype": "fp16"}]},
    "sorted_token_ids": {"layout": "moe_align", "field": "sorted_token_ids",
                         "sizes": {"tokens": "tokens", "top_k": "top_k", "experts": "experts", "block": 16}},
    "expert_ids": {"layout": "moe_align", "field": "expert_ids",
                   "sizes": {"tokens": "tokens", "top_k": "top_k", "experts": "experts", "block": 16}},
    "req_to_token": {"layout": "paged_kv", "field": "req_to_token", "sizes": {"batch": "batch", "context": 64, "page": 4}},
    "scale_f": "head_dim ** -0.5", "flag": True, "act": {"literal": "swish"}, "limit": {"literal": (0.0, float("inf"))},
    "out_dtype": "dtype:fp16", "compute": "dtype:act", "tl_dtype": "tldtype:act", "dev": "device:", "eps": "default:",
}
EXTRA = {"batch": "max(1, tokens // 4)", "context": "batch * 16"}
CASES = [{"name": "a", "tokens": 7, "hidden": 96, "intermediate": 40, "experts": 8, "top_k": 2, "head_dim": 64},
         {"name": "b", "tokens": 33, "hidden": 64, "intermediate": 8, "experts": 4, "top_k": 3, "head_dim": 128,
          "batch": 5}]


def _run(ns: dict, case: dict, seed: int) -> dict:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    return ns["make_inputs"](case, gen)


def _same(a: object, b: object) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
        assert torch.equal(a.view(torch.uint8) if a.element_size() == 1 else a, b.view(torch.uint8)
                           if b.element_size() == 1 else b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b) and all(_same(x, y) is None for x, y in zip(a, b))  # type: ignore[arg-type]
    elif hasattr(a, "__dict__") and not isinstance(a, type):
        assert vars(a).keys() == vars(b).keys()
        for k in vars(a):
            _same(getattr(a, k), getattr(b, k))
    elif callable(a):
        _same(a(), b())
    else:
        assert a == b and type(a) is type(b) or str(a) == str(b)


def _plain(harness: str, cases: list[dict], dtypes: set[str]) -> tuple[dict, dict, str]:
    """The harness's namespace, and the generated test's make_inputs with its code."""
    imports, code = inputs_code(harness, dtypes, {k for c in cases for k in c})
    harness_ns: dict = {}
    exec(harness, harness_ns)
    plain_ns: dict = {"DEVICE": "cpu"}
    exec("\n".join(imports + ["import torch", code]), plain_ns)
    return harness_ns, plain_ns, code


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float8_e4m3fn])
def test_every_spec_kind_draws_what_the_reference_reading_draws(dtype: torch.dtype) -> None:
    harness = harness_source("op", InputPlan.read(SPEC, EXTRA), "a test")
    harness_ns, plain_ns, code = _plain(harness, CASES, {str(dtype).removeprefix("torch.")})
    assert "size_value" not in code and "SPEC" not in code and "complex64" not in code
    assert "def build_moe_align" in code and "def build_paged_kv" in code and "def _starts" in code
    assert "x = torch.randn((tokens, 2 * intermediate + 200), generator=gen, device=DEVICE, dtype=" in code
    assert "def _starts" in harness and "size_value" not in harness and "device=gen.device" in harness
    for case in CASES:
        for seed in (0, 1):
            want = reference.make_inputs(SPEC, EXTRA, dict(case, dtype=dtype, regime="decode"),
                                         torch.Generator().manual_seed(seed))
            for ns in (harness_ns, plain_ns):
                got = _run(ns, dict(case, dtype=dtype, regime="decode"), seed)
                assert list(got) == [k for k in SPEC if k in want] and "eps" not in got
                for k in want:
                    _same(want[k], got[k])


def test_the_harness_grows_an_input_by_writing_its_code_again() -> None:
    """``respec`` (the growth's rewrite) keeps the harness's first line and writes make_inputs from the new spec."""
    plan = InputPlan.read({"x": {"shape": ["tokens", 4]}, "n": "tokens"})
    harness = harness_source("op", plan, "a test")
    grown = respec(harness.replace("(a test)", "(grown: x; a test)"), plan.with_shape("x", ["tokens", 9]))
    assert grown.splitlines()[0] == '"""Inputs for op, written by smithbot extract (grown: x; a test)."""'
    ns: dict = {}
    exec(grown, ns)
    args = ns["make_inputs"]({"tokens": 3, "dtype": torch.float32}, torch.Generator().manual_seed(0))
    assert args["x"].shape == (3, 9) and args["n"] == 3 and "'shape': ['tokens', 9]" in grown
    # a harness's literals are read as Python reads them: a `#` inside a string is no comment
    odd = harness_source("op", InputPlan.read({"act": {"literal": "a  # b"}}, gathered=("act",)), "a test")
    assert literal(odd, "SPEC") == {"act": {"literal": "a  # b"}} and literal(odd, "GATHERED") == ("act",)
    assert plan_of(odd) == InputPlan((("act", LiteralSpec("a  # b")),), (), ("act",))
    assert literal(odd, "NOT_THERE") is None


def test_only_the_helpers_used_come_along() -> None:
    harness = harness_source("op", InputPlan.read({"x": {"shape": ["tokens", "hidden"]}, "eps": 1e-6}), "a test")
    imports, code = inputs_code(harness, {"bfloat16"}, {"name", "tokens", "hidden"})
    assert imports == [] and code == (
        "def make_inputs(case, gen):\n"
        '    tokens, hidden, dtype = case["tokens"], case["hidden"], case["dtype"]\n'
        "    x = torch.randn((tokens, hidden), generator=gen, device=DEVICE, dtype=dtype)\n"
        '    return {"x": x, "eps": 1e-06}\n')


def test_a_spec_without_a_plain_form_fails_loudly() -> None:
    """Reading the plan refuses a kind the language lacks; a plan built by hand with one is refused when written."""
    with pytest.raises(SpecError, match="x.init: unknown kind 'zipf'"):
        InputPlan.read({"x": {"shape": ["tokens"], "init": "zipf:3"}})
    with pytest.raises(InputsError, match="init 'zipf'"):
        harness_source("op", InputPlan((("x", TensorSpec(("tokens",), init="zipf:3")),)), "a test")


@pytest.mark.parametrize("task", sorted(p.name for p in TASKS.iterdir() if (p / "harness.py").is_file()))
def test_a_hand_written_harness_keeps_its_make_inputs(task: str) -> None:
    from evaluator import load_task

    t = load_task(TASKS / task)
    imports, code = inputs_code(t.harness_path.read_text(), {DTYPES[c.dtype] for c in t.cases}, set())
    assert code.startswith("def make_inputs(case, generator):") and "def reference" not in code
    assert imports == ["import torch"]
