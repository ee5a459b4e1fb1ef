#!/usr/bin/env python3
"""Writes grad_scaler_vectors.txt, the loss-scale sequences tests/optimizer/grad_scaler_test.cpp
expects, by running Megatron-LM's own DynamicGradScaler and ConstantGradScaler
(megatron/core/optimizer/grad_scaler.py) on the CPU (its device='cuda' tensors made CPU ones).

Give it that file from a Megatron-LM checkout:
  git -C Megatron-LM show core_v0.12.1:megatron/core/optimizer/grad_scaler.py > /tmp/grad_scaler.py
  /usr/bin/python3 tests/optimizer/reference/generate_grad_scaler_vectors.py /tmp/grad_scaler.py

Format: "case NAME initial=.. min=.. growth=.. backoff=.. interval=.. hysteresis=.." (floats as
float.hex(); "constant" cases give only initial), then one line per update
"found_inf scale growth_tracker hysteresis_tracker" (the state after it; scale as float.hex()),
then "end". The first line of the file names the source's sha256.
"""

import hashlib
import sys
import types

import torch


def load(path):
    source = open(path).read()
    module = types.ModuleType("grad_scaler")
    exec(compile(source.replace("device='cuda'", "device='cpu'"), path, "exec"), module.__dict__)
    return module, hashlib.sha256(source.encode()).hexdigest()


def flags(pattern, repeat=1):
    return [c == "x" for c in pattern] * repeat


def main():
    gs, digest = load(sys.argv[1])
    # (name, dynamic?, initial, min, growth, backoff, interval, hysteresis, found_inf sequence)
    cases = [
        ("megatron_defaults_start", True, 2.0**32, 1.0, 2.0, 0.5, 1000, 2, flags("x" * 20 + "." * 5)),
        ("window3_hysteresis2", True, 2.0**16, 1.0, 2.0, 0.5, 3, 2,
         flags("x..x.x...x....xx.xx......xxx...")),
        ("window1_hysteresis1", True, 1024.0, 1.0, 2.0, 0.5, 1, 1, flags("x.x..xx...")),
        ("floor_at_min", True, 8.0, 2.0, 2.0, 0.5, 1000, 1, flags("xxxxx..")),
        ("hysteresis3_growth_resets", True, 4096.0, 1.0, 2.0, 0.5, 2, 3, flags("xx..xxx..x.x.xxxx..")),
        ("non_power_of_two", True, 1000.0, 0.75, 2.0, 0.5, 2, 1, flags("x..xxxx..x")),
        ("constant_scale", False, 4096.0, 0, 0, 0, 0, 0, flags("x..x.")),
    ]
    out = ["# Loss scales from Megatron-LM's grad_scaler.py (sha256 %s);" % digest,
           "# written by generate_grad_scaler_vectors.py, do not edit."]
    for name, dynamic, initial, min_scale, growth, backoff, interval, hysteresis, seq in cases:
        if dynamic:
            s = gs.DynamicGradScaler(initial, min_scale, growth, backoff, interval, hysteresis)
            out.append("case %s initial=%s min=%s growth=%s backoff=%s interval=%d hysteresis=%d" % (
                name, float(initial).hex(), float(min_scale).hex(), float(growth).hex(), float(backoff).hex(),
                interval, hysteresis))
        else:
            s = gs.ConstantGradScaler(initial)
            out.append("case %s initial=%s constant" % (name, float(initial).hex()))
        for found_inf in seq:
            s.update(found_inf)
            growth_tracker = getattr(s, "_growth_tracker", 0)
            hysteresis_tracker = getattr(s, "_hysteresis_tracker", 0)
            out.append("%d %s %d %d %s" % (int(found_inf), float(s.scale.item()).hex(), growth_tracker,
                                            hysteresis_tracker, float(s.inv_scale.item()).hex()))
        out.append("end")
    open(__file__.rsplit("/", 1)[0] + "/grad_scaler_vectors.txt", "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
