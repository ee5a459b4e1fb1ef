#!/usr/bin/python3
"""Writes small Megatron-LM legacy (--ckpt-format torch) checkpoints WITH optimizer state, made by
Megatron-LM core_v0.12.1's own code, as a Megatron user's training run saves them, plus an
independent record of the Adam state the live optimizer held (expected_optimizer.json).

Cases (one output directory each under --out, default tests/checkpointing/data):
  megatron_optim_fp32          fp32 model; FP32Optimizer around the Adam fallback (see below)
  megatron_optim_bf16          --bf16; Float16Module model, Float16OptimizerWithFloat16Params
                               (saves the fp32 main params as 'fp32_from_fp16_params')
  megatron_optim_distopt_bf16  --bf16 --use-distributed-optimizer: DistributedOptimizer; the
                               per-parameter state goes to distrib_optim.pt (save_parameter_state)

What it does, per case (in a fresh process, since Megatron keeps global state; world size 1,
gloo, CPU; the process works in a scratch directory with relative paths, so the pickled args say
load='llama_tiny_mg_torch', save='megatron_optim_<case>' on every run and machine):
  1. (once) converts the tiny LLaMA golden model tests/golden/llama_tiny (2 layers, hidden 32,
     4 heads, 2 query groups, vocabulary 100 padded to 128, RMSNorm, SwiGLU, RoPE, untied; 26784
     parameters) to mg-torch at TP1 PP1 with our converter, exactly as
     run_megatron_load_checkpoint.py's --converter path does (a 'release' checkpoint, no optimizer);
  2. builds Megatron's arguments the way initialize_megatron does: parse_args on the command line
     in worker() (run_megatron_load_checkpoint's flags, plus --optimizer adam --lr 1e-3 --min-lr 1e-4
     --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8 --clip-grad 1.0
     --train-iters 10 --lr-warmup-iters 2 --lr-decay-style cosine --micro-batch-size 2
     --global-batch-size 2 --seq-length 16 --seed 1234 --save-interval 3 --attention-dropout 0
     --hidden-dropout 0 --save DIR --no-save-rng [--bf16] [--use-distributed-optimizer]),
     load_args_from_checkpoint, validate_args (which, for bf16, turns on
     accumulate_allreduce_grads_in_fp32: fp32 grad buffers), set_global_variables without a
     tokenizer; initialises gloo and parallel_state (TP1 PP1 DP1), Megatron's _set_random_seed
     (which skips the CUDA RNG tracker when no CUDA device exists) and its rerun state machine;
  3. calls megatron.training.training.setup_model_and_optimizer(pretrain_gpt.model_provider,
     ModelType.encoder_or_decoder), i.e. Megatron's own: get_model (GPTModel from the local spec,
     model.cuda(), Float16Module for bf16, then megatron.core.distributed.DistributedDataParallel
     with the DistributedDataParallelConfig get_model builds from args), OptimizerConfig from args,
     get_megatron_optimizer, get_optimizer_param_scheduler, then load_checkpoint(model, optimizer,
     scheduler) with --no-load-optim --no-load-rng, strict=True (for bf16 it then calls
     optimizer.reload_model_params(): the fp32 main params start from the loaded bf16 weights).
     The loaded weights are checked against the Hugging Face source (run_megatron_load_checkpoint's
     hf_full_megatron; for bf16, the source rounded to bf16);
  4. runs 3 iterations of megatron.training.training.train_step(pretrain_gpt.forward_step, ...)
     after the setup train() does (model.train(), config.grad_scale_func = optimizer.scale_loss,
     config.timers, config.finalize_model_grads_func = finalize_model_grads, the rerun state machine's
     current_iteration, args.curr_iteration; args.consumed_train_samples += the global batch after
     each step; like train(), it leaves args.iteration at the loaded 0). Forward, pretrain_gpt's
     get_batch and loss_func (sum of the masked per-token losses; the schedule divides by the token
     count), backward through DDP (zero_grad_buffer, forward_backward_no_pipelining,
     finalize_model_grads -> finish_grad_sync), optimizer.step() (grad-norm clipping at 1.0: the
     norms are ~5, so it clips) and the scheduler step (increment = micro batch x microbatches x
     DP = 2) are all Megatron's. Iteration it's micro batch (2 x 16 tokens) is built as Megatron's
     GPTDataset builds samples and the DataLoader collates them: text[b, j] = (7 * (17 * b + j) +
     13 * it) % 100 (17 = seq + 1 tokens a sample), tokens = text[:, :-1], labels = text[:, 1:],
     attention_mask, loss_mask and position_ids from
     megatron.core.datasets.gpt_dataset._get_ltor_masks_and_position_ids (no EOD resets: causal
     mask, all-ones loss mask, positions 0..15), stacked by torch's default_collate;
  5. saves with megatron.training.checkpointing.save_checkpoint(3, model, optimizer, scheduler,
     num_floating_point_operations_so_far=0):
       DIR/latest_checkpointed_iteration.txt                "3"
       DIR/iter_0000003/mp_rank_00/model_optim_rng.pt       {'args' (argparse.Namespace; it also
           pickles megatron.core.enums.ModelType, megatron.core.transformer.enums.AttnBackend),
           'checkpoint_version': 3.0, 'iteration': 3, 'model', 'optimizer', 'opt_param_scheduler',
           'rerun_state_machine' (a dict with megatron.core.rerun_state_machine enums),
           'num_floating_point_operations_so_far': 0}   (no 'rng_state': --no-save-rng)
       DIR/iter_0000003/mp_rank_00/distrib_optim.pt         (distributed optimizer only)
     'model' is Megatron's state_dict_for_save_checkpoint(): the 15 weights (bf16 for --bf16) AND
     a '<linear>._extra_state': None entry for each of the 9 local-spec linear layers. With the
     distributed optimizer the weights are views into ONE bf16 storage (DDP's 27008-element param
     buffer; parameters in reverse order, each start padded to a multiple of 64; output_layer.weight
     at offset 0), so the pickle holds a single storage and 15 storage offsets;
  6. writes DIR/expected_optimizer.json from the LIVE optimizer (not from the .pt files), then
     checks (self-checks, not the record) that the .pt files hold the same bits and, for fp32 and
     bf16, that Megatron resumes from the checkpoint: setup_model_and_optimizer again with
     --load DIR and the optimizer loaded gives iteration 3 and the same main params and moments.
     Not for the distributed optimizer: core_v0.12.1 without Apex/TE cannot load its own
     distrib_optim.pt back (DistributedOptimizer.load_state_dict puts the common 'step' from
     param_groups into every parameter's state, load_parameter_state_from_dp_zero then looks for
     'step' in the file's tensors: KeyError). With TE's FusedAdam there is no per-parameter 'step'.

Megatron's optimizer here: neither Transformer Engine nor Apex is installed, so
megatron.core.optimizer falls back to torch.optim.AdamW for --optimizer adam (its comment: "Apex's
FusedAdam is a drop-in replacement for torch's AdamW"). get_megatron_optimizer returns a
ChainedOptimizer of one optimizer (no expert parameters), whose state_dict() is that optimizer's:
  fp32     FP32Optimizer: 'optimizer' = AdamW.state_dict() = {'state': {0..14: {'step':
           tensor(3.) (0-dim float32), 'exp_avg', 'exp_avg_sq' (float32, the parameter's shape)}},
           'param_groups': [{'wd_mult', 'lr_mult', 'is_expert_parallel', 'is_decoupled_lr',
           'max_lr', 'min_lr', 'lr', 'betas', 'eps', 'weight_decay', 'amsgrad', 'foreach',
           'maximize', 'capturable', 'params': [state indices]} x 2]} (torch 1.13's AdamW keys;
           torch >= 2 adds e.g. 'differentiable', 'fused'). State indices run over the groups in
           order: group 0 holds 0..9, group 1 10..14.
  bf16     Float16OptimizerWithFloat16Params: 'optimizer' = {'optimizer': AdamW.state_dict() as
           above (state of the fp32 main params), 'fp32_from_fp16_params': [[fp32 main param, in
           the group's order] per group]}; no 'grad_scaler' (bf16 runs without loss scaling).
  distopt  DistributedOptimizer: 'optimizer' = {'optimizer': {'param_groups': [group keys as above
           WITHOUT 'params', WITH 'step': 3.0 (a Python float: without Apex/TE Megatron moves the
           common AdamW step there)]}}; no 'state'. distrib_optim.pt = {'buckets_coalesced': True,
           0: {(torch.bfloat16, torch.float32): {'param' (the fp32 main params), 'exp_avg',
           'exp_avg_sq': float32 [26944], 'numel_unpadded': 26944}}}: the flat tensors follow the
           DDP buffer layout (see buffer_offset below).

expected_optimizer.json (every float exact: an fp32 value is the hex of its IEEE-754 bit pattern,
8 hex digits, most significant first, e.g. 1.0 -> "3f800000"; a tensor is "<count>:<crc32>", the
CRC-32 (zlib) of its elements' little-endian fp32 bytes in row-major order, so the file stays small):
  {"case", "megatron": "core_v0.12.1", "torch", "optimizer_class" (the Megatron optimizer inside
   the ChainedOptimizer), "chained": true, "inner_optimizer_class": "torch.optim.adamw.AdamW",
   "params_dtype", "iteration": 3, "step": 3 (AdamW's step), "step_dtype": "torch.float32",
   "losses": [fp32 hex of each iteration's 'lm loss' as train_step reports it],
   "losses_float": [the same as Python floats], "grad_norms": [Python floats, informative],
   "param_groups": [{"index", "wd_mult", "lr_mult", "weight_decay" (Python float), "lr" (fp32 hex
     of the group's lr after 3 scheduler steps, informative), "names": [the group's parameters in
     the optimizer's order]}, ...],
   "params": {name: {"shape", "dtype" (the model parameter's), "group", "index" (position in its
     group), "state_index" (key in the saved AdamW 'state'; not for distopt) or "buffer_offset"
     (distopt: start of the parameter in distrib_optim.pt's flat tensors, from Megatron's own range
     map), "exp_avg", "exp_avg_sq", "main_param" (the fp32 tensor AdamW updates: for fp32 the model
     parameter itself, for bf16 the fp32 main copy; the bf16 model parameter is it rounded)}}}
Names are Megatron state-dict names (e.g. decoder.layers.0.self_attention.linear_qkv.weight), i.e.
without the 'module.' prefixes DDP and Float16Module add. Group 0 (wd_mult 1.0, weight_decay 0.1)
holds the 10 2-D weights, group 1 (wd_mult 0.0, weight_decay 0.0) the 5 norm weights (Megatron's
default rule: no decay for biases and 1-D parameters); groups come in the order their first
parameter appears in model.named_parameters(). Within a group, fp32 and bf16 keep that order:
embedding, then per layer linear_proj, linear_qkv, linear_fc1, linear_fc2 (linear_proj is
registered before linear_qkv), then output_layer; the norms: per layer input_layernorm,
pre_mlp_layernorm, then final_layernorm. The distributed optimizer rebuilds its groups from the
DDP buffer, which holds the parameters in REVERSE named_parameters() order (output_layer at offset
0, ..., embedding last), so its group 0 runs output_layer, layer 1 fc2, fc1, qkv, proj, layer 0
..., embedding, and its group 1 final_layernorm, layer 1 pre_mlp, input, layer 0 pre_mlp, input.
The bf16 and distributed-optimizer runs do the same arithmetic except the order of the grad-norm
reduction (so the clip factor's last bits), so their values are close (moments within ~1e-9
absolute) but not bitwise equal: each case's JSON is the reference for its own files only.

Shims. The ones run_megatron_load_checkpoint.install_shims installs (torch 1.13 vs Megatron
core_v0.12; see its docstring) are reused; of those, torch.Tensor.cuda = identity now also serves
get_model's model.cuda(torch.cuda.current_device()) and get_batch's tensor.cuda() (everything stays
on the CPU), and its torch proxy in megatron.training.checkpointing is superseded by the stand-in
below. These are added, after pretrain_gpt (and so Megatron) is imported and before any model,
optimizer or training code runs; Megatron's files are untouched, and none changes a saved value:
  * torch.distributed._coalescing_manager: install_shims' stub raises if entered; DDP's grad sync
    (start_grad_sync) and the distributed optimizer's param gather enter it around their
    collectives. Replaced by a context manager that lets the enclosed collectives run one by one,
    synchronously (it refuses async_ops=True), and yields a handle whose wait() is a no-op. That
    is what coalescing means for the values (it only batches launches); with DP1 every collective
    is over a single rank.
  * A `torch` stand-in in the namespaces of the Megatron modules on this path that create tensors
    on 'cuda' or query the CUDA runtime (listed in CUDA_ON_CPU_MODULES): the same torch, except that
    torch.tensor/zeros/ones/empty/full/arange/zeros_like/empty_like with a CUDA device (device='cuda',
    'cuda:N', N, or torch.cuda.current_device()) allocate on the CPU, and its `cuda` attribute is
    torch.cuda with current_device() -> 'cpu', synchronize() a no-op (CPU ops are synchronous),
    default_stream()/Stream()/stream() inert (one CPU stream), Event() an inert event, and
    get_rng_state() -> None (only checkpointing.get_rng_state calls it; its result is dropped by
    --no-save-rng: the checkpoints hold no 'rng_state', since a CUDA RNG state does not exist here).
    Values computed are the same operations on the same dtypes, on the CPU.
  * torch.Tensor.type() called with no argument from megatron.core.optimizer.* on a CPU tensor
    answers the CUDA type name ('torch.cuda.BFloat16Tensor', 'torch.cuda.FloatTensor'): those
    modules classify parameters (fp16/bf16 vs fp32) and assert grad dtypes by that string; on a
    CUDA build a parameter of the same dtype answers exactly that. Other callers see torch's answer.
  * megatron.core.tensor_parallel.random.CudaRNGStatesTracker.fork: a null context. It swaps the
    CUDA RNG state around attention dropout; the runs use --attention-dropout 0 --hidden-dropout 0
    (LLaMA has no dropout), so no random number is drawn inside it.
  * megatron.core.optimizer.distrib_optimizer.quantize_param_shard (distributed optimizer): core_v0.12.1
    calls it after every step to cast fp32 main shards to fp8 model params, with the (here empty)
    list of fp8 parameters; without Transformer Engine its fallback raises unconditionally ("Invalid
    Transformer Engine version for FP8 distributed optimizer"), so the distributed optimizer cannot
    step at all without TE. Every TE implementation returns at once on an empty list; the shim does
    that for an empty list and calls the fallback (which raises) otherwise. No fp8 is involved.
  * torch.distributed all_gather_into_tensor / reduce_scatter_tensor / _all_gather_base /
    _reduce_scatter_base and broadcast: gloo in torch 1.13 has no all-gather-into-tensor or
    reduce-scatter-tensor (Megatron's timers.log all-gathers the timings; the distributed optimizer
    reduce-scatters grads and all-gathers params) and cannot broadcast bool tensors (get_batch's
    attention mask). On a group of ONE rank these collectives are a copy (all-gather: output =
    input; reduce-scatter: output = input, a sum over one rank) or nothing (broadcast: the tensor is
    the source's), done as such; on any larger group the real function runs. The Megatron modules
    that bound the functions at import (dist_all_gather_func, dist_reduce_scatter_func) are redirected.

Run (Debian's interpreter; Megatron core_v0.12.1 checked out anywhere, e.g.
`git --git-dir=MIRROR archive core_v0.12.1 | tar -x -C /tmp/megatron`):

  /usr/bin/python3 tests/tools/make_megatron_optimizer_fixture.py --megatron /tmp/megatron
      [--converter build/ci/tools/convert_checkpoint] [--out tests/checkpointing/data]
      [--cases fp32,bf16,distopt_bf16]

Deterministic (seeded, fixed batches, single thread) and idempotent (each case directory is
removed and rewritten). Not part of CTest (CI has no PyTorch).
"""
import argparse
import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from run_megatron_load_checkpoint import CASES, free_port, hf_full_megatron, install_shims  # noqa: E402

