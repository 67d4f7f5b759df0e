"""`smithbot run`'s markdown summary: each kernel's outcome, the GPU's busy share, and the calls no CUDA graph
captures (a host sync on the serving path is reported even when the kernel was searched)."""

from smithbot.job import summary_markdown


def test_the_summary_reports_host_bound_kernels_capture_failures_and_gpu_busy() -> None:
    rows = [
        {"kernel": "_router_kernel", "stage": "evolve", "best": None, "gpu_busy": None,
         "why": "host-bound: kernel 3% of the call (7.1 of 236.0 us on llama3-8b-decode-bs1); no CUDA graph captures "
                "it: kernel.py:57: n = int(lens.max().item()) (RuntimeError: x)",
         "capture_failures": ["llama3-8b-decode-bs1: kernel.py:57: n = int(lens.max().item()) (RuntimeError: x)"]},
        {"kernel": "act_quant", "stage": "proposed", "best": 1.25, "speedup": 1.24, "gpu_busy": 0.71,
         "where": "/tmp/out", "capture_failures": []},
    ]
    md = summary_markdown("sglang", rows)
    lines = md.splitlines()
    assert "| kernel | reached | best in search | verified | GPU busy | outcome |" in lines
    router = next(x for x in lines if x.startswith("| `_router_kernel`"))
    assert "| evolve | - | - | - | host-bound: kernel 3% of the call" in router
    act = next(x for x in lines if x.startswith("| `act_quant`"))
    assert "| proposed | 1.250x | 1.240x | 71% | /tmp/out |" in act
    assert lines[-1] == "- `_router_kernel`, llama3-8b-decode-bs1: kernel.py:57: n = int(lens.max().item()) " \
                        "(RuntimeError: x)"
    assert summary_markdown("sglang", rows[1:]).count("CUDA graph") == 0  # nothing to report without a failure
