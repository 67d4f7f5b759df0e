"""The values the evaluator (``evaluate``) computes with: a value not decided (``Unknown``), the model's config, an
object a caller passes, an enum member or a torch dtype seen by name, one of several values, and the sources that stand
for them where a value is handed on as source (``__each__(lo, hi)``, ``__config__``)."""

from __future__ import annotations

import itertools
from typing import Any, Callable

class _UnknownType:
    def __repr__(self) -> str:
        return "Unknown"


Unknown: Any = _UnknownType()  # a value the defaults do not decide (None is a value: quantization: null)
MISSING = object()  # (not a value: the rule that asked has no answer)

EACH_SOURCE = "__each__"  # the source ``__each__(lo, hi)``: a name that is each of range(lo, hi) (a layer's index)
EACH_OF_SOURCE = "__each_of__"  # ``__each_of__(a, b)``: each of these values, in different instances
ONE_OF_SOURCE = "__one_of__"  # ``__one_of__(a, b)``: one of these values, not known which
EACH = "each"  # a test's decision where it differs between the instances of one class (per layer): both branches run
GIVEN = "__given__"  # the source ``assigns`` gives for an entry's parameter that its caller must pass
CONFIG = "__config__"  # the source ``assigns`` gives for the model's config (the model class's first argument)
INSTANCE_SOURCE = "__instance__"  # ``__instance__('mod', 'Cls')``: the caller's ``self`` handed over (or a subclass)
UNKNOWN_SOURCE = "__unknown__"  # the source of a value not known (a parameter a call's ``**kwargs`` may pass)
OBJECT = "__object__"  # the source for a class or a function handed on as a value: true, not None, nothing else


# transformers' config class (what config.json loads into) by its public names, and its loaders
CONFIG_CLASSES = ("transformers.PretrainedConfig", "transformers.configuration_utils.PretrainedConfig")
CONFIG_LOADERS = ("transformers.AutoConfig.from_pretrained", "transformers.PretrainedConfig.from_pretrained")


class ModelConfig:
    """The model's config.json as the preset gives it (its numbers and ``config:`` facts, among the settings): what
    ``getattr(config, "quantization_config", None)`` finds, or the default for a field it lacks."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields


class Given:
    """What a caller passes for a parameter without a default: some object, not None; nothing else is known."""

    def __bool__(self) -> bool:
        raise TypeError("unknown truth")


class ObjectValue(Given):
    """A class or a function passed as a value (``decoder_layer_type=Qwen3DecoderLayer``): true, and not None."""

    def __bool__(self) -> bool:
        return True


DTYPES = {"float32": "float32", "float": "float32", "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
          "float64": "float64", "double": "float64", "int64": "int64", "long": "int64", "int32": "int32",
          "int": "int32", "int16": "int16", "short": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
          "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}  # torch's names, each to its canonical one


class Member:
    """An enum member seen only by its name: equal to a string setting of the same name in lower case."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return other.lower() == self.name.lower()
        if isinstance(other, Member):
            return other.name == self.name
        return NotImplemented  # type: ignore[no-any-return]

    def __hash__(self) -> int:
        return hash(self.name.lower())


class DType:
    """A torch dtype by its canonical name (``torch.int`` is ``torch.int32``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("dtype", self.name))


class Several:
    """A value that is one of several known values: an attribute a dispatch sets to one of its returns, or (with
    ``each``) each of them in different instances, as the index of layers built in a loop. An operation on it is
    taken over every value (over every pair, for two of them; a name read twice counts as two), and is one value
    again where all the results agree."""

    def __init__(self, items: Any, each: bool = False) -> None:
        self.items, self.each = items, each

    def __repr__(self) -> str:
        return f"Several({list(self.items)[:8]}, each={self.each})"


PRODUCT = 4096  # the most combinations an operation on several values is taken over


def several(values: list[Any], each: bool = False) -> Any:
    """One value when all of ``values`` are equal, else a Several of them (flattened; Unknown in it is Unknown)."""
    if len(values) == 1 and isinstance(values[0], Several) and (values[0].each or not each):
        return values[0]  # (a range stays one: it can be handed on as its source)
    flat: list[Any] = []
    for v in values:
        if v is Unknown or v is MISSING:
            return Unknown
        if isinstance(v, Several):
            each = each or v.each
            flat.extend(v.items)
        else:
            flat.append(v)
    distinct: list[Any] = []
    for v in flat:
        try:
            if not any(v == d and type(v) is type(d) for d in distinct):
                distinct.append(v)
        except Exception:  # noqa: BLE001 - values that cannot be compared decide nothing
            return Unknown
    if not distinct:
        return Unknown
    return distinct[0] if len(distinct) == 1 else Several(distinct, each)


def lift(f: Callable[..., Any], *vals: Any) -> Any:
    """``f`` over the values, taken over each of several (``Several``) and joined again."""
    if not any(isinstance(v, Several) for v in vals):
        return f(*vals)
    pools = [list(v.items) if isinstance(v, Several) else [v] for v in vals]
    size = 1
    for pool in pools:
        size *= len(pool)
    if size > PRODUCT:
        return Unknown
    each = any(isinstance(v, Several) and v.each for v in vals)
    return several([f(*combo) for combo in itertools.product(*pools)], each)


def truth(v: Any) -> bool | None:
    """True, False, or None when the value is unknown (or has no truth value)."""
    if v is Unknown or v is MISSING:
        return None
    if isinstance(v, Several):
        truths = {truth(x) for x in v.items}
        return truths.pop() if len(truths) == 1 else None
    try:
        return bool(v)
    except Exception:  # noqa: BLE001 - an object whose truth cannot be taken decides nothing
        return None
