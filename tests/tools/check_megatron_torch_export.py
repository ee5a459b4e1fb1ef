#!/usr/bin/python3
"""Checks what convert_checkpoint --save-model-type mg-torch writes with PyTorch itself (CI has
no PyTorch; run it by hand with Debian's interpreter, python3-torch):

  build/ci/tools/convert_checkpoint --load-model-type hf --save-model-type mg-torch \
      --load-dir tests/golden/llama_tiny --save-dir /tmp/mt \
      --target-tensor-parallel-size 2 --target-pipeline-parallel-size 2
  /usr/bin/python3 tests/tools/check_megatron_torch_export.py /tmp/mt

Every mp_rank_*/model_optim_rng.pt must load with torch.load (weights_only=False, as Megatron
loads it), hold Megatron's keys (args namespace, checkpoint_version 3.0, iteration, model, or
model0, model1, ... with --num-layers-per-virtual-pipeline-stage),
and the shards must put together to shapes that agree with args. With --hf DIR (a LLaMA-style
Hugging Face directory such as tests/golden/llama_tiny) every shard must equal, exactly, the
shard make_megatron_torch_fixture.py lays out from that directory with Megatron's layouts.
"""
import argparse
import glob
import os
import sys

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--hf", help="Hugging Face directory the checkpoint was converted from")
    opts = parser.parse_args()
    d = opts.dir
    tracked = open(os.path.join(d, "latest_checkpointed_iteration.txt")).read().strip()
    it_dir = os.path.join(d, "release" if tracked == "release" else f"iter_{int(tracked):07d}")
    files = sorted(glob.glob(os.path.join(it_dir, "mp_rank_*", "model_optim_rng.pt")))
    assert files, f"no rank files under {it_dir}"
    for f in files:
        sd = torch.load(f, map_location="cpu")
        a = sd["args"]
        assert isinstance(a, argparse.Namespace)
        vpp = getattr(a, "virtual_pipeline_model_parallel_size", None)
        chunks = ["model"] if vpp is None else [f"model{v}" for v in range(vpp)]
        assert set(sd) == {"args", "checkpoint_version", "iteration", *chunks}, sorted(sd)
        assert sd["checkpoint_version"] == 3.0
        for chunk in chunks:
            for name, t in sd[chunk].items():
                assert isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.is_contiguous(), name
        print(f"{os.path.relpath(f, d)}: {sum(len(sd[c]) for c in chunks)} tensors in {len(chunks)} chunk(s), "
              f"tp {a.tensor_model_parallel_size} pp {a.pipeline_model_parallel_size} vpp {vpp}, "
              f"layers {a.num_layers}, hidden {a.hidden_size}")
    expected = sd["args"].tensor_model_parallel_size * sd["args"].pipeline_model_parallel_size
    assert len(files) == expected, f"{len(files)} files for {expected} ranks"
    if opts.hf:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import make_megatron_torch_fixture as fixture
        a = sd["args"]
        vpp = getattr(a, "virtual_pipeline_model_parallel_size", None)
        _, want = fixture.megatron_shards(opts.hf, a.tensor_model_parallel_size, a.pipeline_model_parallel_size,
                                          vpp=vpp, divisible_by=a.make_vocab_size_divisible_by)
        for key, model in want.items():
            t, p = key[:2]
            chunk = "model" if vpp is None else f"model{key[2]}"
            name = f"mp_rank_{t:02d}" if a.pipeline_model_parallel_size == 1 else f"mp_rank_{t:02d}_{p:03d}"
            got = torch.load(os.path.join(it_dir, name, "model_optim_rng.pt"), map_location="cpu")[chunk]
            assert list(got) == list(model), f"{name} {chunk}: keys {list(got)} != {list(model)}"
            for k, w in model.items():
                assert torch.equal(got[k], w), f"{name} {chunk}: {k} differs"
        print("every shard equals Megatron's layout of", opts.hf)
    print("ok")


if __name__ == "__main__":
    sys.exit(main())
