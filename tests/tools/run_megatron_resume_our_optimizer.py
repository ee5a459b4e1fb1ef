#!/usr/bin/python3
"""Checks that Megatron-LM core_v0.12.1's own loader resumes the optimizer state OUR engine
writes into Megatron legacy checkpoints (pretrain_gpt --save DIR --ckpt-format torch, the
non-distributed optimizer): a Megatron user can continue our run with our Adam moments.

What it does, per case:
  1. (once) writes a tiny NullTokenizer dataset, as tests/e2e/checkpoint_test.cpp's
     LoadsMegatronOptimizerStateBitExactly does: 64 JSONL lines {"text": "<40 ints (d*7+i*13)%99>"}
     -> preprocess_data --tokenizer-type NullTokenizer --vocab-size 100 --append-eod;
  2. trains 3 iterations with OUR pretrain_gpt (OUR_FLAGS below: the generator's LLaMA-style model,
     2 layers, hidden 32, 4 heads / 2 query groups, RMSNorm, SwiGLU, RoPE, untied; Adam lr 1e-3 ->
     1e-4 cosine, warmup 2 iterations, wd 0.1, beta2 0.95, clip 1.0, micro = global batch 2, seq
     16) and saves at iteration 3 with --ckpt-format torch. The directory then holds Megatron's
     files (iter_0000003/mp_rank_TT[_PPP]/model_optim_rng.pt with 'optimizer' and
     'opt_param_scheduler') and our own format (iter_0000003/mindspeed_cpp/: metadata.json whose
     "chunks" say which safetensors file and key hold each (kind, Megatron name, TP rank) of
     param / exp_avg / exp_avg_sq, flat fp32; norms, replicated over TP, are written once with
     tp_size 1). The TP2xPP2 case runs 4 ranks under mpirun with --num-layers 4;
  3. starts one process per model-parallel rank (gloo, CPU) running Megatron core_v0.12.1 with
     the setup make_megatron_optimizer_fixture.py uses (its shims, imported, plus the three below):
     parse_args on `--use-checkpoint-args --use-mp-args-from-checkpoint-args --load DIR
     --ckpt-format torch --no-load-rng --no-save-rng --transformer-impl local ...` plus the
     generator's TRAIN_ARGS with --train-iters 3 (our run's, so that the scheduler's decay and
     weight-decay steps are the same: OptimizerParamScheduler.load_state_dict asserts max_lr,
     min_lr, warmup steps, decay steps, decay style, start/end wd and wd steps equal the args)
     [--bf16], load_args_from_checkpoint (our pickled args), validate_args, set_global_variables,
     gloo + parallel_state at the checkpoint's TP x PP, _set_random_seed, the rerun state
     machine; then megatron.training.training.setup_model_and_optimizer(pretrain_gpt.
     model_provider, ModelType.encoder_or_decoder): get_model, get_megatron_optimizer,
     get_optimizer_param_scheduler and load_checkpoint(model, optimizer, scheduler, strict=True)
     WITH the optimizer (no --no-load-optim): FP32Optimizer / Float16OptimizerWithFloat16Params
     .load_state_dict of our 'optimizer' and OptimizerParamScheduler.load_state_dict of our
     'opt_param_scheduler';
  4. checks, on every rank:
     * moments by name (the real test): for every parameter Megatron's optimizer holds (walked
       with the generator's walk_optimizer, named by Megatron's state-dict name, layer numbers
       mapped to global ones with Megatron's own TransformerLayer.layer_number), the live AdamW
       state exp_avg and exp_avg_sq equal BITWISE our own-format values of that name (the chunk
       of this TP rank, or the tp_size-1 chunk of a replicated norm). Megatron matches saved
       state to parameters by position (state index = order of the parameter in its group), so
       a wrong index mapping in our writer shows here as moments on the wrong parameter; on a
       mismatch the report says which of our tensors (if any) the loaded values equal instead;
     * main parameter: the fp32 tensor AdamW updates equals our 'param' bitwise (fp32: the
       model parameter itself; bf16: the fp32 main copy Megatron loads from
       'fp32_from_fp16_params', and the bf16 model parameter equals it rounded to bf16);
     * Adam step 3 in every parameter's state; load_checkpoint returned iteration 3; the
       scheduler's num_steps is 6 (3 iterations x global batch 2);
     * coverage: over all ranks, the checked names are exactly the tensors metadata.json lists;
  5. runs 2 more Megatron train_steps (as train() calls them, batches from the generator's
     build_batch) and prints the losses: Megatron trains on from our state without error, and
     the Adam step becomes 5.
It prints PASS/FAIL per case and exits non-zero if any case fails.

Cases: fp32 (TP1), bf16 (TP1, --bf16), tp2pp2 (fp32, TP2 x PP2, 4 layers, 4 gloo processes).

Shims: everything make_megatron_optimizer_fixture.py installs, imported from it and from
run_megatron_load_checkpoint.py (install_shims, install_training_shims,
install_single_rank_collectives; their docstrings say what each does and why none changes a
value), and for the multi-rank case three more, neither changing a value:
  * megatron.core.pipeline_parallel.p2p_communication gets the generator's CPU `torch` stand-in
    (_make_cpu_torch: shape-exchange and receive buffers it allocates on 'cuda' go to the CPU,
    torch.cuda.synchronize is a no-op); gloo does the sends and receives;
  * torch.distributed.broadcast of a bool tensor over more than one rank (get_batch's attention
    mask, broadcast from TP rank 0 to TP rank 1): gloo cannot broadcast bool, so it is broadcast
    as uint8 and copied back (0/1 both ways);
  * torch.distributed.all_gather_into_tensor (and _all_gather_base, and Megatron's
    dist_all_gather_func bindings) over more than one rank: gloo in torch 1.13 has none; done as
    torch.distributed.all_gather into a list and a concatenation, synchronously (the same values).
    On this path only megatron.core.timers uses it (gathering the ranks' timings for the log).

Run (Debian's interpreter, torch 1.13; Megatron core_v0.12.1 checked out anywhere, e.g.
`git --git-dir=MIRROR archive core_v0.12.1 | tar -x -C /tmp/megatron`):

  /usr/bin/python3 tests/tools/run_megatron_resume_our_optimizer.py --megatron /tmp/megatron \
      [--pretrain-gpt build/ci/apps/pretrain_gpt] [--preprocess-data build/ci/tools/preprocess_data] \
      [--cases fp32,bf16,tp2pp2] [--work DIR] [--negative-control]

--negative-control shows the check has teeth: it swaps, in every rank's model_optim_rng.pt, the
saved AdamW states of the first two parameters of the no-weight-decay group (two norms, same shape:
what a writer with a wrong index mapping produces; Megatron loads it without complaint), and a
case passes only if the moment check then fails on exactly those two parameters' exp_avg and
exp_avg_sq, on every rank.

Not part of CTest (CI has no PyTorch).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from make_megatron_optimizer_fixture import (TRAIN_ARGS, _make_cpu_torch, build_batch, fp32_hex,  # noqa: E402
                                             initialize_megatron_process, megatron_model_flags,
                                             start_megatron_process, walk_optimizer)
from make_megatron_torch_fixture import read_safetensors  # noqa: E402
from run_megatron_load_checkpoint import free_port  # noqa: E402

ITERATIONS, EXTRA_STEPS, GLOBAL_BATCH = 3, 2, 2
# Our engine's command line (the C++ e2e test's model and optimizer flags).
OUR_FLAGS = ("--split 100,0,0 --tokenizer-type NullTokenizer --vocab-size 100 --hidden-size 32 "
             "--ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention --num-query-groups 2 "
             "--seq-length 16 --max-position-embeddings 32 --normalization RMSNorm --norm-epsilon 1e-6 --swiglu "
             "--position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear "
             "--attention-dropout 0 --hidden-dropout 0 --micro-batch-size 2 --global-batch-size 2 --lr 1e-3 "
             "--min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --adam-beta2 0.95 "
             f"--clip-grad 1.0 --train-iters {ITERATIONS} --save-interval {ITERATIONS} --ckpt-format torch "
             "--log-interval 1 --eval-iters 0 --seed 1234").split()
CASES = {  # name: (TP, PP, layers, extra flags for both engines)
    "fp32": (1, 1, 2, []),
    "bf16": (1, 1, 2, ["--bf16"]),
    "tp2pp2": (2, 2, 4, []),
}


def megatron_train_args():
    """The generator's TRAIN_ARGS with our run's --train-iters (the scheduler's steps must match)."""
    args = list(TRAIN_ARGS)
    i = args.index("--train-iters")
    args[i + 1] = str(ITERATIONS)
    return args


# ----------------------------------------------------------------------------------------------
# Our own-format checkpoint (iter_N/mindspeed_cpp)
# ----------------------------------------------------------------------------------------------
def read_own_format(it_dir):
    """({(kind, name, tp_rank or None if replicated): flat fp32 tensor}, metadata). A tensor's
    chunks (begin/end in the flat local shard) are joined and must cover it without gaps."""
    import torch

    own = os.path.join(it_dir, "mindspeed_cpp")
    meta = json.load(open(os.path.join(own, "metadata.json")))
    files, pieces = {}, {}
    for c in meta["chunks"]:
        if c["file"] not in files:
            files[c["file"]] = read_safetensors(os.path.join(own, c["file"]))
        key = (c["kind"], c["name"], c["tp_rank"] if c["tp_size"] > 1 else None)
        t = files[c["file"]][c["key"]].reshape(-1)
        assert t.numel() == c["end"] - c["begin"], c
        pieces.setdefault(key, []).append((c["begin"], t))
    out = {}
    for key, ps in pieces.items():
        ps.sort(key=lambda x: x[0])
        pos = 0
        for b, t in ps:
            assert b == pos, (key, b, pos)
            pos += t.numel()
        out[key] = torch.cat([t for _, t in ps])
    return out, meta


# ----------------------------------------------------------------------------------------------
# One Megatron rank
# ----------------------------------------------------------------------------------------------
def install_multi_rank_shims():
    """The shims the multi-rank case adds (see the docstring)."""
    import importlib

    import torch
    import torch.distributed as dist

    shims = []
    p2p = importlib.import_module("megatron.core.pipeline_parallel.p2p_communication")
    p2p.torch = _make_cpu_torch()
    shims.append("torch->CPU stand-in in megatron.core.pipeline_parallel.p2p_communication")
    inner = dist.broadcast  # install_single_rank_collectives' (single rank: no-op)

    def broadcast(tensor, src=None, group=None, async_op=False, **k):
        if tensor.dtype == torch.bool and dist.get_world_size(group) > 1:
            buf = tensor.to(torch.uint8)
            inner(buf, src, group=group, async_op=False, **k)
            tensor.copy_(buf.bool())
            return None
        return inner(tensor, src, group=group, async_op=async_op, **k)

    dist.broadcast = broadcast
    dist.distributed_c10d.broadcast = broadcast
    shims.append("torch.distributed.broadcast(bool) over >1 rank = via uint8")

    single_gather = dist.all_gather_into_tensor  # install_single_rank_collectives' (one rank: copy)

    def all_gather_into_tensor(output, input, group=None, async_op=False):
        n = dist.get_world_size(group)
        if n == 1:
            return single_gather(output, input, group=group, async_op=async_op)
        assert not async_op, "shim: all_gather_into_tensor over >1 rank runs synchronously only"
        parts = [torch.empty_like(input) for _ in range(n)]
        dist.all_gather(parts, input.contiguous(), group=group)
        output.copy_(torch.cat([x.reshape(-1) for x in parts]).view_as(output))
        return None

    replaced = {single_gather, dist._all_gather_base}
    dist.all_gather_into_tensor = dist._all_gather_base = all_gather_into_tensor
    dist.distributed_c10d.all_gather_into_tensor = dist.distributed_c10d._all_gather_base = all_gather_into_tensor
    for modname, mod in list(sys.modules.items()):
        if modname.startswith("megatron") and getattr(mod, "dist_all_gather_func", None) in replaced:
            mod.dist_all_gather_func = all_gather_into_tensor
    shims.append("torch.distributed.all_gather_into_tensor over >1 rank = all_gather + cat")
    return shims


def worker(rank, world, port, case, megatron_dir, ckpt_dir, result_path):
    result = {"ok": False, "msgs": [], "names": [], "losses": [], "bad": []}
    msgs = result["msgs"]
    ok = True
    try:
        shims = start_megatron_process(megatron_dir, rank, world, port, extra_shims=(install_multi_rank_shims,))
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

        tp, pp, _, extra = CASES[case]
        ck = torch.load(checkpointing.find_checkpoint_rank_0(ckpt_dir, ITERATIONS, False), map_location="cpu")["args"]
        assert (ck.tensor_model_parallel_size, ck.pipeline_model_parallel_size) == (tp, pp), ck
        # The generator's command line, loading the optimizer (no --no-load-optim).
        argv = ["--use-checkpoint-args", "--use-mp-args-from-checkpoint-args", "--load", ckpt_dir,
                "--ckpt-format", "torch", "--no-load-rng", "--no-save-rng"
                ] + megatron_model_flags(ck) + megatron_train_args() + extra
        args = initialize_megatron_process(argv, rank, world, tp, pp)

        # Megatron's own setup: model, optimizer, scheduler, load_checkpoint WITH the optimizer.
        model, optimizer, scheduler = training.setup_model_and_optimizer(
            pretrain_gpt.model_provider, ModelType.encoder_or_decoder)
        assert len(model) == 1
        t, p = mpu.get_tensor_model_parallel_rank(), mpu.get_pipeline_model_parallel_rank()
        where = f"rank {rank} (TP {t}, PP {p})"
        result["rank_dir"] = f"mp_rank_{t:02d}" if pp == 1 else f"mp_rank_{t:02d}_{p:03d}"
        if args.iteration != ITERATIONS:
            ok = False
            msgs.append(f"FAIL {where}: load_checkpoint resumed at iteration {args.iteration}, want {ITERATIONS}")
        if scheduler.num_steps != ITERATIONS * GLOBAL_BATCH:
            ok = False
            msgs.append(f"FAIL {where}: scheduler num_steps {scheduler.num_steps}, want {ITERATIONS * GLOBAL_BATCH}")

        # Megatron's local names -> global names (its own layer numbering).
        inner = unwrap_model(model)[0]
        layer_map = {f"decoder.layers.{i}.": f"decoder.layers.{layer.layer_number - 1}."
                     for i, layer in enumerate(inner.decoder.layers)}

        def global_name(name):
            for local, glob in layer_map.items():
                if name.startswith(local):
                    return glob + name[len(local):]
            return name

        own, _ = read_own_format(os.path.join(ckpt_dir, f"iter_{ITERATIONS:07d}"))

        def ours(kind, name):
            return own.get((kind, name, t), own.get((kind, name, None)))

        # Which of our tensors a digest belongs to (to say where misplaced moments came from).
        by_digest = {}
        for (kind, name, r), v in own.items():
            if r in (None, t):
                by_digest.setdefault(fp32_hex(v), []).append(f"{kind}/{name}")

        kind, meg_opt, adam, model_groups, main_groups, prefix_of = walk_optimizer(model, optimizer)
        steps, n_checked, bad = set(), 0, []
        for gi, (mgroup, main_group) in enumerate(zip(model_groups, main_groups)):
            for i, (mp, main) in enumerate(zip(mgroup, main_group)):
                name = global_name(prefix_of[mp])
                result["names"].append(name)
                st = adam.state[main]
                steps.add(float(st["step"]))
                for key, live in (("exp_avg", st["exp_avg"]), ("exp_avg_sq", st["exp_avg_sq"]), ("param", main)):
                    want = ours(key, name)
                    if want is None:
                        bad.append(f"{name}: no {key} of ours for TP rank {t}")
                        result["bad"].append([gi, i, key])
                        continue
                    got = live.detach().float().reshape(-1)
                    if got.numel() != want.numel() or not torch.equal(got.view(torch.int32), want.view(torch.int32)):
                        diff = "" if got.numel() != want.numel() else \
                            f", {int((got.view(torch.int32) != want.view(torch.int32)).sum())}/{got.numel()} differ"
                        bad.append(f"{name} (group {gi} index {i}): Megatron's loaded {key} "
                                   f"{tuple(live.shape)} != ours {want.numel()}{diff}; the loaded values equal ours "
                                   f"of {by_digest.get(fp32_hex(got), ['nothing'])}")
                        result["bad"].append([gi, i, key])
                    n_checked += 1
                if mp.dtype != torch.float32:
                    # The bf16 model parameter (loaded from 'model') is the fp32 main one rounded.
                    want = ours("param", name)
                    if want is not None and not torch.equal(mp.detach().reshape(-1), want.to(mp.dtype)):
                        bad.append(f"{name}: Megatron's {mp.dtype} model weight != our fp32 param rounded")
                        result["bad"].append([gi, i, "model"])
                else:
                    assert mp is main
        if bad:
            ok = False
            msgs += [f"FAIL {where}: {b}" for b in bad]
        if steps != {float(ITERATIONS)}:
            ok = False
            msgs.append(f"FAIL {where}: Adam steps {sorted(steps)}, want {ITERATIONS}")
        msgs.append(f"{where}: {kind} around {type(adam).__name__}; load_checkpoint resumed at iteration "
                    f"{args.iteration}, scheduler num_steps {scheduler.num_steps}, "
                    f"lr {adam.param_groups[0]['lr']:.6g}; "
                    f"Adam step {sorted(steps)}; {len(result['names'])} parameters, {n_checked} tensors "
                    f"(exp_avg, exp_avg_sq, main param) compared with our own format: "
                    f"{'all bitwise equal' if not bad else f'{len(bad)} differ'}")

        # ---- 2 more iterations, as train() runs them ----
        config = training.get_model_config(model[0])
        config.grad_scale_func = optimizer.scale_loss
        config.timers = get_timers()
        config.finalize_model_grads_func = finalize_model_grads
        for m in model:
            m.train()
        iteration = args.iteration
        get_rerun_state_machine().current_iteration = iteration
        for _ in range(EXTRA_STEPS):
            args.curr_iteration = iteration
            data = iter([build_batch(iteration, args)])
            loss_dict, skipped, _, should_exit, exit_code, grad_norm, _ = training.train_step(
                pretrain_gpt.forward_step, data, model, optimizer, scheduler, config)
            assert not skipped and not should_exit, (skipped, should_exit, exit_code)
            iteration += 1
            args.consumed_train_samples += mpu.get_data_parallel_world_size() * args.micro_batch_size * \
                training.get_num_microbatches()
            if "lm loss" in loss_dict:
                result["losses"].append(float(loss_dict["lm loss"]))
        steps_after = {float(adam.state[m]["step"]) for g in main_groups for m in g}
        if steps_after != {float(ITERATIONS + EXTRA_STEPS)}:
            ok = False
            msgs.append(f"FAIL {where}: Adam steps after {EXTRA_STEPS} more iterations {sorted(steps_after)}")
        if any(x != x or abs(x) == float("inf") for x in result["losses"]):
            ok = False
            msgs.append(f"FAIL {where}: non-finite loss {result['losses']}")
        msgs.append(f"{where}: {EXTRA_STEPS} more Megatron train_steps (iterations {args.iteration + 1}.."
                    f"{iteration}): " + (("lm loss " + ", ".join(f"{x:.6f}" for x in result["losses"]))
                                         if result["losses"] else "no loss on this stage") +
                    f"; grad norm {float(grad_norm):.6f}; Adam step now {sorted(steps_after)}")
        if rank == 0:
            msgs.insert(0, "shims: " + ", ".join(shims))
        torch.distributed.barrier()
        result["ok"] = ok
    except BaseException as e:  # noqa: BLE001 (SystemExit from Megatron's sys.exit() too)
        msgs.append(f"FAIL rank {rank}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
    with open(result_path, "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    os._exit(0)


# ----------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------
def make_dataset(preprocess, work):
    jsonl, prefix = os.path.join(work, "ids.jsonl"), os.path.join(work, "ids")
    with open(jsonl, "w") as f:
        for d in range(64):
            f.write(json.dumps({"text": " ".join(str((d * 7 + i * 13) % 99) for i in range(40))}) + "\n")
    subprocess.run([preprocess, "--input", jsonl, "--output-prefix", prefix, "--tokenizer-type", "NullTokenizer",
                    "--vocab-size", "100", "--append-eod"], check=True, capture_output=True)
    return prefix + "_text_document"


def swap_saved_moments(ckpt_dir, megatron_dir):
    """Negative control: in every rank's model_optim_rng.pt, swap the saved AdamW states of the
    first two parameters of the no-weight-decay group (two norm weights of the same shape), i.e.
    what a writer with a wrong index mapping would produce. Returns {rank directory: that group's
    index} (the groups' order follows the stage's first parameter: 1 on a stage with the
    embedding, 0 on a later stage, whose first parameter is a norm)."""
    import torch

    sys.path.insert(0, os.path.abspath(megatron_dir))  # (the pickle may name Megatron classes)
    it_dir = os.path.join(ckpt_dir, f"iter_{ITERATIONS:07d}")
    swapped = {}
    for d in sorted(os.listdir(it_dir)):
        if not d.startswith("mp_rank_"):
            continue
        path = os.path.join(it_dir, d, "model_optim_rng.pt")
        sd = torch.load(path, map_location="cpu")
        opt = sd["optimizer"]
        inner = opt["optimizer"] if "fp32_from_fp16_params" in opt else opt
        (gi,) = [i for i, g in enumerate(inner["param_groups"]) if g["wd_mult"] == 0.0]
        a, b = inner["param_groups"][gi]["params"][:2]
        assert inner["state"][a]["exp_avg"].shape == inner["state"][b]["exp_avg"].shape
        inner["state"][a], inner["state"][b] = inner["state"][b], inner["state"][a]
        torch.save(sd, path)
        swapped[d] = gi
    return swapped


def run_case(case, opts, data_path, work):
    tp, pp, layers, extra = CASES[case]
    world = tp * pp
    out = os.path.join(work, f"ours_{case}")
    if os.path.exists(out):
        shutil.rmtree(out)
    cmd = [opts.pretrain_gpt, "--data-path", data_path] + OUR_FLAGS + ["--num-layers", str(layers), "--save", out] + \
        extra
    if world > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(world), "-x", "OMP_NUM_THREADS=1",
               "-x", "OMP_WAIT_POLICY=PASSIVE"] + cmd + ["--tensor-model-parallel-size", str(tp),
                                                         "--pipeline-model-parallel-size", str(pp)]
    print("$", " ".join(cmd), flush=True)
    ours = subprocess.run(cmd, capture_output=True, text=True, timeout=opts.timeout)
    if ours.returncode != 0:
        print(ours.stdout[-3000:] + ours.stderr[-3000:])
        print(f"FAIL {case}: our pretrain_gpt exited {ours.returncode}", flush=True)
        return False
    our_losses = [line.split("lm loss:")[1].split("|")[0].strip() for line in ours.stdout.splitlines()
                  if "lm loss:" in line]
    print(f"    our engine: lm loss {', '.join(our_losses)}; saved {out}")
    _, meta = read_own_format(os.path.join(out, f"iter_{ITERATIONS:07d}"))
    if opts.negative_control:
        swapped = swap_saved_moments(out, opts.megatron)
        print("    negative control: swapped the saved Adam states of the no-weight-decay group's parameters 0 and 1 "
              f"(group per rank file: {swapped}); the case must FAIL on exactly those (exp_avg, exp_avg_sq)")

    port = free_port()
    with tempfile.TemporaryDirectory() as result_dir:
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(r), str(world), str(port),
                                   case, os.path.abspath(opts.megatron), out, os.path.join(result_dir, f"{r}.json")],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in range(world)]
        ok, msgs, names, logs, bad = True, [], [], [], []
        for r, pr in enumerate(procs):
            try:
                log, _ = pr.communicate(timeout=opts.timeout)
            except subprocess.TimeoutExpired:
                pr.kill()
                log, _ = pr.communicate()
                ok = False
                msgs.append(f"FAIL rank {r}: timed out after {opts.timeout}s")
            logs.append(log)
            path = os.path.join(result_dir, f"{r}.json")
            res = json.load(open(path)) if os.path.exists(path) else \
                {"ok": False, "msgs": [f"FAIL rank {r}: no result (exit {pr.returncode})"], "names": []}
            ok &= res["ok"]
            msgs += res["msgs"]
            names += res["names"]
            bad.append((res.get("rank_dir"), sorted(tuple(x) for x in res.get("bad", []))))
    want = set(meta["tensors"])
    # Each name once per TP rank holding it (TP rank 0 and 1 both hold the norms).
    if set(names) != want:
        ok = False
        msgs.append(f"FAIL coverage: only Megatron {sorted(set(names) - want)}, only ours {sorted(want - set(names))}")
    else:
        msgs.append(f"coverage: Megatron's optimizers over {world} rank(s) hold exactly the {len(want)} tensors of "
                    "our metadata.json")
    for m in msgs:
        print("   ", m.replace("\n", "\n    "))
    if not ok and not opts.negative_control:
        for r, log in enumerate(logs):
            print(f"    --- rank {r} output (last 20 lines) ---")
            print("\n".join("    | " + line for line in log.splitlines()[-20:]))
    if opts.negative_control:
        caught = not ok and len(bad) == world and all(
            d in swapped and b == sorted((swapped[d], i, k) for i in (0, 1) for k in ("exp_avg", "exp_avg_sq"))
            for d, b in bad)
        print(f"{'PASS' if caught else 'FAIL'} negative control {case} (TP{tp}xPP{pp}): the check "
              + ("caught exactly the swapped moments on every rank" if caught else
                 f"did not report exactly the swapped moments (per rank: {bad})"), flush=True)
        return caught
    print(f"{'PASS' if ok else 'FAIL'} {case} (TP{tp}xPP{pp})", flush=True)
    return ok


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        r, world, port, case, megatron_dir, ckpt_dir, result_path = sys.argv[2:9]
        worker(int(r), int(world), int(port), case, megatron_dir, ckpt_dir, result_path)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megatron", required=True, help="Megatron-LM core_v0.12.1 checkout (has megatron/)")
    parser.add_argument("--pretrain-gpt", default=os.path.join(REPO, "build/ci/apps/pretrain_gpt"))
    parser.add_argument("--preprocess-data", default=os.path.join(REPO, "build/ci/tools/preprocess_data"))
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma list of {list(CASES)}")
    parser.add_argument("--work", help="scratch directory (default: a temporary one, removed)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per step of a case")
    parser.add_argument("--negative-control", action="store_true",
                        help="swap two parameters' saved Adam states in our .pt files before Megatron loads them; "
                        "passes only if every case then fails on exactly those")
    opts = parser.parse_args()
    if not os.path.isdir(os.path.join(opts.megatron, "megatron", "training")):
        parser.error(f"{opts.megatron} is not a Megatron-LM checkout")
    cases = opts.cases.split(",")
    for c in cases:
        if c not in CASES:
            parser.error(f"unknown case {c}; known: {list(CASES)}")
    work = opts.work or tempfile.mkdtemp(prefix="mgresume_")
    os.makedirs(work, exist_ok=True)
    try:
        data_path = make_dataset(opts.preprocess_data, work)
        results = [run_case(c, opts, data_path, work) for c in cases]
    finally:
        if not opts.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{sum(results)}/{len(results)} cases passed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
