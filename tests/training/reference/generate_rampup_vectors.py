#!/usr/bin/env python3
"""Writes rampup_vectors.txt, the batch-size schedules tests/training/num_microbatches_test.cpp
expects, by running Megatron-LM's own micro-batch calculators
(megatron/core/num_microbatches_calculator.py: ConstantNumMicroBatchesCalculator and
RampupBatchsizeNumMicroBatchesCalculator; the file imports only the standard library).

Give it that file from a Megatron-LM checkout:
  git -C Megatron-LM show core_v0.12.1:megatron/core/num_microbatches_calculator.py > /tmp/nmc.py
  /usr/bin/python3 tests/training/reference/generate_rampup_vectors.py /tmp/nmc.py

Per case it also runs two pieces of megatron/training/training.py (core_v0.12.1), restated here
because that module needs torch and a GPU: update_train_iters (the iteration count of a
sample-based run: the ramp-up phase stepped through, then whole global batches) and the
training loop's bookkeeping (update the calculator from the consumed samples, train, add
dp * micro batch * micro-batches to the consumed samples).

Format: "case NAME key=value ..." (the arguments), "train_iters N", then one line per iteration
"consumed_before current_global_batch running_global_batch num_micro_batches", then "end".
"""

import importlib.util
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rampup_vectors.txt")

# (name, global batch, micro batch, data-parallel size, train samples, rampup or None,
#  decrease-batch-size-if-needed)
CASES = [
    ("constant", 8, 2, 2, 50, None, False),
    ("constant_decrease", 10, 2, 2, 50, None, True),
    ("even_increments", 12, 1, 2, 100, (4, 2, 40), False),
    ("fractional_increments", 8, 1, 1, 60, (2, 2, 17), False),
    ("micro2_dp2", 32, 2, 2, 300, (8, 8, 96), False),
    ("ramp_longer_than_training", 16, 1, 2, 40, (2, 2, 1000), False),
    ("decrease_if_needed", 12, 2, 2, 80, (6, 3, 30), True),
]


def load(path):
    spec = importlib.util.spec_from_file_location("num_microbatches_calculator", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(nmc, gbs, mbs, dp, rampup, decrease):
    # _build_num_microbatches_calculator, as init_num_microbatches_calculator calls it.
    return nmc._build_num_microbatches_calculator(0, list(rampup) if rampup else None, gbs, mbs, dp, decrease)


def train_iters(calc, gbs, train_samples, rampup):
    # training.py update_train_iters, with the calculator in place of the module globals.
    if rampup is None:
        return train_samples // gbs
    iterations = 0
    consumed = 0
    while consumed <= int(rampup[2]) and consumed <= train_samples:
        calc.update(consumed, consistency_check=False)
        consumed += calc.get_current_global_batch_size()
        iterations += 1
    calc.update(0, consistency_check=False)
    if train_samples > consumed:
        iterations += (train_samples - consumed) // gbs
    return iterations


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    nmc = load(sys.argv[1])
    lines = ["# Written by generate_rampup_vectors.py from Megatron-LM's num_microbatches_calculator.py."]
    for name, gbs, mbs, dp, samples, rampup, decrease in CASES:
        calc = build(nmc, gbs, mbs, dp, rampup, decrease)
        iters = train_iters(calc, gbs, samples, rampup)
        ramp = "none" if rampup is None else ",".join(str(v) for v in rampup)
        lines.append(f"case {name} global_batch_size={gbs} micro_batch_size={mbs} data_parallel_size={dp} "
                     f"train_samples={samples} rampup={ramp} decrease_batch_size_if_needed={int(decrease)}")
        lines.append(f"train_iters {iters}")
        consumed = 0
        for _ in range(iters):
            # training.py train(): update without, then with the consistency check.
            calc.update(consumed, consistency_check=False)
            calc.update(consumed, consistency_check=True)
            lines.append(f"{consumed} {calc.get_current_global_batch_size()} "
                         f"{calc.get_current_running_global_batch_size()} {calc.get()}")
            consumed += dp * mbs * calc.get()
        lines.append("end")
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
