"""The one evaluator of "what does this if-test decide" under a target's declared serving defaults.

A test is evaluated to True, False or None (unknown), and unknown keeps both branches. The environment is the
target's ``serving`` section (``smithbot.config.Serving``):
- ``platform``: what torch answers on the serving GPU (``torch.version.hip`` is None on CUDA, the compute capability,
  ``hasattr(torch, "npu")``) and which optional packages ``importlib.util.find_spec`` finds; the engine's own helpers
  (``is_hip()``, ``_is_cuda = is_cuda()``) are evaluated over it, never declared;
- ``settings``: server arguments by their attribute name (``server_args.attention_backend == "fa3"``,
  ``get_global_server_args().moe_runner_backend``), also read as bare local names (``device_type == 'cuda'``) and
  through a getter named after them (``get_moe_a2a_backend().is_deepep()``: a predicate ``is_X`` of a setting is
  true when the setting's value is X);
- ``env``: environment variables as the user sets them, by their public names, read through any getter whose first
  argument is the variable's name (``get_bool_env_var("SGLANG_X")``, ``os.getenv``, ``environ.get``) or from a
  registry (``envs.SGLANG_X.get()``). A variable the user leaves unset has the default the engine's own code gives
  it: the getter call's default argument (``get_bool_env_var("X", "false")``), else the getter's own parameter
  default (``def get_bool_env_var(name, default="false")``, asked of ``assigns("get_bool_env_var(*defaults)")``), else
  ``None`` for ``os.getenv``/``environ.get``; or the registry's declaration (``X = EnvBool(False)``,
  ``Env.declared``). A bool getter reads "true"/"1" as True;
- tensors: a step's tensors are not empty, so ``x.numel() == 0`` or ``x.shape[0] == 0`` is False, and they are all on
  the serving GPU, so ``cos.device != q.device`` is False;
- the phase (decode or prefill): the call graph evaluates the engine's forward-mode predicates
  (``forward_batch.forward_mode.is_decode()``) with the mode bound to the phase's member (``values.phase_member``);
- module-level assignments of the file (``_is_hip = is_hip()``) are followed, so a module flag means what its helper
  means.
"""

from __future__ import annotations

import ast
import copy
import functools
import math
import re
from typing import Any, Callable

from smithbot.program.kinds import (CONFIG, DTYPES, EACH, EACH_OF_SOURCE, EACH_SOURCE, GIVEN, INSTANCE_SOURCE,
                                    MISSING, OBJECT, ONE_OF_SOURCE, UNKNOWN_SOURCE, DType, Given, Member, ModelConfig,
                                    ObjectValue, Several, Unknown, lift, several, truth)
from smithbot.program.syntax import parse_expr, source

_ORDER = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "in": lambda a, b: a in b,
          "not in": lambda a, b: a not in b, "is": lambda a, b: a is b, "is not": lambda a, b: a is not b,
          "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
        ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_DONE = object()  # a comparison a rule decided before its sides were evaluated


class Platform:
    """What torch and the Python environment answer on the serving machine: a GPU architecture (``sm90``: CUDA,
    compute capability 9.0, no other accelerator) and which optional packages are installed. The engine's own
    platform helpers (``is_hip()``, ``is_sm90_supported()``) are evaluated over these."""

    _OTHER = ("npu", "xpu", "hpu", "mlu", "musa", "mps")

    def __init__(self, gpu: str = "", packages: dict[str, bool] | None = None) -> None:
        self.gpu, self.packages = gpu, packages or {}
        m = re.fullmatch(r"sm(\d+)(\d)", gpu)
        self.capability = (int(m.group(1)), int(m.group(2))) if m else None

    def attribute(self, dotted: str) -> Any:
        """``torch.version.hip`` and the like, or MISSING."""
        if self.capability is None:
            return MISSING
        if dotted == "torch.version.hip":
            return None
        if dotted == "torch.version.cuda":
            return Given()  # some CUDA version: not None
        return MISSING

    def call(self, dotted: str, args: list[ast.expr]) -> Any:
        """``torch.cuda.is_available()``, ``torch.cuda.get_device_capability()``, another accelerator's
        ``is_available()``, ``importlib.util.find_spec("pkg")``, or MISSING."""
        parts = dotted.split(".")
        if parts[-1] == "find_spec" and args and isinstance(args[0], ast.Constant) and args[0].value in self.packages:
            return Given() if self.packages[args[0].value] else None
        if self.capability is None or parts[0] != "torch":
            return MISSING
        if dotted == "torch.cuda.is_available":
            return True
        if dotted == "torch.cuda.get_device_capability":
            return self.capability
        if len(parts) >= 3 and parts[-1] == "is_available" and parts[-2] in self._OTHER:
            return False  # torch.npu.is_available(), torch.backends.mps.is_available()
        return MISSING

    def has(self, module: str, name: str) -> Any:
        """``hasattr(torch, "npu")``: True for cuda, False for another accelerator, else MISSING."""
        if module != "torch" or self.capability is None:
            return MISSING
        return True if name == "cuda" else False if name in self._OTHER else MISSING


