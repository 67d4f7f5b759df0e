"""The inductor proposer: Inductor's generated code (committed, made on an H200 by ``compile_glue``) turned into a
standalone candidate that the evaluator judges under the interpreter, and what happens where Inductor cannot help."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from evaluator import Evaluator
from evaluator.guard import check
from smithbot import api
from smithbot.config import TARGETS_DIR
from smithbot.evolve.inductor import read_recording, recorded
from smithbot.evolve.generated import Compiled, InductorError
from smithbot.evolve.standalone import to_candidate

# Inductor's output (compile_glue on an H200), as shipped: for the demo's glue, and beside the bundled decode_metadata
RECORDINGS = {"demo_glue": TARGETS_DIR / "demo" / "inductor" / "LlamaModel.forward.json",
              "decode_metadata": Path(api.__file__).resolve().parent / "tasks" / "decode_metadata" / "inductor.json"}


def _compiled(name: str) -> Compiled:
    found = read_recording(RECORDINGS[name])
    assert found is not None
    return found


@pytest.fixture
def glue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    [row] = api.extract("demo", "glue:LlamaModel.forward", out=tmp_path / "glue", check=False)
    return row.out


def test_inductors_kernels_become_a_candidate_the_evaluator_accepts_and_finds_correct(glue: Path, tmp_path: Path
                                                                                       ) -> None:
    baseline = (glue / "kernel.py").read_text()
    cand = to_candidate(baseline, "LlamaModel_forward_glue", _compiled("demo_glue"))
    block = cand[cand.index("# EVOLVE-BLOCK-START"):]
    # no Inductor runtime left: plain @triton.jit kernels with readable names, its helpers inlined
    assert "torch._inductor" not in cand and "triton_heuristics" not in cand and "triton_helpers" not in cand
    assert "def _forward_kernel(lens_ptr, positions_ptr, " in block and "def _inductor_maximum(" in block
    assert not re.search(r"\btmp\d+\b|eviction_policy|device_assert", block)  # Inductor's bookkeeping cleaned
    assert "def LlamaModel_forward_glue(lens, positions):" in block  # the task's entry signature
    # Inductor compiled for contiguous inputs; the glue took any strides, so the inputs it only reads are made so
    assert "    lens = lens.contiguous()\n    positions = positions.contiguous()\n" in block
    assert cand.split("# EVOLVE-BLOCK-START")[0] == baseline.split("# EVOLVE-BLOCK-START")[0]
    assert check(baseline, cand, "LlamaModel_forward_glue").ok  # the guard takes it as any candidate
    (tmp_path / "seed.py").write_text(cand)
    with Evaluator(glue, backend="interpreter") as ev:
        ev.prepare()
        result = ev.submit(tmp_path / "seed.py").result()
    assert result.correct, result.why
    # and a seed whose launch is wrong is caught: the clamp's lower bound moved
    wrong = cand.replace("const = tl.full([1], 1, tl.int32)", "const = tl.full([1], 2, tl.int32)")
    assert wrong != cand
    (tmp_path / "wrong.py").write_text(wrong)
    with Evaluator(glue, backend="interpreter") as ev:
        ev.prepare()
        assert ev.submit(tmp_path / "wrong.py").result().status == "incorrect"


def test_a_result_follows_the_dtype_of_the_input_it_is_computed_from() -> None:
    import torch

    from smithbot.evolve.inductor import dtype_follows

    def glue(w, ids, n: int):
        return w / w.sum(-1, keepdim=True), torch.cumsum(ids, 0, dtype=torch.int32), ids[:n], n

    args = {"w": torch.rand(3, 8), "ids": torch.arange(5, dtype=torch.int32), "n": 2}
    assert dtype_follows(glue, args) == ("w", "", "ids", "")
    assert dtype_follows(lambda w: w.float(), {"w": torch.rand(3, dtype=torch.bfloat16)}) == ("",)


def test_output_that_cannot_stand_alone_is_refused_with_the_reason(glue: Path) -> None:
    baseline = (glue / "kernel.py").read_text()
    compiled = _compiled("demo_glue")
    template = compiled.code.replace("@triton_heuristics.pointwise(", "@triton_heuristics.template(")
    with pytest.raises(InductorError, match="an Inductor template kernel"):
        to_candidate(baseline, "LlamaModel_forward_glue", Compiled(template, compiled.inputs, compiled.returns))
    pooled = compiled.code.replace("buf1 = empty_strided_cuda(", "buf1 = alloc_from_pool(")
    with pytest.raises(InductorError, match="uses alloc_from_pool"):
        to_candidate(baseline, "LlamaModel_forward_glue", Compiled(pooled, compiled.inputs, compiled.returns))
    with pytest.raises(InductorError, match="call\\(\\) takes 3 inputs, the graph had 2"):
        to_candidate(baseline, "LlamaModel_forward_glue", Compiled(compiled.code, compiled.inputs[:2],
                                                                   compiled.returns))


def test_without_a_gpu_the_seed_is_a_failed_proposal_with_the_reason_and_the_search_stops(glue: Path) -> None:
    status = api.evolve(glue, proposer="inductor", iterations=3, backend="interpreter")
    assert "no Inductor seed to tune (inductor: Inductor writes Triton kernels only for a GPU" in status.message
    assert status.best is None and status.correct == 0


def test_a_triton_task_is_not_one_for_inductor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from smithbot.evolve.proposers import ProposerError

    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    with pytest.raises(ProposerError, match="rmsnorm is a triton task: the inductor proposer compiles a fusion"):
        api.evolve("rmsnorm", proposer="inductor", iterations=1, backend="interpreter")


@pytest.mark.gpu
def test_on_the_gpu_the_seed_is_inductors_and_verification_times_torch_compile(tmp_path: Path) -> None:
    """decode_metadata compiled by Inductor on the GPU becomes a correct candidate; a fusion's verification-effort
    evaluation also times the PyTorch baseline under torch.compile, case by case."""
    from smithbot.evolve.inductor import compile_glue

    task = Path(api.__file__).resolve().parent / "tasks" / "decode_metadata"
    seed = to_candidate((task / "kernel.py").read_text(), "build_decode_metadata", compile_glue(task))
    (tmp_path / "seed.py").write_text(seed)
    with Evaluator(task, backend="cuda", workers_per_gpu=1) as ev:
        ev.prepare()
        r = ev.submit(tmp_path / "seed.py", effort="verify").result()
    assert r.correct, r.why
    assert r.compiled["mode"] == "max-autotune-no-cudagraphs" and r.compiled["geomean"] > 0, r.compiled
    assert [c["name"] for c in r.compiled["cases"]] == [c["name"] for c in r.cases]


def test_the_bundled_decode_metadata_seed_reads_its_sizes_from_the_parameters_and_is_bit_exact(tmp_path: Path) -> None:
    """Inductor's code for decode_metadata (a scan, a pad and two gathers in three kernels, sizes as symbols): the
    candidate takes every size from its parameters (the page table is max_seq_len wide, not the pool's width of
    the case it was compiled on) and matches the glue bit for bit on the interpreter's cases."""
    task = Path(api.__file__).resolve().parent / "tasks" / "decode_metadata"
    compiled = recorded(task)  # the recording, with the returned values' dtypes from the glue run on the CPU
    assert compiled is not None and compiled.dtypes == ("", "req_to_token", "", "req_to_token")
    cand = to_candidate((task / "kernel.py").read_text(), "build_decode_metadata", compiled)
    # the buffers take the names the glue returns its values under, the one between two kernels is scratch
    assert "return (cu_seqlens_k, page_table, positions, cache_loc)" in cand
    assert "seq_lens_size_0 = seq_lens.size()[0]" in cand and "scratch = torch.empty_strided(" in cand
    block = cand[cand.index("# EVOLVE-BLOCK-START"):]
    assert not re.search(r"\b(arg\d+_\d+|buf\d+|_?tmp\d+|[xyr]\w*(index|offset|numel|mask)|ks\d+|[XR]\w*BLOCK)\b|"
                         "triton_poi", block), block
    # the scan reads the batch in one pass, a block as wide as it (and one at least: an empty batch still launches)
    assert "BLOCK_COLS=triton.next_power_of_2(max(1, seq_lens_size_0))" in block and "BLOCK_ROWS" not in block
    assert "tl.cumsum(seq_lens.to(tl.int32), 1)" in block  # (Inductor's adding associative_scan)
    # a value stored as it is into a buffer the glue returns takes that buffer's name
    assert "positions = (seq_lens - 1).to(tl.int64)" in block and "tl.store(positions_ptr + cols, positions," in block
    # no helper that folding left unread: the scan's combine, the carry's select, the floor division of an index
    assert "@triton.jit" in block and not re.search(r"def \w*(add0|select_one|div_floor)", block)
    assert re.findall(r"^    for ", block, re.M) == []
    # each returned buffer in the glue's dtype for it: the gathers take the table's, the cumsum and the cast their own
    assert "page_table = torch.empty_strided((seq_lens_size_0, max_seq_len), (max(1, max_seq_len), 1), " \
           "dtype=req_to_token.dtype," in block and "cache_loc = torch.empty_strided((seq_lens_size_0,), (1,), " \
           "dtype=req_to_token.dtype," in block
    assert "cu_seqlens_k = torch.empty_strided((1 + seq_lens_size_0,), (1,), dtype=torch.int32," in block
    assert "positions = torch.empty_strided((seq_lens_size_0,), (1,), dtype=torch.int64," in block
    (tmp_path / "seed.py").write_text(cand)
    with Evaluator(task, backend="interpreter") as ev:
        ev.prepare()
        result = ev.submit(tmp_path / "seed.py").result()
    assert result.correct, result.why


