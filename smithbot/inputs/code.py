"""A task's input plan (``smithbot.types.InputPlan``) written out as plain code: a ``make_inputs(case, gen)`` of a
few lines per argument, with the helpers of ``draw.py`` and the layout builders of ``layouts/`` that it uses. The
task's harness (``harness.py``) and the generated test (``propose/testcode.py``) are both this code, so the spec
language has one reading. ``device`` is the expression the tensors are made on: the test's ``DEVICE``, the
generator's in a harness."""

from __future__ import annotations

import ast
import re
from typing import Any

from evaluator.tolerances import DTYPES
from smithbot.errors import SmithbotError
from smithbot.inputs.draw import HELPERS
from smithbot.inputs.layouts import builder_source
from smithbot.types import (InputPlan, ItemsSpec, LayoutField, LiteralSpec, ObjectSpec, ReturnsSpec, TensorSpec)


class InputsError(SmithbotError, ValueError):
    """An input spec that cannot be written out as plain code."""


# the spec's dtype names as torch spells them: the evaluator's table, and what only inputs use
TORCH_NAMES = {**DTYPES, "complex64": "complex64", "fp4x2": "float4_e2m1fn_x2", "e8m0": "float8_e8m0fnu"}
_BYTES = ("fp4x2", "e8m0")
WIDE = ("float16", "bfloat16", "float32")  # drawn at their own width; the others are drawn wider and converted
_LATER = ("starts:", "chunks:", "upto:")  # offsets after the lengths they add up, as the harness orders them
_RESERVED = {"case", "gen", "dtype", "torch", "tl", "types", "DEVICE"}


def _later(item: tuple[str, Any]) -> bool:
    return isinstance(item[1], TensorSpec) and str(item[1].init or "").startswith(_LATER)


