"""The default-path call graph on a small engine written for these tests (``tests/program/engine.py``): which
kernels default serving reaches, how often, in which phase, and what a declared setting changes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from smithbot import api
from smithbot.config import ConfigError
from smithbot.extract.pipeline import extract_sites
from tests.conftest import scans_under_seeds


def by_name(result: api.ScanResult) -> dict:
    return {s.name: s for s in result.sites}


def assert_default(sites: dict, *names: str) -> None:
    """Each kernel is on the default path, with every test on it decided."""
    for name in names:
        assert sites[name].reach == "default" and not sites[name].undecided, (name, sites[name].reasons)


def assert_never(sites: dict, *cases: tuple[str, str]) -> None:
    """Each kernel is off every path, and says which test is decided against it."""
    for name, test in cases:
        s = sites[name]
        assert s.reach == "never" and f"`{test}` is decided against it" in s.reasons[-1], (name, s.reasons)


def test_default_path_kernels_and_how_often(engine: str) -> None:
    sites = by_name(api.scan(engine, model="llama3-8b"))
    rms = sites["rms_kernel"]
    assert rms.presets == ("llama3-8b",)
    # the builder the norm asks for by a constant (OpType.RMSNorm), inside the layer loop, in both phases
    assert rms.default_path.startswith("LlamaForCausalLM.forward") and rms.default_path.endswith(
        "rms_kernel (llama3-8b: per layer, prefill/decode)"), rms.default_path
    assert rms.reach == "default" and not rms.undecided
    assert {"decode, every step +2", "per layer (32 layers) +5.0"} <= set(rms.reasons)
    # the factory's class under the declared a2a backend: FusedMoE, not DeepEPMoE
    assert sites["moe_gemm_kernel"].presets == ("llama3-8b",) and not sites["deepep_kernel"].presets
    # per-step engine code: once per step, in decode only (a forward-mode test, called through a local that holds
    # the mode's method), through the registered backend
    meta = sites["decode_meta_kernel"]
    assert meta.presets and "(llama3-8b: once per step, decode)" in meta.default_path
    assert "ModelRunner.forward" in meta.default_path and "FA3Backend.init_metadata" in meta.default_path
    assert meta.reach == "default", meta.reasons  # `fb is not None`: the entry's caller passes the batch
    # what the defaults leave off the path: the other builder (and the base model's default layer, which would
    # launch it: LlamaModel hands its own layer type to the base constructor), the other attention backend, other
    # hardware
    for name in ("linear_kernel", "triton_decode_kernel", "rocm_rope_kernel", "hip_moe_kernel"):
        assert not sites[name].presets, name
    assert sites["hip_moe_kernel"].launches[0].fallback_only
    # a method attribute set in __init__: what a method no walk reaches (a compile step) assigns it does not count
    assert sites["op_cuda_kernel"].presets == ("llama3-8b",) and not sites["op_native_kernel"].presets
    launched = [s.name for s in api.scan(engine, model="llama3-8b").sites if s.role == "launched"]
    on_path = {"rms_kernel", "moe_gemm_kernel", "decode_meta_kernel", "op_cuda_kernel", "softmax_kernel",
               "plain_quant_kernel", "router_kernel", "env_default_kernel",  # eng/mla.py's defaults
               "fused_kernel", "ready_kernel", "slow_impl_kernel", "listed_mode_kernel",  # eng/moe_runner.py's
               "int_ids_kernel",
               "dense_ffn_kernel", "sparse_ffn_kernel",  # per layer, one class or the other
               "triton_gate_kernel", "passed_model_kernel", "publish_kernel", "fast_backend_kernel",
               "deep_head_kernel", "hopper_kernel", "plain_mode_kernel",
               "mla_prepare_kernel", "mla_core_kernel", "moe_layer_kernel", "dense_layer_kernel",  # eng/dispatch.py's
               "sched_publish_kernel",  # eng/sched.py's
               "plain_stash_kernel",  # eng/spec.py's
               "after_guard_kernel", "both_ways_kernel", "struct_field_kernel"}  # eng/runconfig.py's
    assert set(launched[:len(on_path)]) == on_path, launched
    # last: the fallback-only launches (`if residual is not None:`'s too: the scan reads its else as the main path),
    # and the kernel in a file named for other hardware
    assert set(launched[-3:]) == {"hip_moe_kernel", "residual_out_kernel", "rocm_rope_kernel"}
    assert "in code for other hardware (rocm) -6" in sites["rocm_rope_kernel"].reasons


def test_a_preset_without_its_model_class_gets_the_engine_path(engine: str) -> None:
    sites = by_name(api.scan(engine, model="qwen3-8b"))
    assert sites["decode_meta_kernel"].presets == ("qwen3-8b",) and not sites["rms_kernel"].presets


def test_set_overrides_a_serving_default(engine: str) -> None:
    sites = by_name(api.scan(engine, model="llama3-8b", sets={"attention_backend": "triton"}))
    assert sites["triton_decode_kernel"].presets == ("llama3-8b",)
    assert "per layer" in sites["triton_decode_kernel"].default_path
    assert not sites["decode_meta_kernel"].presets
    with pytest.raises(ConfigError, match="--set page_size: not a serving default of eng"):
        api.scan(engine, sets={"page_size": 16})


def test_warm_scan_reads_the_graph_from_its_cache(engine: str, tmp_path: Path) -> None:
    first = [(s.name, s.presets, s.default_path) for s in api.scan(engine).sites]
    cache = list((tmp_path / "home" / "cache" / "program" / "reach").glob("*.json"))
    assert len(cache) == 1
    assert [(s.name, s.presets, s.default_path) for s in api.scan(engine).sites] == first


def test_a_scan_of_unchanged_files_reads_its_result_back(engine: str, tmp_path: Path) -> None:
    source = tmp_path / "eng"
    first = api.scan(engine, source=str(source))
    shutil.rmtree(tmp_path / "home" / "cache" / "scan")  # a hit parses nothing, even with no file's facts kept
    (tmp_path / "home" / "workspaces" / "eng" / "scan.json").unlink()
    again = api.scan(engine, source=str(source))
    assert first.parsed > 0 and again.parsed == 0
    assert again.sites == first.sites and again.fusion == first.fusion and again.errors == first.errors
    assert json.loads(again.path.read_text())["kernels"] == json.loads(json.dumps([s.to_dict() for s in first.sites]))
    # a setting, a preset or a file changed is scanned again
    decode = by_name(api.scan(engine, source=str(source), sets={"attention_backend": "triton"}))
    assert decode["triton_decode_kernel"].presets == ("llama3-8b",)
    assert by_name(api.scan(engine, source=str(source)))["triton_decode_kernel"].presets == ()
    assert by_name(api.scan(engine, source=str(source), model="llama3-8b"))["rms_kernel"].presets == ("llama3-8b",)
    norm = source / "eng" / "kernels" / "norm.py"
    norm.write_text(norm.read_text() + "\n\n@triton.jit\ndef added_kernel(x):\n    pass\n")
    edited = api.scan(engine, source=str(source))
    assert edited.parsed == 1 and "added_kernel" in by_name(edited)



def test_presets_walked_in_parallel_give_what_one_process_gives(engine: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from smithbot.scan import reach

    one = reach._Job.one

    def walk(job: reach._Job, p: object) -> reach.PresetReach:
        (tmp_path / f"walked-{os.getpid()}-{p.name}").touch()  # type: ignore[attr-defined]
        return one(job, p)  # type: ignore[arg-type]

    monkeypatch.setattr(reach._Job, "one", walk)
    monkeypatch.setattr(reach.os, "cpu_count", lambda: 2)
    forked = [(s.name, s.presets, s.default_path, s.reach, s.undecided) for s in api.scan(engine).sites]
    pids = {f.name.split("-")[1] for f in tmp_path.glob("walked-*")}
    assert len(pids) == 2 and str(os.getpid()) not in pids  # a process of its own per preset
    for f in [*(tmp_path / "home" / "cache" / "program" / "reach").glob("*.json"),
              *(tmp_path / "home" / "cache" / "result").iterdir()]:
        f.unlink()
    monkeypatch.setattr(reach, "_memory", lambda: reach._WALK_BYTES)  # room for one walk: no workers
    alone = [(s.name, s.presets, s.default_path, s.reach, s.undecided) for s in api.scan(engine).sites]
    assert forked == alone and any(len(p) == 2 for _, p, *_ in alone)

BENCH = """import gzip, json, sys

