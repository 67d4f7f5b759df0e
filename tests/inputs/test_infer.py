"""Inputs inferred from a launcher's code, for parameters no name rule or YAML entry covers."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from smithbot import api
from smithbot.inputs.infer import infer
from smithbot.inputs.launcher_facts import required_optionals
from smithbot.inputs.kernel_use import index_targets, kernel_param_kinds
from smithbot.types import InputPlan, read_spec
from tests.conftest import git_repo, load_module
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
    assert got["cu_seqlens"] == {"shape": ["tokens + 1"], "dtype": "int64", "init": "arange"}  # one more than rows
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


KERNEL = '''
@triton.jit
def _kernel(X, Out, lse, stride, n_cols, cap, start, row_ids, flag, Counts, BLOCK: tl.constexpr):
    row = tl.load(row_ids + tl.program_id(0))
    n = tl.load(Counts + tl.program_id(0))
    for i in range(n):
        pass
    ptrs = tl.multiple_of(X, 16) + row * stride
    cols = tl.arange(0, BLOCK)
    y = tl.load(ptrs + cols, mask=cols < n_cols) * cap
    out_ptr = Out + start
    tl.store(out_ptr + cols, y, mask=cols < n_cols)
    tl.store(lse.to(tl.pointer_type(tl.float32)) + row, tl.max(y, 0))
    _helper(flag)
'''


def test_kernel_param_kinds_read_pointers_numbers_and_constexprs() -> None:
    kinds = kernel_param_kinds(_fn(KERNEL))
    assert kinds == {"X": "pointer", "Out": "pointer", "lse": "pointer", "stride": "scalar", "n_cols": "scalar",
                     "cap": "scalar", "start": "pointer", "row_ids": "index", "flag": "unknown",
                     "Counts": "index", "BLOCK": "constexpr"}  # Counts: what it holds bounds a loop
    kinds = kernel_param_kinds(_fn('''
@triton.jit
def _repeat(Group, Repeats, Cum, Out):
    n = tl.load(Repeats + tl.program_id(0))
    start = tl.load(Cum + tl.program_id(0)) - n
    for r in range(n):
        tl.store(Out + start + r, tl.load(Group + tl.program_id(0)))
'''))
    assert kinds["Cum"] == "index" and kinds["Group"] == "pointer"  # an offset computed from what Cum holds
    kinds = kernel_param_kinds(_fn('''
@triton.jit
def _window(SeqLen, AttLen, sliding_window):
    n = tl.load(SeqLen + tl.program_id(0))
    tl.store(AttLen + tl.program_id(0), tl.minimum(n, sliding_window))
'''))
    assert kinds["sliding_window"] == "scalar"  # LightLLM's window: a number, as tl.minimum's operands are


def test_a_launch_says_what_unannotated_parameters_are() -> None:
    fn = _fn('''
def launch(a, b, att_lse, logit_cap, sz, plan_rows, block, helper_only):
    _kernel[(3,)](a, b, att_lse, 8, sz, logit_cap, 0, plan_rows, helper_only, BLOCK=block)
''')
    got = infer(fn, ["a", "b", "att_lse", "logit_cap", "sz", "plan_rows", "block", "helper_only"], {},
                kernels=(_fn(KERNEL),))
    assert got["att_lse"] == {"shape": ["tokens", "hidden"]}  # a pointer the kernel stores to, despite its name
    assert got["plan_rows"] == {"shape": ["tokens"], "dtype": "int64", "init": "randint:0:tokens"}  # loaded into
    # an address by the kernel: an index table, whatever its name
    assert (got["logit_cap"], got["sz"], got["block"]) == (1.0, 64, 64)
    assert "helper_only" not in got  # only handed on to a helper: nothing to go on


def test_an_output_made_like_an_input_tells_the_inputs_shape() -> None:
    fn = _fn('''
def merge_state(prefix_output, prefix_lse, output=None):
    if output is None:
        output = torch.empty_like(prefix_output)
    num_tokens, num_heads, head_size = output.shape[0], output.shape[1], output.shape[2]
''')
    assert infer(fn, ["prefix_output"], {})["prefix_output"] == {"shape": ["tokens", "heads", "head_dim"]}


def test_a_known_scalar_pins_the_axis_it_equals() -> None:
    fn = _fn('''
def mla(q_nope, d_v=512):
    assert q_nope.dim() == 3
    d_v_in = q_nope.shape[-1]
    assert d_v_in == d_v
''')
    assert infer(fn, ["q_nope"], {"d_v": 512}) == {"q_nope": {"shape": ["tokens", "heads", 512]}}


def test_starred_unpacking_splats_and_code_stated_sizes() -> None:
    fn = _fn('''
def chunk_o(q, v, x, h, gate_up, rows, top_k, config: Dict[str, Any], state, w, d, flag, page_size, starts, bias,
            q2, k2, N=None, mode="swish"):
    grid = (triton.cdiv(rows.shape[0], config["BLOCK_SIZE_M"]), config.get("SPLIT_K", 1))
    num_warps = config["num_warps"]
    B, T, H, K, V = *q.shape, v.shape[-1]
    assert x.shape[-1] == 128 and top_k == 8
    assert gate_up.dim() >= 3
    BLOCK_E = 64
    assert rows.shape[0] % BLOCK_E == 0
    if state.ndim != 4 or state.shape[-1] != K:
        raise ValueError("state must be [B, H, K, K]")
    if w.dtype not in (torch.int8, torch.float16):
        raise TypeError("w must be int8 or fp16")
    assert d.shape[-1] in {64, 128, 256}
    assert N is not None
    assert v.shape[-1] <= 256 and w.shape[-1] % 2 == 0
    assert isinstance(flag, bool) and page_size % 128 == 0 and len(starts) == 1 and bias.numel() == top_k
    assert q2.dim() == k2.dim() == 2
    _kernel[(B,)](q, v, *h.stride(), N)
''')
    kernel = _fn('''
@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["N"])
@triton.jit
def _kernel(q, v, s0, s1, s2, N, BLOCK: tl.constexpr, EVEN: tl.constexpr = True):
    pass
''')
    got = infer(fn, ["v", "h", "gate_up", "rows", "config", "state", "w", "d", "flag", "page_size", "starts", "bias",
                     "q2", "k2"],
                {"q": {"shape": ["tokens", "heads", "head_dim"]}, "x": {"shape": ["tokens", "hidden"]}, "top_k": "top_k"},
                by_rule=("q", "x", "top_k"), kernels=(kernel,))
    assert got["q"] == {"shape": ["tokens", "tokens", "heads", "hidden"]}  # rank 4, as the unpacking says (K: hidden)
    assert got["x"] == {"shape": ["tokens", 128]}  # the rule's shape, with the size the assert insists on
    assert got["top_k"] == 8 and len(got["gate_up"]["shape"]) == 3
    assert got["rows"]["shape"] == ["max(64, (tokens) // 64 * 64)"]  # a multiple of BLOCK_E, at least BLOCK_E
    assert got["config"] == {"literal": {"BLOCK_SIZE_M": 64, "num_warps": 4}}  # .get() has its own default
    assert got["state"] == {"shape": ["tokens", "heads", "heads", "hidden"]}  # `if ... != ...: raise` insists too
    assert got["w"]["dtype"] == "int8" and got["d"]["shape"] == [128]
    assert got["v"]["shape"][-1] == 128  # at most 256: a power of two no larger than 128
    assert got["w"]["shape"] == ["max(2, (tokens) // 2 * 2)"]  # even
    assert got["flag"] is False and got["page_size"] == 128 and got["starts"]["shape"] == [1]
    assert got["bias"]["shape"] == [8]  # 1-D, as many elements as top_k, which the code says is 8
    assert len(got["q2"]["shape"]) == len(got["k2"]["shape"]) == 2
    assert len(got["h"]["shape"]) == 3  # *h.stride() fills the 3 kernel parameters left before N
    assert required_optionals(fn) == {"N"}


@pytest.mark.parametrize("kernel_params, ranks", [
    ("x_ptr, sx0, sx1, sx2, out_ptr, so0, so1, so2, m_ptr, size_n", {"x": 3, "state": 3}),  # no names: even
    ("x_ptr, stride_xb, stride_xs, out_ptr, state_stride_b, state_stride_h, state_stride_s, state_stride_d, m_ptr, "
     "size_n", {"x": 2, "state": 4}),  # the stride names say whose they are
])
def test_several_splats_share_the_kernel_parameters(kernel_params: str, ranks: dict[str, int]) -> None:
    fn = _fn('''
def silu_and_mul(x, state, masked_m, size_n):
    out = torch.empty_like(state)
    _kernel[(1,)](x, *x.stride(), out, *out.stride(), masked_m, size_n)
''')
    kernel = _fn(f"@triton.jit\ndef _kernel({kernel_params}):\n    pass\n")
    got = infer(fn, ["x", "state", "masked_m", "size_n"], {}, kernels=(kernel,))
    assert {p: len(got[p]["shape"]) for p in ranks} == ranks


def test_a_masked_layouts_counts_stay_within_the_rows_each_expert_has() -> None:
    """DeepEP's masked layout: ``x`` is [experts, rows, n] and ``masked_m[e]`` counts the rows expert e holds, so
    a count is at most x's rows axis, whatever name inference gives that axis (DLBlas's post-quant SiLU had counts
    up to the tokens, past its rows: the kernel wrote across experts, into its own input)."""
    fn = _fn('''
def silu_and_mul_masked(input, output, masked_m, group):
    assert len(input.shape) == 3
    assert input.shape[0] == masked_m.shape[0]
    _kernel[(len(masked_m),)](input, *input.stride(), output, *output.stride(), masked_m, group)
''')
    kernel = _fn("@triton.jit\ndef _kernel(x_ptr, sx0, sx1, sx2, o_ptr, so0, so1, so2, m_ptr, group):\n    pass\n")
    got = infer(fn, ["input", "output", "masked_m", "group"], {}, kernels=(kernel,))
    rows = got["input"]["shape"][1]
    assert got["masked_m"] == {"shape": [got["input"]["shape"][0]], "dtype": "int32", "init": f"randint:0:{rows} + 1"}
    assert rows != "tokens"


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


def gather_scaled(table: torch.Tensor, token_ids: torch.Tensor, factor: float, mode: str = "scaled") -> torch.Tensor:
    assert mode in ("scaled", "plain")
    num_tokens, width = table.shape
    assert token_ids.dim() == 1
    out = torch.empty((token_ids.shape[0], width), dtype=table.dtype, device=table.device)
    grid = (token_ids.shape[0],)
    _gather_scaled_kernel[grid](table, token_ids, out, width, factor if mode == "scaled" else 1.0,
                                BLOCK=triton.next_power_of_2(width))
    return out
'''

GATHER_REFERENCE = '''

def reference(table, token_ids, factor, mode):
    return (table[token_ids].float() * factor).to(table.dtype)
'''


FUNCTION = '''"""An activation whose kernel only an autograd.Function launches."""
import torch
import triton
import triton.language as tl


@triton.jit
def _scaled_silu_kernel(X, Out, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask).to(tl.float32)
    tl.store(Out + offs, (x * tl.sigmoid(x) * factor).to(Out.dtype.element_ty), mask=mask)


class ScaledSilu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor=2.0):
        out = torch.empty_like(x, requires_grad=True)
        n = x.numel()
        _scaled_silu_kernel[(triton.cdiv(n, 256),)](x, out, n, factor, BLOCK=256)
        out *= 1.0  # in place on a leaf that requires grad: legal because apply runs forward without grad
        ctx.save_for_backward(x)
        ctx.factor = factor
        return out

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError
'''

SILU_REFERENCE = '''

def reference(x, factor):
    return (torch.nn.functional.silu(x.float()) * factor).to(x.dtype)
'''


@pytest.fixture()
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    return git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/gather.py": LAUNCHER,
                                          "engine/act.py": FUNCTION, "engine/cfg.py": CFG, "engine/sums.py": SPLIT_SUM})


SPLIT_SUM = '''import torch
import triton
import triton.language as tl


@triton.jit
def _split_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


def split_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(1, dtype=torch.float32, device=x.device)
    _split_sum_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out
'''


CFG = '''import triton


@triton.jit
def _cfg_kernel(X, n):
    pass


def describe(layout):
    return layout.n


def launch_cfg(x, cfg):
    _cfg_kernel[(1,)](x, describe(cfg.layout))
'''


def test_an_object_whose_attributes_say_nothing_is_asked_for_whole(engine: Path, tmp_path: Path) -> None:
    [row] = api.extract(str(engine), "launch_cfg", out=tmp_path / "task", source=str(engine), check=False)
    assert not row.extracted and "cannot infer an input for parameter 'cfg' of launch_cfg" in row.why
    assert "(nothing shows what cfg.layout.n is)" in row.why, row.why  # the attribute that stopped it, through helpers and nested objects


def test_inferred_inputs_extract_run_and_match_a_reference(engine: Path, tmp_path: Path) -> None:
    [row] = api.extract(str(engine), "gather_scaled", out=tmp_path / "task", source=str(engine), check=True)
    assert row.extracted and row.checked, row.why
    harness = (tmp_path / "task" / "harness.py").read_text()
    assert "inferred from the launcher's code, unchecked by a person: table, token_ids, factor" in harness
    _with_reference(tmp_path / "task", GATHER_REFERENCE, {
        "name": "irregular-29x777", "regime": "prefill", "dtype": "fp32", "dims": {"tokens": 29, "hidden": 777}})
    _check_against_reference(tmp_path / "task")


def test_an_autograd_function_forward_extracts_and_goes_back(engine: Path, tmp_path: Path) -> None:
    from evaluator import load_task
    from smithbot.propose.reinsert import reinsert

    [row] = api.extract(str(engine), "_scaled_silu_kernel", out=tmp_path / "task", source=str(engine), check=True)
    assert row.extracted and row.checked, row.why
    task = load_task(tmp_path / "task")
    assert task.entry == "ScaledSilu_forward"
    assert "@torch.no_grad()\ndef ScaledSilu_forward(x, factor=2.0):" in (tmp_path / "task" / "kernel.py").read_text()
    assert [d.qualname for d in task.provenance.definitions] == ["_scaled_silu_kernel", "ScaledSilu.forward"]
    _with_reference(tmp_path / "task", SILU_REFERENCE, {
        "name": "irregular-7x333", "regime": "prefill", "dtype": "fp32", "dims": {"tokens": 7, "hidden": 333}})
    _check_against_reference(tmp_path / "task")
    # a tuned candidate goes back into the method, one line changed
    candidate = (tmp_path / "task" / "kernel.py").read_text().replace("BLOCK=256", "BLOCK=1024")
    reinsert(task, candidate, engine)
    diff = subprocess.run(["git", "-C", str(engine), "diff", "-U0"], capture_output=True, text=True).stdout
    assert [ln for ln in diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")] == [
        "-        _scaled_silu_kernel[(triton.cdiv(n, 256),)](x, out, n, factor, BLOCK=256)",
        "+        _scaled_silu_kernel[(triton.cdiv(n, 256),)](x, out, n, factor, BLOCK=1024)"]


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
    fn = _fn('''
def attn(q, k, v):
    assert q.dtype in (torch.float16, torch.bfloat16)
    assert q.dtype == k.dtype == v.dtype, "All tensors must have the same type"
''')
    got = infer(fn, ["q", "k", "v"], {})
    assert got["q"]["dtype"] == got["k"]["dtype"] == got["v"]["dtype"] == "fp16"  # one dtype, the one q must have
    fn = _fn('''
def rope(x, freqs_cis):
    freqs_real = torch.view_as_real(freqs_cis).flatten(-2)
    _k[(1,)](x, freqs_real)
''')
    assert infer(fn, ["x", "freqs_cis"], {})["freqs_cis"]["dtype"] == "complex64"  # complex rotations


def test_param_specs_lets_the_code_override_a_name_rule() -> None:
    from smithbot.config import get_target
    from smithbot.inputs.specs import param_specs

    fn = _fn("def moe_reduce(hidden_states, x, fp32_acc=False):\n    assert hidden_states.dim() == 3\n")
    plan, inferred = param_specs([("hidden_states", ...), ("x", ...), ("fp32_acc", False)], "moe_reduce",
                                     get_target("demo"), fn)
    specs = plan.literal()
    assert specs["hidden_states"] == {"shape": ["tokens", "heads", "hidden"]} and inferred == ["hidden_states"]
    assert specs["x"] == {"shape": ["tokens", "hidden"]}  # the name rule stands where the code says nothing
    kernel = _fn('''
@triton.jit
def _scale(L, temperature, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(L + offs, tl.load(L + offs) / temperature)
''')
    fn = _fn("def scale(logits, temperature):\n    _scale[(1,)](logits, temperature, BLOCK=64)\n")
    plan, _ = param_specs([("logits", ...), ("temperature", ...)], "scale", get_target("demo"), fn, (kernel,))
    specs = plan.literal()
    assert specs["temperature"] == 1.0  # a tensor of per-request temperatures by its name; the kernel divides by it


def test_defaults_become_specs_as_they_are() -> None:
    from smithbot.config import get_target
    from smithbot.extract.build import _params
    from smithbot.inputs.specs import param_specs

    fn = _fn("def quant(x, scale_dtype=torch.float32, activation='swish', eps=1e-6, group=(1, 2), N=None):\n    pass\n")
    plan, _ = param_specs(_params(fn), "quant", get_target("demo"), fn)
    specs = plan.literal()
    assert specs["scale_dtype"] == "dtype:fp32"  # not the cases' activation dtype
    assert specs["activation"] == {"literal": "swish"} and specs["group"] == {"literal": (1, 2)}
    assert specs["N"] is None


def test_a_parameter_the_launcher_never_reads_is_none() -> None:
    """A method's ``self`` that its body never uses (KernelBench's ``ModelNew.forward``) needs no input."""
    from smithbot.config import get_target
    from smithbot.extract.build import _params
    from smithbot.inputs.specs import param_specs
    from smithbot.inputs.sizes import InputError

    fn = _fn("def ModelNew_forward(self, x):\n    return x.contiguous()\n")
    plan, _ = param_specs(_params(fn), "ModelNew_forward", get_target("demo"), fn)
    specs = plan.literal()
    assert specs["self"] is None and specs["x"] == {"shape": ["tokens", "hidden"]}
    used = _fn("def ModelNew_forward(self, y):\n    return self.w(y)\n")
    with pytest.raises(InputError, match="'self'"):
        param_specs(_params(used), "ModelNew_forward", get_target("demo"), used)


def test_harness_sizes_may_be_expressions_with_min_and_max(tmp_path: Path) -> None:
    import torch

    from smithbot.inputs.harness import harness_source
    from smithbot.inputs.sizes import names_in

    specs = {"rows": {"shape": ["max(64, (tokens) // 64 * 64)", "min(hidden, 128)", "pow2(hidden)"]},
             "device": "device:"}
    assert names_in(read_spec(specs["rows"])) == {"tokens", "hidden"}  # max, min and pow2 are not dims
    (tmp_path / "harness.py").write_text(harness_source("launch", InputPlan.read(specs, {}), "inferred"))
    mod = load_module(tmp_path / "harness.py", "harness_under_test")
    gen = torch.Generator().manual_seed(0)
    for tokens, hidden, want in ((3, 1536, (64, 128, 1024)), (200, 96, (192, 96, 64)), (1, 1, (64, 1, 1))):
        args = mod.make_inputs({"dtype": torch.float32, "tokens": tokens, "hidden": hidden}, gen)
        assert tuple(args["rows"].shape) == want and args["device"] == gen.device


def test_a_size_the_kernel_hands_to_tl_arange_is_a_power_of_two() -> None:
    fn = _fn('''
def score(kv, ape, window: int):
    ratio = ape.shape[0]
    _kernel[(1,)](kv, ape, kv.shape[-1], window, RATIO=ratio)
''')
    kernel = _fn('''
@triton.jit
def _kernel(kv_ptr, ape_ptr, D: tl.constexpr, W: tl.constexpr, RATIO: tl.constexpr):
    r = tl.arange(0, RATIO)
    d = tl.arange(0, D)
    w = tl.arange(0, W)
''')
    got = infer(fn, ["kv", "ape", "window"], {}, kernels=(kernel,))
    assert got["ape"]["shape"] == got["kv"]["shape"] == ["pow2(tokens)"]
    assert got["window"] == 64
    # a name rule's shape too: hidden_states is [tokens, hidden] by its name, and its last axis feeds tl.arange
    fn = _fn('''
def norm(hidden_states, ape):
    feat = hidden_states.shape[-1]
    _kernel[(1,)](hidden_states, ape, feat, 4, RATIO=2)
''')
    got = infer(fn, ["ape"], {"hidden_states": {"shape": ["tokens", "hidden"]}}, by_rule=("hidden_states",),
                kernels=(kernel,))
    assert got["hidden_states"] == {"shape": ["tokens", "pow2(hidden)"]}
    fn = _fn('''
def rotate(q, ape):
    assert q.dim() == 4
    half = q.size(-1) // 2
    _kernel[(1,)](q, ape, half, 4, RATIO=2)
''')
    got = infer(fn, ["q", "ape"], {}, kernels=(kernel,))
    assert got["q"]["shape"][-1] == "pow2(hidden)"  # half of it goes to tl.arange: a power of two, halved, is one

def test_an_index_tables_values_stay_below_the_rows_they_address() -> None:
    fn = _fn('''
def unpermute(down, src2dst, topk_ids, out):
    assert down.shape[0] == 96
    _kernel[(3,)](down, out, src2dst, topk_ids, down.size(1))
''')
    kernel = _fn('''
@triton.jit
def _kernel(down_ptr, out_ptr, src2dst_ptr, topk_ids_ptr, n):
    src2dst_ptr = src2dst_ptr + tl.program_id(0)
    d = tl.load(src2dst_ptr).to(tl.int64)
    e = tl.load(topk_ids_ptr + tl.program_id(0))
    x = tl.load(down_ptr + d * n + tl.arange(0, 16))
    tl.store(out_ptr + tl.program_id(0) * n + tl.arange(0, 16), x + e)
''')
    assert index_targets(kernel) == {"src2dst_ptr": {"down_ptr": False}}  # topk_ids' values go into no address
    rule = {"topk_ids": {"shape": ["tokens", "top_k"], "dtype": "int32", "init": "randint:0:experts"}}
    got = infer(fn, ["down", "src2dst", "out"], rule, by_rule=("topk_ids",), kernels=(kernel,))
    assert got["down"]["shape"][0] == 96 and got["src2dst"]["init"] == "randint:0:96"
    assert "topk_ids" not in got  # the rule stands
    rule["src2dst"] = {"shape": ["tokens"], "dtype": "int32", "init": "randint:0:4096"}  # a name rule's range, capped
    got = infer(fn, ["down", "out"], rule, by_rule=("topk_ids", "src2dst"), kernels=(kernel,))
    assert got["src2dst"]["init"] == "randint:0:min(4096, 96)"


def test_a_table_that_scatters_stores_holds_distinct_rows() -> None:
    fn = _fn('''
def store(pool, key, slots):
    _kernel[(key.shape[0],)](key, pool, slots)
''')
    kernel = _fn('''
@triton.jit
def _kernel(k_ptr, pool_ptr, slot_ptr):
    slot = tl.load(slot_ptr + tl.program_id(0))
    tl.store(pool_ptr + slot * 16 + tl.arange(0, 16), tl.load(k_ptr + tl.program_id(0) * 16 + tl.arange(0, 16)))
''')
    assert index_targets(kernel) == {"slot_ptr": {"pool_ptr": True}}
    got = infer(fn, ["pool", "key", "slots"], {}, kernels=(kernel,))
    assert got["slots"] == {"shape": ["tokens"], "dtype": "int64", "init": "perm:tokens"}


def test_an_object_read_only_for_its_attributes_becomes_one_input_per_attribute() -> None:
    from smithbot.inputs.specs import attributes_read, flat_entry, flatten_objects

    fn = _fn('''
def seg_fwd(q, meta, plan, cfg, scale):
    bs = meta.batch_size
    assert plan.seq_lens.shape[0] == bs and plan.q.shape == q.shape
    cfg.update(scale)
    return plan.run(q)
''')
    assert attributes_read(fn, "meta") == ["batch_size"]
    assert attributes_read(fn, "plan") is None  # plan.run(q) is a call: nothing to stand in for
    assert attributes_read(fn, "cfg") is None and attributes_read(fn, "q") is None
    fn = _fn('''
def seg_fwd(q, meta, plan):
    bs = meta.batch_size
    assert plan.seq_lens.shape[0] == bs and plan.q.shape == q.shape
''')
    flat, objects = flatten_objects(fn, ["meta", "plan"])
    assert objects == {"meta": {"batch_size": "batch_size"}, "plan": {"q": "plan_q", "seq_lens": "seq_lens"}}
    assert [a.arg for a in flat.args.args] == ["q", "batch_size", "plan_q", "seq_lens"]
    assert "plan_q.shape == q.shape" in ast.unparse(flat)
    got = infer(flat, ["batch_size", "plan_q", "seq_lens"], {"q": {"shape": ["tokens", "heads", "head_dim"]}})
    assert got["plan_q"] == {"shape": ["tokens", "heads", "head_dim"]} and got["batch_size"] == "tokens"
    ns: dict = {}
    exec(flat_entry("seg_fwd", ["q", "meta", "plan"], objects) + "\ndef seg_fwd(q, meta, plan):\n"
         "    return q, meta.batch_size, plan.q, plan.seq_lens\n", ns)
    assert ns["seg_fwd_flat"](q=1, batch_size=2, plan_q=3, seq_lens=4) == (1, 2, 3, 4)
    fn = _fn('''
def seg_fwd(q, meta):
    num_segments = meta.num_segments
    _kernel[(num_segments,)](q, meta.seg_lens)
''')
    flat, objects = flatten_objects(fn, ["meta"])  # the local copy of an attribute lends the parameter its name
    assert objects == {"meta": {"num_segments": "num_segments", "seg_lens": "seg_lens"}}
    assert ast.unparse(flat.body[0]) == "num_segments = num_segments"
    fn = _fn('''
def apply_plan(x, plan):
    rows = plan.rows
    _kernel[(rows.shape[0],)](x, rows)
''')
    kernel = _fn('''
@triton.jit
def _kernel(X, Rows):
    src = tl.load(Rows + tl.program_id(0))
    tl.store(X + src, 1.0)
''')
    flat, objects = flatten_objects(fn, ["plan"])
    assert objects == {"plan": {"rows": "rows"}}  # `rows = plan.rows` becomes `rows = rows`
    got = infer(flat, ["rows"], {"x": {"shape": ["tokens", "hidden"]}}, kernels=(kernel,))
    assert got["rows"] == {"shape": ["tokens"], "dtype": "int64", "init": "perm:tokens"}


def test_an_object_handed_to_helpers_that_only_read_it_is_flattened_with_their_evidence() -> None:
    from smithbot.inputs.specs import attributes_read, flatten_objects

    helpers = {f.name: f for f in map(_fn, (
        "def _num_segments(info):\n    return info.num_segments or info.bs\n",
        "def _max_len(info):\n    if info.max_len is not None:\n        return info.max_len\n"
        "    return int(info.seg_lens.max().item())\n",
        "def _keep(info):\n    return info\n"))}
    fn = _fn('''
def lora_fwd(x, batch_info):
    num_segments = _num_segments(batch_info)
    _kernel[(num_segments, _max_len(batch_info))](x, batch_info.seg_indptr)
''')
    assert attributes_read(fn, "batch_info") is None  # handed on, and no helper is known
    assert attributes_read(fn, "batch_info", helpers) == ["bs", "max_len", "num_segments", "seg_indptr", "seg_lens"]
    flat, objects = flatten_objects(fn, ["batch_info"], helpers)
    assert objects["batch_info"]["num_segments"] == "batch_info_num_segments"  # the local takes the plain name
    got = infer(flat, [a.arg for a in flat.args.args if a.arg != "x"], {"x": {"shape": ["tokens", "hidden"]}})
    assert got["batch_info_num_segments"] == 4  # named by the end of its name, as num_segments would be
    assert got["seg_lens"]["dtype"] == "int64"  # a tensor: the helper calls .max() on it
    keeper = _fn("def lora_fwd(x, batch_info):\n    return _keep(batch_info).bs\n")
    assert attributes_read(keeper, "batch_info", helpers) is None  # _keep hands the object itself back


def test_pointer_chasing_ends() -> None:
    kernel = _fn('''
@triton.jit
def _chase(Next, Out, n):
    p = tl.load(Next + tl.program_id(0))
    for _ in range(n):
        p = tl.load(Next + p)
    tl.store(Out + p, 1)
''')
    assert index_targets(kernel) == {"Next": {"Out": True}}


def test_sizes_the_code_equates_with_arithmetic() -> None:
    fn = _fn('''
def dequant(qweight, scales, zeros, group_size: int, out, seq_len: int, x):
    rows, cols = qweight.shape
    assert scales.shape[0] == rows // group_size and scales.shape[1] == cols
    half = cols // 2
    assert tuple(zeros.shape) == (rows // group_size, half)
    assert out.size(-1) == 2 * cols + 1
    assert seq_len == x.numel() // x.size(-1)
    assert x.dim() == 2
''')
    assert infer(fn, ["qweight", "scales", "zeros", "group_size", "out", "seq_len", "x"], {}) == {
        "qweight": {"shape": ["tokens", "hidden"]}, "scales": {"shape": ["(tokens) // (64)", "hidden"]},
        "zeros": {"shape": ["(tokens) // (64)", "(hidden) // (2)"]}, "group_size": 64,
        "out": {"shape": ["((2) * (hidden)) + (1)"]}, "seq_len": "((tokens) * (hidden)) // (hidden)",
        "x": {"shape": ["tokens", "hidden"]}}


def test_a_size_that_equals_itself_through_arithmetic_is_not_a_loop() -> None:
    fn = _fn('''
def k(a, b):
    rows = a.shape[0]
    assert b.shape[0] == rows * 2
    assert a.shape[0] == b.shape[0] // 2
''')
    out = infer(fn, ["a", "b"], {})
    assert out["b"] == {"shape": ["(tokens) * (2)"]}  # from a, which it cannot then be derived from in turn
    assert out["a"] == {"shape": ["(tokens) // (2)"]}


def test_a_settings_dict_splatted_into_a_launch_holds_the_kernels_tile_sizes() -> None:
    kernel = _fn('''
@triton.jit
def _gemm(A, C, M, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
          EVEN_K: tl.constexpr = True):
    pass
''')
    fn = _fn('''
def launch(a, c, config):
    if a.shape[0] < config["BLOCK_SIZE_M"]:
        pass
    _gemm[(1,)](a, c, a.shape[0], **config)
''')
    got = infer(fn, ["a", "c", "config"], {}, kernels=(kernel,))
    assert got["config"] == {"literal": {"BLOCK_SIZE_K": 64, "BLOCK_SIZE_M": 64, "GROUP_SIZE_M": 1}}
    fn = _fn('''
def launch(a, c, config):
    config = config.copy()
    block_k = config.pop("BLOCK_SIZE_K")
    _gemm[(1,)](a, c, a.shape[0], BLOCK_SIZE_K=block_k, **config)
''')
    got = infer(fn, ["a", "c", "config"], {}, kernels=(kernel,))  # popped before the splat: still one of them
    assert got["config"] == {"literal": {"BLOCK_SIZE_K": 64, "BLOCK_SIZE_M": 64, "GROUP_SIZE_M": 1}}


def test_sequence_starts_and_lengths_make_one_layout(tmp_path: Path) -> None:
    """Inferred apart, ``q_start_loc`` is an arange and ``q_seqlens`` random lengths, and sequences overrun the rows
    (an out-of-bounds read). Paired, each sequence starts where the one before ends, within the rows."""
    import torch

    from smithbot.inputs.harness import harness_source
    from smithbot.inputs.specs import _one_layout

    specs = {"q": {"shape": ["tokens", "heads", "head_dim"]},
             "q_start_loc": {"shape": ["tokens"], "dtype": "int64", "init": "arange"},
             "q_seqlens": {"shape": ["tokens"], "dtype": "int64", "init": "randint:1:8"},
             "cu_seqlens_k": {"shape": ["tokens + 1"], "dtype": "int32", "init": "arange"},
             "k_lens": {"shape": ["tokens"], "dtype": "int32", "init": "randint:1:8"},
             "expert_offsets": {"shape": ["tokens"], "dtype": "int64", "init": "arange"}, "bs": "tokens"}
    _one_layout(specs, set(specs) - {"q"})
    assert specs["q_start_loc"]["init"] == "starts:q_seqlens" and specs["cu_seqlens_k"]["init"] == "starts:k_lens"
    assert specs["bs"] == "max(1, (tokens) // 8)"  # the batch size counts the sequences
    assert specs["expert_offsets"]["init"] == "arange"  # no sequence start by its name: left alone
    (tmp_path / "harness.py").write_text(harness_source("launch", InputPlan.read(specs, {}), "inferred"))
    mod = load_module(tmp_path / "harness.py", "harness_layout")
    for seed, tokens in ((0, 3), (1, 64), (2, 517)):
        args = mod.make_inputs({"dtype": torch.float32, "tokens": tokens, "heads": 2, "head_dim": 8},
                               torch.Generator().manual_seed(seed))
        starts, lens = args["q_start_loc"], args["q_seqlens"]
        assert len(starts) == len(lens) == max(1, tokens // 8) and int(lens.min()) >= 1
        assert starts[0] == 0 and torch.equal(starts[1:], torch.cumsum(lens, 0)[:-1])
        assert int(starts[-1] + lens[-1]) <= tokens  # every sequence within q's rows
        cu, k_lens = args["cu_seqlens_k"], args["k_lens"]
        assert len(cu) == len(k_lens) + 1 and cu[0] == 0 and int(cu[-1]) == int(k_lens.sum()) <= tokens
        assert args["bs"] == len(lens)


def test_per_expert_tables_and_scales_take_their_rows_from_what_they_describe() -> None:
    fn = _fn('''
def moe(A, B, B_scale, A_scale, exp_start, expert_offsets, sorted_idx):
    assert B.dim() == 3 and A.dim() == 2 and A_scale.is_contiguous()
    n = B_scale.stride(0)
    _kernel[(1,)](A, B, B_scale, A_scale, exp_start, expert_offsets, sorted_idx)
''')
    got = infer(fn, ["A", "B", "B_scale", "A_scale", "exp_start", "expert_offsets", "sorted_idx"], {})
    assert got["B_scale"] == {"shape": got["B"]["shape"][:2]} and got["A_scale"] == {"shape": ["tokens"]}
    assert got["exp_start"]["shape"] == got["expert_offsets"]["shape"] == ["experts"]
    assert got["sorted_idx"]["shape"] == ["tokens"]


def test_a_name_used_as_a_size_is_a_number_whatever_its_name_says() -> None:
    fn = _fn('''
def gating(gates, k):
    s, e = gates.shape
    out = torch.empty((k, s, e), dtype=gates.dtype)
''')
    known = {"k": {"shape": ["tokens", "kv_heads", "head_dim"]}}  # the name rule for an attention key
    got = infer(fn, ["gates"], known, by_rule=("k",))
    assert got["k"] == "tokens" and got["gates"] == {"shape": ["tokens", "experts"]}


def test_a_default_that_is_no_literal_is_left_to_the_launcher(tmp_path: Path) -> None:
    import torch

    from smithbot.extract.build import _params
    from smithbot.inputs.harness import harness_source

    fn = _fn("def attn(q, quant_policy: QuantPolicy = QuantPolicy.NONE, layout='bshd', scale=None,\n"
             "         dt_limit=(0.0, float('inf'))):\n    pass\n")
    assert _params(fn) == [("q", ...), ("quant_policy", "default:"), ("layout", "bshd"), ("scale", None),
                           ("dt_limit", "default:")]
    specs = {"q": {"shape": ["tokens"]}, "quant_policy": "default:", "scale": None}
    (tmp_path / "harness.py").write_text(harness_source("attn", InputPlan.read(specs, {}), "inferred"))
    mod = load_module(tmp_path / "harness.py", "harness_default")
    args = mod.make_inputs({"dtype": torch.float32, "tokens": 5}, torch.Generator().manual_seed(0))
    assert set(args) == {"q", "scale"}  # quant_policy is not passed: attn(**args) takes its own default


def test_strides_unpacked_give_a_rank_and_a_power_of_two_insisted_on() -> None:
    fn = _fn('''
def gate(masks, d, x):
    stride_k, stride_s, _ = masks.stride()
    assert d == triton.next_power_of_2(d)
    assert x.shape[-1] == d
''')
    got = infer(fn, ["masks", "d", "x"], {})
    assert len(got["masks"]["shape"]) == 3 and got["d"] == "pow2(head_dim)" == got["x"]["shape"][-1]  # d: head_dim


def test_a_tma_descriptor_block_gives_its_tensor_rank() -> None:
    """``TensorDescriptor.from_tensor(s, block_shape=[1, r, k, 2, 256])``: s has five axes, whatever its name says;
    the block may be a name bound to lists of one length, or the fourth argument of ``TensorDescriptor(...)``."""
    fn = _fn('''
def matmul(a, a_scale, b_scale, c, block_m: int = 128):
    M, K = a.shape
    a_desc = TensorDescriptor.from_tensor(a, [block_m, 64])
    blocks = [1, block_m // 128, 1, 2, 256]
    a_scale_desc = TensorDescriptor.from_tensor(a_scale, block_shape=blocks)
    blocks = [1, 2, 1, 2, 256]
    b_scale_desc = TensorDescriptor.from_tensor(b_scale, block_shape=blocks)
    c_desc = TensorDescriptor(c, c.shape, c.stride(), [block_m, 64, 8])
''')
    got = infer(fn, ["a", "a_scale", "b_scale", "c"], {})
    assert [len(got[p]["shape"]) for p in ("a", "a_scale", "b_scale", "c")] == [2, 5, 5, 3]


BRANCHES = '''import torch
import triton
import triton.language as tl


@triton.jit
def _silu_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n).to(tl.float32)
    tl.store(Out + offs, (x * tl.sigmoid(x)).to(Out.dtype.element_ty), mask=offs < n)


@triton.jit
def _gelu_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n).to(tl.float32)
    tl.store(Out + offs, (0.5 * x * (1 + tl.erf(x * 0.7071))).to(Out.dtype.element_ty), mask=offs < n)


@triton.jit
def _relu_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(Out + offs, tl.maximum(x, 0.0), mask=offs < n)


def act(x: torch.Tensor, use_gelu: bool = False) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    if x.dim() > 5:
        _relu_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
    elif use_gelu:
        _gelu_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
    else:
        _silu_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
    return out
'''


def test_a_kernel_its_launchers_task_never_launches_gets_a_task_down_its_branch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernels share act()'s task, but its inputs (use_gelu=False) only launch _silu_kernel. _gelu_kernel's
    branch is taken with use_gelu=True, in a task of its own, which passes. _relu_kernel's test (x.dim() > 5) names
    no flag: it stays extracted, not checked, and says so."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/act.py": BRANCHES})
    journal: list = []
    rows = {r.kernel: r for r in api.extract(str(repo), None, out=tmp_path / "tasks", source=str(repo),
                                             all_kernels=True, check=True, finished_row=journal.append)}
    assert rows["_silu_kernel"].checked, rows["_silu_kernel"].why
    # each self-check's row is handed on as it ends: the launcher's task first, then the branch's
    assert [(r.kernel, r.checked) for r in journal] == [("_silu_kernel", True), ("_gelu_kernel", True)]
    gelu = rows["_gelu_kernel"]
    assert gelu.checked and gelu.out == tmp_path / "tasks" / "gelu_kernel" != rows["_silu_kernel"].out, gelu.why
    assert gelu.why.endswith("(with use_gelu=True)") and "use_gelu': True" in (gelu.out / "harness.py").read_text()
    relu = rows["_relu_kernel"]
    assert relu.extracted and not relu.checked and relu.out == rows["_silu_kernel"].out
    assert relu.why == "its task's inputs never launch it (they launch _silu_kernel)"
    assert sorted(p.name for p in (tmp_path / "tasks").iterdir()) == ["gelu_kernel", "silu_kernel"]


SETTING = '''import torch
import triton
import triton.language as tl

# off by default; the model that wants it turns it on at load time
_USE_WIDE: bool = False


def set_wide(on: bool = True) -> None:
    global _USE_WIDE
    _USE_WIDE = on


@triton.jit
def _narrow_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def _wide_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(X + offs, mask=offs < n) + tl.load(X + offs, mask=offs < n), mask=offs < n)


def double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    if _USE_WIDE:
        _wide_kernel[(triton.cdiv(n, 512),)](x, out, n, BLOCK=512)
    else:
        _narrow_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)
    return out
'''


def test_an_ordering_test_names_no_value_for_a_flag() -> None:
    """``if block > 64:`` says what block is not, not what it is: it sets nothing (it once set block=64, which takes
    the other branch), while ``mode == "fast"`` on the same path still does."""
    from smithbot.extract.build import _branch_values

    fn = _fn('''
def launch(x, block, mode):
    if block > 64 and mode == "fast":
        _k[(1,)](x)
''')
    assert _branch_values(fn, "_k", lambda node: (..., ()), set()) == {"mode": "fast"}


def test_a_kernel_behind_a_module_setting_gets_a_task_with_the_setting_flipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_USE_WIDE`` is a module-level constant that a setter flips at run time: the launcher's task, as the module
    is at import, launches _narrow_kernel alone (the scan decides the test for that launch); _wide_kernel's task has
    the setting set to take its branch."""
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/double.py": SETTING})
    rows = {r.kernel: r for r in api.extract(str(repo), None, out=tmp_path / "tasks", source=str(repo),
                                             all_kernels=True, check=True)}
    narrow, wide = rows["_narrow_kernel"], rows["_wide_kernel"]
    assert narrow.checked and "_wide_kernel[" not in (narrow.out / "kernel.py").read_text(), narrow.why
    assert wide.checked and wide.out != narrow.out and wide.why.endswith("(with _USE_WIDE=True)"), wide.why
    # the setting decides the branch at extraction: the task keeps the wide launch alone
    assert "_narrow_kernel[" not in (wide.out / "kernel.py").read_text()


