"""Target YAML (``targets/*.yaml``) loaded into frozen dataclasses and validated: unknown keys are errors, and every
error is one line naming the file and the key."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.env import cache_dir
from evaluator.task import YamlChecker, read_yaml
from smithbot import cache
from smithbot.cluster import ClusterError, address
from smithbot.errors import SmithbotError
from smithbot.types import SpecError, read_spec
from smithbot.program.evaluate import Env, Platform

TARGETS_DIR = Path(__file__).resolve().parent.parent / "targets"
if not TARGETS_DIR.is_dir():  # installed: targets/ ships as the smithbot.targets package
    TARGETS_DIR = Path(__file__).resolve().parent / "targets"



def templates_dir() -> Path:
    """``templates/`` at the top of a checkout, or the ``smithbot.templates`` package when installed."""
    top = Path(__file__).resolve().parent.parent / "templates"
    return top if top.is_dir() else Path(__file__).resolve().parent / "templates"


def pr_styles() -> list[str]:
    """The PR body templates there are (``templates/pr/<style>.md.j2``): a target's ``conventions.pr_style``."""
    return sorted(p.name.removesuffix(".md.j2") for p in (templates_dir() / "pr").glob("*.md.j2")
                  if not p.name.startswith("_"))


MODEL_KEYS = ("hidden", "heads", "kv_heads", "head_dim", "intermediate", "moe_intermediate", "experts", "top_k", "vocab",
              "layers", "architecture", "config")


class ConfigError(SmithbotError):
    """A target or model YAML is invalid, or names something that does not exist. One line."""


