"""Depth: are the kernels default serving runs most correct on the GPU once extracted?

Take each target's top kernels by scan's default-path ranking, plus the kernels the Depth issue names, and extract
them as ``smithbot extract --top N`` does (self-checked on the GPU where there is one, else under the interpreter,
``--jobs`` at a time); the tasks and ``depth.json`` go under ``--keep DIR``:

    python benchmarks/depth.py sglang=/path/to/sglang lmdeploy=/path/to/lmdeploy engram=/path/to/DLBlas --keep depth

Then, on a GPU machine (torch and triton are enough), the evaluator runs each task's baseline against itself on every
case of the presets that run the kernel, and prints the table: kernel, presets, entry point, GPU-correct on every
case (or why not), and the baseline's fraction of the device's measured copy bandwidth per case (its memory
roofline, by the bytes the task's inputs and outputs hold):

    python benchmarks/depth.py --gpu depth [--jobs 6]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the kernels the Depth issue names, beside each target's top N
NAMED = {
    "sglang": ["fused_moe_kernel", "_fused_metadata_kernel_ps1_no_swa", "_fused_metadata_kernel_general",
               "act_quant"],
    "lmdeploy": ["add_rms_norm_kernel", "_fwd_grouped_split_kernel", "_fill_kv_cache_kernel",
                 "_silu_and_mul_moe_ep_kernel", "_moe_reduce_kernel", "apply_rotary_pos_emb_qk_kernel"],
    "engram": ["silu_and_mul"],
}


def extract(specs: list[str], keep: Path, top: int, check: bool, jobs: int) -> None:
    from smithbot import api
    from smithbot.config import ConfigError

    for arg in specs:
        name, _, path = arg.partition("=")
        t0 = time.perf_counter()
        out = keep / name
        result = api.scan(name, source=path or None)
        launched = [s for s in result.sites if s.role == "launched"]
        rank = {(s.path, s.name): i for i, s in enumerate(launched, 1)}
        rows = api.extract(name, None, out=out / "tasks", source=path or None, top=top, check=check, jobs=jobs)
        for kernel in NAMED.get(name, []):
            if kernel in {r.kernel for r in rows}:
                continue
            try:
                rows += api.extract(name, kernel, out=out / "tasks" / kernel.strip("_"), source=path or None,
                                    check=check, jobs=jobs)
            except ConfigError as exc:
                print(f"  {kernel}: {exc}")
        data, seen = [], set()
        for r in rows:
            if (r.path, r.kernel) in seen:  # a named kernel already among the top
                continue
            seen.add((r.path, r.kernel))
            site = next(s for s in launched if (s.path, s.name) == (r.path, r.kernel))
            task = yaml_load(r.out / "task.yaml") if r.out else {}
            skipped = [f"{s['name']}: {s['why']}" for s in task.get("skipped", [])]
            data.append({"kernel": r.kernel, "path": r.path, "rank": rank[(r.path, r.kernel)],
                         "presets": list(site.presets), "entry": task.get("entry", ""),
                         "extracted": r.extracted, "why": r.why, "skipped": skipped,
                         "interpreter": r.checked,
                         "harness": bool(r.out and (r.out / "harness.py").exists()),
                         "task": str(r.out.relative_to(out)) if r.out else None})
        (out / "depth.json").write_text(json.dumps(data, indent=1))
        print(f"{name}: {len(data)} kernels, {sum(d['extracted'] for d in data)} extracted in "
              f"{time.perf_counter() - t0:.0f} s")


def yaml_load(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())


def gpu(keep: Path, jobs: int, only: list[str], task_timeout: float = 420.0) -> None:
    from evaluator import EvalResult
    from evaluator.env import copy_bandwidth_gbps, fingerprint

    copy_gbps = copy_bandwidth_gbps(fingerprint("cuda"))
    for depth in sorted(keep.glob("*/depth.json")):
        name = depth.parent.name
        if only and name not in only:
            continue
        rows = json.loads(depth.read_text())
        verdict: dict[str, dict] = {}

        def run(task: str) -> None:
            d = depth.parent / task
            try:
                p = subprocess.run([sys.executable, "-m", "evaluator", str(d), str(d / "kernel.py"), "--backend",
                                    "cuda", "--rounds", "3", "--workers-per-gpu", "1", "--json"],
                                   capture_output=True, text=True, timeout=task_timeout, cwd=ROOT)
                lines = p.stdout.strip().splitlines()
                if lines:
                    res = EvalResult.from_dict(json.loads(lines[-1]))
                    verdict[task] = {"ok": res.correct, "why": res.why[:300], "launched": list(res.baseline_kernels),
                                     "cases": [{"name": c["name"], "us": c["base_us"],
                                                "fraction": c["base_gbps"] / copy_gbps} for c in res.cases]}
                else:
                    verdict[task] = {"ok": False, "why": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}
            except subprocess.TimeoutExpired:
                verdict[task] = {"ok": False, "why": f"timeout ({task_timeout:.0f} s)"}
            print(f"  {task}: {'ok' if verdict[task]['ok'] else verdict[task]['why']}", file=sys.stderr, flush=True)

        tasks = sorted({r["task"] for r in rows if r["harness"]})
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(run, tasks))
        crowded = [t for t in tasks if jobs > 1 and not verdict[t]["ok"] and verdict[t]["why"].startswith("oom")]
        for task in crowded:  # out of memory beside another task: again, alone on the GPU, and the table says so
            run(task)
            verdict[task]["alone"] = True
        print(f"\n### {name}: {len(rows)} kernels, GPU check in {time.perf_counter() - t0:.0f} s "
              f"(copy bandwidth {copy_gbps:.0f} GB/s)\n")
        print("| # | kernel | presets | entry | GPU-correct on every case | baseline bandwidth fraction per case |")
        print("|---|---|---|---|---|---|")
        for r in sorted(rows, key=lambda r: r["rank"]):
            v = verdict.get(r["task"] or "")
            if not r["extracted"]:
                r["gpu"], r["gpu_why"] = False, f"not extracted: {r['why'][:200]}"
            elif v is None:
                r["gpu"], r["gpu_why"] = False, "no inputs (no harness)"
            elif v["ok"] and r["kernel"] not in v["launched"]:
                r["gpu"], r["gpu_why"] = False, f"its task never launches it (it launches {', '.join(v['launched'])})"
            else:
                r["gpu"], r["gpu_why"] = v["ok"], "" if v["ok"] else v["why"]
                r["alone"] = bool(v.get("alone"))
            r["cases"] = v.get("cases", []) if v else []
            fractions = ", ".join(f"{c['name']} {c['fraction']:.2f}" for c in r["cases"]) if r["gpu"] else ""
            if r.get("skipped"):
                fractions += "; skipped: " + "; ".join(r["skipped"])
            print(f"| {r['rank']} | `{r['kernel']}` | {', '.join(r['presets']) or '-'} | `{r['entry'] or '-'}` | "
                  f"{'yes' if r['gpu'] else 'no: ' + r['gpu_why'].replace('|', '/')}"
                  f"{' (checked alone on the GPU)' if r.get('alone') else ''} | {fractions} |")
        depth.write_text(json.dumps(rows, indent=1))
        ok = sum(r["gpu"] for r in rows)
        print(f"\n{name}: {ok} of {len(rows)} GPU-correct on every case")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*", help="NAME=CHECKOUT (with --gpu: the targets to check, default all)")
    ap.add_argument("--keep", type=Path, default=Path("depth"), help="where the tasks and depth.json go")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--gpu", type=Path, metavar="DIR", help="check on the GPU the tasks extracted into DIR")
    ap.add_argument("--jobs", type=int, default=3, help="tasks self-checked at once (each evaluator has 3 workers a "
                                                           "GPU)")
    ap.add_argument("--task-timeout", type=float, default=420.0, help="with --gpu: seconds one task's check may take")
    ap.add_argument("--no-check", dest="check", action="store_false",
                    help="extract without the self-check (and so without the retries and branch tasks it leads to)")
    args = ap.parse_args()
    if args.gpu:
        gpu(args.gpu, args.jobs, args.targets, args.task_timeout)
    else:
        extract(args.targets, args.keep, args.top, args.check, args.jobs)


if __name__ == "__main__":
    main()