def test_a_float_that_dynamo_wrapped_is_read_as_the_number_the_task_passes() -> None:
    """Dynamo hands Inductor a Python float (sglang's ``routed_scaling_factor``) as a 0-d tensor, and Inductor's
    ``call`` reads it with ``.item()``; the task passes the float itself, so the candidate reads ``float(x)``."""
    import ast

    from smithbot.evolve.launcher import _statement, _strided

    stmt = ast.parse("k.run(buf1, arg6_1.item(), arg5_1, n, stream=stream0)").body[0]
    assert "float(arg6_1)" in _statement(stmt, {}, ["arg5_1"]) and ".item()" not in _statement(stmt, {}, ["arg5_1"])
    # its guard is 0-d: neither `.contiguous()` (a float has none: every candidate of that glue failed on the H100
    # with AttributeError) nor a stride assert
    guard = ast.parse("assert_size_stride(arg6_1, (), ())").body[0].value
    lines = ["arg6_1 = routed_scaling_factor", "arg5_1 = topk_weights"]
    assert _strided(lines, guard, set()) == lines
    contiguous = ast.parse("assert_size_stride(arg5_1, (s0, s1), (s1, 1))").body[0].value
    assert _strided(lines, contiguous, set())[-1] == "arg5_1 = arg5_1.contiguous()"


