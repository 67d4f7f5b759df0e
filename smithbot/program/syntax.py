"""The syntax the call graph's facts are read with (``smithbot.program.facts``), and the scan's index with it
(``smithbot.scan.parse``): a module's imports, the dotted text of a name, a callee, an expression or a type hint, constants and literal arguments, a flag's source with the assigning function's own flags
written in, and whether a block always leaves its function."""

from __future__ import annotations

import ast
import functools
from typing import Any, Iterator


@functools.lru_cache(maxsize=65536)
def parse_expr(src: str) -> ast.expr | None:
    """An expression's tree (None where it is no expression), a cached parse shared by every caller: never to be
    changed in place."""
    try:
        return ast.parse(src, mode="eval").body
    except SyntaxError:
        return None


_SOURCES: dict[int, tuple[ast.AST, str]] = {}


def source(node: ast.AST) -> str:
    """``ast.unparse(node)``, kept per node (by identity, the node held so its id stays its own): the walk asks the
    same shared trees' text millions of times."""
    hit = _SOURCES.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    if len(_SOURCES) > 400_000:
        _SOURCES.clear()
    text = ast.unparse(node)
    _SOURCES[id(node)] = (node, text)
    return text


@functools.lru_cache(maxsize=65536)
def names_read(src: str) -> frozenset[str]:
    """The bare names an expression reads (none, where it is no expression)."""
    tree = parse_expr(src)
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)) if tree is not None else frozenset()


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` of a name or an attribute chain; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted_name(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _statements(tree: ast.AST) -> Iterator[ast.stmt]:
    """Every statement, nested ones included, without descending into expressions (a full ast.walk costs 3x)."""
    stack = list(reversed(getattr(tree, "body", [])))
    while stack:  # depth first, in source order, so a later import of a name wins as it does at run time
        s = stack.pop()
        yield s
        children: list[ast.stmt] = []
        for field in ("body", "orelse", "finalbody"):
            children.extend(getattr(s, field, []) or [])
        for h in getattr(s, "handlers", []) or []:
            children.extend(h.body)
        for case in getattr(s, "cases", []) or []:
            children.extend(case.body)
        stack.extend(reversed(children))


def from_module(node: ast.ImportFrom, modname: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` in module ``modname`` reads from (relative levels resolved)."""
    mod = node.module or ""
    if node.level:
        base = modname.split(".")
        keep = len(base) - node.level + (1 if is_package else 0)
        mod = ".".join(base[:max(keep, 0)] + ([mod] if mod else []))
    return mod


def collect_imports(tree: ast.AST, modname: str, is_package: bool) -> dict[str, str]:
    """Local name -> dotted target of every import in a module, relative imports resolved against ``modname``."""
    imports: dict[str, str] = {}
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            mod = from_module(node, modname, is_package)
            for a in node.names:
                if a.name != "*":
                    imports[a.asname or a.name] = f"{mod}.{a.name}" if mod else a.name
    return imports


def callee_text(func: ast.expr) -> str | None:
    if isinstance(func, ast.Call):
        inner = callee_text(func.func)
        return f"{inner}()" if inner else None
    if isinstance(func, ast.Subscript):
        inner = dotted_name(func.value)
        return f"{inner}[]" if inner else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        inner = callee_text(func.value)
        return f"{inner}.{func.attr}" if inner else None
    return dotted_name(func)


def expr_text(node: ast.expr) -> str | None:
    """An expression as the call graph reads it: dotted parts, ``()`` after a called part, subscripts dropped (an
    element of a container has the container's element type): ``self.layers[i]`` -> ``self.layers``,
    ``get_backend().build(x)`` -> ``get_backend().build()``, ``[Table(n) for n in sizes]`` -> ``Table()``."""
    if isinstance(node, ast.Call):
        inner = expr_text(node.func)
        return f"{inner}({const_args(node)})" if inner else None
    if isinstance(node, ast.Subscript):
        return expr_text(node.value)
    if isinstance(node, ast.Attribute):
        inner = expr_text(node.value)
        return f"{inner}.{node.attr}" if inner else None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):  # its elements' type, as a subscript's
        # (`[BlockTable(size) for size in sizes]`), unless they are made of the comprehension's own names
        own = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        inner = expr_text(node.elt)
        return inner if inner and inner.split(".")[0].split("(")[0] not in own else None
    return None


def const_args(call: ast.Call) -> str:
    """A call's arguments when all are constants or enum-like members (``OpType.RMSNorm``, ``"fa3"``, ``2``),
    so a factory's returns can be decided per call; when the caller hands over ``self``, that and ``?`` for each
    argument that is no constant (``get_quant_method(self, ?)``: the callee may ask what ``self`` is); otherwise
    nothing."""
    parts = []
    for a in call.args:
        if isinstance(a, ast.Starred):
            return ""
        parts.append(a)
    parts += [k.value for k in call.keywords if k.arg]
    if any(_is_self(p) for p in parts) and all(k.arg for k in call.keywords):
        def text(v: ast.expr) -> str:
            return ast.unparse(v) if _is_self(v) or is_const(v) else "?"
        out = ", ".join([text(a) for a in call.args] + [f"{k.arg}={text(k.value)}" for k in call.keywords])
        return out if "(" not in out and ")" not in out else ""
    if not parts or not all(is_const(p) for p in parts):
        return ""
    texts = [ast.unparse(a) for a in call.args] + [f"{k.arg}={ast.unparse(k.value)}" for k in call.keywords]
    out = ", ".join(texts)
    return out if "(" not in out and ")" not in out else ""


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def is_const(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, int, float, bool)) or node.value is None
    dotted = dotted_name(node)
    return bool(dotted) and "." in dotted and dotted.split(".")[0][:1].isupper()


def annotation_text(node: ast.expr | None) -> str | None:
    """An instance of the class an annotation names: ``ForwardBatch``, ``Optional["X"]``, ``X | None``,
    ``Annotated[X, Arg(...)]`` -> ``X()``."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = node.left, node.right
        node = right if isinstance(left, ast.Constant) and left.value is None else left
    if isinstance(node, ast.Subscript) and (dotted_name(node.value) or "").split(".")[-1] in ("Optional", "Union"):
        inner = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
        return annotation_text(inner)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) \
            and any(isinstance(e, ast.Call) for e in node.slice.elts[1:]):
        return annotation_text(node.slice.elts[0])  # Annotated[X, Arg(...)], under any alias: an X
    name = dotted_name(node)
    return f"{name}()" if name and name.split(".")[-1][:1].isupper() else None