class Env:
    """Values of names under one target's serving defaults, for one phase (``decode``, ``prefill`` or None: both)."""

    def __init__(self, settings: dict[str, Any], env: dict[str, Any], phase: str | None = None,
                 declared: dict[str, str] | None = None, platform: Platform | None = None) -> None:
        self.settings, self.env, self.phase = settings, env, phase
        self.platform = platform or Platform()
        self.declared = declared or {}  # env variable -> the source of its default in the engine's registry
        self.chosen = frozenset(settings)  # the settings the target declares (not the argument classes' defaults)

    def _copy(self, **changes: Any) -> Env:
        out = copy.copy(self)
        out.__dict__.update(changes)
        return out

    def with_phase(self, phase: str | None) -> Env:
        return self._copy(phase=phase)

    def with_platform(self, platform: Platform) -> Env:
        return self._copy(platform=platform)

    def with_declared(self, declared: dict[str, str]) -> Env:
        return self._copy(declared=declared)

    def with_defaults(self, defaults: dict[str, Any]) -> Env:
        """These settings over ``defaults`` (the engine's documented argument defaults); ``chosen`` stays the
        target's own."""
        return self._copy(settings={**defaults, **self.settings})

    def lookup(self, name: str) -> Any:
        """The declared value of a bare name, or MISSING."""
        if name in self.settings:
            return self.settings[name]
        if name in self.env:
            return self.env[name]
        return MISSING


def evaluate(test: str, env: Env, assigns: Callable[[str], Any] = lambda name: None,
             each: bool = False) -> Any:
    """Truth of the if-test source ``test``: True, False, or None when the defaults do not decide it.

    ``assigns(name)`` gives the source (or the list of sources) of what is assigned to ``name``: a module-level
    assignment, a flag of the function or of the class (``self.x``), a call's constant argument. Asked a call's
    source (``is_kv_b_lora_active(self)``), it may give the source (or the sources) of what that call returns;
    asked ``getter(*defaults)``, the getter's parameter defaults in order; asked an element of a name or a call
    (``state[1]``), the sources of that element. Several sources that evaluate to
    different known values make a value that is one of them (``Several``): the test is decided where it is the same
    for all. With ``each``, a test that differs between the values of a name that is each of a range
    (``__each__(0, 61)``: the index of layers built in a loop) is ``EACH``: both branches run."""
    node = parse_expr(test)
    if node is None:
        return None
    v = _value(node, env, assigns, 0)
    if isinstance(v, Several):
        truths = {truth(x) for x in v.items}
        if len(truths) == 1:
            return truths.pop()
        return EACH if each and v.each and None not in truths else None
    return truth(v)


def value_of(src: str, env: Env, assigns: Callable[[str], Any] = lambda name: None) -> Any:
    """The value of the expression source ``src`` under the defaults: a Python value, or ``Unknown``."""
    node = parse_expr(src)
    v = Unknown if node is None else _value(node, env, assigns, 0)
    return Unknown if v is MISSING else v


