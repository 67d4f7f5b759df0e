"""The cleaning pass for Inductor's kernels (``smithbot.evolve.clean``), on a kernel written the way Inductor writes
them. That a cleaned candidate still computes the glue is checked where the candidates are made
(``test_inductor.py``: the demo's glue, and the bundled decode_metadata seed bit for bit)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from smithbot.evolve.clean import clean_helper, clean_kernel
from smithbot.evolve.generated import kernel_name

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


def _cleaned(raw: str = RAW, tensors: dict[str, str] | None = None, one_row: bool = False) -> tuple[str, dict[str, str]]:
    fn = ast.parse(raw).body[0]
    assert isinstance(fn, ast.FunctionDef)
    blocks = clean_kernel(fn, tensors or {"in_ptr0": "hidden", "in_ptr1": "ids", "out_ptr0": "buf0",
                                          "ks0": "hidden_size_1"}, one_row=one_row)
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
    # a mask read once is written where it is read; a loaded value keeps its tensor's name
    assert "hidden = tl.load(hidden_ptr + (cols + hidden_size_1 * rows), cols < n_cols, other=0.0)" in text
    assert "hidden_f32 = hidden.to(tl.float32)" in text
    # the accumulator is assigned before the loop and in it: it carries a value from step to step
    assert "acc = tl.full([BLOCK_ROWS, 1], 0, tl.float32)" in text
    assert "acc = acc + tl.sum(hidden_f32 * hidden_f32, 1)[:, None]" in text
    assert "tl.store(out_ptr0 + rows, acc / hidden_size_1, None)" in text
    assert not re.search(r"\btmp\d+\b|index|numel|offset\b|XBLOCK|R0_", text), text


def test_a_looped_reductions_copies_and_broadcasts_go_loop_by_loop() -> None:
    """Each loop assigns ``r0_index`` and its copy ``r0_1`` again: the copy is replaced inside its own loop. A
    broadcast to the shape the loaded value already has goes; one to a wider shape would stay."""
    text, _ = _cleaned(LOOPED, {"in_ptr0": "topk_weights", "out_ptr1": "buf1", "ks0": "n_experts"})
    assert not re.search(r"\b_?tmp\d+\b|r0_1|broadcast_to|xindex|xmask|r0_", text), text
    assert "acc = tl.full([BLOCK_ROWS, BLOCK_COLS], 0, tl.float32)" in text
    assert "acc = tl.where(col_mask & row_mask, acc + topk_weights, acc)" in text
    assert "total = tl.sum(acc, 1)[:, None]" in text
    assert "tl.store(out_ptr1 + (cols + n_experts * rows), topk_weights_2 / total, col_mask & row_mask)" in text
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


# Inductor's looped softmax over a row (three passes: the max, the sum of exponentials, the store), as it writes one
SOFTMAX = '''
def kernel(in_ptr0, out_ptr2, ks0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    _tmp3 = tl.full([XBLOCK, R0_BLOCK], float("-inf"), tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + ks0 * x0), r0_mask & xmask, eviction_policy='evict_last', other=0.0)
        tmp1 = tmp0.to(tl.float32)
        tmp2 = tl.broadcast_to(tmp1, [XBLOCK, R0_BLOCK])
        tmp4 = _inductor_maximum(_tmp3, tmp2)
        _tmp3 = tl.where(r0_mask & xmask, tmp4, _tmp3)
    tmp3 = _inductor_max2(_tmp3, 1)[:, None]
    _tmp10 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp5 = tl.load(in_ptr0 + (r0_1 + ks0 * x0), r0_mask & xmask, eviction_policy='evict_last', other=0.0)
        tmp6 = tmp5.to(tl.float32)
        tmp7 = tmp6 - tmp3
        tmp8 = tl.exp(tmp7)
        tmp9 = tl.broadcast_to(tmp8, [XBLOCK, R0_BLOCK])
        tmp11 = _tmp10 + tmp9
        _tmp10 = tl.where(r0_mask & xmask, tmp11, _tmp10)
    tmp10 = tl.sum(_tmp10, 1)[:, None]
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp12 = tl.load(in_ptr0 + (r0_1 + ks0 * x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)
        tmp13 = tmp12.to(tl.float32)
        tmp14 = tmp13 - tmp3
        tmp15 = tl.exp(tmp14)
        tmp16 = tmp15 / tmp10
        tl.store(out_ptr2 + (r0_1 + ks0 * x0), tmp16, r0_mask & xmask)
'''


def test_a_looped_reduction_whose_block_covers_the_row_reads_it_once() -> None:
    """Launched with a block as wide as the row, each of Inductor's loops runs once: the passes become one, the
    loads of the same row one load, and an accumulator that starts at its operation's identity the masked value."""
    text, blocks = _cleaned(LOOPED, {"in_ptr0": "topk_weights", "out_ptr1": "buf1", "ks0": "n_experts"}, one_row=True)
    assert blocks == {"XBLOCK": "BLOCK_ROWS", "R0_BLOCK": "BLOCK_COLS"}
    assert text.split("\n")[1:] == [
        "    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)[:, None]",
        "    row_mask = rows < n_rows",
        "    cols = tl.arange(0, BLOCK_COLS)[None, :]",
        "    col_mask = cols < n_cols",
        "    topk_weights = tl.load(topk_weights_ptr + (cols + n_experts * rows), col_mask & row_mask, other=0.0)",
        "    ratio = topk_weights / tl.sum(topk_weights.to(tl.float32), 1)[:, None]",
        "    tl.store(out_ptr1 + (cols + n_experts * rows), ratio, col_mask & row_mask)"]
    soft, _ = _cleaned(SOFTMAX, {"in_ptr0": "x", "out_ptr2": "buf2", "ks0": "x_size_1"}, one_row=True)
    assert "for " not in soft and soft.count("tl.load(") == 1 and soft.count("tl.exp(") == 1, soft
    # the max starts at -inf, so the masked lanes take -inf; the sum starts at 0, which the loaded lanes are not
    assert "tl.where(col_mask & row_mask, x_f32, float('-inf'))" in soft
    assert "tl.where(col_mask & row_mask, exp.to(tl.float32), 0)" in soft


