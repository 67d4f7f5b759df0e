"""Value types shared between stages, as frozen dataclasses (the evaluator's own types live in ``evaluator``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smithbot.errors import SmithbotError

if TYPE_CHECKING:
    from smithbot.config import Target
    from smithbot.repo import Checkout


@dataclass(frozen=True)
class LaunchSite:
    path: str
    line: int
    wrapper: str  # qualified name of the enclosing function, or "<module>"
    grid: str
    kwargs: tuple[str, ...]
    branch: str  # the enclosing if-tests, e.g. "if is_hip(): [body]"; "" when unconditional
    fallback_only: bool  # reached only on a non-CUDA dispatch branch
    cuda_branch: bool  # explicitly on the CUDA branch
    # the enclosing if-tests that serving decides for this launch, each with the value it takes (the call graph's
    # answer where it has one): an extraction keeps that branch only
    decided: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class KernelSite:
    """One Triton kernel definition, its launches, and how it ranks."""

    name: str
    qualname: str
    path: str
    line: int
    module: str
    form: str  # decorator | call (f = triton.jit(f))
    autotune: bool
    heuristics: int
    nested: bool
    conditional: bool
    role: str  # launched | helper (called from other kernels) | unused
    launches: tuple[LaunchSite, ...]
    family: str
    extraction: str  # torch+triton | stubs | cross-file | external
    blockers: tuple[str, ...]  # what puts it in that class: helper names, stub names, external modules
    hotness: float
    reasons: tuple[str, ...]
    measured_us: float | None = None  # GPU µs per profiled step, from a trace
    measured_share: float | None = None  # its share of the step's GPU time
    measured_of: str = ""  # what was profiled: "decode step on qwen3-30b-a3b (batch 8)"
    presets: tuple[str, ...] = ()  # model presets whose default serving path reaches it (empty: none, or no graph)
    default_path: str = ""  # how the best of them reaches it, e.g. "Qwen3MoeForCausalLM.forward → … → kernel"
    phases: tuple[str, ...] = ()  # the serving phases (decode, prefill) in which those paths run it
    reach: str = ""  # default | possible | never (no preset's path) | "" (no call graph)
    undecided: tuple[str, ...] = ()  # the if-tests and dispatches its best path leaves open, each with its line
    per_step: tuple[tuple[str, int], ...] = ()  # (preset, launches a step): its layers where a path runs it per layer

    @property
    def wrappers(self) -> tuple[str, ...]:
        return tuple(sorted({f"{launch.path}::{launch.wrapper}" for launch in self.launches}))

    def to_dict(self) -> dict[str, Any]:
        """What ``dataclasses.asdict`` gives (the launches as dicts), built directly: asdict's deep copy of 500
        sites was a quarter of a warm scan, and no field holds anything mutable."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["launches"] = tuple({f.name: getattr(launch, f.name) for f in fields(launch)} for launch in self.launches)
        d["wrappers"] = list(self.wrappers)
        return d


@dataclass(frozen=True)
class ScanResult:
    """What a scan hands the stages after it: the target and its checkout, every kernel ranked, the torch glue on the
    default paths (``scan.fusion.FusionSite``), what could not be parsed, and where ``scan.json`` was written."""

    target: Target
    checkout: Checkout
    sites: list[KernelSite]
    errors: list[tuple[str, str]]
    modules: dict[str, str]  # module name -> relative path, for every parsed file
    files: int
    parsed: int
    cached: int
    path: Path  # where scan.json was written
    fusion: list[Any] = field(default_factory=list)  # scan.fusion.FusionSite: torch glue on the default paths


# a task's self-check as a value, read by extraction's retries (extract/attempts.py) and the input growth
class Failure(enum.Enum):
    READ_PAST = "a kernel reads past one of its inputs"
    DISAGREES = "the baseline's outputs differ between two runs on the same inputs"
    OUT_OF_MEMORY = "a case's inputs do not fit in memory"
    BROKEN = "the baseline does not run on its inputs"


# the evaluator's reasons for an incorrect baseline that mean its outputs differ from run to run
_DISAGREES = ("mismatch", "nondeterministic")


def failure_of(status: str, reason: str = "", read_past: dict[str, Any] | None = None) -> Failure:
    """The failure a self-check's evaluator reported: its status (a worker's status where the baseline failed while
    the task was prepared), its reason, and what a kernel read past, if one did."""
    if read_past:
        return Failure.READ_PAST
    if status == "incorrect" and reason in _DISAGREES:
        return Failure.DISAGREES
    if status == "oom":
        return Failure.OUT_OF_MEMORY
    return Failure.BROKEN


@dataclass(frozen=True)
class Check:
    """A self-check's outcome: whether it passed, the line that says so or why not, the Triton kernels the baseline
    launched, and, on failure, which kind and what a kernel read past (``OutOfBounds.found``)."""
    ok: bool
    why: str
    launched: tuple[str, ...] = ()
    failure: Failure | None = None
    read_past: dict[str, Any] | None = None