def test_a_tensor_whose_values_reach_exp_uncast_holds_fp32() -> None:
    """``tl.exp`` and its kind accept only fp32 and fp64: a log-sum-exp loaded and handed to them as it is must be
    fp32, while one cast first (``.to(tl.float32)``) may stay in the cases' dtype."""
    fn = _fn('''
def merge(out_a, lse_a, lse_b, scores):
    _merge[(out_a.shape[0],)](out_a, lse_a, lse_b, scores)
''')
    kernel = _fn('''
@triton.jit
def _merge(Out, LseA, LseB, Scores):
    a = tl.load(LseA + tl.program_id(0))
    b = tl.load(LseB + tl.program_id(0))
    a = float("-inf") if a == float("inf") else a
    m = tl.maximum(a, b)
    w = tl.exp(a - m) + tl.exp(b - m)
    s = tl.load(Scores + tl.program_id(0)).to(tl.float32)
    tl.store(Out + tl.program_id(0), w * tl.sqrt(s))
''')
    got = infer(fn, ["out_a", "lse_a", "lse_b", "scores"], {}, kernels=(kernel,))
    assert got["lse_a"]["dtype"] == got["lse_b"]["dtype"] == "fp32"
    assert "dtype" not in got["scores"] and "dtype" not in got["out_a"]
    from smithbot.inputs.kernel_use import fp32_params

    quant = _fn('''
@triton.jit
def _quant(X, Scale, Count):
    x = tl.load(X + tl.arange(0, 16))
    amax = tl.max(tl.abs(x))
    tl.atomic_max(Scale, amax)
    tl.atomic_max(Count, tl.program_id(0))
''')
    assert fp32_params(quant) == {"Scale"}  # float atomics take fp32; an int one keeps its type


