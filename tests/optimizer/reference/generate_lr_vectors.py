#!/usr/bin/env python3
"""Writes lr_vectors.txt, the learning rates tests/optimizer/lr_scheduler_test.cpp expects,
by running Megatron-LM's own OptimizerParamScheduler (megatron/core/optimizer_param_scheduler.py)
with a stub optimizer (one param group) and stubbed megatron imports.

Give it that file from a Megatron-LM checkout; core_v0.13.0 or later is needed for the WSD
anneal style minus_sqrt (core_v0.12.1's scheduler is the same file without that branch):
  git -C Megatron-LM show core_v0.13.0:megatron/core/optimizer_param_scheduler.py > /tmp/ops.py
  /usr/bin/python3 tests/optimizer/reference/generate_lr_vectors.py /tmp/ops.py

The scheduler's arguments are derived from the flags as Megatron's iteration-based training
does (megatron/training/training.py get_optimizer_param_scheduler): every step count is in
samples (iterations * global batch), --lr-decay-iters defaults to --train-iters, a warmup
fraction is of the decay samples. The scheduler then steps by the global batch once per
iteration; the rate after k iterations is what LrScheduler::lr(k) must return.

Sample-based cases (names starting samples_) give the rate after each consumed-sample count
instead, stepping by a ramp-up's uneven batches; LrScheduler::for_samples(...).lr(n) must return it.

Format: "case NAME key=value ..." (the flags; floats as float.hex(), all exact in float32 so
the C++ float config holds them exactly), then one line per iteration "k lr" (lr as
float.hex()), then "end".
"""

import hashlib
import importlib.util
import os
import sys
import types

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lr_vectors.txt")

# Dyadic rates: exact in float32 and float64.
LR = 2.0**-10
MIN_LR = 2.0**-13
INIT = 2.0**-15

# Flags per case; unset ones take Megatron's defaults below.
DEFAULTS = dict(lr=LR, min_lr=MIN_LR, lr_warmup_init=0.0, lr_decay_style="linear", lr_wsd_decay_style="exponential",
                lr_decay_iters=None, lr_wsd_decay_iters=None, lr_warmup_iters=0, lr_warmup_fraction=None,
                train_iters=40, global_batch_size=1)
CASES = [
    ("linear_warmup_iters", dict(lr_decay_style="linear", lr_warmup_iters=5)),
    ("linear_no_warmup", dict(lr_decay_style="linear", train_iters=24)),
    ("linear_decay_iters_short", dict(lr_decay_style="linear", lr_warmup_iters=4, lr_decay_iters=30, train_iters=50)),
    ("linear_decay_iters_long", dict(lr_decay_style="linear", lr_warmup_iters=4, lr_decay_iters=60, train_iters=30)),
    ("linear_fraction_batch8", dict(lr_decay_style="linear", lr_warmup_fraction=0.15625, lr_decay_iters=36,
                                    train_iters=44, global_batch_size=8)),
    ("cosine_warmup_fraction", dict(lr_decay_style="cosine", lr_warmup_fraction=0.15625, train_iters=40)),
    ("cosine_warmup_init_batch4", dict(lr_decay_style="cosine", lr_warmup_iters=8, lr_warmup_init=INIT,
                                       lr_decay_iters=40, train_iters=60, global_batch_size=4)),
    ("inverse_sqrt_warmup", dict(lr_decay_style="inverse-square-root", lr_warmup_iters=6, lr_decay_iters=100,
                                 train_iters=110, min_lr=2.0**-12)),
    ("inverse_sqrt_no_warmup_batch8", dict(lr_decay_style="inverse-square-root", train_iters=30,
                                           global_batch_size=8, min_lr=0.0)),
    ("inverse_sqrt_fraction_init", dict(lr_decay_style="inverse-square-root", lr_warmup_fraction=0.0625,
                                        lr_warmup_init=INIT, train_iters=48, global_batch_size=2)),
    ("constant_warmup_init", dict(lr_decay_style="constant", lr_warmup_iters=3, lr_warmup_init=INIT, train_iters=20)),
    ("constant_no_warmup", dict(lr_decay_style="constant", train_iters=12)),
    ("wsd_exponential", dict(lr_decay_style="WSD", lr_wsd_decay_style="exponential", lr_warmup_iters=5,
                             lr_decay_iters=60, lr_wsd_decay_iters=20, train_iters=70)),
    ("wsd_linear_fraction", dict(lr_decay_style="WSD", lr_wsd_decay_style="linear", lr_warmup_fraction=0.15625,
                                 lr_wsd_decay_iters=15, train_iters=40)),
    ("wsd_cosine_batch2_init", dict(lr_decay_style="WSD", lr_wsd_decay_style="cosine", lr_warmup_iters=4,
                                    lr_warmup_init=INIT, lr_decay_iters=36, lr_wsd_decay_iters=12, train_iters=44,
                                    global_batch_size=2)),
    ("wsd_minus_sqrt", dict(lr_decay_style="WSD", lr_wsd_decay_style="minus_sqrt", lr_warmup_iters=3,
                            lr_wsd_decay_iters=16, train_iters=40)),
    ("wsd_exponential_default_decay", dict(lr_decay_style="WSD", lr_wsd_decay_iters=10, train_iters=30)),
    ("wsd_zero_anneal", dict(lr_decay_style="WSD", lr_wsd_decay_style="linear", lr_warmup_iters=2,
                             lr_wsd_decay_iters=0, train_iters=20)),
]
PAST_END = 6  # iterations beyond max(train, decay) iterations

