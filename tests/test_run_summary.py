"""`smithbot run`'s markdown summary: each kernel's outcome, the GPU's busy share, and the calls no CUDA graph
captures (a host sync on the serving path is reported even when the kernel was searched)."""

from smithbot.job import JobRow, _decided, summary_markdown
from smithbot.scan.fusion import FusionSite


def test_the_summary_reports_host_bound_kernels_capture_failures_and_gpu_busy() -> None:
    rows = [
        JobRow("_router_kernel", ["llama3-8b"], stage="evolve",
               why="host-bound: kernel 3% of the call (7.1 of 236.0 us on llama3-8b-decode-bs1); no CUDA graph captures "
                   "it: kernel.py:57: n = int(lens.max().item()) (RuntimeError: x)",
               capture_failures=["llama3-8b-decode-bs1: kernel.py:57: n = int(lens.max().item()) (RuntimeError: x)"]),
        JobRow("act_quant", ["deepseek-v3"], stage="proposed", best=1.25, speedup=1.24, gpu_busy=0.71, where="/tmp/out",
               us_per_step=30.0, measured_on="deepseek-v3"),
        JobRow("copy_kernel", ["deepseek-v3"], stage="extract", us_per_step=10.0, measured_on="deepseek-v3",
               skipped=True, why="at 93% of copy bandwidth (61 launches × 0.16 µs at deepseek-v3-decode-bs64): little "
                                 "left to gain"),
    ]
    rows[1].marks = [("extract", 0.0), ("measure", 30.0), ("search", 38.0), ("verify", 100.0), ("propose", 125.0),
                     ("end", 126.0)]
    md = summary_markdown("sglang", rows)
    lines = md.splitlines()
    assert ("| kernel | reached | µs/step (share of the measured part) | best in search | verified | GPU busy | "
            "seconds | outcome |") in lines
    router = next(x for x in lines if x.startswith("| `_router_kernel`"))
    assert "| evolve | - | - | - | - | - | host-bound: kernel 3% of the call" in router
    act = next(x for x in lines if x.startswith("| `act_quant`"))
    assert ("| proposed | 30.0 (75%, deepseek-v3) | 1.250x | 1.240x | 71% | extract 30, measure 8, search 62, verify 25, "
            "propose 1 | /tmp/out |") in act  # where the pick's time went
    copy = next(x for x in lines if x.startswith("| `copy_kernel`"))
    assert "| extract | 10.0 (25%, deepseek-v3) | - | - | - | - | at 93% of copy bandwidth" in copy
    assert lines[-1] == "- `_router_kernel`, llama3-8b-decode-bs1: kernel.py:57: n = int(lens.max().item()) " \
                        "(RuntimeError: x)"
    assert summary_markdown("sglang", rows[1:]).count("CUDA graph") == 0  # nothing to report without a failure


def test_a_short_total_time_goes_to_fewer_kernels_not_to_shares_too_small_to_use() -> None:
    """`run --top 3` with 100 s left after a cold scan: one kernel gets it all, rather than three 33 s shares, each
    too short for a cold GPU worker's self-check (on the H200 every pick then failed and nothing was extracted)."""
    from smithbot.job import MIN_KERNEL_S, kernel_share

    assert kernel_share(100.0, 3) == (100.0, 1)
    assert kernel_share(3 * MIN_KERNEL_S, 3) == (MIN_KERNEL_S, 3)  # enough for all: equal shares
    assert kernel_share(1000.0, 3) == (1000.0 / 3, 3)
    share, fit = kernel_share(2.5 * MIN_KERNEL_S, 3)
    assert fit == 2 and share == 1.25 * MIN_KERNEL_S
    assert kernel_share(20.0, 2) == (20.0, 1)  # below MIN_KERNEL_S one kernel still tries what is left


def _glue(line: int, tests: list[str]) -> FusionSite:
    return FusionSite("Batch.prepare", "eng.batch", "eng/batch.py", line, line + 2, ("mul", "add", "cumsum"), 3, (),
                      (), (), {"p": {"phases": ["decode"], "per_layer": False, "layers": None, "per_step": 3,
                                     "path": "Runner.step → Batch.prepare", "undecided": len(tests), "tests": tests,
                                     "inputs": {}}})


def test_possible_sites_are_picked_only_where_the_scan_decided_none_for_default_serving() -> None:
    said: list[str] = []
    default, possible = _glue(10, []), _glue(20, ["self.flag (eng/batch.py:19)"])
    assert (default.reach, possible.reach) == ("default", "possible")
    assert _decided([possible, default], "runs of glue", said.append) == [default]
    assert said[-1].startswith("not picked: 1 runs of glue") and "glue:Batch.prepare:20" in said[-1]
    assert _decided([possible], "runs of glue", said.append) == [possible]
    assert said[-1].startswith("no runs of glue decided for default serving: the picks are those it possibly runs")
