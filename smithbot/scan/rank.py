"""Link launches to kernels across files, classify each kernel and rank it by hotness, with the reasons.

Hotness is a sum of named terms in bits (one bit doubles a kernel's expected share of a step), so a maintainer can
see why a kernel is ranked where it is:
- measured share of GPU time from a profiler trace, when given, orders everything (``smithbot profile``);
- how surely the default serving path runs it (``scan.reach``: the call graph under the target's serving defaults):
  *default* when every if-test and dispatch on its path is decided for it, *possible* when some are left open (each
  one halves its weight: -1, and the tests are listed), *never* when no preset's path reaches it. Default kernels
  rank before possible ones, and possible ones before the rest;
- on such a path, in order: the phase (decode +2, every step runs it), the launches per step (log2 of the preset's
  layers for per-layer code), and the static work per launch read from the kernel's body (its memory operations,
  ``tl.dot`` and loops over a size argument);
- without a call graph: called from model or layer code, in a target hot path, on the CUDA dispatch branch, and the
  same static work;
- reachable only on a fallback branch (the serving defaults decide its if-test against it: ROCm, NPU...), or
  defined in a file named for other hardware (``serving.other_platforms``: ``ascend/``, ``..._rocm.py``): -6.
The kernel's name never weighs. Its family (``family_of``) is a label for tables, read from its name and path.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import defaultdict
from typing import Any

from smithbot import cache
from smithbot.config import Target
from smithbot.program.callgraph import OPEN_ODDS, Reach
from smithbot.program.evaluate import Env, evaluate
from smithbot.repo import home
from smithbot.scan.index import Indexed, matches
from smithbot.types import KernelSite, LaunchSite

Reaches = dict[tuple[str, str], dict[str, list[Reach]]]  # (module, kernel) -> preset -> one Reach per phase

# (family, keywords matched against the kernel name first, then its path), first match wins: a label for tables and
# reports, never a term of the hotness
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention metadata", ("metadata", "page_table", "cu_seqlens", "kv_indices", "kv_indptr", "seq_lens")),
    ("kv cache", ("kv_cache", "kvcache", "store_kv", "kv_buffer", "mem_cache", "kv_pool")),
    ("linear attention / ssm", ("mamba", "ssm", "gdn", "gated_delta", "fla", "linear_attn", "lightning",
                                "causal_conv", "conv1d", "recurrent", "chunk_")),
    ("rotary", ("rotary", "rope")),
    ("moe routing", ("topk", "top_k", "routing", "router", "align", "expert_count", "grouped_topk", "moe_sum")),
    ("moe compute", ("fused_moe", "moe", "expert")),
    ("attention", ("attention", "attn", "decode", "prefill", "extend", "flash", "mla")),
    ("sampling / speculative", ("sampl", "speculative", "eagle", "spec_", "logit", "penalt", "verify")),
    ("quantization", ("quant", "fp8", "int8", "w8a8", "fp4", "mxfp", "scale")),
    ("norms", ("rmsnorm", "rms_norm", "layernorm", "layer_norm", "norm")),
    ("activation", ("silu", "gelu", "swiglu", "act_and_mul", "activation", "softplus")),
    ("gemm / lora", ("gemm", "matmul", "lora", "sgmv", "bmm", "_mm_")),
)
_IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
DEFAULT_MODEL_PATHS = ("**/models/**", "**/layers/**", "**/model_executor/**", "**/nn/**")
REACH_ORDER = {"default": 0, "possible": 1, "never": 2, "": 2}


def family_of(name: str, path: str) -> str:
    for text in (name.lower(), path.lower()):
        for fam, words in FAMILIES:
            if any(w in text for w in words):
                return fam
    return "other"


def static_work(k: dict[str, Any]) -> tuple[float, str]:
    """Bits of work per launch read from a kernel's body, and how they were counted."""
    w = k.get("work") or {}
    memory, dots, loops = w.get("memory", 0), w.get("dots", 0), w.get("loops", 0)
    bits = math.log2(1 + memory) + (2.0 if loops else 0.0) + (1.0 if dots else 0.0)
    parts = [f"{memory} memory ops"] + (["a loop over a size"] if loops else []) + (["tl.dot"] if dots else [])
    return round(bits, 1), ", ".join(parts)


