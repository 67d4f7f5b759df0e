"""LLM-written inputs: the real openai client against a scripted OpenAI-compatible server on loopback, and the real
self-check deciding whether what the model wrote is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from smithbot import api
from smithbot.inputs.llm import harness_of
from tests.conftest import git_repo
from tests.evolve.helpers import ScriptedOpenAI, llm_config
from tests.extract.test_extract import _check_against_reference, _with_reference

ENGINE = '''"""A launcher whose plan object no inference can guess."""
import torch
import triton
import triton.language as tl


@triton.jit
def _apply_plan_kernel(X, Rows, Out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    src = tl.load(Rows + row)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    tl.store(Out + row * n_cols + cols, tl.load(X + src * n_cols + cols, mask=mask), mask=mask)


def apply_plan(x, plan):
    rows = plan.rows_for(x)
    out = torch.empty((rows.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    _apply_plan_kernel[(rows.shape[0],)](x, rows, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


@triton.jit
def _gather_rows_kernel(X, Rows, Out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    src = tl.load(Rows + row)
    tl.store(Out + row * n_cols + cols, tl.load(X + src * n_cols + cols, mask=mask), mask=mask)


def gather_rows(x, rows):
    assert x.shape[0] > 1000, "a table of at least 1001 rows"
    out = torch.empty((rows.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    _gather_rows_kernel[(rows.shape[0],)](x, rows, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
'''

TABLE = '''```python
import torch


def make_inputs(case, generator):
    n = 1001 + case["tokens"]
    x = torch.randn((n, case["hidden"]), generator=generator, device=generator.device).to(case["dtype"])
    return {"x": x, "rows": torch.randint(0, n, (case["tokens"],), generator=generator, device=generator.device)}
```
'''

GOOD = '''Here it is:
```python
import torch


class Plan:
    def __init__(self, rows):
        self.rows = rows

    def rows_for(self, x):
        return self.rows


def make_inputs(case, generator):
    dev = generator.device
    n = case["tokens"] + 5
    x = torch.randn((n, case["hidden"]), generator=generator, device=dev).to(case["dtype"])
    rows = torch.randint(0, n, (case["tokens"],), generator=generator, device=dev)
    return {"x": x, "plan": Plan(rows)}
```
'''

WRONG = "```python\nimport torch\n\n\ndef make_inputs(case, generator):\n    return {\"y\": torch.zeros(3)}\n```\n"

REFERENCE = '''

def reference(x, plan):
    return x[plan.rows]
'''


@pytest.fixture()
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SMITHBOT_TEST_KEY", "sk-test-secret")
    return git_repo(tmp_path / "engine", {"engine/__init__.py": "", "engine/plan.py": ENGINE})


def test_without_an_llm_the_parameter_is_named(engine: Path, tmp_path: Path) -> None:
    [row] = api.extract(str(engine), "apply_plan", out=tmp_path / "task", source=str(engine))
    assert not row.extracted and "cannot infer an input for parameter 'plan' of apply_plan" in row.why
    assert not (tmp_path / "task").exists()


def test_the_llm_writes_inputs_the_self_check_accepts(engine: Path, tmp_path: Path) -> None:
    with ScriptedOpenAI([{"content": "I cannot help with that."}, {"content": GOOD}]) as server:
        cfg = llm_config(tmp_path / "cfg.yaml", server.url)
        [row] = api.extract(str(engine), "apply_plan", out=tmp_path / "task", source=str(engine), config=cfg)
    assert row.extracted and row.checked, row.why
    assert "inputs written by the LLM m1" in row.why
    first, second = (r["messages"][1]["content"] for r in server.requests)
    assert "cannot infer an input for parameter 'plan'" in first and "def apply_plan(x, plan):" in first
    assert "not accepted: the reply is not Python" in second  # the failed first answer is fed back
    harness = (tmp_path / "task" / "harness.py").read_text()
    assert harness.startswith('"""Inputs written by an LLM (m1)') and "class Plan" in harness
    assert all("sk-test-secret" not in r["messages"][1]["content"] for r in server.requests)
    _with_reference(tmp_path / "task", REFERENCE, {"name": "irregular-5x300", "regime": "prefill", "dtype": "fp32",
                                                   "dims": {"tokens": 5, "hidden": 300, "heads": 4, "kv_heads": 2,
                                                            "head_dim": 128, "intermediate": 512}})
    _check_against_reference(tmp_path / "task")


def test_inputs_the_baseline_fails_on_are_not_kept(engine: Path, tmp_path: Path) -> None:
    with ScriptedOpenAI([{"content": WRONG}]) as server:
        cfg = llm_config(tmp_path / "cfg.yaml", server.url)
        [row] = api.extract(str(engine), "apply_plan", out=tmp_path / "task", source=str(engine), config=cfg)
    assert len(server.requests) == 2
    assert not row.extracted and "LLM-written inputs failed 2 time(s)" in row.why and "unexpected keyword" in row.why
    assert not (tmp_path / "task").exists()


def test_the_llm_repairs_inferred_inputs_the_baseline_fails_on(engine: Path, tmp_path: Path) -> None:
    [row] = api.extract(str(engine), "gather_rows", out=tmp_path / "task", source=str(engine))
    assert row.extracted and not row.checked and "a table of at least 1001 rows" in row.why  # inferred, and wrong
    with ScriptedOpenAI([{"content": WRONG}, {"content": TABLE}]) as server:
        cfg = llm_config(tmp_path / "cfg.yaml", server.url)
        [row] = api.extract(str(engine), "gather_rows", out=tmp_path / "task", source=str(engine), config=cfg)
    assert row.checked and "inputs written by the LLM m1" in row.why, row.why
    first = server.requests[0]["messages"][1]["content"]
    assert "The current harness.py fails" in first and "a table of at least 1001 rows" in first
    assert "written by smithbot extract" in first  # the inferred harness, shown to the model


def test_what_the_model_writes_is_checked_before_it_runs() -> None:
    with pytest.raises(ValueError, match="imports os"):
        harness_of("```python\nimport os\n\ndef make_inputs(case, generator):\n    return {}\n```")
    with pytest.raises(ValueError, match="not Python"):
        harness_of("```python\ndef make_inputs(:\n```")
    assert harness_of(WRONG).startswith("import torch")
