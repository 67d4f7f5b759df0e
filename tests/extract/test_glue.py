"""Torch glue as a function of its inputs (smithbot/extract/glue.py): parameters from what the run reads, outputs from
what later code reads and what the run stores or writes in place; the function computes what the run computed."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from smithbot.extract.glue import GlueError, glue_function
from smithbot.inputs.harness import plan_of
from smithbot.types import TensorSpec

ROOT = Path(__file__).resolve().parents[2]

# a decode step's attention metadata, the way engines build it: attributes of a batch object in, attributes of a
# metadata object out, with a TODO asking for a kernel
ENGINE = textwrap.dedent('''\
    import torch
    import torch.nn.functional as F

    PAGE = 1


    class Metadata:
        pass


    class Backend:
        def init_forward_metadata(self, forward_batch):
            metadata = Metadata()
            metadata.max_seq_len_k = int(forward_batch.seq_lens_cpu.max())
            # TODO: fuse these small ops into one kernel
            metadata.cache_seqlens_int32 = forward_batch.seq_lens.to(torch.int32)
            metadata.cu_seqlens_k = F.pad(torch.cumsum(forward_batch.seq_lens, dim=0, dtype=torch.int32), (1, 0))
            metadata.page_table = forward_batch.req_to_token_pool.req_to_token[
                forward_batch.req_pool_indices, : metadata.max_seq_len_k
            ]
            self.forward_metadata = metadata


    def positions_and_slots(seq_lens, req_pool_indices, req_to_token, out_slots):
        seq_lens = seq_lens
        positions = seq_lens.to(torch.int64) - 1
        rows = req_to_token[req_pool_indices]
        out_slots.copy_(rows.gather(1, positions[:, None]).squeeze(1))
        scratch = positions * 2
        return positions + PAGE


    def running_sum(xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return total
''')


def lines_of(text: str, first: str, last: str) -> tuple[int, int]:
    lines = ENGINE.splitlines()
    a = next(i for i, l in enumerate(lines, 1) if first in l)
    b = next(i for i, l in enumerate(lines, 1) if i >= a and last in l)
    return a, b


def build(fn: str, first: str, last: str, name: str = "glue"):
    a, b = lines_of(ENGINE, first, last)
    g = glue_function(ast.parse(ENGINE), fn, a, b, name)
    scope: dict = {"torch": torch, "F": torch.nn.functional, "PAGE": 1}
    exec(g.source, scope)
    return g, scope[name]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_attribute_chains_in_stored_attributes_out_and_the_result_unchanged(seed: int) -> None:
    g, fn = build("Backend.init_forward_metadata", "metadata.cache_seqlens_int32 =", "]")
    assert g.params == ("seq_lens", "req_to_token", "req_pool_indices", "max_seq_len_k")
    assert g.origins["req_to_token"] == "forward_batch.req_to_token_pool.req_to_token"
    assert g.origins["max_seq_len_k"] == "metadata.max_seq_len_k"  # made before the run: an input
    assert g.outputs == ("metadata.cache_seqlens_int32", "metadata.cu_seqlens_k", "metadata.page_table")
    assert g.inplace == ()
    # the engine's own method, run on a batch object, against the function on the same tensors
    gen = torch.Generator().manual_seed(seed)
    bs, pool, width = 5 + seed, 9, 33  # irregular sizes
    seq_lens = torch.randint(1, width, (bs,), generator=gen)
    req_to_token = torch.randperm(pool * width, generator=gen).view(pool, width).to(torch.int32)
    req_pool_indices = torch.randperm(pool, generator=gen)[:bs]
    batch = type("B", (), {"seq_lens": seq_lens, "seq_lens_cpu": seq_lens, "req_pool_indices": req_pool_indices,
                           "req_to_token_pool": type("P", (), {"req_to_token": req_to_token})})
    scope: dict = {}
    exec(compile(ast.parse(ENGINE), "engine", "exec"), scope)
    backend = scope["Backend"]()
    backend.init_forward_metadata(batch)
    want = backend.forward_metadata
    got = fn(seq_lens, req_to_token, req_pool_indices, int(seq_lens.max()))
    for out, attr in zip(got, ("cache_seqlens_int32", "cu_seqlens_k", "page_table")):
        ref = getattr(want, attr)
        assert out.dtype == ref.dtype and torch.equal(out, ref), attr


def test_outputs_are_what_later_code_reads_and_inputs_written_in_place() -> None:
    g, fn = build("positions_and_slots", "positions = seq_lens", "scratch = positions * 2")
    assert g.params == ("seq_lens", "req_to_token", "req_pool_indices", "out_slots")
    assert g.outputs == ("positions",)  # `rows` and `scratch` are not read after the run
    assert g.inplace == ("out_slots",)
    req_to_token = torch.arange(40).view(4, 10)
    out = torch.full((3,), -1)
    positions = fn(torch.tensor([3, 1, 10]), req_to_token, torch.tensor([2, 0, 3]), out)
    assert positions.tolist() == [2, 0, 9]
    assert out.tolist() == [22, 0, 39]


def test_glue_whose_outputs_cannot_be_known_is_refused_with_the_reason() -> None:
    with pytest.raises(GlueError, match="nothing after the run reads"):
        build("positions_and_slots", "scratch = positions * 2", "scratch = positions * 2")
    with pytest.raises(GlueError, match="a For statement in the run"):
        build("running_sum", "total = xs[0]", "total = total + x")
    with pytest.raises(GlueError, match="not a run of statements"):  # starts inside a statement
        build("Backend.init_forward_metadata", "forward_batch.req_pool_indices,", "]")
    with pytest.raises(GlueError, match="no function"):
        glue_function(ast.parse(ENGINE), "Backend.missing", 1, 2, "glue")


def test_a_run_through_an_if_keeps_both_branches_and_its_tests_inputs() -> None:
    """Scan carries a run through an ``if`` once per branch; the task keeps the statement whole, so the branch the
    defaults do not take is still computed as the engine computes it."""
    routed = "import torch\n\ndef route(x, k, groups):\n    w = torch.softmax(x, -1)\n    if groups:\n" \
             "        w = w * 2\n    else:\n        w = torch.topk(w, k).values\n    return w\n"
    g = glue_function(ast.parse(routed), "route", 4, 8, "glue")
    assert g.params == ("x", "groups", "k") and g.outputs == ("w",)
    engine: dict = {}
    exec(routed, engine)
    exec("import torch\n" + g.source, engine)
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(3))
    for groups in (True, False):
        assert torch.equal(engine["glue"](x, groups, 3), engine["route"](x, 3, groups))


def test_a_run_that_ends_its_function_returns_what_it_returns_and_a_rebound_input_is_a_local_after() -> None:
    g, fn = build("positions_and_slots", "seq_lens = seq_lens", "return positions + PAGE")
    assert g.params == ("seq_lens", "req_to_token", "req_pool_indices", "out_slots")
    assert g.outputs == ("return",) and g.inplace == ("out_slots",)
    out = torch.full((2,), -1)
    assert fn(torch.tensor([2, 5]), torch.arange(20).view(2, 10), torch.tensor([1, 0]), out).tolist() == [2, 5]
    assert out.tolist() == [11, 4]


def test_the_demo_engines_glue_becomes_a_fusion_task_that_passes_its_self_check(tmp_path, monkeypatch) -> None:
    """Offline, end to end: `smithbot extract demo glue:LlamaModel.forward` finds the run on the default path,
    writes a fusion task whose baseline is those lines, and its self-check runs the baseline on every case."""
    import importlib.util

    import yaml

    from smithbot import api
    from tests.conftest import ROOT

    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    [row] = api.extract("demo", "glue:LlamaModel.forward", out=tmp_path / "task")
    assert row.extracted and row.checked, row.why
    assert "runs on every case" in row.why
    task = yaml.safe_load((tmp_path / "task" / "task.yaml").read_text())
    assert task["kind"] == "fusion" and task["entry"] == "LlamaModel_forward_glue"
    engine = (ROOT / "targets/demo" / task["provenance"]["glue"]["path"]).read_text().splitlines()
    first, last = task["provenance"]["glue"]["lines"]
    assert [line.strip() for line in engine[first - 1:last]] == [
        "lens = lens.clamp(min=1).to(torch.int32)",
        "positions = torch.minimum(positions, (lens - 1).to(positions.dtype))",
        "positions = positions.clamp(min=0)"]
    assert any("TODO: fuse" in t for t in task["hotness"]["todos"])
    spec = importlib.util.spec_from_file_location("glue_task", tmp_path / "task" / "kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for seed in range(3):  # irregular batches, zero lengths included
        gen = torch.Generator().manual_seed(seed)
        lens = torch.randint(0, 50, (7 + seed,), generator=gen)
        positions = torch.randint(0, 80, (7 + seed,), generator=gen)
        got_lens, got_pos = mod.LlamaModel_forward_glue(lens, positions)
        assert torch.equal(got_lens, lens.clamp(min=1).int())
        assert torch.equal(got_pos, torch.minimum(positions, lens.clamp(min=1) - 1).clamp(min=0))


def test_glue_that_cannot_be_a_task_is_reported_with_the_reason(engine: str) -> None:
    from smithbot import api
    from smithbot.config import ConfigError

    # the fake engine's routing glue runs through its helper `publish`, whose store into `lens_buf` (indexed by x)
    # is the run's output: it becomes a task, and the self-check says why its inputs, inferred by name, fail
    [row] = api.extract(engine, "glue:FusedMoE.forward")
    assert row.extracted and not row.checked and "tensors used as indices must be long" in row.why
    with pytest.raises(ConfigError, match="ambiguous: glue:FA3Backend.init_metadata:15, "
                                          "glue:FA3Backend.init_metadata:22"):
        api.extract(engine, "glue:FA3Backend.init_metadata")
    with pytest.raises(ConfigError, match="no torch glue of a function 'FA3Backend.missing'"):
        api.extract(engine, "glue:FA3Backend.missing")
    # the decode metadata's inputs are only inferred by name, and disagree in size: the self-check says so
    [row] = api.extract(engine, "glue:FA3Backend.init_metadata:15")
    assert row.extracted and not row.checked and "preparing the baseline failed" in row.why


def test_a_glue_tasks_inputs_have_the_dtype_and_shape_traced_through_the_engine(engine: str, tmp_path) -> None:
    """The gate's bias is an fp32 parameter of 8 experts (``FusedMoE.__init__``), the logits the bf16 output of a
    linear layer, the bias's scale the module's constant 2.5: the task's inputs are those, not what the names or the
    code's use would suggest (inference alone makes the scale 1.0)."""
    import yaml

    from smithbot import api

    [row] = api.extract(engine, "glue:noaux_route", out=tmp_path / "task")
    assert row.extracted and row.checked, row.why
    task = yaml.safe_load((tmp_path / "task" / "task.yaml").read_text())
    # the linear layer's output: its rows' count is the weight's, the leading dims are not known
    assert task["provenance"]["glue"]["traced"] == {"gate_logits": {"dtype": "bf16", "tail": [8]},
                                                    "bias": {"dtype": "fp32", "shape": [8]},
                                                    "bias_scale": {"value": 2.5}}
    harness = (tmp_path / "task" / "harness.py").read_text()
    assert "'bias_scale': 2.5" in harness and "evaluated in eng's code: bias_scale" in harness
    plan = plan_of(harness)
    assert plan is not None and plan.specs["bias"] == TensorSpec((8,), "fp32")
    assert plan.specs["gate_logits"] == TensorSpec(("tokens", 8), "bf16")


