// One process's training set-up for the single-process benchmarks (train_throughput,
// checkpoint_io): the GPT model at its master-weight initialisation (seed 1234), its
// parameter/gradient buffer, AdamW (lr 1e-4, no distributed optimizer), the forward context
// and one micro-batch of deterministic random tokens, with step() running train_step on it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "distributed/param_and_grad_buffer.h"
#include "kernels/backend.h"
#include "models/gpt/gpt_model.h"
#include "optimizer/optimizer.h"
#include "training/train_step.h"

namespace mindspeed::bench {

struct BenchModel {
  /// `micro_batch` samples of m.seq_length tokens; flash or core attention.
  BenchModel(const ModelConfig& m, bool flash_attention, int64_t micro_batch)
      : ps(ParallelState::single_process()),
        backend(select_backend(KernelOptions{.fast = true, .flash_attention = flash_attention})),
        model(m, *ps, registry),
        buffer(model.registry(), alloc, BufferOptions{}) {
    initialize_parameters(model.registry(), 1234, 0, 1);
    OptimizerConfig oc;
    oc.lr = 1e-4f;
    optimizer = std::make_unique<Optimizer>(oc, buffer, *ps, alloc, backend, false);
    ctx.backend = &backend;
    ctx.alloc = &alloc;
    ctx.ps = ps.get();
    MicroBatch mb;
    mb.B = micro_batch;
    mb.T = m.seq_length;
    for (int64_t i = 0; i < mb.B * mb.T; ++i) {
      const RngStream rng{1, static_cast<uint64_t>(i)};
      mb.tokens.push_back(static_cast<int32_t>(rng.block(0)[0] % m.vocab_size));
      mb.labels.push_back(static_cast<int32_t>(rng.block(0)[1] % m.vocab_size));
      mb.loss_mask.push_back(1.0f);
      mb.position_ids.push_back(static_cast<int32_t>(i % mb.T));
    }
    batch.push_back(std::move(mb));
  }
  /// One training step (forward, backward, AdamW) on the batch as iteration `iteration`.
  TrainStepResult step(int64_t iteration) {
    ctx.iteration = iteration;
    return train_step(model, buffer, *optimizer, nullptr, ctx, batch, 1e-4);
  }

  std::unique_ptr<ParallelState> ps;
  Backend backend;
  Allocator alloc;
  ParameterRegistry registry;
  GPTModel model;
  ParamAndGradBuffer buffer;
  std::unique_ptr<Optimizer> optimizer;
  ForwardContext ctx;
  std::vector<MicroBatch> batch;
};

}  // namespace mindspeed::bench
