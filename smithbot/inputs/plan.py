"""The input plan: which launcher parameters are fields of one layout instance, and the sizes of that instance.

A parameter bound to a layout gets the spec ``{layout: NAME, field: FIELD, sizes: {size: expr}}``; the harness builds
each distinct (layout, sizes) once per case, so the fields agree with each other (the sorted ids index the top-k
slots, the expert of each block owns its rows). A launcher the target YAML gives no specs gets a layout when it
takes one of the layout's derived fields under a name the layout knows (``sorted_token_ids``); a launcher with specs
gets one where they name it (``expert_ids: {layout: moe_align}``: then its other fields bind by name too), and
``_layouts: {moe_align: {block: 128}}`` sizes it."""

from __future__ import annotations

import re
from typing import Any

from smithbot.inputs.layouts import LAYOUTS

# the block size of an MoE alignment: a tuning config's BLOCK_SIZE_M, or a parameter that says it
_BLOCK_PARAMS = ("block_size", "block_m", "BLOCK_SIZE_M", "block_size_m")
# an engine's copy of a field, named by where it lives: `seq_lens_tensor` (the device's), `seq_lens_cpu` (the host's)
_COPY = re.compile(r"_(tensor|cpu)$")


def _block(specs: dict[str, Any]) -> Any:
    for spec in specs.values():
        if isinstance(spec, dict) and isinstance(spec.get("literal"), dict) and "BLOCK_SIZE_M" in spec["literal"]:
            return spec["literal"]["BLOCK_SIZE_M"]
    return next((specs[p] for p in _BLOCK_PARAMS if isinstance(specs.get(p), (int, str))), 64)


def default_sizes(name: str, specs: dict[str, Any]) -> dict[str, Any]:
    """A layout's sizes as expressions over the case's dims."""
    if name == "moe_align":
        return {"tokens": "tokens", "top_k": "top_k", "experts": "experts", "block": _block(specs)}
    if name == "paged_kv":  # a request per token of the case (a decode batch), each up to 1024 positions long
        page = next((specs[p] for p in ("page_size", "block_size", "page") if isinstance(specs.get(p), int)), 1)
        return {"batch": "tokens", "context": 1024, "page": page}
    raise KeyError(name)


def bind_layouts(params: list[str], given: dict[str, Any], sizes: dict[str, dict[str, Any]] | None = None,
                 by_themselves: bool = True) -> dict[str, dict[str, Any]]:
    """{parameter: layout spec} for the parameters of ``params`` that are fields of a layout the launcher needs. A
    parameter the YAML gives a spec of its own (``given``) stays out, unless that spec names the layout. Without
    ``by_themselves``, only the layouts that specs name bind."""
    out: dict[str, dict[str, Any]] = {}
    for name, mod in LAYOUTS.items():
        fields = {p: f for p in params for f, names in mod.NAMES.items() if _COPY.sub("", p) in names}
        named = {p: spec.get("field") or fields.get(p) for p, spec in given.items()
                 if isinstance(spec, dict) and spec.get("layout") == name}
        # by itself, a layout binds only where the target YAML gives the launcher no specs (a launcher nobody wrote
        # specs for); a spec's author names the layouts their launcher takes
        if not named and (given or not by_themselves or not any(f in mod.DERIVED for f in fields.values())):
            continue
        bound = {**{p: f for p, f in fields.items() if p not in given}, **named}
        for p, f in bound.items():
            if f not in mod.FIELDS:
                raise ValueError(f"{p}: layout {name} has no field {f!r} (its fields: {', '.join(mod.FIELDS)})")
            out[p] = {"layout": name, "field": f, "sizes": dict((sizes or {}).get(name) or {})}
    return out


def nested(specs: dict[str, Any]) -> list[dict[str, Any]]:
    """Every dict spec of ``specs``, also those inside object and list specs."""
    out: list[dict[str, Any]] = []
    todo = list(specs.values())
    while todo:
        spec = todo.pop()
        if isinstance(spec, dict):
            out.append(spec)
            todo += list(spec["object"].values()) if isinstance(spec.get("object"), dict) else spec.get("items") or []
    return out


def fill_sizes(specs: dict[str, Any]) -> None:
    """Each layout spec's sizes completed from the layout's defaults, which read the other specs (a config's
    BLOCK_SIZE_M). An object spec that names a layout (``{object: {layout: paged_kv}}``: engine state, a batch's
    metadata) carries that layout's fields as its attributes, from the same instance as the parameters bound to it."""
    for spec in nested(specs):
        obj = spec.get("object")
        if isinstance(obj, dict) and "layout" in obj:
            name, sizes = obj.pop("layout"), obj.pop("sizes", {}) or {}
            if name not in LAYOUTS:
                raise ValueError(f"no layout {name!r} (the layouts: {', '.join(LAYOUTS)})")
            for f in LAYOUTS[name].FIELDS:
                obj.setdefault(f, {"layout": name, "field": f, "sizes": dict(sizes)})
    for spec in nested(specs):
        if "layout" in spec:
            spec["sizes"] = {**default_sizes(spec["layout"], specs), **spec.get("sizes", {})}