def test_constants_casts_and_scans_fold() -> None:
    """A scan of one row (launched with one row and one block of it, as Inductor's scan of a vector is): the row
    block is 1, the carry from the step before is never taken, an adding scan is a cumsum, a cast to the type a
    value has goes, and ``tl.full`` constants are plain numbers."""
    src = '''
def kernel(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    _tmp5 = tl.full([XBLOCK, 1], 0, tl.int32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        tmp0 = tl.load(in_ptr0 + r0_index, r0_mask, other=0.0)
        tmp1 = tmp0.to(tl.int32)
        tmp2 = tmp1.to(tl.int32)
        tmp3 = tl.broadcast_to(tmp2, [XBLOCK, R0_BLOCK])
        tmp4, = tl.associative_scan((tmp3,), 1, kernel_add0)
        tmp6 = _tmp5 + tmp4
        tmp7 = tl.where(r0_offset > 0, tmp6, tmp4)
        _tmp5 = _tmp5 + tl.sum(tmp3, 1)[:, None]
        tmp8 = tl.full([1, 1], 1, tl.int32)
        tl.store(out_ptr0 + tl.broadcast_to(r0_index, [XBLOCK, R0_BLOCK]), tmp7 - tmp8, r0_mask)
'''
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    blocks = clean_kernel(fn, {"in_ptr0": "lens", "out_ptr0": "buf0", "xnumel": "1"}, one_row=True,
                          adds=frozenset({"kernel_add0"}))
    assert blocks == {"XBLOCK": "", "R0_BLOCK": "BLOCK_COLS"}  # (the launch no longer passes XBLOCK)
    assert ast.unparse(fn).split("\n") == [
        "def kernel(lens_ptr, out_ptr0, n_rows, n_cols, BLOCK_COLS: tl.constexpr):",
        "    cols = tl.arange(0, BLOCK_COLS)[None, :]",
        "    col_mask = cols < n_cols",
        "    lens = tl.load(lens_ptr + cols, col_mask, other=0.0)",
        "    tl.store(out_ptr0 + cols, tl.cumsum(lens.to(tl.int32), 1) - 1, col_mask)"]


def test_a_value_some_statement_changes_between_is_not_taken_for_the_same() -> None:
    src = '''
def kernel(in_ptr0, out_ptr0, n, B: tl.constexpr):
    a = tl.load(in_ptr0 + tl.arange(0, B))
    tl.store(in_ptr0 + tl.arange(0, B), a + 1)
    b = tl.load(in_ptr0 + tl.arange(0, B))
    tl.store(out_ptr0 + tl.arange(0, B), a * b)
'''
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    clean_kernel(fn, {})
    assert ast.unparse(fn).count("tl.load(") == 2  # the store between wrote what the second load reads


