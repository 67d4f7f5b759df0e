"""Target YAML: every bundled target loads, and every mistake is one line naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from smithbot.config import TARGETS_DIR, ConfigError, get_target, load_models, load_target, target_names


def test_bundled_targets_load_with_the_required_presets() -> None:
    assert target_names() == ["demo", "engram", "lmdeploy", "sglang", "vllm"]
    required = {"llama3-8b", "qwen3-8b", "qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b"}
    for name in target_names():
        t = get_target(name)
        assert {m.name for m in t.models} >= required
        assert min(t.decode_batch) == 1 and max(t.decode_batch) == 256
        assert min(t.prefill_tokens) == 512 and max(t.prefill_tokens) == 16384
        assert t.conventions.max_open_prs >= 1 and t.conventions.formatter
    isort = get_target("sglang").conventions.formatter[1]
    assert (isort.run, isort.check) == (("isort", "-q", "--profile", "black"), ("--check-only",))
    assert "DLBlas" in (TARGETS_DIR / "engram.yaml").read_text()
    m = load_models()["deepseek-v3"]
    assert (m.hidden, m.experts, m.top_k, m.vocab) == (7168, 256, 8, 129280)
    assert (m.layers, m.architecture, m.config["topk_method"]) == (61, "DeepseekV3ForCausalLM", "noaux_tc")
    # every bundled target says what its runtime helpers stand for in an extracted task, and how it serves by
    # default: the GPU, and, for the engines, the per-step code the call graph starts at
    for name in target_names():
        t = get_target(name)
        assert t.stubs.get("is_hip") is False and t.serving.gpu == "sm90"
    for name in ("sglang", "lmdeploy", "vllm"):
        assert get_target(name).serving.entries and get_target(name).serving.gpu == "sm90"


@pytest.mark.parametrize("edit, key, words", [
    (lambda s: s + "colour: blue\n", "colour", "unknown key"),
    (lambda s: s.replace("name: sglang\n", ""), "name", "missing required key"),
    (lambda s: s.replace("models: [llama3-8b,", "models: [llama9-1t,"), "models[0]", "unknown model preset"),
    (lambda s: s.replace("decode_batch: [1,", "decode_batch: [-1,"), "regimes.decode_batch[0]", "positive integer"),
    (lambda s: s.replace("max_open_prs: 2", "max_open_prs: lots"), "conventions.max_open_prs", "positive integer"),
    (lambda s: s.replace("test_style: unittest", "test_style: nose"), "conventions.test_style", "must be one of"),
    # a PR style is a template in templates/pr/, not a name the code knows
    (lambda s: s.replace("pr_style: sglang", "pr_style: tgi"), "conventions.pr_style",
     "must name a PR template in templates/pr/ (dlblas, generic, lmdeploy, sglang, vllm), not 'tgi'"),
    # a formatter is the repository's command line, not a name the code knows the arguments of
    (lambda s: s.replace("formatter: [{run: [black, -q]}", "formatter: [black"), "conventions.formatter[0]",
     "must be a mapping"),
    (lambda s: s.replace("formatter: [{run: [black, -q]}", "formatter: [{run: []}"), "conventions.formatter[0].run",
     "must name the formatter's command"),
    (lambda s: s.replace("hints:\n", "hints:\n  hot_pathz: []\n"), "hints.hot_pathz", "unknown key"),
    # input specs are checked when the YAML loads: a misspelt key, dtype or value kind is an error, not a guess
    (lambda s: s.replace("q_extend: {shape: [tokens, heads,", "q_extend: {shapes: [tokens, heads,"),
     "inputs.extend_attention_fwd.q_extend.shapes", "unknown key"),
    (lambda s: s.replace('init: "arange:tokens // seqs"', 'init: "arrange:tokens // seqs"'),
     "inputs.extend_attention_fwd.qo_indptr.init", "unknown kind 'arrange'"),
    (lambda s: s.replace("qo_indptr: {shape: [seqs + 1], dtype: int32", "qo_indptr: {shape: [seqs + 1], dtype: i32"),
     "inputs.extend_attention_fwd.qo_indptr.dtype", "unknown dtype 'i32'"),
    (lambda s: s.replace("_models: [qwen3-30b-a3b, deepseek-v3, mixtral-8x7b]",
                         "_models: [qwen3-30b-a3b, deepseek-v4, mixtral-8x7b]", 1),
     "inputs.ep_scatter._models[1]", "unknown model preset 'deepseek-v4'"),
    (lambda s: s.replace("q_extend: {shape: [tokens, heads, head_dim]}", "q_extend: {dtype: bf16}"),
     "inputs.extend_attention_fwd.q_extend", "needs one of shape"),
    (lambda s: s.replace("serving:\n", "serving:\n  defaults: {}\n"), "serving.defaults", "unknown key"),
    # the phase is evaluated from the engine's forward-mode enum, never declared by predicate name
    (lambda s: s.replace("serving:\n", "serving:\n  phases: {is_decode: decode}\n"), "serving.phases", "unknown key"),
    (lambda s: s.replace("model_settings: {deepseek-v3:", "model_settings: {deepseek-v9:"),
     "serving.model_settings.deepseek-v9", "names no model preset"),
    (lambda s: s.replace('entries: ["sglang.srt.managers.scheduler:Scheduler.get_next_batch_to_run"',
                         'entries: ["sglang.srt.managers.scheduler.Scheduler.get_next_batch_to_run"'),
     "serving.entries[0]", "must be module:Qualified.name"),
    (lambda s: s.replace("packages: {flashinfer: installed", "packages: {flashinfer: maybe"), "serving.packages.flashinfer",
     "must be installed or missing"),
    (lambda s: s.replace("\nstubs: {", "\nstubs: [{").replace('is_available()"}}}}', 'is_available()"}}}}]'), "stubs",
     "must map runtime helpers"),
    (lambda s: s.replace("serving:\n", "serving:\n  engine: {name: X, flag: --x, default: [gpt-9]}\n"),
     "serving.engine.default", "'gpt-9' names no model preset"),
    (lambda s: s.replace("serving:\n", "serving:\n  engine: {name: X}\n"), "serving.engine.flag", "missing required key"),
])
def test_bad_target_yaml(tmp_path: Path, edit, key: str, words: str) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(edit((TARGETS_DIR / "sglang.yaml").read_text()))
    with pytest.raises(ConfigError) as info:
        load_target(f)
    assert str(info.value).startswith(f"{f}: {key}: ") and words in str(info.value)


def test_the_spec_language_is_the_input_code_s() -> None:
    """The dtypes and init kinds a YAML spec may name are exactly those the input code writes out."""
    import inspect
    import re

    from smithbot.types import INIT_KINDS, SPEC_DTYPES
    from smithbot.inputs import code

    assert set(SPEC_DTYPES) == set(code.TORCH_NAMES) | {"act"}
    source = inspect.getsource(code._Writer.tensor)
    kinds = set(re.findall(r'init\[0\] == "(\w+)"', source))
    for group in re.findall(r"init\[0\] in \(([^)]*)\)", source):
        kinds |= set(re.findall(r'"(\w+)"', group))
    assert set(INIT_KINDS) == kinds


def test_malformed_yaml_and_unknown_target(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text("name: [x\n")
    with pytest.raises(ConfigError, match=r"t.yaml: line \d+: malformed YAML"):
        load_target(f)
    # a launcher given two specs: the later would silently win, so the file is refused, naming both lines
    f.write_text("name: t\ninputs:\n  rmsnorm:\n    x: {shape: [tokens]}\n  rmsnorm:\n    x: {shape: [4]}\n")
    with pytest.raises(ConfigError, match=r"t.yaml: line 5: malformed YAML: duplicate key 'rmsnorm' "
                                          r"\(first on line 3\)"):
        load_target(f)
    with pytest.raises(ConfigError, match="unknown target 'tgi' .*known: demo, engram, lmdeploy, sglang, vllm"):
        get_target("tgi")