SOURCE, SOURCE_TYPE = CASES["llama"]  # tests/golden/llama_tiny, llama2
ITERATIONS, MICRO_BATCH, SEQ = 3, 2, 16
CONVERTED = "llama_tiny_mg_torch"  # the converter's output, in the scratch directory
ALL_CASES = {  # name: (output directory, extra Megatron flags)
    "fp32": ("megatron_optim_fp32", []),
    "bf16": ("megatron_optim_bf16", ["--bf16"]),
    "distopt_bf16": ("megatron_optim_distopt_bf16", ["--bf16", "--use-distributed-optimizer"]),
}
TRAIN_ARGS = ["--optimizer", "adam", "--lr", "1e-3", "--min-lr", "1e-4", "--weight-decay", "0.1",
              "--adam-beta1", "0.9", "--adam-beta2", "0.95", "--adam-eps", "1e-8", "--clip-grad", "1.0",
              "--train-iters", "10", "--lr-warmup-iters", "2", "--lr-decay-style", "cosine",
              "--micro-batch-size", str(MICRO_BATCH), "--global-batch-size", str(MICRO_BATCH),
              "--seq-length", str(SEQ), "--seed", "1234", "--save-interval", str(ITERATIONS),
              "--attention-dropout", "0.0", "--hidden-dropout", "0.0"]