_RUN = '''
import json, sys
import torch
import triton
import triton.language as tl


@triton.jit
def _inductor_maximum(a, b):
    return tl.maximum(a, b)


@triton.jit
def _inductor_max2(a, dim):
    return tl.max(a, dim)


KERNELS = json.loads(sys.argv[1])
for name, text in KERNELS.items():
    exec(text.replace("def kernel(", "@triton.jit\\ndef kernel_" + name + "("))
worst = 0.0
for rows in (1, 5, 33):
    for cols in (1, 3, 8, 13, 100):
        for seed in (0, 1):
            g = torch.Generator().manual_seed(seed)
            x = torch.rand(rows, cols, generator=g) + 0.1
            for name, ref in (("renorm", x / x.sum(-1, keepdim=True)), ("softmax", torch.softmax(x, -1))):
                for one_row in (True, False):
                    out = torch.full_like(x, float("nan"))  # (a lane the kernel misses stays NaN)
                    block = triton.next_power_of_2(cols) if one_row else 4
                    globals()["kernel_" + name + ("_one" if one_row else "_loop")][(rows,)](
                        x, out, cols, rows, cols, XBLOCK=1, R0_BLOCK=block)
                    worst = max(worst, (out - ref).abs().max().item())
print(worst)
'''


def test_a_reduction_read_in_one_pass_computes_what_its_loops_did(tmp_path: Path) -> None:
    """The renorm and the softmax, in one pass and in Inductor's loops, on the interpreter against torch: rows and
    columns that are not powers of two, two seeds, an output poisoned with NaN."""
    kernels = {}
    for name, raw, tensors in (("renorm", LOOPED, {"in_ptr0": "x", "out_ptr1": "buf1", "ks0": "x_size_1"}),
                               ("softmax", SOFTMAX, {"in_ptr0": "x", "out_ptr2": "buf2", "ks0": "x_size_1"})):
        for one_row in (True, False):
            fn = ast.parse(raw).body[0]
            assert isinstance(fn, ast.FunctionDef)
            blocks = clean_kernel(fn, tensors, one_row=one_row)
            text = ast.unparse(fn)
            for old, new in blocks.items():  # (the launch passes Inductor's names; the kernel takes the new ones)
                text = re.sub(rf"\b{new}\b", old, text)
            kernels[f"{name}_{'one' if one_row else 'loop'}"] = text
    assert "for " not in kernels["renorm_one"] and "for " in kernels["renorm_loop"]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", _RUN, json.dumps(kernels)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.strip()) < 1e-6


def test_an_index_split_into_row_and_column_and_put_back_together_is_the_index() -> None:
    """Inductor's gather of table rows into a page table: the floor division of a non-negative index by a size is
    ``//``, its row stride ``max(1, s)`` is ``s`` (a zero-width table has nothing to address), the split index put
    back together is the index, and ``-1 + x >= 0`` reads ``x >= 1``."""
    src = '''
def kernel(in_ptr0, in_ptr1, out_ptr0, ks0, ks1, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x1 = _inductor_div_floor_integer(xindex, ks0)
    x0 = xindex % ks0
    tmp0 = tl.load(in_ptr0 + x1, xmask)
    tmp1 = tl.load(in_ptr1 + (x0 + ks1 * tmp0), xmask)
    tmp2 = -1 + xindex
    tmp3 = tmp2 >= tl.full([1], 0, tl.int64)
    tl.store(out_ptr0 + (x0 + x1 * (1 * (1 >= ks0) + ks0 * (ks0 > 1))), tl.where(tmp3, tmp1, 0), xmask)
'''
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    clean_kernel(fn, {"in_ptr0": "pool", "in_ptr1": "table", "out_ptr0": "buf0", "ks0": "width", "ks1": "stride"})
    body = ast.unparse(fn).split("\n")[1:]
    assert body == [
        "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offsets < n_elements",
        "    pool = tl.load(pool_ptr + offsets // width, mask)",
        "    table = tl.load(table_ptr + (offsets % width + stride * pool), mask)",
        "    tl.store(out_ptr0 + offsets, tl.where(offsets >= 1, table, 0), mask)"], body
    signed = src.replace("xindex = xoffset + tl.arange(0, XBLOCK)[:]", "xindex = xoffset - tl.arange(0, XBLOCK)[:]")
    fn = ast.parse(signed).body[0]
    assert isinstance(fn, ast.FunctionDef)
    clean_kernel(fn, {"ks0": "width"})
    assert "_inductor_div_floor_integer(offsets, width)" in ast.unparse(fn)  # (an index that may be negative)


def test_a_step_taken_twice_is_not_taken_for_the_same_value() -> None:
    src = '''
def kernel(in_ptr0, out_ptr0, B: tl.constexpr):
    a = tl.load(in_ptr0 + tl.arange(0, B))
    a = a + 1
    a = a + 1
    tl.store(out_ptr0 + tl.arange(0, B), a)
'''
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    clean_kernel(fn, {})
    assert ast.unparse(fn).count("a + 1") == 2, ast.unparse(fn)
