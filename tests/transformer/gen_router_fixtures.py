#!/usr/bin/env python3
"""Router fixtures for tests/transformer/moe_router_test.cpp, computed by Megatron's own code.

Runs Megatron core_v0.12.1's MoE router math (megatron/core/transformer/moe/moe_utils.py:
topk_softmax_with_capacity, group_limited_topk, switch_load_balancing_loss_func,
sequence_load_balancing_loss_func, z_loss_func, sinkhorn, get_updated_expert_bias; and
router.py's TopKRouter: compute_routing_scores_for_aux_loss, sinkhorn_load_balancing and the
whole routing() with its aux-loss and z-loss autograd hooks) on fixed random inputs, with
gradients from torch autograd, and writes router_fixtures/router_cases.json. The C++ tests
read that file, so CI needs neither torch nor Megatron.

Usage (torch 1.13 on the CPU is enough):
    /usr/bin/python3 tests/transformer/gen_router_fixtures.py /path/to/megatron-core_v0.12.1
where the path holds the `megatron/` package (e.g. `git archive core_v0.12.1 megatron | tar -x`).

Shims (what is replaced to run Megatron's code in one CPU process, and why it is harmless):
  1. Package stubs for `megatron`, `megatron.core`, `megatron.core.tensor_parallel`,
     `megatron.core.transformer`, `megatron.core.transformer.moe`: empty package modules with
     the real `__path__`, so their `__init__.py` files are not run. Those only re-export
     names (and pull in DistributedDataParallel, which needs torch >= 2's
     `torch.distributed._coalescing_manager`); every module used here is the real file.
     `megatron.core.tensor_parallel.gather_from_sequence_parallel_region` (which router.py
     imports from the package) is set to the real function from `mappings.py`.
  2. `parallel_state.get_tensor_and_context_parallel_world_size/_group` and
     `get_tensor_and_data_parallel_group`: return the simulated group below (size 1 unless a
     case says otherwise). Without an initialised torch.distributed the real ones return 0
     (a division by zero in apply_z_loss) or assert.
  3. A simulated sequence-partition group of size N as rank 0 (the num_sub_sequence cases):
     `torch.distributed.get_world_size(group)` returns N, `torch.distributed.all_reduce(t,
     group)` adds the other ranks' fixed counts to `t`, and moe_utils'
     `gather_from_sequence_parallel_region(t, group)` concatenates `t` with the other ranks'
     fixed shards along dim 0 (rank 0 first), differentiably. These are the numbers a real
     group gives rank 0, except that the gather's backward here is not reduce-scattered: the
     stored gradient is that of rank 0's own loss with respect to the gathered tensor, which
     is what the C++ function returns (its caller reduce-scatters). For size 1 all_reduce is
     the identity, as on one rank.
  4. `torch.topk` / `Tensor.topk` -> a top-k whose ties go to the lower index (a stable
     descending sort, then gather; the values keep their autograd path). That is what
     torch.topk does on CUDA, where Megatron runs (ATen's gatherTopK writes the values greater
     than the k-th and then the equal ones in index order: "the first seen set"), whereas on
     the CPU torch 1.13 picks among ties with std::nth_element (no defined order). Ties only
     arise where the inputs have them: the capacity drop (a column's zeros when an expert has
     fewer tokens than its capacity, and drop policy "position", which ranks a 0/1 map) and
     the dedicated `ties_lower_index` case. For every other topk_softmax_with_capacity case
     the script checks that torch's own topk gives the same probs, map and counts (`tie_free`
     in the file); on the four tie cases torch 1.13's CPU topk gives other maps.
  No shim touches the router math itself.
"""

import argparse
import json
import math
import os
import sys
import types

import numpy as np
import torch

S, B, E = 8, 2, 8  # sequence length, micro-batch size, experts; T = S * B token rows (s-major)
T = S * B