POLICY = '''import enum


class Policy(enum.IntEnum):
    NONE = 0
    FP8 = 16
    INT4 = 4
    INT8 = 8
'''

QUANT = '''import triton
import triton.language as tl

from engine.policy import Policy


@triton.jit
def _plain_kernel(X):
    pass


@triton.jit
def _fp8_kernel(X):
    pass


@triton.jit
def _int8_kernel(X):
    pass


def store(x, policy: Policy = Policy.NONE, scale=None, layout="bshd"):
    if layout != "bshd" and scale is not None:
        raise ValueError(layout)
    if policy in (Policy.FP8, Policy.INT4):
        if not (scale is None):
            _fp8_kernel[(1,)](x)
    elif policy == Policy.NONE:
        _plain_kernel[(1,)](x)
    else:
        _int8_kernel[(1,)](x)
'''


def test_branch_values_read_flags_literals_and_the_targets_int_enums(tmp_path: Path) -> None:
    """The values that take store() to each launch: for fp8, policy is Policy.FP8's value (an IntEnum equals its
    int), and ``scale`` must not be None there, which no literal gives; for the else side, a member neither test took.
    The raise's test, which no launch is under, says nothing."""
    from smithbot.extract.build import branch_values

    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/policy.py": POLICY,
                                          "engine/quant.py": QUANT})
    result = api.scan(str(repo), source=str(repo))
    site = next(s for s in result.sites if s.name == "_fp8_kernel")
    assert branch_values(result.checkout.root, site, result.modules) == ("store", {"policy": 16}, {})
    values = {s.name: branch_values(result.checkout.root, s, result.modules)[1] for s in result.sites}
    assert values["_plain_kernel"] == {"policy": 0} and values["_int8_kernel"] == {"policy": 8}


