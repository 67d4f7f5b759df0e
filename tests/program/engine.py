"""A small inference engine, written for these tests, with the dispatch patterns the call graph must follow: a model
class with its layers in a loop (their type handed to the base model's constructor by a subclass), layer builders picked by a backend from a constant argument, a registry of
attention backends keyed by a setting, a factory that returns a class, a platform-only branch, a file for other
hardware, per-step engine code and forward-mode tests; and torch glue in per-step and per-layer code, for the
fusion candidates."""

TRITON = "import triton\nimport triton.language as tl\n"


def kernel(name: str) -> str:
    return f"\n\n@triton.jit\ndef {name}(x):\n    pass\n"


MLA_KERNELS = ("after_guard_kernel", "both_ways_kernel", "struct_field_kernel",
               "bmm_quant_kernel", "plain_quant_kernel", "lora_correction_kernel", "cache_kernel",
               "router_kernel", "overlap_kernel", "trt_kernel", "env_default_kernel", "big_batch_kernel",
               "early_exit_kernel", "aiter_kernel", "fused_kernel", "unfused_kernel", "fast_path_kernel",
               "capture_kernel", "ready_kernel", "planned_kernel", "fast_impl_kernel", "slow_impl_kernel",
               "dense_ffn_kernel", "sparse_ffn_kernel", "scaled_finish_kernel", "quant_head_kernel",
               "deep_head_kernel", "hopper_kernel", "ampere_kernel", "plain_mode_kernel", "quant_cache_kernel",
               "triton_gate_kernel", "aiter_gate_kernel", "empty_batch_kernel", "passed_model_kernel",
               "publish_kernel", "spec_step_kernel", "fast_backend_kernel", "slow_backend_kernel",
               "mha_prepare_kernel", "mla_prepare_kernel", "moe_layer_kernel", "dense_layer_kernel",
               "sched_publish_kernel", "plain_stash_kernel", "optional_fast_kernel", "optional_gone_kernel",
               "impl_cuda_kernel", "impl_rocm_kernel", "draft_kernel", "layout_kernel", "pool_fused_kernel",
               "pool_int4_kernel", "pool_unfused_kernel", "pool_packed_kernel", "pool_plain_topk_kernel",
               "mha_core_kernel", "mla_core_kernel", "pool_gate_packed_kernel", "pool_gate_plain_kernel",
               "staged_async_kernel", "staged_plain_kernel", "staged_wide_kernel", "plan_run_kernel",
               "plan_skip_kernel", "one_shot_kernel", "norm_cast_kernel", "norm_plain_kernel", "aiter_only_kernel",
               "listed_mode_kernel", "unlisted_mode_kernel", "a2a_deepep_kernel", "quiet_cast_kernel",
               "quiet_plain_kernel", "route_standard_kernel", "route_bypass_kernel",
               "stamp_fast_kernel", "stamp_slow_kernel",
               "oneof_deep_kernel", "oneof_plain_kernel",
               "hy_linear_kernel", "hy_moe_kernel", "sparse_head_kernel", "hip_only_kernel",
               "int_ids_kernel", "long_ids_kernel", "runner_v1_kernel", "runner_v2_kernel", "unset_config_kernel",
               "split_kernel", "unsplit_kernel", "mode_fast_kernel", "mode_auto_kernel", "swa_model_kernel",
               "full_model_kernel", "padded_mask_kernel", "extend_table_kernel", "decode_table_kernel",
               "fp8_linear_kernel", "fp8_moe_kernel", "int4_moe_kernel", "modelopt_moe_kernel",
               "group_gather_kernel", "group_local_kernel", "hf_hybrid_kernel", "hf_extra_kernel",
               "hf_full_kernel", "hf_mrope_kernel", "hf_own_kernel", "replay_extend_kernel", "replay_decode_kernel",
               "eager_only_kernel", "graphed_only_kernel", "hf_swa_kernel", "hf_filled_kernel",
               "hf_builtin_kernel", "graph_off_kernel", "graph_on_kernel",
               "shared_metadata_kernel", "full_metadata_kernel", "hf_encdec_kernel", "hf_listed_kernel", "lens_pad_kernel",
               "overlap_on_kernel")

