"""Re-insertion as before/after data: only the changed definitions move, everything else stays byte for byte."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from evaluator import load_task
from smithbot import api
from smithbot.evolve import tune
from smithbot.propose.reinsert import ReinsertError, reinsert

# The upstream file: decorator forms, an alias the extractor rewrites, a method, and code around it all.
UPSTREAM = '''"""Upstream module: nothing here but the changed lines may move."""
import torch
import triton
import triton.language as tl
from triton.language import exp as _exp  # an alias the extractor rewrites to tl.exp

CONSTANT = 7  # untouched


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],
                 key=["n"])
@triton.jit
def _act_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n)
    tl.store(y_ptr + i, _exp(x), mask=i < n)


@triton.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
@triton.jit
def _scale_kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)


class Layer:
    """A layer whose method launches a kernel."""

    def forward(self, x):
        # a comment inside the method stays
        n = x.numel()
        _scale_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=256, num_warps=4)
        return x


def act(x):
    y = torch.empty_like(x)
    _act_kernel[lambda META: (triton.cdiv(x.numel(), META["BLOCK"]),)](x, y, x.numel())
    return y
'''

# The task's baseline, as the extractor writes it: the same definitions inside an EVOLVE-BLOCK, the alias rewritten.
BASELINE = ("import torch\nimport triton\nimport triton.language as tl\n\n# EVOLVE-BLOCK-START\n"
            + UPSTREAM.split("CONSTANT = 7  # untouched\n", 1)[1].replace("_exp(x)", "tl.exp(x)")
            + "\n\n# EVOLVE-BLOCK-END\n")


def _task(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "upstream"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "ops.py").write_text(UPSTREAM)
    task = tmp_path / "task"
    task.mkdir()
    (task / "kernel.py").write_text(BASELINE)
    (task / "harness.py").write_text("def make_inputs(case, generator):\n    return {}\n")
    defs = [{"name": n, "path": "pkg/ops.py", "qualname": q} for n, q in
            (("_act_kernel", "_act_kernel"), ("_scale_kernel", "_scale_kernel"), ("Layer", "Layer"), ("act", "act"))]
    (task / "task.yaml").write_text(yaml.safe_dump({
        "id": "fixture-act", "kind": "triton", "entry": "act", "provenance": {"repo": "x", "commit": None,
                                                                               "definitions": defs},
        "cases": [{"name": "c", "regime": "decode", "dtype": "fp32", "dims": {"n": 10}}]}))
    return task, repo


def _changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    import difflib

    sm = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines())
    return [(" | ".join(before.splitlines()[i1:i2]), " | ".join(after.splitlines()[j1:j2]))
            for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"]


@pytest.mark.parametrize("edit, expected", [
    # an autotune config list changed: only that decorator line moves
    (('triton.Config({"BLOCK": 64}, num_warps=2)', 'triton.Config({"BLOCK": 256}, num_warps=8)'),
     [('@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],',
       '@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=8), triton.Config({"BLOCK": 128}, num_warps=4)],')]),
    # a method's launch config changed (qualname Layer, the class holds it)
    (("BLOCK=256, num_warps=4)", "BLOCK=1024, num_warps=8)"),
     [("        _scale_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=256, num_warps=4)",
       "        _scale_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=1024, num_warps=8)")]),
    # a kernel body line next to a line the extractor rewrote: the upstream alias stays
    (("    x = tl.load(x_ptr + i, mask=i < n)\n", "    x = tl.load(x_ptr + i, mask=i < n, other=0.0)\n"),
     [("    x = tl.load(x_ptr + i, mask=i < n)", "    x = tl.load(x_ptr + i, mask=i < n, other=0.0)")]),
])
def test_only_the_changed_lines_move(tmp_path: Path, edit: tuple[str, str], expected: list) -> None:
    task_dir, repo = _task(tmp_path)
    cand = BASELINE.replace(*edit)
    assert cand != BASELINE
    r = reinsert(load_task(task_dir), cand, repo)
    after = (repo / "pkg" / "ops.py").read_text()
    assert _changed_lines(UPSTREAM, after) == expected and r.changed_files == ("pkg/ops.py",)
    assert "from triton.language import exp as _exp" in after and "_exp(x)" in after
    again = reinsert(load_task(task_dir), cand, repo)  # idempotent
    assert (repo / "pkg" / "ops.py").read_text() == after and again.changed_files == ()


def test_baseline_round_trips_and_helpers_are_added(tmp_path: Path) -> None:
    task_dir, repo = _task(tmp_path)
    assert reinsert(load_task(task_dir), BASELINE, repo).changed_files == ()
    assert (repo / "pkg" / "ops.py").read_text() == UPSTREAM
    helper = "@triton.jit\ndef _fast_exp(x):\n    return tl.exp2(x * 1.4426950408889634)\n\n\n"
    cand = BASELINE.replace("@triton.heuristics", helper + "@triton.heuristics").replace(
        "    x = tl.load(x_ptr + i, mask=i < n)\n", "    x = _fast_exp(tl.load(x_ptr + i, mask=i < n))\n")
    r = reinsert(load_task(task_dir), cand, repo)
    after = (repo / "pkg" / "ops.py").read_text()
    assert r.added == ("pkg/ops.py::_fast_exp",) and r.replaced == ("pkg/ops.py::_act_kernel",)
    assert after.index("def _act_kernel") < after.index("def _fast_exp") < after.index("@triton.heuristics")
    assert after.count("def _fast_exp") == 1 and "    x = _fast_exp(tl.load(x_ptr + i, mask=i < n))\n" in after
    reinsert(load_task(task_dir), cand, repo)
    assert (repo / "pkg" / "ops.py").read_text() == after  # idempotent, the helper is not added twice


def test_upstream_that_moved_on_stops_with_a_reason(tmp_path: Path) -> None:
    task_dir, repo = _task(tmp_path)
    (repo / "pkg" / "ops.py").write_text(UPSTREAM.replace("BLOCK=256, num_warps=4)", "BLOCK=512, num_warps=2)"))
    with pytest.raises(ReinsertError, match="pkg/ops.py::Layer: the candidate changes lines that differ upstream"):
        reinsert(load_task(task_dir), BASELINE.replace("BLOCK=256, num_warps=4)", "BLOCK=1024, num_warps=8)"), repo)
    (repo / "pkg" / "ops.py").write_text(UPSTREAM.replace("class Layer:", "class Renamed:"))
    with pytest.raises(ReinsertError, match="Layer is not defined in the target file any more"):
        reinsert(load_task(task_dir), BASELINE.replace("BLOCK=256, num_warps=4)", "BLOCK=1024, num_warps=8)"), repo)


def test_extracted_from_the_demo_then_reinserted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from smithbot.config import TARGETS_DIR

    monkeypatch.setenv("SMITHBOT_HOME", str(tmp_path / "home"))
    [row] = api.extract("demo", "rms_norm", out=tmp_path / "task", check=False)
    task = load_task(row.out)
    src = task.kernel_path.read_text()
    ks = {k.name: k for k in tune.knobs(src)}
    cand = tune.set_knobs(src, {ks["BLOCK"].id: 1024, ks["num_warps"].id: (2, 8)})
    upstream = tmp_path / "upstream"
    shutil.copytree(TARGETS_DIR / "demo", upstream)
    subprocess.run(["git", "init", "-q", str(upstream)], check=True)
    subprocess.run(["git", "-C", str(upstream), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(upstream), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"],
                   check=True)
    r = reinsert(task, cand, upstream)
    diff = subprocess.run(["git", "-C", str(upstream), "diff", "--stat"], capture_output=True, text=True).stdout
    assert r.changed_files == ("minengine/kernels/norm.py",) and "1 file changed, 1 insertion(+), 1 deletion(-)" in diff
    line = next(ln for ln in (upstream / "minengine/kernels/norm.py").read_text().splitlines() if "_rms_norm_kernel[" in ln)
    assert line.endswith("BLOCK=1024, num_warps=(2 if x.shape[0] <= 256 else 8))")


LAUNCHER = """\
@functools.lru_cache(maxsize=None)
def launch(x, out, scale):
    if _is_hip():  # another vendor's path
        return _hip_launch(x, out)
    n = x.shape[0]
    y = _exp(x) * scale
    if n % 2 == 0:
        _even[(n,)](
            y,
            out,
            num_warps=num_warps,
        )
    else:
        _odd[(n,)](
            y,
            out,
            num_warps=num_warps,
        )
    _finish[(n,)](out, num_stages=int(os.environ.get("STAGES", "2")))
    return out
