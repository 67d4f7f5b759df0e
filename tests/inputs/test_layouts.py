"""The layouts' invariants, their binding to a launcher's parameters, and tasks built from them that match a PyTorch
reference under the interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from evaluator import Evaluator
from smithbot import api
from smithbot.inputs.harness import layouts_of
from smithbot.inputs.layouts.moe_align import build_moe_align
from smithbot.inputs.layouts.paged_kv import build_paged_kv
from smithbot.inputs.plan import bind_layouts
from smithbot.types import InputPlan
from tests.conftest import git_repo
from tests.extract.test_extract import _check_against_reference, _with_reference

# irregular sizes: one token, fewer slots than a block, more experts than slots, blocks of 16 and 64
MOE_SIZES = [(1, 1, 4, 16), (3, 2, 16, 64), (37, 8, 128, 64), (250, 6, 60, 16)]


@pytest.mark.parametrize("tokens,top_k,experts,block", MOE_SIZES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_moe_align_groups_every_slot_once_in_whole_blocks_of_its_expert(tokens: int, top_k: int, experts: int,
                                                                        block: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    f = build_moe_align({"tokens": tokens, "top_k": top_k, "experts": experts, "block": block}, g, "cpu")
    ids, sorted_ids, expert_ids = f["topk_ids"], f["sorted_token_ids"].long(), f["expert_ids"].long()
    n = tokens * top_k
    assert ids.shape == (tokens, top_k) and ids.dtype == torch.int32
    assert all(len(set(row.tolist())) == top_k for row in ids)  # distinct experts per token
    assert torch.allclose(f["topk_weights"].sum(-1) <= 1.0 + 1e-6, torch.ones(tokens, dtype=torch.bool))
    total = int(f["num_tokens_post_padded"])
    assert total % block == 0 and n <= total <= n + experts * (block - 1)
    assert len(sorted_ids) == n + experts * (block - 1)  # the engines' buffer size
    real = sorted_ids[sorted_ids < n]
    assert sorted(real.tolist()) == list(range(n))  # every slot once
    assert bool((sorted_ids[total:] == n).all())  # past the padded length, only the no-slot value
    slots = ids.flatten().long()
    for b in range(total // block):  # every real row of a block belongs to the block's expert
        rows = sorted_ids[b * block:(b + 1) * block]
        rows = rows[rows < n]
        assert len(rows) > 0 and bool((slots[rows] == expert_ids[b]).all())
    # an expert's slots in token order, as the alignment keeps them
    for e in slots.unique().tolist():
        mine = real[slots[real] == e]
        assert mine.tolist() == sorted(mine.tolist())


@pytest.mark.parametrize("batch,context,page", [(1, 16, 1), (3, 100, 16), (64, 1024, 1), (5, 64, 64)])
@pytest.mark.parametrize("seed", [0, 1])
def test_paged_kv_tables_agree_with_the_request_pool(batch: int, context: int, page: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    f = build_paged_kv({"batch": batch, "context": context, "page": page}, g, "cpu")
    context = (context + page - 1) // page * page  # whole pages
    assert f["req_to_token"].dtype == torch.int32
    r2t, rows, lens = f["req_to_token"].long(), f["req_pool_indices"], f["seq_lens"]
    assert r2t.shape == (2 * batch, context)
    assert sorted(r2t.flatten().tolist()) == list(range(2 * batch * context))  # every slot once in the pool
    assert bool((r2t.view(2 * batch, -1, page) - r2t.view(2 * batch, -1, page)[..., :1]
                 == torch.arange(page)).all())  # a page's slots are consecutive
    assert len(set(rows.tolist())) == batch and bool((rows < 2 * batch).all())
    assert bool(((lens >= 1) & (lens <= context)).all()) and f["cache_seqlens"].dtype == torch.int32
    assert torch.equal(f["page_table"].long(), r2t[rows][:, ::page] // page)
    assert f["kv_indptr"].tolist() == [0, *torch.cumsum(lens, 0).tolist()]
    assert torch.equal(f["cu_seqlens_k"], f["kv_indptr"])
    assert torch.equal(f["kv_indices"], torch.cat([r2t[r, :n] for r, n in zip(rows.tolist(), lens.tolist())]))
    assert f["max_seq_pages"] == context // page and f["max_seqlen_k"] == int(lens.max())
    assert f["strided_indices"].tolist() == list(range(0, context, page))
    # a decode step's query: a token per request, at its last position, which its page table holds
    assert f["query_start_loc"].tolist() == list(range(batch + 1)) and f["query_start_loc"].dtype == torch.int32
    pos = f["positions"]
    assert torch.equal(pos, lens - 1) and bool((pos // page < context // page).all())
    # an extend step: a cached prefix and at least one new position per request, all written to free slots
    pre, ext = f["prefix_lens"], f["extend_lens"]
    assert bool(((pre >= 0) & (ext >= 1)).all()) and torch.equal(pre + ext, lens)
    assert [t.numel() for t in f["prefix_tensors"]] == pre.tolist() and f["out_cache_loc"].numel() == int(ext.sum())
    written = torch.cat([*f["prefix_tensors"], f["out_cache_loc"]]).tolist()
    free = set(range(2 * batch * context)) - set(r2t[rows].flatten().tolist())
    assert len(set(written)) == len(written) and set(written) <= free  # so the write changes the batch's rows


def test_a_launcher_gets_a_layout_by_its_parameters_names_and_the_yaml_can_name_one() -> None:
    params = ["A", "topk_ids", "topk_weights", "sorted_token_ids", "expert_ids", "num_tokens_post_padded", "top_k"]
    bound = bind_layouts(params, {})
    assert {p: s["field"] for p, s in bound.items()} == {
        "topk_ids": "topk_ids", "topk_weights": "topk_weights", "sorted_token_ids": "sorted_token_ids",
        "expert_ids": "expert_ids", "num_tokens_post_padded": "num_tokens_post_padded"}
    assert {s["layout"] for s in bound.values()} == {"moe_align"}
    # top-k ids alone are model data, not a layout: a router's launcher keeps its own specs
    assert bind_layouts(["x", "topk_ids", "topk_weights"], {}) == {}
    # a launcher the YAML gives specs of its own takes a layout only where they name it: its author decides
    assert bind_layouts(params, {"A": {"shape": ["tokens", "hidden"]}}) == {}
    # a spec the YAML gives stays; a YAML spec that names the layout binds, under any name
    given = {"expert_ids": {"shape": [8], "dtype": "int32"}, "order": {"layout": "moe_align",
                                                                       "field": "sorted_token_ids"}}
    bound = bind_layouts(["topk_ids", "order", "expert_ids", "num_tokens_post_padded"], given)
    assert set(bound) == {"topk_ids", "order", "num_tokens_post_padded"}
    assert bound["order"]["field"] == "sorted_token_ids"
    with pytest.raises(ValueError, match="no field 'sorted'"):
        bind_layouts(["x"], {"x": {"layout": "moe_align", "field": "sorted"}})
    # the paged KV cache: sglang's request pool and what it derives
    bound = bind_layouts(["req_to_token", "req_pool_indices", "seq_lens", "page_table", "page_size"], {})
    assert {p: (s["layout"], s["field"]) for p, s in bound.items()} == {
        "req_to_token": ("paged_kv", "req_to_token"), "req_pool_indices": ("paged_kv", "req_pool_indices"),
        "seq_lens": ("paged_kv", "seq_lens"), "page_table": ("paged_kv", "page_table")}
    # an engine's device and host copies of a field (`seq_lens_tensor`, `seq_lens_cpu`) are that field
    bound = bind_layouts(["req_to_token", "seq_lens_tensor", "seq_lens_cpu", "prefix_tensors", "pre_lens_tensor"], {})
    assert {p: s["field"] for p, s in bound.items()} == {"req_to_token": "req_to_token", "seq_lens_tensor": "seq_lens",
                                                          "seq_lens_cpu": "seq_lens", "prefix_tensors": "prefix_tensors"}


ENGINE = '''import torch
import triton
import triton.language as tl


@triton.jit
def _moe_scale_kernel(A, W, Out, sorted_ids, expert_ids, num_post, num_valid, top_k: tl.constexpr, D,
                      BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK_M >= tl.load(num_post):
        return
    slot = tl.load(sorted_ids + pid * BLOCK_M + tl.arange(0, BLOCK_M))
    ok = slot < num_valid
    e = tl.load(expert_ids + pid)
    cols = tl.arange(0, BLOCK_D)
    for d0 in range(0, D, BLOCK_D):
        c = d0 + cols
        m = ok[:, None] & (c[None, :] < D)
        a = tl.load(A + (slot // top_k)[:, None] * D + c[None, :], mask=m, other=0.0)
        w = tl.load(W + e * D + c, mask=c < D, other=0.0)
        tl.store(Out + slot[:, None] * D + c[None, :], a * w[None, :], mask=m)


def moe_scale(hidden_states, expert_scale, topk_ids, sorted_token_ids, expert_ids, num_tokens_post_padded, config):
    """Each (token, k) slot's row scaled by its expert's scales, walked in the aligned order."""
    E, D = expert_scale.shape
    assert hidden_states.shape[1] == D
    out = hidden_states.new_empty(topk_ids.numel(), D)
    grid = (triton.cdiv(sorted_token_ids.shape[0], config["BLOCK_SIZE_M"]),)
    _moe_scale_kernel[grid](hidden_states, expert_scale, out, sorted_token_ids, expert_ids, num_tokens_post_padded,
                            topk_ids.numel(), topk_ids.shape[1], D, BLOCK_M=config["BLOCK_SIZE_M"], BLOCK_D=64)
    return out


@triton.jit
def _kv_indices_kernel(req_to_token, req_pool_indices, seq_lens, kv_indptr, kv_indices, stride, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    row = tl.load(req_pool_indices + b)
    n = tl.load(seq_lens + b)
    start = tl.load(kv_indptr + b)
    for i in range(0, n, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(kv_indices + start + offs, tl.load(req_to_token + row * stride + offs, mask=m), mask=m)


def kv_indices_of(req_to_token, req_pool_indices, seq_lens, kv_indptr):
    """The KV slots of each request's positions, laid end to end (FlashInfer's kv_indices)."""
    kv_indices = torch.empty(req_to_token.numel(), dtype=torch.int64, device=req_to_token.device)
    _kv_indices_kernel[(req_pool_indices.shape[0],)](req_to_token, req_pool_indices, seq_lens, kv_indptr, kv_indices,
                                                     req_to_token.stride(0), BLOCK=128)
    return kv_indices[:int(kv_indptr[-1])]
'''

MOE_REFERENCE = '''

def reference(hidden_states, expert_scale, topk_ids, **routing):
    rows = hidden_states.float()[:, None, :] * expert_scale.float()[topk_ids.long()]
    return rows.reshape(-1, hidden_states.shape[1]).to(hidden_states.dtype)
'''

KV_REFERENCE = '''

def reference(req_to_token, req_pool_indices, seq_lens, kv_indptr):
    return torch.cat([req_to_token[r, :n].long() for r, n in zip(req_pool_indices.tolist(), seq_lens.tolist())])
'''


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    return git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/moe.py": ENGINE})


def test_a_moe_kernel_on_the_aligned_routing_matches_its_reference(engine: Path, tmp_path: Path) -> None:
    [row] = api.extract(str(engine), "moe_scale", out=tmp_path / "moe", source=str(engine), check=True)
    assert row.checked, row.why
    harness = (tmp_path / "moe" / "harness.py").read_text()
    assert "def build_moe_align(" in harness and "'field': 'sorted_token_ids'" in harness
    _with_reference(tmp_path / "moe", MOE_REFERENCE, {
        "name": "irregular-moe-13", "regime": "decode", "dtype": "fp32",
        "dims": {"tokens": 13, "hidden": 200, "experts": 9, "top_k": 3}})
    _check_against_reference(tmp_path / "moe")


def test_a_paged_kernel_on_the_request_pool_matches_its_reference(engine: Path, tmp_path: Path) -> None:
    [row] = api.extract(str(engine), "kv_indices_of", out=tmp_path / "kv", source=str(engine), check=True)
    assert row.checked, row.why
    spec = (tmp_path / "kv" / "harness.py").read_text()
    assert all(f"'field': '{f}'" in spec for f in ("req_to_token", "req_pool_indices", "seq_lens", "kv_indptr"))
    _with_reference(tmp_path / "kv", KV_REFERENCE, {"name": "irregular-kv-7", "regime": "decode", "dtype": "fp32",
                                                    "dims": {"tokens": 7}})
    _check_against_reference(tmp_path / "kv")
    task = yaml.safe_load((tmp_path / "kv" / "task.yaml").read_text())
    assert "skipped" not in task  # a few MiB of tables fit every preset


def test_a_layout_that_bound_by_itself_and_fails_gives_way_to_the_plain_inference(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch
                                                                                  ) -> None:
    """A launcher nobody wrote specs for takes the paged layout by its parameters' names; where the kernel wants
    what the layout does not give (int32 lengths, asserted), the task is built again without it and kept if that
    passes, so that a layout never costs a kernel the plain inference served."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    strict = ENGINE.replace('    """The KV slots of each request\'s positions, laid end to end (FlashInfer\'s kv_indices)."""\n',
                            '    assert seq_lens.dtype == torch.int32\n')
    assert strict != ENGINE
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/moe.py": strict})
    [row] = api.extract(str(repo), "kv_indices_of", out=tmp_path / "kv", source=str(repo), check=True)
    assert row.checked, row.why
    assert "(without the layouts that bound by themselves; as first built: " in row.why
    assert "assert seq_lens.dtype == torch.int32" in row.why  # why the layout's task failed
    harness = (tmp_path / "kv" / "harness.py").read_text()
    assert layouts_of(harness) == set() and "def build_" not in harness and "'dtype': 'int32'" in harness
    assert not (tmp_path / "kv.retry").exists()


