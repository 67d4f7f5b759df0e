"""The cleaning pass for Inductor's kernels (``smithbot.evolve.clean``), on a kernel written the way Inductor writes
them. That a cleaned candidate still computes the glue is checked where the candidates are made
(``test_inductor.py``: the demo's glue, and the bundled decode_metadata seed bit for bit)."""

from __future__ import annotations

import ast
import re

from smithbot.evolve.clean import clean_helper, clean_kernel
from smithbot.evolve.standalone import kernel_name

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


# Inductor's looped reduction of a row sum, then a divide (two passes over the row): the loops each assign their
# indices again, the sum is carried in a loop-carried ``_tmp``, and the load is broadcast to the shape it has
LOOPED = '''
def kernel(in_ptr0, out_ptr1, ks0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + ks0 * x0), r0_mask & xmask, eviction_policy='evict_last', other=0.0)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        tmp3 = _tmp2 + tmp1
        _tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp4 = tl.load(in_ptr0 + (r0_1 + ks0 * x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)
        tmp5 = tmp4 / tmp2
        tl.store(out_ptr1 + (r0_1 + ks0 * x0), tl.broadcast_to(tmp5, [XBLOCK, R0_BLOCK]), r0_mask & xmask)
'''.replace("x0", "xindex")


def _cleaned(raw: str = RAW, tensors: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
    fn = ast.parse(raw).body[0]
    assert isinstance(fn, ast.FunctionDef)
    blocks = clean_kernel(fn, tensors or {"in_ptr0": "hidden", "in_ptr1": "ids", "out_ptr0": "buf0",
                                          "ks0": "hidden_size_1"})
    return ast.unparse(fn), blocks


def test_dead_assignments_copies_and_unmeasured_hints_go() -> None:
    text, _ = _cleaned()
    for gone in ("rnumel", "rbase", "roffset", "rindex", "r0_1", "eviction_policy", "device_assert", "tmp4"):
        assert not re.search(rf"\b{gone}\b", text), (gone, text)
    # a load whose value only a removed bounds check read goes with it; the stored values stay
    assert "ids_ptr" in text.splitlines()[0] and "ids = " not in text
    assert "tl.store(out_ptr0 + rows, " in text  # a buffer's pointer keeps Inductor's name: buf0 says nothing
    assert "RBLOCK" not in text  # (nothing read RBLOCK here)


def test_names_say_what_each_value_is() -> None:
    text, blocks = _cleaned()
    assert text.startswith("def kernel(hidden_ptr, ids_ptr, out_ptr0, hidden_size_1, n_rows, n_cols, "
                           "BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):")
    assert blocks == {"XBLOCK": "BLOCK_ROWS", "R0_BLOCK": "BLOCK_COLS"}  # the launcher passes them by these names
    assert "hidden = tl.load(hidden_ptr + (cols + hidden_size_1 * rows), col_mask, other=0.0)" in text
    assert "hidden_f32 = hidden.to(tl.float32)" in text and "prod = hidden_f32 * hidden_f32" in text
    # the accumulator is assigned before the loop and in it: it carries a value from step to step
    assert "acc = tl.full([BLOCK_ROWS, 1], 0, tl.float32)" in text and "acc = acc + tl.sum(prod, 1)" in text
    assert "ratio = acc / hidden_size_1" in text
    assert not re.search(r"\btmp\d+\b|index|numel|offset\b|XBLOCK|R0_", text), text


def test_a_looped_reductions_copies_and_broadcasts_go_loop_by_loop() -> None:
    """Each loop assigns ``r0_index`` and its copy ``r0_1`` again: the copy is replaced inside its own loop. A
    broadcast to the shape the loaded value already has goes; one to a wider shape would stay."""
    text, _ = _cleaned(LOOPED, {"in_ptr0": "topk_weights", "out_ptr1": "buf1", "ks0": "n_experts"})
    assert not re.search(r"\b_?tmp\d+\b|r0_1|broadcast_to|xindex|xmask|r0_", text), text
    assert "acc = tl.full([BLOCK_ROWS, BLOCK_COLS], 0, tl.float32)" in text
    assert "added = acc + topk_weights\n" in text and "acc = tl.where(col_mask & row_mask, added, acc)" in text
    assert "total = tl.sum(acc, 1)[:, None]" in text and "ratio = topk_weights_2 / total" in text
    assert "tl.store(out_ptr1 + (cols + n_experts * rows), ratio, col_mask & row_mask)" in text
    assert text.count("cols = col_start + col_offsets") == 2  # each loop keeps its own index
    wider = LOOPED.replace("tl.arange(0, XBLOCK)[:, None]", "tl.arange(0, XBLOCK)[:, None] + tl.zeros([1, 1], "
                                                            "tl.int32)").replace(
        "tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])", "tl.broadcast_to(tmp0, [XBLOCK, 2 * R0_BLOCK])")
    assert "tl.broadcast_to(topk_weights, [BLOCK_ROWS, 2 * BLOCK_COLS])" in _cleaned(wider, {"in_ptr0": "topk_weights"})[0]


def test_a_copy_read_after_its_loop_or_carried_into_the_next_step_stays() -> None:
    src = '''
def kernel(in_ptr0, n, B: tl.constexpr):
    for i in tl.range(0, n, B):
        last = prev
        a = i
        prev = a
    tl.store(in_ptr0, a + last)
'''
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    clean_kernel(fn, {})
    text = ast.unparse(fn)
    assert "last = prev" in text  # prev is read before the loop body assigns it: the step before's value
    assert "a = i" in text and "prev = i" in text  # a is read after the loop; the loop's own index is not


def test_a_helper_takes_plain_parameters_and_returns_its_value() -> None:
    fn = ast.parse("def combine(arg0_0, arg1_0):\n    tmp0 = arg0_0 + arg1_0\n    return tmp0\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    clean_helper(fn)
    assert ast.unparse(fn) == "def combine(a, b):\n    return a + b"


def test_a_generated_kernel_is_named_for_the_glue_it_replaces() -> None:
    assert kernel_name("DefaultRouterNoauxTCImpl_renorm_glue", 0, 1) == "_renorm_kernel"
    assert kernel_name("build_decode_metadata", 2, 3) == "_build_decode_metadata_kernel2"
    assert kernel_name("LlamaModel_forward_glue", 0, 1) == "_forward_kernel"