# Sample-based training (--train-samples): every step count is in samples as given
# (get_optimizer_param_scheduler's train_samples branch: --lr-decay-samples defaulting to
# --train-samples, a warmup fraction of the decay samples, --lr-wsd-decay-samples), and the
# scheduler steps by each iteration's global batch: here a ramp-up's uneven batches.
SAMPLE_DEFAULTS = dict(lr=LR, min_lr=MIN_LR, lr_warmup_init=0.0, lr_decay_style="linear",
                       lr_wsd_decay_style="exponential", lr_decay_samples=None, lr_wsd_decay_samples=None,
                       lr_warmup_samples=0, lr_warmup_fraction=None, train_samples=120)
SAMPLE_CASES = [
    ("samples_linear_warmup", dict(lr_decay_style="linear", lr_warmup_samples=20)),
    ("samples_cosine_fraction_decay", dict(lr_decay_style="cosine", lr_warmup_fraction=0.125, lr_decay_samples=96,
                                           lr_warmup_init=INIT)),
    ("samples_inverse_sqrt", dict(lr_decay_style="inverse-square-root", lr_warmup_samples=10, min_lr=0.0)),
    ("samples_wsd_cosine", dict(lr_decay_style="WSD", lr_wsd_decay_style="cosine", lr_warmup_samples=12,
                                lr_wsd_decay_samples=40)),
]
RAMP_BATCHES = [2, 2, 2, 4, 4, 6, 6, 8]  # then 8 per iteration


