"""The layouts: each a module with ``NAME``, ``FIELDS``, ``SIZES``, ``NAMES`` (launcher parameter names per field),
``DERIVED`` (the fields only the layout makes consistent) and a pure-torch ``build_<NAME>(sizes, generator, device)``
that is copied into the task's harness."""

from __future__ import annotations

import inspect
from types import ModuleType

from smithbot.inputs.layouts import moe_align, paged_kv

LAYOUTS: dict[str, ModuleType] = {m.NAME: m for m in (moe_align, paged_kv)}


def builder_source(name: str) -> str:
    """The source of layout ``name``'s builder, as the harness embeds it."""
    mod = LAYOUTS[name]
    return inspect.getsource(getattr(mod, f"build_{name}")).strip()