def test_cases_fit_the_memory_budget_and_follow_the_serving_phases() -> None:
    from dataclasses import replace

    from smithbot.inputs.cases import cases, footprint

    target = replace(api.resolve_target("demo"), reach_presets=("llama3-8b",))
    # a [tokens, 256, hidden] fp32 activation: 4 MiB a token at llama3-8b's 4096
    specs = {"x": {"shape": ["tokens", 256, "hidden"], "dtype": "fp32"}, "lens": {"shape": ["tokens"], "dtype": "int32"}}
    assert footprint(InputPlan.read(specs), {"tokens": 3, "hidden": 4096}) == (3 * 256 * 4096 * 4 + 3 * 4,
                                                                               3 * 256 * 4096)
    got, skipped = cases(InputPlan.read(specs, {}), target, "f", budget=128 << 20)
    # bs1 (4 MiB) fits; bs64 (256 MiB) is skipped, a decode batch is what it is; the 4k prefill halves down to 256
    # tokens (1 GiB), still over, and is skipped with its smallest size
    assert [c["name"] for c in got] == ["irregular-decode-bs3", "llama3-8b-decode-bs1"]
    beside = "a case may take beside the evaluator's other workers"
    assert skipped == [{"name": "llama3-8b-decode-bs64", "why": f"its inputs take 256 MiB, over the 128 MiB {beside}"},
                       {"name": "llama3-8b-prefill-4k", "why": f"its inputs take 1.0 GiB, over the 128 MiB {beside}"}]
    # with room for 1024 tokens (4 GiB), the prefill case shrinks to them and says so in its name
    got, skipped = cases(InputPlan.read(specs, {}), target, "f", budget=5 << 30)
    assert [c["name"] for c in got][-1] == "llama3-8b-prefill-1k" and got[-1]["dims"]["tokens"] == 1024
    # a kernel serving runs only in decode gets no prefill case
    got, _ = cases(InputPlan.read({"x": {"shape": ["tokens", "hidden"]}}), replace(target, reach_phases=("decode",)),
                   "f")
    assert [c["regime"] for c in got] == ["decode", "decode", "decode"]