# ---------------------------------------------------------------------------------------------
# Loading Megatron and the shims.


class FakeGroup:
    """A sequence-partition (or TP x DP) group seen from rank 0 (shim 3)."""

    def __init__(self, size, other_counts=None, other_shards=None):
        self.size = size
        self.other_counts = other_counts  # summed counts of ranks 1..size-1
        self.other_shards = other_shards or []  # tensors of ranks 1..size-1, for the gather


CURRENT = {"group": FakeGroup(1)}

_orig_get_world_size = torch.distributed.get_world_size
_orig_all_reduce = torch.distributed.all_reduce
_orig_topk = torch.topk
_orig_tensor_topk = torch.Tensor.topk


def fake_get_world_size(group=None):
    if isinstance(group, FakeGroup):
        return group.size
    return _orig_get_world_size(group)


def fake_all_reduce(tensor, op=None, group=None, async_op=False):
    if isinstance(group, FakeGroup):
        if group.size > 1:
            tensor.add_(group.other_counts.to(tensor.dtype))
        return None
    return _orig_all_reduce(tensor, group=group, async_op=async_op)


def fake_gather(tensor, group=None, **kwargs):
    assert isinstance(group, FakeGroup)
    return torch.cat([tensor] + list(group.other_shards), dim=0)


def stable_topk(input, k, dim=-1, largest=True, sorted=True):
    order = torch.sort(input.detach(), dim=dim, descending=largest, stable=True)[1]
    idx = order.narrow(dim, 0, k)
    return torch.gather(input, dim, idx), idx


def tensor_stable_topk(self, k, dim=-1, largest=True, sorted=True):
    return stable_topk(self, k, dim, largest, sorted)


def use_stable_topk(on):
    torch.topk = stable_topk if on else _orig_topk
    torch.Tensor.topk = tensor_stable_topk if on else _orig_tensor_topk


def load_megatron(root):
    sys.path.insert(0, root)
    for name in ["megatron", "megatron.core", "megatron.core.tensor_parallel",
                 "megatron.core.transformer", "megatron.core.transformer.moe"]:
        m = types.ModuleType(name)
        m.__path__ = [os.path.join(root, *name.split("."))]
        sys.modules[name] = m
    import megatron.core.tensor_parallel.mappings as mappings

    sys.modules["megatron.core.tensor_parallel"].gather_from_sequence_parallel_region = (
        mappings.gather_from_sequence_parallel_region)
    import megatron.core.parallel_state as ps
    import megatron.core.transformer.moe.moe_utils as mu
    import megatron.core.transformer.moe.router as router
    from megatron.core.transformer.transformer_config import TransformerConfig

    ps.get_tensor_and_context_parallel_world_size = lambda: CURRENT["group"].size
    ps.get_tensor_and_context_parallel_group = lambda: CURRENT["group"]
    ps.get_tensor_and_data_parallel_group = lambda with_context_parallel=False: CURRENT["group"]
    torch.distributed.get_world_size = fake_get_world_size
    torch.distributed.all_reduce = fake_all_reduce
    mu.gather_from_sequence_parallel_region = fake_gather
    return mu, router, TransformerConfig


# ---------------------------------------------------------------------------------------------
# Fixture values.


def f32_list(t):
    """Flat fp32 values as the shortest decimal that comes back through double -> float."""
    out = []
    for v in t.detach().reshape(-1).tolist():
        x = np.float32(v)
        s = repr(float(repr(x)))
        if np.float32(float(s)) != x:
            s = "%.9g" % v
        assert np.float32(float(s)) == x
        out.append(float(s))
    return out


def int_list(t):
    return [int(v) for v in t.detach().reshape(-1).tolist()]


