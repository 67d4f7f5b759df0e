"""What one Python file says about calls: its functions' calls with the if-tests around them, its classes' attribute
types, its module-level assignments and registries. Scan's kernel index (``smithbot.scan.parse``) reads only files
that can hold Triton code; the call graph reads the model and engine files those kernels are reached from.

``file_facts(relpath, data, modname)`` is a pure function of the file's bytes and returns plain JSON-able data, so
it is cached by content hash like the kernel index. It uses the standard library's ``ast`` for the same reason as
``scan.parse``: libcst costs ten times as much per file.

A call is recorded as ``[callee, tests, loop, line]``:
- ``callee`` is the dotted text of what is called (``self.mlp``, ``fused_experts``, ``self.quant_method.apply``),
  ``X()`` for a call of a call's result (``get_impl_class(cfg)(...)``), or ``X[]`` for a call of a subscript
  (``REGISTRY[name](...)``, ``kernel[grid](...)``);
- ``tests`` lists the enclosing if-tests as ``[source, taken]`` (``taken`` is False in the else branch);
- ``loop`` says the call sits inside a ``for`` or ``while`` loop of its function.

Locals (``[text, tests]``) and class attributes (``[text, assigning function, tests]``) keep the if-tests of their
assignment too, so that ``if w8a8: builder = A() else: builder = B()`` gives ``builder`` the value the serving
defaults pick.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from smithbot.program.kinds import OBJECT
from smithbot.program.syntax import (EMPTY_DICTS, FLAG_VALUES, always_leaves, annotation_text, callee_text,
                                     class_constant, collect_imports, dict_pairs, dotted_name, expr_text, factory_call,
                                     from_module, guards, inline_flags, is_const, leaves, literal_strings, made_values,
                                     merged_dicts, self_attr)


class _Visitor(ast.NodeVisitor):
    def __init__(self, modname: str = "", is_package: bool = False) -> None:
        self.modname, self.is_package = modname, is_package
        self.functions: dict[str, dict[str, Any]] = {}
        self.classes: dict[str, dict[str, Any]] = {}
        self.assigns: dict[str, str] = {}
        self.scope: list[tuple[str, str]] = []  # (kind, name)
        self.tests: list[list[Any]] = []
        self.loops = 0
        self.fn: dict[str, Any] | None = None
        self.rebound: dict[str, list[str]] = {}  # a module-level name -> the functions that assign it (global x)
        self.iters: dict[str, str] = {}  # a loop's (or layer builder's) variable -> what it iterates over
        self.fors: list[str] = []  # the iterables of the for loops around the statement being visited
        # a module-level name -> the functions that change the object it holds (_SPECS.append(s), _TABLE[k] = v)
        self.mutated: dict[str, list[str]] = {}

    def _qual(self, name: str) -> str:
        return ".".join([s[1] for s in self.scope] + [name])

    def _enclosing_class(self) -> dict[str, Any] | None:
        for i in range(len(self.scope) - 1, -1, -1):
            if self.scope[i][0] == "class":
                return self.classes.get(".".join(s[1] for s in self.scope[: i + 1]))
        return None

    # --- control flow ------------------------------------------------------------------------------------------
    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        self._before(test)
        self.visit(node.test)
        for taken, stmts in ((True, node.body), (False, node.orelse)):
            self.tests.append([test, taken])
            self.block(stmts)
            self.tests.pop()

    def _before(self, test: str) -> None:
        """Note which of the function's names are assigned before this test (a parameter reassigned later is still
        the caller's argument here)."""
        if self.fn is not None:
            into = self.fn.setdefault("before", {}).setdefault(test, [])
            into.extend(n for n in sorted(self.fn.get("_assigned", ())) if n not in into)
            # how many of each local's assignments come before it (outside a loop, a later one cannot reach it)
            counts = self.fn.setdefault("assigned_before", {}).setdefault(test, {})
            for name, entries in self.fn.get("assigned", {}).items():
                counts[name] = max(counts.get(name, 0), len(entries) if self.loops == 0 else 1 << 30)

    def block(self, stmts: list[ast.stmt]) -> None:
        """A block's statements in order. After ``if T: ... return`` (a body that always leaves, with no else), the
        rest of the block runs only where T is false: it is under that test, as an else branch would be. A guard
        whose body only raises (``if state is not None: raise RuntimeError(...)``) puts no test on the rest: a
        server that runs at all never takes it."""
        pushed = 0
        for s in stmts:
            self.visit(s)
            if isinstance(s, ast.If) and not s.orelse and leaves(s.body) and not guards(s.body):
                self.tests.append([ast.unparse(s.test), False])
                pushed += 1
        del self.tests[len(self.tests) - pushed:]

    def visit_IfExp(self, node: ast.IfExp) -> None:
        test = ast.unparse(node.test)
        self.visit(node.test)
        for taken, expr in ((True, node.body), (False, node.orelse)):
            self.tests.append([test, taken])
            self.visit(expr)
            self.tests.pop()

    def _loop(self, node: ast.AST) -> None:
        self.loops += 1
        saved = dict(self.iters)
        for g in getattr(node, "generators", []):  # [Layer(i) for i in range(n)]: i is each of range(n)
            if isinstance(g.target, ast.Name):
                self.iters[g.target.id] = ast.unparse(g.iter)
        self.generic_visit(node)
        self.iters = saved
        self.loops -= 1

    visit_While = visit_ListComp = visit_GeneratorExp = _loop

    # --- definitions -------------------------------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        qual = self._qual(node.name)
        self.classes[qual] = {"line": node.lineno, "bases": [b for b in map(dotted_name, node.bases) if b], "attrs": {},
                              "registries": [], "flags": {}, "assigned_at": {},
                              "decorators": [d for d in (dotted_name(x.func if isinstance(x, ast.Call) else x)
                                                         for x in node.decorator_list) if d]}
        self.scope.append(("class", node.name))
        saved, self.fn = self.fn, None
        for s in node.body:
            self.visit(s)
        self.fn = saved
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        qual = self._qual(node.name)
        decorators = []
        for d in node.decorator_list:
            func = d.func if isinstance(d, ast.Call) else d
            decorators.append([dotted_name(func) or "", literal_strings(d) if isinstance(d, ast.Call) else []])
        cls = self._enclosing_class() if self.scope and self.scope[-1][0] == "class" else None
        params = {}
        for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            ann = annotation_text(a.annotation)
            if ann:
                params[a.arg] = [[ann, []]]
        # parameter defaults that name something (decoder_layer_type=Qwen2MoeDecoderLayer): a parameter's value
        # when no caller is known
        positional = node.args.posonlyargs + node.args.args
        pairs = list(zip(positional[len(positional) - len(node.args.defaults):], node.args.defaults))
        pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
        defaults = {a.arg: expr_text(d) for a, d in pairs if isinstance(d, (ast.Name, ast.Attribute)) and expr_text(d)}
        constants = {a.arg: ast.unparse(d) for a, d in pairs if isinstance(d, ast.Constant) or (  # default="false"
            isinstance(d, ast.UnaryOp) and isinstance(d.op, ast.USub) and isinstance(d.operand, ast.Constant))}  # -1
        info = {"line": node.lineno, "class": ".".join(s[1] for s in self.scope) if cls is not None else None,
                "decorators": decorators, "calls": [], "returns": [], "values": [], "forwards": [], "constructs": [], "locals": params,
                "stores": [],
                "flags": {},
                "leaves": always_leaves(node.body),  # it never runs off its end (returning None)
                "defaults": defaults, "constants": constants, "super_kwargs": {},
                "params": [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs],
                "annotated": {a: v[0][0] for a, v in params.items()},  # a parameter's type hint, as an instance
                "_imports": dict(self.fn["_imports"]) if self.fn is not None else {}}
        if annotation_text(node.returns):
            info["returns_hint"] = annotation_text(node.returns)  # def get_flags() -> Flags: an instance of Flags
        self.functions[qual] = info
        saved = (self.fn, self.tests, self.loops)
        self.fn, self.tests, self.loops = info, [], 0
        self.scope.append(("def", node.name))
        self.block(node.body)
        self.scope.pop()
        self.fn, self.tests, self.loops = saved
        del info["_imports"]
        filled = sorted(n for n in info.pop("_mutated", ()) if any(map(_COLLECTION.match, info["flags"].get(n, []))))
        if filled:  # a collection made empty or spelled out, then filled: its literal is not its value (an
            info["filled"] = filled  # element the literal spells out still is)
        info.pop("_globals", None)
        info.pop("_assigned", None)
        info.pop("_dicts", None)
        info.pop("_branches", None)
        if self.fn is not None:
            self.fn["stores"].extend(info["stores"])  # a decorator factory registers through its inner function

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Global(self, node: ast.Global) -> None:
        if self.fn is not None:
            self.fn.setdefault("_globals", set()).update(node.names)

    # --- imports inside a function: a name imported in one branch means that branch's module ------------------
    def visit_Import(self, node: ast.Import) -> None:
        if self.fn is not None:
            for a in node.names:
                self._imported(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if self.fn is not None:
            mod = from_module(node, self.modname, self.is_package)
            for a in node.names:
                if a.name != "*":
                    self._imported(a.asname or a.name, f"{mod}.{a.name}" if mod else a.name)

    def _imported(self, name: str, target: str) -> None:
        """A name this function imports; the branches that import it, when one branch imports it from one module
        and another from another (``if not is_npu(): from .a import B`` / ``else: from .npu import X as B``)."""
        assert self.fn is not None
        self.fn["_imports"][name] = target
        into = self.fn.setdefault("_branches", {}).setdefault(name, [])
        if [target, self.tests] not in into:
            into.append([target, [list(t) for t in self.tests]])

    def _abs(self, text: str | None, target: str | None = None) -> str | None:
        """An expression text whose head was imported in this function (from ``target``, where given), written
        ``abs:pkg/mod/Name.rest``."""
        if text is None or self.fn is None:
            return text
        head, dot, rest = text.partition(".")
        name, paren, args = head.partition("(")
        target = target or self.fn["_imports"].get(name)
        if target is None:
            return text
        return f"abs:{target.replace('.', '/')}{paren}{args}{dot}{rest}"

    def _abs_all(self, text: str) -> list[tuple[str, list[list[Any]]]]:
        """``_abs`` of each module a name imported in several branches may be, with that branch's if-tests."""
        name = text.partition(".")[0].partition("(")[0]
        branches = (self.fn or {}).get("_branches", {}).get(name, [])
        if len({target for target, _ in branches}) < 2:
            return [(self._abs(text) or text, [])]
        return [(self._abs(text, target) or text, tests) for target, tests in branches]

    def visit_Try(self, node: ast.Try) -> None:
        """A module-level optional import (``try: from flashinfer.x import f`` / ``except ImportError: f = None``):
        a name the handler assigns is what the try body binds where those packages are installed, else the
        handler's value; ``importlib.util.find_spec`` of each package decides which (``serving.packages``)."""
        self.generic_visit(node)
        if self.fn is not None or self.scope:
            return
        caught = {dotted_name(t) for h in node.handlers if h.type is not None
                  for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type])}
        packages = sorted({n.split(".")[0] for s in node.body
                           for n in ([s.module] if isinstance(s, ast.ImportFrom) and s.level == 0 and s.module
                                     else [a.name for a in s.names] if isinstance(s, ast.Import) else [])})
        if not packages or not caught & {"ImportError", "ModuleNotFoundError"}:
            return
        bound: dict[str, str] = {}
        for s in node.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound[s.name] = OBJECT
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                bound.update({a.asname or a.name.split(".")[0]: OBJECT for a in s.names if a.name != "*"})
            elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                bound[s.targets[0].id] = ast.unparse(s.value)
        found = " and ".join(f"importlib.util.find_spec({p!r}) is not None" for p in packages)
        for h in node.handlers:
            for s in h.body:
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                        and s.targets[0].id in bound:
                    name = s.targets[0].id
                    self.assigns[name] = f"({bound[name]}) if {found} else ({ast.unparse(s.value)})"

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.body)  # a lambda's calls belong to the function that makes it

    # --- assignments, returns and calls ------------------------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if self.fn is None:
            self._module_assign(node)
            return
        self._note_targets(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, (*FLAG_VALUES, ast.List)):
            # a flag an if-test reads (w8a8 = quant_method == "smooth_quant"), with every value it is given: decided
            # where they all agree; a local list too (a list that it fills is ``filled``: an attribute's is not
            # tracked, so a list on self is none)
            self._flag(node.targets[0].id, ast.unparse(node.value))
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple) \
                and len(node.targets[0].elts) == len(node.value.elts):  # a, b = A(), B(): pair them up
            for t, v in zip(node.targets[0].elts, node.value.elts):
                self.visit_Assign(ast.Assign(targets=[t], value=v, lineno=node.lineno))
            return
        cls = self._enclosing_class()
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) \
                and isinstance(node.value, (ast.Name, ast.Attribute, ast.Call)):
            self._unpacked(node.targets[0], node.value, cls)
        if cls is not None:  # every attribute the class's methods set on self, whatever the value
            for t in node.targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    attr = self_attr(el)
                    if attr:  # where, and under which if-tests (hasattr is False when none of them runs)
                        entry = [self._qual("")[:-1], [list(x) for x in self.tests]]
                        into = cls["assigned_at"].setdefault(attr, [])
                        if entry not in into:
                            into.append(entry)
            attr = self_attr(node.targets[0]) if len(node.targets) == 1 else None
            if attr and isinstance(node.value, FLAG_VALUES):
                self._self_flag(cls, attr, node.value)  # self.use_x = n_group == 1
        self._made_into(node, cls)

    def _module_assign(self, node: ast.Assign) -> None:
        """A module-level assignment (what a name of the module is), or a class body's: a registry's empty dict, a
        class attribute, a field's default (``ready: bool = False``)."""
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return
        name, src = node.targets[0].id, ast.unparse(node.value)
        cls = self._enclosing_class()
        if not self.scope:
            self.assigns[name] = src
        elif cls is not None and src in EMPTY_DICTS:
            cls["registries"].append(name)
        if cls is not None and self.scope[-1][0] == "class":
            cls["assigned_at"].setdefault(name, []).append([None, []])  # a class attribute: what hasattr finds
            if class_constant(node.value):
                cls["flags"].setdefault(name, []).append([src, None, []])
            made = factory_call(node.value)
            if made:  # prefill: PhaseConfig = field(default_factory=lambda: PhaseConfig(backend=...))
                cls.setdefault("factories", {})[name] = made

    def _note_targets(self, node: ast.Assign) -> None:
        """What a function's assignment binds: its names (assigned before a later if-test), a ``global`` it rebinds,
        the keys a local dict literal may hold (``kw = {"a": 1} if c else {}``), a registry it stores into."""
        assert self.fn is not None
        for t in node.targets:
            for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(el, ast.Name):
                    self.fn.setdefault("_assigned", set()).add(el.id)
            if isinstance(t, ast.Name) and t.id in self.fn.get("_globals", ()):
                self.rebound.setdefault(t.id, []).append(self._qual("")[:-1])  # global x; x = ...
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                self._mutates(t.value.id)  # _TABLE[name] = cls
            if isinstance(t, ast.Name):
                branches = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
                dicts = self.fn.setdefault("_dicts", {})
                pairs = [dict_pairs(b) for b in branches]
                if None not in pairs and len(pairs) == 2:  # d = dict(a=1) if c else {}: a key one branch lacks may
                    # not be passed at all, so its value is not known ("?"), not the other branch's
                    pairs = [{k: v if all(k in p for p in pairs) else "?" for k, v in p.items()} for p in pairs]
                dicts[t.id] = None if None in pairs or (t.id in dicts and dicts[t.id] is None) \
                    else merged_dicts(dicts.get(t.id) or {}, *pairs)
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                self._dict_store(t.value.id, t.slice, node.value)
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id not in ("self", "cls"):
                # another object's attribute (forward_batch.mha_one_shot = True): a value its class's field may hold
                into = self.fn.setdefault("sets", {}).setdefault(t.attr, [])
                entry = [t.value.id, ast.unparse(node.value), [list(x) for x in self.tests]]
                if entry not in into:
                    into.append(entry)
            if isinstance(t, ast.Subscript) and expr_text(t.value):
                self.fn["stores"].append(expr_text(t.value))  # REGISTRY[key] = fn: a registration

    def _dict_store(self, name: str, key: ast.expr, value: ast.expr | None) -> None:
        """``d[key] = value`` (``value`` None: ``d.update(...)`` with ``key`` its argument) on a local dict literal:
        the keys it may now hold. A constant key, or a loop's variable over a literal list of strings (``for k in
        ["a", "b"]: d[k] = ...``), adds its keys; any other store leaves the keys unknown."""
        dicts = self.fn.get("_dicts", {}) if self.fn is not None else {}
        if dicts.get(name) is None:
            return
        if value is None:
            added = dict_pairs(key)
        elif isinstance(key, ast.Constant) and isinstance(key.value, str):
            added = {key.value: ast.unparse(value)}
        elif isinstance(key, ast.Name) and key.id in self.iters:
            try:
                keys = ast.literal_eval(self.iters[key.id])
            except (ValueError, SyntaxError):
                keys = None
            ok = isinstance(keys, (list, tuple)) and all(isinstance(k, str) for k in keys)
            added = {k: "?" for k in keys} if ok else None
        else:
            added = None
        dicts[name] = None if added is None else merged_dicts(dicts[name], added)

    def _unpacked(self, target: ast.Tuple, value: ast.expr, cls: dict[str, Any] | None) -> None:
        """``a, mode, b = state``: each name (or ``self`` attribute: ``self.ep_size, rank = get_ep_world_rank()``) is
        a flag whose value is one element of what it unpacks (``state[1]``), which the call graph follows into the
        tuple a call returns or a caller passes."""
        if any(isinstance(el, ast.Starred) for el in target.elts):
            return
        for i, el in enumerate(target.elts):
            element = ast.Subscript(value=value, slice=ast.Constant(i), ctx=ast.Load())
            attr = self_attr(el)
            if isinstance(el, ast.Name):
                self._flag(el.id, ast.unparse(element))
            elif attr and cls is not None:
                self._self_flag(cls, attr, element)

    def _self_flag(self, cls: dict[str, Any], attr: str, value: ast.expr) -> None:
        """A flag if-tests read as ``self.attr``, with the method that assigns it and the if-tests it is assigned
        under (the call graph keeps the assignments its walk can make)."""
        entry = [inline_flags(value, self.fn["flags"]), self._qual("")[:-1], [list(x) for x in self.tests]]
        into = cls["flags"].setdefault(attr, [])
        if entry not in into:
            into.append(entry)

    def _made_into(self, node: ast.Assign, cls: dict[str, Any] | None) -> None:
        """The objects an assignment may make (see ``syntax.made_values``), as a local's or a ``self`` attribute's values."""
        made = made_values(node.value)
        if not made:
            return
        where = self._qual("")[:-1]  # the assigning function, whose locals and parameters the value reads
        for t in node.targets:
            for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                tests = [list(x) for x in self.tests]
                attr = self_attr(el)
                if attr and cls is not None:
                    into = cls["attrs"].setdefault(attr, [])
                    into.extend(e for e in ([a, where, tests + more + branch] for m, more in made
                                            for a, branch in self._abs_all(m)) if e not in into)
                elif isinstance(el, ast.Name):
                    into = self.fn["locals"].setdefault(el.id, [])
                    into.extend(e for e in ([a, tests + more + branch] for m, more in made
                                            for a, branch in self._abs_all(m)) if e not in into)

    def _flag(self, name: str, src: str) -> None:
        """A flag an if-test reads, with every value it is given (decided where they all agree), and in order with
        the if-tests each is assigned under."""
        assert self.fn is not None
        if name not in self.fn["flags"] and self.tests and name in self.fn["params"]:
            # a parameter reassigned only under an if-test still holds the caller's value where the test fails
            self.fn["flags"][name] = [name]
            self.fn.setdefault("assigned", {})[name] = [[name, []]]
        self.fn["flags"].setdefault(name, [])
        if src not in self.fn["flags"][name]:
            self.fn["flags"][name].append(src)
        self.fn.setdefault("assigned", {}).setdefault(name, []).append([src, [list(x) for x in self.tests]])

    def _mutates(self, name: str) -> None:
        """The function changes the object a name holds: a module-level one, when the function has assigned no
        local of that name and has no such parameter; else its own."""
        assert self.fn is not None
        if name not in self.fn.get("_assigned", ()) and name not in self.fn.get("params", ()):
            self.mutated.setdefault(name, []).append(self._qual("")[:-1])
        else:  # a local collection filled after it is made (out = {}; out["k"] = v): its literal is not its value
            self.fn.setdefault("_mutated", set()).add(name)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" and it.args \
                and isinstance(node.target, ast.Tuple) and len(node.target.elts) == 2:
            it, target = it.args[0], node.target.elts[1]  # for i, layer in enumerate(self.layers)
        else:
            target = node.target
        text = expr_text(it)
        if self.fn is not None and text and isinstance(target, ast.Name):
            into = self.fn["locals"].setdefault(target.id, [])
            entry = [text, [list(x) for x in self.tests]]
            if entry not in into:
                into.append(entry)
        saved = dict(self.iters)
        if isinstance(node.target, ast.Name):
            self.iters[node.target.id] = ast.unparse(node.iter)  # for i in range(n): i is each of range(n)
        self.fors.append(ast.unparse(node.iter))
        self._loop(node)
        self.fors.pop()
        self.iters = saved

    visit_AsyncFor = visit_For

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        ann = annotation_text(node.annotation)
        cls = self._enclosing_class()
        if ann is None and node.value is None and cls is not None:
            # a field of a builtin type and no default (``decode: str`` in a struct): it holds what constructions pass
            ann = f"{(dotted_name(node.annotation) or 'object').split('.')[-1]}()"
        if ann and cls is not None:
            t = node.target
            if self.fn is None and isinstance(t, ast.Name) and self.scope and self.scope[-1][0] == "class":
                cls["attrs"].setdefault(t.id, []).append([ann, None, []])  # a dataclass field: backend: Backend
            elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                cls["attrs"].setdefault(t.attr, []).append([ann, None, []])
        if node.value is not None:
            self.visit_Assign(ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno))

    def visit_Return(self, node: ast.Return) -> None:
        self.generic_visit(node)
        if self.fn is None or node.value is None:
            return
        v = node.value
        branches = [(v.body, [[ast.unparse(v.test), True]]), (v.orelse, [[ast.unparse(v.test), False]])] \
            if isinstance(v, ast.IfExp) else [(v, [])]
        for v, more in branches:
            text = expr_text(v)
            for a, branch in self._abs_all(text) if text else []:
                self.fn["returns"].append([a, [list(t) for t in self.tests] + more + branch])
        # the whole expression, for a predicate an if-test calls (return getattr(m.kv_b_proj, "set_lora", False)); a
        # return inside a for loop runs only when the loop has something to go over
        self.fn["values"].append([ast.unparse(node.value), [list(t) for t in self.tests]
                                  + [[f"len({it}) > 0", True] for it in self.fors]])
        # a factory that hands its own parameter on (return super().get_builder(layer_type)): the call with that
        # parameter named, so a caller's constant argument can be carried through it
        v = node.value
        params = set(self.fn.get("params", []))
        if isinstance(v, ast.Call) and v.args and all(isinstance(a, ast.Name) and a.id in params or is_const(a)
                                                      for a in v.args) and not v.keywords \
                and any(isinstance(a, ast.Name) and a.id in params for a in v.args):
            inner = expr_text(v.func)
            if inner:
                self.fn["forwards"].append([self._abs(inner), [ast.unparse(a) for a in v.args]])

    def _keywords(self, node: ast.Call) -> dict[str, str]:
        """A call's keyword arguments' sources. ``**kw`` of a local dict whose keys are known (see ``_dict_store``)
        passes those keys, each with its value's source ("?" where it is not one, and then the dict's name under
        "**known"); any other ``**kw`` is kept under the key "**": any parameter not passed by position may be in
        it."""
        assert self.fn is not None
        out: dict[str, str] = {}
        for k in node.keywords:
            keys = self.fn.get("_dicts", {}).get(k.value.id) if k.arg is None and isinstance(k.value, ast.Name) \
                else None
            if k.arg:
                out[k.arg] = ast.unparse(k.value)
            elif keys is not None:
                out.update(keys)
                if "?" in keys.values():  # (a key one branch may lack: the call graph reads the dict there)
                    out["**known"] = k.value.id
            else:
                out["**"] = ast.unparse(k.value)
        return out

    def visit_Call(self, node: ast.Call) -> None:
        saved = dict(self.iters)
        if node.args and not isinstance(node.args[0], ast.Lambda):
            # make_layers(n, lambda idx, prefix: Layer(idx)): the builder's first parameter is each of range(n)
            for a in list(node.args[1:]) + [k.value for k in node.keywords]:
                if isinstance(a, ast.Lambda) and a.args.args:
                    self.iters[a.args.args[0].arg] = f"range({ast.unparse(node.args[0])})"
        self.generic_visit(node)
        self.iters = saved
        if self.fn is None:
            return
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "__init__" and isinstance(f.value, ast.Call) \
                and isinstance(f.value.func, ast.Name) and f.value.func.id == "super":
            # super().__init__(..., layer_type=MyLayer): what a subclass hands its base's constructor
            for k in node.keywords:
                text = expr_text(k.value) if isinstance(k.value, (ast.Name, ast.Attribute)) else None
                if k.arg and text:
                    self.fn["super_kwargs"][k.arg] = self._abs(text)
        if isinstance(f, ast.Attribute) and f.attr == "update" and isinstance(f.value, ast.Name) \
                and len(node.args) == 1 and not node.keywords:
            self._dict_store(f.value.id, node.args[0], None)  # d.update(dict(a=1)): more keys
        if isinstance(f, ast.Attribute) and f.attr in _MUTATORS and isinstance(f.value, ast.Name):
            self._mutates(f.value.id)
        callee = self._abs(callee_text(node.func))
        if callee:
            # with its arguments' sources (None when one is starred), so that a callee's parameter can be traced
            # to what the callers on the default path pass
            starred = any(isinstance(a, ast.Starred) for a in node.args)
            self.fn["calls"].append([callee, [list(t) for t in self.tests], self.loops > 0, node.lineno,
                                     None if starred else [ast.unparse(a) for a in node.args],
                                     self._keywords(node)])
        name = dotted_name(node.func) or ""
        if (name.split(".")[-1][:1].isupper() or name in self.fn["params"]) \
                and not any(isinstance(a, ast.Starred) for a in node.args):
            # a constructor call's arguments (a class by name, or one handed in: layer_type(i)), so that what an
            # instance's __init__ stores can be traced to them
            args = list(node.args) + [k.value for k in node.keywords]
            self.fn["constructs"].append([name, [ast.unparse(a) for a in node.args],
                                          self._keywords(node),
                                          {a.id: self.iters[a.id] for a in args
                                           if isinstance(a, ast.Name) and a.id in self.iters},
                                          [list(t) for t in self.tests]])


