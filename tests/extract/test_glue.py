"""Torch glue as a function of its inputs (smithbot/extract/glue.py): parameters from what the run reads, outputs from
what later code reads and what the run stores or writes in place; the function computes what the run computed."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch

from smithbot.extract.glue import GlueError, glue_function

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

    # the fake engine's routing glue computes weights that nothing reads: its outputs are unknown
    [row] = api.extract(engine, "glue:FusedMoE.forward")
    assert not row.extracted and "outputs are unknown" in row.why
    with pytest.raises(ConfigError, match="ambiguous: glue:FA3Backend.init_metadata:14, "
                                          "glue:FA3Backend.init_metadata:21"):
        api.extract(engine, "glue:FA3Backend.init_metadata")
    with pytest.raises(ConfigError, match="no torch glue of a function 'FA3Backend.missing'"):
        api.extract(engine, "glue:FA3Backend.missing")
    # the decode metadata's inputs are only inferred by name, and disagree in size: the self-check says so
    [row] = api.extract(engine, "glue:FA3Backend.init_metadata:14")
    assert row.extracted and not row.checked and "preparing the baseline failed" in row.why