def test_a_fused_call_runs_only_at_the_constants_its_task_pinned(engine: str, tmp_path) -> None:
    """``noaux_route``'s scale is serving's constant 2.5, so the task times the kernel at 2.5 only (and a generated
    kernel may bake it in): put back, the fused call runs where ``bias_scale == 2.5`` and the engine's lines stay
    for any other scale; the task and the PR say so."""
    import shutil

    import yaml

    from evaluator import load_task
    from smithbot import api
    from smithbot.propose.reinsert import reinsert_glue

    [row] = api.extract(engine, "glue:noaux_route", out=tmp_path / "task")
    assert row.extracted, row.why
    task_yaml = yaml.safe_load((tmp_path / "task" / "task.yaml").read_text())
    assert task_yaml["provenance"]["glue"]["pinned"] == {"bias_scale": 2.5}
    assert "Taken where serving has it: `bias_scale == 2.5`." in task_yaml["description"]
    root = tmp_path / "checkout"
    shutil.copytree(yaml.safe_load(Path(engine).read_text())["repo"], root)
    kernel = (tmp_path / "task" / "kernel.py").read_text()
    done = reinsert_glue(load_task(tmp_path / "task"), kernel, root, "eng/kernels", "# Copyright (c) Eng.")
    assert "where `bias_scale == 2.5` (as serving has it)" in done.notes[0]
    [module] = done.added
    assert (root / module.split("::")[0]).read_text().startswith('# Copyright (c) Eng.\n"""fused_')  # (the target's file header)
    patched = (root / "eng/layers.py").read_text()
    ast.parse(patched)
    head = patched.index("    if bias_scale == 2.5:\n")
    assert head < patched.index("= fused_") < patched.index("    else:\n", head)
    assert "        scores = torch.add(gate_logits.sigmoid(), bias, alpha=bias_scale)" in patched


