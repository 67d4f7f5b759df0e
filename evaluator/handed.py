"""The guard's rules on what a call is handed: no attribute stored on it (state carried from one call to the next),
and no tensor subclass, torch mode or ``__torch_function__`` hook (work deferred past the timed call). Each rule
answers ``(reason, detail)`` or None; ``guard.check`` turns that into its result."""

from __future__ import annotations

import ast


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _bindings(body: list[ast.AST]) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) for every binding in a function body outside nested scopes: assignments, loop and ``with``
    targets, walrus and comprehension variables."""
    out: list[tuple[ast.AST, ast.AST]] = []
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (*_SCOPES, ast.ClassDef)):
            continue
        if isinstance(node, ast.Assign):
            out += [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            out.append((node.target, node.value))
        elif isinstance(node, (ast.For, ast.comprehension)):
            out.append((node.target, node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            out.append((node.optional_vars, node.context_expr))
        todo.extend(ast.iter_child_nodes(node))
    return out


def _attribute_stores(tree: ast.AST) -> list[tuple[ast.AST, ast.Attribute]]:
    """(statement, target) for every attribute a source assigns, augments, annotates, deletes or binds in a loop or
    ``with``."""
    out: list[tuple[ast.AST, ast.Attribute]] = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        for t in targets:
            out += [(node, a) for a in ast.walk(t) if isinstance(a, ast.Attribute) and isinstance(a.ctx, (ast.Store,
                                                                                                          ast.Del))]
    return out


def _reachable(tree: ast.Module) -> dict[int, set[str]]:
    """For every function in ``tree``, by ``id``: the names in it that may hold what its callers handed it, its
    parameters (and an enclosing function's) and every name bound from an expression that reads one, to a fixed
    point. The ``self`` of a class's own ``__init__`` is a new object, not one handed in."""
    out: dict[int, set[str]] = {}

    def visit(node: ast.AST, outer: set[str], in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                a = child.args
                params = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x is not None]
                if in_class and getattr(child, "name", "") == "__init__" and params:
                    params = params[1:]
                names = set(outer) | set(params)
                body = child.body if isinstance(child.body, list) else [child.body]
                binds = _bindings(body)
                grew = True
                while grew:
                    grew = False
                    for target, value in binds:
                        if _names_in(value) & names:
                            new = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)
                                   and isinstance(n.ctx, ast.Store)} - names
                            if new:
                                names |= new
                                grew = True
                out[id(child)] = names
                visit(child, names, False)
            else:
                visit(child, outer, isinstance(child, ast.ClassDef) or (in_class and not isinstance(child, ast.stmt)))

    visit(tree, set(), False)
    return out


def smuggled_state(tree: ast.Module, base_tree: ast.Module) -> tuple[str, str] | None:
    """An attribute assigned on something a call was handed, or on anything reachable from it (``x.cached = out``,
    ``x.grad = ...``, ``box = [x]; box[0].seen = True``), that the baseline does not assign as well (a method
    launcher's ``self.out = ...``): state that rides on the inputs from one call to the next."""
    allowed = {ast.unparse(t) for _, t in _attribute_stores(base_tree)}
    funcs = [f for f in ast.walk(tree) if isinstance(f, _SCOPES)]
    reach = _reachable(tree)
    for fn in funcs:
        names = reach.get(id(fn), set())
        body = fn.body if isinstance(fn.body, list) else [fn.body]
        inner = {id(n) for f in body for sub in ast.walk(f) if isinstance(sub, _SCOPES)
                 for n in ast.walk(sub)}  # nested functions are judged on their own
        for stmt, target in _attribute_stores(ast.Module(body=body, type_ignores=[])):
            if id(target) in inner or ast.unparse(target) in allowed:
                continue
            read = sorted(_names_in(target.value) & names)  # `x.a`, `box[0].a`, and `type(x).a` (x's class)
            root = read[0] if read else None
            if root is not None:
                return ("state_smuggling",
                        f"line {getattr(stmt, 'lineno', '?')}: assigns {ast.unparse(target)}, an attribute of {root!r}, "
                        "which holds what the call was handed: state carried between calls on an input")
    return None


_DEFERRING_BASES = ("Tensor", "TorchFunctionMode", "TorchDispatchMode")
_DEFERRING_HOOKS = ("__torch_function__", "__torch_dispatch__")


def deferred_work(tree: ast.Module) -> tuple[str, str] | None:
    """A ``torch.Tensor`` subclass, a torch function or dispatch mode, or a ``__torch_function__`` hook: ways to
    return a tensor whose work runs later, outside the timed call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for b in node.bases:
                if ast.unparse(b).split(".")[-1] in _DEFERRING_BASES:
                    return ("forbidden", f"line {node.lineno}: class {node.name} subclasses {ast.unparse(b)} (work "
                                         "deferred past the timed call)")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _DEFERRING_HOOKS:
            return ("forbidden", f"line {node.lineno}: defines {node.name} (work deferred past the timed call)")
    return None
