"""Inputs inferred from a launcher's code, for parameters no name rule or YAML entry covers."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from smithbot import api
from smithbot.extract.infer import infer
from tests.extract.test_extract import _check_against_reference, _with_reference


def _fn(src: str) -> ast.FunctionDef:
    node = ast.parse(src).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def test_ranks_names_and_equalities() -> None:
    fn = _fn('''
def chunk_cumsum(dt, A, chunk_size, dt_bias=None, dt_softplus=False):
    batch, seqlen, nheads = dt.shape
    assert A.shape == (nheads,)
    nchunks = math.ceil(seqlen / chunk_size)
''')
    assert infer(fn, ["dt", "A", "chunk_size"], {}) == {
        "dt": {"shape": ["tokens", "tokens", "heads"]}, "A": {"shape": ["heads"]}, "chunk_size": 64}


def test_index_tensors_scalars_and_known_axes() -> None:
    fn = _fn('''
def gather(x, req_to_token: torch.Tensor, seq_lens, cu_seqlens, page_size: int, scale: float, use_fp8: bool,
           out_dtype: torch.dtype):
    n, d = x.shape
    assert req_to_token.shape[0] == x.shape[0]
    width = x.size(1)
    assert seq_lens.numel() == n
    _kernel[(n,)](x, req_to_token, seq_lens, cu_seqlens, page_size, scale)
''')
    got = infer(fn, ["req_to_token", "seq_lens", "cu_seqlens", "page_size", "scale", "use_fp8", "out_dtype", "width"],
                {"x": {"shape": ["tokens", "hidden"]}})
    assert got["req_to_token"] == {"shape": ["tokens"], "dtype": "int64", "init": "randint:0:tokens"}  # a mapping
    assert got["seq_lens"] == {"shape": ["tokens"], "dtype": "int64", "init": "randint:1:8"}
    assert got["cu_seqlens"] == {"shape": ["tokens"], "dtype": "int64", "init": "arange"}
    assert (got["page_size"], got["scale"], got["use_fp8"], got["out_dtype"]) == (64, 1.0, False, "dtype:act")
    assert got["width"] == "hidden"  # bound to x.size(1), which the known spec pins


def test_unknowable_parameters_stay_unknown_and_code_beats_name_rules() -> None:
    fn = _fn('''
def moe_reduce(hidden_states, plan, topk_weights):
    assert hidden_states.dim() == 3
    return plan(hidden_states)
''')
    assert infer(fn, ["plan"], {}) == {}  # called, never used as a tensor or a number: nothing to go on
    rule = {"hidden_states": {"shape": ["tokens", "hidden"]}}  # what the name rule says
    assert infer(fn, [], rule, by_rule=("hidden_states",)) == {"hidden_states": {"shape": ["tokens", "heads", "hidden"]}}
    assert infer(fn, [], {"hidden_states": {"shape": ["tokens", "heads", "hidden"]}}, by_rule=("hidden_states",)) == {}


LAUNCHER = '''"""A fixture engine whose launcher's parameters no name rule knows."""
import torch
import triton
import triton.language as tl


@triton.jit
def _gather_scaled_kernel(src_ptr, idx_ptr, out_ptr, n_cols, factor, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    src_row = tl.load(idx_ptr + row)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(src_ptr + src_row * n_cols + cols, mask=mask)
    tl.store(out_ptr + row * n_cols + cols, v * factor, mask=mask)


def gather_scaled(table: torch.Tensor, token_ids: torch.Tensor, factor: float) -> torch.Tensor:
    num_tokens, width = table.shape
    assert token_ids.dim() == 1
    out = torch.empty((token_ids.shape[0], width), dtype=table.dtype, device=table.device)
    grid = (token_ids.shape[0],)
    _gather_scaled_kernel[grid](table, token_ids, out, width, factor, BLOCK=triton.next_power_of_2(width))
    return out
'''

GATHER_REFERENCE = '''

def reference(table, token_ids, factor):
    return (table[token_ids].float() * factor).to(table.dtype)
'''


@pytest.fixture()
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    repo = tmp_path / "engine"
    (repo / "engine").mkdir(parents=True)
    (repo / "engine" / "__init__.py").write_text("")
    (repo / "engine" / "gather.py").write_text(LAUNCHER)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    return repo


def test_inferred_inputs_extract_run_and_match_a_reference(engine: Path, tmp_path: Path) -> None:
    [row] = api.extract(str(engine), "gather_scaled", out=tmp_path / "task", source=str(engine), check=True)
    assert row.extracted and row.checked, row.why
    harness = (tmp_path / "task" / "harness.py").read_text()
    assert "inferred from the launcher's code, unchecked by a person: table, token_ids, factor" in harness
    _with_reference(tmp_path / "task", GATHER_REFERENCE, {
        "name": "irregular-29x777", "regime": "prefill", "dtype": "fp32", "dims": {"tokens": 29, "hidden": 777}})
    _check_against_reference(tmp_path / "task")


def test_dtypes_negative_axes_and_literal_sizes() -> None:
    fn = _fn('''
def router(scores, bias, num_experts, k_cache, num_reqs):
    if num_reqs == 0:
        return None  # a special case, not the rule: num_reqs is not inferred as 0
    assert scores.dtype == torch.float32 and bias.dtype == torch.float32
    assert num_experts == 192
    assert k_cache.dim() == 3 and k_cache.size(-1) == 128
    assert bias.shape[-1] == scores.shape[-1]
''')
    got = infer(fn, ["scores", "bias", "num_experts", "k_cache", "num_reqs"], {})
    assert got["num_reqs"] == 4
    assert got["scores"] == {"shape": ["tokens"], "dtype": "fp32"} and got["bias"] == got["scores"]
    assert got["num_experts"] == 192
    assert got["k_cache"] == {"shape": ["tokens", "heads", 128]}


def test_param_specs_lets_the_code_override_a_name_rule() -> None:
    from smithbot.config import get_target
    from smithbot.extract.inputs import param_specs

    fn = _fn("def moe_reduce(hidden_states, x, fp32_acc=False):\n    assert hidden_states.dim() == 3\n")
    specs, _, inferred = param_specs([("hidden_states", ...), ("x", ...), ("fp32_acc", False)], "moe_reduce",
                                     get_target("demo"), fn)
    assert specs["hidden_states"] == {"shape": ["tokens", "heads", "hidden"]} and inferred == ["hidden_states"]
    assert specs["x"] == {"shape": ["tokens", "hidden"]}  # the name rule stands where the code says nothing
