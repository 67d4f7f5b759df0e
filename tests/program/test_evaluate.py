"""The serving-default evaluator: what an if-test decides, as a table of (test, expected) per environment."""

from __future__ import annotations

import pytest

from smithbot.program.evaluate import Env, Platform, evaluate
from smithbot.program.facts import file_facts
from smithbot.program.kinds import EACH

ENV = Env(settings={"attention_backend": "fa3", "moe_a2a_backend": "none", "quantization": None, "page_size": 1,
                    "ep_size": 1, "device_type": "cuda", "mamba_config": None},
          env={"SGLANG_USE_AITER": False},
          platform=Platform("sm90", {"flashinfer": True, "aiter": False}))
# what the engine's helpers return (a caller's answer for a predicate's call), over the platform
ASSIGNS = {"is_hip()": "torch.version.hip is not None", "current_platform.is_hip()": "torch.version.hip is not None",
           "_is_cuda": "torch.cuda.is_available() and torch.version.cuda is not None",
           "_is_hip": "is_hip()", "_use_aiter": "get_bool_env_var('SGLANG_USE_AITER') and _is_hip",
           "ALIAS": "ALIAS", "w8a8": "quantization == 'w8a8'",
           # a flag assigned in both branches: decided where every value agrees
           "self.gather": ["not skip and page_size > 1", "not skip and ep_size > 1"],
           "self.mixed": ["page_size > 1", "ep_size == 1"]}

CASES = [
    ("is_hip()", None, False), ("not is_hip()", None, True), ("_is_hip", None, False),  # a module flag
    ("_is_cuda and not _is_hip", None, True), ("_use_aiter", None, False),
    ("current_platform.is_hip()", None, False),  # the last part of an attribute call
    ("server_args.attention_backend == 'fa3'", None, True), ("attention_backend in ('triton', 'aiter')", None, False),
    ("get_moe_a2a_backend().is_deepep()", None, False),  # a getter named after a setting, a predicate on its value
    ("get_moe_a2a_backend().is_none()", None, True),
    ("model_config.quantization is not None", None, False),  # None is a value, not "unknown"
    ("w8a8", None, False), ("page_size > 1", None, False), ("ep_size >= 1", None, True),
    ("device_type == 'cuda'", None, True), ("envs.SGLANG_USE_AITER.get()", None, False),
    ("mamba_config(cfg)", None, False), ("MoeRunnerBackend.TRITON == 'triton'", None, True),
    ("OpType.RMSNorm == OpType.RMSNorm", None, True), ("OpType.RMSNorm == OpType.LinearW8A8", None, False),
    ("QuantPolicy.NONE != 0", None, None),  # a member against a number: its value is not known
    ("forward_mode.is_decode()", "decode", None),  # a forward-mode predicate is the call graph's to evaluate
    ("self.use_triton and is_hip()", None, False),  # False wins an and with an unknown
    ("self.use_triton or is_hip()", None, None), ("self.gather", None, False), ("self.mixed", None, None),
    ("ALIAS", None, None), ("x[", None, None), ("len(x) > 2", None, None),
    # the platform: torch's answers on an sm90 GPU, and the packages declared installed or missing
    ("hasattr(torch, 'npu') and torch.npu.is_available()", None, False), ("hasattr(torch, 'cuda')", None, True),
    ("torch.cuda.get_device_capability()[0] >= 9", None, True), ("torch.backends.mps.is_available()", None, False),
    ("torch.cuda.get_device_capability() >= (10, 0)", None, False),
    ("importlib.util.find_spec('flashinfer') is not None", None, True),
    ("importlib.util.find_spec('aiter') is not None", None, False),
    ("importlib.util.find_spec('deep_gemm') is not None", None, None),  # not declared: unknown
    ("torch.version.cuda >= '12.3'", None, None),  # a version the platform does not give
    # a step's tensors are not empty and all on the serving GPU; other sizes and devices stay open
    ("x.numel() == 0", None, False), ("0 < x.shape[0]", None, True), ("x.size(0) > 0", None, True),
    ("x.numel() > 4096", None, None), ("cos.device != q.device", None, False), ("a.device == torch.device('cpu')",
                                                                                None, None),
    ("None if a == b else a", None, None),  # a conditional expression whose test is unknown
    ("(1 if a == b else 2) > 0", None, True),  # ... is one of its two values: decided where both agree
    ("(1 if a == b else 2) == 1", None, None),
    ("1 if page_size == 1 else 2", None, True),
]


