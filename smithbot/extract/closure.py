"""The closure of a launcher: every definition it needs, gathered across the target's files, so that the task runs
with torch and triton alone.

Starting from the wrapper (the entry point), each definition's free names are resolved in its own module:
- builtins, and names from torch, triton and the I/O-free standard modules of ``imports.STDLIB``: kept, as imports;
- module-level definitions and constants of the same file, or of another file of the target package: inlined;
- aliases of tl builtins chosen at import time (``exp = tl.exp``): rewritten to the qualified call with libcst;
- runtime helpers named in the target's ``stubs``: replaced by a stub returning the target's value;
- environment reads (``os.getenv(k, d)``, ``os.environ.get(k, d)``): pinned to their default ``d``, as a run with a
  clean environment sees them;
- anything from an external extension or an unknown module: a blocker, reported by name.
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst
import libcst.helpers

from evaluator.guard import forbidden_in, frozen_classes, module_state, read_only_table
from smithbot.errors import SmithbotError
from smithbot.extract.constants import Constants, NotConstant
from smithbot.extract.fold import fold_assignment
from smithbot.extract.imports import import_line, in_triton, tl_builtin
from smithbot.extract.modules import Module, applied_factory, free_names, top_bindings
from smithbot.extract.rewrite import LocalImportDropper, Renamer, TypeCheckDropper, env_pinned, is_kernel, only_called
from smithbot.extract.rules import Context, rewritten
from smithbot.extract.splice import splice
from smithbot.extract.stand_ins import LOGGER, STAND_INS, custom_decorator_stub, is_logger, stub_source
from smithbot.extract.state import state_as_params
from smithbot.program.syntax import collect_imports, from_module

_BUILTINS = set(dir(builtins))
HELPER_DEFINITIONS = 150  # more than this in one helper's closure, and the helper becomes a stub
TOO_MANY = f"it needs more than {HELPER_DEFINITIONS} definitions"


class ExtractError(SmithbotError):
    """A kernel cannot be extracted; the message names what blocks it."""


@dataclass
class Definition:
    name: str  # the name it is bound to in the task
    qualname: str
    path: str
    source: str


@dataclass
class Closure:
    imports: dict[str, str] = field(default_factory=dict)  # local name -> import statement
    stubs: dict[str, str] = field(default_factory=dict)  # name -> stub source
    definitions: list[Definition] = field(default_factory=list)  # in dependency order
    aliases: dict[str, str] = field(default_factory=dict)  # tl alias -> qualified name
    blockers: list[str] = field(default_factory=list)


def raising_class(name: str, origin: str, why: str, methods: list[str], construct: bool) -> str:
    """A stand-in class for the target's ``origin`` whose every method raises ``why``; with ``construct`` False, so
    does making one."""
    raise_ = f"        raise NotImplementedError({why!r})\n"
    init = "" if construct else f"    def __init__(self, *args, **kwargs):\n{raise_}"
    return f"class {name}:  # the target's {origin}\n{init}" + "".join(
        f"\n    @staticmethod\n    def {m}(*args, **kwargs):\n{raise_}" for m in methods)


class ClosureBuilder:
    def __init__(self, root: Path, modules: dict[str, str], package: str, stubs: dict[str, Any],
                 external: tuple[str, ...], custom_decorators: tuple[str, ...] = (),
                 state: tuple[str, ...] = (), decided: dict[tuple[str, str], dict[str, bool]] | None = None) -> None:
        self.root = root
        # (module, function) -> its if-tests that serving decides for the kernel's launch: the branches kept
        self.decided = decided or {}
        # engine state the launcher reads through an accessor (`get_req_to_token_pool().req_to_token`) that the
        # inputs give: each `get_NAME()` call in the launcher becomes its parameter NAME
        self.state = state
        self.paths = modules  # module name -> relative path
        self.package = package
        self.stubs_values = stubs
        self.external = set(external)
        self.custom_decorators = set(custom_decorators)
        self._mods: dict[str, Module] = {}
        self.c = Closure()
        self._done: set[tuple[str, str]] = set()
        self._bound: dict[str, tuple[str, str]] = {}  # task name -> (module, name) it stands for
        self._following: set[tuple[str, str]] = set()  # re-exports being followed
        self._depth = 0  # 0 while adding the launcher itself, more for what it needs
        self._needs: dict[tuple[str, str], str] = {}  # helpers made stubs, and why: kept across rollbacks
        self._takes = 0  # definitions taken so far, and where each helper being added started counting
        self._starts: list[int] = []

    def _locate(self, name: str) -> str | None:
        """The file of a module the scan did not parse: tried under each source prefix the parsed modules show."""
        rel = self.paths.get(name)
        if rel is not None:
            return rel
        prefixes = {p[: len(p) - len(m.replace(".", "/")) - 3] for m, p in self.paths.items()
                    if p.endswith(m.replace(".", "/") + ".py")}
        for prefix in sorted(prefixes):
            for cand in (f"{prefix}{name.replace('.', '/')}.py", f"{prefix}{name.replace('.', '/')}/__init__.py"):
                if (self.root / cand).is_file():
                    self.paths[name] = cand
                    return cand
        return None

    def module(self, name: str) -> Module | None:
        if name not in self._mods:
            rel = self._locate(name)
            if rel is None:
                return None
            text = (self.root / rel).read_text(encoding="utf-8-sig")
            tree = ast.parse(text)
            imports = collect_imports(tree, name, rel.endswith("__init__.py"))
            self._mods[name] = Module(rel, name, text.splitlines(), tree, imports, *top_bindings(tree, self.package))
        return self._mods[name]

    def add(self, module: str, name: str, as_name: str | None = None) -> None:
        """Add ``module.name`` (bound as ``as_name`` in the task) and everything it needs."""
        key = (module, name)
        as_name = as_name or name
        if key in self._done:
            if as_name != name and as_name not in self._bound:
                self.c.definitions.append(Definition(as_name, as_name, self.paths.get(module, "?"),
                                                     f"{as_name} = {name}\n"))
                self._bound[as_name] = key
            return
        self._done.add(key)
        mod = self.module(module)
        if mod is None:
            self.c.blockers.append(f"module {module} not found in the checkout")
            return
        node = mod.top.get(name)
        if node is None and name in mod.imports:  # a re-export (from .x import f in a package __init__)
            if key in self._following:
                self.c.blockers.append(f"an import cycle through {module}.{name}")
                return
            self._following.add(key)  # (while it is followed: a second use of the name after it is no cycle)
            self._done.discard(key)
            try:
                self._resolve(mod, name)
            finally:
                self._following.discard(key)
            if as_name != name and name not in self.c.imports:
                self.c.definitions.append(Definition(as_name, as_name, mod.path, f"{as_name} = {name}\n"))
            return
        if node is not None:
            node = self._decided(mod, name, node)
        if node is None:
            for star in self._star_modules(mod):  # `from .common import *` in a package __init__
                sm = self.module(star)
                if sm is not None and (name in sm.top or name in sm.imports):
                    self._done.discard(key)
                    self.add(star, name, as_name)
                    return
            self.c.blockers.append(f"{name} is not defined at module level in {mod.path}")
            return
        if self._alias(mod, node, as_name):
            return
        if is_logger(node):
            self.c.stubs[as_name] = LOGGER.format(name=as_name)
            return
        clash = self._bound.get(name)
        if clash is not None and clash != key:
            self.c.blockers.append(f"two definitions named {name} ({clash[0]} and {module})")
            return
        self._bound[name] = key
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        source = textwrap.dedent("\n".join(mod.lines[start - 1:node.end_lineno])) + "\n"
        folded = fold_assignment(self, mod, node, source, as_name)
        if folded is None:
            return
        node, source = folded
        applied = applied_factory(mod, node) if isinstance(node, ast.Assign) else node
        if applied is not node:
            source = splice(source, applied)
            node = ast.parse(source).body[0]
        state = module_state(env_pinned(node.value), frozen_classes(mod.tree)) \
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value else None
        if state and read_only_table(mod.tree, node):  # `_FP8_DTYPES = {...}` that the module only reads
            state = None
        attrs = self._attributes_read(as_name, module) if state and self._depth == 1 and isinstance(node, ast.Assign) \
            and isinstance(node.value, ast.Call) else None
        if attrs is not None:
            # `g_manager = CacheManager()` that the launcher itself only calls methods of (`g_manager.alloc(...)`,
            # on a branch such as `if use_custom_allocator:`): an object the task cannot have, so it stands in as
            # one whose every method raises and says why; the self-check shows whether the inputs reach it
            why = f"{name} is not in this task: it is module-level state ({state})"
            self._done.add(key)
            self._bound[as_name] = key
            self.c.stubs[as_name] = raising_class(as_name, f"{module}.{name}", why, attrs, construct=True)
            return
        if state and self._depth:  # `_CACHE = OrderedDict()`: a helper that keeps it is stubbed, if one can be
            self.c.blockers.append(f"{name} is module-level state ({state})")
        self._take_or_stand_in(mod, module, name, as_name, source, node)

    def _take_or_stand_in(self, mod: Module, module: str, name: str, as_name: str, source: str, node: ast.stmt
                          ) -> None:
        """Take a definition into the task with what it needs; or, for a helper that needs what a task cannot have,
        put in a stand-in that raises and names that need. A rebinding after a ``def`` (``f = triton.jit(f)``)
        follows it."""
        key = (module, name)
        helper = self._depth > 0 and (isinstance(node, ast.ClassDef) or isinstance(node, ast.FunctionDef)
                                      and not is_kernel(node))
        need = self._needs.get(key) if helper else None
        if need is None:
            self._depth += 1
            saved = self._save() if helper else None
            if helper:
                self._starts.append(self._takes)
            try:
                self._take(mod, name, name, source, node)
            finally:
                self._depth -= 1
                if helper:
                    self._starts.pop()
            over = saved is not None and self.c.blockers[saved[0]:saved[0] + 1] == [TOO_MANY]
            if saved is not None and len(self.c.blockers) > saved[0] and not (over and self._starts):
                # (a helper over the budget is given up as a whole, by the outermost helper that started it)
                # a helper that needs what a task cannot have (an extension, module-level state, code the guard
                # rejects): in the task it raises and names that need, so a launcher that calls it only on other
                # inputs (an fp8 path, a ROCm path) still extracts, and the self-check shows whether its inputs
                # reach it. Remembered, so that other helpers needing it do not explore it again.
                need = self._needs[key] = self.c.blockers[saved[0]]
                self._restore(saved)
        if need is not None:
            self._done.add(key)
            self._bound[name] = key
            why = f"{name} is not in this task: {need}"
            if isinstance(node, ast.ClassDef):  # (LightLLM's tuning-table classes, that read JSON files) its methods
                methods = [f.name for f in node.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("__")]
                self.c.stubs[name] = raising_class(name, f"{module}.{name}", why, methods, construct=False)
            else:
                self.c.stubs[name] = (f"def {name}(*args, **kwargs):  # the target's {module}.{name}\n"
                                      f"    raise NotImplementedError({why!r})\n")
            if as_name != name:
                self.c.definitions.append(Definition(as_name, as_name, mod.path, f"{as_name} = {name}\n"))
            return
        rebinds = [s for s in self._taken_top(mod) if isinstance(node, ast.FunctionDef) and isinstance(s, ast.Assign)
                   and s.lineno > node.lineno and [ast.unparse(t) for t in s.targets] == [name]
                   and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(s.value))]
        for s in rebinds:  # `f = triton.jit(f)` after `def f`: the rebinding follows the definition
            s = applied_factory(mod, s)
            self._take(mod, name, name, ast.unparse(s) + "\n", s)
        if as_name != name:
            self.c.definitions.append(Definition(as_name, as_name, mod.path, f"{as_name} = {name}\n"))
            self._bound[as_name] = key

    def _attributes_read(self, name: str, defined_in: str) -> list[str] | None:
        """The attributes read of ``name`` in the modules read so far but the one it is defined in (``g.alloc`` of
        ``g.alloc(...)``), when that is all that is done with it there (no call, argument, subscript or rebinding of
        ``name`` itself); else None."""
        attrs: set[str] = set()
        for mod in (m for key, m in self._mods.items() if key != defined_in):
            parents = {id(c): n for n in ast.walk(mod.tree) for c in ast.iter_child_nodes(n)}
            for n in ast.walk(mod.tree):
                if not (isinstance(n, ast.Name) and n.id == name):
                    continue
                up = parents.get(id(n))
                if not (isinstance(n.ctx, ast.Load) and isinstance(up, ast.Attribute) and up.value is n
                        and isinstance(up.ctx, ast.Load)) or up.attr.startswith("__"):
                    return None
                attrs.add(up.attr)
        return sorted(attrs) or None

    def _taken_top(self, mod: Module) -> list[ast.stmt]:
        """``mod``'s top-level statements, with those of a top-level ``if`` whose test its constants decide (``if
        not _is_cpu: f = autotune(f)``) on the side taken."""
        out: list[ast.stmt] = []
        constants = Constants(self, mod)
        for stmt in mod.tree.body:
            if not isinstance(stmt, ast.If):
                out.append(stmt)
                continue
            try:
                taken = constants.value(stmt.test)
            except NotConstant:
                continue
            if isinstance(taken, (bool, int, str, type(None))):
                out.extend(stmt.body if taken else stmt.orelse)
        return out

    def _decided(self, mod: Module, name: str, node: ast.stmt) -> ast.stmt:
        """``name``'s binding on the side that a top-level ``if`` around ``node`` takes when the module's constants
        decide its test (``if is_fp8_fnuz(): fp8_dtype = ...fnuz else: ...fn``, with ``is_fp8_fnuz`` stubbed);
        otherwise ``node``, the first binding."""
        top = next((s for s in mod.tree.body if isinstance(s, ast.If) and s.lineno <= node.lineno <= s.end_lineno),
                   None)  # type: ignore[operator]
        if top is None:
            return node
        try:
            taken = Constants(self, mod).value(top.test)
        except NotConstant:
            return node
        if not isinstance(taken, (bool, int, str, type(None))):
            return node
        side, _ = top_bindings(ast.Module(body=top.body if taken else top.orelse, type_ignores=[]), self.package)
        return side.get(name, node)

    def _save(self) -> tuple:
        c = self.c
        return (len(c.blockers), len(c.definitions), dict(c.imports), dict(c.stubs), dict(c.aliases), set(self._done),
                dict(self._bound), set(self._following))

    def _restore(self, saved: tuple) -> None:
        n_blockers, n_defs, imports, stubs, aliases, done, bound, following = saved
        del self.c.blockers[n_blockers:], self.c.definitions[n_defs:]
        self.c.imports, self.c.stubs, self.c.aliases = imports, stubs, aliases
        self._done, self._bound, self._following = done, bound, following

    def _take(self, mod: Module, name: str, qualname: str, source: str, node: ast.stmt) -> ast.stmt:
        """Append the definition ``source`` (``node`` parsed) and resolve everything it needs; return its final node."""
        self._takes += 1
        if self._depth == 0 and isinstance(node, ast.FunctionDef) and self.state:
            source = state_as_params(source, self.state)
            node = ast.parse(source).body[0]
        if self._starts and self._takes - self._starts[0] > HELPER_DEFINITIONS:
            # a helper whose closure runs into the serving stack (configs, schedulers, loggers): not kernel code
            self.c.blockers.append(TOO_MANY)
            return node
        source, node = self._rewritten(mod, source, node, qualname)
        source, node, dropped = self._local_imports(mod, source, node)
        if isinstance(node, ast.FunctionDef) and self._depth > 1 and not is_kernel(node):
            bad = forbidden_in(source)  # a helper the evaluator's guard would reject: stubbed if off the path
            if bad is not None:
                self.c.blockers.append(f"it does what a task may not ({bad.detail.split(': ', 1)[-1]})")
                return node
        for free in free_names(node):
            if free not in dropped:
                self._resolve(mod, free)
        self.c.definitions.append(Definition(name, qualname, mod.path, source))
        return node

    def _rewritten(self, mod: Module, source: str, node: ast.stmt, qualname: str) -> tuple[str, ast.stmt]:
        """A definition's source with the target's quirks rewritten for a task (``extract.rules``)."""
        return rewritten(Context(self.stubs_values, Constants(self, mod), mod.imports, self.c.stubs,
                                 self.decided.get((mod.name, qualname), {})), source, node)

    def _local_imports(self, mod: Module, source: str, node: ast.stmt) -> tuple[str, ast.stmt, dict[str, str]]:
        """Imports inside a function that the task may not make (the target's own helpers, relative imports) become
        ``pass``, and what they bound is resolved like a module-level import: inlined, stubbed or reported. Returns
        the source, its node and those names with their targets."""
        local: dict[str, str] = {}
        for n in ast.walk(node):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                local.update(collect_imports(ast.Module(body=[n], type_ignores=[]), mod.name,
                                             mod.path.endswith("__init__.py")))
        # (a function-local import of a triton name may sit in a branch for another triton version: it stays)
        dropped = {k: v for k, v in local.items() if import_line(k, v, installed=False) is None}
        if dropped:
            # a class imported only to check an argument's type is not needed: the check goes, and so does the import
            checks = TypeCheckDropper(set(dropped))
            source = cst.parse_module(source).visit(checks).code
            if checks.dropped:
                node = ast.parse(source).body[0]
                used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                unused = {k for k in dropped if k not in used}
                source = cst.parse_module(source).visit(LocalImportDropper(unused)).code
                node = ast.parse(source).body[0]
                dropped = {k: v for k, v in dropped.items() if k not in unused}
        if dropped:
            source = cst.parse_module(source).visit(LocalImportDropper(set(dropped))).code
            node = ast.parse(source).body[0]
            for local_name, target in dropped.items():
                self._resolve(mod, local_name, target, within=node)
        return source, node, dropped

    def add_method(self, module: str, cls: str, method: str, as_name: str) -> ast.FunctionDef:
        """Add ``cls.method`` as the module-level function ``as_name``, and everything it needs; return its def. A
        method keeps ``self`` as its first parameter (the inputs stand in for the attributes it reads); a static
        method (or a class method that never uses its class) loses its decorator; the ``forward`` of an
        ``autograd.Function`` loses ``ctx``, for which a local stand-in takes what it saves for backward, and runs
        without grad, as ``Function.apply`` runs it (its in-place writes to outputs made with ``requires_grad``)."""
        mod = self.module(module)
        node = mod.top.get(cls) if mod else None
        found = next((n for n in getattr(node, "body", []) if isinstance(n, ast.FunctionDef) and n.name == method),
                     None)
        if not isinstance(node, ast.ClassDef) or found is None:
            raise ExtractError(f"{cls}.{method} is not a method of a module-level class")
        decorators = {ast.unparse(d) for d in found.decorator_list}
        # a class method that never uses its class is a static one
        unused_cls = decorators == {"classmethod"} and found.args.args and not any(
            isinstance(n, ast.Name) and n.id == found.args.args[0].arg for n in ast.walk(found))
        if unused_cls:
            decorators = {"staticmethod"}
        if decorators - {"staticmethod"} or not found.args.args and "staticmethod" not in decorators:
            raise ExtractError(f"{cls}.{method}: only plain and static methods are supported, not "
                               f"{', '.join(sorted(decorators)) or 'a method without self'}")
        assert mod is not None
        source = textwrap.dedent("\n".join(mod.lines[found.lineno - 1:found.end_lineno])) + "\n"
        fn = cst.ensure_type(cst.parse_module(source).body[0], cst.FunctionDef)
        fn = fn.with_changes(name=cst.Name(as_name))
        if unused_cls:
            fn = fn.with_changes(params=fn.params.with_changes(params=fn.params.params[1:]))
        if method == "forward" and any("Function" in ast.unparse(b) for b in node.bases):
            ctx = fn.params.params[0].name.value
            stand_in = cst.parse_statement(
                f"class {ctx}:  # the autograd context: what forward saves for backward is dropped\n"
                "    def save_for_backward(*tensors):\n        pass\n\n"
                "    mark_non_differentiable = set_materialize_grads = save_for_backward\n")
            body = cst.ensure_type(fn.body, cst.IndentedBlock)
            fn = fn.with_changes(params=fn.params.with_changes(params=fn.params.params[1:]),
                                 body=body.with_changes(body=[stand_in, *body.body]),
                                 decorators=[cst.Decorator(decorator=cst.parse_expression("torch.no_grad()"))])
            self.c.imports.setdefault("torch", "import torch")
        source = cst.Module(body=[fn]).code
        self._done.add((module, as_name))
        self._bound[as_name] = (module, as_name)
        tree = self._take(mod, as_name, f"{cls}.{method}", source, ast.parse(source).body[0])
        assert isinstance(tree, ast.FunctionDef)
        return tree

    def add_source(self, module: str, as_name: str, qualname: str, source: str) -> ast.FunctionDef:
        """Add a function written from ``module``'s own code (torch glue made a function: ``extract/glue.py``) as
        ``as_name``, with everything it needs from the module, as the module sees it; return its def."""
        mod = self.module(module)
        if mod is None:
            raise ExtractError(f"no module {module} to take {qualname} from")
        self._done.add((module, as_name))
        self._bound[as_name] = (module, as_name)
        tree = self._take(mod, as_name, qualname, source, ast.parse(source).body[0])
        assert isinstance(tree, ast.FunctionDef)
        return tree

    @staticmethod
    def _star_modules(mod: Module) -> list[str]:
        return [from_module(node, mod.name, mod.path.endswith("__init__.py")) for node in mod.tree.body
                if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)]

    def _handed_on(self, target: str) -> str:
        """``target`` (an import's dotted name), or, where it is a name that a module of the target imports from a
        module a task may import and hands on, that module: ``vllm.triton_utils.tl`` is ``triton.language`` where
        ``vllm/triton_utils`` says ``import triton.language as tl`` (behind ``if HAS_TRITON:``, with a placeholder
        otherwise: the task has Triton)."""
        tmod, _, attr = target.rpartition(".")
        held = self.module(tmod) if tmod.split(".")[0] == self.package else None
        real = held.imports.get(attr) if held is not None else None
        if real is None or real.split(".")[0] == self.package or import_line(attr, real) is None:
            return target
        return real

    def _env_table(self, mod: Module, name: str, target: str) -> str | None:
        """``import pkg.envs as envs`` where ``pkg/envs.py`` answers its attributes from a table of getters (a
        module-level ``__getattr__`` and a dict of ``"X": lambda: ...`` getters): a stand-in class holding each
        ``envs.X`` that ``mod`` reads, as the getter computes it in a clean environment (one that is no constant is
        left out, and a read of it fails). None where the module is no such table, or no getter is a constant."""
        env = self.module(target)
        if env is None or "__getattr__" not in env.top:
            return None
        getters = {k.value: v for s in env.tree.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                   and isinstance(s.value, ast.Dict) for k, v in zip(s.value.keys, s.value.values)
                   if isinstance(k, ast.Constant) and isinstance(v, ast.Lambda)}
        read = sorted({n.attr for n in ast.walk(mod.tree) if isinstance(n, ast.Attribute)
                       and isinstance(n.value, ast.Name) and n.value.id == name})
        if not read or any(a not in getters for a in read):
            return None
        values, left = {}, []
        for a in read:
            try:
                values[a] = Constants(self, env).value(getters[a].body)  # type: ignore[union-attr]
            except NotConstant:
                left.append(a)  # VLLM_CACHE_ROOT, a path: a function of the task that reads it cannot run here
        if not values:
            return None
        lines = "".join(f"    {a} = {v!r}\n" for a, v in values.items())
        note = f"    # no constant, so absent: {', '.join(left)}\n" if left else ""
        return f"class {name}:  # {target}: its environment table, as a clean environment reads it\n{note}{lines}"

    def _resolve(self, mod: Module, name: str, imported: str | None = None, within: ast.stmt | None = None) -> None:
        """Bind ``name`` as module ``mod`` sees it (or, with ``imported``, as the function-local import in
        ``within`` binds it)."""
        if name in self.c.imports or name in self.c.stubs or name in self.c.aliases:
            return
        if name in self.custom_decorators:
            self.c.stubs[name] = custom_decorator_stub(name)
            return
        if name in self.stubs_values:
            called = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
                         for n in ast.walk(mod.tree))
            self.c.stubs[name] = stub_source(name, self.stubs_values[name], called)
            return
        if imported is not None or name in mod.imports:
            target = self._handed_on(imported or mod.imports[name])
            root = target.split(".")[0]
            line = import_line(name, target)
            if line is not None and tl_builtin(target):  # `from triton.language.math import rsqrt`: calls become
                # `tl.math.rsqrt(...)`, which the interpreter patches (the name bound at import it does not)
                self.c.aliases[name] = "tl." + target.removeprefix("triton.language.")
                self.c.imports.setdefault("tl", "import triton.language as tl")
            elif line is not None:
                self.c.imports[name] = line
            elif target in STAND_INS:
                self.c.stubs[name] = STAND_INS[target].format(name=name)
                if "typing." in self.c.stubs[name]:
                    self.c.imports.setdefault("typing", "import typing")
            elif imported is None and name in mod.optional:
                self.c.stubs[name] = f"{name} = None  # optional in the target ({target}), absent here\n"
            elif root == self.package:
                tmod, _, attr = target.rpartition(".")
                if self.module(target) is not None and re.search(r"log(ger|ging)?$", name) and only_called(
                        mod.tree, name):  # `from pkg.utils import logger`, `logger.info(...)`: it logs nothing
                    self.c.stubs[name] = LOGGER.format(name=name)
                elif self.module(target) is not None and (table := self._env_table(mod, name, target)):
                    self.c.stubs[name] = table
                elif self.module(target) is not None:
                    self.c.blockers.append(f"{name} is a module of the target ({target}); only definitions inline")
                elif imported is not None and attr != name and tmod != mod.name and attr in mod.top and (
                        self._bound.get(attr) == (mod.name, attr) or any(
                            isinstance(n, ast.Name) and n.id == attr for n in ast.walk(mod.tree))):
                    # `from other import f as _g` inside a function of a module with an f of its own: one task
                    # cannot hold both, so _g raises if its path is taken (as a helper the task cannot have does)
                    why = f"{target} is not in this task: it has another definition of {attr}"
                    self.c.stubs[name] = (f"def {name}(*args, **kwargs):  # the target's {target}\n"
                                          f"    raise NotImplementedError({why!r})\n")
                else:
                    self.add(tmod, attr, name)
            elif root != "triton" and only_called(mod.tree if within is None else ast.Module([within], []), name,
                                                  on_branches=True):
                # `if _is_cpu: sgl_kernel.f_cpu(x) else: kernel[grid](...)`, or `if ue8m0: from ext import f` and
                # `f(x)` in a function: a stub that raises if the inputs reach it
                what = f"the external extension {root}" if root in self.external else f"{target}"
                self.c.stubs[name] = (f"def {name}(*args, **kwargs):  # {target}\n    raise NotImplementedError("
                                      f"{f'{name} is not in this task: it comes from {what}'!r})\n")
            elif root in self.external:
                self.c.blockers.append(f"external extension {root} ({name})")
            elif root == "triton" and in_triton(*target.rpartition(".")[::2]):
                self.c.blockers.append(f"{target} ({name}) is a triton module a task may not import")
            elif root == "triton":
                self.c.blockers.append(f"{target} ({name}) is not in the installed triton (a fork's or an older "
                                       "triton's)")
            else:
                self.c.blockers.append(f"import of {target} ({name})")
            return
        node = mod.top.get(name)
        if node is not None:
            if not self._alias(mod, node, name):
                self.add(mod.name, name)
            return
        if name in _BUILTINS:
            return
        if only_called(mod.tree, name, on_branches=True):  # a dead path of the target's: it fails only if taken
            self.c.stubs[name] = (f"def {name}(*args, **kwargs):  # defined nowhere in {mod.path}\n    raise NameError("
                                  f"{f'{name} is not defined in the target ({mod.path})'!r})\n")
            return
        self.c.blockers.append(f"unresolved name {name} in {mod.path}")

    def _alias(self, mod: Module, node: ast.stmt, as_name: str) -> bool:
        """Whether ``node`` binds a tl builtin under another name (``fast_expf = tl.math.exp``); if so, calls of
        ``as_name`` are rewritten to the qualified name, which the interpreter patches and the compiler resolves."""
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute)):
            return False
        dotted = ast.unparse(node.value)
        head = dotted.split(".")[0]
        full = mod.imports.get(head, head) + dotted[len(head):]
        if not full.startswith("triton.language."):
            return False
        self.c.aliases[as_name] = "tl." + full.removeprefix("triton.language.")
        self.c.imports.setdefault("tl", "import triton.language as tl")
        return True

    def render_definitions(self) -> list[Definition]:
        if not self.c.aliases:
            return self.c.definitions
        out = []
        for d in self.c.definitions:
            tree = cst.parse_module(d.source).visit(Renamer(self.c.aliases))
            out.append(Definition(d.name, d.qualname, d.path, tree.code))
        return out