"""
# the same definition as the extractor writes it: the cache decorator and the other vendor's branch dropped, the
# alias spelled out, the setting pinned to its default
EXTRACTED = (LAUNCHER.replace("@functools.lru_cache(maxsize=None)\n", "")
             .replace("    if _is_hip():  # another vendor's path\n        return _hip_launch(x, out)\n", "")
             .replace("_exp(x)", "tl.exp(x)").replace('int(os.environ.get("STAGES", "2"))', "2"))


def _second(text: str, old: str, new: str) -> str:
    cut = text.index("    else:\n")
    return text[:cut] + text[cut:].replace(old, new, 1)


@pytest.mark.parametrize("cand, expected", [
    # the second of two launches whose lines read the same (DLBlas silu_and_mul): it lands on the second
    (_second(EXTRACTED, "num_warps=num_warps,", "num_warps=8,"),
     _second(LAUNCHER, "num_warps=num_warps,", "num_warps=8,")),
    # a line the extractor rewrote (an alias spelled out), changed elsewhere: merged onto the upstream spelling
    (EXTRACTED.replace("tl.exp(x) * scale", "tl.exp(x) * scale * 2"),
     LAUNCHER.replace("_exp(x) * scale", "_exp(x) * scale * 2")),
    # a line inserted next to lines the extractor dropped (a decorator, another vendor's branch): they stay
    (EXTRACTED.replace("    n = x.shape[0]\n", "    n = x.shape[0]\n    assert n > 0\n"),
     LAUNCHER.replace("    n = x.shape[0]\n", "    n = x.shape[0]\n    assert n > 0\n")),
])
def test_each_extractor_rewrite_maps_back(cand: str, expected: str) -> None:
    from smithbot.propose.reinsert import _apply

    out = _apply(LAUNCHER.splitlines(), EXTRACTED.splitlines(), cand.splitlines(), "ops.py::launch")
    assert out == expected.splitlines()
    assert _apply(out, EXTRACTED.splitlines(), cand.splitlines(), "ops.py::launch") == out  # idempotent


def test_a_change_to_a_pinned_setting_is_refused_not_guessed() -> None:
    """The upstream line reads an environment variable the task pinned: no edit of the literal says what to do with
    the variable, so the re-insertion stops and names the line."""
    from smithbot.propose.reinsert import _apply

    cand = EXTRACTED.replace("num_stages=2)", "num_stages=3)")
    with pytest.raises(ReinsertError, match=r"ops.py::launch: the candidate changes lines that differ upstream "
                                            r"\('_finish\[\(n,\)\]\(out, num_stages=2\)'\)"):
        _apply(LAUNCHER.splitlines(), EXTRACTED.splitlines(), cand.splitlines(), "ops.py::launch")


def test_splice_re_emits_only_what_a_rewrite_changed() -> None:
    """The extractor's AST rewrites (a decorator dropped, an autotune's keywords inlined, a `global` removed, a test
    folded) leave every other line as the target wrote it: comments, layout and quotes."""
    import ast

    from smithbot.extract.splice import splice

    src = ('@functools.lru_cache(maxsize=None)\n@triton.autotune(configs=get_configs(), key=["N"],\n'
           '                 **kw)\ndef launch(x,   # the input\n           out):\n    """Doc."""\n'
           '    global _CACHE\n    n = x.shape[0]   # rows\n    if n > 4:\n        grid = (n, )\n'
           '    _k[grid](x, out,\n             num_warps=4)\n    return out\n')
    node = ast.parse(src).body[0]
    node.decorator_list = node.decorator_list[1:]
    node.decorator_list[0].keywords[2:] = [ast.keyword("warmup", ast.Constant(5))]
    node.body = [s for s in node.body if not isinstance(s, ast.Global)]
    node.body[2].test.comparators = [ast.Constant(8)]
    out = splice(src, node)
    assert out == src.replace("@functools.lru_cache(maxsize=None)\n", "").replace("**kw)", "warmup=5)").replace(
        "    global _CACHE\n", "").replace("if n > 4:", "if n > 8:")
    assert ast.dump(ast.parse(out).body[0]) == ast.dump(ast.parse(ast.unparse(node)).body[0])


def test_formatter_runs_only_on_files_that_were_clean(tmp_path: Path) -> None:
    from smithbot.config import Formatter
    from smithbot.propose.reinsert import run_formatters

    clean = "def f(x):\n    return g(x, BLOCK=32)\n"
    messy = "def f( x ):\n    return g(x,BLOCK=32)\n"
    (tmp_path / "a.py").write_text(clean.replace("BLOCK=32", "BLOCK=64 ,  num_warps=8"))  # the change, unformatted
    (tmp_path / "b.py").write_text(messy.replace("BLOCK=32", "BLOCK=64"))
    notes = run_formatters(tmp_path, ("a.py", "b.py"), (Formatter(("black", "-q")),), originals={"a.py": clean, "b.py": messy})
    assert (tmp_path / "a.py").read_text() == "def f(x):\n    return g(x, BLOCK=64, num_warps=8)\n"
    assert (tmp_path / "b.py").read_text() == messy.replace("BLOCK=32", "BLOCK=64")  # left alone
    assert notes == ["`b.py` was not `black`-clean before this change; it was left unformatted so that the diff holds "
                     "only the change"]
    # one tool that is two hooks (a formatter and its import sorting), not installed: said once
    missing = (Formatter(("no-such-formatter",)), Formatter(("no-such-formatter", "--select", "I")))
    assert run_formatters(tmp_path, ("a.py",), missing) == [
        "`no-such-formatter` is not installed here, so the changed files were not formatted with it"]


@pytest.mark.skipif(not os.environ.get("SMITHBOT_DLBLAS"), reason="set SMITHBOT_DLBLAS to a DLBlas checkout")
def test_dlblas_silu_and_mul_retuned_in_its_second_launch(tmp_path: Path) -> None:
    """The verified win the H200 lost: a tuned `num_warps=num_warps,` in the second of two launches whose lines read
    the same goes back onto that launch, and only that line changes."""
    import shutil

    checkout = tmp_path / "dlblas"
    shutil.copytree(os.environ["SMITHBOT_DLBLAS"], checkout, ignore=shutil.ignore_patterns(".git"))
    for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(checkout), *cmd], check=True)
    [row] = api.extract("engram", "silu_and_mul", source=str(checkout), out=tmp_path / "task", check=False)
    task = load_task(row.out)
    src = task.kernel_path.read_text()
    warps = [k for k in tune.knobs(src) if k.name == "num_warps"]
    cand = tune.set_knobs(src, {warps[-1].id: 8})
    before = (checkout / "dlblas/kernels/activation.py").read_text()
    r = reinsert(task, cand, checkout)
    after = (checkout / "dlblas/kernels/activation.py").read_text()
    assert r.replaced == ("dlblas/kernels/activation.py::silu_and_mul",)
    assert _changed_lines(before, after) == [("            num_warps=num_warps,", "            num_warps=8,")]
    assert after.index("num_warps=8,") > after.index("_silu_and_mul_no_align_kernel[grid](")


@pytest.mark.parametrize("head", [
    # first-party imports: the new one in module order among them
    "import os\n\nimport torch\n\nfrom pkg.kernels.activation import act\nfrom pkg.layers.norm import Norm\n",
    # only a relative import: a first-party section of its own before it
    "import torch\n\nfrom .utils import helper\n",
    # neither: after the last import
    "import math\n\nimport torch\n",
])
def test_the_new_import_goes_where_isort_puts_it(head: str) -> None:
    """The fused kernel's import lands where ``isort --profile black`` (the targets' setting) would put it, so a file
    that was isort-clean stays clean."""
    import isort

    from smithbot.propose.reinsert import add_import

    text = head + "\n\ndef f(x):\n    return helper(x)\n"
    assert isort.check_code(text, profile="black", known_first_party=["pkg"])
    patched = add_import(text, "pkg.kernels.fused_renorm", "renorm")
    assert "from pkg.kernels.fused_renorm import renorm\n" in patched
    assert isort.check_code(patched, profile="black", known_first_party=["pkg"]), patched


def test_the_fused_launcher_is_named_for_what_the_glue_computes(tmp_path: Path) -> None:
    from smithbot.propose.reinsert import launcher_name

    assert launcher_name("DefaultRouterNoauxTCImpl.renorm", ["topk_weights"], tmp_path, set()) == "fused_renorm"
    assert launcher_name("_renormalize", ["topk_weights"], tmp_path, set()) == "fused_renormalize"
    assert launcher_name("LlamaModel.forward", ["lens", "positions"], tmp_path, set()) == "fused_lens_positions"
    assert launcher_name("MoE.forwardTokens", ["x"], tmp_path, set()) == "fused_forward_tokens"
    # the glue's own file defines fused_moe: importing a launcher of that name would shadow it; a module clashes too
    assert launcher_name("fused_moe", ["out"], tmp_path, {"fused_moe", "torch"}) == "fused_moe_glue"
    (tmp_path / "fused_renorm.py").write_text("")
    assert launcher_name("Router.renorm", ["w"], tmp_path, set()) == "fused_renorm_glue"


FOLDED = """\
def init(self, batch, meta):
    meta.lens = batch.lens.to(torch.int32)
    if (
        self.cp_size > 1
        and batch.extend is not None
    ):
        # pad for the ranks
        pad = batch.extend - batch.real
        meta.max_k += pad

    meta.table = self.table[batch.idx, : meta.max_k]
    if batch.mode == 2:
        meta.two = 2
    else:
        # any other mode
        meta.two = 0
    return meta