# Megatron modules on the generator's path that allocate on 'cuda' or query the CUDA runtime.
CUDA_ON_CPU_MODULES = [
    "megatron.core.timers",
    "megatron.core.utils",
    "megatron.core.models.common.embeddings.rotary_pos_embedding",
    "megatron.core.distributed.param_and_grad_buffer",
    "megatron.core.distributed.distributed_data_parallel",
    "megatron.core.distributed.finalize_model_grads",
    "megatron.core.optimizer.optimizer",
    "megatron.core.optimizer.clip_grads",
    "megatron.core.optimizer.distrib_optimizer",
    "megatron.core.pipeline_parallel.schedules",
    "megatron.training.training",
    "megatron.training.utils",
    "megatron.training.checkpointing",
]


# ----------------------------------------------------------------------------------------------
# Shims (see the docstring)
# ----------------------------------------------------------------------------------------------
def _is_cuda_device(device):
    if device is None:
        return False
    if isinstance(device, int) and not isinstance(device, bool):
        return True
    return str(device).startswith("cuda")


class _InertStream:
    def __init__(self, *a, **k):
        pass

    def wait_stream(self, *a, **k):
        pass

    def wait_event(self, *a, **k):
        pass

    def synchronize(self):
        pass

    def record_event(self, *a, **k):
        return _InertEvent()


