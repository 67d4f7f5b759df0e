"""SEARCH/REPLACE and full-block edits, normalised hashing, and tune's libcst knobs."""

from __future__ import annotations

import pytest

from smithbot.evolve import edits, tune
from tests.evolve.helpers import TASKS

SILU = (TASKS / "silu_and_mul" / "kernel.py").read_text()
RMS = (TASKS / "rmsnorm" / "kernel.py").read_text()


def test_diff_applies_inside_the_block_only() -> None:
    resp = "<<<<<<< SEARCH\n    _rmsnorm_kernel[(x2.shape[0],)](x2, weight, out, x2.stride(0), out.stride(0), hidden, eps, " \
           "BLOCK=256, num_warps=4)\n=======\n    _rmsnorm_kernel[(x2.shape[0],)](x2, weight, out, x2.stride(0), " \
           "out.stride(0), hidden, eps, BLOCK=1024, num_warps=4)\n>>>>>>> REPLACE"
    child = edits.apply("diff", RMS, resp)
    assert "BLOCK=1024" in child and "BLOCK=256" not in child
    assert child.split(edits.EVOLVE_START)[0] == RMS.split(edits.EVOLVE_START)[0]


@pytest.mark.parametrize("response, why", [
    ("", "empty response"),
    ("I think you should use more warps.", "no SEARCH/REPLACE block"),
    ("<<<<<<< SEARCH\nnot in the program\n=======\nx = 1\n>>>>>>> REPLACE", "not in the EVOLVE-BLOCK"),
    ("<<<<<<< SEARCH\n    return out.view(x.shape)\n=======\n    return out.view(x.shape\n>>>>>>> REPLACE", "does not parse"),
    ("<<<<<<< SEARCH\n    return out.view(x.shape)\n=======\n    return out.view(x.shape)  # same\n>>>>>>> REPLACE",
     "changes nothing"),
])
def test_bad_diffs_are_edit_errors(response: str, why: str) -> None:
    with pytest.raises(edits.EditError, match=why):
        edits.apply("diff", RMS, response)


def test_full_block_and_truncation() -> None:
    block = edits.block_of(RMS).replace("BLOCK=256", "BLOCK=512")
    child = edits.apply("full", RMS, f"Here:\n```python\n{block}\n```\n")
    assert "BLOCK=512" in child and child.count(edits.EVOLVE_START) == 1
    with pytest.raises(edits.EditError, match="no fenced"):
        edits.apply("full", RMS, "```python\ndef f():\n    return 1\n")  # cut before the closing fence
    with pytest.raises(edits.EditError, match="unbalanced"):
        edits.apply("full", RMS, f"```python\n{edits.EVOLVE_START}\nx = 1\n```")


def test_hash_ignores_formatting_and_comments() -> None:
    assert edits.source_hash(RMS) == edits.source_hash(RMS.replace("    return out.view(x.shape)",
                                                                    "    return out.view( x.shape )  # hi"))
    assert edits.source_hash(RMS) != edits.source_hash(RMS.replace("BLOCK=256", "BLOCK=512"))


def test_search_replace_round_trip() -> None:
    child = tune.set_knobs(SILU, {k.id: k.domain[0] for k in tune.knobs(SILU)})
    sr = edits.to_search_replace(SILU, child)
    assert sr.count("<<<<<<< SEARCH") >= 1
    assert edits.apply("diff", SILU, sr) == child


def test_knobs_cover_launch_kwargs_tiles_and_autotune_configs() -> None:
    names = [(k.where.split(" in ")[0], k.name, k.value) for k in tune.knobs(RMS)]
    assert names == [("launch of _rmsnorm_kernel", "BLOCK", 256), ("launch of _rmsnorm_kernel", "num_warps", 4),
                     ("launch of _rmsnorm_kernel", "num_stages", None)]
    silu = tune.knobs(SILU)
    assert [(k.name, k.value) for k in silu] == [("BLOCK", 1024), ("num_warps", 4), ("BLOCK", 512), ("num_warps", 2),
                                                 ("BLOCK", 2048), ("num_warps", 8)]  # autotuned: no launch kwargs


def test_set_knobs_changes_only_those_nodes() -> None:
    ks = {k.name: k for k in tune.knobs(RMS)}
    child = tune.set_knobs(RMS, {ks["BLOCK"].id: 1024, ks["num_stages"].id: 2})
    changed = [(a, b) for a, b in zip(RMS.splitlines(), child.splitlines()) if a != b]
    assert len(RMS.splitlines()) == len(child.splitlines()) and len(changed) == 1
    assert changed[0][1].endswith("BLOCK=1024, num_warps=4, num_stages=2)")
    assert tune.set_knobs(RMS, {}) == RMS  # nothing chosen: byte for byte


def test_a_launch_setting_added_to_a_call_of_one_argument_a_line_gets_its_own_line() -> None:
    src = RMS.replace("# EVOLVE-BLOCK-END", "def launch2(x, out):\n    _rmsnorm_kernel[(1,)](\n        x,\n"
                      "        out,\n        BLOCK=256,\n    )\n\n\n# EVOLVE-BLOCK-END")
    ks = [k for k in tune.knobs(src) if "launch2" in k.where]
    child = tune.set_knobs(src, {next(k.id for k in ks if k.name == "num_warps"): 8})
    assert "        BLOCK=256,\n        num_warps=8,\n    )\n" in child


def test_tune_covers_a_small_space_before_it_is_exhausted() -> None:
    import random

    from evaluator import load_task
    from smithbot.evolve.proposers import Context, Exhausted, Parent, TuneProposer

    task = load_task(TASKS / "kv_cache_write")
    # Two knobs: num_warps (5 values) x num_stages (5 values, or "as written").
    source = ("import triton\n# EVOLVE-BLOCK-START\ndef f(x):\n    _k[(1,)](x, num_warps=4)\n"
              "# EVOLVE-BLOCK-END\n")
    parent = Parent(None, source)
    seen: set[str] = set()
    prop = TuneProposer()
    with pytest.raises(Exhausted, match="every one of the 30 configs"):
        for _ in range(40):
            p = prop.propose(Context(task, parent, rng=random.Random(len(seen)), seen=seen.__contains__))
            assert edits.source_hash(p.source) not in seen
            seen.add(edits.source_hash(p.source))
    assert len(seen) == 29  # every config but the parent's own


def test_config_dict_passed_as_double_star_is_the_knob() -> None:
    source = ('import triton\n# EVOLVE-BLOCK-START\ndef f(x, n):\n    config = {"num_warps": max(n // 256, 4)}\n'
              '    _k[(1,)](x, BLOCK=triton.next_power_of_2(n), **config)\n# EVOLVE-BLOCK-END\n')
    ks = tune.knobs(source)
    assert [(k.where, k.name, k.value) for k in ks] == [("{...} in f()", "num_warps", None)]  # no duplicate kwarg
    assert '{"num_warps": 2}' in tune.set_knobs(source, {ks[0].id: 2})