cfg = json.load(open(sys.argv[1]))
assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["num_hidden_layers"] == 32
events = [dict(ph="X", cat="kernel", name=n, dur=d)
          for n, d in (("rms_kernel", 30.0), ("moe_gemm_kernel_0d1d", 90.0), ("cublas_gemm", 40.0))]
with gzip.open(sys.argv[2] + "/one.trace.json.gz", "wt") as f:  # a name of the engine's own, gzipped
    json.dump(dict(traceEvents=events), f)
"""


def test_profile_runs_the_engines_benchmark(engine: str) -> None:
    """The target's profile command gets the preset's config.json, may write a gzipped trace of its own name into
    {trace_dir}, and its shares rank the scan, per step."""
    root = Path(engine).parent / "eng"
    (root / "bench.py").write_text(BENCH)
    Path(engine).write_text(Path(engine).read_text() + 'profile: "{python} bench.py {config} {trace_dir}"\n')
    r = api.profile(engine, model="llama3-8b", batch=4)
    assert r.trace.name == "llama3-8b-decode-bs4.json" and r.profile.steps == 4
    assert r.profile.meta == {"target": "eng", "preset": "llama3-8b", "phase": "decode", "batch": 4, "steps": 4}
    measured = [(s.name, round(s.measured_share, 3), s.measured_us) for s in r.sites if s.measured_share]
    assert measured == [("moe_gemm_kernel", 0.562, 22.5), ("rms_kernel", 0.188, 7.5)]
    assert r.profile.ops({"moe_gemm_kernel", "rms_kernel"}) == [("cublas_gemm", 10.0, 0.25)]
    prefill = api.profile(engine, model="llama3-8b", phase="prefill")
    assert prefill.profile.steps == 1  # a prefill is one step
    (root / "bench.py").write_text("import sys\nsys.exit('no GPU here')\n")
    with pytest.raises(ConfigError, match="the profile command failed \\(exit 1\\): no GPU here"):
        api.profile(engine, model="llama3-8b")


def test_values_the_engine_code_gives_decide_the_path(engine: str) -> None:
    """What the serving YAML does not say is evaluated from the engine's own code (`eng/mla.py`): an attribute its
    host class sets, read in a mixin; a predicate through its return expression; an env registry's declared default;
    an env getter's own parameter default; the argument class's field defaults; a constructor's argument; an early
    return. Each kernel off the path says which test is decided against it."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "plain_quant_kernel", "router_kernel", "env_default_kernel")
    assert_never(sites, ("bmm_quant_kernel", "self.use_bmm"), ("lora_correction_kernel", "is_lora_active(self)"),
                 ("cache_kernel", "_EXPERIMENTAL_CACHE"), ("overlap_kernel", "self.args.enable_fancy_overlap"),
                 ("trt_kernel", "self.use_trt"), ("early_exit_kernel", "not self.use_extra"))
    ranked = [s.name for s in api.scan(engine, model="llama3-8b").sites]
    assert max(ranked.index(n) for n in ("plain_quant_kernel", "router_kernel")) < ranked.index("bmm_quant_kernel")