def file_facts(relpath: str, data: bytes, modname: str) -> dict[str, Any]:
    """The call facts of one file, or ``{"path", "error"}`` when it does not parse."""
    try:
        tree = ast.parse(data, filename=relpath)
    except (SyntaxError, ValueError) as exc:
        return {"path": relpath, "error": str(getattr(exc, "msg", None) or exc)}
    v = _Visitor(modname, relpath.endswith("__init__.py"))
    v.visit(tree)
    package = relpath.endswith("__init__.py")
    stars = [from_module(n, modname, package) for n in tree.body if isinstance(n, ast.ImportFrom)
             and any(a.name == "*" for a in n.names)]
    # a module-level call that hands a function over with a key: Registry.register("fa3", handle_fa3)
    registers = [[callee, keys, names] for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
                 for callee in [dotted_name(n.value.func)]
                 for keys in [[a.value for a in n.value.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]]
                 for names in [[a.id for a in n.value.args if isinstance(a, ast.Name)]] if callee and keys and names]
    return {"path": relpath, "module": modname, "stars": [m for m in stars if m],
            "imports": collect_imports(tree, modname, package), "registers": registers,
            "assigns": v.assigns, "rebound": v.rebound, "mutated": v.mutated, "classes": v.classes,
            "functions": v.functions}


_MUTATORS = ("append", "extend", "insert", "add", "update", "setdefault", "pop", "remove", "clear", "discard")
# the source of a collection display or an empty one made by its type ({}, [k], (a, *b), dict(), set())
_COLLECTION = re.compile(r"[\[{(]|(?:dict|list|set|tuple|collections\.defaultdict|defaultdict)\(")