def inline_flags(value: ast.expr, local_flags: dict[str, list[str]]) -> str:
    """A flag's source with the assigning function's own flags written in (they mean nothing elsewhere)."""

    if not any(isinstance(n, ast.Name) and local_flags.get(n.id) for n in ast.walk(value)):
        return ast.unparse(value)  # nothing of the function's own to write in

    class Inline(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            srcs = local_flags.get(node.id) or []
            if len(srcs) != 1 or srcs[0] == node.id:
                return node
            src = srcs[0]
            try:
                return ast.parse(src, mode="eval").body
            except SyntaxError:
                return node

    try:
        return ast.unparse(Inline().visit(ast.parse(ast.unparse(value), mode="eval")).body)
    except ValueError:  # a backslash written into an f-string's expression, which Python < 3.12 cannot spell
        return ast.unparse(value)


# what a flag an if-test reads may be assigned from: a test, a constant, another name, an attribute, or a call that
# the serving defaults may answer (an env getter, a settings getter)
FLAG_VALUES = (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Attribute, ast.Call, ast.IfExp,
                ast.Subscript, ast.Dict, ast.BinOp, ast.Set, ast.Tuple)
EMPTY_DICTS = ("{}", "dict()", "defaultdict(list)", "collections.defaultdict(list)")


def class_constant(value: ast.expr) -> bool:
    """A class attribute's value that is a constant: a literal, or an enum member (``_enum = PlatformEnum.CUDA``)."""
    return isinstance(value, ast.Constant) or (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
                                               and value.value.id[:1].isupper())


def factory_call(value: ast.expr) -> str | None:
    """The construction a class-body field's default makes for each instance, as a source: ``field(default_factory=
    lambda: PhaseConfig(backend="full"))`` -> ``PhaseConfig(backend="full")``, ``field(default_factory=PhaseConfig)``
    -> ``PhaseConfig()``; else None."""
    if not isinstance(value, ast.Call) or (dotted_name(value.func) or "").split(".")[-1] != "field":
        return None
    made = next((k.value for k in value.keywords if k.arg == "default_factory"), None)
    if isinstance(made, ast.Lambda) and isinstance(made.body, ast.Call) and dotted_name(made.body.func):
        return ast.unparse(made.body)
    name = dotted_name(made) if made is not None else None
    return f"{name}()" if name and name.split(".")[-1][:1].isupper() else None


def leaves(body: list[ast.stmt]) -> bool:
    """Whether a block always leaves its function: it ends in ``return`` or ``raise``."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


def guards(body: list[ast.stmt]) -> bool:
    """Whether a block only raises: it ends in ``raise`` and returns nowhere (an error check, not a branch)."""
    return isinstance(body[-1], ast.Raise) and not any(isinstance(n, ast.Return) for s in body for n in ast.walk(s))


def always_leaves(stmts: list[ast.stmt]) -> bool:
    """Whether a block leaves its function on every path: a ``return`` or ``raise``, or an if/else whose branches
    both do, before its end."""
    return any(isinstance(s, (ast.Return, ast.Raise))
               or isinstance(s, ast.If) and s.orelse and always_leaves(s.body) and always_leaves(s.orelse)
               for s in stmts)


def literal_strings(call: ast.Call) -> list[str]:
    return [a.value for a in list(call.args) + [k.value for k in call.keywords]
            if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def self_attr(node: ast.expr) -> str | None:
    """The attribute name of ``self.x``, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def made_values(value: ast.expr) -> list[tuple[str, list[list[Any]]]]:
    """Expressions an assigned value may be (see ``expr_text``), each with the if-tests of a conditional
    expression it sits under (``A() if t else B()``), and with the layers a list builder makes:
    ``nn.ModuleList([Layer(i) for i in ...])`` and ``make_layers(n, lambda i: Layer(i))`` also give ``Layer()``."""
    if isinstance(value, ast.IfExp):
        test = ast.unparse(value.test)
        return [(m, [[test, True], *more]) for m, more in made_values(value.body)] + \
            [(m, [[test, False], *more]) for m, more in made_values(value.orelse)]
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or):  # a or b: a where a is true, else b
        out, before = [], []
        for v in value.values:
            out += [(m, [*before, [ast.unparse(v), True], *more]) if v is not value.values[-1] else
                    (m, [*before, *more]) for m, more in made_values(v)]
            before.append([ast.unparse(v), False])
        return out
    if isinstance(value, ast.BoolOp):
        return [m for v in value.values for m in made_values(v)]
    text = expr_text(value)
    out: list[tuple[str, list[list[Any]]]] = [(text, [])] if text else []
    if isinstance(value, ast.Call):
        for a in list(value.args) + [k.value for k in value.keywords]:
            if isinstance(a, ast.Lambda):
                inner = a.body
            elif isinstance(a, (ast.ListComp, ast.GeneratorExp)):
                inner = a.elt
            else:
                inner = a.elts[0] if isinstance(a, ast.List) and a.elts else None
            if isinstance(inner, ast.Call) and expr_text(inner):
                out.append((expr_text(inner), []))  # type: ignore[arg-type]
    return out


def dict_pairs(node: ast.expr) -> dict[str, str] | None:
    """The keys of a dict literal (``{"a": x}``, ``dict(a=x)``, ``dict()``) with their values' sources; None for
    anything else."""
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                          for k in node.keys):
        return {k.value: ast.unparse(v) for k, v in zip(node.keys, node.values)}  # type: ignore[union-attr]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args \
            and all(k.arg for k in node.keywords):
        return {k.arg: ast.unparse(k.value) for k in node.keywords}  # type: ignore[misc]
    return None


def merged_dicts(*dicts: dict[str, str]) -> dict[str, str]:
    """Keys a dict may hold from any of these: a key given different values is "?"."""
    out: dict[str, str] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = v if out.get(k, v) == v else "?"
    return out