def _value(node: ast.expr, env: Env, assigns: Callable[[str], Any], depth: int) -> Any:
    """The value of an expression, Unknown when the defaults do not say, MISSING for a name they do not know."""
    if depth > 12:  # (a name's source is evaluated one deeper: a test over locals assigned from locals)
        return Unknown
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = []
        for e in node.elts:
            if isinstance(e, ast.Starred):  # {"A", *OTHER_ARCHS}: the items of a collection the defaults spell out
                more = _value(e.value, env, assigns, depth + 1)
                if not isinstance(more, (tuple, list, set, frozenset)):
                    return Unknown
                items.extend(more)
            else:
                items.append(_value(e, env, assigns, depth + 1))
        return Unknown if any(i is Unknown or i is MISSING for i in items) else tuple(items)
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):  # {} or {"a": x}
        values = [_value(v, env, assigns, depth + 1) for v in node.values]
        if any(v is Unknown or v is MISSING or isinstance(v, Several) for v in values):
            return Unknown
        return {k.value: v for k, v in zip(node.keys, values)}  # type: ignore[union-attr]
    if isinstance(node, ast.NamedExpr):  # if cfg := hybrid_config(model_config): the value it binds
        return _value(node.value, env, assigns, depth + 1)
    if isinstance(node, ast.BoolOp):
        return lift(_bool_op(isinstance(node.op, ast.And)),
                     *(_value(v, env, assigns, depth + 1) for v in node.values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return lift(_not, _value(node.operand, env, assigns, depth + 1))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):  # -1
        return lift(_sign(isinstance(node.op, ast.USub)), _value(node.operand, env, assigns, depth + 1))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS:
        return _compare(node, env, assigns, depth)
    if isinstance(node, ast.IfExp):  # None if a == b else a
        test = _value(node.test, env, assigns, depth + 1)
        truths = {truth(x) for x in test.items} if isinstance(test, Several) else {truth(test)}
        if None in truths:  # an open test: one of the two branches' values
            truths = {True, False}
        return several([_value(node.body if t else node.orelse, env, assigns, depth + 1) for t in sorted(truths)])
    if isinstance(node, ast.Name):
        if node.id == GIVEN:
            return Given()
        if node.id == OBJECT:
            return ObjectValue()
        if node.id == CONFIG:
            return ModelConfig(env.settings)
        if node.id == UNKNOWN_SOURCE:
            return Unknown
        v = env.lookup(node.id)
        if v is not MISSING:
            return v
        found = _assigned(assigns(node.id), node.id, env, assigns, depth)
        return MISSING if found is MISSING else found
    if isinstance(node, ast.Attribute):
        return _attribute(node, env, assigns, depth)
    if isinstance(node, ast.Call):
        return _call_value(node, env, assigns, depth)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):  # get_device_capability()[0]
        v = _value(node.value, env, assigns, depth + 1)
        if isinstance(v, (tuple, list, dict)):
            try:
                return v[node.slice.value]
            except (IndexError, KeyError, TypeError):
                return Unknown
        if type(node.slice.value) in (int, str) and isinstance(node.value, (ast.Name, ast.Call)):
            # one element of a tuple or a dict that is not all constants (mode = state[1], state = prepare(...);
            # state['moe_type']): what ``assigns`` says of that element alone
            found = _assigned(assigns(source(node)), "", env, assigns, depth)
            return Unknown if found is MISSING else found
        return Unknown
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:  # layer_id % moe_layer_freq
        return lift(_arith(_ARITH[type(node.op)]), _value(node.left, env, assigns, depth + 1),
                     _value(node.right, env, assigns, depth + 1))
    return Unknown


def _bool_op(conj: bool) -> Callable[..., Any]:
    """``a and b`` / ``a or b`` as Python gives it: the operand that decides (``config.architectures or [None]`` is
    the list), or only its truth where an operand before it is unknown."""
    def op(*vals: Any) -> Any:
        settled = True  # every operand before this one is known
        for v in vals:
            t = truth(v)
            if t is None:
                settled = False
            elif t is not conj:  # a falsy operand of `and`, a truthy one of `or`: it decides
                return v if settled else t
        return vals[-1] if settled else Unknown
    return op


def _not(v: Any) -> Any:
    t = truth(v)
    return Unknown if t is None else not t


def _sign(neg: bool) -> Callable[[Any], Any]:
    def op(v: Any) -> Any:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v if neg else v
        return Unknown
    return op


