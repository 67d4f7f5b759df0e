"""Torch glue on the default serving path (``kind: fusion`` entries): found on the fake engine of
``tests/program/engine.py`` through the real call graph, and the run rules on small sources."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from smithbot import api
from smithbot.scan.glue import file_glue

ROOT = Path(__file__).resolve().parents[2]


def test_glue_on_the_default_path_per_layer_and_per_step(engine: str) -> None:
    result = api.scan(engine)
    got = [(f.function, f.path, f.presets.get("llama3-8b", {}).get("phases")) for f in result.fusion]
    # ranked by launches per step: the per-layer routing with the helpers it calls (7 ops x 32 layers), the per-layer
    # gate's casts and scores (3 x 32), then the decode metadata, and the prefill-only run last; the routing glue in
    # the ROCm branch is off the default path, and `scaled` (three launches, per layer) runs under torch.compile
    # through the engine's own decorator
    assert got == [("FusedMoE.forward", "eng/layers.py", ["prefill", "decode"]),
                   ("noaux_route", "eng/layers.py", ["prefill", "decode"]),
                   ("FA3Backend.init_metadata", "eng/attention/backends.py", ["decode"]),
                   ("StepBatch.advance", "eng/sched.py", ["prefill", "decode"]),
                   ("Router.forward", "eng/sched.py", ["prefill", "decode"]),  # route_softmax's ops, as its own
                   ("route_softmax", "eng/sched.py", ["prefill", "decode"]),
                   ("FA3Backend.init_metadata", "eng/attention/backends.py", ["prefill"]),
                   ("publish", "eng/layers.py", ["prefill", "decode"]),  # possible: see the next test
                   ("local_start", "eng/layers.py", ["prefill", "decode"])]  # see the memo test
    moe, gate, meta, _, _, _, extend, _, _ = result.fusion
    # the file's helpers count as their ops (noaux_route's sigmoid and add, its casts left out; publish's store),
    # then the routing; .view and .shape: free; x.float() of what the router returns: its dtype is not decided, so
    # not counted
    assert moe.ops == ("noaux_route:.sigmoid", "noaux_route:add", "publish:[]=", "softmax", "topk", ".sum", "/")
    assert moe.launches == 7
    assert moe.unsure == ("x.float() at line 65: a launch only if x is not float32 already, and its dtype is not "
                          "decided",)
    assert moe.per_step == 224 and moe.frequency == "per layer (32 layers)"
    assert list(moe.presets) == ["llama3-8b"]  # qwen3-8b's model class is not in the checkout
    assert moe.presets["llama3-8b"]["path"] == ("LlamaForCausalLM.forward → BaseModel.forward → "
                                                "DecoderLayer.forward → FusedMoE.forward")
    assert meta.ops == ("cumsum", "pad", ".max", "[index]", ".copy_") and meta.syncs == (".item",)
    assert meta.unsure and meta.unsure[0].startswith("fb.seq_lens.to() at line 15")
    assert meta.todos == ("14: TODO: fuse these kernels",)
    assert (meta.first, meta.last, meta.per_step, meta.frequency) == (15, 19, 5, "once per step")
    assert sorted(meta.presets) == ["llama3-8b", "qwen3-8b"]  # engine code: every preset
    assert extend.ops == ("-", "cumsum", ".sum", "arange")
    saved = json.loads(result.path.read_text())["fusion"]
    assert [f["kind"] for f in saved] == ["fusion"] * 9
    assert saved[2]["lines"] == [15, 19] and saved[2]["launches_per_step"] == 5


def test_a_cast_launches_only_where_the_engine_makes_another_dtype(engine: str) -> None:
    """The gate's logits come from F.linear of the activations cast to its bf16 weight: their .float() launches.
    Its bias is an fp32 parameter: .float() of it launches nothing. Both are traced through the caller's arguments
    and the class's assignments, and become the glue's inputs with their dtype and shape."""
    gate = next(f for f in api.scan(engine).fusion if f.function == "noaux_route")
    assert gate.ops == (".float", ".sigmoid", "add") and gate.launches == 3 and not gate.unsure
    inputs = gate.presets["llama3-8b"]["inputs"]
    # a linear layer's output: its last dim is the weight's rows, its leading ones are not known
    assert inputs["gate_logits"]["dtype"] == "bfloat16" and inputs["gate_logits"]["shape"] == ["...", 8]
    assert inputs["bias"] == {"dtype": "float32", "shape": [8], "made": "eng.layers:FusedMoE.__init__"}


def test_a_run_that_launches_enough_only_through_an_undecided_cast_is_possible(engine: str) -> None:
    """``buf[idx] = lens.to(buf.dtype)``: the buffer is int64 (traced), what the caller hands in is not traced. The
    cast makes it a run of two launches only if lens is not int64: so it is a site, with that as an open test."""
    site = next(f for f in api.scan(engine).fusion if f.function == "publish")
    assert site.ops == (".to", "[]=") and site.reach == "possible" and not site.unsure
    assert site.undecided == ("lens.dtype != int64 (eng/layers.py:43)",)


def test_work_kept_on_an_object_counts_once_for_it(engine: str) -> None:
    """Each layer's FusedMoE.forward calls ``local_start(self.batch)``, whose run sits under ``if batch.start is
    None`` and fills ``batch.start``: once for the batch, so once a step (3 launches), not 32 times. Its
    ``refresh`` zeroes two tables under ``if self.mode != mode`` and sets ``self.mode``: redone only when the layer's
    mode changes, so no step's glue at all, though it is a run of two launches on the path."""
    from smithbot.scan.glue import MEMO
    from tests.program.engine import FILES

    site = next(f for f in api.scan(engine).fusion if f.function == "local_start")
    assert site.ops == ("cumsum", "-", ".sum") and site.per_step == 3 and site.frequency == "once per step"
    assert site.reach == "possible" and site.undecided == ("batch.start is None (eng/layers.py:142)",)
    assert not [f for f in api.scan(engine).fusion if f.function == "FusedMoE.refresh"]
    text = FILES["eng/layers.py"].encode()
    assert [r["ops"] for r in file_glue(text)["FusedMoE.refresh"]] == [[".zero_", ".fill_"]]
    assert sorted((src, root) for _, _, src, root in file_glue(text)[MEMO]) == [("batch.start is None", "batch"),
                                                                                ("self.mode != mode", "self")]


