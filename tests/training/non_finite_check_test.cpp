// Megatron's check_for_nan_in_loss_and_grad with a diagnosis: the first parameter whose
// gradient is not finite is named, and the cause is told apart (weights already non-finite,
// the forward pass, the backward pass); the optimizer skips an update whose gradient norm is
// not finite; non-finite weights loaded from a checkpoint are refused by tensor name.
#include "training/non_finite_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "distributed/param_and_grad_buffer.h"
#include "optimizer/optimizer.h"

namespace mindspeed {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Rig {
  std::unique_ptr<ParallelState> ps = ParallelState::single_process();
  Backend backend = select_backend(KernelOptions{});
  Allocator alloc;
  ParameterRegistry registry;
  std::unique_ptr<ParamAndGradBuffer> buffer;
  Rig() {
    registry.add({.name = "embedding.word_embeddings.weight", .global_shape = Shape{8, 4}, .init = InitMethod::kNormal,
                  .init_std = 0.02f},
                 1);
    registry.add({.name = "decoder.layers.0.mlp.linear_fc1.weight", .global_shape = Shape{4, 4},
                  .init = InitMethod::kNormal, .init_std = 0.02f},
                 1);
    buffer = std::make_unique<ParamAndGradBuffer>(registry, alloc, BufferOptions{});
    initialize_parameters(registry, 1, 0, 1);
    for (const auto& p : registry.params()) std::fill(p->g(), p->g() + p->local_shape.numel(), 0.5f);
  }
  Parameter& param(int i) { return *registry.params()[i]; }
};

TEST(NonFiniteCheck, NamesTheFirstParameterAndTheBackwardPass) {
  Rig rig;
  rig.param(1).g()[3] = kNaN;
  const Status s = diagnose_non_finite(rig.registry, *rig.ps, rig.backend, rig.alloc, 7, /*local_loss_sum=*/2.5);
  ASSERT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("iteration 7"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("decoder.layers.0.mlp.linear_fc1.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("gradient not finite on rank(s) 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("backward pass"), std::string::npos) << s.message();
}

TEST(NonFiniteCheck, TellsTheForwardPassFromWeightsThatWereAlreadyBad) {
  Rig rig;
  rig.param(0).g()[0] = kNaN;
  Status s = diagnose_non_finite(rig.registry, *rig.ps, rig.backend, rig.alloc, 3, kNaN);
  EXPECT_NE(s.message().find("embedding.word_embeddings.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("forward pass"), std::string::npos) << s.message();
  rig.param(1).data.f32()[0] = std::numeric_limits<float>::infinity();
  s = diagnose_non_finite(rig.registry, *rig.ps, rig.backend, rig.alloc, 3, kNaN);
  EXPECT_NE(s.message().find("weights were already non-finite"), std::string::npos) << s.message();
}

TEST(NonFiniteCheck, LoadedWeightsAreRefusedByTensorName) {
  Rig rig;
  EXPECT_TRUE(check_weights_finite(rig.registry, rig.backend, rig.alloc, "/ckpt").ok());
  rig.param(1).data.f32()[5] = kNaN;
  const Status s = check_weights_finite(rig.registry, rig.backend, rig.alloc, "/ckpt");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("decoder.layers.0.mlp.linear_fc1.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("/ckpt"), std::string::npos) << s.message();
}

TEST(NonFiniteCheck, TheOptimizerSkipsANonFiniteUpdate) {
  Rig rig;
  OptimizerConfig oc;
  oc.lr = 0.1f;
  Optimizer opt(oc, *rig.buffer, *rig.ps, rig.alloc, rig.backend, false);
  const std::vector<float> before(rig.param(1).data.f32(), rig.param(1).data.f32() + 16);
  rig.param(1).g()[2] = kNaN;
  const Optimizer::StepResult r = opt.step(0.1);
  EXPECT_TRUE(r.skipped);
  EXPECT_TRUE(std::isnan(r.grad_norm));
  EXPECT_EQ(opt.step_count(), 0);
  EXPECT_EQ(std::vector<float>(rig.param(1).data.f32(), rig.param(1).data.f32() + 16), before);
  rig.param(1).g()[2] = 0.5f;
  EXPECT_FALSE(opt.step(0.1).skipped);
  EXPECT_EQ(opt.step_count(), 1);
}

}  // namespace
}  // namespace mindspeed
