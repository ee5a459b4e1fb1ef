#!/usr/bin/python3
"""Loads what convert_checkpoint --save-model-type mg-torch writes with Megatron-LM's own
checkpoint loader, as a Megatron user resuming or fine-tuning from it would, and checks the
weights that land in Megatron's GPTModel.

What it does, per case (each case in fresh processes, one per model-parallel rank, gloo on CPU):
  1. optionally runs our converter (HF golden model -> mg-torch at TPxPP);
  2. builds Megatron's arguments the way initialize_megatron does: Megatron's parse_args on a
     command line of `--use-checkpoint-args --use-mp-args-from-checkpoint-args --load DIR
     --ckpt-format torch --no-load-optim --no-load-rng --transformer-impl local ...`, then
     Megatron's load_args_from_checkpoint (which reads our pickled argparse.Namespace),
     validate_args and set_global_variables (no tokenizer); pipeline-layout fields that
     load_args_from_checkpoint does not take (--num-virtual-stages-per-pipeline-rank,
     --decoder-first/last-pipeline-num-layers, --account-for-embedding/loss-in-pipeline-split)
     are passed on the command line from the checkpoint's args, as a user resuming would;
  3. initialises torch.distributed (gloo) and Megatron's parallel_state at the checkpoint's
     TP/PP and the virtual pipeline size validate_args derived (initialize_megatron's call);
  4. builds Megatron's GPTModel from core_transformer_config_from_args with
     get_gpt_layer_local_spec (no Transformer Engine, no apex) the way
     megatron.training.training.get_model does: with a virtual pipeline (PP > 1 and
     virtual_pipeline_model_parallel_size set), one model chunk per virtual stage, each built
     after parallel_state.set_virtual_pipeline_model_parallel_rank(i), pre_process /
     post_process from is_pipeline_first_stage() / is_pipeline_last_stage() under that rank;
  5. calls megatron.training.checkpointing.load_checkpoint(chunks, None, None, strict=True)
     (Megatron loads 'model', or 'model0', 'model1', ... into chunk 0, 1, ...);
  6. compares every entry of each chunk's state_dict with (a) the tensor in this rank's
     model_optim_rng.pt ('model' or 'model{i}') and (b), with --hf, the shard laid out here,
     independently of our C++, from the Hugging Face source (LLaMA-style and GPT-2-style), the
     chunk's global layers given by make_megatron_torch_fixture.layer_chunks and checked
     against the layer_number Megatron gave each TransformerLayer; and checks Megatron's own
     vocabulary padding rule (_vocab_size_with_padding) reproduces the checkpoint's
     padded_vocab_size at the checkpoint's TP.
It prints PASS/FAIL per case and exits non-zero if any case fails.

Shims (installed in each worker before Megatron is imported; Megatron's files are untouched).
Megatron core_v0.12 targets PyTorch >= 2; Debian's python3-torch is 1.13, so:
  * torch.distributed._coalescing_manager (imported by core.distributed.param_and_grad_buffer,
    used only by DDP grad-bucket communication): a stub that raises if ever entered.
  * megatron.core.jit: replaced by a module whose jit_fuser is the identity; on torch < 2.2
    Megatron would torch.jit.script methods (L2Norm._norm, fused bias-gelu/swiglu, ...) and
    1.13's TorchScript cannot compile them at import. Only affects kernel fusion, never names,
    shapes or loading.
  * torch.distributed.checkpoint.* (new in torch 2.0; used by the torch_dist / torch_dcp
    formats and imported by megatron.core.dist_checkpointing at import time): stub modules whose
    every attribute is a placeholder class that raises when called or instantiated. The legacy
    torch format never calls them; any use would fail loudly, not silently.
  * torch.distributed.new_group: Megatron's parallel_state.create_group always passes
    use_local_synchronization=False (torch >= 2.1); the shim drops that keyword when it is False
    (1.13's new_group synchronises globally, which is what False means) and refuses True.
  * einops (only if not installed; imported by vision models): stub functions that raise.
  * torch.nn.RMSNorm (torch >= 2.4; what Megatron's WrappedTorchNorm uses for RMSNorm under the
    local spec): if missing, a minimal module with torch's parameter layout (`weight` of shape
    normalized_shape) and formula, and WrappedTorchNorm's torch-version gate is told 2.4 is
    present (that module only). The parameter name and shape are what loading depends on.
  * megatron.training.checkpointing's `torch` name (that module only, when CUDA is absent): a
    proxy to torch whose tensor() maps device='cuda' to 'cpu'. Its only use on this path is
    read_metadata's all-reduce (MAX) of the tracked iteration across ranks, which gloo does on CPU.
  * torch.Tensor.cuda (when CUDA is absent): the identity. Megatron calls it in
    LanguageModule.setup_embeddings_and_output_layer (tied embeddings, PP > 1) before the gloo
    all-reduce that gives the last stage's output-layer copy the first stage's initial values;
    the tensor simply stays on the CPU. load_checkpoint then overwrites both copies.
Nothing else in the load path is replaced: argument parsing, load_args_from_checkpoint,
_load_base_checkpoint, check_checkpoint_args, GPTModel and load_state_dict(strict=True) are
Megatron's.

Run (Debian's interpreter; Megatron core_v0.12.1 checked out anywhere, e.g.
`git --git-dir=MIRROR archive core_v0.12.1 | tar -x -C /tmp/megatron`):

  /usr/bin/python3 tests/tools/run_megatron_load_checkpoint.py --megatron /tmp/megatron \
      --converter build/ci/tools/convert_checkpoint            # standard cases, see CASES
  /usr/bin/python3 tests/tools/run_megatron_load_checkpoint.py --megatron /tmp/megatron \
      --ckpt /tmp/mt [--hf tests/golden/llama_tiny]              # an existing mg-torch dir

Standard cases (--converter): LLaMA-style tests/golden/llama_tiny (RMSNorm, SwiGLU, GQA, RoPE,
untied) and GPT-2-style tests/golden/gpt2_tiny (LayerNorm, GELU, biases, tied, learned absolute
positions), each at TP1xPP1 and TP2xPP2 (4 gloo processes), and the 6-layer LLaMA
tests/tools/data/llama6_hf at TP2xPP2 with a virtual pipeline of one layer per chunk
(llama6:2:2:vpp1: --num-layers-per-virtual-pipeline-stage 1, 3 chunks per rank). --cases
selects cases as model:tp:pp[:vppN], e.g. --cases llama:1:1,llama6:1:2:vpp1. Not part of CTest
(CI has no PyTorch).
"""
import argparse
import collections
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
CASES = {  # name: (Hugging Face directory, --model-type-hf)
    "llama": ("tests/golden/llama_tiny", "llama2"),
    "gpt2": ("tests/golden/gpt2_tiny", "gpt2"),
    "llama6": ("tests/tools/data/llama6_hf", "llama2"),  # 6 layers: enough for virtual pipelines
}
# model:tp:pp[:vppN], vppN: --num-layers-per-virtual-pipeline-stage N (interleaved pipeline).
DEFAULT_CASES = "llama:1:1,gpt2:1:1,llama:2:2,gpt2:2:2,llama6:2:2:vpp1"