def test_a_linear_layers_output_is_as_wide_as_its_out_features(engine: str, tmp_path) -> None:
    """The router's softmax glue reads ``self.gate(x)``, a ``torch.nn.Linear(16, 8)`` of the router's: the logits
    are 8 wide whatever the model's dtype, not the hidden size that the name ``logits`` would get by default."""
    import yaml

    from smithbot import api

    [row] = api.extract(engine, "glue:route_softmax", out=tmp_path / "task")
    assert row.extracted and row.checked, row.why
    task = yaml.safe_load((tmp_path / "task" / "task.yaml").read_text())
    assert task["provenance"]["glue"]["traced"] == {"logits": {"tail": [8]}, "picks": {"value": 2}}
    assert "'logits': {'shape': ['tokens', 8]," in (tmp_path / "task" / "harness.py").read_text()


def test_a_traced_vector_of_undecided_length_has_an_entry_per_token() -> None:
    """A step's vector whose length the code does not decide (a batch's sequence lengths) gets the case's tokens; a
    matrix with an undecided leading dim keeps only its dtype; a linear layer's output its last dims, with its dtype
    or without; a vector of no known dtype nor length says nothing."""
    from smithbot.inputs.specs import traced_specs

    got = traced_specs({"lens": "self.lens", "w": "self.w", "x": "x", "y": "y", "z": "z"},
                       {"self.lens": {"dtype": "int64", "shape": [None]}, "self.w": {"dtype": "float32",
                                                                                     "shape": [None, 8]},
                        "x": {"dtype": "bfloat16", "shape": ["...", 8]}, "y": {"dtype": None, "shape": ["...", 4]},
                        "z": {"dtype": None, "shape": [None]}})
    assert got == {"lens": {"dtype": "int64", "shape": ["tokens"]}, "w": {"dtype": "fp32"},
                   "x": {"dtype": "bf16", "tail": [8]}, "y": {"tail": [4]}}