def test_a_parameter_the_launcher_only_tests_against_none_may_be_none() -> None:
    """``permutation`` says nothing of its shape, but the launcher asks whether it is None: None is an input it
    takes. ``plan``, which nothing describes, stays unknown."""
    fn = _fn('''
def launch(x, permutation, plan):
    sorted_by_adapter = permutation is not None
    _k[(1,)](x, permutation, sorted_by_adapter, plan.rows)
''')
    got = infer(fn, ["x", "permutation", "plan"], {})
    assert "permutation" in got and got["permutation"] is None and "plan" not in got


NESTED = '''import torch
import triton
import triton.language as tl


@triton.jit
def _double_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)


def double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)

    def run_kernel(block):
        _double_kernel[(1,)](x, out, x.numel(), BLOCK=block)

    run_kernel(triton.next_power_of_2(x.numel()))
    return out
'''


def test_a_kernel_launched_from_a_nested_function_extracts_with_its_launcher(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/nested.py": NESTED})
    [row] = api.extract(str(repo), "_double_kernel", out=tmp_path / "task", source=str(repo), check=True)
    assert row.checked, row.why
    assert "def double(x" in (tmp_path / "task" / "kernel.py").read_text()


def test_a_view_keeps_the_rows_an_index_table_addresses_and_equal_axes_share_the_first_name() -> None:
    """``positions`` (by name, values below 4096) addresses the rows of ``torch.view_as_real(freqs).flatten(-2)``,
    which are ``freqs``' rows; ``assert heads == kv_heads`` gives k (kv_heads by name) q's heads."""
    fn = _fn('''
def rope(q, k, freqs, positions):
    n, heads, d = q.shape
    _, kv_heads, _ = k.shape
    assert heads == kv_heads
    f = torch.view_as_real(freqs).flatten(-2)
    _kernel[(n,)](q, f, positions, f.stride(0))
''')
    kernel = _fn('''
@triton.jit
def _kernel(q_ptr, f_ptr, pos_ptr, stride_f):
    p = tl.load(pos_ptr + tl.program_id(0))
    x = tl.load(f_ptr + p * stride_f + tl.arange(0, 16))
    tl.store(q_ptr + tl.arange(0, 16), x)
''')
    rule = {"q": {"shape": ["tokens", "heads", "head_dim"]}, "k": {"shape": ["tokens", "kv_heads", "head_dim"]},
            "positions": {"shape": ["tokens"], "dtype": "int64", "init": "randint:0:4096"}}
    got = infer(fn, ["freqs"], rule, by_rule=("q", "k", "positions"), kernels=(kernel,))
    assert got["freqs"]["shape"][0] == "4096"
    assert got["k"] == {"shape": ["tokens", "heads", "head_dim"]} and "q" not in got


def test_asserted_flags_hold_and_a_none_default_the_kernel_reads_through_a_helper_is_a_tensor() -> None:
    """``assert column_major`` sets the flag. ``seg_indptr=None`` is handed to a kernel whose @triton.jit helper
    loads through it, and nothing asks whether it is None: it gets a tensor. ``bias=None``, which the kernel's
    heuristic tests against None, keeps its default."""
    fn = _fn('''
def grouped(a, column_major: bool, seg_indptr=None, bias=None):
    assert column_major
    _kernel[(1,)](a, seg_indptr, bias)
''')
    helper = _fn('''
@triton.jit
def _range(pid, seg_indptr):
    return tl.load(seg_indptr + pid)
''')
    kernel = _fn('''
@triton.heuristics({"HAS_BIAS": lambda args: args["bias_ptr"] is not None})
@triton.jit
def _kernel(a_ptr, seg_ptr, bias_ptr, HAS_BIAS: tl.constexpr):
    start = _range(tl.program_id(0), seg_ptr)
    x = tl.load(a_ptr + start + tl.arange(0, 16))
    if HAS_BIAS:
        x += tl.load(bias_ptr + tl.arange(0, 16))
    tl.store(a_ptr + start + tl.arange(0, 16), x)
''')
    known = {"a": {"shape": ["tokens", "hidden"]}, "seg_indptr": None, "bias": None}
    got = infer(fn, ["column_major"], known, kernels=(kernel, helper))
    assert got["column_major"] is True
    assert got["seg_indptr"]["dtype"] == "int64" and "bias" not in got
    assert "seg_indptr" not in infer(fn, ["column_major"], known, kernels=(kernel,))  # the helper is the evidence


def test_rows_by_numel_equal_axes_by_the_widest_and_a_halved_arange_bound() -> None:
    """``cos.numel() // cos.size(-1)`` counts cos's rows, so cos has more than one axis; ``x.size(-1) ==
    sin.size(-1)`` makes 1-D sin as long as x's last axis (not ``tokens``, its own first position); and ``half:
    tl.constexpr = DIM // 2`` as a ``tl.arange`` bound makes DIM (x's last axis) a power of two."""
    fn = _fn('''
def rope(x, cos, sin):
    assert x.size(-1) == sin.size(-1) and x.size(-1) == cos.size(-1)
    seq_len = cos.numel() // cos.size(-1)
    _kernel[(1,)](x, cos, sin, seq_len, DIM=x.size(-1), NUM_HEADS=x.size(-2))
''')
    kernel = _fn('''
@triton.jit
def _kernel(X, COS, SIN, seq_len, DIM: tl.constexpr, NUM_HEADS: tl.constexpr):
    half: tl.constexpr = DIM // 2
    offs = tl.arange(0, half)
    tl.store(X + offs, tl.load(COS + offs) * tl.load(SIN + offs))
''')
    got = infer(fn, ["x", "cos", "sin"], {}, kernels=(kernel,))
    assert got["x"]["shape"][-1] == got["cos"]["shape"][-1] == got["sin"]["shape"][0] == "pow2(hidden)"
    assert len(got["cos"]["shape"]) == 2 and len(got["sin"]["shape"]) == 1


def test_a_spec_may_describe_an_object_a_list_and_even_ranges(tmp_path: Path) -> None:
    """``{object: ...}`` is an object with those attributes (a module's ``self``), ``{items: [...]}`` a list, and
    ``even:N`` / ``even_end:N`` share N sorted rows out among the entries, in order and without a gap, and
    ``split:N`` gives each entry's share, ``cuts:N`` the offsets table of such shares; an object's ``starts:`` lays out its sibling attribute's lengths."""
    import torch

    from smithbot.inputs.harness import harness_source
    from smithbot.inputs.sizes import names_in

    specs = {"self": {"object": {"w": {"shape": ["experts", "hidden"]}, "conv": {"object": {"k": {"literal": [4]}}},
                                 "norms": {"items": [{"object": {"eps": 1e-5}}]}}},
             "batch": {"object": {"indptr": {"shape": ["experts + 1"], "dtype": "int32", "init": "starts:lens"},
                                  "lens": {"shape": ["experts"], "dtype": "int32", "init": "split:tokens * 2"}}},
             "start": {"shape": ["experts"], "dtype": "int64", "init": "even:tokens * 2"},
             "end": {"shape": ["experts"], "dtype": "int64", "init": "even_end:tokens * 2"},
             "offsets": {"shape": ["experts + 1"], "dtype": "int64", "init": "cuts:tokens * 2"}}
    assert names_in(read_spec(specs["self"])) == {"experts", "hidden"}
    (tmp_path / "harness.py").write_text(harness_source("mod_forward", InputPlan.read(specs, {}), "given"))
    mod = load_module(tmp_path / "harness.py", "harness_object")
    args = mod.make_inputs({"dtype": torch.float32, "tokens": 5, "experts": 4, "hidden": 3},
                           torch.Generator().manual_seed(0))
    obj = args["self"]
    assert obj.w.shape == (4, 3) and obj.conv.k == [4] and obj.norms[0].eps == 1e-5
    assert args["start"].tolist() == [0, 2, 5, 7] and args["end"].tolist() == [2, 5, 7, 10]
    assert args["offsets"].tolist() == [0, 2, 5, 7, 10]
    assert args["batch"].lens.tolist() == [2, 3, 2, 3] and args["batch"].indptr.tolist() == [0, 2, 5, 7, 10]


def test_a_guard_on_the_dtype_makes_an_integer_tensor() -> None:
    fn = _fn('''
def fill(x, count, gate, scale):
    if count.dtype.is_floating_point:
        raise TypeError("count must be an integer tensor")
    assert gate.dtype in (torch.float16, torch.float32)
    assert scale.numel() == 1, "only per-tensor scales"
    _kernel[(1,)](x, count, gate, scale)
''')
    got = infer(fn, ["count", "gate", "scale"], {"x": {"shape": ["tokens", "hidden"]}})
    assert got["count"]["dtype"] == "int32" and got["gate"]["dtype"] == "fp16"
    assert got["scale"] == {"shape": [1]}  # one element, as insisted


def test_a_first_and_a_last_axis_never_equated_are_two_axes() -> None:
    fn = _fn('''
def route(scores, num_experts: int = 192):
    assert scores.shape[-1] == num_experts
    batch = scores.shape[0]
    _kernel[(batch,)](scores, num_experts)
''')
    assert infer(fn, ["scores"], {"num_experts": 192})["scores"]["shape"] == ["tokens", 192]


def test_the_interpreter_case_may_carry_smaller_extra_dims(tmp_path: Path) -> None:
    """``_interpreter_dims`` gives the interpreter's one case its own values of extra dims (a 32-token chunk for a
    256-token one, whose scan takes minutes there); the GPU's cases keep the ``_dims`` expressions."""
    import torch

    from smithbot.config import get_target
    from smithbot.inputs.harness import harness_source
    from smithbot.inputs.cases import cases

    specs = {"x": {"shape": ["tokens", "C"]}}
    target = get_target("demo").with_inputs("scan", {"_dims": {"C": 256}, "_interpreter_dims": {"C": 32}})
    got, _ = cases(InputPlan.read(specs, {"C": 256}), target, "scan")
    small = [c for c in got if c["interpreter"]]
    assert len(small) == 1 and small[0]["dims"]["C"] == 32
    assert all("C" not in c["dims"] for c in got if not c["interpreter"])
    (tmp_path / "harness.py").write_text(harness_source("scan", InputPlan.read(specs, {"C": 256}), "given"))
    mod = load_module(tmp_path / "harness.py", "harness_small")
    gen = torch.Generator().manual_seed(0)
    assert mod.make_inputs({"dtype": torch.float32, **small[0]["dims"]}, gen)["x"].shape == (3, 32)
    assert mod.make_inputs({"dtype": torch.float32, "tokens": 5}, gen)["x"].shape == (5, 256)


def test_mx_byte_dtypes_are_drawn_as_bytes(tmp_path: Path) -> None:
    import torch

    from smithbot.inputs.harness import harness_source

    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("this torch has no fp4 dtype")
    specs = {"a": {"shape": ["tokens", 8], "dtype": "fp4x2"},
             "s": {"shape": ["tokens", 2], "dtype": "e8m0", "init": "randint:120:135"}}
    (tmp_path / "harness.py").write_text(harness_source("up", InputPlan.read(specs, {}), "inferred"))
    mod = load_module(tmp_path / "harness.py", "harness_mx")
    args = mod.make_inputs({"dtype": torch.float32, "tokens": 64}, torch.Generator().manual_seed(0))
    assert args["a"].dtype == torch.float4_e2m1fn_x2 and args["a"].shape == (64, 8)
    assert args["s"].dtype == torch.float8_e8m0fnu
    scale_bytes = args["s"].view(torch.uint8)
    assert 120 <= int(scale_bytes.min()) and int(scale_bytes.max()) < 135
    assert len(torch.unique(args["a"].view(torch.uint8))) > 100  # every byte value may come up, not a fixed few


def test_an_object_spec_method_answers_its_value_and_rand_draws_probabilities(tmp_path: Path) -> None:
    import torch

    from smithbot.inputs.harness import harness_source

    specs = {"cfg": {"object": {"max_len": {"returns": "tokens // 2"}, "eps": 0.5}},
             "conf": {"shape": ["tokens", 8], "dtype": "fp32", "init": "rand"}}
    (tmp_path / "harness.py").write_text(harness_source("sched", InputPlan.read(specs, {}), "inferred"))
    mod = load_module(tmp_path / "harness.py", "harness_returns")
    args = mod.make_inputs({"dtype": torch.float32, "tokens": 64}, torch.Generator().manual_seed(0))
    assert args["cfg"].max_len() == 32 and args["cfg"].eps == 0.5
    conf = args["conf"]
    assert 0 <= float(conf.min()) and float(conf.max()) < 1 and float(conf.std()) > 0.2  # uniform, not around 1


def test_chunk_indices_pair_each_sequence_with_its_chunks(tmp_path: Path) -> None:
    import torch

    from smithbot.inputs.harness import harness_source

    specs = {"chunk_indices": {"shape": [6, 2], "dtype": "int32", "init": "chunks:cu_seqlens:64"},
             "cu_seqlens": {"shape": [4], "dtype": "int32", "init": "cuts:tokens"}}
    (tmp_path / "harness.py").write_text(harness_source("fla", InputPlan.read(specs, {}), "inferred"))
    mod = load_module(tmp_path / "harness.py", "harness_chunks")
    args = mod.make_inputs({"dtype": torch.float32, "tokens": 300}, torch.Generator().manual_seed(0))
    assert args["cu_seqlens"].tolist() == [0, 100, 200, 300]  # three sequences of 100 tokens: two chunks each
    assert args["chunk_indices"].tolist() == [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]]