def test_instance_attributes_and_predicates_are_evaluated(engine: str) -> None:
    """`eng/moe_runner.py`: an attribute assigned under an env test that defaults off keeps its other value; of two
    assignments in `__init__`, the one that surely runs last wins (`lora` defaults False at the construction);
    hasattr reads the class, and is False for an attribute assigned only under a test decided against it; a
    literal list imported from another module is that module's; a predicate reads its own locals; another module's
    flag is what its source evaluates to there (`_IS_HIP = is_hip()`); a tensor's dtype is where it is made; a
    module flag that only an unreached function rebinds (`global`) keeps its value; a predicate of another object
    takes its early return; a class-body default holds; a conditional expression's test picks the class an
    attribute holds; a parameter is what every caller on the path passes (`finish(x, None)`); and where the test
    differs between layers built in a loop over `range(config.num_hidden_layers)` (`DenseFFN() if i < 2 else
    SparseFFN()`), each class is on the path."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "fused_kernel", "ready_kernel", "slow_impl_kernel", "dense_ffn_kernel", "sparse_ffn_kernel",
                   "listed_mode_kernel")
    assert_never(sites, ("aiter_kernel", "self.aiter is not None"), ("unfused_kernel", "self.mode == 'fused'"),
                 ("fast_path_kernel", "hasattr(self.core, 'compute_fast')"), ("capture_kernel", "capturing()"),
                 ("aiter_only_kernel", "hasattr(self, 'aiter_gate')"),
                 ("unlisted_mode_kernel", "self.mode in FUSED_MODES"), ("a2a_deepep_kernel", "a2a_deepep()"),
                 ("hip_only_kernel", "_IS_HIP"), ("long_ids_kernel", "ids.dtype == torch.int32"),
                 ("planned_kernel", "self.batch.planned"), ("scaled_finish_kernel", "scale is not None"))
    assert sites["fast_impl_kernel"].reach == "never" and not sites["fast_impl_kernel"].presets


def test_config_platform_locals_and_enum_values_decide(engine: str) -> None:
    """The model's config.json is the preset's (`getattr(config, "quantization_config", None)` is None for
    llama3-8b, and it is no dict: a helper that reads a dict's key or an object's field reads the field, `num_hidden_layers` is 32); torch answers for an sm90 GPU (`get_device_capability()[0] >= 9`); a
    local keeps only the assignments its if-tests allow, and a parameter reassigned after a test is the caller's
    there; an enum member's value comes from its class (`Policy.NONE = 0`)."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "deep_head_kernel", "hopper_kernel", "plain_mode_kernel")
    assert_never(sites, ("quant_head_kernel", "self.quant is not None"), ("sparse_head_kernel", "self.sparse"),
                 ("ampere_kernel",
                 "torch.cuda.get_device_capability()[0] >= 9"), ("quant_cache_kernel", "policy != Policy.NONE"))