def _branch_kind(branches: list[dict[str, str]], env: Env, assigns: dict[str, str],
                 answers: dict[str, dict[str, Any]]) -> tuple[bool, bool, str, tuple[tuple[str, bool], ...]]:
    """(fallback_only, cuda_branch, description, decided) for a launch's enclosing if-tests, decided by the serving
    defaults: a test they decide against the branch makes the launch fallback-only; one the serving GPU decides for
    it (``is_cuda()``, ``not _is_hip``: evaluated through the engine's helpers) puts it on the CUDA branch.
    ``decided`` holds each test decided for the launch, with its value: the branch an extraction of it keeps.
    ``answers`` are the call graph's (test -> value, and whether the platform decided it); a test it did not answer
    is evaluated over the module's assignments."""
    fallback = cuda = False
    desc = []
    decided_for = []
    for b in branches:
        test, taken = b["test"], b["in"] == "body"
        got = answers.get(test)
        decided = got["value"] if got else evaluate(test, env, assigns.get)
        if decided is not None and decided != taken:
            fallback = True
        elif decided is not None:
            decided_for.append((test, taken))
            cuda = cuda or bool(got and got["platform"])
        desc.append(f"if {test}: [{b['in']}]")
    return fallback, cuda and not fallback, "; ".join(desc), tuple(decided_for) if not fallback else ()


