"""A fixture package, written for these tests, holding every kernel and launch pattern listed in TARGETS.md."""

from __future__ import annotations

from pathlib import Path

FILES = {
    "eng/__init__.py": "",
    "eng/utils.py": '''
import torch
import triton
import triton.language as tl

def is_hip():
    return torch.version.hip is not None

@triton.jit
def fast_exp(x):
    return tl.exp(x)
''',
    "eng/kernels/__init__.py": "from .norm import rms_kernel\n",
    "eng/kernels/norm.py": '''
import triton
import triton.language as tl
from triton import jit
from ..utils import fast_exp, is_hip

exp = tl.exp
SCALE = tl.constexpr(4)

@triton.jit
def rms_kernel(x, y, n, BLOCK: tl.constexpr):
    pass

@jit
def plain_jit_alias(x):
    pass

@triton.jit(do_not_specialize=["n"])
def dns_kernel(x, n):
    v = fast_exp(x)

def late(x):
    pass

late = triton.jit(late)

def configs():
    return [triton.Config({"B": b}) for b in (64, 128)]

@triton.autotune(configs=configs(), key=["n"], prune_configs_by={"early_config_prune": None})
@triton.heuristics({"A": lambda a: 1})
@triton.heuristics({"B2": lambda a: 1})
@triton.heuristics({"C": lambda a: 1})
@triton.heuristics({"D": lambda a: 1})
@triton.heuristics({"E": lambda a: 1})
@triton.heuristics({"F": lambda a: 1})
@triton.heuristics({"G": lambda a: 1})
@triton.heuristics({"H": lambda a: 1})
@triton.jit
def stacked_kernel(x, n, B: tl.constexpr):
    y = exp(x)

@cached_triton_kernel(lambda a: a)
@triton.jit
def cached_kernel(x):
    pass

if hasattr(tl, "exp2"):
    @triton.jit
    def softplus(x):
        return x
else:
    @triton.jit
    def softplus(x):
        return x

try:
    @triton.jit
    def guarded(x):
        pass
except ImportError:
    pass

def make():
    @triton.jit
    def inner(x):
        pass
    return inner

def rmsnorm(x):
    rms_kernel[(x.shape[0],)](x, x, 1, BLOCK=128, num_warps=4, num_stages=2)
    late[(1,)](x)
    return x

def two_kernels(x):
    dns_kernel[(1,)](x, 1, launch_pdl=True)
    grid = lambda META: (triton.cdiv(8, META["B"]),)
    stacked_kernel[grid](x, 8)

def dispatch(x):
    if is_hip():
        cached_kernel[(1,)](x, waves_per_eu=2)
    else:
        plain_jit_alias[(1,)](x)

class Op:
    def launch(self, x):
        softplus[(1,)](x)

class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        guarded[(1,)](x)
        return x
''',
    "eng/layers/act.py": '''
from eng.kernels import rms_kernel
from eng.kernels.norm import dns_kernel

def fused(x):
    rms_kernel[(1,)](x, x, 1, BLOCK=64)

def cross(x):
    dns_kernel[(2,)](x, 2)
''',
    "eng/models/llama.py": "from eng.kernels.norm import rmsnorm, two_kernels\nfrom eng.layers.act import fused\n",
    "eng/bom.py": "\ufeffimport triton\n\n@triton.jit\ndef bom_kernel(x):\n    pass\n",
    "eng/broken.py": "import triton\n\n@triton.jit\ndef broken(x:\n",
    "eng/unrelated.py": "x = 1\n",
}


def write(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    return root