def test_lazy_platform_constructions_passed_objects_and_sizes_decide(engine: str) -> None:
    """`eng/platforms.py`'s `current_platform` is a lazy module attribute (PEP 562): its `__getattr__` returns the
    CUDA platform, whose class attribute `_enum = PlatformEnum.CUDA` decides `is_out_of_tree()`, so PlatformOp's
    native forward is off the path. Of a class's two constructions, the one under a test decided against it does not
    count (`Gate("aiter")`); a function's parameter is what its callers hand it (`step(self.core, x)`); and a step's
    tensors are not empty (`x.numel() == 0`)."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "op_cuda_kernel", "triton_gate_kernel", "passed_model_kernel")
    assert_never(sites, ("aiter_gate_kernel", "self.backend == 'aiter'"), ("empty_batch_kernel", "x.numel() == 0"))
    assert sites["op_native_kernel"].reach == "never" and not sites["op_native_kernel"].presets


def test_enum_members_classmethod_constructions_and_factory_arguments(engine: str) -> None:
    """`eng/spec.py`: `Algo.from_string(None)` returns `cls.NONE`, an instance of the enum, whose `make_map()` makes
    the FutureMap that publishes, handing it `self`: the receiver of `self.spec.make_map()`, so the map's
    `self.algo.is_none()` is decided; `Plan.make` builds its class with `cls(...)`, and every construction passes
    `algo`, so the field's default (None) never holds and `is_none()` is decided; the plan's `backend` is what that
    construction passes (`build_backend(0)`), whose returned local keeps the branch its constant argument takes, and
    `kind = kind or FastBackend` reads the caller's None."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "publish_kernel", "fast_backend_kernel", "plain_stash_kernel")
    assert_never(sites, ("spec_step_kernel", "not self.plan.algo.is_none()"))
    assert not sites["slow_backend_kernel"].presets


def test_a_dispatch_that_returns_one_of_several_values_decides_per_phase(engine: str) -> None:
    """`eng/dispatch.py`: the forward method comes from a handler that a module-level call registered under the
    backend's name (`HandlerRegistry.register("fa3", handle_fa3)`). The name is not known, so the handlers under
    declared values (fa3, and none as the fallback; not aiter) may each run: in decode both return MLA, so
    `method == Method.MHA` is false and MLA's kernel is default; in prefill fa3's returns MHA and the other's MLA, so
    either may run. `self._is_sparse(layer_id, nextn=False)` is evaluated for each layer's index: odd layers build
    the MoE block and even ones the dense one, so both run."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "mla_prepare_kernel", "moe_layer_kernel", "dense_layer_kernel")
    mha = sites["mla_prepare_kernel"], sites["mha_prepare_kernel"]
    assert mha[0].phases == ("decode", "prefill") and mha[1].phases == ("prefill",), [m.phases for m in mha]
    assert mha[1].reach == "possible" and any("method == Method.MHA" in t for t in mha[1].undecided), mha[1].undecided


def test_an_element_of_a_returned_tuple_keeps_its_value(engine: str) -> None:
    """`DispatchedAttention.forward` splits into `prepare`, which returns `(x, method, fb)`, and `core`, which
    unpacks it (`x, method, fb = state`). The method travels as that tuple's second element: in decode it is MLA,
    so the MHA core kernel runs in prefill only, as its prepare kernel does."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "mla_core_kernel")
    mha = sites["mha_core_kernel"]
    assert mha.phases == ("prefill",) and mha.reach == "possible", (mha.phases, mha.reasons)