def test_an_mla_models_v_head_is_narrower_than_its_qk_head() -> None:
    """DeepSeek-V3's attention: q/k heads of 192, v (and the output) of 128. A spec sized by ``v_head_dim`` gets
    the model's; a model without MLA gets its head_dim (lmdeploy's prefill attention had asked for 384 KiB of shared
    memory with a 192-wide v)."""
    from dataclasses import replace

    from smithbot.inputs.cases import cases

    target = replace(api.resolve_target("lmdeploy"), reach_presets=("deepseek-v3", "llama3-8b"), reach_phases=())
    got, _ = cases(InputPlan.read({"v": {"shape": ["tokens", "kv_heads", "v_head_dim"]},
                                   "k": {"shape": ["tokens", "kv_heads", "head_dim"]}}), target, "f")
    dims = {c["name"]: c["dims"] for c in got if not c["interpreter"]}
    assert dims["deepseek-v3-decode-bs1"]["v_head_dim"] == 128 and dims["deepseek-v3-decode-bs1"]["head_dim"] == 192
    assert dims["llama3-8b-decode-bs1"]["v_head_dim"] == dims["llama3-8b-decode-bs1"]["head_dim"] == 128


def test_a_case_whose_tensor_outgrows_int32_offsets_is_skipped_whatever_the_memory() -> None:
    from dataclasses import replace

    from smithbot.inputs.cases import cases

    target = replace(api.resolve_target("demo"), reach_presets=("llama3-8b",))
    specs = {"x": {"shape": ["tokens", 1 << 26], "dtype": "int8"}}  # 64 Mi elements a token
    got, skipped = cases(InputPlan.read(specs, {}), target, "f", budget=1 << 40)
    assert [c["name"] for c in got] == ["irregular-decode-bs3", "llama3-8b-decode-bs1"]
    assert [s["name"] for s in skipped] == ["llama3-8b-decode-bs64", "llama3-8b-prefill-4k"]
    assert "4,294,967,296 elements: past 2**31" in skipped[0]["why"]