def _number(kind: type) -> Callable[[Any], Any]:
    def op(v: Any) -> Any:  # int(config.n_shared_experts): a number, or a numeral string
        if isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, str) and v.strip().isdigit():
            return kind(v)
        return Unknown
    return op


def _arith(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def op(left: Any, right: Any) -> Any:
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (left, right)):
            try:
                return f(left, right)
            except (ZeroDivisionError, OverflowError):
                return Unknown
        return Unknown
    return op



def _compare(node: ast.Compare, env: Env, assigns: Callable[[str], Any], depth: int) -> Any:
    return lift(functools.partial(_compare_values, _OPS[type(node.ops[0])]), *_compared(node, env, assigns, depth))


def _compared(node: ast.Compare, env: Env, assigns: Callable[[str], Any], depth: int) -> tuple[Any, Any]:
    """The two sides of a comparison, or (a decided truth, _DONE) where a rule about tensors decides it."""
    op = _OPS[type(node.ops[0])]
    devices = [isinstance(x, ast.Attribute) and x.attr == "device" for x in (node.left, node.comparators[0])]
    if all(devices) and op in ("==", "!="):  # a step's tensors are all on the serving GPU
        return op == "==", _DONE
    for a, b, flip in ((node.left, node.comparators[0], False), (node.comparators[0], node.left, True)):
        if _size(a) and isinstance(b, ast.Constant) and b.value == 0 and op in _SIZE_TESTS:
            # a tensor's size against 0: the step's tensors are not empty (``x.numel() == 0`` is False)
            flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op) if flip else op
            return _SIZE_TESTS[flipped], _DONE
    return _value(node.left, env, assigns, depth + 1), _value(node.comparators[0], env, assigns, depth + 1)


def _compare_values(op: str, left: Any, right: Any) -> Any:
    if right is _DONE:
        return left
    if left is Unknown or right is Unknown or left is MISSING or right is MISSING:
        return Unknown
    if isinstance(left, Given) or isinstance(right, Given):  # an argument the caller passes
        if op in ("is", "is not", "==", "!=") and None in (left, right):
            return op in ("is not", "!=")
        return Unknown
    if (isinstance(left, Member) or isinstance(right, Member)) \
            and not all(isinstance(x, (str, Member, type(None))) for x in (left, right)):
        return Unknown  # an enum member against a number: its value is not known here
    try:
        return _ORDER[op](left, right)
    except TypeError:
        return Unknown


def _attribute(node: ast.Attribute, env: Env, assigns: Callable[[str], Any], depth: int) -> Any:
    """``a.b``: what torch answers on the platform, a setting of that name, what ``self`` or another object is
    assigned (``self.use_x``, ``self.batch.warm``, through ``assigns``), else an enum member by its name."""
    dotted = source(node)
    if dotted.startswith("torch.") and dotted.count(".") == 1 and node.attr in DTYPES:
        return DType(DTYPES[node.attr])  # torch.int32
    v = env.platform.attribute(dotted) if dotted.startswith("torch.") else MISSING
    if v is not MISSING:
        return v
    # (a tensor's ``.dtype`` is no setting of that name: only what its tracing finds, through ``assigns``)
    v = env.lookup(node.attr) if node.attr != "dtype" else MISSING
    if v is not MISSING:
        return v
    root = node.value
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) or isinstance(root, ast.Call) and not root.args and not root.keywords \
            and "(" not in source(root.func):  # (or on what an argument-less call returns: get_flags().dp.enabled)
        found = _assigned(assigns(dotted), dotted, env, assigns, depth)
        if found is not MISSING:
            return found
    # an enum member (``Backend.TRITON``, ``OpType.RMSNorm``): equal to a member of the same name, or to a string
    # setting of that name in lower case
    head = node.value
    while isinstance(head, ast.Attribute):
        head = head.value
    if isinstance(head, ast.Name) and head.id[:1].isupper():
        return Member(node.attr)
    return MISSING

_ARITH = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
          ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.BitAnd: lambda a, b: a & b,
          ast.BitOr: lambda a, b: a | b, ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b}