def test_an_attribute_updated_from_itself_keeps_the_dtype_its_making_gives(engine: str) -> None:
    """`eng/sched.py`'s `StepBatch` (sglang's decode lengths): `lens` is made int64 when the batch is built, then
    `self.lens + 1` each step, `self.lens[keep]` when filtered, `torch.cat([self.lens, other.lens])` with another
    batch, and None while empty. The updates read the attribute itself and None is no tensor: the step's inputs are
    int64 and int32 vectors (they were not traced). `lens` is moved to the GPU when made, `lens_host` is made with no
    device and stays on the host: its `+ 1` is host work, no launch, and a glue task cannot take the run (extraction
    says so)."""
    site = next(f for f in api.scan(engine).fusion if f.function == "StepBatch.advance")
    assert site.ops == ("+", "+") and site.reach == "default" and (site.first, site.last) == (66, 68)
    inputs = site.presets["llama3-8b"]["inputs"]
    assert inputs["self.lens"] == {"dtype": "int64", "shape": [None], "made": "eng.sched:StepBatch.build"}
    assert inputs["self.orig"] == {"dtype": "int32", "shape": [None], "made": "eng.sched:StepBatch.build"}
    assert inputs["self.lens_host"] == {"dtype": "int64", "shape": [None], "made": "eng.sched:StepBatch.build",
                                        "host": True}
    [row] = api.extract(engine, "glue:StepBatch.advance")
    assert not row.extracted and "lens_host is a host tensor in serving (made with no device)" in row.why, row.why


def test_a_parameter_hinted_as_an_engine_class_is_traced_through_its_attributes(engine: str) -> None:
    """`Scheduler.relay(self, batch: StepBatch, x)` hands `batch.lens + 1` to `stash_lens`, which stores it cast to
    int64 (sglang's `FutureMap.publish`). `batch.lens` is the class's int64 lengths, so the cast launches nothing,
    and one store is no run of glue. It was a possible site, its cast an open test."""
    assert [f.function for f in api.scan(engine).fusion if f.function == "stash_lens"] == []


