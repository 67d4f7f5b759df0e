"""task.yaml validation: every user mistake is one line naming the file and the key."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evaluator import TaskError, load_task
from tests.conftest import TASKS

BUNDLED = sorted(p.name for p in TASKS.iterdir() if (p / "task.yaml").is_file())


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_tasks_load(name: str) -> None:
    task = load_task(TASKS / name)
    assert task.id == name
    assert {c.regime for c in task.cases} == {"decode", "prefill"}
    assert task.seeds >= 3
    assert task.cases_for("interpreter")


def test_bundled_tasks_cover_the_required_features() -> None:
    tasks = [load_task(TASKS / n) for n in BUNDLED]
    assert len(tasks) >= 5
    assert any(t.kind == "fusion" for t in tasks)
    dtypes = {c.dtype for t in tasks for c in t.cases}
    assert {"fp32", "bf16"} <= dtypes
    sources = {t.id: t.kernel_path.read_text() for t in tasks}
    assert any("@triton.autotune" in s for s in sources.values())
    assert any(s.count("[grid]") + s.count("[(") >= 2 for s in sources.values())  # a launcher with two kernels


def _copy(tmp_path: Path, text: str) -> Path:
    dst = tmp_path / "task"
    shutil.copytree(TASKS / "rmsnorm", dst)
    (dst / "task.yaml").write_text(text)
    return dst


BASE = (TASKS / "rmsnorm" / "task.yaml").read_text()


@pytest.mark.parametrize("text, key, words", [
    (BASE.replace("entry: rmsnorm\n", ""), "entry", "missing required key"),
    (BASE + "colour: blue\n", "colour", "unknown key"),
    (BASE.replace("dtype: fp32", "dtype: float33", 1), "cases[4].dtype", "unknown dtype 'float33'"),
    (BASE.replace("hidden: 781", "hidden: -4"), "cases[6].dims.hidden", "positive integer, got -4"),
    (BASE.replace("hidden: 781", "hidden: 7.5"), "cases[6].dims.hidden", "positive integer"),
    (BASE.replace("kind: triton", "kind: cuda"), "kind", "must be one of triton, fusion"),
    (BASE.replace("seeds: 3", "seeds: 2"), "seeds", "at least 3 seeds"),
    (BASE.replace("regime: decode", "regime: warmup", 1), "cases[0].regime", "must be one of decode, prefill"),
    (BASE.replace("name: qwen3-8b-decode-bs64", "name: llama3-8b-decode-bs1"), "cases[1].name", "duplicate"),
    # a fusion task's glue: the line span a proposal replaces
    (BASE.replace("  commit: null\n", "  commit: null\n  glue: {path: a.py, function: f, lines: [9, 3]}\n"),
     "provenance.glue.lines", "must be [first, last]"),
    (BASE.replace("  commit: null\n", "  commit: null\n  glue: {path: a.py, lines: [3, 9]}\n"),
     "provenance.glue.function", "missing required key"),
])
def test_bad_task_yaml_names_file_and_key(tmp_path: Path, text: str, key: str, words: str) -> None:
    root = _copy(tmp_path, text)
    with pytest.raises(TaskError) as info:
        load_task(root)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{root / 'task.yaml'}: {key}: "), msg
    assert words in msg


def test_malformed_yaml(tmp_path: Path) -> None:
    root = _copy(tmp_path, "id: x\ncases: [unclosed\n")
    with pytest.raises(TaskError, match=r"task.yaml: line \d+: malformed YAML"):
        load_task(root)


def test_missing_directory_and_files(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="does not exist"):
        load_task(tmp_path / "nope")
    (tmp_path / "t").mkdir()
    with pytest.raises(TaskError, match="task.yaml: missing"):
        load_task(tmp_path / "t")


def test_kernel_needs_one_evolve_block(tmp_path: Path) -> None:
    root = _copy(tmp_path, BASE)
    (root / "kernel.py").write_text((root / "kernel.py").read_text().replace("# EVOLVE-BLOCK-END\n", ""))
    with pytest.raises(TaskError, match="EVOLVE-BLOCK"):
        load_task(root)


def test_a_glue_span_in_provenance_loads(tmp_path: Path) -> None:
    root = _copy(tmp_path, BASE.replace("  commit: null\n", "  commit: null\n  glue: {path: eng/m.py, function: "
                                        "B.f, lines: [3, 9], inputs: {seq_lens: fb.seq_lens}}\n"))
    glue = load_task(root).provenance.glue
    assert glue == {"path": "eng/m.py", "function": "B.f", "lines": [3, 9], "inputs": {"seq_lens": "fb.seq_lens"}}