# ----------------------------------------------------------------------------------------------
# Shims (see the docstring)
# ----------------------------------------------------------------------------------------------
class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves torch.distributed.checkpoint[.*] as stub packages of raising placeholders."""

    prefixes = ("torch.distributed.checkpoint",)

    def find_spec(self, fullname, path, target=None):
        if any(fullname == p or fullname.startswith(p + ".") for p in self.prefixes):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = types.ModuleType(spec.name)
        mod.__path__ = []

        def __getattr__(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)

            def _new(cls, *a, **k):
                raise RuntimeError(f"shim: {spec.name}.{attr} is a stub (torch < 2.0)")

            placeholder = type(attr, (), {"__new__": _new, "__module__": spec.name})
            setattr(mod, attr, placeholder)
            return placeholder

        mod.__getattr__ = __getattr__
        return mod

    def exec_module(self, module):
        pass


def install_shims(megatron_dir):
    import torch
    import torch.distributed as dist

    shims = []
    if not hasattr(dist, "_coalescing_manager"):
        @contextlib.contextmanager
        def _coalescing_manager(*a, **k):
            raise RuntimeError("shim: torch.distributed._coalescing_manager is a stub (torch < 2.0)")
            yield  # pragma: no cover

        dist._coalescing_manager = _coalescing_manager
        shims.append("torch.distributed._coalescing_manager")

    import inspect

    if "use_local_synchronization" not in inspect.signature(dist.new_group).parameters:
        real_new_group = dist.new_group

        def new_group(*a, use_local_synchronization=False, **k):
            assert not use_local_synchronization, "shim: torch < 2.1 has no use_local_synchronization"
            return real_new_group(*a, **k)

        dist.new_group = new_group
        shims.append("torch.distributed.new_group(use_local_synchronization=False)")

    if importlib.util.find_spec("torch.distributed.checkpoint") is None:
        sys.meta_path.insert(0, _StubFinder())
        shims.append("torch.distributed.checkpoint.*")

    if importlib.util.find_spec("einops") is None:
        einops = types.ModuleType("einops")

        def _missing(*a, **k):
            raise RuntimeError("shim: einops is not installed")

        einops.rearrange = einops.repeat = einops.reduce = _missing
        sys.modules["einops"] = einops
        shims.append("einops")

    if int(torch.__version__.split(".")[0]) < 2:
        jit = types.ModuleType("megatron.core.jit")
        jit.jit_fuser = lambda fn: fn
        sys.modules["megatron.core.jit"] = jit
        shims.append("megatron.core.jit.jit_fuser=identity")

    if not hasattr(torch.nn, "RMSNorm"):
        class RMSNorm(torch.nn.Module):
            def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
                super().__init__()
                if isinstance(normalized_shape, int):
                    normalized_shape = (normalized_shape,)
                self.normalized_shape = tuple(normalized_shape)
                self.eps = eps
                self.elementwise_affine = elementwise_affine
                if elementwise_affine:
                    self.weight = torch.nn.Parameter(torch.ones(self.normalized_shape, device=device, dtype=dtype))
                else:
                    self.register_parameter("weight", None)

            def forward(self, x):
                dims = tuple(range(-len(self.normalized_shape), 0))
                eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
                y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
                return y * self.weight if self.weight is not None else y

        torch.nn.RMSNorm = RMSNorm
        shims.append("torch.nn.RMSNorm")

    sys.path.insert(0, os.path.abspath(megatron_dir))
    if "torch.nn.RMSNorm" in shims:
        import megatron.core.transformer.torch_norm as torch_norm

        real = torch_norm.is_torch_min_version
        torch_norm.is_torch_min_version = lambda v, *a, **k: True if v == "2.4.0a0" else real(v, *a, **k)
        shims.append("torch_norm.is_torch_min_version('2.4.0a0')=True")
    if not torch.cuda.is_available():
        # read_metadata all-reduces the tracked iteration in a device='cuda' tensor; on a CPU-only
        # build that tensor goes to the CPU (gloo all-reduces it the same way).
        import megatron.training.checkpointing as checkpointing

        class _TorchOnCpu(types.ModuleType):
            def __getattr__(self, name):
                return getattr(torch, name)

            @staticmethod
            def tensor(*a, **k):
                if str(k.get("device", "")).startswith("cuda"):
                    k["device"] = "cpu"
                return torch.tensor(*a, **k)

        checkpointing.torch = _TorchOnCpu("torch")
        shims.append("megatron.training.checkpointing: torch.tensor(device='cuda') -> cpu")
        # LanguageModule.setup_embeddings_and_output_layer moves the tied word-embedding copy to
        # CUDA before all-reducing it between the first and last pipeline stages.
        torch.Tensor.cuda = lambda self, *a, **k: self
        shims.append("torch.Tensor.cuda=identity")
    return shims


# ----------------------------------------------------------------------------------------------
# Expected shards, laid out here from the Hugging Face source (independent of the C++ writer)
# ----------------------------------------------------------------------------------------------
def hf_full_megatron(hf_dir, padded_vocab):
    """Megatron core names -> full (unsharded) tensors of the HF model at `hf_dir`."""
    import torch

    sys.path.insert(0, HERE)
    from make_megatron_torch_fixture import read_safetensors

    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    hf = read_safetensors(os.path.join(hf_dir, "model.safetensors"))

    def pad(w):
        return torch.cat([w, torch.zeros(padded_vocab - w.shape[0], w.shape[1])], 0)

    full = collections.OrderedDict()
    if cfg["model_type"] == "gpt2":
        h, L, nh = cfg["n_embd"], cfg["n_layer"], cfg["n_head"]
        d = h // nh
        full["embedding.word_embeddings.weight"] = pad(hf["transformer.wte.weight"])
        full["embedding.position_embeddings.weight"] = hf["transformer.wpe.weight"]
        for i in range(L):
            p, o = f"transformer.h.{i}.", f"decoder.layers.{i}."
            # HF Conv1D stores [in, out]; c_attn's out is [q | k | v], Megatron's rows are per head [q_h; k_h; v_h].
            qkv_w = hf[p + "attn.c_attn.weight"].t().reshape(3, nh, d, h).transpose(0, 1).reshape(3 * h, h)
            qkv_b = hf[p + "attn.c_attn.bias"].reshape(3, nh, d).transpose(0, 1).reshape(3 * h)
            full[o + "input_layernorm.weight"] = hf[p + "ln_1.weight"]
            full[o + "input_layernorm.bias"] = hf[p + "ln_1.bias"]
            full[o + "self_attention.linear_qkv.weight"] = qkv_w.contiguous()
            full[o + "self_attention.linear_qkv.bias"] = qkv_b.contiguous()
            full[o + "self_attention.linear_proj.weight"] = hf[p + "attn.c_proj.weight"].t().contiguous()
            full[o + "self_attention.linear_proj.bias"] = hf[p + "attn.c_proj.bias"]
            full[o + "pre_mlp_layernorm.weight"] = hf[p + "ln_2.weight"]
            full[o + "pre_mlp_layernorm.bias"] = hf[p + "ln_2.bias"]
            full[o + "mlp.linear_fc1.weight"] = hf[p + "mlp.c_fc.weight"].t().contiguous()
            full[o + "mlp.linear_fc1.bias"] = hf[p + "mlp.c_fc.bias"]
            full[o + "mlp.linear_fc2.weight"] = hf[p + "mlp.c_proj.weight"].t().contiguous()
            full[o + "mlp.linear_fc2.bias"] = hf[p + "mlp.c_proj.bias"]
        full["decoder.final_layernorm.weight"] = hf["transformer.ln_f.weight"]
        full["decoder.final_layernorm.bias"] = hf["transformer.ln_f.bias"]
        full["output_layer.weight"] = pad(hf["transformer.wte.weight"])  # tied
    else:  # LLaMA family
        h, L = cfg["hidden_size"], cfg["num_hidden_layers"]
        nh, ng = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
        d = h // nh
        full["embedding.word_embeddings.weight"] = pad(hf["model.embed_tokens.weight"])
        for i in range(L):
            p, o = f"model.layers.{i}.", f"decoder.layers.{i}."
            q = hf[p + "self_attn.q_proj.weight"].view(ng, nh // ng * d, h)
            k = hf[p + "self_attn.k_proj.weight"].view(ng, d, h)
            v = hf[p + "self_attn.v_proj.weight"].view(ng, d, h)
            full[o + "input_layernorm.weight"] = hf[p + "input_layernorm.weight"]
            full[o + "self_attention.linear_qkv.weight"] = torch.cat([q, k, v], 1).reshape(-1, h)
            full[o + "self_attention.linear_proj.weight"] = hf[p + "self_attn.o_proj.weight"]
            full[o + "pre_mlp_layernorm.weight"] = hf[p + "post_attention_layernorm.weight"]
            full[o + "mlp.linear_fc1.weight"] = torch.cat([hf[p + "mlp.gate_proj.weight"], hf[p + "mlp.up_proj.weight"]], 0)
            full[o + "mlp.linear_fc2.weight"] = hf[p + "mlp.down_proj.weight"]
        full["decoder.final_layernorm.weight"] = hf["model.norm.weight"]
        head = hf["lm_head.weight"] if "lm_head.weight" in hf else hf["model.embed_tokens.weight"]
        full["output_layer.weight"] = pad(head)
    return full, L


def expected_shard(full, layers, tp, pp, t, p, swiglu, tied, v=0, vp=1):
    """Model chunk v of pipeline stage p at tensor rank t, sharded as Megatron's tensor-parallel
    layers hold it. layers: the global layer of each local layer of the chunk (layer_chunks).
    Chunk 0 of stage 0 holds the embedding, the last chunk of the last stage the final norm and
    the output layer."""
    import torch

    def shard(name, w):
        if name.endswith("linear_fc1.weight") and swiglu:  # [gate; up]: each rank its rows of both
            gate, up = w.chunk(2, 0)
            return torch.cat([gate.chunk(tp, 0)[t], up.chunk(tp, 0)[t]], 0)
        if name.endswith(("linear_qkv.weight", "linear_qkv.bias", "linear_fc1.weight", "linear_fc1.bias",
                          "word_embeddings.weight")) or name == "output_layer.weight":
            return w.chunk(tp, 0)[t]
        if name.endswith(("linear_proj.weight", "linear_fc2.weight")):
            return w.chunk(tp, 1)[t]
        return w  # norms, row-parallel biases, position embeddings: replicated

    local = {g: i for i, g in enumerate(layers)}
    first, last = (p, v) == (0, 0), (p, v) == (pp - 1, vp - 1)
    out = {}
    for name, w in full.items():
        if name.startswith("decoder.layers."):
            g = int(name.split(".")[2])
            if g in local:
                out[name.replace(f"decoder.layers.{g}.", f"decoder.layers.{local[g]}.", 1)] = shard(name, w)
        elif name.startswith("embedding."):
            if first:
                out[name] = shard(name, w)
        elif name == "output_layer.weight":
            # Tied at PP1: the output layer reuses the embedding and has no weight of its own.
            if last and not (tied and pp == 1):
                out[name] = shard(name, w)
        elif last:
            out[name] = shard(name, w)
    return out


# ----------------------------------------------------------------------------------------------
# One rank
# ----------------------------------------------------------------------------------------------
def worker(rank, world, port, megatron_dir, ckpt_dir, hf_dir, result_dir, vocab_rule=False):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), CUDA_VISIBLE_DEVICES="",
                      CUDA_DEVICE_MAX_CONNECTIONS="1")  # what Megatron asks of TP runs
    msgs, ok = [], True
    try:
        import torch

        torch.set_num_threads(1)
        shims = install_shims(megatron_dir)
        from megatron.core import parallel_state as mpu
        from megatron.core.models.gpt import GPTModel
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
        from megatron.training import arguments as margs
        from megatron.training import checkpointing
        from megatron.training.global_vars import set_global_variables
        from megatron.training.tokenizer.tokenizer import _vocab_size_with_padding

        tracked = open(os.path.join(ckpt_dir, "latest_checkpointed_iteration.txt")).read().strip()
        it_dir = os.path.join(ckpt_dir, "release" if tracked == "release" else f"iter_{int(tracked):07d}")
        rank0_file = checkpointing.find_checkpoint_rank_0(ckpt_dir, 0 if tracked == "release" else int(tracked),
                                                          tracked == "release")
        ck = torch.load(rank0_file, map_location="cpu")["args"]
        tp, pp = ck.tensor_model_parallel_size, ck.pipeline_model_parallel_size
        assert tp * pp == world, (tp, pp, world)

        # Megatron's own argument flow (initialize_megatron's order), our args filling the model.
        argv = ["--use-checkpoint-args", "--use-mp-args-from-checkpoint-args", "--load", ckpt_dir,
                "--ckpt-format", "torch", "--no-load-optim", "--no-load-rng",
                "--transformer-impl", "local", "--use-cpu-initialization", "--no-gradient-accumulation-fusion",
                "--no-masked-softmax-fusion", "--no-bias-gelu-fusion", "--no-bias-swiglu-fusion",
                "--no-bias-dropout-fusion", "--no-rope-fusion", "--no-persist-layer-norm",
                "--seq-length", str(min(16, ck.max_position_embeddings)),
                "--micro-batch-size", "1", "--global-batch-size", "1",
                "--tokenizer-type", "NullTokenizer", "--vocab-size", str(ck.vocab_size),
                "--make-vocab-size-divisible-by", str(ck.make_vocab_size_divisible_by),
                # Fields load_args_from_checkpoint does not take from a checkpoint; a user passes them.
                "--norm-epsilon", repr(ck.norm_epsilon)]
        if getattr(ck, "openai_gelu", False):
            argv.append("--openai-gelu")
        if getattr(ck, "use_rope_scaling", False):
            argv += ["--use-rope-scaling", "--rope-scaling-factor", repr(ck.rope_scaling_factor)]
        # Pipeline layout fields load_args_from_checkpoint does not take either (it takes the
        # virtual size and num_layers_per_virtual_pipeline_stage): a user resuming passes them.
        if (getattr(ck, "num_virtual_stages_per_pipeline_rank", None) is not None
                and getattr(ck, "num_layers_per_virtual_pipeline_stage", None) is None):
            argv += ["--num-virtual-stages-per-pipeline-rank", str(ck.num_virtual_stages_per_pipeline_rank)]
        for field in ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"):
            if getattr(ck, field, None) is not None:
                argv += ["--" + field.replace("_", "-"), str(getattr(ck, field))]
        for field in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"):
            if getattr(ck, field, False):
                argv.append("--" + field.replace("_", "-"))
        sys.argv = ["megatron"] + argv
        args = margs.parse_args()
        checkpointing.load_args_from_checkpoint(args)
        margs.validate_args(args, {})
        set_global_variables(args, build_tokenizer=False)

        # Megatron's vocabulary padding rule (what its tokenizer build would set) at this TP.
        megatron_padded = _vocab_size_with_padding(ck.vocab_size, args, logging_enabled=False)
        if megatron_padded != ck.padded_vocab_size:
            ok = False
            msgs.append(f"FAIL vocab padding: Megatron pads vocab_size {ck.vocab_size} with "
                        f"make_vocab_size_divisible_by {ck.make_vocab_size_divisible_by} x TP {tp} to "
                        f"{megatron_padded}, the checkpoint holds padded_vocab_size {ck.padded_vocab_size} "
                        f"(loading below uses " + ("Megatron's, as a run that builds its tokenizer does)" if vocab_rule
                        else "the checkpoint's, as --use-checkpoint-args without a tokenizer does)"))
            if vocab_rule:
                args.padded_vocab_size = megatron_padded

        # validate_args derived virtual_pipeline_model_parallel_size from the checkpoint's
        # num_layers_per_virtual_pipeline_stage (or num_virtual_stages_per_pipeline_rank).
        vpp = args.virtual_pipeline_model_parallel_size
        if vpp != getattr(ck, "virtual_pipeline_model_parallel_size", None):
            ok = False
            msgs.append(f"FAIL rank {rank}: Megatron derives virtual_pipeline_model_parallel_size {vpp}, the "
                        f"checkpoint records {getattr(ck, 'virtual_pipeline_model_parallel_size', None)}")
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
        # initialize_megatron's call (_initialize_distributed), virtual size included.
        mpu.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                                      virtual_pipeline_model_parallel_size=vpp)
        config = margs.core_transformer_config_from_args(args)
        spec = get_gpt_layer_local_spec(normalization=args.normalization)

        def model_provider(pre_process, post_process):  # pretrain_gpt.py's, local spec
            return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=args.padded_vocab_size,
                            max_sequence_length=args.max_position_embeddings,
                            pre_process=pre_process, post_process=post_process,
                            share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
                            position_embedding_type=args.position_embedding_type,
                            rotary_percent=args.rotary_percent, rotary_base=args.rotary_base,
                            rope_scaling=args.use_rope_scaling)

        # megatron.training.training.get_model's build_model: one model chunk per virtual stage,
        # pre/post_process decided after the virtual rank is set.
        if mpu.get_pipeline_model_parallel_world_size() > 1 and vpp is not None:
            models = []
            for i in range(vpp):
                mpu.set_virtual_pipeline_model_parallel_rank(i)
                models.append(model_provider(pre_process=mpu.is_pipeline_first_stage(),
                                             post_process=mpu.is_pipeline_last_stage()))
        else:
            models = [model_provider(pre_process=mpu.is_pipeline_first_stage(),
                                     post_process=mpu.is_pipeline_last_stage())]
        befores = [{k: v.clone() for k, v in m.state_dict().items() if torch.is_tensor(v)} for m in models]

        iteration, _ = checkpointing.load_checkpoint(models, None, None, strict=True)

        t, p = mpu.get_tensor_model_parallel_rank(), mpu.get_pipeline_model_parallel_rank()
        name = f"mp_rank_{t:02d}" if pp == 1 else f"mp_rank_{t:02d}_{p:03d}"
        rank_sd = torch.load(os.path.join(it_dir, name, "model_optim_rng.pt"), map_location="cpu")
        file_keys = sorted(k for k in rank_sd if k == "model" or (k.startswith("model") and k[5:].isdigit()))
        want_keys = ["model"] if len(models) == 1 else [f"model{i}" for i in range(len(models))]
        if sorted(file_keys) != sorted(want_keys):
            ok = False
            msgs.append(f"FAIL {name}: rank file holds {file_keys}, Megatron's {len(models)} model chunk(s) "
                        f"load {want_keys}")
        if hf_dir:
            sys.path.insert(0, HERE)
            from make_megatron_torch_fixture import layer_chunks

            full, L = hf_full_megatron(hf_dir, ck.padded_vocab_size)
            chunks = layer_chunks(L, pp, vpp if len(models) > 1 else None,
                                  getattr(args, "decoder_first_pipeline_num_layers", None),
                                  getattr(args, "decoder_last_pipeline_num_layers", None),
                                  bool(getattr(args, "account_for_embedding_in_pipeline_split", False)),
                                  bool(getattr(args, "account_for_loss_in_pipeline_split", False)))
        for i, (model, key, before) in enumerate(zip(models, want_keys, befores)):
            where = name if len(models) == 1 else f"{name} {key}"
            on_disk = rank_sd.get(key, {})
            got = {k: v for k, v in model.state_dict().items() if torch.is_tensor(v)}
            if set(got) != set(on_disk):
                ok = False
                msgs.append(f"FAIL {where}: keys differ: only model {sorted(set(got) - set(on_disk))}, "
                            f"only file {sorted(set(on_disk) - set(got))}")
            for k in sorted(set(got) & set(on_disk)):
                if got[k].shape != on_disk[k].shape or not torch.equal(got[k], on_disk[k]):
                    ok = False
                    msgs.append(f"FAIL {where}: {k} loaded {tuple(got[k].shape)} != file {tuple(on_disk[k].shape)}")
            changed = sum(1 for k in got if k in before and not torch.equal(before[k], got[k]))
            # Megatron's own global numbering of this chunk's layers (TransformerLayer.layer_number,
            # 1-based, from its _get_layer_offset).
            megatron_layers = [layer.layer_number - 1 for layer in model.decoder.layers]
            msgs.append(f"{where}: load_checkpoint returned iteration {iteration}; {len(got)} tensors loaded, "
                        f"{changed} differ from the random init; global layers {megatron_layers}; "
                        f"checkpoint_version {checkpointing.get_checkpoint_version()}")
            if hf_dir:
                layers = chunks[(p, i)]
                if layers != megatron_layers:
                    ok = False
                    msgs.append(f"FAIL {where}: Megatron builds global layers {megatron_layers}, "
                                f"the expected layout (layer_chunks) has {layers}")
                want = expected_shard(full, layers, tp, pp, t, p, args.swiglu,
                                      not args.untie_embeddings_and_output_weights, v=i, vp=len(models))
                if set(want) != set(got):
                    ok = False
                    msgs.append(f"FAIL {where}: keys vs HF layout: only model {sorted(set(got) - set(want))}, "
                                f"only HF {sorted(set(want) - set(got))}")
                bad = [k for k in sorted(set(want) & set(got))
                       if want[k].shape != got[k].shape or not torch.equal(want[k], got[k])]
                if bad:
                    ok = False
                    msgs.append(f"FAIL {where}: differ from the HF source laid out as Megatron's shards: {bad}")
                else:
                    msgs.append(f"{where}: {len(want)} tensors equal the HF source in Megatron's layout")
        if rank == 0:
            msgs.insert(0, f"shims: {', '.join(shims) or 'none'}")
        torch.distributed.barrier()
    except BaseException as e:  # noqa: BLE001 (SystemExit from Megatron's sys.exit() too)
        ok = False
        msgs.append(f"FAIL rank {rank}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
    with open(os.path.join(result_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"ok": ok, "msgs": msgs}, f)
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(label, megatron_dir, ckpt_dir, hf_dir, timeout, vocab_rule=False):
    tracked = open(os.path.join(ckpt_dir, "latest_checkpointed_iteration.txt")).read().strip()
    it_dir = os.path.join(ckpt_dir, "release" if tracked == "release" else f"iter_{int(tracked):07d}")
    world = len([d for d in os.listdir(it_dir) if d.startswith("mp_rank_")])
    port = free_port()
    with tempfile.TemporaryDirectory() as result_dir:
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(r), str(world), str(port),
                                   megatron_dir, ckpt_dir, hf_dir or "", result_dir, "1" if vocab_rule else "0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in range(world)]
        logs, ok, msgs = [], True, []
        for r, pr in enumerate(procs):
            try:
                out, _ = pr.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                pr.kill()
                out, _ = pr.communicate()
                ok = False
                msgs.append(f"FAIL rank {r}: timed out after {timeout}s")
            logs.append(out)
            path = os.path.join(result_dir, f"rank{r}.json")
            if os.path.exists(path):
                res = json.load(open(path))
                ok &= res["ok"]
                msgs += res["msgs"]
            else:
                ok = False
                msgs.append(f"FAIL rank {r}: no result (exit {pr.returncode})")
    for m in msgs:
        print("   ", m.replace("\n", "\n    "))
    if not ok:
        for r, out in enumerate(logs):
            print(f"    --- rank {r} output (last 15 lines) ---")
            print("\n".join("    " + line for line in out.splitlines()[-15:]))
    print(f"{'PASS' if ok else 'FAIL'} {label}", flush=True)
    return ok


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        r, world, port, megatron_dir, ckpt_dir, hf_dir, result_dir, vocab_rule = sys.argv[2:10]
        worker(int(r), int(world), int(port), megatron_dir, ckpt_dir, hf_dir or None, result_dir, vocab_rule == "1")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megatron", required=True, help="Megatron-LM core_v0.12.1 checkout (has megatron/)")
    parser.add_argument("--converter", help="convert_checkpoint binary: run the standard cases")
    parser.add_argument("--cases", default=DEFAULT_CASES, help="with --converter: model:tp:pp[:vppN],... "
                        f"(models {sorted(CASES)}; default {DEFAULT_CASES})")
    parser.add_argument("--ckpt", help="an existing mg-torch checkpoint directory instead")
    parser.add_argument("--hf", help="with --ckpt: the Hugging Face directory it was converted from")
    parser.add_argument("--work", help="where --converter writes (default: a temporary directory)")
    parser.add_argument("--megatron-vocab-padding", action="store_true",
                        help="build the model at Megatron's padded vocabulary (_vocab_size_with_padding at the "
                        "checkpoint's TP, what a run with a tokenizer gets) instead of the checkpoint's")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per case")
    opts = parser.parse_args()
    if not os.path.isdir(os.path.join(opts.megatron, "megatron", "training")):
        parser.error(f"{opts.megatron} is not a Megatron-LM checkout")
    if bool(opts.converter) == bool(opts.ckpt):
        parser.error("give --converter or --ckpt")
    results = []
    if opts.ckpt:
        results.append(run_case(opts.ckpt, opts.megatron, os.path.abspath(opts.ckpt),
                                opts.hf and os.path.abspath(opts.hf), opts.timeout,
                                opts.megatron_vocab_padding))
    else:
        work = opts.work or tempfile.mkdtemp(prefix="mgload_")
        for case in opts.cases.split(","):
            model, tp, pp, *extra = case.split(":")
            vpp_layers = None
            if extra:
                if len(extra) != 1 or not extra[0].startswith("vpp") or not extra[0][3:].isdigit():
                    parser.error(f"case {case}: model:tp:pp or model:tp:pp:vppN")
                vpp_layers = extra[0][3:]
            src, hf_type = CASES[model]
            src = os.path.join(REPO, src)
            out = os.path.join(work, f"{model}_tp{tp}pp{pp}" + (f"vpp{vpp_layers}" if vpp_layers else ""))
            cmd = [opts.converter, "--load-model-type", "hf", "--save-model-type", "mg-torch", "--load-dir", src,
                   "--save-dir", out, "--target-tensor-parallel-size", tp, "--target-pipeline-parallel-size", pp,
                   "--model-type-hf", hf_type]
            if vpp_layers:
                cmd += ["--num-layers-per-virtual-pipeline-stage", vpp_layers]
            label = f"{model} TP{tp}xPP{pp}" + (f" (virtual pipeline, {vpp_layers} layer(s) per chunk)"
                                                 if vpp_layers else "")
            print("$", " ".join(cmd), flush=True)
            conv = subprocess.run(cmd, capture_output=True, text=True)
            if conv.returncode != 0:
                print(conv.stdout + conv.stderr)
                print(f"FAIL {label}: converter exited {conv.returncode}")
                results.append(False)
                continue
            results.append(run_case(label, opts.megatron, out, src, opts.timeout,
                                    opts.megatron_vocab_padding))
    print(f"{sum(results)}/{len(results)} cases passed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