def merged_answers(reached: list[Any]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """The call graph's answers (``PresetReach.answers``) over every preset and phase: a test's value where they
    all agree (else None), and whether the GPU decides it."""
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for pr in reached:
        for key, tests in pr.answers.items():
            for test, got in tests.items():
                values = {v for k, v in got.items() if k != "platform"}
                seen = out.setdefault(key, {}).setdefault(test, {"values": set(), "platform": False})
                seen["values"] |= values
                seen["platform"] |= bool(got.get("platform"))
    for tests in out.values():
        for got in tests.values():
            values = got.pop("values")
            got["value"] = values.pop() if len(values) == 1 else None
    return out


def link(idx: Indexed, target: Target, measured: dict[str, tuple[float, float]] | None = None,
         reaches: Reaches | None = None, layers: dict[str, int] | None = None,
         cuts: dict[tuple[str, str], str] | None = None,
         answers: dict[tuple[str, str], dict[str, dict[str, Any]]] | None = None) -> list[KernelSite]:
    """Every kernel with its launches, class and hotness. ``measured`` maps kernel names to (µs per step, share of
    the step's GPU time) from a profile and orders everything by share. ``reaches`` (from ``scan.reach``) ranks the
    kernels on the presets' default paths first; ``layers`` gives each preset's layer count for the reasons;
    ``cuts`` (module, function or kernel) -> the if-test decided against a call of it, the reason a kernel is never
    run."""
    env = target.serving.environment()  # decides each launch's if-tests
    by_path = {f["path"]: f["module"] for f in idx.facts}
    kernels: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    by_module = {f["module"]: f for f in idx.facts}
    for f in idx.facts:
        for k in f["kernels"]:
            kernels[(f["module"], k["name"])].append({**k, "path": f["path"], "module": f["module"]})

    launches: dict[tuple[str, str], list[LaunchSite]] = defaultdict(list)
    wrapper_names: dict[tuple[str, str], set[str]] = defaultdict(set)
    for f in idx.facts:
        for la in f["launches"]:
            key = _resolve_launch(la, f, kernels, by_module)
            if key is None:
                continue
            fb, cuda, desc, decided = _branch_kind(la["branches"], env, f.get("assigns", {}),
                                                   (answers or {}).get((f["module"], la["wrapper"]), {}))
            launches[key].append(LaunchSite(path=f["path"], line=la["line"], wrapper=la["wrapper"], grid=la["grid"],
                                            kwargs=tuple(la["kwargs"]), branch=desc, fallback_only=fb,
                                            cuda_branch=cuda, decided=decided))
            wrapper_names[key].add(la["wrapper"].split(".")[0])

    called_from_kernels = {c.split(".")[-1] for defs in kernels.values() for k in defs for c in k["calls"]}
    model_paths = target.hints.model_paths or DEFAULT_MODEL_PATHS
    wanted = {w.encode() for names in wrapper_names.values() for w in names}
    mentioned = _mentions(idx.texts, model_paths, wanted)
    sites = []
    for key, defs in kernels.items():
        for k in defs:
            off = (cuts or {}).get(key) or next(
                (why for la in launches.get(key, []) for why in [(cuts or {}).get((by_path.get(la.path, ""),
                                                                                  la.wrapper))] if why), "")
            sites.append(_site(k, launches.get(key, []), wrapper_names.get(key, set()), called_from_kernels,
                               mentioned, by_module, target, measured or {},
                               None if reaches is None else reaches.get(key, {}), layers or {}, off))
    sites.sort(key=lambda s: (-(s.measured_share or 0.0), REACH_ORDER[s.reach], -s.hotness, s.path, s.line))
    return sites


def _mentions(texts: dict[str, bytes], model_paths: tuple[str, ...], wanted: set[bytes]) -> dict[str, list[str]]:
    """Wrapper name -> the model and layer files that mention it, cached by those files' bytes and the names (a
    warm scan of sglang tokenised its 568 model files for a tenth of a second)."""
    files = [p for p in texts if matches(p, model_paths)]
    h = hashlib.sha1(b"\0".join(sorted(wanted)))
    for p in files:
        h.update(p.encode() + b"\0" + texts[p])
    path = home() / "cache" / "mentions" / f"{h.hexdigest()}.json"
    found = cache.load(path)
    if isinstance(found, dict):
        return defaultdict(list, found)
    mentioned: dict[str, list[str]] = defaultdict(list)
    for p in files:
        for tok in wanted.intersection(_IDENT.findall(texts[p])):
            mentioned[tok.decode()].append(p)
    cache.store(path, mentioned)
    return mentioned


def _resolve_launch(la: dict[str, Any], f: dict[str, Any], kernels: dict[tuple[str, str], list], by_module: dict
                    ) -> tuple[str, str] | None:
    name = f["kernel_aliases"].get(la["kernel"], la["kernel"])
    if "." not in name and (f["module"], name) in kernels:
        return f["module"], name
    resolved = la["resolved"]
    mod, _, attr = resolved.rpartition(".")
    if (mod, attr) in kernels:
        return mod, attr
    # a package re-export: from pkg import kernel, where pkg/__init__.py imports it from a submodule
    init = by_module.get(mod)
    if init is not None and attr in init["imports"]:
        mod2, _, attr2 = init["imports"][attr].rpartition(".")
        if (mod2, attr2) in kernels:
            return mod2, attr2
    last = name.split(".")[-1]  # self._kernel or obj.kernel: the same module's kernel of that name
    if (f["module"], last) in kernels:
        return f["module"], last
    return None


def _site(k: dict[str, Any], launches: list[LaunchSite], wrappers: set[str], called_from_kernels: set[str],
          mentioned: dict[str, list[str]], by_module: dict[str, dict[str, Any]], target: Target,
          measured: dict[str, tuple[float, float]], reach: dict[str, list[Reach]] | None, layers: dict[str, int],
          off: str = "") -> KernelSite:
    facts = by_module[k["module"]]
    family = family_of(k["name"], k["path"])
    if family == "other" and reach:  # the code that calls it names what it is (TritonRouterNoauxTCImpl.forward)
        family = family_of(" ".join(p for rs in reach.values() for r in rs for p in r.path[-4:]), "")
    role = "launched" if launches else ("helper" if k["name"] in called_from_kernels else "unused")
    work, counted = static_work(k)
    reasons = [f"work per launch ({counted}) +{work:g}"]
    score = work
    fallback = bool(launches) and all(la.fallback_only for la in launches)
    platform = _platform(k["path"], target.serving.other_platforms)
    if fallback:
        score -= 6.0
        reasons.append(f"fallback-only ({launches[0].branch}) -6")
    elif platform:
        fallback = True
        score -= 6.0
        reasons.append(f"in code for other hardware ({platform}) -6")
    path, status, undecided = "", "", ()
    if reach:
        preset, rs = max(reach.items(), key=lambda item: _reach_key(item[1]))
        best = max(rs, key=_one_key)
        status = "default" if best.decided else "possible"
        undecided = best.tests
        score += 10.0
        where = ", ".join(sorted(p for p, prs in reach.items() if any(r.decided for r in prs))) \
            if status == "default" else ", ".join(sorted(reach))
        reasons.append(f"{status} path of {where} +10")
        if best.phase == "decode":
            score += 2.0
            reasons.append("decode, every step +2")
        if best.per_layer:
            n = layers.get(preset, 1)
            score += round(math.log2(max(n, 1)), 1)
            reasons.append(f"per layer ({n} layers) +{math.log2(max(n, 1)):.1f}")
        if undecided:
            cost = round(-math.log2(OPEN_ODDS) * len(undecided), 1)
            score -= cost
            reasons.append(f"{len(undecided)} undecided on the path -{cost}: " + "; ".join(undecided))
        phases = "/".join(sorted({r.phase for r in rs}, reverse=True))
        path = f"{short_path(best.path)} ({preset}: {'per layer' if best.per_layer else 'once per step'}, {phases})"
    elif not fallback:
        if reach is not None and launches:
            status = "never"
            reasons.append(f"never: {off}" if off else "never: the walk from the serving entries reaches no launch of "
                           "it (no test decided it off: a call the walk cannot follow leaves a kernel here too)")
        elif any(la.cuda_branch for la in launches):
            score += 1.0
            reasons.append("CUDA branch +1")
        callers = sorted({p for w in wrappers for p in mentioned.get(w, ()) if p != k["path"]})
        if callers and reach is None:
            score += 3.0
            reasons.append(f"called from {callers[0]}{' and more' if len(callers) > 1 else ''} +3")
        if matches(k["path"], target.hints.hot_paths) and reach is None:
            score += 2.0
            reasons.append("hot path +2")
    else:
        status = "never" if reach is not None else ""
    if role != "launched":
        score -= 4.0
        reasons.append(f"{role}, not launched -4")
    us, share = measured.get(k["name"], (None, None))
    if share:
        reasons.insert(0, f"measured {share:.1%} of the GPU time per step ({us:.1f} µs)")
    extraction, blockers = _extraction_class(k, facts, wrappers, target)
    return KernelSite(name=k["name"], qualname=k["qualname"], path=k["path"], line=k["line"], module=k["module"],
                      form=k["form"], autotune=k["autotune"], heuristics=k["heuristics"], nested=k["nested"],
                      conditional=k["conditional"], role=role, launches=tuple(launches), family=family,
                      extraction=extraction, blockers=tuple(blockers), hotness=round(score, 2),
                      reasons=tuple(reasons), measured_us=us, measured_share=share, presets=tuple(sorted(reach or {})),
                      phases=tuple(sorted({r.phase for rs in (reach or {}).values() for r in rs})),
                      default_path=path, reach=status, undecided=tuple(undecided),
                      per_step=tuple((p, layers.get(p, 1) if any(r.per_layer for r in rs) else 1)
                                     for p, rs in sorted((reach or {}).items())))


def _one_key(r: Reach) -> tuple[bool, bool, bool, float]:
    """Which of a kernel's paths speaks for it: decided first, then decode, then per layer, then the fewest bits."""
    return (r.decided, r.phase == "decode", r.per_layer, -r.undecided)


def _platform(path: str, words: tuple[str, ...]) -> str:
    """The other platform a file's path is named for (``ascend/...``, ``..._rocm.py``), or ""."""
    hits = set(re.split(r"[/._]", path.lower())) & set(words)
    return sorted(hits)[0] if hits else ""


def _reach_key(rs: list[Reach]) -> tuple[bool, bool, bool, float]:
    return max(_one_key(r) for r in rs)


def short_path(path: tuple[str, ...]) -> str:
    """The entry, the last three hops, and an ellipsis for what lies between."""
    return " → ".join(path if len(path) <= 5 else path[:1] + ("…",) + path[-3:])


def _extraction_class(k: dict[str, Any], facts: dict[str, Any], wrappers: set[str], target: Target
                      ) -> tuple[str, list[str]]:
    """torch+triton | stubs | cross-file | external, with the names that put the kernel there."""
    imports = facts["imports"]
    own = {fn["qualname"].split(".")[0]: fn for fn in facts["functions"]}
    used = set(k["names"]) | set(c.split(".")[0] for c in k["calls"])
    for w in wrappers:
        fn = own.get(w)
        if fn is not None:
            used |= set(fn["names"]) | set(c.split(".")[0] for c in fn["calls"])
    external = sorted({imports[n].split(".")[0] for n in used if n in imports
                       and imports[n].split(".")[0] in target.hints.external_modules})
    if external:
        return "external", external
    package = facts["module"].split(".")[0]
    cross = sorted(n for n in used if n in imports and imports[n].split(".")[0] == package and n not in target.stubs)
    stubbed = sorted(n for n in used if n in target.stubs)
    if cross:
        return "cross-file", cross
    if stubbed or any(n in facts["tl_aliases"] for n in used):
        return "stubs", stubbed + sorted(n for n in used if n in facts["tl_aliases"])
    return "torch+triton", []