def test_a_task_whose_kernel_sums_with_atomics_is_compared_within_tolerance(engine: Path, tmp_path: Path) -> None:
    """Atomics add in whatever order the programs run, so a second call's sum may differ in the last bits: such a
    task is not held to bit equality with itself (task.yaml's deterministic: false); one without atomics is."""
    import yaml

    [row] = api.extract(str(engine), "split_sum", out=tmp_path / "sum", source=str(engine), check=True)
    assert row.extracted and row.checked, row.why
    assert yaml.safe_load((tmp_path / "sum" / "task.yaml").read_text())["deterministic"] is False
    [row] = api.extract(str(engine), "gather_scaled", out=tmp_path / "gather", source=str(engine), check=False)
    assert yaml.safe_load((tmp_path / "gather" / "task.yaml").read_text())["deterministic"] is True


def test_what_the_code_does_after_rebinding_a_parameter_says_nothing_of_its_rank() -> None:
    """lmdeploy's rms_norm takes 1-3-D states and lifts them to 3-D: ``hidden_states.size(1)`` after
    ``hidden_states = _unsqueeze_to_3d(hidden_states)`` is the new value's. The name rule's [tokens, hidden] stands
    (a 3-D guess with a heads axis overflowed int32 offsets at DeepSeek's sizes on the GPU); a rebinding to the
    same shape (``.contiguous()``) keeps what follows."""
    fn = _fn('''
def rms_norm(hidden_states, weight, eps=1e-6):
    assert hidden_states.dim() <= 3
    hidden_states = _unsqueeze_to_3d(hidden_states)
    num_groups = hidden_states.size(1)
    _kernel[(1,)](hidden_states, weight, hidden_states.stride(2), num_groups)
''')
    rule = {"hidden_states": {"shape": ["tokens", "hidden"]}}
    assert infer(fn, [], rule, by_rule=("hidden_states",)) == {}
    fn = _fn('''
def rms_norm(hidden_states, weight, eps=1e-6):
    hidden_states = hidden_states.contiguous()
    num_groups = hidden_states.size(2)
''')
    assert infer(fn, [], rule, by_rule=("hidden_states",)) == {"hidden_states": {"shape": ["tokens", "heads",
                                                                                           "hidden"]}}
    # sglang's conv-window saver takes 2-D states and views them 3-D only under a branch: what follows holds for
    # the states as they arrive on the other path (3-D), so the rule's rank gives way
    fn = _fn('''
def save_windows(cache, hidden_states, batch_size):
    D = cache.shape[2]
    if hidden_states.dim() == 2:
        hidden_states = hidden_states.view(batch_size, -1, hidden_states.shape[-1])
    assert hidden_states.dim() == 3
    assert hidden_states.shape[2] == D
''')
    got = infer(fn, [], rule, by_rule=("hidden_states",))
    assert len(got["hidden_states"]["shape"]) == 3, got


