"""Extraction on the bundled demo engine: the closure is complete, the task imports nothing of the target, and the
extracted baseline matches a PyTorch reference on irregular shapes under the interpreter."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from evaluator import Evaluator, load_task
from smithbot import api
from smithbot.config import ConfigError

RMS_REFERENCE = '''

def reference(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
'''

ATTN_REFERENCE = '''

def reference(q, k_cache, v_cache, lens, scale, cap):
    out = torch.empty_like(q)
    for b in range(q.shape[0]):
        n = int(lens[b])
        k, v = k_cache[b, :n].float(), v_cache[b, :n].float()  # [n, H, D]
        logits = torch.einsum("hd,nhd->hn", q[b].float(), k) * scale
        out[b] = torch.einsum("hn,nhd->hd", torch.softmax(logits, dim=-1), v).to(q.dtype)
    return out
'''


@pytest.fixture()
def home(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    return tmp_path


def _with_reference(task_dir: Path, reference: str, irregular: dict) -> None:
    """Add a PyTorch reference and an irregular interpreter case, as a maintainer reviewing the task would."""
    (task_dir / "harness.py").write_text((task_dir / "harness.py").read_text() + reference)
    data = yaml.safe_load((task_dir / "task.yaml").read_text())
    for c in data["cases"]:
        c["interpreter"] = False
    data["cases"].append(irregular)
    (task_dir / "task.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def _check_against_reference(task_dir: Path) -> None:
    with Evaluator(task_dir, backend="interpreter") as ev:
        assert ev.prepare() == []  # the baseline matches the reference, and zeros would fail
        result = ev.submit(task_dir / "kernel.py").result()
    # the baseline checked as a candidate: correct on every case. Its timing verdict against itself is a statistical
    # property of the evaluator (a false promotion under 1%), measured by benchmarks/evaluator_noise.py, not here.
    assert result.correct and result.status != "flagged", result.why


def test_rms_norm_extracts_and_matches_reference(home: Path) -> None:
    [row] = api.extract("demo", "rms_norm", out=home / "rms", check=True)
    assert row.extracted and row.checked, row.why
    kernel = (home / "rms" / "kernel.py").read_text()
    assert "import minengine" not in kernel and "from minengine" not in kernel and "# EVOLVE-BLOCK-START" in kernel
    task = load_task(home / "rms")
    assert task.entry == "rms_norm"
    assert [d.qualname for d in task.provenance.definitions] == ["_rms_norm_kernel", "rms_norm"]
    assert task.provenance.definitions[0].path == "minengine/kernels/norm.py"
    assert task.tunables == {"launch": {"num_warps": [4]}, "constexpr": {"BLOCK": [32]}}
    # only the demo's Llama model runs the norm (scan's default path), and qwen3-8b's hidden size is Llama's: one
    # preset's cases, none repeated under another model's name
    assert {c.name for c in task.cases} == {"irregular-decode-bs3", "llama3-8b-decode-bs1", "llama3-8b-decode-bs64",
                                            "llama3-8b-prefill-4k"}
    assert [c.name for c in task.cases_for("interpreter")] == ["irregular-decode-bs3"]
    assert task.hotness["presets"] == ["llama3-8b"] and "RMSNorm.forward" in task.hotness["default_path"]
    _with_reference(home / "rms", RMS_REFERENCE, {"name": "irregular-37x1000", "regime": "prefill", "dtype": "fp32",
                                                  "dims": {"tokens": 37, "hidden": 1000}})
    _check_against_reference(home / "rms")


def test_decode_attention_closure_and_reference(home: Path) -> None:
    [row] = api.extract("demo", "decode_attention", out=home / "attn", check=False)
    assert row.extracted, row.why
    kernel = (home / "attn" / "kernel.py").read_text()
    assert "is_hip" not in kernel  # the HIP branch was pruned with the stub's value
    assert "def get_device_core_count(*args, **kwargs):\n    return 132" in kernel  # a runtime helper, stubbed
    assert "def softcap(" in kernel and "LOG2E = tl.constexpr" in kernel  # a cross-file helper and its constant
    paths = {d.path for d in load_task(home / "attn").provenance.definitions}
    assert paths == {"minengine/kernels/attention.py", "minengine/kernels/utils.py"}
    _with_reference(home / "attn", ATTN_REFERENCE, {
        "name": "irregular-bs3-h5-ctx77", "regime": "decode", "dtype": "fp32",
        "dims": {"tokens": 3, "heads": 5, "head_dim": 64}})
    harness = (home / "attn" / "harness.py").read_text().replace("{'context': 96}", "{'context': 77}")
    (home / "attn" / "harness.py").write_text(harness)
    _check_against_reference(home / "attn")


STORE_REFERENCE = '''

def reference(k, v, key, value, slots):
    k[slots.long()] = key
    v[slots.long()] = value
'''


def test_a_method_launcher_gets_its_attributes_as_inputs(home: Path) -> None:
    """KVPool.store launches with self.k and self.v; the task's entry takes them as tensors and builds the stand-in,
    and `_store_kernel = triton.jit(_store_kernel)` follows its definition."""
    [row] = api.extract("demo", "_store_kernel", out=home / "store", check=False)
    assert row.extracted, row.why
    task = load_task(home / "store")
    assert task.entry == "KVPool_store_flat"
    kernel = (home / "store" / "kernel.py").read_text()
    assert "_store_kernel = triton.jit(_store_kernel)" in kernel and "def KVPool_store(self, key" in kernel
    assert [d.qualname for d in task.provenance.definitions] == ["_store_kernel", "KVPool.store"]
    _with_reference(home / "store", STORE_REFERENCE, {"name": "irregular", "regime": "decode", "dtype": "bf16",
                                                      "dims": {"tokens": 5, "kv_heads": 3, "head_dim": 24},
                                                      "interpreter": True})
    _check_against_reference(home / "store")


def test_tl_alias_rewritten(home: Path) -> None:
    [row] = api.extract("demo", "_rotary_kernel", out=home / "rot", check=False)
    kernel = (home / "rot" / "kernel.py").read_text()
    assert "fast_cos" not in kernel and "cos = tl.cos(angle)" in kernel


def test_demo_coverage(home: Path) -> None:
    rows = {r.kernel: r for r in api.extract("demo", None, all_kernels=True, check=True)}
    assert len(rows) == 11
    assert sum(r.extracted for r in rows.values()) == 10
    assert {k for k, r in rows.items() if r.checked} == {
        "_decode_stage1", "_decode_stage2", "topk_softmax_kernel", "_silu_and_mul_kernel", "_rms_norm_kernel",
        "_fused_add_rms_norm_kernel", "_rotary_kernel", "expert_count_kernel",  # CountExperts.forward
        "_store_kernel"}  # KVPool.store, a method: self.k and self.v become inputs
    assert rows["_scale_rows_kernel"].why.endswith("external extension einops (rearrange)")  # why not, named
    assert "launched no Triton kernel" in rows["_softplus_kernel"].why  # HIP-only: nothing runs on CUDA


def test_bad_kernel_names(home: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no launched kernel or wrapper named 'softplus'.*_softplus_kernel"):
        api.extract("demo", "softplus", check=False)
    repo = tmp_path / "two"
    for sub in ("a", "b"):
        (repo / "pkg" / sub).mkdir(parents=True)
        (repo / "pkg" / sub / "k.py").write_text(
            "import triton\n\n@triton.jit\ndef scale_kernel(x):\n    pass\n\ndef run(x):\n    scale_kernel[(1,)](x)\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    with pytest.raises(ConfigError, match="'scale_kernel' is ambiguous: pkg/a/k.py::scale_kernel .*file::qualname"):
        api.extract(str(repo), "scale_kernel", check=False)
    [row] = api.extract(str(repo), "pkg/b/k.py::scale_kernel", out=tmp_path / "b", check=False)
    assert row.extracted and load_task(tmp_path / "b").provenance.definitions[0].path == "pkg/b/k.py"


@pytest.mark.gpu
def test_self_check_runs_the_gpu_cases_when_there_is_a_gpu(home: Path) -> None:
    [row] = api.extract("demo", "rms_norm", out=home / "rms", check=True)
    assert row.checked and row.why.startswith("baseline runs on the GPU"), row.why


RUN_CONFIG = '''import torch
import triton
import triton.language as tl


@triton.jit
def _double_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)


def double(x, **run_config):
    if run_config:  # a tuning table's answer, handed down as keyword arguments
        BLOCK = run_config["BLOCK"]
        num_warps = run_config.get("num_warps", 2)
    out = torch.empty_like(x)
    _double_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return out
'''

TWO_LAUNCHERS = '''import torch
import triton
import triton.language as tl


@triton.jit
def _double_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)


def double_into(x, out, table):
    if float(table.float().abs().sum()) >= 0:  # what its inputs must hold, which inference cannot tell
        raise RuntimeError("this launcher refuses every input")
    _double_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)


def double(x):
    out = torch.empty_like(x)
    _double_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out
'''


def test_a_kernel_whose_first_launcher_fails_is_built_at_its_other_launcher(home: Path, tmp_path: Path) -> None:
    """A kernel launched by two functions is built at the first; where that task fails its self-check and no other
    rebuild serves, it is built at the other launcher and kept there. The row says where, and why."""
    from tests.conftest import git_repo

    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/ops.py": TWO_LAUNCHERS})
    [row] = api.extract(str(repo), "_double_kernel", out=tmp_path / "t", source=str(repo), check=True)
    assert row.checked, row.why
    assert "(at its other launcher double() (not double_into()); as first built: " in row.why
    assert "this launcher refuses every input" in row.why
    assert yaml.safe_load((tmp_path / "t" / "task.yaml").read_text())["entry"] == "double"
    _with_reference(tmp_path / "t", DOUBLE_REFERENCE, {"name": "irregular-1000", "regime": "decode", "dtype": "fp32",
                                                        "dims": {"tokens": 7, "hidden": 143}})
    _check_against_reference(tmp_path / "t")


KERNEL_ONLY = '''import triton
import triton.language as tl


@triton.jit
def _double_kernel(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)
'''

NEEDS_A_PACKAGE = '''import torch
import triton

from engine.kernels import _double_kernel
from some_absent_compiler.templates import block_for


def double_there(x):
    out = torch.empty_like(x)
    block = block_for(x)
    _double_kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block)
    return out
'''

PLAIN_LAUNCHER = '''import torch
import triton

from engine.kernels import _double_kernel


def double(x):
    out = torch.empty_like(x)
    _double_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out
'''


def test_a_kernel_whose_first_launcher_imports_what_is_absent_is_built_at_another(home: Path, tmp_path: Path) -> None:
    """A kernel launched from two backends, the first of which needs a package the task cannot have: its task is built
    at the other launcher, and the row says where and why."""
    from tests.conftest import git_repo

    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/kernels.py": KERNEL_ONLY,
                                          "engine/a_backend.py": NEEDS_A_PACKAGE,
                                          "engine/b_backend.py": PLAIN_LAUNCHER})
    [row] = api.extract(str(repo), "_double_kernel", out=tmp_path / "t", source=str(repo), check=True)
    assert row.extracted and row.checked, row.why
    assert "(built at its other launcher double(); at double_there(): " in row.why
    assert "some_absent_compiler" in row.why
    assert yaml.safe_load((tmp_path / "t" / "task.yaml").read_text())["entry"] == "double"


SLOTS = '''import torch
import triton
import triton.language as tl


@triton.jit
def _take_slots_kernel(Ids, Counts, Pos, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    e = tl.load(Ids + offs, mask=m, other=0)
    slot = tl.atomic_add(Counts + e, 1, mask=m)  # the order the programs run in decides who gets which slot
    tl.store(Pos + offs, slot, mask=m)


def take_slots(topk_ids, num_experts):
    counts = torch.zeros(num_experts, dtype=topk_ids.dtype, device=topk_ids.device)
    pos = torch.empty_like(topk_ids)
    _take_slots_kernel[(triton.cdiv(topk_ids.numel(), 64),)](topk_ids, counts, pos, topk_ids.numel(), BLOCK=64)
    return pos, counts


def tokens_per_expert(topk_ids, num_experts):
    _, counts = take_slots(topk_ids, num_experts)
    return counts
'''


def test_a_kernel_that_takes_slots_with_atomics_is_built_around_the_op_that_calls_it(home: Path,
                                                                                     tmp_path: Path) -> None:
    """A kernel that stores where an atomic says gives outputs in the order its programs ran, which the interpreter's
    self-check cannot show (it runs them one by one): its task is built around the op that calls its launcher,
    whose result does not depend on that order, and the row says why."""
    from tests.conftest import git_repo

    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/slots.py": SLOTS})
    [row] = api.extract(str(repo), "_take_slots_kernel", out=tmp_path / "t", source=str(repo), check=True)
    assert row.checked, row.why
    assert "(around the op tokens_per_expert() that calls it (_take_slots_kernel stores where an atomic says" in row.why
    assert yaml.safe_load((tmp_path / "t" / "task.yaml").read_text())["entry"] == "tokens_per_expert"


def test_a_task_around_the_op_that_never_launches_the_kernel_is_not_kept(home: Path, tmp_path: Path) -> None:
    """The op above the launcher takes another path on its own inputs (its flag off): the task built around it
    passes but runs nothing of the row's kernel, so the kernel's own task stays, and the row says why."""
    from tests.conftest import git_repo

    op = SLOTS.replace("def tokens_per_expert(topk_ids, num_experts):\n", '''@triton.jit
def _ones_kernel(Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, 1, mask=offs < n)


def tokens_per_expert(topk_ids, num_experts, by_slots: bool = False):
    if not by_slots:
        out = torch.empty(num_experts, dtype=topk_ids.dtype, device=topk_ids.device)
        _ones_kernel[(triton.cdiv(num_experts, 64),)](out, num_experts, BLOCK=64)
        return out
''')
    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/slots.py": op})
    [row] = api.extract(str(repo), "_take_slots_kernel", out=tmp_path / "t", source=str(repo), check=True)
    assert row.checked, row.why
    assert "around the op tokens_per_expert() that calls it" in row.why
    assert "its task's inputs never launch it (they launch _ones_kernel)" in row.why
    assert yaml.safe_load((tmp_path / "t" / "task.yaml").read_text())["entry"] == "take_slots"


DOUBLE_REFERENCE = '''

def reference(x, **run_config):
    return x * 2
'''


def test_a_launcher_reading_its_keyword_arguments_as_settings_gets_them(home: Path, tmp_path: Path) -> None:
    """LightLLM's launchers take ``**run_config`` and read ``run_config["BLOCK_N"]`` under ``if run_config:``; the
    task passes those keys (a ``.get`` default kept), so the variables they bind exist and the kernel runs."""
    from tests.conftest import git_repo

    repo = git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/ops.py": RUN_CONFIG})
    [row] = api.extract(str(repo), "_double_kernel", out=tmp_path / "t", source=str(repo), check=True)
    assert row.checked, row.why
    spec = (tmp_path / "t" / "harness.py").read_text()
    assert "'BLOCK': 64" in spec and "'num_warps': 2" in spec
    _with_reference(tmp_path / "t", DOUBLE_REFERENCE, {"name": "irregular-1000", "regime": "decode", "dtype": "fp32",
                                                        "dims": {"tokens": 7, "hidden": 143}})
    _check_against_reference(tmp_path / "t")


def test_only_a_kernel_that_stores_where_an_atomic_says_depends_on_the_order_of_its_programs() -> None:
    """A sum by atomics is the same whatever the order (up to rounding, which the tolerances allow); a slot an atomic
    hands out, stored or stored at, differs between runs."""
    from smithbot.extract.build import atomic_order

    summed = "def _sum(X, Out):\n    tl.atomic_add(Out, tl.load(X))\n"
    assert atomic_order(summed) == []
    assert atomic_order(SLOTS) == ["_take_slots_kernel"]
    at = ("def _scatter(X, Counts, Out):\n    base = tl.atomic_add(Counts, 1)\n    row = base * 4\n"
          "    tl.store(Out + row, tl.load(X))\n")
    assert atomic_order(at) == ["_scatter"]  # stored at the slot, through an assignment