def _call_value(node: ast.Call, env: Env, assigns: Callable[[str], Any], depth: int) -> Any:
    """A call's value: an env variable (set by the user, the registry's default or the getter's), a declared name or
    setting (``is_hip()``, ``get_moe_a2a_backend()``), a predicate named after a setting's value, or what the caller
    says a predicate returns."""
    args = node.args
    if isinstance(node.func, ast.Name) and node.func.id == EACH_SOURCE and len(args) == 2 \
            and all(isinstance(a, ast.Constant) and isinstance(a.value, int) for a in args):
        lo, hi = args[0].value, args[1].value  # type: ignore[union-attr]
        return Several(range(lo, min(hi, lo + 4096)), each=True) if hi > lo else Unknown
    if isinstance(node.func, ast.Name) and node.func.id == INSTANCE_SOURCE:
        return Given()  # an object of a known class: not None, nothing else here
    if isinstance(node.func, ast.Name) and node.func.id in (EACH_OF_SOURCE, ONE_OF_SOURCE) and args:
        return several([_value(a, env, assigns, depth + 1) for a in args], each=node.func.id == EACH_OF_SOURCE)
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str) \
            and args[0].value in env.env:
        return env.env[args[0].value]  # get_bool_env_var("SGLANG_X"), os.environ.get("X")
    func = node.func
    if isinstance(func, (ast.Name, ast.Attribute)):
        v = env.platform.call(source(func), args)
        if v is not MISSING:
            return v
    if isinstance(func, ast.Name) and func.id == "hasattr" and len(args) == 2 and isinstance(args[0], ast.Name) \
            and isinstance(args[1], ast.Constant):
        v = env.platform.has(args[0].id, args[1].value)
        if v is not MISSING:
            return v
    v = _builtin(node, env, assigns, depth) if isinstance(func, ast.Name) and func.id in _BUILTINS else MISSING
    if v is not MISSING:
        return v
    if isinstance(func, ast.Attribute) and func.attr in ("get", "value") and isinstance(func.value, ast.Attribute):
        name = func.value.attr
        if name in env.env:
            return env.env[name]  # envs.SGLANG_X.get()
        if name in env.declared:
            inner = parse_expr(env.declared[name])
            return Unknown if inner is None else _value(inner, env, assigns, depth + 1)
    getter = _env_getter(node, env, assigns, depth)
    if getter is not MISSING:
        return getter
    if isinstance(func, ast.Attribute) and source(func) in ("copy.copy", "copy.deepcopy") and len(args) == 1:
        return _value(args[0], env, assigns, depth + 1)  # a copy holds what the original holds
    if isinstance(func, ast.Attribute) and func.attr == "get_text_config" and not args:
        # transformers' PretrainedConfig.get_text_config(): the text model's sub-config, the config itself where it
        # has none
        owner = _value(func.value, env, assigns, depth + 1)
        if isinstance(owner, ModelConfig):
            return Unknown if "text_config" in owner.fields else owner
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "math" \
            and func.attr in _MATH and args and not node.keywords:  # math.log2(n).is_integer(): is_power_of_two(n)
        return lift(_math(func.attr), *(_value(a, env, assigns, depth + 1) for a in args))
    if isinstance(func, ast.Attribute) and func.attr == "is_integer" and not args and not node.keywords:
        return lift(_is_integer, _value(func.value, env, assigns, depth + 1))
    if isinstance(func, ast.Attribute) and func.attr in _STR_TESTS and len(args) == 1 and not node.keywords:
        # quantization.startswith("modelopt"): a string's test, on a setting or a constant
        return lift(_str_test(func.attr), _value(func.value, env, assigns, depth + 1),
                    _value(args[0], env, assigns, depth + 1))
    if isinstance(func, (ast.Name, ast.Attribute)):
        name = func.id if isinstance(func, ast.Name) else func.attr
        v = env.lookup(name)
        if v is not MISSING:
            return v
        if name.startswith("get_") and name[4:] in env.settings and not args and not node.keywords:
            return env.settings[name[4:]]  # get_moe_a2a_backend() reads the setting moe_a2a_backend
    # a predicate the engine defines (is_kv_b_lora_active(self), forward_mode.is_decode()): ``assigns`` of the
    # call's source gives the source of what it returns for these arguments, when the caller can say
    src = assigns(source(node))
    if isinstance(src, (str, list)) and src:
        found = _assigned(src, "", env, assigns, depth)
        if found is not MISSING and found is not Unknown:
            return found
    if isinstance(func, ast.Attribute) and func.attr.startswith("is_"):
        # backend.is_triton(): a predicate named after a setting's value (when its code does not say)
        owner = _value(func.value, env, assigns, depth + 1)
        if isinstance(owner, str):
            return owner.lower() == func.attr[3:]
        if isinstance(owner, Member):  # SpeculativeAlgorithm.NONE.is_none()
            return owner.name.lower() == func.attr[3:]
    return Unknown