OP = '''import torch
import triton
import triton.language as tl


@triton.jit
def _grouped_scale_kernel(X, W, Out, sorted_idx, exp_start, exp_end, top_k: tl.constexpr, D, BLOCK_D: tl.constexpr):
    e = tl.program_id(0)
    start = tl.load(exp_start + e)
    end = tl.load(exp_end + e)
    cols = tl.arange(0, BLOCK_D)
    for i in range(start, end):
        slot = tl.load(sorted_idx + i)
        for d0 in range(0, D, BLOCK_D):
            c = d0 + cols
            x = tl.load(X + (slot // top_k) * D + c, mask=c < D)
            w = tl.load(W + e * D + c, mask=c < D)
            tl.store(Out + slot * D + c, x * w, mask=c < D)


def grouped_scale_launcher(x, w, out, sorted_idx, exp_start, exp_end, top_k):
    _grouped_scale_kernel[(w.shape[0],)](x, w, out, sorted_idx, exp_start, exp_end, top_k, x.shape[1], BLOCK_D=64)


def moe_scale_op(hidden_states, w1, topk_ids):
    """The op a model calls: the routing tables are built here, then the launcher runs on them."""
    flat = topk_ids.flatten()
    sorted_idx = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w1.shape[0])
    exp_end = torch.cumsum(counts, 0)
    exp_start = exp_end - counts
    out = hidden_states.new_empty(flat.numel(), hidden_states.shape[1])
    grouped_scale_launcher(hidden_states, w1[:, 0, :].contiguous(), out, sorted_idx, exp_start, exp_end,
                           topk_ids.shape[1])
    return out
'''

OP_REFERENCE = '''

def reference(hidden_states, w1, topk_ids):
    rows = hidden_states.float()[:, None, :] * w1[:, 0, :].float()[topk_ids.long()]
    return rows.reshape(-1, hidden_states.shape[1]).to(hidden_states.dtype)
'''