def test_a_serving_setting_takes_glue_off_the_path(engine: str) -> None:
    fusion = api.scan(engine, sets={"attention_backend": "triton"}).fusion
    assert [f.function for f in fusion] == ["FusedMoE.forward", "noaux_route", "StepBatch.advance", "Router.forward",
                                            "route_softmax", "publish", "local_start"]


def test_the_cli_lists_fusion_entries_in_80_columns(engine: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "smithbot", "scan", engine], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "fusion candidates: 9 runs of torch glue" in out.stdout and "per layer (32 layers)" in out.stdout
    assert max(len(line.rstrip()) for line in out.stdout.splitlines()) <= 80
    as_json = subprocess.run([sys.executable, "-m", "smithbot", "scan", engine, "--json"], capture_output=True,
                             text=True, env=env, cwd=ROOT, timeout=120)
    rows = json.loads(as_json.stdout)
    assert [r["function"] for r in rows if r.get("kind") == "fusion"][0] == "FusedMoE.forward"


SOURCE = b'''import torch
import torch.nn.functional as F


def launches_break_runs(x: torch.Tensor, n: int):
    a = x.cumsum(0)
    b = a + 1
    my_kernel[(n,)](b)
    c = b * 2
    d = torch.where(c > 0, c, 0)


def ints_and_views_are_free(x: torch.Tensor, n: int):
    m = n * 2 + 1
    y = x.view(m, -1).transpose(0, 1)
    z = x.reshape(-1)[:m]
    s = x.shape[0] - 1
    w = F.pad(x, (1, 0))


def an_unknown_call_ends_a_run(x: torch.Tensor, helper):
    a = torch.cumsum(x, 0)
    b = a - x
    helper(b)
    c = b + 1
    d = c * 2
    e = torch.cat([c, d])
    out = [t.sum() for t in (c, d)]


class Meta:
    def update(self, seq_lens):
        # FIXME: one Triton kernel for this
        self.cu[1:].copy_(torch.cumsum(seq_lens, 0))
        for i in range(4):
            self.pos[i] = seq_lens[i] - 1
        self.lens.fill_(0)
        self.lens += seq_lens
        self.n = seq_lens.sum().item()
'''


def test_what_a_run_is() -> None:
    runs = file_glue(SOURCE)
    # 2 ops, a Triton launch, 3 ops: a launch ends a run, and two launches or more are a candidate
    assert [r["ops"] for r in runs["launches_break_runs"]] == [[".cumsum", "+"], ["*", ">", "where"]]
    # int arithmetic, views, slices and shape reads launch nothing: one op is no run
    assert "ints_and_views_are_free" not in runs
    # an unknown call (it may launch anything) ends a run; a comprehension of tensor ops ends one too
    assert [r["ops"] for r in runs["an_unknown_call_ends_a_run"]] == [["cumsum", "-"], ["+", "*", "cat"]]
    # a loop body is a block of its own, in a loop; the statements around it are two runs
    before, inside, run = runs["Meta.update"]
    assert before["ops"] == ["cumsum", ".copy_"] and inside["ops"] == ["-", "[]="] and inside["in_loop"] is True
    assert run["ops"] == [".fill_", "+=", ".sum"] and run["syncs"] == [".item"] and run["in_loop"] is False
    assert file_glue(b"def f(:\n")[""][0]["error"]


def test_a_fixme_near_a_run_is_kept() -> None:
    src = SOURCE.replace(b"        for i in range(4):\n            self.pos[i] = seq_lens[i] - 1\n", b"")
    (run,) = file_glue(src)["Meta.update"]
    assert run["ops"] == ["cumsum", ".copy_", ".fill_", "+=", ".sum"]
    assert run["todos"] == ["33: FIXME: one Triton kernel for this"]