OVERFLOW_KERNEL = '''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_heuristics

@triton_heuristics.pointwise(size_hints={'y': 4096, 'x': 16}, triton_meta={}, inductor_meta={'grid_type': 'Grid2DWithYZOverflow'})
@triton.jit
def triton_poi_fused_0(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    yoffset = (tl.program_id(1) + tl.program_id(2) * tl.num_programs(1)) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    tmp0 = tl.load(in_ptr0 + (xindex + 16 * yindex), (yindex < ynumel) & (xindex < xnumel))
    tl.store(out_ptr0 + (xindex + 16 * yindex), tmp0, (yindex < ynumel) & (xindex < xnumel))
'''


@pytest.mark.parametrize("rows", [5, 4096, 16 * 70_000])
def test_inductors_2d_grid_with_y_overflow_covers_every_row_block(rows: int) -> None:
    """Inductor launches a 2D kernel whose y blocks pass CUDA's 65535 limit along z too (sglang's shared-expert
    append at 4k tokens): the candidate's grid does the same, every y block once, none past the limit."""
    import ast

    import triton

    from smithbot.evolve.generated import take_kernel
    from smithbot.evolve.launcher import _launch

    k, _ = take_kernel("triton_poi_fused_0", "_k", OVERFLOW_KERNEL, {}, set())
    call = ast.parse("triton_poi_fused_0.run(a, b, ynumel, xnumel, stream=stream0)", mode="eval").body
    launch = ast.unparse(_launch(k, call))
    at = eval(launch.split("[", 1)[1].rsplit("](", 1)[0], {"triton": triton, "max": max, "ynumel": rows,
                                                          "xnumel": 16})  # (the launch's grid, a function of it)
    grid = at({"YBLOCK": 16, "XBLOCK": 64})  # (the block sizes the launch passes)
    blocks = triton.cdiv(rows, 16)
    assert len(grid) == 3 and grid[1] <= 65535 and grid[1] * grid[2] >= blocks > grid[1] * (grid[2] - 1)