FILES = {
    "eng/__init__.py": "",
    "eng/utils.py": "import torch\n\nFUSED_MODES = ['fused', 'fused_tma']\n\ndef is_hip():\n    return torch.version.hip is not None\n\n"
                    "def get_server_args():\n    return ARGS\n\n\n_IS_HIP = is_hip()\n",
    "eng/kernels/__init__.py": "from .norm import rms_norm\n",
    "eng/kernels/norm.py": TRITON + kernel("rms_kernel") + "\n\ndef rms_norm(x):\n    rms_kernel[(1,)](x)\n",
    "eng/kernels/linear.py": TRITON + kernel("linear_kernel") + "\n\ndef linear(x):\n    linear_kernel[(1,)](x)\n",
    "eng/kernels/softmax.py": TRITON + kernel("softmax_kernel") + "\n\ndef softmax(x):\n    softmax_kernel[(1,)](x)\n",
    "eng/kernels/moe.py": TRITON + kernel("moe_gemm_kernel") + kernel("deepep_kernel") + kernel("hip_moe_kernel")
    + "\n\ndef fused_moe(x):\n    moe_gemm_kernel[(1,)](x)\n\n\ndef deepep_moe(x):\n    deepep_kernel[(1,)](x)\n",
    "eng/kernels/meta.py": TRITON + kernel("decode_meta_kernel") + kernel("triton_decode_kernel")
    + "\n\ndef set_decode_metadata(x):\n    decode_meta_kernel[(1,)](x)\n"
    + "\n\ndef decode_attention(x):\n    triton_decode_kernel[(1,)](x)\n",
    "eng/kernels/op.py": TRITON + kernel("op_cuda_kernel") + kernel("op_native_kernel")
    + "\n\ndef op_cuda(x):\n    op_cuda_kernel[(1,)](x)\n\n\ndef op_native(x):\n    op_native_kernel[(1,)](x)\n",
    "eng/kernels/rocm_rope.py": TRITON + kernel("rocm_rope_kernel") + "\n\ndef rope(x):\n    rocm_rope_kernel[(1,)](x)\n",
    # a launch under a test the serving settings decide (sglang's `if support_triton(get_server_args()
    # .attention_backend):`), with the engine's host fallback in the else
    # a launcher whose optional argument picks its kernel (lmdeploy's matmul with a residual); serving passes none
    "eng/kernels/residual.py": TRITON + kernel("plain_out_kernel") + kernel("residual_out_kernel") + '''

def linear_out(x, residual=None):
    if residual is not None:
        residual_out_kernel[(1,)](x)
    else:
        plain_out_kernel[(1,)](x)
''',
    "eng/kernels/pool.py": TRITON + "from eng.utils import get_server_args\n" + kernel("pool_kernel") + '''

def supports_triton(backend):
    return backend not in ("torch_native", "intel_amx")


def write_pool(x):
    if supports_triton(get_server_args().attention_backend):
        pool_kernel[(1,)](x)
    else:
        x.zero_()
''',
    "eng/backends.py": '''from enum import Enum

from eng.kernels import rms_norm
from eng.kernels.linear import linear
from eng.kernels.softmax import softmax


class OpType(Enum):
    RMSNorm = 1
    Linear = 2
    Softmax = 3


class NormImpl:
    def forward(self, x):
        return rms_norm(x)


class LinearImpl:
    def forward(self, x):
        return linear(x)


class NormBuilder:
    @staticmethod
    def build():
        return NormImpl()


class LinearBuilder:
    @staticmethod
    def build():
        return LinearImpl()


class SoftmaxImpl:
    def forward(self, x):
        return softmax(x)


class SoftmaxBuilder:
    @staticmethod
    def build():
        return SoftmaxImpl()


class DefaultBackend:
    @classmethod
    def get_builder(cls, op):
        if op == OpType.Linear:
            return LinearBuilder
        elif op == OpType.Softmax:
            return SoftmaxBuilder


class CudaBackend(DefaultBackend):
    @classmethod
    def get_builder(cls, op):
        if op == OpType.RMSNorm:
            return NormBuilder
        # every other op falls back to the default backend's: the op travels through the factory's own parameter
        return super().get_builder(op)


def get_backend():
    if device_type == "cuda":
        return CudaBackend
''',
    "eng/layers.py": '''import torch

from eng.backends import OpType, get_backend
from eng.kernels.moe import deepep_moe, fused_moe, hip_moe_kernel
from eng.kernels.op import op_cuda, op_native
from eng.kernels.rocm_rope import rope
from eng.platforms import current_platform
from eng.utils import get_server_args, is_hip

_is_hip = is_hip()


class RMSNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        backend = get_backend()
        builder = backend.get_builder(OpType.RMSNorm)
        self.impl = builder.build()

    def forward(self, x):
        return self.impl.forward(x)


class Softmax(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.impl = get_backend().get_builder(OpType.Softmax).build()

    def forward(self, x):
        return self.impl.forward(x)


def noaux_route(gate_logits, bias, bias_scale):
    # casts launch only where the dtype differs: the gate's logits are bf16, its bias fp32 already (scale: 2.5)
    gate_logits = gate_logits.float()
    bias = bias.float()
    scores = torch.add(gate_logits.sigmoid(), bias, alpha=bias_scale)
    return scores


def publish(buf, idx, lens):
    # one index store, and a cast of what the caller hands in: a launch only if it is not int64 already
    buf[idx] = lens.to(buf.dtype)


class FusedMoE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.router = Softmax()
        self.lens_buf = torch.empty((64,), dtype=torch.int64)
        self.weight = torch.nn.Parameter(torch.empty((8, 16), dtype=torch.bfloat16))
        self.bias = torch.nn.Parameter(torch.empty((8,), dtype=torch.float32))

    def forward(self, x):
        x = self.router(x)
        logits = torch.nn.functional.linear(x.to(self.weight.dtype), self.weight)
        noaux_route(logits, self.bias, ROUTE_SCALE)
        publish(self.lens_buf, x, x)
        if _is_hip:
            probs = torch.softmax(x, dim=-1)
            ids = probs.argmax(dim=-1)
            x = x + ids
            hip_moe_kernel[(1,)](x)
        # routing glue, per layer: softmax, top-k, renormalise (a view and a shape read are free)
        probs = torch.softmax(x.float(), dim=-1)
        topk_weights, topk_ids = torch.topk(probs, 2)
        n = topk_ids.shape[0]
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True).view(n, 1)
        self.routed = (topk_weights, topk_ids)
        local_start(self.batch)
        self.refresh(x)
        return fused_moe(x)

    def refresh(self, mode):
        # redone only when the mode it keeps changes: no step's work
        if self.mode != mode:
            self.mode = mode
            self.lens_buf.zero_()
            self.weight.data.fill_(0)


class DeepEPMoE(torch.nn.Module):
    def forward(self, x):
        return deepep_moe(x)


def get_moe_cls():
    if get_server_args().moe_a2a_backend == "deepep":
        return DeepEPMoE
    return FusedMoE


class RocmRope:
    def forward(self, x):
        return rope(x)


def maybe_compile(func):
    """torch.compile, falling back to eager: the ops of what it wraps are fused by Inductor, no glue."""
    compiled = torch.compile(func)

    def wrapper(*args):
        return compiled(*args)

    return wrapper


@maybe_compile
def scaled(x):
    y = x.float() * 2.0
    y = y + 1.0
    return torch.softmax(y, dim=-1)


class PlatformOp:
    """Its forward method is picked once, in __init__; only a compile step (never run by default) swaps it."""

    def __init__(self):
        self._forward = self.dispatch_forward()

    def dispatch_forward(self):
        if current_platform.is_out_of_tree():  # an out-of-tree platform plugin: not on an sm90 GPU
            return self.forward_native
        return self.forward_cuda

    def enter_compile(self):
        self._forward = self.forward_native

    def forward(self, x):
        return self._forward(x)

    def forward_cuda(self, x):
        return op_cuda(scaled(x))

    def forward_native(self, x):
        return op_native(x)


def local_start(batch):
    # worked out once for the batch and kept on it: once a step, however many layers ask
    if batch.start is None:
        batch.start = torch.cumsum(batch.lens, 0) - batch.lens
        batch.count = batch.lens.sum()


ROUTE_SCALE = 2.5  # (at the end: the lines above keep their numbers)
''',
    "eng/platforms.py": '''"""The platform, made on first access of ``current_platform`` (a lazy module attribute)."""
import enum

import torch


class PlatformEnum(enum.Enum):
    CUDA = enum.auto()
    OOT = enum.auto()


class Platform:
    _enum = PlatformEnum.OOT

    def is_out_of_tree(self):
        return self._enum == PlatformEnum.OOT


class CudaPlatform(Platform):
    _enum = PlatformEnum.CUDA


_current = None


def _resolve():
    if torch.cuda.is_available() and torch.version.hip is None:
        return CudaPlatform()
    return Platform()


def __getattr__(name):
    global _current
    if name == "current_platform":
        if _current is None:
            _current = _resolve()
        return _current
    raise AttributeError(name)
''',
    "eng/spec.py": '''"""A speculative-decoding switch as an enum, a plan built by a classmethod, a backend from a factory."""
from dataclasses import dataclass
from enum import Enum

from eng.kernels import mla as k


class Algo(Enum):
    NONE = "none"
    EAGLE = "eagle"

    @classmethod
    def from_string(cls, name):
        if name is None:
            return cls.NONE
        return cls[name.upper()]

    def is_none(self):
        return self == Algo.NONE

    def make_map(self):
        return FutureMap(self)


class FutureMap:
    def __init__(self, algo):
        self.algo = algo

    def publish(self, x):
        k.publish(x)
        if self.algo.is_none():  # the algo is the receiver that made this map
            k.plain_stash(x)


class FastBackend:
    def run(self, x):
        k.fast_backend(x)


class SlowBackend:
    def run(self, x):
        k.slow_backend(x)


def build_backend(flavour, kind=None):
    kind = kind or FastBackend
    if flavour == 0:
        backend = kind()
    else:
        backend = SlowBackend()
    return backend


@dataclass
class Plan:
    backend: object = None
    algo: Algo = None

    @classmethod
    def make(cls, algo):
        return cls(backend=build_backend(0), algo=algo)
''',
    "eng/dispatch.py": '''"""An attention layer that picks its forward method through handlers registered by module-level calls, and
a feed-forward picked by a predicate of the layer's index."""
from enum import Enum

import torch

from eng.forward_batch import ForwardBatch
from eng.kernels import mla as k


class Method(Enum):
    MHA = 1
    MLA = 2
    MLA_CPU = 3


class HandlerRegistry:
    _handlers = {}

    @classmethod
    def register(cls, name, handler):
        cls._handlers[name] = handler

    @classmethod
    def get_handler(cls, name):
        return cls._handlers.get(name, cls._handlers.get("none"))


def _absorbed(attn, fb):
    if attn.on_cpu:
        return Method.MLA_CPU
    return Method.MLA


def handle_fa3(attn, fb):
    if fb.forward_mode.is_decode():
        return _absorbed(attn, fb)
    return Method.MHA


def handle_plain(attn, fb):
    return _absorbed(attn, fb)


def handle_aiter(attn, fb):
    return Method.MHA


HandlerRegistry.register("fa3", handle_fa3)
HandlerRegistry.register("none", handle_plain)
HandlerRegistry.register("aiter", handle_aiter)


class MoeLayer(torch.nn.Module):
    def forward(self, x):
        return k.moe_layer(x)


class DenseLayer(torch.nn.Module):
    def forward(self, x):
        return k.dense_layer(x)


class DispatchedAttention(torch.nn.Module):
    def __init__(self, layer_id):
        super().__init__()
        self.on_cpu = False
        self.sparse = self._is_sparse(layer_id, nextn=False)
        if self.sparse:
            self.ffn = MoeLayer()
        else:
            self.ffn = DenseLayer()

    def _is_sparse(self, layer_id, nextn):
        return nextn or layer_id % 2 == 1

    def dispatch(self, fb: ForwardBatch):
        handler = HandlerRegistry.get_handler(self.backend_name)
        return handler(self, fb)

    def forward(self, x, fb: ForwardBatch):
        state = self.prepare(x, fb)
        return self.core(state)

    def prepare(self, x, fb: ForwardBatch):
        if x.shape[0] == 0:
            return x, None, fb
        method = self.dispatch(fb)
        if method == Method.MHA:
            k.mha_prepare(x)
        elif method == Method.MLA:
            k.mla_prepare(x)
        return x, method, fb

    def core(self, state):
        x, method, fb = state
        if method == Method.MHA:
            k.mha_core(x)
        else:
            k.mla_core(x)
        return self.ffn(x)
''',
    "eng/sched.py": '''"""A scheduler step whose batch's field is set only by batch-building code no step runs: a classmethod
called from a mixin of the scheduler and from a component that holds the value in a field without a default."""
from dataclasses import dataclass

import torch

from eng.args import ServerArgs
from eng.groups import groups_step, init_groups
from eng.hfconf import EngModelConfig, hf_step
from eng.kernels import mla as k
from eng.optional import make_impl, route
from eng.pool import pool_step
from eng.quant import Fp8Online, quant_step
from eng.spec import Algo


@dataclass
class Batch:
    algo: Algo = None  # an empty batch leaves it None

    @classmethod
    def build(cls, algo):
        return cls(algo=algo)


class BuildMixin:
    def new_batch(self):
        return Batch.build(self.algo)


@dataclass
class Adapter:
    algo: Algo

    def idle_batch(self):
        return Batch.build(self.algo)


class StepBatch:
    """A decode batch whose lengths each step moves on (sglang's ScheduleBatch.seq_lens): made when the batch is
    built, updated from themselves, filtered, merged with another batch's, and None while the batch is empty. The
    lengths are made on the host and moved to the GPU; their mirror stays on the host."""

    def __init__(self):
        self.device = "cuda"
        self.lens = None
        self.orig = None
        self.lens_host = None

    def build(self, lens):
        self.lens = torch.tensor(lens, dtype=torch.int64).to(self.device, non_blocking=True)
        self.orig = torch.tensor(lens, dtype=torch.int32, device=self.device)
        self.lens_host = torch.tensor(lens, dtype=torch.int64)

    def filter(self, keep):
        self.lens = self.lens[keep]
        self.orig = self.orig[keep]
        self.lens_host = self.lens_host[keep]

    def merge(self, other: "StepBatch"):
        self.lens = torch.cat([self.lens, other.lens])
        self.orig = torch.cat([self.orig, other.orig])
        self.lens_host = torch.cat([self.lens_host, other.lens_host])

    def advance(self):
        self.lens = self.lens + 1
        self.lens_host = self.lens_host + 1
        self.orig = self.orig + 1


def stash_lens(buf, idx, lens: torch.Tensor):
    buf[idx] = lens.to(torch.int64)


class Scheduler(BuildMixin):
    def __init__(self):
        self.algo = Algo.from_string(None)
        self.running = Batch()
        self.adapter = Adapter(algo=self.algo)
        self.online = Fp8Online()
        self.decoding = StepBatch()
        init_groups(ServerArgs())
        self.model_config = EngModelConfig(ServerArgs().model_path)
        self.router = Router()

    def step(self, batch: Batch, x):
        if batch.algo.is_none():
            k.sched_publish(x)
        route(x)
        make_impl().run(x)
        pool_step(x)
        quant_step(self.args, x)
        groups_step(x)
        hf_step(self.model_config, x)
        self.decoding.advance()
        self.relay(self.decoding, x)
        self.router(x)

    def relay(self, batch: StepBatch, x):
        stash_lens(self.lens_buf, x, batch.lens + 1)


class Router(torch.nn.Module):
    """Logits from a linear layer of its own, 8 wide (its out_features): the width of the softmax glue's input."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(16, 8, bias=False)

    def forward(self, x):
        return route_softmax(self.gate(x), 2)


def route_softmax(logits, picks):
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    return torch.topk(probs, picks, dim=-1)
''',
    "eng/groups.py": '''"""A module global the engine fills at start-up (sglang's attention data-parallel size): a
placeholder None that the scheduler's constructor sets from the server's arguments, and that only a rescale no step
runs sets again."""
from eng.kernels import mla as k

_GROUP_SIZE: int = None


def init_groups(args):
    global _GROUP_SIZE
    _GROUP_SIZE = args.dp_size if args.enable_dp else 1


def regroup(new_size):
    global _GROUP_SIZE
    _GROUP_SIZE = new_size


def group_size():
    return _GROUP_SIZE


def groups_step(x):
    if group_size() > 1:
        k.group_gather(x)
    else:
        k.group_local(x)
''',
    "eng/hfconf.py": '''"""The model's config.json as the engine loads it (sglang's ModelConfig): a copy of what a
parser from a registry returns, the parsers' base hinting that it returns transformers' PretrainedConfig; tested
against the config classes of other model types (a hybrid linear-attention model's) and against the specs of a list
only plugins fill."""
import copy

from transformers import AutoConfig, PretrainedConfig
from transformers import MambaConfig as HFMambaConfig

from eng.kernels import mla as k


class ParserBase:
    def parse(self, model, **kwargs) -> PretrainedConfig:
        raise NotImplementedError


_PARSERS = {}


def register_parser(name):
    def wrap(cls):
        _PARSERS[name] = cls
        return cls
    return wrap


@register_parser("hf")
class HfParser(ParserBase):
    def parse(self, model, **kwargs):
        config = AutoConfig.from_pretrained(model, **kwargs)
        if config.architectures is None:
            config.update({"architectures": ["Unknown"]})
        return config


def get_parser(name) -> ParserBase:
    return _PARSERS[name]()


def get_config(model, parser_name="hf", **kwargs):
    parser = get_parser(parser_name)
    config = parser.parse(model, **kwargs)
    return config


class HybridConfig(PretrainedConfig):
    model_type = "hybrid_linear"


class MambaLikeConfig(HFMambaConfig):  # its model_type is transformers' Mamba's
    pass


class LlamaOwnConfig(PretrainedConfig):  # the engine's own class for Llama checkpoints
    model_type = "llama"


OTHER_SWA_ARCHS = ("MistralSwaForCausalLM",)


def is_swa_model(archs):
    swa_archs = {"GemmaSwaForCausalLM", *OTHER_SWA_ARCHS}
    return any(a in swa_archs for a in archs)


def is_encdec_model(archs):
    encdec_archs = ["WhisperLikeForConditionalGeneration", "MllamaLikeForConditionalGeneration"]
    return any(a in archs for a in encdec_archs)


def is_listed_model(archs):
    listed = []
    listed.append("LlamaForCausalLM")  # filled after it is made: not the empty list of its literal
    return any(a in archs for a in listed)


def filled_step(x):
    options = {}
    options["filled"] = True  # filled after it is made: not the empty dict its literal says
    if "filled" in options:
        k.hf_filled(x)


class EngModelConfig:
    def __init__(self, model_path, **kwargs):
        self.hf_config = copy.deepcopy(get_config(model_path, **kwargs))
        self.is_swa = is_swa_model(self.hf_config.architectures)
        self.is_encdec = is_encdec_model(self.hf_config.architectures)
        text = self.hf_config.get_text_config()
        rope = getattr(text, "rope_scaling", None) or {}
        self.is_mrope = "mrope_section" in rope


def hybrid_config(model_config):
    config = model_config.hf_config.get_text_config()
    if isinstance(config, HybridConfig | MambaLikeConfig):
        return config
    return None


_EXTRA_SPECS = []


def register_spec(spec):
    _EXTRA_SPECS.append(spec)


def extra_spec(hf_config):
    for spec in _EXTRA_SPECS:
        if isinstance(hf_config, spec.config_class):
            return spec
    return None


_BUILTIN_SPECS = []


def add_builtin(spec):
    _BUILTIN_SPECS.append(spec)
    return spec


@add_builtin  # filled at import: not the empty list of its literal
class BuiltinSpec:
    config_class = HybridConfig


def builtin_spec(hf_config):
    for spec in _BUILTIN_SPECS:
        if isinstance(hf_config, spec.config_class):
            return spec
    return None


def hf_step(model_config, x):
    if cfg := hybrid_config(model_config):
        k.hf_hybrid(cfg)
    elif extra_spec(model_config.hf_config) is not None:
        k.hf_extra(x)
    else:
        k.hf_full(x)
    if model_config.is_mrope:
        k.hf_mrope(x)
    if isinstance(model_config.hf_config, LlamaOwnConfig):
        k.hf_own(x)
    if model_config.is_swa:
        k.hf_swa(x)
    if model_config.is_encdec:
        k.hf_encdec(x)
    if is_listed_model(model_config.hf_config.architectures):
        k.hf_listed(x)
    filled_step(x)
    if builtin_spec(model_config.hf_config) is not None:
        k.hf_builtin(x)
''',
    "eng/quant.py": '''"""Quantization configs in a table spelled out as a dict literal (a base table unpacked into
it) keyed by the `quantization` setting, one built by its classmethod (which a live subclass overrides), a layer's method picked by
`isinstance` of the layer, and a prefix test on the setting."""
from eng.kernels import mla as k


class Linear:
    pass


class QuantConfig:
    def get_method(self, layer):
        return None


class Fp8Linear:
    def apply(self, x):
        k.fp8_linear(x)


class Fp8Moe:
    def apply(self, x):
        k.fp8_moe(x)


class Int4Moe:
    def apply(self, x):
        k.int4_moe(x)


class ModelOptMoe:
    def apply(self, x):
        k.modelopt_moe(x)


class ModelOptConfig(QuantConfig):
    def get_method(self, layer):
        return ModelOptMoe()


class Fp8Config(QuantConfig):
    @classmethod
    def from_config(cls, raw):
        return cls()

    def get_method(self, layer):
        if isinstance(layer, (Linear, ModelOptConfig)):
            return Fp8Linear()
        return Fp8Moe()


class Fp8Online(Fp8Config):
    @classmethod
    def from_config(cls, raw):
        return ModelOptConfig()


class Int4Config(QuantConfig):
    @classmethod
    def from_config(cls, raw):
        return cls()

    def get_method(self, layer):
        return Int4Moe()


BASE_QUANTIZATION_METHODS = {"fp8": Fp8Config, "int4": Int4Config}
QUANTIZATION_METHODS = {**BASE_QUANTIZATION_METHODS}


def load_quant(name):
    if name.startswith("modelopt"):
        return ModelOptConfig()
    quant_cls = QUANTIZATION_METHODS[name]
    return quant_cls.from_config({})


class Layer:
    def __init__(self, config):
        self.method = config.get_method(self)

    def forward(self, x):
        self.method.apply(x)


class MoeLayer(Layer):
    pass


class LinearLayer(Layer, Linear):
    pass


class HyLinearBase:
    pass


class HyLinearMethod:
    def apply(self, x):
        k.hy_linear(x)


class HyMoeMethod:
    def apply(self, x):
        k.hy_moe(x)


class HyConfig:
    def get_method(self, layer, prefix):
        if isinstance(layer, HyLinearBase):
            return HyLinearMethod()
        return HyMoeMethod()


class HyMixed(HyConfig):
    """A config that hands the layer on to its base's method, with a prefix nothing knows."""

    def get_method(self, layer, prefix):
        if prefix.endswith("_fast"):
            return HyLinearMethod()
        return super().get_method(layer, prefix)


class HyLayer:
    def __init__(self, config, prefix):
        self.method = config.get_method(self, prefix)

    def forward(self, x):
        self.method.apply(x)


class HyLinear(HyLayer, HyLinearBase):
    pass


class HyMoe(HyLayer):
    pass


def quant_step(args, x):
    config = load_quant(args.quantization)
    LinearLayer(config).forward(MoeLayer(config).forward(x))
    HyMoe(HyMixed(), args.prefix).forward(HyLinear(HyMixed(), args.prefix).forward(x))
''',
    "eng/optional.py": '''"""Optional packages' fast paths (module-level imports that may fail), and an implementation class imported in
one branch or the other of a function."""
from eng.kernels import mla as k
from eng.utils import get_server_args, is_hip

try:
    from fastlib.ops import fast_route
except ImportError:
    fast_route = None

try:
    from gonelib import gone_route
except ImportError:
    gone_route = None


def route(x):
    if fast_route is not None:
        k.optional_fast(x)
    if gone_route is not None:
        k.optional_gone(x)
    if get_server_args().draft_model_path is not None:
        k.draft(x)
    if get_server_args().cache_layout is None:
        k.layout(x)


class CudaImpl:
    def run(self, x):
        k.impl_cuda(x)


def make_impl():
    if not is_hip():
        from eng.optional import CudaImpl as Impl
    else:
        from eng.rocm_impl import RocmImpl as Impl
    return Impl()
''',
    "eng/pool.py": '''"""A table of fused functions, filled by a decorator factory that hands each function to a classmethod that
stores it; a runner takes the function its settings look up, when one is registered. The quant info the step builds
reaches the fused function through parameters annotated with the info's base class. A call hands on a dict of
keyword arguments that the defaults leave empty, and a constructor is handed one that lacks a parameter."""
from dataclasses import dataclass

from eng.environ import get_bool_env_var
from eng.kernels import mla as k


class Pool:
    _funcs = {}

    @classmethod
    def add(cls, a2a, runner, func):
        cls._funcs[(a2a, runner)] = func

    @classmethod
    def lookup(cls, a2a, runner):
        found = cls._funcs.get((a2a, runner))
        return found


def register(a2a, runner):
    def decorator(func):
        Pool.add(a2a, runner, func)
        return func

    return decorator


class Info:
    pass


@dataclass
class WideInfo(Info):
    use_int4: bool = False


@register("none", "cutlass")
def fused_none_cutlass(x, info: Info):
    if info.use_int4:
        k.pool_int4(x)
    else:
        k.pool_fused(x)


class PoolRunner:
    def __init__(self, a2a, runner, lora=False):
        self.lora = lora
        self.fused = None
        if not lora:
            self.fused = Pool.lookup(a2a, runner)

    def run(self, x, info: Info):
        if self.fused is not None and not self.lora:
            return self.fused(x, info)
        k.pool_unfused(x)


def route_topk(x, packed=None):
    if packed is not None:
        k.pool_packed(x)
    else:
        k.pool_plain_topk(x)


def select(x):
    pack = None
    kw = {}
    if pack is not None:
        kw = dict(packed=pack)
    route_topk(x, **kw)


class Gate:
    def __init__(self, top, packed=None):
        self.top = top
        self.packed = packed

    def forward(self, x):
        if self.packed is not None:
            k.pool_gate_packed(x)
        else:
            k.pool_gate_plain(x)


class Norm:
    def __init__(self, cast=False):
        self.cast = cast

    def forward(self, x):
        if self.cast:
            k.norm_cast(x)
        else:
            k.norm_plain(x)


class QuietNorm:
    def __init__(self, cast=False):
        self.cast = cast

    def forward(self, x):
        if self.cast:
            k.quiet_cast(x)
        else:
            k.quiet_plain(x)


class Route:
    """A parameter the constructor reassigns only under a test the defaults decide against keeps what the caller
    passes (sglang's TopK sets ``output_format`` to STANDARD only with waterfill on)."""

    def __init__(self, fmt=None):
        self.waterfill = get_bool_env_var("ENG_WATERFILL")
        if self.waterfill:
            fmt = "standard"
        self.fmt = fmt

    def forward(self, x):
        if self.fmt == "standard":
            k.route_standard(x)
        else:
            k.route_bypass(x)


class Stamped:
    """An attribute __init__ leaves None and every step's forward sets before the core reads it (DeepSeek's
    ``current_attention_backend``), and one only a method no step runs sets."""

    def __init__(self):
        self.mode = None
        self.spare = None

    def prepare(self):
        self.mode = "fast"

    def unused(self):
        self.spare = "fast"

    def core(self, x):
        if self.mode == "fast":
            k.stamp_fast(x)
        if self.spare is None:
            k.stamp_slow(x)

    def forward(self, x):
        self.prepare()
        self.core(x)


class MoeRunnerLike:
    """A runner two methods make, each with its own backend (sglang's MoeRunner): one passes a constant, the other
    one of two by an open test. Its backend is one of those three, none of them deep_gemm."""

    def __init__(self, backend):
        self.backend = backend


class FirstMethod:
    def make(self):
        self.runner = MoeRunnerLike("triton")

    def apply(self, x):
        if self.runner.backend == "deep_gemm":
            k.oneof_deep(x)
        else:
            k.oneof_plain(x)


class SecondMethod:
    def make(self, x):
        self.runner = MoeRunnerLike("flashinfer" if x.rare else "triton_kernel")


def oneof_step(x):
    first = FirstMethod()
    first.make()
    SecondMethod().make(x)
    first.apply(x)


class Kind:
    PLAIN = 0
    ASYNC = 1


WORLD = 1


def world_rank():
    return WORLD, 0


class Staged:
    """Stages that hand each other a dict (lmdeploy's MoE dispatch, gemm and combine), and a world size unpacked
    from a tuple into an attribute."""

    def __init__(self):
        self.world, rank = world_rank()

    def dispatch(self, state):
        kind = state["kind"]
        if kind == Kind.ASYNC:
            out = {"x": state["x"], "kind": state["kind"], "event": None}
        else:
            out = {"x": state["x"], "kind": kind}
        return out

    def gemm(self, state):
        kind = state["kind"]
        if kind == Kind.ASYNC:
            k.staged_async(state["x"])
        else:
            k.staged_plain(state["x"])

    def forward(self, x):
        if self.world > 1:
            k.staged_wide(x)
        state = {"x": x, "kind": Kind.PLAIN}
        got = self.dispatch(state)
        self.gemm(got)


@dataclass
class Micro:
    """A batch whose planning flag only a method no step calls sets; the split batch is built from a dict whose keys
    come from a loop over literal names and an update."""

    ids: object = None
    ready: bool = False
    one_shot: object = None  # set from outside the class, by a function a step runs

    def mark_ready(self):
        self.ready = True

    def needs_plan(self):
        if not self.ready:
            return True
        return False


def split_micro(b):
    out = dict()
    for key in ["ids"]:
        out[key] = getattr(b, key)
    out.update(dict(ready=False))
    return Micro(**out)


def mark_one_shot(b: Micro):
    b.one_shot = True


def plan_step(x, b: Micro):
    mark_one_shot(b)
    if b.one_shot:
        k.one_shot(x)
    if not b.needs_plan():
        k.plan_skip(x)
    else:
        k.plan_run(x)


def pool_step(x):
    plan_step(x, split_micro(Micro(ids=x)))
    PoolRunner("none", "cutlass").run(x, WideInfo())
    select(x)
    gate_kw = dict(top=2)
    gate = Gate(**gate_kw)
    gate.forward(x)
    norm_kw = dict(cast=True) if x.rare else {}
    Norm(**norm_kw).forward(x)
    quiet_kw = dict(cast=True) if get_bool_env_var("ENG_USE_AITER") else {}
    QuietNorm(**quiet_kw).forward(x)
    Staged().forward(x)
    Route(fmt="bypass").forward(x)
    Stamped().forward(x)
    oneof_step(x)
''',
    "eng/rocm_impl.py": '''from eng.kernels import mla as k


class RocmImpl:
    def run(self, x):
        k.impl_rocm(x)
''',
    "eng/attention/__init__.py": "",
    "eng/attention/base.py": '''class AttentionBackend:
    def forward(self, x, fb):
        if fb.forward_mode.is_decode():
            return self.forward_decode(x)
        return self.forward_extend(x)

    def init_metadata(self, fb):
        raise NotImplementedError

    def forward_decode(self, x):
        raise NotImplementedError

    def forward_extend(self, x):
        raise NotImplementedError
''',
    "eng/attention/backends.py": '''import torch

from eng.attention.base import AttentionBackend
from eng.kernels.meta import decode_attention, set_decode_metadata


class FA3Backend(AttentionBackend):
    def __init__(self, runner):
        self.runner = runner

    def init_metadata(self, fb):
        check = fb.forward_mode.is_decode if self.runner is not None else fb.forward_mode.is_decode_or_idle
        if check():  # a local that holds the batch mode's method: the phase decides it
            # TODO: fuse these kernels
            seqlens = fb.seq_lens.to(torch.int32)
            cu_seqlens = torch.nn.functional.pad(torch.cumsum(seqlens, dim=0), (1, 0))
            max_len = seqlens.max().item()
            self.page_table = fb.req_to_token[fb.req_pool_indices, :max_len]
            self.cu_seqlens.copy_(cu_seqlens)
            set_decode_metadata(fb)
        else:
            extend = fb.seq_lens - fb.prefix_lens
            self.cu_extend = torch.cumsum(extend, dim=0)
            self.positions = torch.arange(extend.sum().item(), device=extend.device)

    def forward_decode(self, x):
        return x

    def forward_extend(self, x):
        return x


class TritonBackend(AttentionBackend):
    def __init__(self, runner):
        self.runner = runner

    def init_metadata(self, fb):
        pass

    def forward_decode(self, x):
        return decode_attention(x)

    def forward_extend(self, x):
        return x
''',
    "eng/attention/registry.py": '''from eng.attention.backends import FA3Backend, TritonBackend

BACKENDS = {}


def register(name):
    def decorator(fn):
        BACKENDS[name] = fn
        return fn

    return decorator


@register("fa3")
def make_fa3(runner):
    return FA3Backend(runner)


@register("triton")
def make_triton(runner):
    return TritonBackend(runner)
''',
    "eng/batching.py": '''"""The step's batch, picked by the scheduler: a new prefill batch when requests wait, else the
running batch made a decode batch. Which one a step runs is the queue's state, which no default decides: the phase
being walked does."""
from collections import deque

from eng.forward_batch import ForwardMode
from eng.kernels import mla as k


class StepBatch:
    def __init__(self):
        self.forward_mode = ForwardMode.IDLE
        self.reqs = deque()

    def prepare_for_extend(self):
        self.forward_mode = ForwardMode.EXTEND
        k.extend_table(self)

    def prepare_for_decode(self):
        self.forward_mode = ForwardMode.DECODE
        k.decode_table(self)

    def is_empty(self):
        return len(self.reqs) == 0


class BatchPicker:
    def __init__(self):
        self.waiting = deque()
        self.running = StepBatch()
        self.mixed_chunk = False

    def new_prefill(self):
        if len(self.waiting) == 0:
            return None
        batch = StepBatch()
        batch.prepare_for_extend()
        if self.mixed_chunk:  # off: its decode half does not make this a decode branch
            self.running.prepare_for_decode()
        return batch

    def next_batch(self):
        new_batch = self.new_prefill()
        if new_batch is not None:
            return new_batch
        if self.running.is_empty():
            return None
        self.running.prepare_for_decode()
        return self.running
''',
    "eng/forward_batch.py": '''from enum import IntEnum, auto

from eng.attention.base import AttentionBackend


class ForwardMode(IntEnum):
    """The batch's mode: the phase of the step (a decode step is in mode DECODE)."""

    EXTEND = auto()
    DECODE = auto()
    IDLE = auto()

    def is_decode(self):
        return self == ForwardMode.DECODE

    def is_decode_or_idle(self):
        return self == ForwardMode.DECODE or self == ForwardMode.IDLE


class ForwardBatch:
    attn_backend: AttentionBackend
    forward_mode: ForwardMode
''',
    "eng/graph.py": '''"""The decode CUDA graph's replay, a decode-only entry: the engine runs it only for decode
batches, so its forward-mode test takes the decode branch in every step."""
from abc import ABC, abstractmethod

from eng.args import ServerArgs
from eng.forward_batch import ForwardBatch
from eng.kernels import mla as k


class DecodeGraphRunner:
    def replay(self, fb: ForwardBatch, x):
        if fb.forward_mode.is_decode():
            k.replay_decode(x)
        else:
            k.replay_extend(x)


def prefill_graph(args: ServerArgs, x):
    """The sizes' class defaults them to None, but the arguments' own resolution sets them on the instance."""
    if not args.graph_config.prefill.sizes:
        k.graph_off(x)
    else:
        k.graph_on(x)


class GraphBackend(ABC):
    @abstractmethod
    def replay(self):
        ...


class FullBackend(GraphBackend):
    pass


class BreakableBackend(GraphBackend):
    pass


def pick_backend(args):
    if args.graph_config.prefill.backend == "full":
        return FullBackend()
    return BreakableBackend()


def set_metadata(x):
    k.shared_metadata(x)


class BaseGraphRunner:
    backend: GraphBackend  # a declaration: the subclass's __init__ sets it


class PrefillGraphRunner(BaseGraphRunner):
    def __init__(self, args):
        self.backend = pick_backend(args)
        self.full = isinstance(self.backend, FullBackend)

    def execute(self, x):
        if self.full:
            k.full_metadata(x)
        else:
            set_metadata(x)


class EagerPrefillRunner:
    def execute(self, x):
        set_metadata(x)


def make_prefill_runner(args, eager):
    if not args.graph_config.prefill.sizes:
        return eager
    return PrefillGraphRunner(args)


def run_prefill(runner, x):
    """Either way the batch goes, and whichever runner the first way holds, the metadata is set."""
    if x.numel() < 4096:
        runner.prefill_runner.execute(x)
    else:
        runner.eager.execute(x)


def step_tail(fb: ForwardBatch, x):
    """`graphed` is set again after the test that reads it: that cannot reach the test."""
    graphed = fb.forward_mode.is_decode()
    if not graphed:
        k.eager_only(x)
    else:
        k.graphed_only(x)
    graphed = True
    return graphed
''',
    "eng/runner.py": '''from eng.attention.registry import BACKENDS
from eng.forward_batch import ForwardBatch
from eng.args import ServerArgs
from eng.graph import EagerPrefillRunner, FullBackend, make_prefill_runner, prefill_graph, run_prefill, step_tail
from eng.kernels.pool import write_pool
from eng.kernels.residual import linear_out
from eng.utils import get_server_args


class ModelRunner:
    def __init__(self, model):
        self.model = model
        self.attn_backend = BACKENDS[get_server_args().attention_backend](self)
        self.eager = EagerPrefillRunner()
        self.decode_graphs = FullBackend()  # a full graph backend is made: an instance of its base may be one
        self.prefill_runner = make_prefill_runner(ServerArgs(), self.eager)

    def forward(self, fb: ForwardBatch, extra=None):
        if fb is not None:  # the caller passes the batch: decided
            self.attn_backend.init_metadata(fb)
        step_tail(fb, fb)
        write_pool(extra)
        linear_out(extra)
        prefill_graph(ServerArgs(), fb)
        run_prefill(self, fb)
        return self.model(fb)
''',
    "eng/environ.py": '''class EnvBool:
    def __init__(self, default):
        self.default = default


class Envs:
    ENG_FAST_ROUTER = EnvBool(True)
    ENG_EXPERIMENTAL_CACHE = EnvBool(False)


envs = Envs()


def get_bool_env_var(name, default="false"):
    return default == "true"
''',
    "eng/envtable.py": '''"""Environment variables as a table of getters, which the module's __getattr__ calls (as vLLM's envs.py)."""
import os


def maybe_bool(value):
    if value is None:
        return None
    return bool(int(value))


environment_variables = {
    "ENG_USE_V2_RUNNER": lambda: maybe_bool(os.getenv("ENG_USE_V2_RUNNER", None)),
    "ENG_FAST_STEPS": lambda: bool(int(os.getenv("ENG_FAST_STEPS", "1"))),
}


def __getattr__(name):
    return environment_variables[name]()
''',
    "eng/runconfig.py": '''"""A worker that no code of the engine constructs (it is made by name, as vLLM's): its config comes by its type
hint, a property of that config decides the runner through an environment table, and a field whose default is None
is set by every construction of the config (the engine's arguments build it; a draft copies it). An error check and
a data test both of whose branches launch one kernel leave the kernels after them on the default path."""
from dataclasses import dataclass

from eng import envtable as envs
from eng import flags
from eng.kernels import mla as k


@dataclass
class RunConfig:
    model_config: object = None
    fast: bool = False

    @property
    def use_v2(self) -> bool:
        flag = envs.ENG_USE_V2_RUNNER
        if flag is not None:
            return flag
        return self.fast


def draft_config(cfg: RunConfig):
    model_config = cfg.model_config
    return RunConfig(model_config=model_config)


@dataclass
class Resolved:
    mode: str  # a field of a builtin type with no default: what the constructions pass


def resolve():
    return Resolved(mode="fast")


class Worker:
    def __init__(self, run_config: RunConfig):
        self.run_config = run_config
        self.use_v2 = run_config.use_v2
        self.pending = None

    def execute(self, x):
        if self.use_v2:
            k.runner_v2(x)
        else:
            k.runner_v1(x)
        if self.run_config.model_config is None:
            k.unset_config(x)
        # an error check (as vLLM's "sample_tokens() must be called after execute_model()"): a server that runs never
        # takes it, so it puts no test on what follows, though the state it reads is not known here
        if self.pending is not None:
            raise RuntimeError("execute() called twice")
        k.after_guard(x)
        # a test on the step's data, both of whose branches launch the same kernel: it does not matter to that kernel
        if x.numel() > 4096:
            k.both_ways(x)
        else:
            k.both_ways(x.view(-1))
        self.pending = x
        picked = resolve()
        if picked.mode == "fast":
            k.struct_field(x)
        flags.init_flags()
        batch = flags.Batch()
        flags.prepare(batch)
        if batch.split is not None:
            k.split(x)
        else:
            k.unsplit(x)
        batch.pad()
        if batch.lens is not None:
            k.lens_pad(x)
        if flags.get_flags().overlap.enabled:
            k.overlap_on(x)
        overlap = flags.get_flags().overlap
        if overlap.mode != flags.Mode.AUTO:
            k.mode_fast(x)
        else:
            k.mode_auto(x)
        holder = flags.Holder(x)
        if getattr(holder, "swa", False):
            k.swa_model(x)
        else:
            k.full_model(x)
        router = flags.Router()
        router(x, x)
''',
    "eng/flags.py": '''"""Runtime flags on a module's one context object, reached through a getter's return hint and the
fields' hints (as sglang's get_flags().moe): a store on them counts by that declared class, under its if-tests, its
value evaluated where it is stored (an enum made from a constant is that member)."""
from dataclasses import dataclass, field
from enum import Enum

import torch

from eng.kernels import mla as k

DEFAULT_MODE = "fast"


class Mode(Enum):
    AUTO = "auto"
    FAST = "fast"


@dataclass
class OverlapFlags:
    enabled: bool | None = None
    mode: Mode | None = None


@dataclass
class Flags:
    overlap: OverlapFlags = field(default_factory=OverlapFlags)


class Context:
    def __init__(self):
        self.flags = Flags()


_CONTEXT = Context()


def get_flags() -> Flags:
    return _CONTEXT.flags


def init_flags():
    overlap = get_flags().overlap
    overlap.mode = Mode(DEFAULT_MODE)


def overlap_enabled() -> bool:
    overlap = get_flags().overlap
    if overlap.enabled is None:
        overlap.enabled = False
    return overlap.enabled


@dataclass
class Batch:
    split: int | None = None
    lens: torch.Tensor | None = None

    def pad(self):
        if self.lens is not None:  # only replaces a value that is set
            self.lens = torch.cat([self.lens, self.lens[-1:]])


class Holder:
    """Holds a model of no known class: asked for a method only a class no step makes defines, it has none."""

    def __init__(self, model):
        self.model = model
        self.swa = hasattr(self.model, "is_swa_model") and self.model.is_swa_model()


class SwaModel:
    def is_swa_model(self):
        return True


def prepare(batch: Batch):
    if not overlap_enabled():
        return
    batch.split = 2


class PlatformOp:
    """An op that dispatches through a pass-through forward (as sglang's MultiPlatformOp): a keyword no caller
    passes keeps its default in the method it dispatches to, and in the calls that hand it on."""

    def __init__(self):
        self._forward_method = self.forward_cuda

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._forward_method(*args, **kwargs)


class Router(PlatformOp):
    def forward_cuda(self, x, logits, *, padded=None):
        return select(x, logits, padded=padded)


def select(x, logits, padded=None):
    return mask_padding(x, padded)


def mask_padding(x, padded):
    if padded is None:
        return x
    k.padded_mask(x)
    return x
''',
    "eng/argutil.py": '''from typing import Annotated

A = Annotated  # as sglang's arg_groups: a field is A[type, Arg(help=...)]


class Arg:
    def __init__(self, help=None):
        self.help = help
''',
    # the graph sizes' class defaults them to None; the arguments' resolution fills them in from outside
    "eng/graphconf.py": '''from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class PhaseSizes:
    sizes: Optional[List[int]] = None
    backend: str = "disabled"


@dataclass
class GraphConfig:
    prefill: PhaseSizes = field(default_factory=lambda: PhaseSizes(backend="breakable"))
    decode: PhaseSizes = field(default_factory=lambda: PhaseSizes(backend="full"))


def default_graph_config():
    return GraphConfig()


def full_graph_sizes():
    return PhaseSizes(backend="full")
''',
    "eng/args.py": '''from dataclasses import dataclass
from typing import Optional

from eng.argutil import A, Arg
from eng.graphconf import GraphConfig, default_graph_config, full_graph_sizes
from eng.runconfig import RunConfig


@dataclass
class ServerArgs:
    enable_fancy_overlap: bool = False
    enable_dp: bool = False
    dp_size: int = 1
    chunk_size: int = 4096
    draft_model_path: str = None  # no method assigns it: None holds
    model_path: str = "eng/llama"
    cache_layout: str = None  # resolved after construction
    graph_config: A[Optional[GraphConfig], Arg(help="the CUDA graphs' sizes")] = None

    def __post_init__(self):
        if self.cache_layout is None:
            self.cache_layout = "paged" if self.chunk_size > 1024 else "flat"
        self._resolve_graph_sizes()

    def _resolve_graph_sizes(self):
        config = default_graph_config()
        self.graph_config = config
        self.draft_sizes = full_graph_sizes()  # another PhaseSizes, "full": not the prefill field's
        prefill = self.graph_config.prefill
        if prefill.sizes is None:
            prefill.sizes = [1, 2, 4]

    def create_run_config(self):
        return RunConfig(model_config=self.load_model_config())
''',
    "eng/kernels/mla.py": TRITON + "".join(kernel(k) for k in MLA_KERNELS) + "".join(
        f"\n\ndef {k[:-7]}(x):\n    {k}[(1,)](x)\n" for k in MLA_KERNELS),
    "eng/mla.py": '''import torch

from eng.args import ServerArgs
from eng.environ import envs, get_bool_env_var
from eng.kernels import mla as k
from eng.moe_runner import Runner

_EXPERIMENTAL_CACHE = envs.ENG_EXPERIMENTAL_CACHE.get()


def is_lora_active(module):
    # true only when a LoRA wrapper has set its flag on the projection
    return getattr(module.proj, "set_lora", False)


class Proj(torch.nn.Module):
    def forward(self, x):
        return x


class LoraProj(Proj):
    def __init__(self):
        super().__init__()
        self.set_lora = True


class QuantMethod:
    def __init__(self, use_trt=True):
        self.use_trt = use_trt

    def apply(self, x):
        if self.use_trt:
            return k.trt(x)
        return x


class ForwardMixin:
    def forward_absorb(self, x):
        if self.use_bmm:  # set in the host class's __init__, not here
            k.bmm_quant(x)
        else:
            k.plain_quant(x)
        if is_lora_active(self):
            k.lora_correction(x)
        if _EXPERIMENTAL_CACHE:
            k.cache(x)
        if envs.ENG_FAST_ROUTER.get():
            k.router(x)
        if self.args.enable_fancy_overlap:
            k.overlap(x)
        if not get_bool_env_var("ENG_DISABLE_DEFAULT"):
            k.env_default(x)
        if x.numel() > 4096:
            k.big_batch(x)
        self.maybe_extra(x)
        self.runner.run(x)
        return self.method.apply(x)

    def maybe_extra(self, x):
        if not self.use_extra:
            return x  # an early return: what follows runs only where the test is false
        k.early_exit(x)
        return x


class MLAAttention(torch.nn.Module, ForwardMixin):
    def __init__(self):
        super().__init__()
        self.use_bmm = False
        self.use_extra = False
        self.proj = Proj()
        self.args = ServerArgs()
        self.method = QuantMethod(use_trt=False)
        self.runner = Runner()

    def forward(self, x):
        return self.forward_absorb(x)
''',
    # values from the engine's code: an attribute assigned under an env test that is off, one that __init__ assigns
    # twice (the second surely), hasattr on a class, a module flag only an unreached helper rebinds, and a
    # predicate of another object with an early return
    "eng/moe_runner.py": '''from enum import Enum

import torch

from eng.environ import get_bool_env_var
from eng.kernels import mla as k
from eng.spec import Algo, Plan
from eng.utils import _IS_HIP, FUSED_MODES, get_server_args

_capturing = False


def capturing():
    return _capturing


def route_ids(x):
    ids = torch.empty((4, 2), dtype=torch.int32, device=x.device)
    if ids.dtype == torch.int32:  # a tensor's dtype, where it is made
        k.int_ids(x)
    else:
        k.long_ids(x)


def get_moe_a2a_backend():
    return get_server_args().moe_a2a_backend


def a2a_deepep():
    b = get_moe_a2a_backend()
    return b.is_deepep() or b.is_mooncake()


def start_capture():
    global _capturing
    _capturing = True


class Policy(Enum):
    NONE = 0
    INT8 = 8


class Core:
    def compute(self, x):
        return x


class FastImpl:
    def forward(self, x):
        k.fast_impl(x)


class SlowImpl:
    def forward(self, x):
        k.slow_impl(x)


class Batch:
    planned = False  # a field's default, which no construction passes

    def __init__(self):
        self.warm = False

    def needs_init(self):
        if not self.warm:
            return True
        return False


class Gate:
    def __init__(self, backend):
        self.backend = backend

    def apply(self, x):
        if self.backend == "aiter":
            k.aiter_gate(x)
        else:
            k.triton_gate(x)


class PassedCore(Core):
    def compute(self, x):
        k.passed_model(x)


def step(model, x):
    """``model`` is what the caller hands over: ``model.compute`` is followed into its class."""
    return model.compute(x)


class Runner:
    def __init__(self, lora=False):
        self.aiter = None
        if get_bool_env_var("ENG_USE_AITER"):
            self.aiter = Core()
        self.mode = "plain"
        if not lora:
            self.mode = "fused"
        self.core = PassedCore()
        self.batch = Batch()
        self.impl = FastImpl() if get_bool_env_var("ENG_USE_AITER") else SlowImpl()
        self.gate = Gate("triton")
        if get_bool_env_var("ENG_USE_AITER"):  # a second construction, under a test decided against it
            self.aiter_gate = Gate("aiter")
        self.spec = Algo.from_string(None)
        self.future = self.spec.make_map()
        self.plan = Plan.make(self.spec)

    def run(self, x):
        if self.aiter is not None:
            k.aiter(x)
        if self.mode == "fused":
            k.fused(x)
        else:
            k.unfused(x)
        if hasattr(self.core, "compute_fast"):
            k.fast_path(x)
        if hasattr(self, "aiter_gate"):  # assigned only under a test that defaults off
            k.aiter_only(x)
        route_ids(x)
        if _IS_HIP:  # another module's platform flag
            k.hip_only(x)
        if a2a_deepep():  # a predicate that reads its own local
            k.a2a_deepep(x)
        if self.mode in FUSED_MODES:  # a list another module defines
            k.listed_mode(x)
        else:
            k.unlisted_mode(x)
        if capturing():
            k.capture(x)
        if self.batch.needs_init():
            k.ready(x)
        if self.batch.planned:
            k.planned(x)
        self.impl(x)
        self.finish(x, None)
        self.settle(x)
        if torch.cuda.get_device_capability()[0] >= 9:  # the platform: an sm90 GPU
            k.hopper(x)
        else:
            k.ampere(x)
        self.gate.apply(x)
        if x.numel() == 0:  # a step's batch is never empty
            k.empty_batch(x)
        step(self.core, x)
        self.future.publish(x)
        if not self.plan.algo.is_none():
            k.spec_step(x)
        self.plan.backend.run(x)

    def finish(self, x, scale):
        if scale is not None:  # every caller on the path passes None
            k.scaled_finish(x)

    def settle(self, x, cfg=None, policy=0):
        mode = None
        if cfg is not None:  # the caller's argument here (cfg is reassigned only after)
            cfg = cfg.resolved()
            mode = cfg.mode
        if mode is None:  # the first assignment surely runs, the second is under a test decided against it
            k.plain_mode(x)
        if policy != Policy.NONE:  # an enum member's value, read from its class
            k.quant_cache(x)
''',
    "eng/models/__init__.py": "",
    "eng/models/llama.py": '''import torch

from eng.forward_batch import ForwardBatch
from eng.kernels.linear import linear
from eng.dispatch import DispatchedAttention
from eng.layers import PlatformOp, RMSNorm, RocmRope, get_moe_cls
from eng.kernels import mla as k
from eng.mla import MLAAttention


class Attention(torch.nn.Module):
    def forward(self, x, fb: ForwardBatch):
        return fb.attn_backend.forward(x, fb)


class DenseFFN(torch.nn.Module):
    def forward(self, x):
        return k.dense_ffn(x)


class SparseFFN(torch.nn.Module):
    def forward(self, x):
        return k.sparse_ffn(x)


class DecoderLayer(torch.nn.Module):
    def __init__(self, i):
        super().__init__()
        self.norm = RMSNorm()
        self.attn = Attention()
        self.mlp = get_moe_cls()()
        self.rope = RocmRope()
        self.op = PlatformOp()
        self.mla = MLAAttention()
        # the first two layers dense, the rest sparse: each class runs, in its own layers
        self.ffn = DenseFFN() if i < 2 else SparseFFN()
        self.dispatched = DispatchedAttention(i)

    def forward(self, x, fb):
        x = self.ffn(x)
        x = self.dispatched(x, fb)
        x = self.mla(x)
        x = self.norm(x)
        x = self.rope.forward(x)
        x = self.op.forward(x)
        return self.mlp(self.attn(x, fb))


class PlainLayer(torch.nn.Module):
    def forward(self, x, fb):
        return linear(x)


class BaseModel(torch.nn.Module):
    def __init__(self, config, layer_type=PlainLayer):
        super().__init__()
        self.layers = torch.nn.ModuleList([layer_type(i) for i in range(config.num_hidden_layers)])

    def forward(self, x, fb):
        for layer in self.layers:
            x = layer(x, fb)
        return x


class LlamaModel(BaseModel):
    def __init__(self, config):
        super().__init__(config, layer_type=DecoderLayer)


def config_field(config, name):
    if isinstance(config, dict):
        return config.get(name)
    return getattr(config, name, None)


class Head(torch.nn.Module):
    """What the model's config.json says: no quantization_config in the preset's, 32 layers; it is a config object,
    not a dict, and has no index_topk."""

    def __init__(self, config):
        super().__init__()
        self.quant = getattr(config, "quantization_config", None)
        self.deep = getattr(config, "num_hidden_layers", 0) > 16
        self.sparse = config_field(config, "index_topk") is not None

    def forward(self, x):
        if self.quant is not None:
            k.quant_head(x)
        if self.sparse:
            k.sparse_head(x)
        if self.deep:
            k.deep_head(x)
        return x


class LlamaForCausalLM(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = LlamaModel(config)
        self.norm = RMSNorm()
        self.head = Head(config)

    def forward(self, x, fb):
        return self.head(self.norm(self.model(x, fb)))
''',
}

TARGET_YAML = """name: eng
repo: {root}
include: ["eng/**/*.py"]
hints:
  model_paths: ["eng/models/**"]
serving:
  gpu: sm90
  packages: {{fastlib: installed, gonelib: missing}}
  settings: {{attention_backend: fa3, moe_a2a_backend: none, moe_runner_backend: cutlass, device_type: cuda,
             quantization: fp8}}
  entries: ["eng.runner:ModelRunner.forward", "eng.sched:Scheduler.step", "eng.runconfig:Worker.execute",
            "eng.batching:BatchPicker.next_batch"]
  decode_entries: ["eng.graph:DecodeGraphRunner.replay"]
  arguments: ["eng.args:ServerArgs"]
models: [llama3-8b, qwen3-8b]
regimes: {{decode_batch: [1], prefill_tokens: [512]}}
"""