def test_host_tests_and_launch_arguments_are_no_glue() -> None:
    """A Triton launch's arguments (`bias.stride(0) if bias is not None else 0`, `A.stride(1)`) and identity tests on
    tensors are host work: sglang's `invoke_fused_moe_kernel` was listed as 336 launches a step of them."""
    from smithbot.scan.glue import file_glue

    src = b'''import torch

def launch(A: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor, out: torch.Tensor):
    n = A.shape[0] * 2
    k = bias.stride(0) if bias is not None else 0
    s = scale.stride(1) if scale is not None and scale.ndim == 2 else 0
    kern[(n,)](A, bias, out, A.stride(0), k, s, 0 if scale is None else 1)
'''
    assert file_glue(src) == {}
    real = src.replace(b"    n = A.shape[0] * 2\n", b"    x = torch.softmax(A, -1)\n    y = x * 2\n    z = y.sum(-1)\n"
                                                       b"    n = A.shape[0] * 2\n")
    runs = file_glue(real)["launch"]
    assert runs[0]["ops"] == ["softmax", "*", ".sum"]


def test_glue_after_an_early_return_is_under_its_test() -> None:
    from smithbot.scan.glue import file_glue

    src = b'''import torch

def step(x: torch.Tensor, local: bool):
    if not local:
        return x
    y = torch.cumsum(x, 0)
    z = y * 2
    return z.sum()
'''
    [run] = file_glue(src)["step"]
    assert run["ops"] == ["cumsum", "*", ".sum"] and run["tests"] == [["not local", False]]


def test_a_run_goes_on_through_a_branch_of_simple_statements() -> None:
    """softmax, then top-k in one branch or the other (lmdeploy's default MoE routing): one run per branch, each
    under its test; a branch that calls out ends the run there, and a branch without launches adds no test."""
    src = b'''import torch

def route(x: torch.Tensor, groups: int, k: int, renorm: bool):
    w = torch.softmax(x, -1)
    if groups > 0:
        helper(w)
    else:
        w, ids = torch.topk(w, k)
    if not w.is_contiguous():
        w = w.contiguous()
    if renorm:
        w = w / w.sum(-1, keepdim=True)
    return w, ids
'''
    runs = {tuple(map(tuple, r["tests"])): r["ops"] for r in file_glue(src)["route"]}
    assert runs == {(("groups > 0", False), ("renorm", True)): ["softmax", "topk", ".sum", "/"],
                    (("groups > 0", False),): ["softmax", "topk"],
                    (("groups > 0", True), ("renorm", True)): [".sum", "/"]}


def test_a_helper_of_the_file_counts_as_its_ops_in_the_callers_run() -> None:
    """An engine's sampling chain spreads an op or two a helper (lmdeploy's ``_process_temperature_``): a call of an
    undecorated function of the same file whose body is glue and nothing else counts as its ops, its casts left
    out. A compiled helper, one with a branch, and one that calls out are calls like any other (the run ends)."""
    src = b'''import torch

def _temperature_(scores: torch.Tensor, t: torch.Tensor):
    """Divide by the temperature."""
    t = t.to(scores.dtype)
    scores.div_(t[:, None])
    return scores

def _top_p(scores: torch.Tensor, p: torch.Tensor):
    probs = scores.softmax(1)
    return scores.masked_fill(probs.cumsum(1) > p[:, None], -1.0)

@torch.compile
def _compiled(x: torch.Tensor):
    return x.sigmoid() * 2

def _branchy(x: torch.Tensor, on: bool):
    if on:
        x = x.exp()
    return x * 2

def sample(scores: torch.Tensor, t: torch.Tensor, p: torch.Tensor, on: bool):
    scores = _temperature_(scores, t)
    scores = _top_p(scores, p)
    return scores.argmax(-1)

def other(x: torch.Tensor, on: bool):
    x = x * 3
    x = _compiled(x)
    y = x + 1
    y = _branchy(y, on)
    return y - 1
'''
    glue = file_glue(src)
    assert [r["ops"] for r in glue["sample"]] == [["_temperature_:.div_", "_top_p:.softmax", "_top_p:.cumsum",
                                                    "_top_p:>", "_top_p:.masked_fill", ".argmax"]]
    assert "other" not in glue  # each stretch between the calls out holds one op: no run