def load_scheduler(path):
    # The scheduler imports MegatronOptimizer (for a type hint) and log_single_rank only.
    megatron = types.ModuleType("megatron")
    core = types.ModuleType("megatron.core")
    optimizer = types.ModuleType("megatron.core.optimizer")
    utils = types.ModuleType("megatron.core.utils")
    optimizer.MegatronOptimizer = object
    utils.log_single_rank = lambda *args, **kwargs: None
    megatron.core, core.optimizer, core.utils = core, optimizer, utils
    for m in (megatron, core, optimizer, utils):
        sys.modules[m.__name__] = m
    spec = importlib.util.spec_from_file_location("optimizer_param_scheduler", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.OptimizerParamScheduler


class StubOptimizer:
    def __init__(self):
        self.param_groups = [{}]


def scheduler_for(cls, a):
    # Iteration-based training: steps are samples.
    gbs = a["global_batch_size"]
    decay_iters = a["lr_decay_iters"] if a["lr_decay_iters"] is not None else a["train_iters"]
    decay_steps = decay_iters * gbs
    wsd_steps = None if a["lr_wsd_decay_iters"] is None else a["lr_wsd_decay_iters"] * gbs
    if a["lr_warmup_fraction"] is not None:
        warmup_steps = a["lr_warmup_fraction"] * decay_steps
    else:
        warmup_steps = a["lr_warmup_iters"] * gbs
    opt = StubOptimizer()
    sched = cls(opt, init_lr=a["lr_warmup_init"], max_lr=a["lr"], min_lr=a["min_lr"], lr_warmup_steps=warmup_steps,
                lr_decay_steps=decay_steps, lr_decay_style=a["lr_decay_style"], start_wd=0.1, end_wd=0.1,
                wd_incr_steps=a["train_iters"] * gbs, wd_incr_style="constant", wsd_decay_steps=wsd_steps,
                lr_wsd_decay_style=a["lr_wsd_decay_style"])
    return sched, opt, decay_iters


def sample_scheduler_for(cls, a):
    decay_steps = a["lr_decay_samples"] if a["lr_decay_samples"] is not None else a["train_samples"]
    if a["lr_warmup_fraction"] is not None:
        warmup_steps = a["lr_warmup_fraction"] * decay_steps
    else:
        warmup_steps = a["lr_warmup_samples"]
    opt = StubOptimizer()
    sched = cls(opt, init_lr=a["lr_warmup_init"], max_lr=a["lr"], min_lr=a["min_lr"], lr_warmup_steps=warmup_steps,
                lr_decay_steps=decay_steps, lr_decay_style=a["lr_decay_style"], start_wd=0.1, end_wd=0.1,
                wd_incr_steps=a["train_samples"], wd_incr_style="constant", wsd_decay_steps=a["lr_wsd_decay_samples"],
                lr_wsd_decay_style=a["lr_wsd_decay_style"])
    return sched, opt, decay_steps


def fmt(v):
    if v is None:
        return "none"
    if isinstance(v, float):
        return v.hex()
    return str(v)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    cls = load_scheduler(path)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    lines = ["# Learning rates from Megatron-LM's OptimizerParamScheduler (megatron/core/optimizer_param_scheduler.py,",
             f"# sha256 {digest}); written by generate_lr_vectors.py, do not edit."]
    for name, flags in CASES:
        a = dict(DEFAULTS, **flags)
        for key in ("lr", "min_lr", "lr_warmup_init"):
            a[key] = float(a[key])
        sched, opt, decay_iters = scheduler_for(cls, a)
        lines.append("case " + name + " " + " ".join(f"{k}={fmt(v)}" for k, v in sorted(a.items())))
        for k in range(max(a["train_iters"], decay_iters) + PAST_END + 1):
            if k > 0:
                sched.step(increment=a["global_batch_size"])
            lines.append(f"{k} {float(opt.param_groups[0]['lr']).hex()}")
        lines.append("end")
    for name, flags in SAMPLE_CASES:
        a = dict(SAMPLE_DEFAULTS, **flags)
        for key in ("lr", "min_lr", "lr_warmup_init"):
            a[key] = float(a[key])
        sched, opt, decay_steps = sample_scheduler_for(cls, a)
        lines.append("case " + name + " " + " ".join(f"{k}={fmt(v)}" for k, v in sorted(a.items())))
        samples, i = 0, 0
        lines.append(f"0 {float(opt.param_groups[0]['lr']).hex()}")
        while samples <= max(a["train_samples"], decay_steps) + 24:
            batch = RAMP_BATCHES[i] if i < len(RAMP_BATCHES) else 8
            sched.step(increment=batch)
            samples += batch
            i += 1
            lines.append(f"{samples} {float(opt.param_groups[0]['lr']).hex()}")
        lines.append("end")
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {OUT}: {len(CASES) + len(SAMPLE_CASES)} cases")


if __name__ == "__main__":
    main()