# A fused candidate for the demo's glue, written for this test: one Triton kernel instead of six torch launches (the
# EVOLVE block of the task's kernel.py; what is outside it stays the baseline's)
FUSED = '''
@triton.jit
def _lens_positions_kernel(lens_ptr, pos_ptr, lens_out, pos_out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    lens = tl.maximum(tl.load(lens_ptr + offs, mask=mask, other=1), 1)
    pos = tl.load(pos_ptr + offs, mask=mask, other=0)
    pos = tl.maximum(tl.minimum(pos, (lens - 1).to(tl.int64)), 0)
    tl.store(lens_out + offs, lens.to(tl.int32), mask=mask)
    tl.store(pos_out + offs, pos, mask=mask)


def LlamaModel_forward_glue(lens, positions):
    n = lens.numel()
    lens_out = torch.empty(n, dtype=torch.int32, device=lens.device)
    pos_out = torch.empty_like(positions)
    _lens_positions_kernel[(triton.cdiv(n, 256),)](lens, positions, lens_out, pos_out, n, BLOCK=256)
    return lens_out, pos_out

'''


def test_a_fused_candidate_is_judged_on_the_glue_task_and_put_back_in_place_of_the_lines(tmp_path, monkeypatch):
    """The evaluator checks a fused Triton candidate against the extracted glue, and re-insertion puts it where the
    demo keeps its kernels and replaces the glue's lines with one call that assigns what they assigned."""
    import shutil

    from evaluator import Evaluator, load_task
    from evaluator.task import split_evolve
    from smithbot import api
    from smithbot.propose.reinsert import ReinsertError, reinsert_glue
    from tests.conftest import ROOT

    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    [row] = api.extract("demo", "glue:LlamaModel.forward", out=tmp_path / "task")
    assert row.checked, row.why
    head, _, tail = split_evolve((tmp_path / "task" / "kernel.py").read_text())
    fused = f"{head}# EVOLVE-BLOCK-START\n{FUSED}# EVOLVE-BLOCK-END\n{tail}"
    cand, broken = tmp_path / "fused.py", tmp_path / "broken.py"
    cand.write_text(fused)
    broken.write_text(fused.replace("pos = tl.maximum(tl.minimum(pos, (lens - 1).to(tl.int64)), 0)", ""))
    with Evaluator(tmp_path / "task", backend="interpreter") as ev:
        ev.prepare()
        result = ev.submit(cand).result()
        wrong = ev.submit(broken).result()  # the clamp of positions forgotten: caught
    assert result.correct, result.why
    assert wrong.status == "incorrect", wrong.why

    engine = tmp_path / "engine"
    shutil.copytree(ROOT / "targets" / "demo", engine)
    task = load_task(tmp_path / "task")
    done = reinsert_glue(task, fused, engine, "minengine/kernels")
    assert done.changed_files == ("minengine/models/llama.py", "minengine/kernels/fused_lens_positions.py")
    patched = (engine / "minengine/models/llama.py").read_text()
    assert "from minengine.kernels.fused_lens_positions import fused_lens_positions\n" in patched
    assert "        lens, positions = fused_lens_positions(lens, positions)\n        x = self.embed(ids)" in patched
    assert "TODO: fuse" not in patched  # done by this change
    assert "positions.clamp(min=0)" not in patched and "EVOLVE-BLOCK" not in (
        engine / "minengine/kernels/fused_lens_positions.py").read_text()
    # the same lines, once replaced, are no longer the glue: a second insertion refuses with the reason
    with pytest.raises(ReinsertError, match="no longer the glue the task was made from"):
        reinsert_glue(task, fused, engine, "minengine/kernels")

    # the PR: its title and Motivation name the glue, and its generated test (the glue kept as the reference, the
    # fused kernel imported from the patched engine) passes on the patched engine and fails on a wrong kernel
    from smithbot.config import get_target
    from smithbot.evolve.db import RunDB
    from smithbot.propose.pipeline import kernels_dir
    from smithbot.propose.render import render, title

    target = get_target("demo")
    assert kernels_dir(target, task.provenance.glue["path"]) == "minengine/kernels"
    with RunDB(tmp_path / "runs.db") as db:
        run = db.create_run(str(task.root), task.id, {"search": {}}, 0)
        cand = db.add_candidate(run.id, island=0, generation=1, proposer="llm", source_hash="f00d", source=fused,
                                status=result.status)
    verdict = {"candidate": cand.id, "accepted": True, "speedup": result.speedup, "ci": list(result.speedup_ci),
               "cases": list(result.cases)}  # the interpreter's numbers: the test below checks values, not speed
    verification = {"backend": "interpreter", "seeds": 6, "rounds": 7, "env": result.env}
    r = render(target, task, verification, verdict, cand, done.replaced, done.added, [], "", "abc")
    assert title(task, verdict, config_only=False, source=fused).startswith(
        "[Kernel] Fuse the torch glue of LlamaModel.forward into one kernel")
    assert "The torch glue of `LlamaModel.forward()` (minengine/models/llama.py:46-48)" in r.body
    assert "TODO: fuse these small ops" in r.body
    assert "torch.compile" not in r.body  # the interpreter's verification has no torch.compile bar
    # on the GPU a fusion's verification also times the original glue under torch.compile (the EvalResult's
    # `compiled`): the table gains its column, and the body says how the new kernel fares against it. These bar numbers
    # are made up for the rendering: here torch.compile is twice eager, far ahead of the interpreter's kernel
    bar = {"mode": "max-autotune-no-cudagraphs", "geomean": 2.0, "ci": [1.9, 2.1],
           "cases": [{"name": c["name"], "us": c["base_us"] / 2, "speedup": 2.0} for c in result.cases]}
    gpu = render(target, task, {**verification, "backend": "cuda"}, {**verdict, "compiled": bar}, cand, done.replaced,
                 done.added, [], "", "abc")
    assert "| eager µs | torch.compile µs | new µs | speedup over eager [95% CI] | new vs torch.compile |" in gpu.body
    assert "torch.compile (`max-autotune-no-cudagraphs`) of the original code is 2.00× eager" in gpu.body
    assert "It does not beat torch.compile: compiling this code would do as well." in gpu.body
    failed = {"mode": "max-autotune-no-cudagraphs", "error": "Unsupported: data-dependent branch"}
    gpu = render(target, task, {**verification, "backend": "cuda"}, {**verdict, "compiled": failed}, cand,
                 done.replaced, done.added, [], "", "abc")
    assert "of the original code failed, so the engine cannot compile this path as it stands: Unsupported" in gpu.body
    assert "from minengine.kernels.fused_lens_positions import fused_lens_positions" in r.test
    test_file = engine / r.test_path
    test_file.parent.mkdir(parents=True, exist_ok=True)
    test_file.write_text(r.test)
    env = {**os.environ, "PYTHONPATH": str(engine), "TRITON_INTERPRET": "1"}
    run_test = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
    ok = subprocess.run(run_test, cwd=engine, env=env, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout[-2000:]
    kernel_file = engine / "minengine/kernels/fused_lens_positions.py"
    kernel_file.write_text(kernel_file.read_text().replace("tl.maximum(tl.minimum(pos, (lens - 1).to(tl.int64)), 0)",
                                                           "tl.minimum(pos, lens.to(tl.int64))"))
    bad = subprocess.run(run_test, cwd=engine, env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0, bad.stdout[-2000:]


def test_a_glue_tasks_cases_are_those_of_the_presets_that_run_it(engine: str, tmp_path) -> None:
    """Aimed at qwen3-8b, the attention metadata's glue carries that preset alone, and its task's GPU cases are
    qwen3-8b's, not the first preset's (a fusion task of DeepSeek-V3's router once carried Qwen3-MoE's and
    Mixtral's shapes)."""
    import yaml

    from smithbot import api
    from smithbot.extract.pipeline import extract_glue_site

    result = api.scan(engine, model="qwen3-8b")
    site = next(f for f in result.fusion if f.function == "FA3Backend.init_metadata")
    assert set(site.presets) == {"qwen3-8b"}
    row = extract_glue_site(result, site, tmp_path / "task", tmp_path, False, 60.0)
    assert row.extracted, row.why
    cases = yaml.safe_load((tmp_path / "task" / "task.yaml").read_text())["cases"]
    gpu = [c["name"] for c in cases if not c.get("interpreter")]
    assert gpu and all(name.startswith("qwen3-8b-") for name in gpu), gpu


def test_a_run_whose_results_nothing_reads_is_no_task() -> None:
    """Weights computed and dropped, no input written: what the run's outputs are cannot be told."""
    src = """import torch

def route(x):
    probs = torch.softmax(x, dim=-1)
    w, ids = torch.topk(probs, 2)
    w = w / w.sum(dim=-1, keepdim=True)
    return x
"""
    with pytest.raises(GlueError, match="nothing after the run reads what it computes, and it writes no input"):
        glue_function(ast.parse(src), "route", 4, 6, "route_glue")


def test_an_if_that_serving_decides_is_the_branch_it_takes_unless_the_run_made_what_it_reads() -> None:
    """FA3's context-parallel padding, in small: serving decides `cp_active(batch) and self.cp_size > 1` false, so the
    glue is the run without that branch, and the test's inputs are no parameters. A test that reads what the run
    computed before it (`lens.max() > 8`) is not the value serving decided before the run: it stays whole."""
    src = textwrap.dedent('''\
        import torch

        def cp_active(batch):
            return batch.cp

        class Backend:
            def init(self, batch, meta):
                lens = batch.seq_lens.to(torch.int32)
                meta.max_k = batch.max_k
                if cp_active(batch) and self.cp_size > 1:
                    meta.max_k += self.cp_size
                meta.cu = torch.cumsum(lens, dim=0)
                if lens.max() > 8:
                    meta.cu = meta.cu * 2
                meta.table = batch.table[:, : meta.max_k]
    ''')
    test = "cp_active(batch) and self.cp_size > 1"
    g = glue_function(ast.parse(src), "Backend.init", 8, 15, "glue", {test: False, "lens.max() > 8": True})
    assert g.folded == ((test, False),)
    assert "cp_size" not in g.source and "cp_active" not in g.source and "if lens.max() > 8:" in g.source
    assert g.params == ("seq_lens", "max_k", "table")
    assert g.outputs == ("meta.max_k", "meta.cu", "meta.table")
    engine: dict = {}
    exec(src, engine)
    exec("import torch\n" + g.source, engine)
    for seed, n in ((0, 5), (1, 9)):
        lens = torch.randint(1, 12, (n,), generator=torch.Generator().manual_seed(seed))
        table = torch.arange(n * 16).view(n, 16)
        batch = type("Batch", (), {"seq_lens": lens, "max_k": 7, "table": table, "cp": False})()
        meta = type("Meta", (), {})()
        backend = engine["Backend"]()
        backend.cp_size = 1
        backend.init(batch, meta)
        max_k, cu, tab = engine["glue"](lens, 7, table)
        assert max_k == meta.max_k and torch.equal(cu, meta.cu) and torch.equal(tab, meta.table)
    unfolded = glue_function(ast.parse(src), "Backend.init", 8, 15, "glue")
    assert unfolded.folded == () and {"batch", "cp_size"} <= set(unfolded.params)


def test_a_glue_task_takes_the_branch_serving_decides_and_its_proposal_keeps_the_engines_lines_for_the_rest(
        engine: str, tmp_path) -> None:
    """The fake engine's routing glue runs on through `if _is_hip:` (a HIP kernel's launch, false on CUDA): its task
    is the run without that branch and says so; put back, the fused call runs where serving's test holds, and the
    engine's own lines stay for the other case, where the HIP branch is taken."""
    import shutil

    import yaml

    from evaluator import load_task
    from smithbot import api
    from smithbot.propose.reinsert import reinsert_glue

    [row] = api.extract(engine, "glue:FusedMoE.forward", out=tmp_path / "task")
    assert row.extracted, row.why
    task_yaml = yaml.safe_load((tmp_path / "task" / "task.yaml").read_text())
    assert task_yaml["provenance"]["glue"]["folded"] == [["_is_hip", False]]
    assert "Taken where serving has it: `not _is_hip`." in task_yaml["description"]
    kernel = (tmp_path / "task" / "kernel.py").read_text()
    assert "hip_moe_kernel" not in kernel and "_is_hip" not in kernel

    root = tmp_path / "checkout"
    shutil.copytree(yaml.safe_load(Path(engine).read_text())["repo"], root)
    before = (root / "eng/layers.py").read_text()
    done = reinsert_glue(load_task(tmp_path / "task"), kernel, root, "eng/kernels")
    assert "where `not _is_hip` (as serving has it); the original lines stay" in done.notes[0]
    patched = (root / "eng/layers.py").read_text()
    ast.parse(patched)
    call = next(line for line in patched.splitlines() if "fused_" in line and "= fused_" in line)
    assert patched.index("        if not _is_hip:\n") < patched.index(call) < patched.index("        else:\n")
    # under the else `_is_hip` holds: the HIP branch's lines stand there without their `if`, the rest as they were
    hip = before.splitlines()[59:63]
    assert hip[0] == "            probs = torch.softmax(x, dim=-1)" and patched.count("if _is_hip:") == 0
    kept = [line for line in before.splitlines()[63:68] if line.strip()]
    else_block = patched.splitlines()[patched.splitlines().index("        else:"):]
    at = else_block.index(hip[0])
    assert else_block[at:at + 4] == hip  # one level out, then one in under the else
    assert all(("    " + line) in else_block for line in kept)


def test_a_table_the_glue_reads_through_an_index_is_gathered_and_its_size_is_not_what_a_call_moves() -> None:
    """`req_to_token[req_pool_indices, :max_k]` reads the rows the batch picks, not the pool: the evaluator's byte
    count (and so the copy-bandwidth roof that decides whether a pick has room left) leaves the table out, and
    counts the rows in what the call returns. A table also read whole is not gathered."""
    from evaluator.timing import default_bytes

    src = textwrap.dedent('''\
        import torch

        def init(batch, pool, meta):
            lens = batch.seq_lens.to(torch.int32)
            meta.table = pool.req_to_token[batch.req_pool_indices, : batch.max_k]
            meta.cu = torch.cumsum(lens, dim=0)
            meta.total = pool.weights.sum() + pool.weights[batch.req_pool_indices].sum()
    ''')
    g = glue_function(ast.parse(src), "init", 4, 7, "glue")
    assert g.gathered == ("req_to_token",)
    assert "weights" in g.params and "weights" not in g.gathered
    pool = torch.zeros(4096, 8192, dtype=torch.int32)
    idx = torch.tensor([3, 7])
    rows = pool[idx, :100]
    args = {"seq_lens": torch.tensor([5, 9]), "req_to_token": pool, "req_pool_indices": idx}
    whole = default_bytes(args, (rows,))
    assert default_bytes(args, (rows,), g.gathered) == whole - pool.numel() * 4 == 2 * 8 + 2 * 8 + 2 * 100 * 4


def test_where_a_fused_glue_applies_is_written_as_a_person_would_and_wrapped_as_black_would() -> None:
    """The folded tests, each as taken: one not taken is negated down to its comparisons (De Morgan), and the `if`
    a proposal writes is split an operand a line where one line is too wide."""
    from smithbot.extract.glue import served_condition
    from smithbot.propose.reinsert import _if_head

    cp = "not is_cp_v2_active(batch) and self.attn_cp_size > 1 and (batch.extend_num_tokens is not None)"
    cond = served_condition([[cp, False]])
    assert cond == "is_cp_v2_active(batch) or self.attn_cp_size <= 1 or batch.extend_num_tokens is None"
    assert served_condition([["_is_hip", False], ["a or b == 2", False], ["x in ys", True]]) == \
        "not _is_hip and not a and b != 2 and x in ys"
    for value in (False, True):  # the same truth as the test it negates, whatever the values
        for attn_cp_size in (1, 2):
            scope = {"is_cp_v2_active": lambda b, v=value: v, "batch": type("B", (), {"extend_num_tokens": None}),
                     "self": type("S", (), {"attn_cp_size": attn_cp_size})}
            assert eval(cond, scope) == (not eval(cp, scope))
    assert _if_head("not _is_hip", 8) == ["if not _is_hip:"]
    assert _if_head(cond + " or (a and b)", 12) == [
        "if (", "    is_cp_v2_active(batch)", "    or self.attn_cp_size <= 1",
        "    or batch.extend_num_tokens is None", "    or (a and b)", "):"]


def test_a_width_each_preset_traces_differently_is_the_model_dim_it_equals_in_each() -> None:
    """A router's logits are 128 wide for Qwen3-MoE and 8 for Mixtral (each a linear layer's out_features): in both
    that is the experts count, so each preset's cases get their own; a dim no model dim matches in both (4) stays a
    number, and a width every preset traces alike stays the first preset's number."""
    from smithbot.config import load_models
    from smithbot.extract.build import _traced
    from smithbot.scan.fusion import FusionSite

    models = load_models()
    widths = {"qwen3-30b-a3b": (128, 4), "mixtral-8x7b": (8, 4)}

    def site(tails: dict[str, tuple[int, ...]]) -> FusionSite:
        return FusionSite("route", "m", "m.py", 1, 2, ("softmax", "topk"), 2, presets={
            p: {"inputs": {"logits": {"dtype": None, "shape": ["...", t[0]]},
                           "pair": {"dtype": "float32", "shape": ["...", *t]}}} for p, t in tails.items()})

    got = _traced(site(widths), {"x": "logits", "y": "pair"}, models)
    assert got == {"x": {"tail": ["experts"]}, "y": {"dtype": "fp32", "tail": ["experts", 4]}}
    same = {"qwen3-30b-a3b": (128, 4), "qwen3-8b": (128, 4)}
    assert _traced(site(same), {"x": "logits"}, models) == {"x": {"tail": [128]}}


def test_names_one_statement_binds_are_outputs_in_the_order_it_binds_them() -> None:
    """``w, ids = torch.topk(p, k)``: the outputs are (w, ids) whatever the hash seed, since the task's entry and the
    proposal's call, made in different processes, must agree (a set's order once made them differ)."""
    src = textwrap.dedent('''\
        import torch

        def route(x, k):
            p = torch.softmax(x, dim=-1)
            w, ids = torch.topk(p, k)
            return w.sum() + ids.sum()
        ''')
    code = ("import ast, sys; from smithbot.extract.glue import glue_function; "
            "print(glue_function(ast.parse(sys.stdin.read()), 'route', 4, 5, 'g').outputs)")
    got = {subprocess.run([sys.executable, "-c", code], input=src, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": str(seed)}, cwd=ROOT).stdout for seed in range(6)}
    assert got == {"('w', 'ids')\n"}


def test_a_request_table_beside_lengths_laid_over_the_rows_has_a_row_per_sequence() -> None:
    """FA3's prefill metadata reads the batch's sequence lengths (added up into offsets: a sequence per 8 rows of
    the case) and its request table (``req_pool_indices``, the paged-KV layout's): both are per request, so the
    table gets as many rows as the lengths, not one per row of the case."""
    from smithbot.inputs.specs import _one_layout

    table = {"layout": "paged_kv", "sizes": {"batch": "tokens", "context": 1024, "page": 1}}
    specs = {"lens": {"shape": ["tokens"], "init": "randint:1:8", "dtype": "int64"},
             "req_pool_indices": {**table, "field": "req_pool_indices"}}
    _one_layout(specs, {"lens"}, [], {"lens"}, [])
    assert specs["lens"]["shape"] == ["max(1, (tokens) // 8)"]
    assert specs["req_pool_indices"]["sizes"]["batch"] == "max(1, (tokens) // 8)"
    alone = {"req_pool_indices": {**table, "field": "req_pool_indices"}}  # a decode batch: a request per row
    _one_layout(alone, set(), [], set(), [])
    assert alone["req_pool_indices"]["sizes"]["batch"] == "tokens"