class _Checker(YamlChecker):
    error = ConfigError

    def str_list(self, value: Any, key: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(key, "must be a list of strings")
        return tuple(value)

    def any_mapping(self, value: Any, key: str) -> dict[str, Any]:
        """A mapping whose keys are the writer's own (parameter or kernel names, dims)."""
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a mapping, got {type(value).__name__}")
        return value

    def int_list(self, value: Any, key: str) -> tuple[int, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(key, "must be a non-empty list of positive integers")
        return tuple(self.positive_int(v, f"{key}[{i}]") for i, v in enumerate(value))


@dataclass(frozen=True)
class ModelPreset:
    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    experts: int = 0
    top_k: int = 0
    moe_intermediate: int = 0
    layers: int = 1  # decoder layers (config.json num_hidden_layers)
    architecture: str = ""  # the model class config.json names (architectures[0]), where the call graph starts
    # more config.json fields that model code branches on (DeepSeek-V3's topk_method: noaux_tc); the call graph
    # reads them as settings, and `smithbot profile` writes them into config.json
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def v_head_dim(self) -> int:
        """The head dim of v and of attention's output: head_dim, but for MLA models, whose q/k heads are wider
        (DeepSeek-V3: 192 for q/k, 128 for v)."""
        return int(self.config.get("v_head_dim", self.head_dim))

    def config_json(self) -> dict[str, Any]:
        """A Hugging Face config.json with these numbers, for engines run on random weights (``smithbot profile``)."""
        cfg: dict[str, Any] = {
            "architectures": [self.architecture], "hidden_size": self.hidden, "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads, "head_dim": self.head_dim, "intermediate_size": self.intermediate,
            "num_hidden_layers": self.layers, "vocab_size": self.vocab, "torch_dtype": "bfloat16",
            "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None,
            "hidden_act": "silu", "tie_word_embeddings": False, **self.config}
        if self.experts:
            cfg.update(num_experts=self.experts, n_routed_experts=self.experts, num_local_experts=self.experts,
                       num_experts_per_tok=self.top_k, moe_intermediate_size=self.moe_intermediate)
        return cfg


@dataclass(frozen=True)
class Hints:
    hot_paths: tuple[str, ...] = ()
    model_paths: tuple[str, ...] = ()
    custom_jit_decorators: tuple[str, ...] = ()
    # the compiled or third-party packages whose calls an extracted task keeps as imports (each target lists its own)
    external_modules: tuple[str, ...] = ()


@dataclass(frozen=True)
class Engine:
    """One of a target's engines: ``name`` (``PyTorch engine``), the ``flag`` that selects it (``--backend pytorch``),
    and the presets whose serve command picks it by default (``default``); the others need the flag to run its code."""

    name: str
    flag: str
    default: tuple[str, ...] = ()

    def note(self, presets: list[str] | tuple[str, ...]) -> str:
        """A sentence for a proposal made for these presets: which run this engine by default, which need the flag."""
        own = [p for p in presets if p in self.default]
        other = [p for p in presets if p not in self.default]
        out = f"This code runs in the {self.name}."
        if own:
            out += f" Serving picks it by default for {', '.join(own)}."
        if other:
            out += f" {', '.join(other)} {'runs' if len(other) == 1 else 'run'} another engine by default and " \
                   f"{'reaches' if len(other) == 1 else 'reach'} this code only with `{self.flag}`."
        return out


@dataclass(frozen=True)
class Serving:
    """How the target serves by default on one GPU architecture: what decides its dispatch branches.

    ``gpu`` is the GPU architecture (``sm90``) and ``packages`` the optional packages installed or not
    (``flashinfer: installed``): what torch and ``find_spec`` answer, over which the engine's own platform helpers
    are evaluated. ``settings`` are server arguments by attribute name, ``env`` environment flags with
    the engine's own defaults (the phase of a step is not declared: the call graph evaluates the engine's
    forward-mode predicates, ``program.values.phase_member``). ``entries`` are the per-step engine functions (``module:Class.method``) the call graph starts at, besides the model's
    ``forward``; ``startup`` the engine functions that run once and build what the steps use (the attention backend),
    besides the entry classes' constructors; ``model_settings`` overrides settings for one preset. ``arguments`` names the classes that declare the engine's arguments, whose literal defaults
    are settings too. See ``smithbot/program/evaluate.py``."""

    gpu: str = ""
    packages: dict[str, bool] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    entries: tuple[str, ...] = ()
    # per-step engine functions that only decode steps run (the decode CUDA graph's replay: the engine runs it for a
    # batch its forward-mode test says is a decode batch); walked in the decode phase only
    decode_entries: tuple[str, ...] = ()
    startup: tuple[str, ...] = ()
    # the classes whose fields are the engine's documented arguments (``module:Class``, sglang's ServerArgs): each
    # field's literal default is a setting, under the ``settings`` declared here
    arguments: tuple[str, ...] = ()
    # words that mark code for other hardware in a module path or class name (forward_mla_fused_rope_rocm.py,
    # DeepseekMLARocmForwardMixin): the call graph does not enter such code on this GPU
    other_platforms: tuple[str, ...] = ("rocm", "hip", "aiter", "amd", "npu", "ascend", "xpu", "hpu", "musa", "mlu",
                                        "camb", "maca", "cpu", "mps", "tpu")
    model_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the engine whose code the scan walks, where the target has more than one (lmdeploy's PyTorch engine beside
    # TurboMind): its name, how a user selects it, and the presets whose plain serve command picks it
    engine: Engine | None = None

    def environment(self) -> Env:
        """These defaults as the if-test evaluator's environment (``smithbot/program/evaluate.py``)."""
        return Env(self.settings, self.env, platform=Platform(self.gpu, self.packages))

    def for_model(self, preset: ModelPreset) -> Serving:
        """These defaults for one preset: its config.json facts, then the target's ``model_settings`` for it, over
        the settings."""
        own = self.model_settings.get(preset.name, {})
        return dataclasses.replace(self, settings={**self.settings, **preset.config_json(), **own})


@dataclass(frozen=True)
class Formatter:
    """A formatter the repository's CI runs: its command line with the repository's arguments (``run``), and the
    arguments that make it only check (``check``)."""
    run: tuple[str, ...]
    check: tuple[str, ...] = ("--check",)

    @property
    def name(self) -> str:
        return self.run[0]


@dataclass(frozen=True)
class Conventions:
    formatter: tuple[Formatter, ...] = ()
    test_layout: str = "tests/test_{op}.py"
    pr_style: str = "generic"
    max_open_prs: int = 1
    header: str = ""
    test_register: str = ""  # lines the generated test carries after its imports (sglang registers tests for CI)
    benchmark: bool = False  # whether the repository's kernel PRs carry a benchmark script (else the PR's table is)
    # how the repository writes kernel tests: parametrised pytest functions, a pytest class, or unittest
    test_style: str = "pytest"
    signoff: bool = False  # whether each commit carries a DCO `Signed-off-by:` line of its author


TEST_STYLES = ("pytest", "class", "unittest")


@dataclass(frozen=True)
class Target:
    name: str
    repo: str  # a git URL, or a path (relative to targets/) for bundled sources
    branch: str
    sparse_paths: tuple[str, ...]
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    hints: Hints
    serving: Serving
    models: tuple[ModelPreset, ...]
    decode_batch: tuple[int, ...]
    prefill_tokens: tuple[int, ...]
    conventions: Conventions
    file: Path | None = None
    # the presets whose default serving path reaches the kernel being extracted (scan's KernelSite.presets): its
    # cases come from these when they have the dims its inputs need
    reach_presets: tuple[str, ...] = ()
    reach_phases: tuple[str, ...] = ()  # the serving phases in which they run it (decode, prefill)
    # whether a layout binds by itself to a launcher the YAML gives no specs (inputs/plan.py); extraction retries a
    # task that fails its self-check without, so that no kernel the plain inference served is lost to a layout
    layouts_by_themselves: bool = True
    # the engine's own benchmark on random weights under the torch profiler (smithbot/profile.py fills in
    # {python}, {model_dir}, {config}, {batch}, {phase}, {steps}, {trace}, {trace_dir})
    profile: str = ""
    # wrapper (or FILE::wrapper, for one file's launcher of a common name such as `call`) -> parameter -> input spec
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # runtime helpers a kernel's launcher calls and what they stand for in its standalone task (``is_hip: false``,
    # a tuned-config lookup's untuned default): extraction only; the call graph evaluates the engine's own code
    stubs: dict[str, Any] = field(default_factory=dict)

    def with_stubs(self, values: dict[str, Any]) -> Target:
        return dataclasses.replace(self, stubs={**self.stubs, **values})

    def with_settings(self, values: dict[str, Any]) -> Target:
        """This target with serving defaults overridden (``--set attention_backend=triton``). A key must be a
        declared setting, runtime name or environment flag; ConfigError names the known ones."""
        sv = self.serving
        known = {**sv.settings, **sv.env}
        for k in values:
            if k not in known:
                raise ConfigError(f"--set {k}: not a serving default of {self.name} (known: {', '.join(sorted(known))})")
        serving = dataclasses.replace(
            sv, settings={**sv.settings, **{k: v for k, v in values.items() if k in sv.settings}},
            env={**sv.env, **{k: v for k, v in values.items() if k in sv.env}})
        return dataclasses.replace(self, serving=serving)

    def preset(self, name: str) -> ModelPreset:
        """One of this target's model presets; ConfigError names the known ones."""
        for m in self.models:
            if m.name == name:
                return m
        raise ConfigError(f"unknown model preset {name!r} for {self.name} (known: "
                          f"{', '.join(m.name for m in self.models)})")

    @property
    def bundled(self) -> bool:
        return "://" not in self.repo and not self.repo.startswith("git@")

    def for_launcher(self, path: str, wrapper: str) -> Target:
        """This target with the input specs given for ``path::wrapper``, if any, as those of ``wrapper``."""
        inputs = dict(self.inputs)
        own = inputs.pop(f"{path}::{wrapper}", None)
        return self if own is None else dataclasses.replace(self, inputs={**inputs, wrapper: own})

    def with_inputs(self, wrapper: str, values: dict[str, Any]) -> Target:
        """This target with ``values`` as input specs of ``wrapper``, over any the YAML gives."""
        return dataclasses.replace(self, inputs={**self.inputs, wrapper: {**self.inputs.get(wrapper, {}), **values}})


_TOP = {"name": True, "repo": True, "branch": False, "sparse_paths": False, "include": False, "exclude": False,
        "hints": False, "serving": False, "models": True, "regimes": True, "conventions": False, "inputs": False, "profile": False,
        "stubs": False}
_HINTS = {k: False for k in Hints.__dataclass_fields__}
_CONV = {k: False for k in Conventions.__dataclass_fields__}
_REGIMES = {"decode_batch": True, "prefill_tokens": True}
_MODEL = {k: k in ("hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab") for k in MODEL_KEYS}
_SERVING = {k: False for k in Serving.__dataclass_fields__}


def load_models(file: Path | None = None) -> dict[str, ModelPreset]:
    file = file or TARGETS_DIR / "models.yaml"
    c = _Checker(file)
    data = _read_cached(file)
    if not isinstance(data, dict):
        raise c.fail("", "must map model names to their config numbers")
    out = {}
    for name, raw in data.items():
        raw = c.mapping(raw, str(name), _MODEL)
        nums = {}
        for k, v in raw.items():
            if k in ("experts", "top_k", "moe_intermediate") and v == 0:
                nums[k] = 0
            elif k == "architecture":
                nums[k] = c.string(v, f"{name}.{k}")
            elif k == "config":
                if not isinstance(v, dict):
                    raise c.fail(f"{name}.config", "must map config.json fields to their values")
                nums[k] = dict(v)
            else:
                nums[k] = c.positive_int(v, f"{name}.{k}")
        out[str(name)] = ModelPreset(name=str(name), **nums)
    return out


def _read_cached(file: Path) -> Any:
    """``read_yaml``, kept by the file's bytes: building sglang's target file took a sixth of a warm scan. An
    unreadable or malformed file is ``read_yaml``'s error, never cached."""
    try:
        key = hashlib.sha1(file.read_bytes()).hexdigest()
    except OSError:
        return read_yaml(file, ConfigError)
    path = cache_dir() / "cache" / "yaml" / f"{key}.bin"
    data = cache.load(path)
    if data is None:
        data = read_yaml(file, ConfigError)
        cache.store(path, data, as_json=False)
    return data


def _check_launcher_specs(c: _Checker, specs: Any, key: str, presets: set[str], kernel: bool = False) -> None:
    """A launcher's entry under ``inputs:``: its parameters' specs and its reserved keys (a kernel's own entry under
    ``_kernels`` takes the same, but another ``_kernels``)."""
    for name, spec in c.any_mapping(specs, key).items():
        at = f"{key}.{name}"
        if name in ("_dims", "_interpreter_dims", "_stubs", "_layouts"):
            c.any_mapping(spec, at)
        elif name == "_models":
            for i, m in enumerate(c.str_list(spec, at)):
                if m not in presets:
                    raise c.fail(f"{at}[{i}]", f"unknown model preset {m!r} (known: {', '.join(sorted(presets))})")
        elif name == "_shrink":
            c.string(spec, at)
        elif name == "_kernels" and not kernel:
            for k, own in c.any_mapping(spec, at).items():
                _check_launcher_specs(c, own, f"{at}.{k}", presets, kernel=True)
        elif name == "_kernels":
            raise c.fail(at, "a kernel's own entry holds no _kernels of its own")
        else:
            _check_spec(c, spec, at)


def _check_spec(c: _Checker, spec: Any, key: str) -> None:
    """One input spec, read as the plan reads it (``smithbot.types.read_spec``): a key, dtype or value kind outside
    the language is an error at its key."""
    try:
        read_spec(spec)
    except SpecError as exc:
        raise c.fail(f"{key}{exc.where}", exc.message) from None


def _formatters(c: _Checker, value: Any, key: str) -> tuple[Formatter, ...]:
    """``conventions.formatter``: a list of ``{run: [command, args...], check: [args...]}`` (check defaults to
    ``--check``)."""
    if not isinstance(value, list):
        raise c.fail(key, "must be a list of {run: [command, args...], check: [args...]} mappings")
    out = []
    for i, item in enumerate(value):
        raw = c.mapping(item, f"{key}[{i}]", {"run": True, "check": False})
        run = c.str_list(raw["run"], f"{key}[{i}].run")
        if not run:
            raise c.fail(f"{key}[{i}].run", "must name the formatter's command")
        out.append(Formatter(run, c.str_list(raw["check"], f"{key}[{i}].check") if "check" in raw else ("--check",)))
    return tuple(out)


def load_target(file: Path, models: dict[str, ModelPreset] | None = None) -> Target:
    c = _Checker(file)
    data = c.mapping(_read_cached(file), "", _TOP)
    models = models if models is not None else load_models()
    hints_raw = c.mapping(data.get("hints") or {}, "hints", _HINTS)
    hints = Hints(**{k: c.str_list(v, f"hints.{k}") for k, v in hints_raw.items()})
    conv_raw = c.mapping(data.get("conventions") or {}, "conventions", _CONV)
    conv: dict[str, Any] = {}
    for k, v in conv_raw.items():
        key = f"conventions.{k}"
        conv[k] = _formatters(c, v, key) if k == "formatter" else c.positive_int(v, key) if k == "max_open_prs" \
            else c.boolean(v, key) if k in ("benchmark", "signoff") else c.string(v, key)
    if conv.get("test_style", "pytest") not in TEST_STYLES:
        raise c.fail("conventions.test_style", f"must be one of {', '.join(TEST_STYLES)}, not {conv['test_style']!r}")
    styles = pr_styles()
    if conv.get("pr_style", "generic") not in styles:
        raise c.fail("conventions.pr_style", f"must name a PR template in templates/pr/ ({', '.join(styles)}), "
                                             f"not {conv['pr_style']!r}")
    preset_names = c.str_list(data["models"], "models")
    for i, n in enumerate(preset_names):
        if n not in models:
            raise c.fail(f"models[{i}]", f"unknown model preset {n!r} (known: {', '.join(models)})")
    regimes = c.mapping(data["regimes"], "regimes", _REGIMES)
    inputs = data.get("inputs") or {}
    if not isinstance(inputs, dict):
        raise c.fail("inputs", "must map wrapper names to {parameter: spec} mappings")
    for wrapper, specs in inputs.items():
        _check_launcher_specs(c, specs, f"inputs.{wrapper}", set(models))
    serving = load_serving(c, data.get("serving") or {}, preset_names)
    stubs = data.get("stubs") or {}
    if not isinstance(stubs, dict):
        raise c.fail("stubs", "must map runtime helpers to the values they stand for")
    return Target(
        name=c.string(data["name"], "name"), repo=c.string(data["repo"], "repo"),
        branch=c.string(data.get("branch", "main"), "branch"),
        sparse_paths=c.str_list(data.get("sparse_paths", []), "sparse_paths"),
        include=c.str_list(data.get("include", ["**/*.py"]), "include"),
        exclude=c.str_list(data.get("exclude", []), "exclude"),
        hints=hints, serving=serving, models=tuple(models[n] for n in preset_names),
        decode_batch=c.int_list(regimes["decode_batch"], "regimes.decode_batch"),
        prefill_tokens=c.int_list(regimes["prefill_tokens"], "regimes.prefill_tokens"),
        conventions=Conventions(**conv), file=file, inputs=inputs, stubs=dict(stubs),
        profile=c.string(data["profile"], "profile") if data.get("profile") else "")


def load_serving(c: _Checker, raw: Any, presets: tuple[str, ...]) -> Serving:
    raw = c.mapping(raw, "serving", _SERVING)
    out: dict[str, Any] = {}
    for k in ("packages", "settings", "env", "model_settings"):
        v = raw.get(k) or {}
        if not isinstance(v, dict):
            raise c.fail(f"serving.{k}", "must be a mapping")
        out[k] = dict(v)
    for k, v in out["packages"].items():
        if v not in ("installed", "missing"):
            raise c.fail(f"serving.packages.{k}", f"must be installed or missing, got {v!r}")
    out["packages"] = {k: v == "installed" for k, v in out["packages"].items()}
    for k, v in out["model_settings"].items():
        if k not in presets:
            raise c.fail(f"serving.model_settings.{k}", "names no model preset of this target")
        if not isinstance(v, dict):
            raise c.fail(f"serving.model_settings.{k}", "must map settings to values")
    funcs = {}
    if "other_platforms" in raw:
        funcs["other_platforms"] = c.str_list(raw["other_platforms"], "serving.other_platforms")
    for key in ("entries", "decode_entries", "startup", "arguments"):
        funcs[key] = c.str_list(raw.get(key, []), f"serving.{key}")
        for i, e in enumerate(funcs[key]):
            if ":" not in e:
                raise c.fail(f"serving.{key}[{i}]", f"{e!r} must be module:Qualified.name")
    if raw.get("engine") is not None:
        e = c.mapping(raw["engine"], "serving.engine", {"name": True, "flag": True, "default": False})
        default = c.str_list(e.get("default", []), "serving.engine.default")
        for p in default:
            if p not in presets:
                raise c.fail("serving.engine.default", f"{p!r} names no model preset of this target")
        out["engine"] = Engine(c.string(e["name"], "serving.engine.name"), c.string(e["flag"], "serving.engine.flag"),
                               default)
    return Serving(gpu=c.string(raw.get("gpu", "sm90"), "serving.gpu"), **funcs, **out)


def target_names() -> list[str]:
    return sorted(p.stem for p in TARGETS_DIR.glob("*.yaml") if p.stem != "models")


def get_target(name: str) -> Target:
    """A bundled target by name. Raises ConfigError for an unknown name, listing the known ones."""
    file = TARGETS_DIR / f"{name}.yaml"
    if name == "models" or not file.is_file():
        raise ConfigError(f"unknown target {name!r} (known: {', '.join(target_names())}; or pass a git URL or a path)")
    return load_target(file)


# what any engine's platform helpers stand for in an extracted task on an NVIDIA GPU, for a target of no YAML
PLATFORM_NAMES = {"is_hip": False, "is_npu": False, "is_xpu": False, "is_cuda": True}


def generic_target(repo: str) -> Target:
    """Defaults for any git URL or local path that is not a bundled target."""
    models = load_models()
    name = Path(repo.rstrip("/")).name.removesuffix(".git") or "target"
    return Target(name=name, repo=repo, branch="", sparse_paths=(), include=("**/*.py",),
                  exclude=("**/test/**", "**/tests/**", "**/benchmark*/**", "**/.git/**"), hints=Hints(), serving=Serving(gpu="sm90"),
                  models=tuple(models.values()), decode_batch=(1, 8, 64, 256), prefill_tokens=(512, 4096, 16384),
                  conventions=Conventions(), file=None, stubs=dict(PLATFORM_NAMES))




# The search's configuration (``smithbot evolve --config FILE``): the LLM endpoint and the price table.


@dataclass(frozen=True)
class LLMModel:
    name: str
    weight: float = 1.0


@dataclass(frozen=True)
class LLMConfig:
    """An OpenAI-compatible endpoint. The API key is read from the environment variable *named* here, never stored."""

    base_url: str
    api_key_env: str
    models: tuple[LLMModel, ...]
    temperature: float = 0.7
    max_tokens: int = 8192
    timeout_s: float = 120.0
    retries: int = 4
    backoff_s: float = 2.0
    edit_formats: dict[str, float] = field(default_factory=lambda: {"diff": 0.7, "full": 0.2, "crossover": 0.1})


@dataclass(frozen=True)
class Price:
    input: float  # USD per million prompt tokens
    output: float  # USD per million completion tokens


@dataclass(frozen=True)
class EvolveConfig:
    llm: LLMConfig | None = None
    prices: dict[str, Price] = field(default_factory=dict)
    cluster: str | None = None  # evaluator.cluster: local, ray or ray://HOST[:PORT] (``--cluster`` wins)

    def cost(self, model: str, tokens_in: int, tokens_out: int) -> float:
        p = self.prices.get(model)
        return 0.0 if p is None else (tokens_in * p.input + tokens_out * p.output) / 1e6


_EVOLVE = {"llm": False, "prices": False, "evaluator": False}
_LLM = {"base_url": True, "api_key_env": True, "models": True, "temperature": False, "max_tokens": False,
        "timeout_s": False, "retries": False, "backoff_s": False, "edit_formats": False}


def _number(c: _Checker, value: Any, key: str, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise c.fail(key, f"must be a number >= {minimum:g}, got {value!r}")
    return float(value)


def load_evolve_config(file: Path | None) -> EvolveConfig:
    """Read an evolve config YAML; None gives the offline default (no LLM)."""
    if file is None:
        return EvolveConfig()
    c = _Checker(file)
    data = c.mapping(read_yaml(file, ConfigError) or {}, "", _EVOLVE)
    prices = {}
    for model, p in (data.get("prices") or {}).items():
        p = c.mapping(p, f"prices.{model}", {"input": True, "output": True})
        prices[str(model)] = Price(_number(c, p["input"], f"prices.{model}.input"),
                                   _number(c, p["output"], f"prices.{model}.output"))
    llm = None
    if data.get("llm") is not None:
        raw = c.mapping(data["llm"], "llm", _LLM)
        models_raw = raw["models"]
        if not isinstance(models_raw, list) or not models_raw:
            raise c.fail("llm.models", "must be a non-empty list of model names or {name, weight} mappings")
        models = []
        for i, m in enumerate(models_raw):
            if isinstance(m, str):
                m = {"name": m}
            m = c.mapping(m, f"llm.models[{i}]", {"name": True, "weight": False})
            models.append(LLMModel(c.string(m["name"], f"llm.models[{i}].name"),
                                   _number(c, m.get("weight", 1.0), f"llm.models[{i}].weight")))
        formats = raw.get("edit_formats", LLMConfig.__dataclass_fields__["edit_formats"].default_factory())  # type: ignore[misc]
        formats = c.mapping(formats, "llm.edit_formats", {"diff": False, "full": False, "crossover": False})
        llm = LLMConfig(
            base_url=c.string(raw["base_url"], "llm.base_url"), api_key_env=c.string(raw["api_key_env"], "llm.api_key_env"),
            models=tuple(models), temperature=_number(c, raw.get("temperature", 0.7), "llm.temperature"),
            max_tokens=c.positive_int(raw.get("max_tokens", 8192), "llm.max_tokens"),
            timeout_s=_number(c, raw.get("timeout_s", 120.0), "llm.timeout_s", 0.1),
            retries=int(_number(c, raw.get("retries", 4), "llm.retries")),
            backoff_s=_number(c, raw.get("backoff_s", 2.0), "llm.backoff_s"),
            edit_formats={k: _number(c, v, f"llm.edit_formats.{k}") for k, v in formats.items()})
    return EvolveConfig(llm=llm, prices=prices, cluster=_cluster(c, data.get("evaluator")))


def _cluster(c: _Checker, raw: Any) -> str | None:
    """``evaluator: {cluster: ray}``: where candidates are evaluated (``smithbot/cluster.py``), or None."""
    if raw is None:
        return None
    spec = c.string(c.mapping(raw, "evaluator", {"cluster": True})["cluster"], "evaluator.cluster")
    try:
        address(spec)
    except ClusterError as exc:
        raise c.fail("evaluator.cluster", str(exc)) from None
    return spec