"""


@pytest.mark.parametrize("test, value, expected", [
    # a multi-line test known true: its body, dedented, comment kept; the lines around as they were
    ("self.cp_size > 1 and batch.extend is not None", True,
     FOLDED.replace("""    if (
        self.cp_size > 1
        and batch.extend is not None
    ):
        # pad for the ranks
        pad = batch.extend - batch.real
        meta.max_k += pad
""", """    # pad for the ranks
    pad = batch.extend - batch.real
    meta.max_k += pad
""")),
    # known false with no else: the if goes
    ("self.cp_size > 1 and batch.extend is not None", False,
     FOLDED.replace(FOLDED[FOLDED.index("    if ("):FOLDED.index("\n\n    meta.table") + 1], "")),
    # known false with an else: the else's block, its comment kept
    ("batch.mode == 2", False,
     FOLDED.replace("""    if batch.mode == 2:
        meta.two = 2
    else:
        # any other mode
        meta.two = 0
""", """    # any other mode
    meta.two = 0
""")),
    # no if tests it: as written
    ("batch.mode == 3", True, FOLDED),
    # a body on the if's own line: as written
    ("batch.one", True, FOLDED.replace("    return meta\n", "    if batch.one: meta.two = 1\n    return meta\n")),
])
def test_the_engines_lines_kept_under_else_take_the_branch_the_test_takes_there(test: str, value: bool,
                                                                                 expected: str) -> None:
    """Under the fused call's `else:` the one folded test goes the other way, so its `if` is replaced by the branch
    taken there (a maintainer reads no test that cannot fail)."""
    import ast

    from smithbot.propose.reinsert import _taken

    source = expected if test == "batch.one" else FOLDED
    lines = source.splitlines(keepends=True)
    out = "".join(_taken(ast.parse(source), lines[1:], 2, test, value))
    assert lines[0] + out == expected
    ast.parse(expected)