@pytest.mark.parametrize("test, phase, expected", CASES, ids=[f"{t}-{p}" for t, p, _ in CASES])
def test_decides(test: str, phase: str | None, expected: bool | None) -> None:
    assert evaluate(test, ENV.with_phase(phase), ASSIGNS.get) is expected


def _env(env: dict | None = None, declared: dict | None = None) -> Env:
    return Env({}, env or {}).with_declared(declared or {})


@pytest.mark.parametrize("test, env, truth", [
    ('get_bool_env_var("SGL_USE_DEEPGEMM_BMM", "false")', {}, False),  # the default the call gives
    ('get_bool_env_var("SGL_USE_DEEPGEMM_BMM", "false")', {"SGL_USE_DEEPGEMM_BMM": True}, True),  # set by the user
    ('get_bool_env_var("SGLANG_X", default="1")', {}, True),
    ('os.getenv("SGLANG_X")', {}, False),  # unset: None
    ('os.environ.get("SGLANG_X", "0") == "1"', {}, False),
    ('get_int_env_var("SGLANG_CHUNK", "4096") > 1024', {}, True),
    ('get_bool_env_var("SGLANG_X")', {}, None),  # no default here, and none asked of the getter's definition
])
def test_an_env_getter_has_the_default_the_code_gives(test: str, env: dict, truth: bool | None) -> None:
    assert evaluate(test, _env(env)) is truth


def test_a_getter_without_a_default_takes_its_own_parameter_default() -> None:
    defaults = {"get_bool_env_var(*defaults)": [None, "'false'"], "env_flag(*defaults)": [None, "True"]}
    assert evaluate('get_bool_env_var("SGLANG_X")', _env(), defaults.get) is False
    assert evaluate('env_flag("SGLANG_X")', _env(), defaults.get) is True


def test_a_registry_variable_has_its_declared_default() -> None:
    declared = {"SGLANG_OPT_USE_TOPK_V2": "True", "SGLANG_EXPERIMENTAL_LORA_OPTI": "False"}
    assert evaluate("envs.SGLANG_OPT_USE_TOPK_V2.get()", _env(declared=declared)) is True
    assert evaluate("not envs.SGLANG_EXPERIMENTAL_LORA_OPTI.get()", _env(declared=declared)) is True
    assert evaluate("envs.SGLANG_EXPERIMENTAL_LORA_OPTI.get()", _env({"SGLANG_EXPERIMENTAL_LORA_OPTI": True},
                                                                     declared)) is True
    assert evaluate("envs.SGLANG_UNDECLARED.get()", _env(declared=declared)) is None
    # a module flag read from the registry: _LORA_OPTI = envs.SGLANG_EXPERIMENTAL_LORA_OPTI.get()
    flags = {"_LORA_OPTI": "envs.SGLANG_EXPERIMENTAL_LORA_OPTI.get()"}
    assert evaluate("_LORA_OPTI and x", _env(declared=declared), flags.get) is False


def test_a_predicate_is_what_its_caller_says_it_returns() -> None:
    returns = {"is_kv_b_lora_active(self)": "False"}
    assert evaluate("is_kv_b_lora_active(self)", _env(), returns.get) is False
    assert evaluate("not is_kv_b_lora_active(self) and y", _env(), returns.get) is None
    assert evaluate("other(self)", _env(), returns.get) is None