SCALED_KERNEL = '''
@triton.jit
def k(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    tmp0 = tl.load(in_ptr0 + xindex, xmask)
    tmp1 = in_ptr1
    tmp2 = tmp1.to(tl.float32)
    tmp3 = tmp0 / tmp2
    tl.store(out_ptr0 + xindex, tmp3, xmask)
'''


def test_a_float_the_launcher_passes_is_named_for_the_glue_and_not_cast_again() -> None:
    """Inductor declares a float the glue takes fp64 and casts it to fp32 in the kernel; the launcher passes a Python
    float, which Triton types fp32 (and its interpreter cannot ``.to()``): the parameter takes the glue's name and
    the cast, and the copy it was made into, go."""
    import ast

    from smithbot.evolve.clean import clean_kernel

    fn = ast.parse(SCALED_KERNEL).body[0]
    assert isinstance(fn, ast.FunctionDef)
    clean_kernel(fn, {"in_ptr0": "x", "in_ptr1": "float(scale)", "out_ptr0": "out", "xnumel": "n"})
    text = ast.unparse(fn)
    assert [a.arg for a in fn.args.args][:3] == ["x_ptr", "scale", "out_ptr"]
    assert ".to(" not in text and "x / scale," in text, text


BAKED_KERNEL = '''
@triton.jit
def _k(in_ptr0, out_ptr0, ks0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:]
    tmp0 = tl.load(in_ptr0 + xindex % ks0, xindex % ks0 < 8, other=256)
    tmp1 = tl.full([XBLOCK], 8, tl.int32)
    tl.store(out_ptr0 + xindex, tmp0 + tmp1, xindex < xnumel)
'''


