"""LLM-written inputs, the last resort of DESIGN.md's input order: when the inputs could not be inferred, or the
baseline failed its self-check on them, and an LLM endpoint is configured (``--config FILE`` with an ``llm:``
section), the model writes ``harness.py``. It is accepted only if the baseline then passes its self-check; otherwise
the task keeps what it had and the failure is reported.

What the model writes is untrusted code: it is parsed and may import only torch and math, and it only ever runs inside
the evaluator's workers (child processes with a hard timeout and no secrets in their environment).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Callable

import jinja2
import yaml

from smithbot.config import load_evolve_config, templates_dir
from smithbot.llm import LLMClient
from smithbot.types import Check

SYSTEM = ("You write input generators for benchmarking Triton kernels: PyTorch code that builds valid, realistic "
          "arguments for a launcher. Reply with one ```python code block and nothing else.")
ALLOWED_IMPORTS = {"torch", "math"}
_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)


def harness_of(text: str) -> str:
    """The module in a reply, checked: it parses, defines ``make_inputs`` and imports only torch and math.
    Raises ValueError with a one-line reason."""
    blocks = _BLOCK.findall(text)
    code = max(blocks, key=len) if blocks else text
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"the reply is not Python ({exc.msg}, line {exc.lineno})") from None
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(
            node, ast.ImportFrom) else []
        bad = [n for n in names if n.split(".")[0] not in ALLOWED_IMPORTS]
        if bad or isinstance(node, ast.ImportFrom) and node.level:
            raise ValueError(f"the harness imports {', '.join(bad) or 'a relative module'}; only torch and math may be")
    if not any(isinstance(n, ast.FunctionDef) and n.name == "make_inputs" for n in tree.body):
        raise ValueError("the reply defines no make_inputs(case, generator)")
    return code.strip() + "\n"


def prompt(task_dir: Path, why: str, last: str = "") -> str:
    """The user prompt: the task's cases and kernel.py, why its inputs fail, and why the last answer was refused."""
    task = yaml.safe_load((task_dir / "task.yaml").read_text())
    harness = task_dir / "harness.py"
    current = harness.read_text() if harness.is_file() and "def make_inputs" in harness.read_text() else ""
    dims = sorted({d for c in task["cases"] for d in c["dims"]})
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir() / "prompts"),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("inputs.j2").render(entry=task["entry"], dims=dims, cases=task["cases"], why=why,
                                                current=current.strip(), last=last,
                                                kernel=(task_dir / "kernel.py").read_text())


def write_inputs(task_dir: Path, why: str, ask: Callable[[str, str], str], model: str,
                 check: Callable[[Path], Check], attempts: int = 2) -> tuple[bool, str]:
    """Ask for a harness up to ``attempts`` times, each time with the last failure; keep the first one on which
    ``check`` (the self-check) passes. Returns (accepted, why)."""
    harness = task_dir / "harness.py"
    before = harness.read_text() if harness.is_file() else None
    tried: list[str] = []
    for _ in range(attempts):
        try:
            code = harness_of(ask(SYSTEM, prompt(task_dir, why, tried[-1] if tried else "")))
        except (ValueError, RuntimeError) as exc:  # garbage, or the endpoint failed: reported, not raised
            tried.append(str(exc))
            continue
        harness.write_text(f'"""Inputs written by an LLM ({model}) and accepted because the baseline passed its '
                           f'self-check on them: review before trusting."""\n\n' + code)
        got = check(task_dir)
        if got.ok:
            return True, f"{got.why} (inputs written by the LLM {model})"
        tried.append(f"the baseline fails on them: {got.why}")
        if before is not None:
            harness.write_text(before)
        else:
            harness.unlink()
    return False, f"LLM-written inputs failed {len(tried)} time(s); last: {tried[-1][:300]}"


def asker(config_file: str | Path) -> tuple[Callable[[str, str], str], str]:
    """(ask(system, user) -> reply text, model name) from an evolve config's ``llm:`` section."""
    client = LLMClient(load_evolve_config(Path(config_file)).llm)
    model = client.llm.models[0].name

    def ask(system: str, user: str) -> str:
        text, *_ = client.ask(model, system, user)
        return text

    return ask, model