def test_a_launcher_on_an_ops_internal_tables_is_extracted_with_its_op(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """grouped_scale_launcher takes sorted_idx / exp_start / exp_end, which its op builds from the top-k ids and no
    layout makes: the task is built around the op, whose inputs are model tensors (its MoE weights by their names),
    and the routing is the engine's own code inside it."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/ops.py": OP})
    [row] = api.extract(str(repo), "_grouped_scale_kernel", out=tmp_path / "op", source=str(repo), check=True)
    assert row.checked, row.why
    task = yaml.safe_load((tmp_path / "op" / "task.yaml").read_text())
    assert task["entry"] == "moe_scale_op"
    assert "in the op moe_scale_op()" in task["description"] and "grouped_scale_launcher()" in task["description"]
    spec = (tmp_path / "op" / "harness.py").read_text()
    assert "'w1': {'shape': ['experts', '2 * moe_intermediate', 'hidden']}" in spec
    assert {c["dims"]["experts"] for c in task["cases"]} >= {16}  # MoE presets only
    _with_reference(tmp_path / "op", OP_REFERENCE, {"name": "irregular-op-11", "regime": "decode", "dtype": "fp32",
                                                    "dims": {"tokens": 11, "hidden": 100, "experts": 5, "top_k": 2,
                                                             "moe_intermediate": 3}})
    _check_against_reference(tmp_path / "op")


def test_a_moe_case_too_large_keeps_its_experts_shapes_with_fewer_experts() -> None:
    from dataclasses import replace

    from smithbot.inputs.cases import cases

    target = replace(api.resolve_target("demo"), reach_presets=("qwen3-30b-a3b",))
    # qwen3-30b-a3b's gate-up weights: 128 x 1536 x 2048 bf16, 768 MiB
    specs = {"w1": {"shape": ["experts", "2 * moe_intermediate", "hidden"]}, "x": {"shape": ["tokens", "hidden"]}}
    got, skipped = cases(InputPlan.read(specs, {}), target, "f", budget=200 << 20)
    gpu = [c for c in got if not c["interpreter"]]
    # 768 MiB -> 384 -> 192: 32 of the 128 experts, each still 1536 x 2048; then the prefill's 4k tokens (16 MiB)
    # halve once to fit the last 8 MiB
    assert [c["name"] for c in gpu] == ["qwen3-30b-a3b-decode-bs1-32experts", "qwen3-30b-a3b-decode-bs64-32experts",
                                        "qwen3-30b-a3b-prefill-2k-32experts"]
    assert all(c["dims"]["experts"] == 32 and c["dims"]["moe_intermediate"] == 768 for c in gpu) and skipped == []
    # a launcher whose path needs the model's expert count (`_shrink`) keeps all 128 and halves their width instead:
    # 768 MiB -> 384 -> 192, and the prefill's tokens halve once, as above
    narrow = target.with_inputs("f", {"_shrink": "moe_intermediate"})
    got, skipped = cases(InputPlan.read(specs, {}), narrow, "f", budget=200 << 20)
    gpu = [c for c in got if not c["interpreter"]]
    assert [c["name"] for c in gpu] == ["qwen3-30b-a3b-decode-bs1-moe_intermediate192",
                                        "qwen3-30b-a3b-decode-bs64-moe_intermediate192",
                                        "qwen3-30b-a3b-prefill-2k-moe_intermediate192"]
    assert all(c["dims"]["experts"] == 128 for c in gpu) and skipped == []
    # 192 is as narrow as a quantization block of 128 allows: under 150 MiB, every case is skipped, and says why
    got, skipped = cases(InputPlan.read(specs, {}), narrow, "f", budget=150 << 20)
    assert [c for c in got if not c["interpreter"]] == [] and len(skipped) == 3
    assert "its inputs take 192 MiB, over the 150 MiB a case may take" in skipped[0]["why"], skipped


def test_an_op_that_takes_the_kernels_path_only_on_a_gpu_leaves_it_to_its_launchers_task(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """lmdeploy's compact MoE GEMM runs inside its op only on an SM90 GPU at 32 routes an expert or more (prefill):
    under the interpreter's small case the op's task never launches it, so the kernel gets its own launcher's
    task."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    gpu_only = OP.replace("    grouped_scale_launcher(hidden_states,",
                          "    if topk_ids.numel() < 32 * w1.shape[0]:  # many routes an expert alone take the kernel\n"
                          "        _repeat_rows_kernel[(out.shape[0],)](hidden_states, out, topk_ids.shape[1],\n"
                          "                                             hidden_states.shape[1], BLOCK_D=64)\n"
                          "        return out\n"
                          "    grouped_scale_launcher(hidden_states,")
    gpu_only = gpu_only.replace("\n\ndef grouped_scale_launcher", """

@triton.jit
def _repeat_rows_kernel(X, Out, top_k: tl.constexpr, D, BLOCK_D: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK_D)
    for d0 in range(0, D, BLOCK_D):
        tl.store(Out + r * D + d0 + c, tl.load(X + (r // top_k) * D + d0 + c, mask=d0 + c < D), mask=d0 + c < D)


def grouped_scale_launcher""")
    # and its launcher says what w is (an expert's scales a row), so that its own task needs no grown inputs
    gpu_only = gpu_only.replace("def grouped_scale_launcher(x, w, out, sorted_idx, exp_start, exp_end, top_k):\n",
                                "def grouped_scale_launcher(x, w, out, sorted_idx, exp_start, exp_end, top_k):\n"
                                "    assert w.dim() == 2 and w.shape[1] == x.shape[1]\n")
    assert "assert w.dim() == 2" in gpu_only
    assert gpu_only != OP
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/ops.py": gpu_only})
    [row] = api.extract(str(repo), "_grouped_scale_kernel", out=tmp_path / "op", source=str(repo), check=True)
    assert row.checked, row.why
    assert "(with its launcher's task, not the op moe_scale_op()'s)" in row.why
    assert yaml.safe_load((row.out / "task.yaml").read_text())["entry"] == "grouped_scale_launcher"


def test_an_op_that_fails_its_self_check_falls_back_to_the_launcher(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An op whose inputs do not hold (here it refuses every input, at run time) gets its launcher tried: a task
    built around the launcher is checked and would take the op's place if it passed (here the launcher refuses
    too); the row gives both reasons."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    picky = OP.replace("    flat = topk_ids.flatten()\n", "    if float(hidden_states.float().abs().sum()) >= 0:\n"
                                                          "        raise RuntimeError('this op refuses every input')\n"
                                                          "    flat = topk_ids.flatten()\n")
    picky = picky.replace("    _grouped_scale_kernel[(w.shape[0],)]", "    if float(x.float().abs().sum()) >= 0:\n"
                          "        raise RuntimeError('so does its launcher')\n    _grouped_scale_kernel[(w.shape[0],)]")
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/ops.py": picky})
    [row] = api.extract(str(repo), "_grouped_scale_kernel", out=tmp_path / "op", source=str(repo), check=True)
    assert "this op refuses every input" in row.why, row.why
    assert not (tmp_path / "op.retry").exists()
    # the launcher was tried and refused too: the op's task stays, with both reasons
    assert not row.checked and "; at its launcher grouped_scale_launcher() (not the op moe_scale_op()): " in row.why
    assert "so does its launcher" in row.why.split("; at its launcher")[1]
    assert yaml.safe_load((tmp_path / "op" / "task.yaml").read_text())["entry"] == "moe_scale_op"