def test_contiguous_launches_only_on_a_strided_tensor() -> None:
    src = b'''import torch

def f(x: torch.Tensor, y: torch.Tensor):
    a = x.contiguous()
    b = y.contiguous()
    c = x.transpose(0, 1).contiguous()
    d = y[:, ::2].contiguous()
'''
    [run] = file_glue(src)["f"]
    assert run["ops"] == [".contiguous", ".contiguous"] and (run["first"], run["last"]) == (6, 7)


def test_a_branch_of_casts_keeps_its_test() -> None:
    """Two casts under a setting's test (sglang's Qwen3 attention casts q and k only in RL on-policy mode): the
    branch may launch, so its run is under the test, and a default that decides it against the branch drops it."""
    from smithbot.scan.glue import file_glue

    src = b'''import torch

def attend(q: torch.Tensor, k: torch.Tensor):
    if get_server_args().rl_on_policy_target is not None:
        q = q.to(torch.bfloat16)
        k = k.to(torch.bfloat16)
    return q, k
'''
    [run] = file_glue(src)["attend"]
    assert run["tests"] == [["get_server_args().rl_on_policy_target is not None", True]]
    assert [c["op"] for c in run["casts"]] == [".to", ".to"]


def test_a_model_class_the_engine_compiles_holds_no_glue() -> None:
    """vLLM's ``@support_torch_compile`` on a model class: the decorator hands the class to a helper whose nested
    ``__init__`` calls a wrapper class's ``__init__``, which calls torch.compile (two modules, three calls down). The
    class's ``forward`` runs compiled, so what it calls is no fusion site; a class without it, and a decorator that
    never reaches torch.compile, are eager."""
    from smithbot.program.modules import Program
    from smithbot.scan.fusion import compiled

    texts = {
        "eng/wrapper.py": b"import torch\n\n\nclass Wrapper:\n    def __init__(self):\n"
                          b"        self._compiled = torch.compile(self.forward)\n",
        "eng/decorators.py": b"from eng.wrapper import Wrapper\n\n\ndef support_compile(cls):\n"
                             b"    return _support(cls)\n\n\ndef _support(cls):\n    def __init__(self, *a):\n"
                             b"        Wrapper.__init__(self)\n\n    cls.__init__ = __init__\n    return cls\n\n\n"
                             b"def log_calls(cls):\n    return cls\n",
        "eng/model.py": b"from eng.decorators import log_calls, support_compile\n\n\n@support_compile\nclass Model:\n"
                        b"    def forward(self, x):\n        return x\n\n\n@log_calls\nclass Eager:\n"
                        b"    def forward(self, x):\n        return x\n",
    }
    program = Program(texts, {"eng.wrapper": "eng/wrapper.py", "eng.decorators": "eng/decorators.py",
                              "eng.model": "eng/model.py"}, None)
    assert compiled(program, "eng.model", "Model.forward")
    assert not compiled(program, "eng.model", "Eager.forward")


def test_the_hosts_data_made_a_tensor_and_copied_up_is_no_launch() -> None:
    """`torch.tensor(list)` makes a tensor on the host, and its `.to(device)` copies it up: transfers, not kernels
    (sglang's batch preparation was listed as ten launches of them). Arithmetic on a host tensor is host work; on
    the uploaded tensor it launches, and a `.to()` of a GPU tensor to a dtype is a cast."""
    src = b'''import torch

def prepare(lens, dev, x: torch.Tensor):
    lens_cpu = torch.tensor(lens, dtype=torch.int64)
    lens_gpu = lens_cpu.to(dev, non_blocking=True)
    tops = torch.tensor(lens, dtype=torch.float, pin_memory=True).to(dev, non_blocking=True)
    total_cpu = lens_cpu + 1
    y = lens_gpu + 1
    z = (y * tops).to(torch.float16)
'''
    [run] = file_glue(src)["prepare"]
    assert run["ops"] == ["+", "*"], run["ops"]
    assert [c["op"] for c in run["casts"]] == [".to"], run["casts"]  # (a launch where the dtype differs)
    assert file_glue(src.replace(b"    y = lens_gpu + 1\n    z = (y * tops).to(torch.float16)\n", b"")) == {}