class _InertEvent:
    def __init__(self, *a, **k):
        pass

    def record(self, *a, **k):
        pass

    def wait(self, *a, **k):
        pass

    def synchronize(self):
        pass

    def query(self):
        return True


def _make_cpu_torch():
    """The `torch` stand-in for CUDA_ON_CPU_MODULES."""
    import torch

    class _Cuda(types.ModuleType):
        def __getattr__(self, name):
            return getattr(torch.cuda, name)

        @staticmethod
        def current_device():
            return "cpu"

        @staticmethod
        def synchronize(*a, **k):
            pass

        @staticmethod
        def default_stream(*a, **k):
            return _InertStream()

        @staticmethod
        def current_stream(*a, **k):
            return _InertStream()

        Stream = _InertStream
        Event = _InertEvent

        @staticmethod
        def stream(*a, **k):
            return contextlib.nullcontext()

        @staticmethod
        def get_rng_state(*a, **k):
            return None  # dropped: --no-save-rng

    cuda = _Cuda("torch.cuda")

    def on_cpu(fn):
        def wrapped(*a, **k):
            if _is_cuda_device(k.get("device")):
                k["device"] = "cpu"
            return fn(*a, **k)

        wrapped.__name__ = fn.__name__
        return wrapped

    class _Torch(types.ModuleType):
        def __getattr__(self, name):
            return getattr(torch, name)

    t = _Torch("torch")
    t.cuda = cuda
    for name in ("tensor", "zeros", "ones", "empty", "full", "arange", "zeros_like", "empty_like"):
        setattr(t, name, on_cpu(getattr(torch, name)))
    return t


def install_training_shims():
    """The shims this generator adds (after install_shims; see the docstring)."""
    import importlib

    import torch
    import torch.distributed as dist

    shims = []

    @contextlib.contextmanager
    def _coalescing_manager(group=None, device=None, async_ops=False, **k):
        assert not async_ops, "shim: _coalescing_manager runs collectives synchronously only"

        class _Handle:
            def wait(self):
                pass

        yield _Handle()

    dist._coalescing_manager = _coalescing_manager
    import megatron.core.distributed.param_and_grad_buffer as pgb

    pgb._coalescing_manager = _coalescing_manager  # imported by name there
    shims.append("torch.distributed._coalescing_manager=synchronous pass-through")

    cpu_torch = _make_cpu_torch()
    for modname in CUDA_ON_CPU_MODULES:
        mod = importlib.import_module(modname)
        assert getattr(mod, "torch", None) is not None, modname
        mod.torch = cpu_torch
    shims.append("torch->CPU stand-in in " + ", ".join(CUDA_ON_CPU_MODULES))

    real_type = torch.Tensor.type

    def tensor_type(self, dtype=None, non_blocking=False, **kwargs):
        if dtype is None and not kwargs and self.device.type == "cpu":
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("megatron.core.optimizer"):
                return real_type(self).replace("torch.", "torch.cuda.", 1)
        return real_type(self, dtype, non_blocking, **kwargs) if dtype is not None else real_type(self)

    torch.Tensor.type = tensor_type
    shims.append("torch.Tensor.type() from megatron.core.optimizer.*: CUDA type names")

    from megatron.core.tensor_parallel import random as tp_random

    tp_random.CudaRNGStatesTracker.fork = lambda self, name=None: contextlib.nullcontext()
    shims.append("CudaRNGStatesTracker.fork=null context (dropout 0)")

    import megatron.core.optimizer.distrib_optimizer as distrib_optimizer

    real_quantize = distrib_optimizer.quantize_param_shard

    def quantize_param_shard(model_params, *a, **k):
        if len(model_params) == 0:
            return  # what every Transformer Engine implementation does with no fp8 parameters
        return real_quantize(model_params, *a, **k)

    distrib_optimizer.quantize_param_shard = quantize_param_shard
    shims.append("distrib_optimizer.quantize_param_shard([])=no-op")
    return shims