class _Pow2(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "pow2":  # the largest power of two not above it
            return ast.parse(f"1 << max(int({ast.unparse(node.args[0])}), 1).bit_length() - 1", mode="eval").body
        return node


class _Writer:
    def __init__(self, extra: dict[str, Any], act_wide: bool, reserved: set[str], device: str) -> None:
        self.extra, self.act_wide, self.device = extra, act_wide, device
        self.lines: list[str] = []
        self.dims: dict[str, None] = {}  # in the order of first use
        self.helpers: list[str] = []  # names of draw's HELPERS, or layout names
        self.layouts: dict[str, str] = {}  # (layout, sizes) -> the local holding the built layout
        self.taken = _RESERVED | set(reserved) | set(extra)
        self.uses_dtype = self.uses_tl = self.uses_types = False

    def need(self, helper: str) -> str:
        if helper not in self.helpers:
            self.helpers.append(helper)
        return helper

    def local(self, hint: str) -> str:
        name = re.sub(r"\W", "_", hint)
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def num(self, expr: Any, whole: bool = False) -> str:
        """A number or an arithmetic expression over the dims, as Python; ``whole``: as an int."""
        if not isinstance(expr, str):
            return repr(int(expr) if whole else expr)
        try:
            tree = _Pow2().visit(ast.parse(expr, mode="eval"))
        except SyntaxError:
            raise InputsError(f"not an arithmetic expression: {expr!r}") from None
        called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        self.dims.update(dict.fromkeys(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called))
        text = ast.unparse(tree)
        inexact = any(isinstance(n, (ast.Div, ast.Pow)) or isinstance(n, ast.Constant) and isinstance(n.value, float)
                      for n in ast.walk(tree))
        return f"int({text})" if whole and inexact else text

    def dtype(self, name: str) -> str:
        if name == "act":
            self.uses_dtype = True
            return "dtype"
        if name not in TORCH_NAMES:
            raise InputsError(f"dtype {name!r} has no torch dtype")
        return f"torch.{TORCH_NAMES[name]}"

    def value(self, spec: Any, scope: dict[str, str], hint: str) -> str:
        """The expression for one spec; tensors are drawn into a local first, so that they are drawn once, in the
        harness's order."""
        if isinstance(spec, str) and spec.startswith(("dtype:", "tldtype:")):
            kind = spec.split(":")[1]
            if not spec.startswith("tl"):
                return self.dtype(kind)
            self.uses_tl = True
            torch_name = "str(dtype).removeprefix('torch.')" if kind == "act" else repr(TORCH_NAMES[kind])
            self.uses_dtype |= kind == "act"
            return f"getattr(tl, {torch_name}.replace('float8_e4m3fn', 'float8e4nv'))"
        if spec == "device:":
            return self.device
        if spec == "regime:decode":  # a step's is_decoding
            return 'case["regime"] == "decode"'
        if isinstance(spec, LiteralSpec):
            return _literal(spec.value)
        if isinstance(spec, ObjectSpec):
            attrs: dict[str, str] = {}
            for k, v in sorted(spec.attrs, key=_later):
                attrs[k] = self.value(v, attrs, f"{hint}_{k}")
            self.uses_types = True
            return self.bind(hint, "types.SimpleNamespace(" + ", ".join(f"{k}={attrs[k]}" for k, _ in spec.attrs) + ")")
        if isinstance(spec, ItemsSpec):
            return "[" + ", ".join(self.value(v, scope, f"{hint}_{i}") for i, v in enumerate(spec.items)) + "]"
        if isinstance(spec, LayoutField):
            if spec.field is None or spec.sizes is None:
                raise InputsError(f"{hint}: layout {spec.layout} with its field or sizes unsaid")
            key = f"{spec.layout}{sorted(spec.sizes)!r}"
            if key not in self.layouts:
                self.need(spec.layout)
                sizes = ", ".join(f"{k}={self.num(v)}" for k, v in spec.sizes)
                built = f"build_{spec.layout}(dict({sizes}), gen, {self.device})"
                self.layouts[key] = self.bind(spec.layout, built)
            return f'{self.layouts[key]}["{spec.field}"]'
        if isinstance(spec, ReturnsSpec):  # a method answering this value
            return f"lambda *args, **kwargs: {self.value(spec.value, scope, hint)}"
        if isinstance(spec, TensorSpec):
            return self.bind(hint, self.tensor(spec, scope, hint))
        return self.num(spec)

    def bind(self, hint: str, expr: str) -> str:
        name = self.local(hint)
        self.lines.append(f"{name} = {expr}")
        return name

    def tensor(self, spec: TensorSpec, scope: dict[str, str], hint: str) -> str:
        shape = [self.num(s, whole=True) for s in spec.shape]
        if spec.transposed:  # drawn as its transpose, handed over as a view of that (a weight's w.t())
            shape[-2:] = shape[:-3:-1]
        size = f"({', '.join(shape)}{',' if len(shape) == 1 else ''})"
        numel = " * ".join(s if re.fullmatch(r"\w+", s) else f"({s})" for s in shape)
        kind = spec.dtype or "act"
        dtype = self.dtype(kind)
        init = str(spec.init or "randn").split(":")
        args = [self.num(a, whole=True) for a in init[1:]] if init[0] not in ("starts", "upto", "chunks") else init[1:]
        rng = f"generator=gen, device={self.device}"
        if kind in _BYTES:  # packed fp4 pairs or e8m0 exponents: any byte, or those of a randint init
            lo, hi = args[:2] if init[0] == "randint" else ("0", "256")
            return f"torch.randint({lo}, {hi}, {size}, {rng}).to(torch.uint8).view({dtype})"
        made = "torch.int64"
        flat = len(shape) > 1  # the offsets kinds make a flat table, viewed as the shape
        if init[0] == "randint":
            t, flat = f"torch.randint({args[0]}, {args[1]}, {size}, {rng})", False
        elif init[0] == "perm":
            t, flat = f"{self.need('_perm')}({args[0]}, {size}, gen)", False
        elif init[0] == "arange":
            step, first = (args + ["1", "0"][len(args):])[:2]
            t = f"torch.arange({numel}, device={self.device})" + (f" * {step}" if step != "1" else "")
            t = f"{first} + {t}" if first != "0" else t
        elif init[0] in ("even", "even_end", "split", "cuts"):  # n rows shared out evenly and in order
            n, k = args[0], numel if re.fullmatch(r"\w+", numel) else f"({numel})"
            t = {"even": f"torch.arange({numel}, device={self.device}) * {n} // {k}",
                 "even_end": f"(torch.arange({numel}, device={self.device}) + 1) * {n} // {k}",
                 "split": f"torch.diff(torch.arange({numel} + 1, device={self.device}) * {n} // {k})",
                 "cuts": f"torch.arange({numel}, device={self.device}) * {n} // max({numel} - 1, 1)"}[init[0]]
        elif init[0] in ("starts", "upto", "chunks"):
            if init[1] not in scope:
                raise InputsError(f"{hint}: {init[0]} of {init[1]!r}, which is not a sibling input")
            t = {"starts": f"{self.need('_starts')}({scope[init[1]]}, {numel})",
                 "upto": f"{self.need('_upto')}({scope[init[1]]}, {numel}, gen)",
                 "chunks": f"{self.need('_chunks')}({scope[init[1]]}, {self.num(init[2], whole=True) if len(init) > 2 else ''}, {numel})"}[init[0]]
        elif init[0] == "onehot":  # a single 1 in each row
            t = (f"torch.nn.functional.one_hot(torch.randint(0, {shape[-1]}, ({', '.join(shape[:-1])},), {rng}), "
                 f"{shape[-1]})")
            flat = False
        elif init[0] in ("randn", "rand", "around1"):
            made = self.drawn(kind)
            t = f"torch.{'rand' if init[0] == 'rand' else 'randn'}({size}, {rng}, dtype={made})"
            t = f"1.0 + 0.1 * {t}" if init[0] == "around1" else t
            flat = False
        else:
            raise InputsError(f"{hint}: init {init[0]!r} has no plain-code form")
        methods = (f".view{size}" if flat else "") + (f".to({dtype})" if made != dtype else "")
        if spec.transposed:
            methods += ".t()" if len(shape) == 2 else ".transpose(-1, -2)"
        compound = not isinstance(ast.parse(t, mode="eval").body, (ast.Call, ast.Name, ast.Subscript))
        return f"({t}){methods}" if methods and compound else t + methods

    def drawn(self, kind: str) -> str:
        if kind == "act":
            return "dtype" if self.act_wide else f"{self.need('_drawn')}(dtype)"
        name = TORCH_NAMES[kind]
        if name in WIDE:
            return f"torch.{name}"
        return "torch.bfloat16" if name.startswith("float8") else "torch.float32"


def _literal(value: Any) -> str:
    text = repr(value)
    return text if isinstance(value, str) else re.sub(r"\binf\b", 'float("inf")', text)


def make_inputs_code(plan: InputPlan, act_wide: bool = False, reserved: set[str] | None = None,
                     device: str = "DEVICE") -> tuple[list[str], str]:
    """The imports and the code of ``make_inputs(case, gen)`` (with the helpers it uses) for ``plan``, with its extra
    dims as expressions over the others. ``act_wide``: every case's dtype is drawn at its own width; ``reserved``:
    the case keys (no local may shadow one; by default the dims the plan reads)."""
    extra = plan.dims
    if reserved is None:  # the dims the plan reads: no local may shadow one
        probe = _Writer(extra, act_wide, set(), device)
        for name, s in plan.params:
            if s != "default:":
                probe.value(s, {n: n for n, _ in plan.params}, name)
        reserved = set(probe.dims) | {"name", "regime"}
    w = _Writer(extra, act_wide, reserved, device)
    scope: dict[str, str] = {}
    for name, s in sorted(plan.params, key=_later):
        if s != "default:":  # else left to the launcher's own default
            scope[name] = w.value(s, scope, name)
    # the dims: the case's, then the extra ones (as expressions over the others, unless the case carries its own)
    used = _needed_extra(extra, w)
    head, extra_lines = [], [f'{k} = case.get("{k}", {w.num(v)})' for k, v in extra.items() if k in used]
    case_dims = [d for d in w.dims if d not in extra]
    if case_dims or w.uses_dtype:
        names = case_dims + (["dtype"] if w.uses_dtype else [])
        head.append(f"{', '.join(names)} = " + ", ".join(f'case["{n}"]' for n in names))
    ret = [f'"{n}": {scope[n]}' for n, _ in plan.params if n in scope]
    returned = "return {" + ", ".join(ret) + "}"
    if len(returned) > 110:
        returned = "return {\n" + "".join(f"        {r},\n" for r in ret) + "    }"
    body = "\n".join(f"    {line}" for line in head + extra_lines + w.lines + [returned])
    helpers = [HELPERS[h] if h in HELPERS else builder_source(h) for h in w.helpers]
    code = "".join(f"{h}\n\n\n" for h in helpers) + f"def make_inputs(case, gen):\n{body}\n"
    imports = ["import types"] * w.uses_types + ["import triton.language as tl"] * w.uses_tl
    return imports, code


def _needed_extra(extra: dict[str, Any], w: _Writer) -> set[str]:
    """The extra dims the inputs use, and those they are computed from."""
    needed, todo = set(), [d for d in w.dims if d in extra]
    while todo:
        k = todo.pop()
        if k not in needed:
            needed.add(k)
            probe = _Writer({}, True, set(), "DEVICE")
            probe.num(extra[k])
            todo += [d for d in probe.dims if d in extra]
    return needed
