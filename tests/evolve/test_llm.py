"""The llm proposer through the real openai client against a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evaluator import load_task
from smithbot import api
from smithbot.config import ConfigError, load_evolve_config
from smithbot.evolve.db import RunDB
from smithbot.evolve.proposers import Context, LLMProposer, Parent, ProposerError
from tests.evolve.helpers import ScriptedOpenAI, llm_config, planted_silu

GOOD = ('I will enlarge the first tile.\n<<<<<<< SEARCH\n        triton.Config({"BLOCK": 16}, num_warps=4),\n=======\n'
        '        triton.Config({"BLOCK": 512}, num_warps=4),\n>>>>>>> REPLACE\n')
BROKEN = "<<<<<<< SEARCH\n    this line is not in the program\n=======\n    x = 1\n>>>>>>> REPLACE"


@pytest.fixture()
def task(tmp_path: Path) -> Path:
    return planted_silu(tmp_path / "silu")


def _ctx(task: Path) -> Context:
    t = load_task(task)
    return Context(t, Parent(None, t.kernel_path.read_text()), rng=random.Random(0))


def _proposer(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch, **llm: object) -> LLMProposer:
    monkeypatch.setenv("SMITHBOT_TEST_KEY", "sk-test-secret")
    return LLMProposer(load_evolve_config(llm_config(tmp_path / "cfg.yaml", url, **llm)), sleep=lambda s: None)


def test_good_diff_with_usage_cost_and_prompt(tmp_path: Path, task: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedOpenAI([{"content": GOOD, "usage": [1000, 200]}]) as srv:
        prop = _proposer(tmp_path, srv.url, monkeypatch).propose(_ctx(task))
    assert prop.error == "" and '"BLOCK": 512' in prop.source
    assert (prop.tokens_in, prop.tokens_out, prop.model) == (1000, 200, "m1")
    assert prop.cost == pytest.approx((1000 * 1000.0 + 200 * 2000.0) / 1e6)
    sent = srv.requests[0]
    assert sent["model"] == "m1" and sent["messages"][0]["role"] == "system"
    assert "EVOLVE-BLOCK" in sent["messages"][0]["content"] and "_silu_and_mul_kernel" in sent["messages"][1]["content"]
    assert srv.headers[0]["authorization"] == "Bearer sk-test-secret"


@pytest.mark.parametrize("script, why", [
    ([{"content": BROKEN}], "the SEARCH text is not in the EVOLVE-BLOCK"),
    ([{"content": "```python\ndef half(", "finish": "length"}], "cut at max_tokens"),
    ([{"content": ""}], "empty response"),
    ([{"garbage": True}], "garbage from the endpoint"),
    ([{"status": 400}], "refused the request: HTTP 400"),
    ([{"status": 503}], "failed 3 times: InternalServerError"),
    ([{"sleep": 3.0, "content": GOOD}], "failed 3 times: APITimeoutError"),
])
def test_failures_are_recorded_not_raised(tmp_path: Path, task: Path, monkeypatch: pytest.MonkeyPatch,
                                          script: list, why: str) -> None:
    with ScriptedOpenAI(script) as srv:
        prop = _proposer(tmp_path, srv.url, monkeypatch, timeout_s=0.5).propose(_ctx(task))
    assert prop.source is None and why in prop.error


def test_429_then_success(tmp_path: Path, task: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedOpenAI([{"status": 429}, {"status": 429}, {"content": GOOD}]) as srv:
        prop = _proposer(tmp_path, srv.url, monkeypatch).propose(_ctx(task))
    assert prop.error == "" and len(srv.requests) == 3


def test_missing_key_and_bad_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SMITHBOT_TEST_KEY", raising=False)
    cfg = load_evolve_config(llm_config(tmp_path / "cfg.yaml", "http://127.0.0.1:9/v1"))
    with pytest.raises(ProposerError, match="SMITHBOT_TEST_KEY is not set"):
        LLMProposer(cfg)
    (tmp_path / "bad.yaml").write_text("llm:\n  base_url: http://x\n  api_key_env: K\n  models: []\n")
    with pytest.raises(ConfigError, match="bad.yaml: llm.models: must be a non-empty list"):
        load_evolve_config(tmp_path / "bad.yaml")
    (tmp_path / "bad2.yaml").write_text("llm: [unclosed\n")
    with pytest.raises(ConfigError, match="bad2.yaml"):
        load_evolve_config(tmp_path / "bad2.yaml")


def test_evolve_with_llm_stops_on_rising_cost(tmp_path: Path, task: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMITHBOT_TEST_KEY", "sk-test-secret")
    script = [{"content": BROKEN, "usage": [100, 10]}, {"content": GOOD, "usage": [200, 50]},
              {"garbage": True}, {"content": GOOD.replace("512", "1024"), "usage": [5000, 1000]}]
    with ScriptedOpenAI(script) as srv:
        cfg = llm_config(tmp_path / "cfg.yaml", srv.url)
        status = api.evolve(str(task), proposer="llm", config=str(cfg), budget_usd=5.0, backend="interpreter",
                            islands=1, db=tmp_path / "runs.db")
    assert status.message.startswith("dollar budget reached")
    with RunDB(tmp_path / "runs.db") as db:
        cands = db.candidates(status.run_id)
        statuses = [c.status for c in cands]
        assert cands[0].proposer == "baseline" and cands[0].correct and "failed_proposal" in statuses
        assert any(c.correct and c.proposer == "llm" for c in cands)
        assert db.totals(status.run_id)["cost"] >= 5.0
        assert all(c.prompt.startswith("[system]") for c in cands if c.proposer == "llm" and c.status != "failed_proposal")


def test_token_budget(tmp_path: Path, task: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMITHBOT_TEST_KEY", "sk-test-secret")
    with ScriptedOpenAI([{"content": BROKEN, "usage": [600, 100]}]) as srv:
        status = api.evolve(str(task), proposer="llm", config=str(llm_config(tmp_path / "cfg.yaml", srv.url)),
                            budget_tokens=1500, backend="interpreter", islands=1, db=tmp_path / "runs.db")
    assert status.message.startswith("token budget reached (") and status.message.endswith(" of 1500)")
    assert 1500 <= status.tokens <= 1500 + 2 * 700  # at most the proposals already in flight overshoot


def test_fusion_prompt_asks_for_a_fused_triton_replacement() -> None:
    from smithbot.evolve.proposers import Prompter
    from tests.evolve.helpers import TASKS

    t = load_task(TASKS / "decode_metadata")
    system, user = Prompter().render(Context(t, Parent(None, t.kernel_path.read_text())), "full")
    assert "The baseline is plain PyTorch. Replace it with one or a few fused Triton kernels" in system
    assert "```python" in system and "# Task `decode_metadata` (fusion)" in user


def test_a_fusion_tasks_prompt_carries_its_glue_its_heat_and_the_inductor_seed(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo engine's glue as a fusion task, with Inductor's output recorded beside it (the fixture made on the
    H200): the request the scripted server receives names where the glue sits and its TODO, how many launches a step
    it costs, the original code and the standalone Inductor kernels; the answer, a fused kernel, becomes the
    candidate."""
    import shutil

    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    [row] = api.extract("demo", "glue:LlamaModel.forward", out=tmp_path / "glue", check=False)
    from smithbot.config import TARGETS_DIR

    shutil.copy(TARGETS_DIR / "demo" / "inductor" / "LlamaModel.forward.json", row.out / "inductor.json")
    fused = ("```python\n@triton.jit\ndef _clamp_kernel(L, P, OL, OP, n, BLOCK: tl.constexpr):\n"
             "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    m = i < n\n"
             "    lens = tl.maximum(tl.load(L + i, mask=m), 1)\n"
             "    pos = tl.maximum(tl.minimum(tl.load(P + i, mask=m), (lens - 1).to(tl.int64)), 0)\n"
             "    tl.store(OL + i, lens, mask=m)\n    tl.store(OP + i, pos, mask=m)\n\n\n"
             "def LlamaModel_forward_glue(lens, positions):\n"
             "    out_lens = torch.empty_like(lens, dtype=torch.int32)\n    out_pos = torch.empty_like(positions)\n"
             "    n = lens.numel()\n"
             "    _clamp_kernel[(triton.cdiv(n, 256),)](lens, positions, out_lens, out_pos, n, BLOCK=256)\n"
             "    return (out_lens, out_pos)\n```\n")
    with ScriptedOpenAI([{"content": fused}]) as srv:
        prop = _proposer(tmp_path, srv.url, monkeypatch, edit_formats={"full": 1.0}).propose(_ctx(row.out))
    user = srv.requests[0]["messages"][1]["content"]
    assert "## The glue to fuse" in user
    assert "`LlamaModel.forward()` in `minengine/models/llama.py`, lines 46-48" in user
    assert "launches 4 small kernels a serving step" in user and "TODO: fuse these small ops" in user
    assert "lens = lens.clamp(min=1).to(torch.int32)" in user  # the original code
    assert "torch.compile (Inductor) turns it into these Triton kernels" in user
    assert "def _forward_kernel(" in user  # the seed, standalone
    assert prop.error == "" and "_clamp_kernel[(triton.cdiv(n, 256),)]" in prop.source