class Case:
    """One fixture case: Megatron's config fields and the random inputs."""

    def __init__(self, name, seed, topk=2, score_function="softmax", pre_softmax=False,
                 num_groups=None, group_topk=None, scaling_factor=None, capacity_factor=None,
                 pad_to_capacity=False, drop_policy="probs", load_balancing="aux_loss",
                 aux_loss_coeff=0.0, z_loss_coeff=None, expert_bias=False, num_sub_sequence=1,
                 skew=0.0, ties=False, tie_free=True):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        g = torch.Generator().manual_seed(seed)
        if ties:  # few distinct values: many ties inside a row
            self.logits = torch.randint(0, 3, (S, B, E), generator=g).float()
        else:
            self.logits = torch.randn(S, B, E, generator=g) * 1.5
        # A skew makes the low experts popular (capacity drops) and the high ones rare (padding).
        self.logits += skew * torch.linspace(1.0, -1.0, E)
        self.bias = torch.randn(E, generator=g) * 0.1 if expert_bias else None
        self.dprobs = torch.randn(T, E, generator=g)
        self.dscores = torch.randn(T, E, generator=g)
        # Rank 1..N-1 of a simulated sequence-partition group: their logits.
        self.other_logits = [torch.randn(S, B, E, generator=g) * 1.5
                             for _ in range(num_sub_sequence - 1)]

    def config_json(self):
        keys = ["topk", "score_function", "pre_softmax", "num_groups", "group_topk",
                "scaling_factor", "capacity_factor", "pad_to_capacity", "drop_policy",
                "load_balancing", "aux_loss_coeff", "z_loss_coeff", "num_sub_sequence"]
        return {k: getattr(self, k) for k in keys}


def transformer_config(TransformerConfig, c):
    return TransformerConfig(
        num_layers=1, hidden_size=8, num_attention_heads=1, add_bias_linear=False,
        perform_initialization=False, num_moe_experts=E, moe_router_topk=c.topk,
        moe_router_score_function=c.score_function, moe_router_pre_softmax=c.pre_softmax,
        moe_router_num_groups=c.num_groups, moe_router_group_topk=c.group_topk,
        moe_router_topk_scaling_factor=c.scaling_factor,
        moe_expert_capacity_factor=c.capacity_factor,
        moe_pad_expert_input_to_capacity=c.pad_to_capacity, moe_token_drop_policy=c.drop_policy,
        moe_router_load_balancing_type=c.load_balancing, moe_aux_loss_coeff=c.aux_loss_coeff,
        moe_z_loss_coeff=c.z_loss_coeff, moe_router_enable_expert_bias=c.expert_bias)


