"""A target's modules for the call graph: parsed on demand, the first time a call resolves into one, behind a
content-hash cache; and the model class a preset's architecture name picks."""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from typing import Any, Iterable

from smithbot import cache
from smithbot.program.facts import file_facts

FACTS_VERSION = "66"
# a class-level declaration of an environment variable with its default: `    SGLANG_X = EnvBool(False)`
_ENV_DECL = re.compile(rb"^[ \t]+([A-Z][A-Z0-9_]+)\s*(?::[^=\n]+)?=\s*(Env\w*\(.*\))[ \t]*(?:#.*)?$", re.M)
# a getter in a module-level dict of environment variables: `    "VLLM_X": lambda: bool(int(os.getenv(...)))`
_ENV_LAMBDA = re.compile(rb'^[ \t]+"[A-Z][A-Z0-9_]*_[A-Z0-9_]+":\s*lambda\s*:', re.M)


class Program:
    """The target's modules, parsed on demand, behind a content-hash cache."""

    def __init__(self, texts: dict[str, bytes], modules: dict[str, str], cache_dir: Path | None) -> None:
        self.texts, self.modules, self.cache_dir = texts, modules, cache_dir  # modules: module name -> path
        self._facts: dict[str, dict[str, Any] | None] = {}
        # setting values -> table name -> (decorator keys, function) registered into it (see _Resolver.registered)
        self.registrations: dict[frozenset[str], dict[str, list[tuple[tuple[str, ...], tuple]]]] = {}
        self._env: dict[str, str] | None = None
        self._getters: dict[str, tuple[str, str]] | None = None
        self._defined: dict[str, bool] = {}  # a method name -> whether some file defines it
        self._at_import: dict[str, bool] = {}  # a function name -> whether some file calls it at import
        self._assigning: dict[tuple[str, str], list[str]] = {}  # (name, string) -> the modules with a line assigning it
        self._fields: dict[tuple[str, str], dict[str, Any]] = {}
        self.glue: dict[str, dict[str, list[dict[str, Any]]]] = {}  # path -> function -> glue runs (scan.glue)
        # (module, decorator) -> whether it leads to torch.compile (scan.fusion), asked for every function reached
        self.compiling: dict[tuple[str, str], bool] = {}

    def facts(self, module: str) -> dict[str, Any] | None:
        if module in self._facts:
            return self._facts[module]
        rel = self.modules.get(module)
        out = None
        if rel is not None:
            data = self.texts[rel]
            key = hashlib.sha256(f"{FACTS_VERSION}|{module}|".encode() + data).hexdigest()
            path = self.cache_dir / key[:2] / f"{key}.json" if self.cache_dir else None
            out = cache.load(path)
            if out is None:
                out = file_facts(rel, data, module)
                cache.store(path, out)
            if "error" in out:
                out = None
        self._facts[module] = out
        return out

    def parsed_count(self) -> int:
        """How many modules have been looked up so far (parsed, or found missing)."""
        return len(self._facts)

    def parsed(self) -> list[tuple[str, dict[str, Any]]]:
        """The modules parsed so far, with their facts."""
        return [(m, f) for m, f in self._facts.items() if f is not None]

    def defines_method(self, name: str) -> bool:
        """Whether some file of the target defines a method or function ``name`` (an indented ``def name(``)."""
        if name not in self._defined:
            pattern = re.compile(rb"\n[ \t]+(?:async[ \t]+)?def[ \t]+" + re.escape(name.encode()) + rb"[ \t]*\(")
            self._defined[name] = any(pattern.search(data) for data in self.texts.values() if name.encode() in data)
        return self._defined[name]

    def assigning(self, name: str, value: str) -> list[str]:
        """The modules with a line that assigns ``name`` the string ``value`` (``model_type = "deepseek_v3"``, a
        class attribute or not), read from the text."""
        if (name, value) not in self._assigning:
            pattern = re.compile(rb"(?m)^[ \t]*" + re.escape(name.encode()) + rb"[ \t]*(?::[^=\n]*)?=[ \t]*['\"]"
                                 + re.escape(value.encode()) + rb"['\"][ \t]*(?:#.*)?$")
            module_of = {path: m for m, path in self.modules.items()}
            self._assigning[(name, value)] = sorted(
                module_of[rel] for rel, data in self.texts.items()
                if rel in module_of and value.encode() in data and pattern.search(data))
        return self._assigning[(name, value)]

    def called_at_import(self, name: str) -> bool:
        """Whether some file of the target calls ``name`` at import: a line at the module's top level that calls it,
        or a decorator line with it, a class body's too (``register_parser("hf")``, ``@register_parser("hf")``,
        ``@add_spec``). Read from the text."""
        if name not in self._at_import:
            word = re.escape(name.encode())
            pattern = re.compile(rb"(?m)^(?:[ \t]*@(?:[\w.]+\.)?" + word + rb"\b|(?:[\w.]+\.)?" + word + rb"[ \t]*\()")
            self._at_import[name] = any(pattern.search(data) for data in self.texts.values() if name.encode() in data)
        return self._at_import[name]

    def env_declarations(self) -> dict[str, str]:
        """The environment variables an engine declares in a registry class, with the default its code gives each
        (``SGLANG_OPT_USE_TOPK_V2 = EnvBool(True)`` -> ``True``): what ``envs.SGLANG_OPT_USE_TOPK_V2.get()`` reads
        when the user sets nothing."""
        if self._env is None:
            self._env = {}
            for data in self.texts.values():
                if b"= Env" not in data:
                    continue
                for m in _ENV_DECL.finditer(data):
                    try:
                        call = ast.parse(m.group(2).decode(), mode="eval").body
                    except (SyntaxError, UnicodeDecodeError):
                        continue
                    if not isinstance(call, ast.Call):
                        continue
                    arg = call.args[0] if call.args else next((k.value for k in call.keywords
                                                               if k.arg == "default"), None)
                    if isinstance(arg, ast.Constant):
                        self._env.setdefault(m.group(1).decode(), ast.unparse(arg))
        return self._env

    def env_getters(self) -> dict[str, tuple[str, str]]:
        """The environment variables an engine declares as a module-level dict of getters (vLLM's ``envs.py``:
        ``"VLLM_X": lambda: bool(int(os.getenv("VLLM_X", "0")))``, which the module's ``__getattr__`` calls for
        ``envs.VLLM_X``), each with its module and the getter's body, to be evaluated there."""
        if self._getters is None:
            self._getters = {}
            module_of = {path: m for m, path in self.modules.items()}
            for rel, data in self.texts.items():
                if rel not in module_of or b"lambda" not in data or not _ENV_LAMBDA.search(data):
                    continue
                try:
                    tree = ast.parse(data)
                except (SyntaxError, ValueError):
                    continue
                for node in tree.body:
                    table = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
                    for k, v in zip(*((table.keys, table.values) if isinstance(table, ast.Dict) else ((), ()))):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Lambda) \
                                and not v.args.args:
                            self._getters.setdefault(k.value, (module_of[rel], ast.unparse(v.body)))
        return self._getters

    def field_defaults(self, module: str, cls: str) -> dict[str, Any]:
        """The literal defaults a class declares for its fields (``page_size: int = 1``, ``x: A[bool, "..."] =
        False``, ``field(default=8)``): an engine's documented arguments. Fields without one are left out, and so is
        a None default that the class's own methods assign (resolved later by the engine's logic, as
        ``attention_backend`` in ``__post_init__``); a None default no method assigns holds (``dllm_algorithm``)."""
        if (module, cls) in self._fields:
            return self._fields[(module, cls)]
        rel = self.modules.get(module)
        key = hashlib.sha256(f"{FACTS_VERSION}|fields|{module}|{cls}|".encode() + self.texts.get(rel or "", b""))
        path = self.cache_dir / "fields" / f"{key.hexdigest()}.json" if self.cache_dir else None
        hit = cache.load(path)
        if isinstance(hit, dict):
            self._fields[(module, cls)] = hit
            return hit
        try:
            tree = ast.parse(self.texts[rel]) if rel else None
        except (SyntaxError, ValueError):
            tree = None
        out: dict[str, Any] = {}
        for node in (tree.body if tree else []):
            if not (isinstance(node, ast.ClassDef) and node.name == cls):
                continue
            assigned = {t.attr for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                        for n in ast.walk(f) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
            for stmt in node.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value):
                    continue
                value = stmt.value
                if isinstance(value, ast.Call) and value.keywords and (_leaf(value.func) == "field"):
                    value = next((k.value for k in value.keywords if k.arg == "default"), value)
                try:
                    literal = ast.literal_eval(value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
                if isinstance(literal, (bool, int, float, str)) or (literal is None
                                                                    and stmt.target.id not in assigned):
                    out[stmt.target.id] = literal
        self._fields[(module, cls)] = out
        cache.store(path, out)
        return out

    def split(self, dotted: str) -> tuple[str, str] | None:
        """(module, rest) for the longest module prefix of an absolute dotted name."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            mod = ".".join(parts[:i])
            if mod in self.modules:
                return mod, ".".join(parts[i:])
        return None

    def find_class(self, name: str, paths: Iterable[str]) -> tuple[str, str] | None:
        """(module, qualname) of the model class an architecture name picks, in the files under ``paths``: the
        class of that name, else the one an engine's table maps the name to
        (``'DeepseekV3ForCausalLM': f'{PATH}.deepseek_v2.DeepseekV2ForCausalLM'``)."""
        paths = sorted(paths)
        by_path = {rel: mod for mod, rel in self.modules.items()}
        found = self._class_named(name, paths, by_path)
        if found is not None:
            return found
        entry = re.compile(rb"""['"]%s['"]\s*:\s*f?['"]([^'"]+)['"]""" % re.escape(name.encode()))
        for rel in paths:
            m = entry.search(self.texts.get(rel, b""))
            if m:
                parts = m.group(1).decode().split(".")
                leaf = f"/{parts[-2]}.py" if len(parts) > 1 else ""
                found = self._class_named(parts[-1], [p for p in paths if p.endswith(leaf)], by_path)
                if found is not None:
                    return found
        return None

    def _class_named(self, name: str, paths: list[str], by_path: dict[str, str]) -> tuple[str, str] | None:
        needles = (f"class {name}(".encode(), f"class {name}:".encode())
        for rel in paths:
            data = self.texts.get(rel, b"")
            if any(n in data for n in needles):
                f = self.facts(by_path[rel])
                if f is not None and name in f["classes"]:
                    return by_path[rel], name
        return None


def _leaf(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
