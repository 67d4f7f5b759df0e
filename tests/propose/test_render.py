"""PR bodies in each target's style, the generated test and benchmark, cleaning, and the size limit."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from evaluator import EvalResult, load_task
from smithbot.config import get_target
from smithbot.evolve import tune
from smithbot.evolve.db import RunDB
from smithbot.propose.render import MAX_BODY, MAX_TEST_LINES, case_span, metadata, module_of, render, sanitize
from smithbot.verify import judge, judge_preview
from tests.evolve.helpers import TASKS

HEADINGS = {
    "sglang": ["Motivation", "Modifications", "Accuracy Tests", "Speed Tests and Profiling", "Checklist"],
    "lmdeploy": ["Motivation", "Modification", "BC-breaking (Optional)", "Use cases (Optional)", "Checklist"],
    "engram": ["Summary", "What changed", "Benchmark (Shape / Base / Opt / Speedup / GB/s)", "Correctness",
               "How this was made"],
    "demo": ["Summary", "What changed", "Benchmark", "Correctness", "How this was made"],
    # vLLM's .github/PULL_REQUEST_TEMPLATE.md sections
    "vllm": ["Purpose", "Test Plan", "Test Result"],
}


def _case(name: str, ratio: float, lo: float, hi: float) -> dict:
    return {"name": name, "method": "cuda_graph", "copies": 4, "l2_cold": True, "base_us": 10.0 * ratio,
            "base_p20_us": 0, "base_p80_us": 0, "cand_us": 10.0, "cand_p20_us": 0, "cand_p80_us": 0, "ratio": ratio,
            "ratio_ci": [lo, hi], "bytes": 1 << 20, "cand_gbps": 104.9, "base_gbps": 90.0, "cand_bw_fraction": 0.02}


@pytest.fixture()
def parts(tmp_path: Path) -> tuple:
    task = load_task(TASKS / "rmsnorm")
    src = task.kernel_path.read_text()
    ks = {k.name: k for k in tune.knobs(src)}
    with RunDB(tmp_path / "runs.db") as db:
        run = db.create_run(str(task.root), task.id, {"search": {}}, 0)
        cand = db.add_candidate(run.id, island=0, generation=1, proposer="tune", source_hash="abc123",
                                source=tune.set_knobs(src, {ks["BLOCK"].id: 1024}), status="promoted")
    cases = [_case("llama3-8b-decode-bs1", 1.31, 1.30, 1.32), _case("llama3-8b-prefill-4k", 1.10, 1.09, 1.11)]
    verdict = {"candidate": cand.id, "accepted": True, "speedup": 1.2, "ci": [1.19, 1.21], "cases": cases}
    verification = {"backend": "cuda", "seeds": 6, "rounds": 30,
                    "env": {"gpu": "NVIDIA H200", "driver": "580", "torch": "2.11", "triton": "3.6"}}
    return task, cand, verification, verdict


@pytest.mark.parametrize("target", sorted(HEADINGS))
def test_body_follows_the_target_template(parts: tuple, target: str) -> None:
    task, cand, verification, verdict = parts
    r = render(get_target(target), task, verification, verdict, cand, ("pkg/ops.py::rmsnorm",), (), [], "--- a\n+++ b\n",
               "0123456789abcdef")
    assert re.findall(r"^## (.+)$", r.body, flags=re.M) == HEADINGS[target]
    assert "| `llama3-8b-decode-bs1` | 13.10 | 10.00 | 1.310× [1.300, 1.320] | 105 |" in r.body
    assert "`BLOCK` 256 → 1024" in r.body and "NVIDIA H200" in r.body and "0123456789ab" in r.body
    assert "Closing this PR unmerged stops this variant for good" in r.body
    assert metadata(r.body) == {"base_commit": "0123456789abcdef", "kernel": "smithbot/tasks/rmsnorm/kernel.py::_rmsnorm_kernel",
                                "smithbot": "0.1.0", "task": "rmsnorm", "variant": "abc123"}
    tree = ast.parse(r.test)
    assert r.bench == r.bench_path == ""  # no bundled target's kernel PRs carry a benchmark script
    # sglang's CI collects test/registered files by a module-level register_cuda_ci(...) call, read from the AST
    registered = [n for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
                  and getattr(n.value.func, "id", "") == "register_cuda_ci"]
    assert len(registered) == (target == "sglang")
    assert f"from {module_of(task.provenance.definitions[1].path)} import rmsnorm as rmsnorm_new" in r.test
    assert ("class TestRmsnorm(unittest.TestCase)" in r.test) == (target == "sglang")
    assert ("class TestRmsnorm:" in r.test and "@pytest.fixture(params=CASES" in r.test) == (target == "lmdeploy")
    assert r.test_path.endswith("test_rmsnorm.py")


def test_the_generated_test_never_replaces_a_test_file_the_target_has(parts: tuple) -> None:
    """lmdeploy already has `tests/pytorch/kernel/test_rms_norm.py`: the PR adds its test beside it, and the body's
    reproduce commands name the new file."""
    task, cand, verification, verdict = parts
    target = get_target("lmdeploy")
    own = target.conventions.test_layout.format(op="rmsnorm", area="tasks")
    r = render(target, task, verification, verdict, cand, ("pkg/ops.py::rmsnorm",), (), [], "", "abc",
               {own, own.replace(".py", "_reference.py")}.__contains__)
    assert r.test_path == own.replace(".py", "_reference2.py")
    assert f"python -m pytest {r.test_path}" in r.body and f"python -m pytest {own} " not in r.body
    assert render(target, task, verification, verdict, cand, (), (), [], "", "abc").test_path == own


@pytest.mark.parametrize("target", sorted(HEADINGS))
def test_a_launch_config_change_gets_a_short_test_of_the_original_launcher(parts: tuple, target: str) -> None:
    task, cand, verification, verdict = parts
    test = render(get_target(target), task, verification, verdict, cand, (), (), [], "", "abc").test
    assert len(test.splitlines()) <= MAX_TEST_LINES["tune"]
    module = module_of(task.provenance.definitions[1].path)
    assert f"from {module} import _rmsnorm_kernel\n" in test and "def _rmsnorm_kernel" not in test
    assert "def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6)" in test and "BLOCK=256" in test
    assert "import triton" not in test  # the kept launcher needs neither triton nor tl
    # the bundled harness's make_inputs, not its reference; the tolerances of this kernel's dtypes only
    assert "def make_inputs(case, generator):" in test and "def reference" not in test
    assert 'TOLERANCES = {"float32": (1e-05, 0.0001, 1e-05), "bfloat16": (0.01, 0.016, 0.005)}' in test
    assert 'DEVICE = "cuda" if torch.cuda.is_available() else "cpu"' in test
    assert 'RUNS = torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1"' in test


def test_a_rewritten_kernel_keeps_the_whole_original_code(parts: tuple) -> None:
    task, cand, verification, verdict = parts
    rewrite = dataclasses.replace(cand, proposer="llm", response="Fused the two passes.")
    test = render(get_target("demo"), task, verification, verdict, rewrite, (), (), [], "", "abc").test
    assert "@triton.jit\ndef _rmsnorm_kernel(" in test and "import " + module_of(task.provenance.definitions[1].path) \
        not in test
    assert len(test.splitlines()) <= MAX_TEST_LINES["kernel"]


def test_a_benchmark_script_only_where_the_target_has_that_convention(parts: tuple) -> None:
    task, cand, verification, verdict = parts
    sglang = get_target("sglang")
    with_bench = dataclasses.replace(sglang, conventions=dataclasses.replace(sglang.conventions, benchmark=True))
    r = render(with_bench, task, verification, verdict, cand, (), (), [], "", "abc")
    ast.parse(r.bench)
    assert r.bench_path.endswith("bench_rmsnorm.py") and "do_bench_cudagraph" in r.bench
    assert len(r.bench.splitlines()) <= 120  # what a benchmark in a kernel PR runs to
    assert f"python {r.bench_path}" in r.body and f"script: `{r.bench_path}`" in r.body
    plain = render(sglang, task, verification, verdict, cand, (), (), [], "", "abc")
    assert "bench_" not in plain.body and "script:" not in plain.body


def test_size_limit_truncates_the_details_first(parts: tuple) -> None:
    task, cand, verification, verdict = parts
    patch = "+" + "x" * 200_000 + "\n"
    r = render(get_target("sglang"), task, verification, verdict, cand, (), (), [], patch, "abc")
    assert len(r.body) <= MAX_BODY and "truncated: the full diff is in the branch" in r.body
    assert "## Speed Tests and Profiling" in r.body


def test_a_commit_carries_a_dco_sign_off_where_the_target_asks_for_one() -> None:
    from smithbot.propose.pipeline import commit_message

    signed = commit_message("[Kernel] Faster rms_norm", get_target("vllm"))
    assert signed.splitlines()[0] == "[Kernel] Faster rms_norm"
    assert signed.endswith("\n\nSigned-off-by: smithbot <smithbot@users.noreply.github.com>")
    assert "Signed-off-by" not in commit_message("[Kernel] Faster rms_norm", get_target("sglang"))


def test_the_speedup_span_gives_one_figure_where_its_range_rounds_to_one() -> None:
    ratios = {"a-decode-bs1": 1.153, "a-decode-bs64": 1.041, "irregular-decode-bs3": 1.1, "a-prefill-4k": 2.134,
              "b-prefill-4k": 2.1339}
    assert case_span(ratios) == "decode cases 1.04–1.15×; prefill cases 2.13×"
    assert case_span({"a-prefill-4k": 0.99}) == "prefill cases 0.99×"


def test_sanitize_removes_pings_and_references() -> None:
    assert sanitize("thanks @alice and @bob-2, see #123 and org/repo#45; email a@b.c; `@keep`") == \
        "thanks alice and bob-2, see 123 and org/repo#45; email a@b.c; `@keep`"


def test_judge_rejects_any_slower_case_even_with_a_better_geomean() -> None:
    base = dict(candidate="c.py", task="t", backend="cuda", stage="verdict", speedup=1.3, speedup_ci=(1.25, 1.35))
    slower = EvalResult(status="promoted", cases=(_case("a", 1.9, 1.8, 2.0), _case("b", 0.97, 0.96, 0.98)), **base)
    ok, why = judge(slower, 0.02)
    assert not ok and why.startswith("1 case(s) slower than the baseline beyond their interval and the 1% noise floor, "
                                     "worst b at 0.970x")
    fine = EvalResult(status="promoted", cases=(_case("a", 1.9, 1.8, 2.0), _case("b", 0.99, 0.97, 1.01)), **base)
    assert judge(fine, 0.02) == (True, "faster on the geomean, and on no case slower")
    within_noise = EvalResult(status="promoted", cases=(_case("a", 1.9, 1.8, 2.0), _case("b", 0.995, 0.993, 0.997)),
                              **base)
    assert judge(within_noise, 0.02)[0] is True  # 0.3% below 1, inside the between-run noise floor
    flat = EvalResult(status="correct", cases=(_case("a", 1.01, 0.99, 1.03),), **{**base, "speedup_ci": (0.99, 1.03)})
    assert judge(flat, 0.02)[0] is False and "not shown faster" in judge(flat, 0.02)[1]
    # the geomean clears, but one case it claims faster won too few of its rounds (lmdeploy's renormalize glue on an
    # H100, once rejected as "not shown faster: geomean interval starts at 1.848")
    lucky = EvalResult(status="correct", cases=({**_case("a", 1.9, 1.8, 2.0), "sign_p": 1e-6},
                                                {**_case("b", 1.9, 1.85, 1.95), "sign_p": 0.03}), **base)
    ok, why = judge(lucky, 0.02)
    assert not ok and why.startswith("not shown faster on every case it claims: 1 case(s) with an interval above 1.02 "
                                     "whose rounds fail the sign test (p >= 0.005), first b at 1.900x [1.850, 1.950], "
                                     "p 0.03")


def test_judge_rejects_a_gain_on_no_models_shape() -> None:
    """Faster only on the synthetic ragged shapes, unchanged on every model's: no serving step gains, so nothing is
    proposed (on the H200, lmdeploy's `_fused_noaux_tc_kernel` once reached 1.039x this way); one model shape gaining
    is enough."""
    base = dict(candidate="c.py", task="t", backend="cuda", stage="verdict", speedup=1.04, speedup_ci=(1.027, 1.047))
    ragged = tuple({**_case(name, 1.2, 1.15, 1.25), "sign_p": 1e-6}  # each won all its rounds
                   for name in ("irregular-decode-bs3", "verify-irregular-decode-tokens5"))
    model = _case("deepseek-v3-decode-bs64", 1.0, 0.99, 1.01)
    ok, why = judge(EvalResult(status="promoted", cases=(*ragged, model), **base), 0.02)
    assert not ok and why.startswith("faster only on shapes no model has (irregular-decode-bs3, "
                                     "verify-irregular-decode-tokens5)")
    gains = {**_case("deepseek-v3-prefill-4k", 1.2, 1.15, 1.25), "sign_p": 1e-6}
    assert judge(EvalResult(status="promoted", cases=(*ragged, model, gains), **base), 0.02)[0] is True


def test_a_fusion_on_the_interpreter_is_judged_on_correctness_and_fewer_launches() -> None:
    """No GPU: a fusion's timing on the interpreter (native torch against interpreted Triton) decides nothing; a
    correct candidate with fewer launches than the glue on every case is a preview, whatever that timing said."""
    base = dict(candidate="c.py", task="t", backend="interpreter", stage="verdict", speedup=0.02,
                speedup_ci=(0.01, 0.03))

    def cases(*counts: tuple[int, int]) -> tuple[dict, ...]:
        return tuple({**_case(f"c{i}", 0.02, 0.01, 0.03), "launches": list(n)} for i, n in enumerate(counts))

    ok, why = judge_preview(EvalResult(status="correct", cases=cases((5, 1), (6, 1)), **base))
    assert ok and why.startswith("correct on all 2 verification cases, launching fewer kernels a call than the glue "
                                 "(5 -> 1, 6 -> 1); speed not judged")
    ok, why = judge_preview(EvalResult(status="correct", cases=cases((5, 1), (2, 2)), **base))
    assert not ok and why == "launches no fewer kernels than the glue on 1 case(s): c1 (2 -> 2)"
    wrong = EvalResult(status="incorrect", reason="mismatch", detail="case c0 seed 0: output 0 differs", **base)
    assert judge_preview(wrong) == (False, "incorrect: mismatch case c0 seed 0: output 0 differs")
    uncounted = EvalResult(status="correct", cases=(_case("c0", 0.02, 0.01, 0.03),), **base)
    assert judge_preview(uncounted) == (False, "the evaluator counted no kernel launches for this fusion")


def test_motivation_names_the_hot_spot(parts: tuple) -> None:
    task, cand, verification, verdict = parts
    hot = dataclasses.replace(task, hotness={
        "presets": ["qwen3-30b-a3b"], "default_path": "Qwen3MoeForCausalLM.forward → … → rmsnorm → _rmsnorm_kernel",
        "measured": "12.5% of the GPU time of a decode step on qwen3-30b-a3b (batch 8)"})
    body = render(get_target("sglang"), hot, verification, verdict, cand, (), (), [], "", "abc").body
    motivation = body.split("## Motivation")[1].split("##")[0]
    assert "It takes 12.5% of the GPU time of a decode step on qwen3-30b-a3b (batch 8)." in motivation
    assert "Default serving runs it for qwen3-30b-a3b: `Qwen3MoeForCausalLM.forward → … → rmsnorm" in motivation
    plain = render(get_target("sglang"), task, verification, verdict, cand, (), (), [], "", "abc").body
    assert "Default serving" not in plain  # no claim where scan made none


def test_motivation_says_which_presets_run_the_engine_by_default(parts: tuple) -> None:
    """lmdeploy serves Qwen3-MoE and Mixtral on TurboMind unless asked for its PyTorch engine, where the Triton code
    is: a proposal for those presets says so, and one for DeepSeek-V3 says it is the default there."""
    task, cand, verification, verdict = parts
    target = get_target("lmdeploy")
    for presets, said in ((["qwen3-30b-a3b", "mixtral-8x7b"], "qwen3-30b-a3b, mixtral-8x7b run another engine by "
                           "default and reach this code only with `--backend pytorch`."),
                          (["deepseek-v3"], "This code runs in the PyTorch engine. Serving picks it by default for "
                           "deepseek-v3.")):
        hot = dataclasses.replace(task, hotness={"presets": presets, "default_path": "X.forward → k"})
        motivation = render(target, hot, verification, verdict, cand, (), (), [], "", "abc").body.split(
            "## Motivation")[1].split("##")[0]
        assert said in motivation, motivation
    assert target.serving.engine is not None and get_target("sglang").serving.engine is None  # one engine: no note


def test_the_body_shows_what_this_kernel_uses_and_reproduces_from_the_prs_files(parts: tuple) -> None:
    """Tolerances only for the kernel's dtypes; the table only for the presets that run it, one row a shape; an
    end-to-end estimate labelled as such; reproduction from the PR's own files, never the bot's run or disk."""
    task, cand, verification, verdict = parts
    twin = dataclasses.replace(task.cases[0], name="qwen3-8b-decode-bs1")  # the same shape under another preset
    hot = dataclasses.replace(task, cases=(*task.cases, twin), hotness={
        "presets": ["llama3-8b", "qwen3-8b"], "share": 0.125,
        "measured": "12.5% of the GPU time of a decode step on llama3-8b (batch 8)"})
    cases = [*verdict["cases"], _case("qwen3-8b-decode-bs1", 1.30, 1.29, 1.31), _case("mixtral-8x7b-decode-bs1", 1.0,
                                                                                     0.99, 1.01)]
    body = render(get_target("sglang"), hot, verification, {**verdict, "cases": cases}, cand, (), (), [], "",
                  "abc").body
    assert "bfloat16 atol" in body and "float32 atol" in body and "float8" not in body and " float16 atol" not in body
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == ["llama3-8b-decode-bs1", "llama3-8b-prefill-4k"]
    assert "(also qwen3-8b-decode-bs1)" in rows[0]  # mixtral does not run it: not shown
    assert "the geomean covers all 4 verified cases" in body
    assert ("End to end (an estimate from an engine's profile, not a measurement): the kernel takes 12.5% of the GPU "
            "time of a decode step on llama3-8b (batch 8); at 1.200× that step would take 97.92% of its time, 2.08% "
            "less (Amdahl's law).") in body
    assert "python -m pytest test/registered/" in body and "smithbot verify" not in body and "/tmp" not in body
    plain = render(get_target("sglang"), task, verification, verdict, cand, (), (), [], "", "abc").body
    assert "End to end: not measured (no engine run), and no profile to estimate it from" in plain
    assert "Shown:" not in plain and "Per step:" not in plain  # no decode case at batch 64: no saving claimed


def test_the_body_says_what_the_change_saves_per_step(parts: tuple) -> None:
    """The verified time saved per launch at the decode case of batch 64, times the launches a step the call graph
    counts, and at the other decode batches that moved; a share from a table measured from tasks is the share of the measured part, and no end-to-end claim."""
    task, cand, verification, verdict = parts
    bs64 = dataclasses.replace(task.cases[0], name="llama3-8b-decode-bs64")
    hot = dataclasses.replace(task, cases=(*task.cases, bs64), hotness={
        "presets": ["llama3-8b"], "per_step": {"llama3-8b": 32}, "share": 0.25,
        "measured": "25.0% of the GPU time of a decode step on llama3-8b (batch 64), from extracted tasks"})
    cases = [*verdict["cases"], _case("llama3-8b-decode-bs64", 1.5, 1.4, 1.6)]  # 15.0 -> 10.0 µs a launch
    body = render(get_target("sglang"), hot, verification, {**verdict, "cases": cases}, cand, (), (), [], "",
                  "abc").body
    assert ("Per step: saves 160.0 µs per decode step of llama3-8b at batch 64 (32 launches × 5.00 µs, from the "
            "verified times of `llama3-8b-decode-bs64`: 15.00 → 10.00 µs).") in body
    assert ("Its share: 25.0% of the GPU time of a decode step on llama3-8b (batch 64), from extracted tasks: the part "
            "of the step `smithbot profile --from-tasks` timed, not the whole step; end to end is not measured") in body
    assert "Amdahl" not in body
    same = [*verdict["cases"], _case("llama3-8b-decode-bs64", 1.002, 0.99, 1.01)]  # within its interval: no claim
    flat = render(get_target("sglang"), hot, verification, {**verdict, "cases": same}, cand, (), (), [], "",
                  "abc").body
    assert ("Per step: no measurable change per decode step of llama3-8b at batch 64 (32 launches; "
            "`llama3-8b-decode-bs64`: 10.02 → 10.00 µs, ratio interval [0.990, 1.010]).") in flat
    # the batch that did move is said too (lmdeploy's noaux retune: unchanged at 64, 1.31x at batch 1)
    assert ("At batch 1 it saves 99.2 µs per decode step (32 launches × 3.10 µs, `llama3-8b-decode-bs1`: 13.10 → "
            "10.00 µs).") in flat
    cpu = render(get_target("sglang"), hot, {**verification, "backend": "interpreter"}, {**verdict, "cases": cases},
                 cand, (), (), [], "", "abc").body
    assert "Per step:" not in cpu  # interpreter times say nothing of a GPU's step


def test_the_title_carries_an_area_tag_and_says_config_only() -> None:
    from smithbot.propose.render import title

    task = load_task(TASKS / "rmsnorm")
    verdict = {"speedup": 1.2345, "cases": [{}, {}]}
    assert title(task, verdict, True) == "[Perf] Retune the launch config of rmsnorm (config only): 1.23x on 2 model shapes"
    assert title(task, verdict, False) == "[Kernel] Faster rmsnorm: 1.23x on 2 model shapes"
    assert title(task, verdict, False, interpreter=True) == \
        "[Kernel] Faster rmsnorm: 1.23x on the Triton interpreter (CPU) on 2 model shapes"
    moe = load_task(TASKS / "moe_routing")
    assert title(moe, verdict, True).startswith("[MoE] Retune the launch config of ")


def test_the_pr_says_formatted_only_with_the_formatters_that_ran() -> None:
    """vLLM's hooks are ruff twice (its formatter and its import sorting): the PR names ruff once when it ran, and
    claims no formatting when it was not installed."""
    from smithbot.propose.render import _formatted

    vllm = get_target("vllm")
    assert _formatted(vllm, []) == "ruff"
    assert _formatted(vllm, ["`ruff` is not installed here, so the changed files were not formatted with it"]) == ""


def test_a_flat_entry_is_titled_by_its_kernel_and_no_empty_tolerance_table_is_shown(parts: tuple) -> None:
    """vLLM's slot-mapping PR was titled after ``BlockTable_compute_slot_mapping_flat``, a stand-in extraction wrote,
    and its evidence read "the tolerance table (per output dtype: )" for a kernel whose code names no float dtype."""
    from smithbot.propose.render import title

    task, cand, verification, verdict = parts
    flat = dataclasses.replace(task, entry="BlockTable_compute_slot_mapping_flat",
                               description="_compute_slot_mapping_kernel (other) from vllm/v1/worker/block_table.py")
    assert title(flat, {"speedup": 1.69, "cases": [{}]}, False) == \
        "[Kernel] Faster _compute_slot_mapping_kernel: 1.69x on 1 model shapes"
    ints = load_task(TASKS / "decode_metadata")
    body = render(get_target("vllm"), ints, verification, verdict, cand, (), (), [], "", "abc").body
    assert "tolerance table" not in body and "with the evaluator's tolerance for its dtype, integer outputs " \
        "bit-exact" in body
    assert "with the tolerance table (per output dtype: float32 atol" in render(
        get_target("vllm"), task, verification, verdict, cand, (), (), [], "", "abc").body


def test_the_pr_names_the_launched_kernel_not_a_helper_listed_before_it(parts: tuple) -> None:
    """lmdeploy's rms_norm task lists ``_unsqueeze_to_3d`` first among its definitions; its PR called that the
    kernel. The kernel is the jitted definition the entry launches."""
    task, cand, verification, verdict = parts
    path = task.provenance.definitions[0].path
    helper = dataclasses.replace(task.provenance.definitions[0], name="rmsnorm_shape", qualname="rmsnorm_shape")
    listed = dataclasses.replace(task.provenance,
                                 definitions=(helper, *reversed(task.provenance.definitions)))
    r = render(get_target("lmdeploy"), dataclasses.replace(task, provenance=listed), verification, verdict, cand,
               ("pkg/ops.py::rmsnorm",), (), [], "--- a\n+++ b\n", "0123456789abcdef")
    assert metadata(r.body)["kernel"] == f"{path}::_rmsnorm_kernel"
    assert "`_rmsnorm_kernel`" in r.body and "rmsnorm_shape" not in r.body