def install_single_rank_collectives():
    """all_gather_into_tensor / reduce_scatter_tensor (and their _base aliases) on one rank: gloo
    in torch 1.13 has neither. Megatron modules bind them at import (dist_all_gather_func, ...),
    so those bindings are redirected too."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    shims, replaced = [], {}
    for name in ("all_gather_into_tensor", "reduce_scatter_tensor", "_all_gather_base", "_reduce_scatter_base"):
        real = getattr(c10d, name)

        def single(output, input, *a, group=None, async_op=False, _real=real, _name=name, **k):
            if dist.get_world_size(group) != 1:
                return _real(output, input, *a, group=group, async_op=async_op, **k)
            assert output.numel() == input.numel() and output.dtype == input.dtype, _name
            output.copy_(input.view_as(output))
            return None

        replaced[real] = single
        setattr(c10d, name, single)
        setattr(dist, name, single)
        shims.append(f"torch.distributed.{name} on one rank = copy")
    real_broadcast = c10d.broadcast

    def broadcast(tensor, src=None, group=None, async_op=False, **k):
        if dist.get_world_size(group) != 1:
            return real_broadcast(tensor, src, group=group, async_op=async_op, **k)
        return None  # one rank: the tensor already is the source's

    dist.broadcast = c10d.broadcast = broadcast
    shims.append("torch.distributed.broadcast on one rank = no-op")
    for modname, mod in list(sys.modules.items()):
        if modname.startswith("megatron") and mod is not None:
            for attr in ("dist_all_gather_func", "dist_reduce_scatter_func"):
                fn = getattr(mod, attr, None)
                if fn in replaced:
                    setattr(mod, attr, replaced[fn])
    return shims


# ----------------------------------------------------------------------------------------------
# One case (one process)
# ----------------------------------------------------------------------------------------------
def fp32_hex(t):
    """A tensor's exact fp32 values, compactly: "<count>:<CRC-32 of its little-endian fp32
    bytes in row-major order, 8 hex digits>" (zlib.crc32; the C++ test computes the same with
    zlib). Equal digests are equal bits; the fixture stays small."""
    import zlib

    import torch

    a = t.detach().to(torch.float32).contiguous().cpu().numpy()
    return "%d:%08x" % (a.size, zlib.crc32(a.astype("<f4").tobytes()) & 0xFFFFFFFF)


def scalar_hex(x):
    import numpy as np

    return np.array([x], dtype=">f4").tobytes().hex()


def build_batch(it, margs_args):
    """One micro batch, as GPTDataset.__getitem__ builds samples and the DataLoader collates them."""
    import torch
    from megatron.core.datasets.gpt_dataset import _get_ltor_masks_and_position_ids
    from torch.utils.data import default_collate

    samples = []
    for b in range(MICRO_BATCH):
        text = (7 * (b * (SEQ + 1) + torch.arange(SEQ + 1, dtype=torch.int64)) + 13 * it) % 100
        tokens, labels = text[:-1].contiguous(), text[1:].contiguous()
        attention_mask, loss_mask, position_ids = _get_ltor_masks_and_position_ids(
            tokens, margs_args.vocab_size,  # NullTokenizer's eod id; unused without resets
            margs_args.reset_position_ids, margs_args.reset_attention_mask, margs_args.eod_mask_loss,
            True)
        samples.append({"tokens": tokens, "labels": labels, "attention_mask": attention_mask,
                        "loss_mask": loss_mask, "position_ids": position_ids})
    return default_collate(samples)


def walk_optimizer(model, optimizer):
    """(Megatron optimizer class name, that optimizer, the AdamW inside, per group: the model
    parameters, per group: the fp32 tensors AdamW updates (same order), {model param: name})."""
    prefix_of = {}
    for name, p in model[0].named_parameters():
        while name.startswith("module."):  # DDP's and Float16Module's prefixes
            name = name[len("module."):]
        prefix_of[p] = name
    # get_megatron_optimizer returns a ChainedOptimizer; with no expert parameters it chains one
    # optimizer, whose state_dict() it saves as its own.
    meg_opt = optimizer
    if type(optimizer).__name__ == "ChainedOptimizer":
        assert len(optimizer.chained_optimizers) == 1
        meg_opt = optimizer.chained_optimizers[0]
    adam = meg_opt.optimizer
    kind = type(meg_opt).__name__
    if kind == "FP32Optimizer":
        model_groups = [g["params"] for g in adam.param_groups]
        main_groups = model_groups
    elif kind == "Float16OptimizerWithFloat16Params":
        model_groups, main_groups = meg_opt.float16_groups, meg_opt.fp32_from_float16_groups
        assert all(not g for g in meg_opt.fp32_from_fp32_groups)
    elif kind == "DistributedOptimizer":
        model_groups, main_groups = meg_opt.model_float16_groups, meg_opt.shard_fp32_from_float16_groups
        assert all(not g for g in meg_opt.model_fp32_groups)
    else:
        raise AssertionError(f"unexpected optimizer {kind}")
    for g, mains in zip(adam.param_groups, main_groups):
        assert len(g["params"]) == len(mains) and all(a is b for a, b in zip(g["params"], mains))
    return kind, meg_opt, adam, model_groups, main_groups, prefix_of


def start_megatron_process(megatron_dir, rank, world, port, extra_shims=()):
    """A gloo worker's start, as torchrun would set it up: the distributed variables, one
    deterministic CPU thread, every shim (install_shims, then pretrain_gpt's import, then the
    training shims and `extra_shims`). Returns the shims' descriptions."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), CUDA_VISIBLE_DEVICES="", CUDA_DEVICE_MAX_CONNECTIONS="1")
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    shims = install_shims(megatron_dir)
    importlib.import_module("pretrain_gpt")  # Megatron's entry module, importable once the shims are in

    shims += install_training_shims()
    shims += install_single_rank_collectives()
    for install in extra_shims:
        shims += install()
    return shims


def megatron_model_flags(ck):
    """Megatron's flags for the checkpoint's model (args `ck`) on this CPU: the local layer spec,
    no fusions, NullTokenizer of the saved vocabulary, the saved norm epsilon."""
    return ["--transformer-impl", "local", "--use-cpu-initialization", "--no-gradient-accumulation-fusion",
            "--no-masked-softmax-fusion", "--no-bias-gelu-fusion", "--no-bias-swiglu-fusion",
            "--no-bias-dropout-fusion", "--no-rope-fusion", "--no-persist-layer-norm",
            "--tokenizer-type", "NullTokenizer", "--vocab-size", str(ck.vocab_size),
            "--make-vocab-size-divisible-by", str(ck.make_vocab_size_divisible_by),
            "--norm-epsilon", repr(ck.norm_epsilon)]


