"""The cleaning pass for Inductor's kernels (``smithbot.evolve.clean``), on a kernel written the way Inductor writes
them. That a cleaned candidate still computes the glue is checked where the candidates are made
(``test_inductor.py``: the demo's glue, and the bundled decode_metadata seed bit for bit)."""

from __future__ import annotations

import ast
import re

from smithbot.evolve.clean import clean_kernel
from smithbot.evolve.inductor import kernel_name

RAW = '''
def kernel(in_ptr0, in_ptr1, out_ptr0, ks0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    tmp3 = tl.full([XBLOCK, 1], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + rbase
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + ks0 * xindex), r0_mask, eviction_policy='evict_first', other=0.0)
        tmp1 = tmp0.to(tl.float32)
        tmp2 = tmp1 * tmp1
        tmp3 = tmp3 + tl.sum(tmp2, 1)[:, None]
        tmp9 = tl.load(in_ptr1 + r0_1, r0_mask, eviction_policy='evict_last')
        tl.device_assert((0 <= tmp9) & (tmp9 < ks0) | ~r0_mask, 'index out of bounds')
    tmp4 = ks0
    tmp5 = tmp3 / tmp4
    tl.store(out_ptr0 + xindex, tmp5, None)
'''


def _cleaned() -> str:
    fn = ast.parse(RAW).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return ast.unparse(clean_kernel(fn, {"in_ptr0": "hidden", "in_ptr1": "ids", "out_ptr0": "buf0"}))


def test_dead_assignments_copies_and_unmeasured_hints_go() -> None:
    text = _cleaned()
    for gone in ("rnumel", "rbase", "roffset", "rindex", "r0_1", "eviction_policy", "device_assert", "tmp4"):
        assert not re.search(rf"\b{gone}\b", text), (gone, text)
    # a load whose value only a removed bounds check read goes with it; the stored values stay
    assert "ids_ptr" in text.splitlines()[0] and "ids = " not in text
    assert "tl.store(out_ptr0 + xindex, " in text  # a buffer's pointer keeps Inductor's name: buf0 says nothing
    assert "RBLOCK: tl.constexpr = R0_BLOCK" not in text  # (nothing read RBLOCK here)


def test_names_say_what_each_value_is() -> None:
    text = _cleaned()
    assert text.startswith("def kernel(hidden_ptr, ids_ptr, out_ptr0, ks0,")
    assert "hidden = tl.load(hidden_ptr + (r0_index + ks0 * xindex), r0_mask, other=0.0)" in text
    assert "hidden_f32 = hidden.to(tl.float32)" in text and "prod = hidden_f32 * hidden_f32" in text
    # the accumulator is assigned before the loop and in it: it carries a value from step to step
    assert "carried = tl.full([XBLOCK, 1], 0, tl.float32)" in text and "carried = carried + tl.sum(prod, 1)" in text
    assert "ratio = carried / ks0" in text
    assert not re.search(r"\btmp\d+\b", text)


def test_a_generated_kernel_is_named_for_the_glue_it_replaces() -> None:
    assert kernel_name("DefaultRouterNoauxTCImpl_renorm_glue", 0, 1) == "_renorm_kernel"
    assert kernel_name("build_decode_metadata", 2, 3) == "_build_decode_metadata_kernel2"
    assert kernel_name("LlamaModel_forward_glue", 0, 1) == "_forward_kernel"