def run_case(mu, router_mod, TransformerConfig, c):
    out = {"name": c.name, "S": S, "B": B, "E": E, "config": c.config_json(),
           "logits": f32_list(c.logits), "dprobs": f32_list(c.dprobs),
           "dscores": f32_list(c.dscores)}
    if c.bias is not None:
        out["expert_bias"] = f32_list(c.bias)
    if c.other_logits:
        out["other_logits"] = [f32_list(x) for x in c.other_logits]
    cfg = transformer_config(TransformerConfig, c)
    rt = router_mod.TopKRouter(cfg)
    rt.train()
    if c.bias is not None:
        rt.expert_bias.copy_(c.bias)
    flat = lambda x: x.reshape(T, E)

    def routing(x):
        return mu.topk_softmax_with_capacity(
            x, c.topk, capacity_factor=c.capacity_factor, pad_to_capacity=c.pad_to_capacity,
            drop_policy=c.drop_policy, use_pre_softmax=c.pre_softmax, num_groups=c.num_groups,
            group_topk=c.group_topk, scaling_factor=c.scaling_factor,
            score_function=c.score_function, expert_bias=c.bias)

    # 1. The routing alone: topk_softmax_with_capacity (or the sinkhorn routing), forward and
    #    backward of sum(probs * dprobs).
    x = flat(c.logits).clone().requires_grad_(True)
    if c.load_balancing == "sinkhorn":
        probs, rmap = rt.sinkhorn_load_balancing(x)
        tpe = rmap.sum(dim=0)
        out["sinkhorn_norm"] = f32_list(mu.sinkhorn(flat(c.logits)))
    else:
        probs, rmap, tpe = routing(x)
    (probs * c.dprobs).sum().backward()
    out["routing"] = {"probs": f32_list(probs), "routing_map": int_list(rmap.int()),
                      "tokens_per_expert": int_list(tpe), "dlogits": f32_list(x.grad)}
    if c.load_balancing != "sinkhorn" and c.tie_free:
        # Shim 4 is transparent here: torch's own CPU topk gives the same outputs.
        use_stable_topk(False)
        p2, m2, t2 = routing(flat(c.logits))
        use_stable_topk(True)
        assert torch.equal(p2, probs.detach()) and torch.equal(m2, rmap), c.name
        assert torch.equal(t2, tpe), c.name
    out["tie_free"] = c.tie_free

    # 2. The scores for the aux loss: forward and backward of sum(scores * dscores).
    x = flat(c.logits).clone().requires_grad_(True)
    scores = rt.compute_routing_scores_for_aux_loss(x)
    (scores * c.dscores).sum().backward()
    out["aux_scores"] = {"scores": f32_list(scores), "dlogits": f32_list(x.grad)}

    # 3. The load-balancing loss alone, with its gradient with respect to the scores.
    if c.load_balancing in ("aux_loss", "seq_aux_loss") and c.aux_loss_coeff:
        group = None
        other_counts = torch.zeros(E, dtype=torch.int64)
        other_scores = []
        for ol in c.other_logits:
            other_counts += routing(flat(ol))[2]
            other_scores.append(rt.compute_routing_scores_for_aux_loss(flat(ol)).detach())
        # The other ranks' shards are leaves too: the seq-aux gradient is stored with respect
        # to the whole gathered sequence (rank 0's rows first).
        other_shards = [o.view(S, B, E).clone().requires_grad_(True) for o in other_scores]
        if c.num_sub_sequence > 1:
            group = FakeGroup(c.num_sub_sequence, other_counts, other_shards)
            out["other_tokens_per_expert"] = int_list(other_counts)
        s = scores.detach().clone().requires_grad_(True)
        if c.load_balancing == "aux_loss":
            loss = mu.switch_load_balancing_loss_func(
                s, tpe.clone(), c.topk, c.aux_loss_coeff, sequence_partition_group=group)
        else:
            loss = mu.sequence_load_balancing_loss_func(
                s, rmap, B, S, c.topk, c.aux_loss_coeff, sequence_partition_group=group)
        loss.backward()
        grads = [s.grad] + [o.grad.reshape(T, E) for o in other_shards if o.grad is not None]
        out["aux_loss"] = {"value": float(loss), "dscores": f32_list(torch.cat(grads))}
        if group is not None:
            CURRENT["group"] = group  # the whole router below sees the same group

    # 4. The z-loss alone: value and d/dlogits.
    if c.z_loss_coeff:
        x = flat(c.logits).clone().requires_grad_(True)
        z = mu.z_loss_func(x, c.z_loss_coeff)
        z.backward()
        out["z_loss"] = {"value": float(z), "dlogits": f32_list(x.grad)}

    # 5. The whole TopKRouter.routing() in training: z-loss hook, routing, aux-loss hook;
    #    backward of sum(probs * dprobs) with the hooks' loss gradient 1.
    x = c.logits.clone().requires_grad_(True)
    probs, rmap = rt.routing(x)
    (probs * c.dprobs).sum().backward()
    out["router"] = {"probs": f32_list(probs), "routing_map": int_list(rmap.int()),
                     "dlogits": f32_list(x.grad.reshape(T, E))}
    CURRENT["group"] = FakeGroup(1)
    return out