def test_strides_unpacked_through_map_give_the_rank() -> None:
    """``k_sb, k_sh, k_sl, k_sd = map(int, k.stride())`` says k has four axes, as ``... = k.stride()`` does."""
    fn = _fn('''
def rope(q, k):
    B, H, L, D = q.shape
    H_k = k.shape[1]
    k_sb, k_sh, k_sl, k_sd = map(int, k.stride())
    _rope_kernel[(B * H, L)](q, k, k_sb, k_sh, k_sl, k_sd)
''')
    got = infer(fn, ["q", "k"], {})
    assert len(got["k"]["shape"]) == 4 and len(got["q"]["shape"]) == 4


def test_a_unit_stride_on_the_second_last_axis_is_a_transposed_weight() -> None:
    """``assert b.stride(1) == 1`` of a 3-D ``b``: its last two axes are column-major, so ``b`` is drawn transposed;
    ``assert a.stride(-1) == 1`` (row-major, as drawn) changes nothing."""
    fn = _fn('''
def bmm(a, b, c):
    assert a.shape[2] == b.shape[1]
    M, K = a.shape[1], a.shape[2]
    K, N = b.shape[1], b.shape[2]
    assert b.stride(1) == 1
    assert a.stride(-1) == 1
    _bmm_kernel[(M, N)](a, b, c, M, N, K, a.stride(0), b.stride(0), b.stride(2), c.stride(0))
''')
    got = infer(fn, ["a", "b", "c"], {})
    assert got["b"].get("transposed") is True and len(got["b"]["shape"]) == 3
    assert "transposed" not in got["a"] and "transposed" not in got["c"]