def initialize_megatron_process(argv, rank, world, tp, pp):
    """initialize_megatron's steps on `argv`: Megatron's parse_args, load_args_from_checkpoint,
    validate_args, the global variables (no tokenizer), gloo and parallel_state at TP x PP, the
    random seed and the rerun state machine. Returns the args."""
    import torch
    from megatron.core import parallel_state as mpu
    from megatron.core.rerun_state_machine import (RerunDiagnostic, RerunErrorInjector, RerunMode,
                                                   initialize_rerun_state_machine)
    from megatron.training import arguments as margs
    from megatron.training import checkpointing
    from megatron.training.global_vars import set_global_variables
    from megatron.training.initialize import _set_random_seed

    sys.argv = ["pretrain_gpt.py"] + argv
    args = margs.parse_args()
    checkpointing.load_args_from_checkpoint(args)
    margs.validate_args(args, {})
    set_global_variables(args, build_tokenizer=False)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    mpu.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp)
    _set_random_seed(args.seed, args.data_parallel_random_init)
    # initialize_megatron's rerun state machine (state save/restore funcs unused when disabled).
    initialize_rerun_state_machine(
        mode=RerunMode(args.rerun_mode),
        error_injector=RerunErrorInjector(error_injection_rate=args.error_injection_rate,
                                          error_injection_type=RerunDiagnostic(args.error_injection_type)),
        result_rejected_tracker_filename=args.result_rejected_tracker_filename)
    return args