def expert_bias_case(mu):
    counts = torch.tensor([4.0, 2.0, 6.0, 4.0, 0.0, 9.0, 3.0, 4.0])  # mean 4: three zeros
    bias = torch.tensor([0.01, -0.02, 0.0, 0.03, -0.01, 0.02, 0.0, -0.03])
    rate = 1e-3
    new_bias = mu.get_updated_expert_bias(counts.clone(), bias, rate)
    return {"name": "expert_bias_update", "tokens_per_expert": f32_list(counts),
            "expert_bias": f32_list(bias), "rate": rate, "updated": f32_list(new_bias)}


CASES = [
    Case("softmax_top2", 1, aux_loss_coeff=1e-2),
    Case("softmax_top2_pre_softmax", 2, pre_softmax=True, aux_loss_coeff=1e-2),
    Case("sigmoid_bias_scaling", 3, score_function="sigmoid", expert_bias=True,
         scaling_factor=2.5, load_balancing="none"),
    Case("group_limited_softmax", 4, topk=4, num_groups=4, group_topk=2, aux_loss_coeff=1e-2),
    Case("group_limited_sigmoid_bias", 5, topk=3, num_groups=4, group_topk=2,
         score_function="sigmoid", expert_bias=True, scaling_factor=2.5,
         load_balancing="seq_aux_loss", aux_loss_coeff=1e-3),
    Case("capacity_probs", 6, capacity_factor=1.0, skew=1.5, aux_loss_coeff=1e-2),
    Case("capacity_probs_pad", 7, capacity_factor=1.0, pad_to_capacity=True, skew=1.5,
         aux_loss_coeff=1e-2, tie_free=False),
    Case("capacity_position", 8, capacity_factor=1.0, drop_policy="position", skew=1.5,
         aux_loss_coeff=1e-2, tie_free=False),
    Case("capacity_position_pad", 9, capacity_factor=1.0, pad_to_capacity=True,
         drop_policy="position", skew=1.5, aux_loss_coeff=1e-2, tie_free=False),
    Case("aux_loss_sub_sequence_2", 10, aux_loss_coeff=1e-2, num_sub_sequence=2),
    Case("seq_aux_loss_sigmoid", 11, score_function="sigmoid", load_balancing="seq_aux_loss",
         aux_loss_coeff=1e-2),
    Case("seq_aux_loss_sub_sequence_2", 12, load_balancing="seq_aux_loss", aux_loss_coeff=1e-2,
         num_sub_sequence=2),
    Case("z_loss", 13, aux_loss_coeff=1e-2, z_loss_coeff=1e-3),
    Case("sinkhorn_top1", 14, topk=1, load_balancing="sinkhorn"),
    Case("sinkhorn_top2", 15, topk=2, load_balancing="sinkhorn"),
    Case("softmax_top1_pre_softmax", 16, topk=1, pre_softmax=True, aux_loss_coeff=1e-2),
    Case("sigmoid_top1", 17, topk=1, score_function="sigmoid", aux_loss_coeff=1e-2),
    Case("ties_lower_index", 18, ties=True, capacity_factor=1.0, drop_policy="probs",
         pad_to_capacity=True, tie_free=False),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("megatron", help="a checkout of Megatron-LM core_v0.12.1 (holds megatron/)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "router_fixtures", "router_cases.json"))
    args = ap.parse_args()
    torch.set_grad_enabled(True)
    mu, router_mod, TransformerConfig = load_megatron(os.path.abspath(args.megatron))
    use_stable_topk(True)
    cases = [run_case(mu, router_mod, TransformerConfig, c) for c in CASES]
    doc = {"generator": "tests/transformer/gen_router_fixtures.py",
           "megatron": "core_v0.12.1", "torch": torch.__version__,
           "layout": "row-major [T, E] with T = S * B token rows, row = s * B + b",
           "cases": cases, "expert_bias_update": expert_bias_case(mu)}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", args.out, "with", len(cases), "cases")


if __name__ == "__main__":
    main()