def test_an_integer_inductor_wrote_in_as_a_constant_is_passed_again() -> None:
    """``F.pad(ids, value=num_experts)``: Inductor writes the compile case's 256 into the load's ``other=``. The seed
    takes it as a parameter, passed from the glue's argument, so it holds for a task's other expert counts; an
    integer the launcher reads already, or whose value the kernel does not hold, is left alone."""
    import ast

    from smithbot.evolve.generated import Kernel
    from smithbot.evolve.launcher import unbake

    kernels = {"k0": Kernel("_k", BAKED_KERNEL.strip(), ["in_ptr0", "out_ptr0", "ks0", "xnumel", "XBLOCK"],
                             ["XBLOCK"], "pointwise", {"x": 0}, "Grid1D")}
    body = ["_k[triton.cdiv(n, 1024),](ids, out, width, n, XBLOCK=1024, num_warps=4)"]
    body = unbake(kernels, body, {"num_experts": 256, "width": 8, "top_k": 8, "other": 3})
    fn = ast.parse(kernels["k0"].source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert [a.arg for a in fn.args.args] == ["in_ptr0", "out_ptr0", "ks0", "xnumel", "num_experts", "top_k",
                                             "XBLOCK"]
    assert kernels["k0"].params == [a.arg for a in fn.args.args]
    assert "other=num_experts" in kernels["k0"].source and "256" not in kernels["k0"].source
    # top_k's 8 sits in a tl.full too: it is no argument of this launch, so it is passed as well
    assert "tl.full([XBLOCK], top_k, tl.int32)" in kernels["k0"].source
    assert body == ["_k[triton.cdiv(n, 1024),](ids, out, width, n, num_experts, top_k, XBLOCK=1024, num_warps=4)"]
    # an argument the launcher reads, even inside a size: not specialised, the constant stays
    kernels["k0"] = dataclasses.replace(kernels["k0"], source=BAKED_KERNEL.strip())
    assert unbake(kernels, ["_k[g](ids, out, num_experts + 1, n, XBLOCK=1024)"], {"num_experts": 256}) \
        == ["_k[g](ids, out, num_experts + 1, n, XBLOCK=1024)"] and "other=256" in kernels["k0"].source
    # two arguments that both hold 256 at the compile case: the constant stays
    kernels["k0"] = dataclasses.replace(kernels["k0"], source=BAKED_KERNEL.strip())
    assert unbake(kernels, ["_k[g](ids, out, width, n, XBLOCK=1024)"], {"num_experts": 256, "hidden": 256}) \
        == ["_k[g](ids, out, width, n, XBLOCK=1024)"] and "other=256" in kernels["k0"].source


def test_the_strides_inductor_compiled_for_are_made_or_checked() -> None:
    """``assert_size_stride`` guards the strides Inductor's kernels index by. A read-only input is made contiguous
    where the guard asks for row-major strides; a written one, or other strides, keep the guard as an assert (on the
    H200 a standalone renormalize indexed rows by the column count whatever the input's strides)."""
    import ast

    from smithbot.evolve.launcher import _contiguous, _strided

    def guard(text: str) -> ast.Call:
        return ast.parse(text, mode="eval").body  # type: ignore[return-value]

    for sizes, strides, row_major in [("(s0, s1)", "(s1, 1)", True), ("(s0, s1, s2)", "(s1*s2, s2, 1)", True),
                                      ("(s0, 1, s2)", "(s2, 7, 1)", True), ("(s0, s1)", "(1, s0)", False),
                                      ("(s0,)", "(2,)", False), ("(s0, s1)", "(2*s1, 1)", False)]:
        assert _contiguous(guard(sizes), guard(strides)) is row_major, (sizes, strides)
    lines = ["arg0_1 = w", "arg1_1 = out", "s0 = arg0_1.size()[0]"]
    got = _strided(lines, guard("assert_size_stride(arg0_1, (s0, s1), (s1, 1))"), written={"arg1_1"})
    assert got == ["arg0_1 = w", "arg0_1 = arg0_1.contiguous()", "arg1_1 = out", "s0 = arg0_1.size()[0]"]
    got = _strided(lines, guard("assert_size_stride(arg1_1, (s0, s1), (s1, 1))"), written={"arg1_1"})
    assert got == lines + ["assert arg1_1.stride() == (s1, 1), 'compiled for the strides (s1, 1) of sizes (s0, s1)'"]


def test_the_proposer_offers_the_seed_in_one_pass_and_with_inductors_loops(tmp_path: Path) -> None:
    """The bundled decode_metadata's recording: the inductor proposer's first two candidates are its seed reading the
    batch in one pass and the seed keeping Inductor's loop, both correct; the search then keeps the faster."""
    import shutil

    from smithbot.evolve.db import RunDB

    task = tmp_path / "decode_metadata"
    shutil.copytree(Path(api.__file__).resolve().parent / "tasks" / "decode_metadata", task)
    status = api.evolve(str(task), proposer="inductor", iterations=2, islands=1, backend="interpreter",
                        db=tmp_path / "runs.db")
    with RunDB(tmp_path / "runs.db") as db:
        seeds = [c for c in db.candidates(status.run_id) if c.proposer == "inductor"]
    forms = {c.response.split(": ")[0].rsplit(" (", 1)[-1]: c for c in seeds}  # (two threads: in either order)
    assert sorted(forms) == ["Inductor's loops over each row)", "each row in one pass)"], [c.response for c in seeds]
    assert all(c.correct for c in seeds), [c.reason for c in seeds]
    one, looped = (forms[f].source or "" for f in ("each row in one pass)", "Inductor's loops over each row)"))
    assert "for col_start in" not in one and "for col_start in" in looped