def test_env_declarations_are_read_from_a_registry_class() -> None:
    from smithbot.program.modules import Program

    src = (b"class Envs:\n    SGLANG_A = EnvBool(False)\n    SGLANG_B: EnvInt = EnvInt(default=4)  # chunk\n"
           b"    SGLANG_C = EnvStr(os.environ.get('X'))\n    lower_case = EnvBool(True)\n")
    assert Program({"eng/environ.py": src}, {}, None).env_declarations() == {"SGLANG_A": "False", "SGLANG_B": "4"}


@pytest.mark.parametrize("test, truth", [
    ("method == Method.MHA", False),  # none of the values it may be
    ("method == Method.MLA", None),  # one of them, not all
    ("method != Method.MHA and not (method is None)", True),
    ("(Method.MHA if method == Method.MLA else Method.MLA) == Method.MHA", None),
])
def test_a_value_that_is_one_of_several_decides_where_all_agree(test: str, truth: bool | None) -> None:
    sources = {"method": ["Enum.MLA", "Enum.MLA_CPU"]}
    assert evaluate(test, ENV, sources.get) is truth


def test_a_value_that_is_each_of_a_range_decides_per_instance() -> None:
    """The index of layers built in a loop: a test that differs between them is EACH (both branches run, in their own
    layers), one that does not is decided; without ``each`` a differing test is undecided."""
    sources = {"layer_id": "__each__(0, 61)", "first_dense": "3"}
    assert evaluate("layer_id >= first_dense", ENV, sources.get, each=True) == EACH
    assert evaluate("layer_id >= first_dense", ENV, sources.get) is None
    assert evaluate("layer_id < 100", ENV, sources.get, each=True) is True
    assert evaluate("__each_of__(False, True)", ENV, sources.get, each=True) == EACH


@pytest.mark.parametrize("test, truth", [
    ("int(n_shared) == 0", False),  # int() of a config number
    ("0 if n_shared is None else int(n_shared)", True),
    ("int(width) > 4", True),  # of a numeral string
    ("int(other) == 0", None),  # of something not known
    ("state[1] == Method.MHA", False),  # one element of a tuple a call returns, as `assigns` gives it
    ("mode == Method.MLA", None),  # one of several: MLA or the CPU variant
    ("mode is None", False),
    ('state["kind"] == Method.MLA', True),  # one key of a dict
])
def test_numbers_and_tuple_elements_are_evaluated(test: str, truth: bool | None) -> None:
    sources = {"n_shared": "1", "width": "'8'", "state[1]": ["Enum.MLA"], "state['kind']": "Enum.MLA",
               "mode": "__one_of__(Enum.MLA, Enum.MLA_CPU)"}
    assert evaluate(test, ENV, sources.get) is truth


@pytest.mark.parametrize("test, truth", [
    # `or` and `and` give the operand that decides, not only its truth (sglang's `is_minimax_sparse`)
    ("(archs or [None])[0] in ('MiniMaxForCausalLM',)", False),
    ("(no_archs or [None])[0] is None", True),
    ("(quantization and 'fp8') == 'fp8'", False),
    ("(unknown or [None])[0] is None", None),
    # any()/all() over a known collection of constants, the loop's name bound to each (vLLM's V2 runner choice)
    ("any((arch in V2_ARCHS for arch in archs))", False),
    ("any((arch in V2_ARCHS for arch in more_archs))", True),
    ("all((arch in V2_ARCHS for arch in more_archs))", False),
    ("any((arch in V2_ARCHS for arch in unknown))", None),
    ("any((n > 1 for n in sizes if n != 4))", False),
    # getattr with a default on an object, where a setting has that name: as `obj.name`
    ("getattr(model_config, 'page_size', 16) == 1", True),
    ("getattr(model_config, 'not_a_setting', 16) == 1", None),
])
def test_boolean_operands_comprehensions_and_getattr_are_evaluated(test: str, truth: bool | None) -> None:
    sources = {"archs": "['LlamaForCausalLM']", "no_archs": "[]",
               "more_archs": "['LlamaForCausalLM', 'Qwen3ForCausalLM']", "V2_ARCHS": "frozenset({'Qwen3ForCausalLM'})", "sizes": "(1, 4)"}
    assert evaluate(test, ENV, sources.get) is truth