def test_a_zero_default_the_launcher_divides_by_is_inferred_and_keeps_the_axis_it_divides() -> None:
    """``num_groups: int = 0`` with ``assert experts % num_groups == 0`` on every path: the default would divide by
    zero (callers always pass it), so it is inferred; the join ``%`` makes keeps what the known spec of ``scores``
    pins (``experts``), not a size by position."""
    from smithbot.inputs.specs import _divisors

    fn = _fn('''
def grouped_topk(scores, topk: int, num_groups: int = 0, eps: float = 0.0):
    tokens, total_expert_num = scores.shape
    if eps > 0:
        tokens = tokens // eps
    assert total_expert_num % num_groups == 0
    _topk_kernel[(tokens,)](scores, topk, num_groups, total_expert_num // num_groups)
''')
    assert _divisors(fn) == {"num_groups"}  # not eps: that division sits under a branch
    got = infer(fn, ["num_groups"], {"scores": {"shape": ["tokens", "experts"]}, "topk": "top_k"})
    assert got["num_groups"] == "experts"


def test_tables_a_kernel_reads_per_program_are_as_many_as_the_sequences() -> None:
    """``req_index`` read at ``tl.program_id(0)`` beside ``seq_len`` and ``start_loc`` (one layout of sequences):
    it has a row per sequence too, while ``out`` (written at the sequences' offsets) keeps a row per token."""
    from smithbot.inputs.specs import _one_layout, _per_program

    mod = ast.parse('''
@triton.jit
def _repack(kv, req_index, out, seq_len, start_loc, stride, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    n = tl.load(seq_len + b)
    r = tl.load(req_index + b)
    s = tl.load(start_loc + b)
    offs = tl.arange(0, BLOCK)
    tl.store(out + s + offs, tl.load(kv + r * stride + offs, mask=offs < n), mask=offs < n)


def repack(kv, req_index, seq_len, start_loc, out):
    _repack[(req_index.shape[0],)](kv, req_index, out, seq_len, start_loc, kv.stride(0), BLOCK=64)
''')
    kernel, fn = mod.body
    groups = _per_program(fn, (kernel,))
    assert groups == [{"req_index", "seq_len", "start_loc"}]
    specs = infer(fn, ["kv", "req_index", "seq_len", "start_loc", "out"], {}, (), (kernel,))
    _one_layout(specs, set(specs), groups)
    batch = "max(1, (tokens) // 8)"
    assert specs["seq_len"]["shape"] == specs["start_loc"]["shape"] == specs["req_index"]["shape"] == [batch]
    assert specs["out"]["shape"][0] == "tokens"


def test_a_tensor_whose_loaded_values_are_shifted_and_masked_holds_integers() -> None:
    """``w = tl.load(B + offs)`` then ``(w >> shift) & 0xF`` (packed int4 weights): bit operations take integers
    only, so ``b`` is drawn int32; the scale it is multiplied by stays the cases' float."""
    mod = ast.parse('''
@triton.jit
def _dequant(B, S, Out, K, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    w = tl.load(B + offs // 8, mask=offs < K)
    s = tl.load(S + offs, mask=offs < K)
    tl.store(Out + offs, ((w >> (offs % 8) * 4) & 0xF) * s, mask=offs < K)


def dequant(b, scale):
    Kw, N = b.shape
    out = torch.empty((Kw * 8,), dtype=scale.dtype)
    _dequant[(1,)](b, scale, out, Kw * 8, BLOCK=64)
    return out
''')
    kernel, fn = mod.body
    got = infer(fn, ["b", "scale"], {}, (), (kernel,))
    assert got["b"].get("dtype") == "int32" and "dtype" not in got["scale"]


def test_a_tensor_a_bitwise_atomic_writes_holds_integers_whatever_its_name() -> None:
    """``tl.atomic_or(Mask + idx, bit)`` (vLLM's prompt bitmask: token // 32 words, a bit each): Triton's bitwise
    atomics take integer pointers only, so ``prompt_bin_mask`` is drawn int32, not the bool its name suggests; the
    counts beside it, added to, keep the name's rule."""
    mod = ast.parse('''
@triton.jit
def _bins(Tokens, Mask, Counts, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tok = tl.load(Tokens + offs, mask=offs < n)
    bit = tl.full((BLOCK,), 1, tl.int32) << (tok % 32)
    tl.atomic_or(Mask + tok // 32, bit, mask=offs < n)
    tl.atomic_add(Counts + tok, 1, mask=offs < n)


def bins(tokens, prompt_bin_mask, output_bin_counts):
    _bins[(1,)](tokens, prompt_bin_mask, output_bin_counts, tokens.shape[0], BLOCK=64)
''')
    kernel, fn = mod.body
    got = infer(fn, ["tokens", "prompt_bin_mask", "output_bin_counts"], {}, (), (kernel,))
    assert got["prompt_bin_mask"].get("dtype") == "int32", got["prompt_bin_mask"]
    assert got["output_bin_counts"].get("dtype") != "bool", got["output_bin_counts"]


def test_a_parameter_rebound_to_a_view_that_splits_its_last_axis_arrives_unsplit() -> None:
    """``x = x.view(x.shape[0], x.shape[1], groups, 8)``: the strides read after it are the view's four axes, but
    ``x`` arrives with three, the last one ``groups * 8`` wide; ``out``, viewed by the same split, has that axis too."""
    mod = ast.parse('''
@triton.jit
def _group_copy(X, Out, sx0, sx1, sx2, sx3, so0, so1, so2, so3, G: tl.constexpr, D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    g = tl.arange(0, G)
    d = tl.arange(0, D)
    v = tl.load(X + t * sx0 + h * sx1 + g[:, None] * sx2 + d[None, :] * sx3)
    tl.store(Out + t * so0 + h * so1 + g[:, None] * so2 + d[None, :] * so3, v)


def group_copy(x, out):
    head_dim = x.shape[2]
    group_dim = 8
    groups = head_dim // group_dim
    assert head_dim % group_dim == 0
    x = x.view((x.shape[0], x.shape[1], groups, group_dim))
    out = out.view(out.shape[0], out.shape[1], groups, group_dim)
    _group_copy[(x.shape[0], x.shape[1])](x, out, x.stride(0), x.stride(1), x.stride(2), x.stride(3),
                                         out.stride(0), out.stride(1), out.stride(2), out.stride(3),
                                         G=groups, D=group_dim)
''')
    kernel, fn = mod.body
    got = infer(fn, ["x", "out"], {}, (), (kernel,))
    assert len(got["x"]["shape"]) == 3 and got["out"]["shape"] == got["x"]["shape"]
    assert "head_dim" in str(got["x"]["shape"][2])


