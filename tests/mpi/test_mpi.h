// Shared state of the MPI tests.
#pragma once

#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/check.h"
#include "distributed/param_and_grad_buffer.h"
#include "kernels/backend.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/hf_checkpoint.h"
#include "module/forward_context.h"
#include "parallel/initialize.h"

namespace mindspeed::testing {
/// This process's MPI world (set by mpi_test_main.cpp).
MpiWorld& mpi_world();

/// The tensor-parallel size a golden fixture (tests/golden/<name>) runs at on this world:
/// every rank for the GPT-2-style one, 2 for the LLaMA-style ones (2 query groups; data
/// parallel over the rest). With the parallel state of that layout.
struct FixtureLayout {
  int tp = 1;
  std::unique_ptr<ParallelState> ps;
};
inline FixtureLayout fixture_layout(const std::string& fixture, const MpiWorld& world) {
  FixtureLayout out;
  out.tp = fixture == "gpt2_tiny" ? world.size : 2;
  ParallelConfig pc;
  pc.tensor_model_parallel_size = out.tp;
  auto ps = initialize_model_parallel(pc, world);
  MS_CHECK_OK(ps.status());
  out.ps = std::move(*ps);
  return out;
}

/// The parallel state of `pc` on this world (a check failure if it is refused), a fast CPU
/// backend with one thread, an allocator, and a ForwardContext over the three: what the tests of
/// a module's communication start from. Not copyable (the context points into it).
struct ContextOnWorld {
  std::unique_ptr<ParallelState> ps;
  Backend backend;
  Allocator alloc;
  ForwardContext ctx;
  ContextOnWorld(const ParallelConfig& pc, const MpiWorld& world) {
    auto s = initialize_model_parallel(pc, world);
    MS_CHECK_OK(s.status());
    ps = std::move(*s);
    backend = select_backend(KernelOptions{.fast = true}, 1);
    ctx.backend = &backend;
    ctx.alloc = &alloc;
    ctx.ps = ps.get();
  }
  ContextOnWorld(const ContextOnWorld&) = delete;
  ContextOnWorld& operator=(const ContextOnWorld&) = delete;
};
/// The whole world as one tensor-parallel group.
inline ParallelConfig tensor_parallel_over(const MpiWorld& world) {
  ParallelConfig pc;
  pc.tensor_model_parallel_size = world.size;
  return pc;
}

/// A golden fixture's model (a Hugging Face directory) loaded at `ps`, its vocabulary padded
/// as at tensor-parallel size `padding_tp`.
struct FixtureModel {
  ModelConfig config;
  std::unique_ptr<ParameterRegistry> registry = std::make_unique<ParameterRegistry>();
  Allocator alloc;
  std::unique_ptr<GPTModel> model;
  std::unique_ptr<ParamAndGradBuffer> buffer;
};
inline std::unique_ptr<FixtureModel> load_fixture_model(const std::string& dir, const ParallelState& ps,
                                                        int padding_tp) {
  auto info = read_hf_config(dir);
  MS_CHECK_OK(info.status());
  auto out = std::make_unique<FixtureModel>();
  out->config = info->config;
  out->config.padded_vocab_size = padded_vocab(out->config.vocab_size, 128, padding_tp);
  out->model = std::make_unique<GPTModel>(out->config, ps, *out->registry);
  out->buffer = std::make_unique<ParamAndGradBuffer>(out->model->registry(), out->alloc, BufferOptions{});
  MS_CHECK_OK(load_hf_checkpoint(dir, *out->model, ps));
  return out;
}
}  // namespace mindspeed::testing