@pytest.mark.parametrize("batch,capacity", [(1, 128 * 1024), (5, 64), (64, 1024), (7, 13)])
def test_paged_kv_chunks_the_cached_prefixes_as_the_engine_does(batch: int, capacity: int) -> None:
    f = build_paged_kv({"batch": batch, "context": 300, "page": 1, "chunk_capacity": capacity},
                       torch.Generator().manual_seed(batch), "cpu")
    lens, starts, chunk_lens = f["seq_lens"], f["prefix_chunk_starts"].long(), f["prefix_chunk_seq_lens"].long()
    chunk = max(1, capacity // batch)
    assert f["batch_size"] == batch and f["num_prefix_chunks"] == -(-int(lens.max()) // chunk)
    assert starts.shape == chunk_lens.shape == (f["num_prefix_chunks"], batch)
    assert torch.equal(chunk_lens.sum(0), lens)  # every cached position in exactly one chunk
    assert bool((chunk_lens <= chunk).all()) and bool(((starts + chunk_lens <= lens) | (chunk_lens == 0)).all())
    cu = f["prefix_chunk_cu_seq_lens"].long()
    assert torch.equal(cu[:, 1:], chunk_lens.cumsum(1)) and bool((cu[:, 0] == 0).all())
    assert f["prefix_chunk_num_tokens"] == chunk_lens.sum(1).tolist()


CHUNKS = '''import torch
import triton
import triton.language as tl

from engine.context import get_req_to_token_pool


@triton.jit
def _chunk_indices_kernel(req_to_token, req_pool_indices, starts, lens, cu, out, stride, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    row = tl.load(req_pool_indices + b)
    start = tl.load(starts + b)
    n = tl.load(lens + b)
    at = tl.load(cu + b)
    for i in range(0, n, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + at + offs, tl.load(req_to_token + row * stride + start + offs, mask=m), mask=m)


class Batch:
    def prepare_chunk_indices(self, device):
        """Each chunk's KV slots, kept on the batch for the attention of that chunk."""
        self.chunk_indices = []
        req_to_token = get_req_to_token_pool().req_to_token
        for c in range(self.num_prefix_chunks):
            out = torch.empty(self.prefix_chunk_num_tokens[c], dtype=torch.int32, device=device)
            _chunk_indices_kernel[(self.batch_size,)](
                req_to_token, self.req_pool_indices, self.prefix_chunk_starts[c], self.prefix_chunk_seq_lens[c],
                self.prefix_chunk_cu_seq_lens[c], out, req_to_token.shape[1], BLOCK=64)
            self.chunk_indices.append(out)
'''

CONTEXT = '''_CONTEXT = None


def get_req_to_token_pool():
    assert _CONTEXT is not None, "no forward context"
    return _CONTEXT.req_to_token_pool
'''

CHUNKS_TARGET = '''name: engine
repo: {repo}
models: [llama3-8b]
regimes: {{decode_batch: [1, 8], prefill_tokens: [512]}}
inputs:
  Batch_prepare_chunk_indices:
    self: {{object: {{layout: paged_kv, sizes: {{chunk_capacity: 100}}}}}}
    req_to_token_pool: {{object: {{layout: paged_kv, sizes: {{chunk_capacity: 100}}}}}}
'''

CHUNKS_REFERENCE = '''

def reference(self, req_to_token_pool, device):
    self.chunk_indices = []
    pool = req_to_token_pool.req_to_token
    for c in range(self.num_prefix_chunks):
        self.chunk_indices.append(torch.cat([
            pool[r, s:s + n] for r, s, n in zip(self.req_pool_indices.tolist(), self.prefix_chunk_starts[c].tolist(),
                                                self.prefix_chunk_seq_lens[c].tolist())]))
'''


def test_a_method_on_engine_state_is_extracted_with_that_state_as_inputs_and_its_stored_outputs_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A launcher that is a method of the engine's batch, reads the request pool through a global accessor and keeps
    its outputs on the batch (sglang's chunked-prefix KV indices): the accessor becomes an input, both objects carry
    one paged layout's fields, and what the method stores on ``self`` is the output a candidate must match."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/chunks.py": CHUNKS,
                                          "engine/context.py": CONTEXT})
    target = tmp_path / "engine.yaml"
    target.write_text(CHUNKS_TARGET.format(repo=repo))
    [row] = api.extract(str(target), "_chunk_indices_kernel", out=tmp_path / "chunks", source=str(repo), check=True)
    assert row.checked, row.why
    kernel = (tmp_path / "chunks" / "kernel.py").read_text()
    assert "def Batch_prepare_chunk_indices(self, req_to_token_pool, device):" in kernel
    assert "req_to_token = req_to_token_pool.req_to_token" in kernel and "_CONTEXT" not in kernel
    _with_reference(tmp_path / "chunks", CHUNKS_REFERENCE, {
        "name": "irregular-chunks-9", "regime": "prefill", "dtype": "fp32", "dims": {"tokens": 9}})
    _check_against_reference(tmp_path / "chunks")
    # a candidate that computes the chunks but keeps none of them on the batch is wrong
    lazy = kernel.replace("        self.chunk_indices.append(out)\n", "        pass\n")
    assert lazy != kernel
    (tmp_path / "lazy.py").write_text(lazy)
    with Evaluator(tmp_path / "chunks", backend="interpreter") as ev:
        ev.prepare()
        result = ev.submit(tmp_path / "lazy.py").result()
    assert result.status == "incorrect" and "self.chunk_indices[0]" in result.why, result.why


SHUFFLED = '''

@triton.jit
def _gather_kernel(Src, Idx, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(Src + tl.load(Idx + offs, mask=offs < n), mask=offs < n), mask=offs < n)


def sort_by_expert_shuffled(topk_ids):
    """The slots grouped by expert, in no fixed order within an expert (as a routing's atomics leave them)."""
    flat = topk_ids.flatten()
    g = torch.Generator(device=flat.device)
    g.seed()
    shuffle = torch.randperm(flat.numel(), generator=g, device=flat.device)
    slots = torch.arange(flat.numel(), device=flat.device)
    order = shuffle[torch.argsort(flat[shuffle], stable=True)]
    out = torch.empty_like(slots)
    _gather_kernel[(triton.cdiv(flat.numel(), 64),)](slots, order, out, flat.numel(), BLOCK=64)
    return out


_sort_by_expert = sort_by_expert_shuffled
'''


def test_a_launcher_whose_outputs_differ_between_runs_is_extracted_with_the_op_that_calls_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """lmdeploy's sorted-index kernels group a routing's slots by expert in the order their atomics run: two runs of
    the launcher disagree, while the op around them (through an alias of the launcher) gives one answer. The
    launcher's task fails its self-check and the kernel's task is built again around that op."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    op = OP.replace("    sorted_idx = torch.argsort(flat, stable=True)\n", "    sorted_idx = _sort_by_expert(topk_ids)\n")
    op = op.replace("\n\ndef moe_scale_op", SHUFFLED + "\n\ndef moe_scale_op")
    assert "_sort_by_expert(topk_ids)" in op and "g.seed()" in op
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/ops.py": op})
    [row] = api.extract(str(repo), "_gather_kernel", out=tmp_path / "sort", source=str(repo), check=True)
    assert row.checked, row.why
    assert "(around the op moe_scale_op() that calls it (its launcher's own outputs differ between runs); as first " \
           "built: incorrect: " in row.why, row.why
    first = row.why.split("as first built: incorrect: ")[1]
    assert first.startswith(("mismatch", "nondeterministic")), first  # two calls of the launcher disagreed
    task = yaml.safe_load((tmp_path / "sort" / "task.yaml").read_text())
    assert task["entry"] == "moe_scale_op" and not (tmp_path / "sort.retry").exists()
    _with_reference(tmp_path / "sort", OP_REFERENCE, {"name": "irregular-op-11", "regime": "decode", "dtype": "fp32",
                                                      "dims": {"tokens": 11, "hidden": 100, "experts": 5, "top_k": 2,
                                                               "moe_intermediate": 3}})
    _check_against_reference(tmp_path / "sort")


POOL = '''import torch
import triton
import triton.language as tl

_is_hip = torch.version.hip is not None


@triton.jit
def _write_rows_kernel(req_to_token, req_pool_indices, prefix_ptrs, prefix_lens, seq_lens, extend_lens,
                       out_cache_loc, stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = tl.load(req_pool_indices + pid)
    pre = tl.load(prefix_lens + pid)
    n = tl.load(seq_lens + pid)
    prefix = tl.load(prefix_ptrs + pid).to(tl.pointer_type(tl.int64))
    for i in range(0, pre, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        tl.store(req_to_token + row * stride + offs, tl.load(prefix + offs, mask=offs < pre), mask=offs < pre)
    start = tl.cast(0, tl.int64)
    for j in range(pid):
        start += tl.load(extend_lens + j)
    for i in range(0, n - pre, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        m = offs < n - pre
        tl.store(req_to_token + row * stride + pre + offs, tl.load(out_cache_loc + start + offs, mask=m), mask=m)


def write_rows(out_cache_loc, req_pool_indices_tensor, prefix_lens_tensor, seq_lens_tensor, extend_lens_tensor,
               prefix_tensors, req_to_token_pool):
    """Each request's row of the pool: its cached prefix's slots, then the slots allocated for its new positions."""
    if not _is_hip:
        ptrs = torch.tensor([t.data_ptr() for t in prefix_tensors], dtype=torch.uint64).to(req_to_token_pool.device)
        _write_rows_kernel[(req_pool_indices_tensor.shape[0],)](
            req_to_token_pool.req_to_token, req_pool_indices_tensor, ptrs, prefix_lens_tensor, seq_lens_tensor,
            extend_lens_tensor, out_cache_loc, req_to_token_pool.req_to_token.shape[1], BLOCK=64)
    else:  # the host path, through the pool's own method: not what the task runs
        start = 0
        for i, row in enumerate(req_pool_indices_tensor.tolist()):
            pre, n = int(prefix_lens_tensor[i]), int(seq_lens_tensor[i])
            req_to_token_pool.write((row, slice(0, pre)), prefix_tensors[i])
            req_to_token_pool.write((row, slice(pre, n)), out_cache_loc[start:start + n - pre])
            start += n - pre
'''

POOL_REFERENCE = '''

def reference(out_cache_loc, req_pool_indices_tensor, prefix_lens_tensor, extend_lens_tensor, prefix_tensors,
              req_to_token, **_):
    start = 0
    for i, row in enumerate(req_pool_indices_tensor.tolist()):
        pre, new = int(prefix_lens_tensor[i]), int(extend_lens_tensor[i])
        req_to_token[row, :pre] = prefix_tensors[i]
        req_to_token[row, pre:pre + new] = out_cache_loc[start:start + new]
        start += new
'''


def test_a_kernel_that_reaches_a_list_of_tensors_through_their_addresses_writes_the_pools_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sglang's write of an extend step's slots into the request pool: the prefixes come as a list of tensors whose
    addresses the kernel loads, the pool as an object (read for its table and device, on the path the task runs),
    and the lengths as the device copies of the layout's fields. The check is strong: skipping the prefixes fails."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/pool.py": POOL})
    task = tmp_path / "rows"
    [row] = api.extract(str(repo), "write_rows", out=task, source=str(repo), check=True)
    assert row.checked, row.why
    harness = (task / "harness.py").read_text()
    assert all(f"'field': '{f}'" in harness for f in ("prefix_tensors", "out_cache_loc", "prefix_lens", "extend_lens",
                                                      "req_pool_indices", "req_to_token"))
    _with_reference(task, POOL_REFERENCE, {"name": "irregular-rows-5", "regime": "decode", "dtype": "fp32",
                                           "dims": {"tokens": 5}})
    _check_against_reference(task)
    skipping = (task / "kernel.py").read_text().replace("for i in range(0, pre, BLOCK):", "for i in range(0, 0, 1):")
    assert skipping != (task / "kernel.py").read_text()
    (tmp_path / "skipping.py").write_text(skipping)
    with Evaluator(task, backend="interpreter") as ev:
        result = ev.submit(tmp_path / "skipping.py").result()
    assert not result.correct and result.reason == "mismatch" and "req_to_token" in result.detail