def test_lengths_the_launcher_adds_up_into_offsets_fit_in_the_rows() -> None:
    """``offsets = torch.cumsum(seq_lens - ready_lens)``: lengths with no starts table beside them, laid end to end
    over ``ids`` by the launcher itself; a sequence per 8 rows, each short enough that all of them fit."""
    from smithbot.inputs.specs import _cumsummed, _one_layout

    mod = ast.parse('''
@triton.jit
def _shift(offsets, ids, out, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    s = tl.load(offsets + b)
    e = tl.load(offsets + b + 1)
    offs = s + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(ids + offs, mask=offs < e), mask=offs < e)


def shift(ids, seq_lens, ready_lens=None):
    q_lens = seq_lens if ready_lens is None else seq_lens - ready_lens
    offsets = torch.nn.functional.pad(torch.cumsum(q_lens, dim=0), (1, 0))
    out = torch.empty_like(ids)
    _shift[(seq_lens.shape[0],)](offsets, ids, out, BLOCK=64)
    return out
''')
    kernel, fn = mod.body
    assert _cumsummed(fn) == {"seq_lens", "ready_lens"}
    specs = infer(fn, ["ids", "seq_lens"], {"ready_lens": None}, (), (kernel,))
    _one_layout(specs, {"ids", "seq_lens"}, [], _cumsummed(fn))
    batch = "max(1, (tokens) // 8)"
    assert specs["seq_lens"]["shape"] == [batch] and specs["seq_lens"]["init"] == f"randint:1:(tokens) // ({batch}) + 1"
    assert specs["ids"]["shape"] == ["tokens"]


def test_lengths_the_launcher_subtracts_others_from_hold_them_as_a_prefix(tmp_path: Path) -> None:
    """``q_lens = seq_lens - ready_lens``: each ready length is part of its sequence (``upto:seq_lens``), and the
    sequences lie end to end over the token rows (``n_tokens`` of them), so the new parts fit there too."""
    import torch

    from smithbot.inputs.harness import harness_source
    from smithbot.inputs.specs import _cumsummed, _differences, _one_layout

    mod = ast.parse('''
@triton.jit
def _positions(ready, lens, starts, out, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    r = tl.load(ready + b)
    n = tl.load(lens + b)
    s = tl.load(starts + b)
    offs = tl.arange(0, BLOCK)
    tl.store(out + s + offs, r + offs, mask=offs < n - r)


def positions(n_tokens: int, ready_lens, seq_lens):
    out = torch.empty((n_tokens,), dtype=torch.int32)
    q_lens = seq_lens - ready_lens
    starts = q_lens.new_zeros(q_lens.shape)
    starts[1:] = q_lens[:-1]
    _positions[(seq_lens.shape[0],)](ready_lens, seq_lens, starts, out, BLOCK=64)
    return out
''')
    kernel, fn = mod.body
    assert _differences(fn) == [("seq_lens", "ready_lens")] and not _cumsummed(fn)
    specs = infer(fn, ["n_tokens", "ready_lens", "seq_lens"], {}, (), (kernel,))
    _one_layout(specs, set(specs), [], _cumsummed(fn), _differences(fn))
    batch = "max(1, (tokens) // 8)"
    assert specs["seq_lens"]["shape"] == specs["ready_lens"]["shape"] == [batch]
    assert specs["ready_lens"]["init"] == "upto:seq_lens"
    (tmp_path / "harness.py").write_text(harness_source("positions", InputPlan.read(specs, {}), "inferred"))
    made = load_module(tmp_path / "harness.py", "harness_upto")
    args = made.make_inputs({"dtype": torch.float32, "tokens": 64}, torch.Generator().manual_seed(0))
    assert (args["ready_lens"] <= args["seq_lens"]).all() and (args["ready_lens"] >= 0).all()
    assert args["seq_lens"].sum() <= 64


def test_an_attribute_that_holds_a_tensor_is_flattened_a_level_further() -> None:
    from smithbot.inputs.specs import flat_entry, flatten_objects, object_leaves
    from smithbot.inputs.specs import param_specs

    fn = _fn('''
def compute(self, num_reqs, query_start_loc, positions):
    world = self.pcp_world_size * self.dcp_world_size
    rank = self.pcp_rank * self.dcp_world_size + self.dcp_rank
    _kernel[(num_reqs + 1,)](positions.shape[0], self.max_num_batched_tokens, query_start_loc, positions,
                             self.block_table.gpu, self.block_table.gpu.stride(0), self.block_size,
                             self.slot_mapping.gpu, WORLD=world, RANK=rank, q_dtype=self.q.dtype)
''')
    flat, objects = flatten_objects(fn, ["self"])
    leaves = dict(object_leaves(objects))
    # a buffer read for its one tensor takes the buffer's name; a tensor read for its dtype stays a tensor
    assert leaves["self.block_table.gpu"] == "block_table" and leaves["self.slot_mapping.gpu"] == "slot_mapping"
    assert leaves["self.q"] == "q"
    assert "block_table.stride(0)" in ast.unparse(flat)
    ns: dict = {}
    exec(flat_entry("compute", ["self", "num_reqs"], objects)
         + "\ndef compute(self, num_reqs):\n    return self.block_table.gpu, self.slot_mapping.gpu, self.dcp_rank\n", ns)
    args = {n: n for n in [a.arg for a in flat.args.args] if n not in ("query_start_loc", "positions")}
    assert ns["compute_flat"](**args) == ("block_table", "slot_mapping", "dcp_rank")
    # on one GPU a parallel group has one member, whose rank is 0; the step's token bound is the case's tokens
    plan, _ = param_specs([(a.arg, ...) for a in flat.args.args], "compute", api.resolve_target("vllm"), flat)
    specs = plan.literal()
    assert (specs["pcp_world_size"], specs["dcp_world_size"], specs["pcp_rank"], specs["dcp_rank"]) == (1, 1, 0, 0)
    assert specs["max_num_batched_tokens"] == "tokens"
    # the step's query and its page table come from one paged batch
    assert {p: specs[p]["field"] for p in ("query_start_loc", "positions", "block_table", "num_reqs")} == {
        "query_start_loc": "query_start_loc", "positions": "positions", "block_table": "page_table",
        "num_reqs": "batch_size"}


def test_a_string_parameter_is_the_string_the_code_compares_it_with() -> None:
    """``kv_cache_dtype: str`` is no dtype, whatever its name says: it is the first string the launcher compares it
    with (``"auto"``, the unquantized path); ``num_speculative_steps`` is a count, not an epsilon."""
    fn = _fn('''
def reshape(key, kv_cache_dtype: str, num_speculative_steps, layer_eps):
    assert kv_cache_dtype == "auto" or kv_cache_dtype.startswith("fp8")
    out = key.new_zeros(key.shape[0], num_speculative_steps + 1)
    return out * layer_eps
''')
    got = infer(fn, ["kv_cache_dtype", "num_speculative_steps", "layer_eps"], {}, by_rule=())
    assert got["kv_cache_dtype"] == {"literal": "auto"}
    assert isinstance(got["num_speculative_steps"], int) and got["layer_eps"] == 1e-6


def test_a_flag_tensor_whose_truth_skips_the_launch_holds_false() -> None:
    """``if no_lora_flag_cpu.item(): return`` before the launch: drawn at random, the flag would skip the kernel in
    most cases, so it holds False."""
    fn = _fn('''
def expand(x, no_lora_flag_cpu):
    assert no_lora_flag_cpu.numel() == 1
    if no_lora_flag_cpu.item():
        return
    _kernel[(x.shape[0],)](x)
''')
    got = infer(fn, ["x", "no_lora_flag_cpu"], {})
    assert got["no_lora_flag_cpu"] == {"shape": [1], "dtype": "bool", "init": "randint:0:1"}


def test_a_list_of_sizes_and_a_ceiling_division_by_its_element() -> None:
    """``block_size: list[int]`` with ``len(block_size) == 2`` is a list of two sizes (64 each, by its name), not a
    tensor; ``triton.cdiv(A.shape[-1], block_k) == As.shape[-1]`` gives the scales their block count."""
    fn = _fn('''
def block_scaled_mm(A, B, As, Bs, block_size: list[int]):
    assert len(block_size) == 2
    block_n, block_k = block_size[0], block_size[1]
    assert A.shape[-1] == B.shape[-1]
    assert A.shape[:-1] == As.shape[:-1] and A.is_contiguous()
    assert triton.cdiv(A.shape[-1], block_k) == As.shape[-1]
    N, K = B.shape
    assert triton.cdiv(N, block_n) == Bs.shape[0]
    assert triton.cdiv(K, block_k) == Bs.shape[1]
''')
    got = infer(fn, ["A", "B", "As", "Bs", "block_size"], {})
    assert got["block_size"] == {"literal": [64, 64]}
    assert got["As"]["shape"][-1] == "((hidden) + (64) - 1) // (64)", got
    assert got["Bs"]["shape"] == [f"(({d}) + (64) - 1) // (64)" for d in got["B"]["shape"]], got


def test_a_seed_a_helper_loads_for_a_random_stream_is_an_integer_tensor() -> None:
    """``tl.randint(seed, offs)`` takes an integer seed: a tensor the kernel hands a ``@triton.jit`` helper that
    loads a seed from it holds integers, whatever the cases' dtype."""
    fn = _fn('''
def sample(logits, seeds, pos):
    _sample[(logits.shape[0],)](logits, seeds, pos)
''')
    kernel = _fn('''
@triton.jit
def _sample(Logits, Seeds, Pos):
    row = tl.program_id(0)
    x = tl.load(Logits + row)
    tl.store(Logits + row, x + _noise(Seeds, Pos, row))
''')
    helper = _fn('''
@triton.jit
def _noise(seeds_ptr, pos_ptr, row):
    seed = tl.load(seeds_ptr + row)
    return tl.rand(seed, tl.load(pos_ptr + row))
''')
    got = infer(fn, ["logits", "seeds", "pos"], {}, kernels=(kernel, helper))
    assert got["seeds"]["dtype"] == "int32" and "dtype" not in got["logits"], got


def test_a_name_used_as_an_axis_is_the_last_axis_not_a_size() -> None:
    """``dim`` names a size by its name rule, but ``assert -x.ndim <= dim < x.ndim`` and ``x.shape[dim]`` use it
    as an axis: the last one, -1."""
    fn = _fn('''
def mean_dim(input, dim: int, axis, keepdim: bool = False):
    assert -input.ndim <= dim < input.ndim
    n = input.shape[dim] * input.size(axis)
    return _mean[(n,)](input, n)
''')
    got = infer(fn, ["input", "axis"], {"dim": "hidden"}, by_rule=("dim",))
    assert got["dim"] == -1 and got["axis"] == -1, got