_STR_TESTS = ("startswith", "endswith")
_MATH = ("log2", "log10", "log", "sqrt", "isqrt", "ceil", "floor", "gcd", "exp")


def _number_like(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _math(name: str) -> Callable[..., Any]:
    def f(*vals: Any) -> Any:
        if not all(_number_like(v) for v in vals):
            return Unknown
        try:
            return getattr(math, name)(*vals)
        except (ValueError, TypeError, OverflowError):
            return Unknown
    return f


def _is_integer(v: Any) -> Any:
    if isinstance(v, float):
        return v.is_integer()
    return True if _number_like(v) else Unknown


def _str_test(method: str) -> Callable[[Any, Any], Any]:
    def test(text: Any, part: Any) -> Any:
        parts = part if isinstance(part, tuple) else (part,)
        if isinstance(text, str) and all(isinstance(p, str) for p in parts):
            return getattr(text, method)(parts)
        return Unknown
    return test


_BUILTINS = ("getattr", "hasattr", "any", "all", "frozenset", "set", "tuple", "list", "isinstance", "bool", "int",
             "float", "len")


def _builtin(node: ast.Call, env: Env, assigns: Callable[[str], Any], depth: int) -> Any:
    """A call of one of Python's builtins (``_BUILTINS``) on values the defaults give: the model's config.json
    fields by ``getattr``/``hasattr``, a setting by ``getattr``, ``any``/``all`` over known constants, a collection
    made of one, ``isinstance`` of the config against a builtin type, ``len`` of a known collection, ``bool``, ``int``
    and ``float``. MISSING where none of these applies (the caller may still say what the call gives)."""
    args, func = node.args, node.func
    assert isinstance(func, ast.Name)
    if func.id in ("getattr", "hasattr") and len(args) in (2, 3) \
            and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
        obj = _value(args[0], env, assigns, depth + 1)
        if isinstance(obj, ModelConfig):  # the model's config.json, as the preset gives it
            key = args[1].value
            if func.id == "hasattr":
                return key in obj.fields
            if key in obj.fields:
                return obj.fields[key]
            return _value(args[2], env, assigns, depth + 1) if len(args) == 3 else Unknown
    if func.id == "getattr" and len(args) == 3 and isinstance(args[1], ast.Constant) \
            and args[1].value in env.settings:
        # getattr(model_config, "architectures", []): a setting by that name, as model_config.architectures is
        return env.settings[args[1].value]
    if func.id in ("any", "all") and len(args) == 1 \
            and isinstance(args[0], (ast.GeneratorExp, ast.ListComp)):
        return _any_all(func.id == "any", args[0], env, assigns, depth)
    if func.id in _COLLECTIONS and len(args) == 1 and not node.keywords:
        items = _value(args[0], env, assigns, depth + 1)  # frozenset({"Qwen3ForCausalLM"})
        return _COLLECTIONS[func.id](items) if isinstance(items, (tuple, list, set, frozenset)) else Unknown
    if func.id == "isinstance" and len(args) == 2 and isinstance(args[1], ast.Name) \
            and args[1].id in _BUILTIN_TYPES and isinstance(_value(args[0], env, assigns, depth + 1), ModelConfig):
        return False  # the model's config is a config object, not a dict (isinstance(config, dict))
    if func.id == "len" and len(args) == 1 and not node.keywords:  # of a collection the defaults spell out
        items = _value(args[0], env, assigns, depth + 1)
        return len(items) if isinstance(items, (tuple, list, dict, str)) else Unknown
    if func.id == "bool" and len(args) == 1 and not node.keywords:
        held = truth(_value(args[0], env, assigns, depth + 1))
        return Unknown if held is None else held
    if func.id in ("int", "float") and len(args) == 1 and not node.keywords:
        return lift(_number(int if func.id == "int" else float), _value(args[0], env, assigns, depth + 1))
    return MISSING


_BUILTIN_TYPES = ("dict", "list", "tuple", "str", "int", "float", "bool")
_COLLECTIONS = {"frozenset": frozenset, "set": set, "tuple": tuple, "list": list}


def _any_all(is_any: bool, comp: ast.GeneratorExp | ast.ListComp, env: Env, assigns: Callable[[str], Any],
             depth: int) -> Any:
    """``any(arch in ARCHS for arch in architectures)`` over a known collection of constants (at most 64): each
    element's test with the loop's name bound to it."""
    if len(comp.generators) != 1 or not isinstance(comp.generators[0].target, ast.Name):
        return Unknown
    gen = comp.generators[0]
    items = _value(gen.iter, env, assigns, depth + 1)
    if not isinstance(items, (tuple, list, set, frozenset)) or len(items) > 64 \
            or not all(isinstance(i, (str, int, float, bool, type(None))) for i in items):
        return Unknown
    truths = []
    for item in items:
        def bound(name: str, _src: str = repr(item)) -> Any:
            return _src if name == gen.target.id else assigns(name)  # type: ignore[union-attr]
        kept = [truth(_value(c, env, bound, depth + 1)) for c in gen.ifs]
        if None in kept:
            return Unknown
        if all(kept):
            truths.append(truth(_value(comp.elt, env, bound, depth + 1)))
    if is_any in truths:  # one true element decides any(), one false element all()
        return is_any
    return Unknown if None in truths else not is_any
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*_[A-Z0-9_]+$")
_TRUE = ("true", "1", "yes", "on")


def _env_getter(node: ast.Call, env: Env, assigns: Callable[[str], Any], depth: int) -> Any:
    """An environment getter's value when the user sets nothing: the default the engine's code gives (see the
    module's docstring), MISSING when ``node`` is no such getter, Unknown when no default is found."""
    callee = source(node.func) if isinstance(node.func, (ast.Name, ast.Attribute)) else None
    if not (node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
            and _ENV_NAME.match(node.args[0].value) and callee and "env" in callee.lower()):
        return MISSING
    default: Any = node.args[1] if len(node.args) > 1 else next(
        (k.value for k in node.keywords if k.arg == "default"), None)
    if default is not None:
        value = _value(default, env, assigns, depth + 1)
    elif callee.split(".")[-1] in ("getenv", "get"):
        value = None  # os.getenv("X"), os.environ.get("X")
    else:
        params = assigns(f"{callee}(*defaults)")  # the getter's own parameter defaults, in order
        src = params[1] if isinstance(params, list) and len(params) > 1 else None
        inner = parse_expr(src) if src else None
        value = Unknown if inner is None else _value(inner, env, assigns, depth + 1)
    if isinstance(value, str) and "bool" in callee.lower():
        return value.strip().lower() in _TRUE
    if isinstance(value, str) and "int" in callee.lower() and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _assigned(src: str | list[str] | None, name: str, env: Env, assigns: Callable[[str], Any], depth: int) -> Any:
    """The value of a name from its assignments' sources: one source, or several that all evaluate alike."""
    if src is None:
        return MISSING
    values = []
    for one in ([src] if isinstance(src, str) else src):
        inner = parse_expr(one) if one != name else None
        values.append(Unknown if inner is None else _value(inner, env, assigns, depth + 1))
    if not values or any(v is Unknown or v is MISSING for v in values):
        return Unknown
    return several(values)


_SIZE_TESTS = {"==": False, "!=": True, ">": True, ">=": True, "<": False, "<=": False}


def _size(node: ast.expr) -> bool:
    """Whether an expression reads a tensor's size: ``x.numel()``, ``x.size(0)``, ``x.shape[0]``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
        return (node.func.attr == "numel" and not node.args) or (node.func.attr == "size" and len(node.args) == 1)
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
        and isinstance(node.slice, ast.Constant)