# --- The input plan: what a task's inputs are, handed from inference (``inputs/specs.py``) to the harness, the test
# generator, the case sizing and the growth. Its spec language is the target YAML's ``inputs:`` (docs/extract.md):
# a spec is a plain value (a number, a flag, None, a size expression over the case's dims, or a marker: ``dtype:X``,
# ``tldtype:X``, ``device:``, ``regime:decode``, ``default:``), or a mapping of one of the kinds below. A task's
# harness keeps the plan as a literal (``SPEC``), in the mapping form, which ``InputPlan.read`` reads back.

SPEC_DTYPES = ("act", "fp32", "fp16", "bf16", "int32", "fp8_e4m3", "fp8_e5m2", "int8", "int16", "uint8", "int64",
               "bool", "complex64", "fp4x2", "e8m0")
INIT_KINDS = ("randn", "randint", "perm", "arange", "even", "even_end", "split", "cuts", "starts", "upto", "chunks",
              "onehot", "rand", "around1")


class SpecError(SmithbotError, ValueError):
    """A spec that is not in the language: ``where`` is the key path below the spec (``.object.seq_lens``)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where.lstrip('.') or 'the spec'}: {message}")
        self.where, self.message = where, message


@dataclass(frozen=True)
class TensorSpec:
    """A tensor drawn for the case: its shape (sizes or expressions over the dims), dtype (unsaid: the case's), how
    its values are drawn (``init``, unsaid: ``randn``) and whether it is handed over as a transposed view."""
    shape: tuple[Any, ...]
    dtype: str | None = None
    init: str | None = None
    transposed: bool | None = None


@dataclass(frozen=True)
class LayoutField:
    """A field of a layout instance (``inputs/layouts/``), built once per case for each distinct (layout, sizes).
    In a target YAML the field may be unsaid (bound by the parameter's name) and so may the sizes."""
    layout: str
    field: str | None = None
    sizes: tuple[tuple[str, Any], ...] | None = None


@dataclass(frozen=True)
class ObjectSpec:
    """An object whose attributes are inputs (engine state, a batch's metadata). In a target YAML it may name a
    layout (``{object: {layout: paged_kv}}``) whose fields it carries; the plan has them spelled out."""
    attrs: tuple[tuple[str, Any], ...]
    layout: str | None = None
    sizes: tuple[tuple[str, Any], ...] | None = None


@dataclass(frozen=True)
class ItemsSpec:
    """A list of inputs."""
    items: tuple[Any, ...]


@dataclass(frozen=True)
class LiteralSpec:
    """A value handed over as it is (a tuple, a string, a settings dict)."""
    value: Any


@dataclass(frozen=True)
class ReturnsSpec:
    """A method answering the value of its spec, whatever it is called with."""
    value: Any


_KINDS: dict[str, tuple[str, ...]] = {  # a mapping spec's kind (its first key) -> the keys it may hold, in order
    "shape": ("shape", "dtype", "init", "transposed"), "layout": ("layout", "field", "sizes"), "object": ("object",),
    "items": ("items",), "literal": ("literal",), "returns": ("returns",)}


def read_spec(value: Any, where: str = "") -> Any:
    """The typed spec of a spec in the mapping form (a plain value stays as it is); ``SpecError`` where it is not in
    the language: an unknown key, a dtype or init kind the harness does not make, a key of another kind."""
    if not isinstance(value, dict):
        return value
    known = [k for keys in _KINDS.values() for k in keys]
    unknown = [k for k in value if k not in known]
    if unknown:
        raise SpecError(f"{where}.{unknown[0]}", f"unknown key {unknown[0]!r} (a spec holds: {', '.join(known)})")
    kind = next((k for k in _KINDS if k in value), None)
    if kind is None:
        raise SpecError(where, "a mapping spec needs one of shape, layout, object, items, literal or returns")
    stray = [k for k in value if k not in _KINDS[kind]]
    if stray:
        raise SpecError(f"{where}.{stray[0]}", f"no key of a {kind} spec (it holds: {', '.join(_KINDS[kind])})")
    if kind == "shape":
        if not isinstance(value["shape"], list):
            raise SpecError(f"{where}.shape", "must be a list of sizes")
        if value.get("dtype") is not None and value["dtype"] not in SPEC_DTYPES:
            raise SpecError(f"{where}.dtype", f"unknown dtype {value['dtype']!r} (known: {', '.join(SPEC_DTYPES)})")
        if "init" in value and str(value["init"]).split(":")[0] not in INIT_KINDS:
            raise SpecError(f"{where}.init", f"unknown kind {str(value['init']).split(':')[0]!r} (known: "
                                             f"{', '.join(INIT_KINDS)})")
        return TensorSpec(tuple(value["shape"]), value.get("dtype"), value.get("init"), value.get("transposed"))
    if kind == "layout":
        sizes = value.get("sizes")
        if sizes is not None and not isinstance(sizes, dict):
            raise SpecError(f"{where}.sizes", "must be a mapping of a layout's sizes")
        return LayoutField(value["layout"], value.get("field"), None if sizes is None else tuple(sizes.items()))
    if kind == "object":
        obj = value["object"]
        if not isinstance(obj, dict):
            raise SpecError(f"{where}.object", "must be a mapping of attribute specs")
        layout = obj.get("layout") if isinstance(obj.get("layout"), str) else None  # else an attribute so named
        attrs = tuple((k, read_spec(v, f"{where}.object.{k}")) for k, v in obj.items()
                      if layout is None or k not in ("layout", "sizes"))
        sizes = obj.get("sizes") if layout is not None else None
        return ObjectSpec(attrs, layout, None if sizes is None else tuple(dict(sizes).items()))
    if kind == "items":
        if not isinstance(value["items"], list):
            raise SpecError(f"{where}.items", "must be a list of specs")
        return ItemsSpec(tuple(read_spec(v, f"{where}.items[{i}]") for i, v in enumerate(value["items"])))
    if kind == "returns":
        return ReturnsSpec(read_spec(value["returns"], f"{where}.returns"))
    return LiteralSpec(value["literal"])


def spec_literal(spec: Any) -> Any:
    """A typed spec in the mapping form (``read_spec`` reads it back to the same spec)."""
    if isinstance(spec, TensorSpec):
        out: dict[str, Any] = {"shape": list(spec.shape)}
        out.update({k: getattr(spec, k) for k in ("dtype", "init", "transposed") if getattr(spec, k) is not None})
        return out
    if isinstance(spec, LayoutField):
        out = {"layout": spec.layout}
        if spec.field is not None:
            out["field"] = spec.field
        if spec.sizes is not None:
            out["sizes"] = dict(spec.sizes)
        return out
    if isinstance(spec, ObjectSpec):
        named = {"layout": spec.layout, **({"sizes": dict(spec.sizes)} if spec.sizes is not None else {})}
        return {"object": {**(named if spec.layout is not None else {}),
                           **{k: spec_literal(v) for k, v in spec.attrs}}}
    if isinstance(spec, ItemsSpec):
        return {"items": [spec_literal(v) for v in spec.items]}
    if isinstance(spec, ReturnsSpec):
        return {"returns": spec_literal(spec.value)}
    if isinstance(spec, LiteralSpec):
        return {"literal": spec.value}
    return spec


def spec_parts(spec: Any, returns: bool = True) -> list[Any]:
    """``spec`` and every spec inside it: an object's attributes, a list's items, and (with ``returns``) what a
    method returns, which is no input of its own."""
    out, todo = [], [spec]
    while todo:
        s = todo.pop()
        out.append(s)
        todo += [v for _, v in s.attrs] if isinstance(s, ObjectSpec) else list(s.items) if isinstance(s, ItemsSpec) \
            else [s.value] if isinstance(s, ReturnsSpec) and returns else []
    return out


@dataclass(frozen=True)
class InputPlan:
    """A task's inputs: each parameter's spec in signature order, the dims computed from the case's (``extra``, as
    expressions over them), and the inputs read only through an index (``gathered``: their size is not what a call
    moves)."""
    params: tuple[tuple[str, Any], ...]
    extra: tuple[tuple[str, Any], ...] = ()
    gathered: tuple[str, ...] = ()

    @classmethod
    def read(cls, specs: dict[str, Any], extra: dict[str, Any] | None = None,
             gathered: tuple[str, ...] = ()) -> InputPlan:
        """The plan of specs in the mapping form (a harness's ``SPEC``); ``SpecError`` names the parameter of one
        that is not in the language."""
        return cls(tuple((name, read_spec(s, name)) for name, s in specs.items()),
                   tuple((extra or {}).items()), tuple(gathered))

    @property
    def specs(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def dims(self) -> dict[str, Any]:
        return dict(self.extra)

    def literal(self) -> dict[str, Any]:
        """The specs in the mapping form, as a harness keeps them."""
        return {name: spec_literal(s) for name, s in self.params}

    def layouts(self) -> set[str]:
        """The layouts its inputs come from."""
        return {s.layout for _, spec in self.params for s in spec_parts(spec) if isinstance(s, LayoutField)}

    def with_shape(self, name: str, shape: list[Any]) -> InputPlan:
        """The plan with the tensor ``name`` drawn at ``shape``."""
        return replace(self, params=tuple((n, replace(s, shape=tuple(shape)) if n == name else s)
                                          for n, s in self.params))