def test_a_comprehension_reads_as_its_elements_type() -> None:
    """``self.tables = [BlockTable(size) for size in sizes]`` (vLLM's per-group block tables): the attribute holds
    BlockTables, as ``self.tables[i]`` would, so ``for t in self.tables: t.compute(...)`` reaches BlockTable's method.
    An element made of the comprehension's own names says nothing of them."""
    import ast

    from smithbot.program.syntax import expr_text

    def text(src: str) -> str | None:
        return expr_text(ast.parse(src, mode="eval").body)

    assert text("[BlockTable(size, 4) for size in sizes]") == "BlockTable()"
    assert text("(mod.Table(n) for n in range(3))") == "mod.Table()"
    assert text("{self.make(k) for k in keys}") == "self.make()"
    assert text("[t.table for t in tables]") is None and text("[f(x) for f in fns]") is None


def test_a_flag_with_a_backslash_written_into_an_f_string_keeps_its_own_source() -> None:
    """Writing a local's source into an f-string's expression needs a backslash there, which Python before 3.12
    cannot spell: the flag keeps its own source instead of failing the whole file."""
    src = rb'''class A:
    def __init__(self, flag):
        sep = "\\"
        self.label = f"{sep}x" if flag else ""
'''
    out = file_facts("a.py", src, "a")
    assert "error" not in out
    label = out["classes"]["A"]["flags"]["label"][0][0]
    assert label.startswith("f'") and label.endswith("x' if flag else ''"), label


@pytest.mark.parametrize("setting,held", [("fp8", False), ("modelopt_fp4", True), (None, None)])
def test_a_string_prefix_test_on_a_setting(setting: str | None, held: bool | None) -> None:
    env = Env({"quantization": setting} if setting else {}, {})
    assert evaluate('model_config.quantization.startswith(("modelopt", "w4"))', env) is held


def test_math_on_numbers_and_arithmetic_locals_decide_a_power_of_two_test() -> None:
    """`is_power_of_two(n)` is `n > 0 and math.log2(n).is_integer()`; a local assigned by arithmetic
    (`topk_routed = topk - shared`) is evaluated as its source; a chain of such locals (a test over `experts_per_group`,
    itself over `num_experts`) is followed as deep as it goes."""
    src = {"topk_routed": "topk - shared", "experts_per_group": "num_experts // groups if groups else num_experts",
           "num_experts": "experts",
           "is_power_of_two(num_experts)": "num_experts > 0 and math.log2(num_experts).is_integer()"}
    env = Env({"topk": 9, "shared": 1, "groups": 8}, {})
    for experts, held in ((256, True), (96, False)):
        e = Env({**env.settings, "experts": experts}, {})
        test = ("is_power_of_two(num_experts) and topk_routed <= 8 and (experts_per_group <= 32 and "
                "experts_per_group * 4 <= 128 if groups > 1 else num_experts <= 384)")
        assert evaluate(test, e, src.get) is held
    assert evaluate("math.log2(x).is_integer()", env, src.get) is None
    fn = file_facts("m.py", b"def f(topk, shared):\n    routed = topk - shared\n    if routed <= 8:\n        pass\n",
                    "m")["functions"]["f"]
    assert fn["flags"]["routed"] == ["topk - shared"]


def test_a_negative_number_default_is_a_constant_default() -> None:
    """``def __init__(self, top_k, dim=-1)``: a caller that leaves ``dim`` out hands the impl -1 (lmdeploy's
    SoftmaxTopK builds its impl so); a name default stays a name to resolve, not a constant."""
    src = b"def f(top_k, dim=-1, scale=2.5, mode='a', n=N, shape=(1, 2)):\n    return dim\n"
    fn = file_facts("m.py", src, "m")["functions"]["f"]
    assert fn["constants"] == {"dim": "-1", "scale": "2.5", "mode": "'a'"} and fn["defaults"] == {"n": "N"}