def worker(case, megatron_dir, work_dir, port, result_path):
    # Relative paths from a scratch directory, so the pickled args ('load', 'save') are the same on
    # every run and machine: load = CONVERTED, save = the case directory's name.
    os.chdir(work_dir)
    ckpt_dir, out_dir = CONVERTED, ALL_CASES[case][0]
    result = {"ok": False, "msgs": []}
    try:
        shims = start_megatron_process(megatron_dir, 0, 1, port)
        import numpy as np
        import pretrain_gpt
        import torch
        from megatron.core import parallel_state as mpu
        from megatron.core.distributed import finalize_model_grads
        from megatron.core.enums import ModelType
        from megatron.core.rerun_state_machine import get_rerun_state_machine
        from megatron.training import checkpointing
        from megatron.training import training
        from megatron.training.global_vars import get_timers
        from megatron.training.utils import unwrap_model

        dirname, extra = ALL_CASES[case]
        ck = torch.load(checkpointing.find_checkpoint_rank_0(ckpt_dir, 0, True), map_location="cpu")["args"]
        argv = ["--use-checkpoint-args", "--use-mp-args-from-checkpoint-args", "--load", ckpt_dir,
                "--save", out_dir, "--ckpt-format", "torch", "--no-load-optim", "--no-load-rng", "--no-save-rng"
                ] + megatron_model_flags(ck) + TRAIN_ARGS + extra
        args = initialize_megatron_process(argv, 0, 1, 1, 1)

        model, optimizer, scheduler = training.setup_model_and_optimizer(
            pretrain_gpt.model_provider, ModelType.encoder_or_decoder)
        assert len(model) == 1
        inner = unwrap_model(model)[0]
        # Loaded weights: the Hugging Face source in Megatron's layout (bf16: rounded to bf16).
        full, _ = hf_full_megatron(os.path.join(REPO, SOURCE), ck.padded_vocab_size)
        loaded = inner.state_dict()
        bad = [k for k in full if not torch.equal(loaded[k].float(), full[k].to(loaded[k].dtype).float())]
        assert not bad and set(full) == {k for k in loaded if torch.is_tensor(loaded[k])}, bad
        result["msgs"].append(f"loaded {len(full)} tensors equal to the HF source "
                              f"({loaded['output_layer.weight'].dtype})")

        # train()'s setup, then train_step as train() calls it.
        config = training.get_model_config(model[0])
        config.grad_scale_func = optimizer.scale_loss
        config.timers = get_timers()
        config.finalize_model_grads_func = finalize_model_grads
        for m in model:
            m.train()
        losses, grad_norms = [], []
        iteration = args.iteration
        assert iteration == 0, iteration
        get_rerun_state_machine().current_iteration = iteration  # as train() does
        for it in range(ITERATIONS):
            args.curr_iteration = iteration
            data = iter([build_batch(it, args)])
            loss_dict, skipped, should_ckpt, should_exit, exit_code, grad_norm, _ = training.train_step(
                pretrain_gpt.forward_step, data, model, optimizer, scheduler, config)
            assert not skipped and not should_exit, (skipped, should_exit, exit_code)
            iteration += 1
            args.consumed_train_samples += mpu.get_data_parallel_world_size() * args.micro_batch_size * \
                training.get_num_microbatches()
            loss = loss_dict["lm loss"]
            assert loss.dtype == torch.float32
            losses.append(loss.item())
            grad_norms.append(float(grad_norm))
        # (train() leaves args.iteration at the loaded iteration, 0; the checkpoint says 3.)
        result["msgs"].append("losses " + ", ".join(f"{x:.6f}" for x in losses) + "; grad norms " +
                              ", ".join(f"{x:.6f}" for x in grad_norms))

        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        checkpointing.save_checkpoint(iteration, model, optimizer, scheduler, 0)

        # ---- expected_optimizer.json, from the live optimizer ----
        kind, meg_opt, adam, model_groups, main_groups, prefix_of = walk_optimizer(model, optimizer)
        groups, params = [], {}
        steps = set()
        step_dtypes = set()
        state_index = 0
        if kind == "DistributedOptimizer":
            assert len(model[0].buffers) == 1 and len(model[0].buffers[0].buckets) == 1
        for gi, (g, mgroup, main_group) in enumerate(zip(adam.param_groups, model_groups, main_groups)):
            names = []
            for i, (mp, main) in enumerate(zip(mgroup, main_group)):
                name = prefix_of[mp]
                names.append(name)
                st = adam.state[main]
                assert set(st) == {"step", "exp_avg", "exp_avg_sq"}, set(st)
                step = st["step"]
                steps.add(int(step.item()) if torch.is_tensor(step) else int(step))
                step_dtypes.add(str(step.dtype) if torch.is_tensor(step) else type(step).__name__)
                assert st["exp_avg"].dtype == torch.float32 and st["exp_avg_sq"].dtype == torch.float32
                assert main.dtype == torch.float32
                shape = list(mp.shape)
                # Distributed optimizer (DP1): the shard is the whole parameter, flattened.
                assert main.numel() == mp.numel() and st["exp_avg"].numel() == mp.numel()
                entry = {"shape": shape, "dtype": str(mp.dtype).replace("torch.", ""), "group": gi, "index": i}
                if kind == "DistributedOptimizer":
                    # Where the parameter lies in the flat tensors of distrib_optim.pt (Megatron's own
                    # range map; one bucket, DP1: the world range in the buffer).
                    world = meg_opt._get_model_param_range_map(mp)["gbuf_world"]
                    entry["buffer_offset"] = world.start
                    assert world.size == mp.numel()
                else:
                    entry["state_index"] = state_index  # key in the saved AdamW state_dict()['state']
                state_index += 1
                entry.update({"exp_avg": fp32_hex(st["exp_avg"]), "exp_avg_sq": fp32_hex(st["exp_avg_sq"]),
                              "main_param": fp32_hex(main)})
                params[name] = entry
                if mp.dtype != torch.float32:
                    # The model parameter is the main parameter rounded (Megatron copies main -> model).
                    assert torch.equal(mp.detach(), main.detach().view(mp.shape).to(mp.dtype)), name
                else:
                    assert mp is main, name
            groups.append({"index": gi, "wd_mult": g["wd_mult"], "lr_mult": g["lr_mult"],
                           "weight_decay": g["weight_decay"], "lr": scalar_hex(g["lr"]), "names": names})
        assert steps == {ITERATIONS}, steps
        assert len(params) == len(full), (len(params), len(full))
        expected = {
            "case": dirname, "megatron": "core_v0.12.1", "torch": torch.__version__,
            "optimizer_class": kind, "chained": meg_opt is not optimizer,
            "inner_optimizer_class": f"{type(adam).__module__}.{type(adam).__name__}",
            "params_dtype": str(args.params_dtype).replace("torch.", ""), "iteration": iteration,
            "step": ITERATIONS, "step_dtype": ",".join(sorted(step_dtypes)),
            "losses": [scalar_hex(x) for x in losses], "losses_float": losses, "grad_norms": grad_norms,
            "param_groups": groups, "params": params,
        }
        with open(os.path.join(out_dir, "expected_optimizer.json"), "w") as f:
            json.dump(expected, f, indent=1, sort_keys=False)
            f.write("\n")

        # ---- self-check: the saved files hold the live state ----
        rank_file = os.path.join(out_dir, f"iter_{iteration:07d}", "mp_rank_00", "model_optim_rng.pt")
        sd = torch.load(rank_file, map_location="cpu")
        assert sd["iteration"] == iteration and "rng_state" not in sd, sorted(sd)
        for name, p in inner.state_dict().items():
            if torch.is_tensor(p):
                assert torch.equal(sd["model"][name], p), name
        opt_sd = sd["optimizer"]
        if kind == "FP32Optimizer":
            inner_sd = opt_sd
        elif kind == "Float16OptimizerWithFloat16Params":
            inner_sd = opt_sd["optimizer"]
            for gi, group in enumerate(groups):
                for i, name in enumerate(group["names"]):
                    assert fp32_hex(opt_sd["fp32_from_fp16_params"][gi][i]) == params[name]["main_param"], name
        if kind != "DistributedOptimizer":
            flat = [n for g in groups for n in g["names"]]
            assert [i for g in inner_sd["param_groups"] for i in g["params"]] == list(range(len(flat)))
            for idx, name in enumerate(flat):
                st = inner_sd["state"][idx]
                assert fp32_hex(st["exp_avg"]) == params[name]["exp_avg"], name
                assert fp32_hex(st["exp_avg_sq"]) == params[name]["exp_avg_sq"], name
        else:
            assert set(opt_sd) == {"optimizer"} and "state" not in opt_sd["optimizer"], describe(opt_sd)
            assert [g["step"] for g in opt_sd["optimizer"]["param_groups"]] == [float(ITERATIONS)] * len(groups)
            dist_sd = torch.load(os.path.join(os.path.dirname(rank_file), "distrib_optim.pt"), map_location="cpu")
            (flat,) = dist_sd[0].values()
            for name, e in params.items():
                n = int(np.prod(e["shape"]))
                for key, saved in (("param", "main_param"), ("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")):
                    got = flat[key][e["buffer_offset"]:e["buffer_offset"] + n]
                    assert fp32_hex(got) == e[saved], (name, key)
            result["msgs"].append(f"distrib_optim.pt: {describe(dist_sd)}")
        result["msgs"].append(f"'optimizer': {describe(opt_sd)}")
        result["msgs"].append(f"'opt_param_scheduler': {describe(sd.get('opt_param_scheduler'))}")

        # ---- self-check: Megatron resumes from it (model, optimizer and scheduler state) ----
        # Not for the distributed optimizer: core_v0.12.1 without Apex/TE cannot load its own
        # distrib_optim.pt back (DistributedOptimizer.load_state_dict puts the common 'step' into
        # every parameter's state, then load_parameter_state_from_dp_zero copies every state key
        # from the file, which has no 'step': KeyError 'step').
        if kind == "DistributedOptimizer":
            result["msgs"].append("resume check skipped (Megatron core_v0.12.1 without Apex/TE cannot load "
                                  "distrib_optim.pt back: KeyError 'step')")
        else:
            args.load, args.no_load_optim, args.consumed_train_samples = out_dir, False, 0  # a fresh run's
            model2, optimizer2, scheduler2 = training.setup_model_and_optimizer(
                pretrain_gpt.model_provider, ModelType.encoder_or_decoder)
            assert args.iteration == iteration and scheduler2.num_steps == scheduler.num_steps, args.iteration
            kind2, _, adam2, model_groups2, main_groups2, prefix_of2 = walk_optimizer(model2, optimizer2)
            assert kind2 == kind
            for gi, (mgroup, main_group) in enumerate(zip(model_groups2, main_groups2)):
                for i, (mp, main) in enumerate(zip(mgroup, main_group)):
                    e = params[prefix_of2[mp]]
                    st = adam2.state[main]
                    assert (e["group"], e["index"]) == (gi, i) and int(st["step"]) == ITERATIONS, prefix_of2[mp]
                    for key in ("exp_avg", "exp_avg_sq"):
                        assert fp32_hex(st[key]) == e[key], (prefix_of2[mp], key)
                    assert fp32_hex(main) == e["main_param"], prefix_of2[mp]
            result["msgs"].append(f"Megatron's load_checkpoint resumes from it at iteration {args.iteration} with "
                                  "the same optimizer state")
        result["msgs"].append(f"optimizer {kind} around {expected['inner_optimizer_class']}; step {ITERATIONS} "
                              f"({expected['step_dtype']}); groups " +
                              "; ".join(f"{g['index']}: wd_mult {g['wd_mult']} x{len(g['names'])}" for g in groups))
        result["msgs"].insert(0, "shims: " + ", ".join(shims))
        result["ok"] = True
    except BaseException as e:  # noqa: BLE001 (SystemExit from Megatron's sys.exit() too)
        result["msgs"].append(f"FAIL: {type(e).__name__}: {e}\n{traceback.format_exc()}")
    with open(result_path, "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    os._exit(0)


def describe(obj, depth=0):
    """A short structural description of a saved object (for the report)."""
    import torch

    if torch.is_tensor(obj):
        return f"tensor{tuple(obj.shape)}:{str(obj.dtype).replace('torch.', '')}"
    if isinstance(obj, dict):
        if depth >= 3:
            return "{...}"
        keys = list(obj)
        if keys and all(isinstance(k, int) for k in keys):
            return f"{{0..{len(keys) - 1}: {describe(obj[keys[0]], depth + 1)}}}"
        return "{" + ", ".join(f"{k!r}: {describe(v, depth + 1)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        if not obj:
            return "[]"
        return f"[{len(obj)} x {describe(obj[0], depth + 1)}]"
    return repr(obj) if isinstance(obj, (int, float, str, bool, type(None))) else type(obj).__name__


# ----------------------------------------------------------------------------------------------
def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:7])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megatron", required=True, help="Megatron-LM core_v0.12.1 checkout (has megatron/)")
    parser.add_argument("--converter", default=os.path.join(REPO, "build/ci/tools/convert_checkpoint"),
                        help="convert_checkpoint binary (default build/ci/tools/convert_checkpoint)")
    parser.add_argument("--out", default=os.path.join(REPO, "tests/checkpointing/data"),
                        help="parent of the case directories (default tests/checkpointing/data)")
    parser.add_argument("--cases", default="fp32,bf16,distopt_bf16", help=f"comma list of {sorted(ALL_CASES)}")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per case")
    opts = parser.parse_args()
    megatron_dir = os.path.abspath(opts.megatron)
    if not os.path.isdir(os.path.join(megatron_dir, "megatron", "training")):
        parser.error(f"{opts.megatron} is not a Megatron-LM checkout")
    cases = opts.cases.split(",")
    for c in cases:
        if c not in ALL_CASES:
            parser.error(f"unknown case {c}; known: {sorted(ALL_CASES)}")
    ok_all = True
    with tempfile.TemporaryDirectory(prefix="mgoptim_") as work:
        ckpt = os.path.join(work, CONVERTED)
        cmd = [opts.converter, "--load-model-type", "hf", "--save-model-type", "mg-torch",
               "--load-dir", os.path.join(REPO, SOURCE), "--save-dir", ckpt,
               "--target-tensor-parallel-size", "1", "--target-pipeline-parallel-size", "1",
               "--model-type-hf", SOURCE_TYPE]
        print("$", " ".join(cmd), flush=True)
        conv = subprocess.run(cmd, capture_output=True, text=True)
        if conv.returncode != 0:
            print(conv.stdout + conv.stderr)
            print(f"FAIL: converter exited {conv.returncode}")
            return 1
        for case in cases:
            out_dir = os.path.join(os.path.abspath(opts.out), ALL_CASES[case][0])
            if os.path.exists(out_dir):
                shutil.rmtree(out_dir)
            result_path = os.path.join(work, f"{case}.json")
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", case, megatron_dir, work,
                                   str(free_port()), result_path],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=opts.timeout)
            res = json.load(open(result_path)) if os.path.exists(result_path) else \
                {"ok": False, "msgs": [f"no result (exit {proc.returncode})"]}
            for m in res["msgs"]:
                print("   ", m.replace("\n", "\n    "))
            if not res["ok"]:
                print("\n".join("    | " + line for line in proc.stdout.splitlines()[-30:]))
            else:
                os.makedirs(os.path.dirname(out_dir), exist_ok=True)
                shutil.move(os.path.join(work, ALL_CASES[case][0]), out_dir)
                for root, _, files in sorted(os.walk(out_dir)):
                    for fn in sorted(files):
                        p = os.path.join(root, fn)
                        print(f"    {os.path.relpath(p, REPO)}  {os.path.getsize(p)} bytes")
            print(f"{'PASS' if res['ok'] else 'FAIL'} {case} -> {os.path.relpath(out_dir, REPO)}", flush=True)
            ok_all &= res["ok"]
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