def test_a_field_set_by_code_no_step_runs_is_traced_to_its_callers(engine: str) -> None:
    """`eng/sched.py`: the step's `batch.algo` is None in the scheduler's empty batch and, in every batch that runs,
    what `Batch.build(algo)` is handed. No step calls `build`: its callers are found in the code parsed (a mixin's
    method, bound to the scheduler that mixes it in, and a component whose field without a default holds what its
    construction passes), and both hand the scheduler's `Algo.NONE`. A method runs on no None, so
    `batch.algo.is_none()` is true."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "sched_publish_kernel")


def test_an_undecided_test_makes_a_kernel_possible_and_is_listed(engine: str) -> None:
    """A test on the call's own data (`x.numel() > 4096`) is left open: the kernel behind it is possible, ranks after
    every default kernel, and names the test with its line."""
    sites = api.scan(engine, model="llama3-8b").sites
    big = next(s for s in sites if s.name == "big_batch_kernel")
    assert big.reach == "possible" and big.undecided == ("x.numel() > 4096 (eng/mla.py:54)",), big.undecided
    assert "1 undecided on the path -1.6: x.numel() > 4096 (eng/mla.py:54)" in big.reasons
    order = [s.reach for s in sites]
    assert order.index("possible") > max(i for i, r in enumerate(order) if r == "default")


def test_a_factory_hands_the_callers_constant_on(engine: str) -> None:
    """`CudaBackend.get_builder(op)` falls back to `super().get_builder(op)`: the Softmax layer's `OpType.Softmax`
    travels through the factory's own parameter, so the default backend's Linear builder is not a candidate (as
    lmdeploy's `super().get_layer_impl_builder(layer_type)`)."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert sites["softmax_kernel"].reach == "default" and not sites["softmax_kernel"].undecided
    assert sites["linear_kernel"].reach == "never"


def test_optional_imports_and_imports_in_branches_follow_the_platform(engine: str) -> None:
    """`eng/optional.py`: `fast_route` is imported from a package the serving section declares installed, so its
    `except ImportError` fallback (None) does not hold and the fast kernel is default; the missing package's name is
    None, and its kernel is off the path. `make_impl` imports `Impl` from one module or another by `is_hip()`: the
    CUDA one is constructed, the ROCm one never."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "optional_fast_kernel", "impl_cuda_kernel")
    assert_never(sites, ("optional_gone_kernel", "gone_route is not None"))
    assert sites["impl_rocm_kernel"].reach in ("never", "unreached"), sites["impl_rocm_kernel"].reasons


def test_an_argument_defaulting_to_none_holds_unless_its_class_resolves_it(engine: str) -> None:
    """`eng/args.py`: `draft_model_path` defaults to None and no method of `ServerArgs` assigns it, so the draft
    kernel is off the path; `cache_layout` defaults to None too, but `__post_init__` resolves it, so its test stays
    open."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_never(sites, ("draft_kernel", "get_server_args().draft_model_path is not None"))
    layout = sites["layout_kernel"]
    assert layout.reach == "possible" and any("cache_layout is None" in t for t in layout.undecided), layout.reasons


def test_a_registered_function_is_taken_and_a_type_hint_yields_to_what_callers_pass(engine: str) -> None:
    """`eng/pool.py`: the runner's `fused` is what a table holds for the settings' keys, filled by a decorator that
    hands the function to a classmethod that stores it. A function is registered under `("none", "cutlass")`, so
    `self.fused is not None` holds and the fused function's kernel is default. The info reaches it through
    parameters annotated with the base class `Info`, but the step passes a `WideInfo`, whose `use_int4` is False:
    the int4 kernel is off the path, and so is the unfused kernel after the fused function's return."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "pool_fused_kernel")
    assert_never(sites, ("pool_int4_kernel", "info.use_int4"))
    assert_never(sites, ("pool_unfused_kernel", "self.fused is not None and (not self.lora)"))


def test_a_table_spelled_out_a_classmethod_and_isinstance_of_a_layer_decide_the_quant_method(engine: str) -> None:
    """`eng/quant.py`: `QUANTIZATION_METHODS[name]` is the dict literal's entry for the `quantization` setting (fp8),
    through the base table it unpacks; `from_config` called on that class is its own, not the override of its live
    subclass `Fp8Online` (which would give the ModelOpt config); `"fp8".startswith("modelopt")` is false; and the
    config's `get_method(self)` is decided by `isinstance(layer, (Linear, ModelOptConfig))` for each layer that
    calls it, the MoE layer and the linear one (the call binds `layer` to that caller's object)."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "fp8_moe_kernel", "fp8_linear_kernel")
    for name in ("int4_moe_kernel", "modelopt_moe_kernel"):
        assert sites[name].reach == "never", (name, sites[name].reasons)


def test_a_method_that_hands_the_layer_to_its_base_keeps_the_layer_when_another_argument_is_unknown(
        engine: str) -> None:
    """`eng/quant.py`'s `HyMixed.get_method(layer, prefix)` returns `super().get_method(layer, prefix)` (unless the
    prefix, which nothing knows, ends in "_fast"): the base picks by `isinstance(layer, HyLinearBase)`, and the
    layer handed on is the caller's own. The linear layer's method is the linear one, whatever the prefix (sglang's
    `HybridFp8NvFp4Config` gave every linear layer `Fp8MoEMethod` this way); the MoE layer's is the MoE one or, by
    the open prefix test, the linear one."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "hy_linear_kernel")
    assert sites["hy_moe_kernel"].reach == "possible", sites["hy_moe_kernel"].reasons


def test_a_keyword_dict_built_by_stores_passes_its_keys_and_a_flag_only_an_unrun_method_sets_keeps_its_default(
        engine: str) -> None:
    """`eng/pool.py`'s `split_micro` builds `Micro(**out)` from a dict filled in a loop over literal names and by
    `out.update(dict(ready=False))`: it passes `ready=False`, not any value. `ready` is otherwise set only by
    `mark_ready`, which no step calls, so `needs_plan()` is true and the planning kernel is default."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "plan_run_kernel")
    assert_never(sites, ("plan_skip_kernel", "not b.needs_plan()"))
    # `one_shot`'s None default does not hold: `mark_one_shot`, which a step runs, sets it on the batch from outside
    assert sites["one_shot_kernel"].reach == "possible", sites["one_shot_kernel"].reasons


def test_a_dict_handed_between_stages_and_a_tuple_unpacked_into_an_attribute_keep_their_values(engine: str) -> None:
    """`eng/pool.py`'s `Staged`: `forward` builds `{"x": x, "kind": Kind.PLAIN}`, `dispatch` reads `state["kind"]` and
    returns a new dict that carries it on, and `gemm` reads it from what `dispatch` returned, so the plain kernel is
    default and the async one off the path; `self.world, rank = world_rank()` is the world size 1, so the wide kernel
    is off the path too."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "staged_plain_kernel")
    assert_never(sites, ("staged_async_kernel", "kind == Kind.ASYNC"), ("staged_wide_kernel", "self.world > 1"))


def test_a_keyword_dict_the_defaults_leave_empty_passes_nothing(engine: str) -> None:
    """`eng/pool.py`'s `select` hands `route_topk` a `**kw` that only a test decided against fills (and `pool_step`
    hands `Gate` one that never has it): `packed` keeps
    its None default, so the plain top-k kernel is default and the packed one off the path."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "pool_plain_topk_kernel")
    assert_never(sites, ("pool_packed_kernel", "packed is not None"))
    # the same through a constructor: `Gate(**gate_kw)` with a dict that lacks `packed` keeps its None default
    assert_default(sites, "pool_gate_plain_kernel")
    assert_never(sites, ("pool_gate_packed_kernel", "self.packed is not None"))
    # `Norm(**norm_kw)` with `dict(cast=True) if x.rare else {}`: `cast` may not be passed at all, so neither branch
    # of `self.cast` is decided (once, the dict's one-branch key counted as always passed: cast_kernel default)
    assert sites["norm_cast_kernel"].reach == "possible", sites["norm_cast_kernel"].reasons
    assert sites["norm_plain_kernel"].reach == "possible", sites["norm_plain_kernel"].reasons
    # `QuietNorm(**quiet_kw)` with `dict(cast=True) if get_bool_env_var("ENG_USE_AITER") else {}`: the test is decided
    # (the variable defaults off), so `cast` is not passed and keeps its False default
    assert_default(sites, "quiet_plain_kernel")
    assert_never(sites, ("quiet_cast_kernel", "self.cast"))


def test_a_parameter_reassigned_under_a_test_decided_against_keeps_the_callers_value(engine: str) -> None:
    """`eng/pool.py`'s `Route(fmt="bypass")`: its constructor sets `fmt = "standard"` only when `ENG_WATERFILL` is on
    (it defaults off), then stores `self.fmt = fmt`: the caller's "bypass" (it was once the reassignment's "standard",
    written in as if it always ran), so the bypass kernel is default."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "route_bypass_kernel")
    assert_never(sites, ("route_standard_kernel", "self.fmt == 'standard'"))


def test_what_every_step_sets_replaces_the_constructors_placeholder(engine: str) -> None:
    """`eng/pool.py`'s `Stamped`: `__init__` sets `mode = None`, and `forward`, which every step runs, sets it to
    "fast" before `core` reads it, so the fast kernel is default (it was possible: None or "fast"). `spare` is set
    only by a method no step runs, so its None holds and the other kernel is default too."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "stamp_fast_kernel", "stamp_slow_kernel")


def test_a_module_global_filled_at_start_up_holds_what_start_up_gives_it(engine: str) -> None:
    """`eng/groups.py`: `_GROUP_SIZE = None` is a placeholder that `init_groups`, which the scheduler's constructor
    surely runs at start-up, sets to `args.dp_size if args.enable_dp else 1`, that is 1. `regroup` sets it too, but
    nothing the walks run calls it. So `group_size() > 1` is false: the local kernel is default, the gather never
    (both were possible while a rebound global was unknown)."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "group_local_kernel")
    assert_never(sites, ("group_gather_kernel", "group_size() > 1"))


def test_a_field_that_several_constructions_set_is_one_of_their_values(engine: str) -> None:
    """`eng/pool.py`'s `MoeRunnerLike` is made by two methods: one passes "triton", the other "flashinfer" or
    "triton_kernel" by a test nothing decides (an open `a if t else b` is one of the two). Its `backend` is one of
    the three, so `self.runner.backend == "deep_gemm"` is false for any: the plain kernel is default (both were
    possible when several values counted as unknown)."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "oneof_plain_kernel")
    assert_never(sites, ("oneof_deep_kernel", "self.runner.backend == 'deep_gemm'"))


def test_a_config_property_an_env_table_and_fields_every_construction_sets_decide(engine: str) -> None:
    """`eng/runconfig.py`, as vLLM's worker: `Worker` is made by name, so its `run_config` is a `RunConfig` by its type
    hint. `run_config.use_v2` is a property: its body is evaluated with that config as `self`. It reads
    `envs.ENG_USE_V2_RUNNER`, a getter in a table of lambdas (`environment_variables`), which is None when unset; then
    the field `fast`, False. So the V1 runner is the default. `model_config` defaults to None in the class, but every
    construction passes it (the arguments build it, a draft copies it): the None default does not hold, and the
    kernel behind `model_config is None` is not default."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "runner_v1_kernel")
    assert_never(sites, ("runner_v2_kernel", "self.use_v2"))
    assert sites["unset_config_kernel"].reach == "possible", sites["unset_config_kernel"].reasons


def test_an_error_check_and_a_test_both_ways_of_which_launch_the_kernel_do_not_count(engine: str) -> None:
    """`if self.pending is not None: raise ...` is an error check: what follows it is on the default path though the
    state it reads is undecided. `if x.numel() > 4096:` launches `both_ways_kernel` in either branch: the test does
    not matter to it. A test that does matter still counts (`big_batch_kernel`, see above)."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "after_guard_kernel", "both_ways_kernel")


def test_a_builtin_typed_field_without_default_holds_what_its_construction_passes(engine: str) -> None:
    """`Resolved.mode: str` has no default and no class type: its one construction passes `mode="fast"`, so
    `picked.mode == "fast"` is decided (as sglang's `ResolvedAttentionBackendStr(prefill=..., decode=...)`)."""
    assert_default(by_name(api.scan(engine, model="llama3-8b")), "struct_field_kernel")



def test_a_store_on_a_declared_object_counts_under_its_tests_with_its_value_evaluated(engine: str) -> None:
    """`get_flags().overlap` is an `OverlapFlags` by `get_flags`'s return hint and `Flags.overlap`'s field hint, on
    `_CONTEXT`, the module's one `Context()`. `prepare` stores `batch.split = 2` only after `if not overlap_enabled():
    return`, and the flag is never enabled, so `Batch.split` stays None. `init_flags` stores `Mode(DEFAULT_MODE)`:
    the member whose value is "fast", so the mode is never AUTO (it may still be its class default, None: the order of
    the stores is not known). `flags.get_flags().overlap.enabled`, an attribute of what a call returns, is read the
    same way: None or False, never true. `Batch.pad` replaces `lens` only while it is set, and nothing else sets it:
    it stays None."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "unsplit_kernel", "mode_fast_kernel")
    assert_never(sites, ("split_kernel", "batch.split is not None"),
                 ("mode_auto_kernel", "overlap.mode != flags.Mode.AUTO"),
                 ("overlap_on_kernel", "flags.get_flags().overlap.enabled"),
                 ("lens_pad_kernel", "batch.lens is not None"))


def test_a_method_no_live_class_defines_is_absent_and_getattr_reads_the_attribute(engine: str) -> None:
    """`hasattr(self.model, "is_swa_model")` on a model of no known class: only `SwaModel` defines the method, and no
    step makes one, so it is false (as sglang's `hasattr(self.model, "is_prefill_aware_swa")` on a Llama). Then
    `getattr(holder, "swa", False)` reads `holder.swa`, which every `Holder` has, as that attribute."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "full_model_kernel")
    assert_never(sites, ("swa_model_kernel", "getattr(holder, 'swa', False)"))


def test_a_keyword_no_caller_passes_keeps_its_default_through_a_pass_through_forward(engine: str) -> None:
    """`Router()(x, x)` reaches `Router.forward_cuda` through `PlatformOp.forward(*args, **kwargs)`, which hands on
    what its callers pass: none passes `padded`, so it is its default None there, in `select`, and in `mask_padding`,
    whose kernel is then never launched (as sglang's top-k padding mask, six calls below the MoE block)."""
    assert_never(by_name(api.scan(engine, model="llama3-8b")), ("padded_mask_kernel", "padded is None"))



def test_the_phase_decides_which_batch_a_step_prepares(engine: str) -> None:
    """`eng/batching.py`: whether requests wait is the queue's state, which no default decides. A decode step runs a
    decode batch, so of the scheduler's tests the side whose calls set the batch's mode to DECODE is taken in decode
    and the side that makes an EXTEND batch in prefill: each table kernel is default in its own phase only. The
    mixed-chunk call, under a test the defaults decide against, makes no branch a decode one."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "extend_table_kernel", "decode_table_kernel")
    assert sites["decode_table_kernel"].phases == ("decode",), sites["decode_table_kernel"].phases
    assert sites["extend_table_kernel"].phases == ("prefill",), sites["extend_table_kernel"].phases


def test_the_walk_is_the_same_whatever_the_hash_seed(engine: str, tmp_path: Path) -> None:
    """Sets of callers and construction sites iterate in the hash seed's order; what the walk's memos keep must not
    depend on it (``tests/scan/test_real_checkouts.py`` has the sglang scan that once found DSA's Indexer live
    under one seed and not under another)."""
    outs = scans_under_seeds(engine, None, tmp_path, ("1", "2", "3"))
    assert outs[0] and outs[0] == outs[1] == outs[2]


def test_the_model_config_the_engine_loads_is_the_presets_config_json(engine: str) -> None:
    """`eng/hfconf.py`, as sglang's ModelConfig: `hf_config` is a copy of what a parser from a registry returns, and
    the parsers' base says it returns transformers' `PretrainedConfig`: the model's config.json, as the preset gives
    it. transformers makes it an instance of the class registered for its `model_type`: the engine's own
    `LlamaOwnConfig` for Llama, so it is no `HybridConfig` nor `MambaLikeConfig` (a subclass of another transformers
    class). No spec of a list that nothing fills matches it, its rope has no `mrope_section`, and its architecture
    is in no set of sliding-window ones (a literal with another module's tuple spread into it): the full-attention
    kernel and the Llama one are default, the other five never (nor is it in a list a local
    spells out, `is_encdec_model`). A local dict filled after it is made is not the
    empty dict of its literal: `"filled" in options` is not known, nor is a predicate's test over a list it fills; nor is a module list a decorator fills at
    import, so a spec of it may match."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "hf_full_kernel", "hf_own_kernel")
    assert_never(sites, ("hf_hybrid_kernel", "(cfg := hybrid_config(model_config))"),
                 ("hf_mrope_kernel", "model_config.is_mrope"), ("hf_swa_kernel", "model_config.is_swa"),
                 ("hf_encdec_kernel", "model_config.is_encdec"))
    assert sites["hf_extra_kernel"].reach == "never", sites["hf_extra_kernel"].reasons
    assert sites["hf_filled_kernel"].reach == "possible", sites["hf_filled_kernel"].reasons
    assert sites["hf_listed_kernel"].reach == "possible", sites["hf_listed_kernel"].reasons
    assert sites["hf_builtin_kernel"].reach == "possible", sites["hf_builtin_kernel"].reasons


def test_a_field_the_arguments_resolution_sets_from_outside_is_not_its_class_default(engine: str) -> None:
    """`eng/args.py`, as sglang's ServerArgs and its CUDA graph sizes: `PhaseSizes.sizes` is None in its class, but
    `ServerArgs.__post_init__` (the arguments' own resolution, run when they are made) sets it on the instance
    through a local (`prefill = self.graph_config.prefill`), whose class comes from the field's hint,
    `A[Optional[GraphConfig], Arg(...)]` (Annotated under an alias). So `not sizes` is not decided: both kernels
    are possible, neither never."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    for name in ("graph_off_kernel", "graph_on_kernel"):
        assert sites[name].reach == "possible", (name, sites[name].reach, sites[name].reasons)
        assert any("args.graph_config.prefill.sizes" in r for r in sites[name].reasons), sites[name].reasons


def test_attention_metadata_that_every_prefill_runner_sets_is_default(engine: str) -> None:
    """`eng/graph.py`, as sglang's prefill runners. The runner picks its graph backend from
    `args.graph_config.prefill.backend`, which the `prefill` field's default factory makes "breakable" (the `decode`
    field's "full" is another instance's); the base class's `backend: GraphBackend` only declares what the
    subclass's `__init__` sets (an instance of the base may be a full one: the engine makes one): so `self.full` is
    false. `run_prefill` sends the batch to the held prefill runner (the
    graph one or the eager one: the sizes are not known) or to the eager one, and all three set the metadata: neither
    the test nor the dispatch matters to it."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "shared_metadata_kernel")
    assert_never(sites, ("full_metadata_kernel", "self.full"))


def test_a_kernel_on_the_branch_serving_does_not_take_gets_a_task_of_its_own(engine: str, tmp_path: Path) -> None:
    """`linear_out` launches `residual_out_kernel` only when a residual is passed, and serving passes none: the
    launcher's task keeps the branch serving takes (`plain_out_kernel`), and the other kernel gets a task of its own
    that keeps its branch, and says that serving does not take it."""
    result = api.scan(engine)
    sites = {s.name: s for s in result.sites}
    assert sites["plain_out_kernel"].launches[0].decided == (("residual is not None", False),)
    rows = {r.kernel: r for r in extract_sites(result, [sites["plain_out_kernel"], sites["residual_out_kernel"]],
                                               lambda name: tmp_path / name)}
    plain, other = rows["plain_out_kernel"], rows["residual_out_kernel"]
    assert plain.checked and "residual_out_kernel[" not in (plain.out / "kernel.py").read_text(), plain.why
    assert other.checked and other.out != plain.out, other.why
    assert other.why.endswith("(with its own branch, which serving does not take (`residual is not None` is False))")
    assert "residual_out_kernel[" in (other.out / "kernel.py").read_text()


def test_a_decode_only_entry_is_walked_in_decode_steps_only(engine: str) -> None:
    """`eng/graph.py`'s replay is a decode entry (`serving.decode_entries`): walked in the prefill phase too, its
    `fb.forward_mode.is_decode()` would be false there and make the extend branch a prefill launch. In `step_tail`,
    which the runner calls in both phases, `graphed` is the phase's test where it is read (it is set to True only
    after): each branch is default, in its own phase."""
    sites = by_name(api.scan(engine, model="llama3-8b"))
    assert_default(sites, "replay_decode_kernel", "eager_only_kernel", "graphed_only_kernel")
    assert sites["replay_extend_kernel"].reach == "never", sites["replay_extend_kernel"].reasons


def test_a_launch_under_a_test_serving_decides_is_extracted_with_that_branch_only(engine: str, tmp_path: Path) -> None:
    """`write_pool` launches its kernel under `if supports_triton(get_server_args().attention_backend):` and falls
    back to host code otherwise; serving's backend decides the test, so the launch says so and its task keeps the
    launch alone: no server-args lookup (state a task cannot read) and no fallback."""
    [pool] = [s for s in api.scan(engine).sites if s.name == "pool_kernel"]
    assert pool.reach == "default" and pool.launches[0].decided == (
        ("supports_triton(get_server_args().attention_backend)", True),)
    [row] = api.extract(engine, "pool_kernel", out=tmp_path / "task")
    assert row.extracted and row.checked, row.why
    kernel = (tmp_path / "task" / "kernel.py").read_text()
    assert "def write_pool(x):\n    pool_kernel[(1,)](x)\n" in kernel
    assert "get_server_args" not in kernel and "zero_" not in kernel and "supports_triton" not in kernel
