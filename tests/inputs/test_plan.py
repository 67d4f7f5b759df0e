"""The typed input plan (``smithbot.types.InputPlan``): the mapping form a target YAML and a harness write reads into
frozen nodes and back unchanged, and what is outside the language is refused at its key path."""

from __future__ import annotations

import pytest

from smithbot.types import (InputPlan, ItemsSpec, LayoutField, LiteralSpec, ObjectSpec, ReturnsSpec, SpecError,
                            TensorSpec, read_spec, spec_literal)

EVERY_KIND = {
    "x": {"shape": ["tokens", "hidden"]},
    "w": {"shape": ["hidden", "2 * intermediate"], "dtype": "bf16", "init": "around1", "transposed": True},
    "ids": {"layout": "moe_align", "field": "sorted_token_ids", "sizes": {"tokens": "tokens", "block": 64}},
    "meta": {"object": {"seq_lens": {"shape": ["tokens"], "dtype": "int32", "init": "randint:1:64"},
                        "starts": {"shape": ["tokens"], "dtype": "int32", "init": "starts:seq_lens"}}},
    "pair": {"items": [{"shape": ["tokens"]}, 3]},
    "act": {"literal": "silu"},
    "pool": {"object": {"size": {"returns": "tokens * 4"}}},
    "eps": 1e-6, "n": "tokens", "flag": True, "none": None, "dt": "dtype:fp32", "dev": "device:", "d": "default:",
}


def test_every_kind_reads_into_its_node_and_back_unchanged() -> None:
    plan = InputPlan.read(EVERY_KIND, {"rows": "tokens * 2"}, ("ids",))
    specs = plan.specs
    assert specs["x"] == TensorSpec(("tokens", "hidden"))
    assert specs["w"] == TensorSpec(("hidden", "2 * intermediate"), "bf16", "around1", True)
    assert specs["ids"] == LayoutField("moe_align", "sorted_token_ids", (("tokens", "tokens"), ("block", 64)))
    assert isinstance(specs["meta"], ObjectSpec) and [k for k, _ in specs["meta"].attrs] == ["seq_lens", "starts"]
    assert specs["pair"] == ItemsSpec((TensorSpec(("tokens",)), 3)) and specs["act"] == LiteralSpec("silu")
    assert specs["pool"] == ObjectSpec((("size", ReturnsSpec("tokens * 4")),))
    assert [specs[k] for k in ("eps", "n", "flag", "none", "dt")] == [1e-6, "tokens", True, None, "dtype:fp32"]
    # back to the mapping form, key for key and in order, as a harness keeps it
    assert plan.literal() == EVERY_KIND and [list(v) for v in plan.literal().values() if isinstance(v, dict)] == [
        list(v) for v in EVERY_KIND.values() if isinstance(v, dict)]
    assert plan.dims == {"rows": "tokens * 2"} and plan.gathered == ("ids",) and plan.layouts() == {"moe_align"}
    grown = plan.with_shape("x", ["tokens", "hidden * 2"])
    assert grown.specs["x"].shape == ("tokens", "hidden * 2") and plan.specs["x"].shape == ("tokens", "hidden")


def test_a_yaml_object_naming_a_layout_keeps_it() -> None:
    """``{object: {layout: paged_kv}}`` (an object carrying a layout's fields) is a YAML form; an attribute that is
    itself called ``layout`` and holds a spec is an attribute."""
    named = {"object": {"layout": "paged_kv", "sizes": {"page": 16}, "extra": {"shape": ["tokens"]}}}
    spec = read_spec(named)
    assert spec == ObjectSpec((("extra", TensorSpec(("tokens",))),), "paged_kv", (("page", 16),))
    assert spec_literal(spec) == named
    plain = read_spec({"object": {"layout": {"shape": ["tokens"]}}})
    assert plain == ObjectSpec((("layout", TensorSpec(("tokens",))),))


@pytest.mark.parametrize("spec, where, words", [
    ({"x": {"shapes": [1]}}, "x.shapes", "unknown key 'shapes'"),
    ({"x": {"shape": [1], "field": "a"}}, "x.field", "no key of a shape spec"),
    ({"x": {"shape": "tokens"}}, "x.shape", "must be a list"),
    ({"x": {"shape": [1], "dtype": "fp6"}}, "x.dtype", "unknown dtype 'fp6'"),
    ({"x": {"object": {"a": {"items": [{"shape": [1], "init": "zipf:2"}]}}}}, "x.object.a.items[0].init",
     "unknown kind 'zipf'"),
    ({"x": {"dtype": "fp32"}}, "x", "needs one of shape"),
    ({"x": {"layout": "paged_kv", "sizes": [1]}}, "x.sizes", "must be a mapping"),
])
def test_what_is_outside_the_language_is_refused_at_its_key(spec: dict, where: str, words: str) -> None:
    with pytest.raises(SpecError) as info:
        InputPlan.read(spec)
    assert info.value.where.lstrip(".") == where and words in info.value.message
