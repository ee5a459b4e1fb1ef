// The optimizer's memory features (MindSpeed §3.4, §3.8, §3.9, §8.1) against the plain AdamW
// step on the same parameters and gradients: --reuse-fp32-param and --swap-optimizer bitwise
// (weights, master, moments), the split/restore of the reused master bitwise on every kind of
// float, --o2-optimizer's bf16 moments close to the fp32 ones, fused_ema_adamw's EMA against
// the formula in double, the state bytes each feature leaves resident, and the EMA through a
// checkpoint save and load.
#include <gtest/gtest.h>

#include <cmath>
#include <bit>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "config/configs.h"
#include "core/allocator.h"
#include "core/swap_tier.h"
#include "distributed/param_and_grad_buffer.h"
#include "kernels/backend.h"
#include "optimizer/fp32_param_reuse.h"
#include "optimizer/optimizer.h"
#include "parallel/parallel_state.h"
#include "scratch_dir.h"
#include "training/checkpointing.h"

namespace mindspeed {
namespace {

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float float_of(uint32_t b) { return std::bit_cast<float>(b); }

TEST(Fp32ParamReuse, RestoreOfSplitIsBitwiseForEveryKindOfFloat) {
  std::vector<uint32_t> bits = {
      0x00000000u, 0x80000000u,              // +-0
      0x00000001u, 0x807fffffu, 0x00008000u,  // denormals (one a tie)
      0x7f800000u, 0xff800000u,              // +-inf
      0x7fc00000u, 0xffc00001u, 0x7f800001u,  // NaNs (quiet, signed, signalling)
      0x7f7fffffu, 0xff7fffffu,              // +-max: rounds to inf
      0x3f808000u, 0x3f818000u,              // ties: even high (rounds down), odd high (rounds up)
      0xbf808000u, 0xbf818000u, 0x3f807fffu, 0x3f808001u};
  std::mt19937 rng(7);
  for (int i = 0; i < 1 << 20; ++i) bits.push_back(rng());
  for (int i = 0; i < 4096; ++i) bits.push_back((rng() & 0xffff0000u) | 0x8000u);  // many ties
  const int64_t n = static_cast<int64_t>(bits.size());
  std::vector<float> x(bits.size()), back(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) x[i] = float_of(bits[i]);
  std::vector<bf16> high(bits.size());
  std::vector<int16_t> low(bits.size());
  std::vector<ReuseException> exceptions;
  // Two calls with bases, as the optimizer splits pieces of its shard.
  const int64_t half = n / 2;
  split_fp32(x.data(), half, high.data(), low.data(), 0, &exceptions);
  split_fp32(x.data() + half, n - half, high.data() + half, low.data() + half, half, &exceptions);
  std::sort(exceptions.begin(), exceptions.end());
  restore_fp32(high.data(), low.data(), half, 0, exceptions, back.data());
  restore_fp32(high.data() + half, low.data() + half, n - half, half, exceptions, back.data() + half);
  int64_t nan_count = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(bits_of(back[i]), bits[i]) << "element " << i;
    if (std::isnan(x[i])) {
      ++nan_count;
    } else {
      ASSERT_EQ(high[i].bits, float_to_bf16(x[i]).bits) << "the weight is the round-to-nearest-even bf16, element " << i;
    }
  }
  // Exceptions: NaNs and ties rounded down only (about 2^-17 of random bits, half the ties).
  EXPECT_GT(static_cast<int64_t>(exceptions.size()), nan_count);
  EXPECT_LT(static_cast<int64_t>(exceptions.size()), nan_count + 2048 + 64);
}

// A bf16 or fp32 "model" of two parameters (77,357 elements: several workspace pieces) with
// its buffer, and reproducible gradients.
struct Rig {
  Allocator alloc;
  std::unique_ptr<ParallelState> ps = ParallelState::single_process();
  Backend backend = select_backend(KernelOptions{.fast = true});
  ParameterRegistry registry;
  std::unique_ptr<ParamAndGradBuffer> buffer;

  explicit Rig(bool bf16_params) {
    registry.add({.name = "w", .global_shape = Shape{300, 257}, .init = InitMethod::kNormal, .init_std = 0.02f}, 1);
    registry.add({.name = "b", .global_shape = Shape{257}, .init = InitMethod::kNormal, .init_std = 0.02f,
                  .weight_decay = false},
                 1);
    buffer = std::make_unique<ParamAndGradBuffer>(
        registry, alloc, BufferOptions{.param_dtype = bf16_params ? DType::kBFloat16 : DType::kFloat32});
    initialize_parameters(registry, 42, 0, 1);
  }
  int64_t numel() const { return registry.num_local_elements(); }
  void set_grads(int step) {
    std::mt19937 rng(1000 + step);
    std::normal_distribution<float> g(0.0f, 0.01f);
    for (int64_t i = 0; i < numel(); ++i) buffer->grad_data()[i] = g(rng);
  }
  std::vector<uint8_t> param_bytes() const {
    const auto* p = static_cast<const uint8_t*>(buffer->param_data());
    return {p, p + numel() * dtype_size(buffer->param_dtype())};
  }
  int64_t state_bytes() const { return alloc.stats().current[static_cast<int>(MemoryCategory::kOptimizerState)]; }
};

// The allocator rounds every tensor up to its alignment: a few tensors' worth of slack.
constexpr int64_t kRounding = 4 * Allocator::kAlignment;

OptimizerConfig adamw() {
  OptimizerConfig c;
  c.weight_decay = 0.1f;
  c.clip_grad = 1.0f;
  return c;
}

std::vector<float> read_all(Optimizer& opt, OptimizerState kind) {
  std::vector<float> out(static_cast<size_t>(opt.shard_numel()));
  for (const Optimizer::Segment& s : opt.segments()) opt.read_state(kind, s.shard_offset, s.end - s.begin, out.data() + s.shard_offset);
  return out;
}

TEST(OptimizerMemory, ReuseFp32ParamIsBitwiseThePlainRunInTwoThirdsOfTheBytes) {
  Rig plain(true), reuse(true);
  OptimizerConfig rc = adamw();
  rc.reuse_fp32_param = true;
  Optimizer a(adamw(), *plain.buffer, *plain.ps, plain.alloc, plain.backend, false);
  Optimizer b(rc, *reuse.buffer, *reuse.ps, reuse.alloc, reuse.backend, false);
  const int64_t n = plain.numel();
  // Plain: fp32 master + two fp32 moments; reuse: a 2-byte residual instead of the master.
  EXPECT_NEAR(plain.state_bytes(), 12 * n, kRounding);
  EXPECT_NEAR(reuse.state_bytes(), 10 * n, kRounding);
  int64_t steps_with_exceptions = 0;
  for (int step = 1; step <= 50; ++step) {
    plain.set_grads(step);
    reuse.set_grads(step);
    a.step(1e-2);
    b.step(1e-2);
    ASSERT_EQ(plain.param_bytes(), reuse.param_bytes()) << "bf16 weights after step " << step;
    steps_with_exceptions += b.reuse_exception_count() > 0 ? 1 : 0;
  }
  // Ties (2^-17 per element and step) happened, so the exception path was exercised.
  EXPECT_GT(steps_with_exceptions, 0);
  for (OptimizerState kind : {OptimizerState::kMainParam, OptimizerState::kExpAvg, OptimizerState::kExpAvgSq}) {
    const std::vector<float> x = read_all(a, kind), y = read_all(b, kind);
    ASSERT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * sizeof(float))) << "state " << static_cast<int>(kind);
  }
  // Writing the master back (as a checkpoint load does) keeps it bitwise.
  const std::vector<float> master = read_all(b, OptimizerState::kMainParam);
  for (const Optimizer::Segment& s : b.segments()) {
    b.write_state(OptimizerState::kMainParam, s.shard_offset, s.end - s.begin, master.data() + s.shard_offset);
  }
  const std::vector<float> again = read_all(b, OptimizerState::kMainParam);
  EXPECT_EQ(0, std::memcmp(master.data(), again.data(), master.size() * sizeof(float)));
  EXPECT_EQ(plain.param_bytes(), reuse.param_bytes());
}

TEST(OptimizerMemory, SwapOptimizerIsBitwiseAndKeepsThreeSlicesResident) {
  testing::ScratchDir dir("swap_optimizer");
  Rig plain(true), swapped(true);
  auto tier = FileSwapTier::open(dir.path().string(), swapped.alloc);
  ASSERT_TRUE(tier.ok()) << tier.status().message();
  OptimizerConfig sc = adamw();
  sc.swap_optimizer = true;
  sc.swap_optimizer_times = 8;
  {
    Optimizer a(adamw(), *plain.buffer, *plain.ps, plain.alloc, plain.backend, false);
    Optimizer b(sc, *swapped.buffer, *swapped.ps, swapped.alloc, swapped.backend, false, tier->get());
    const int64_t n = plain.numel();
    (*tier)->synchronize();
    EXPECT_EQ(swapped.state_bytes(), 0) << "all of master, exp_avg and exp_avg_sq in the tier";
    EXPECT_GE(swapped.alloc.stats().total_swapped_current, 12 * n);
    for (int step = 1; step <= 20; ++step) {
      plain.set_grads(step);
      swapped.set_grads(step);
      a.step(1e-2);
      b.step(1e-2);
      ASSERT_EQ(plain.param_bytes(), swapped.param_bytes()) << "bf16 weights after step " << step;
    }
    // Resident during the step: the slice being updated, the one read ahead, the one being
    // written out: 3 of 8 slices of 12 bytes per element (+ region rounding).
    const int64_t peak = swapped.alloc.stats().peak[static_cast<int>(MemoryCategory::kOptimizerState)];
    EXPECT_LE(peak, 3 * (12 * n / 8 + 3 * 8 + kRounding));
    EXPECT_GT(peak, 0);
    for (OptimizerState kind : {OptimizerState::kMainParam, OptimizerState::kExpAvg, OptimizerState::kExpAvgSq}) {
      const std::vector<float> x = read_all(a, kind), y = read_all(b, kind);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(bits_of(x[i]), bits_of(y[i])) << "state " << static_cast<int>(kind) << " element " << i << " " << x[i] << " " << y[i];
      }
    }
  }
}

TEST(OptimizerMemory, O2KeepsBf16MomentsInTwoThirdsOfTheBytesAndStaysClose) {
  Rig plain(true), o2(true), both(true);
  OptimizerConfig oc = adamw();
  oc.o2_optimizer = true;
  OptimizerConfig bc = oc;
  bc.reuse_fp32_param = true;
  Optimizer a(adamw(), *plain.buffer, *plain.ps, plain.alloc, plain.backend, false);
  Optimizer b(oc, *o2.buffer, *o2.ps, o2.alloc, o2.backend, false);
  Optimizer c(bc, *both.buffer, *both.ps, both.alloc, both.backend, false);
  const int64_t n = plain.numel();
  EXPECT_NEAR(o2.state_bytes(), 8 * n, kRounding);    // fp32 master + two bf16 moments
  EXPECT_NEAR(both.state_bytes(), 6 * n, kRounding);  // residual + two bf16 moments
  const std::vector<float> w0 = read_all(a, OptimizerState::kMainParam);
  for (int step = 1; step <= 30; ++step) {
    for (Rig* r : {&plain, &o2, &both}) r->set_grads(step);
    a.step(1e-3);
    b.step(1e-3);
    c.step(1e-3);
  }
  // The moments are bf16 values; the weights move like the fp32-moment run's.
  const std::vector<float> m = read_all(b, OptimizerState::kExpAvg);
  for (float v : m) ASSERT_EQ(bf16_to_float(float_to_bf16(v)), v);
  const std::vector<float> wa = read_all(a, OptimizerState::kMainParam), wb = read_all(b, OptimizerState::kMainParam),
                           wc = read_all(c, OptimizerState::kMainParam);
  double moved = 0.0, diff = 0.0;
  for (size_t i = 0; i < wa.size(); ++i) {
    moved += std::abs(wa[i] - w0[i]);
    diff += std::abs(wa[i] - wb[i]);
    ASSERT_EQ(bits_of(wb[i]), bits_of(wc[i])) << "O2 with reuse-fp32-param is O2, bitwise";
  }
  EXPECT_GT(moved, 0.0);
  EXPECT_LT(diff, 0.01 * moved) << "O2's weights stay within 1% of the update of the fp32-moment run";
}

TEST(OptimizerMemory, FusedEmaAdamwEqualsItsFormulaOver100RandomSteps) {
  Rig rig(false);
  OptimizerConfig ec = adamw();
  ec.clip_grad = 0.0f;
  ec.optimizer_selection = OptimizerSelection::kFusedEmaAdamw;
  ec.ema_decay = 0.9f;
  Optimizer opt(ec, *rig.buffer, *rig.ps, rig.alloc, rig.backend, false);
  const int64_t n = rig.numel();
  EXPECT_NEAR(rig.state_bytes(), 12 * n, kRounding);  // two moments + the EMA (fp32 params are their own master)
  // npu_apply_fused_ema_adamw's formula (mode 1 = AdamW, bias correction on), in double.
  std::vector<double> var(static_cast<size_t>(n)), m(var.size()), v(var.size()), s(var.size());
  for (int64_t i = 0; i < n; ++i) var[i] = s[i] = static_cast<const float*>(rig.buffer->param_data())[i];
  std::vector<double> decay(var.size(), 0.0);  // "w" decays, "b" does not (wherever the buffer puts them)
  for (const Optimizer::Segment& seg : opt.segments()) {
    for (int64_t i = seg.begin; i < seg.end; ++i) decay[static_cast<size_t>(i)] = seg.weight_decay ? ec.weight_decay : 0.0;
  }
  const double lr = 1e-2, b1 = ec.adam_beta1, b2 = ec.adam_beta2, eps = ec.adam_eps, d = ec.ema_decay;
  for (int step = 1; step <= 100; ++step) {
    rig.set_grads(step);
    for (int64_t i = 0; i < n; ++i) {
      const double g = rig.buffer->grad_data()[i], wd = decay[static_cast<size_t>(i)];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mh = m[i] / (1 - std::pow(b1, step)), vh = v[i] / (1 - std::pow(b2, step));
      var[i] -= lr * (mh / (std::sqrt(vh) + eps) + wd * var[i]);
      s[i] = d * s[i] + (1 - d) * var[i];
    }
    opt.step(lr);
  }
  const std::vector<float> ema = read_all(opt, OptimizerState::kEma);
  const float* w = static_cast<const float*>(rig.buffer->param_data());
  double worst_w = 0.0, worst_s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    worst_w = std::max(worst_w, std::abs(w[i] - var[i]));
    worst_s = std::max(worst_s, std::abs(ema[i] - s[i]));
  }
  EXPECT_LT(worst_w, 1e-6);
  EXPECT_LT(worst_s, 1e-6);
  EXPECT_GT(std::abs(ema[0] - w[0]), 0.0) << "the EMA lags the weights";
}

TEST(OptimizerMemory, EmaAndReusedMasterSurviveACheckpoint) {
  testing::ScratchDir dir("ema_ckpt");
  Configs configs;
  for (const bool bf16_params : {false, true}) {
    OptimizerConfig oc = adamw();
    if (bf16_params) {
      oc.reuse_fp32_param = true;
    } else {
      oc.optimizer_selection = OptimizerSelection::kFusedEmaAdamw;
      oc.ema_decay = 0.5f;
    }
    Rig saved(bf16_params), loaded(bf16_params);
    Optimizer a(oc, *saved.buffer, *saved.ps, saved.alloc, saved.backend, false);
    Optimizer b(oc, *loaded.buffer, *loaded.ps, loaded.alloc, loaded.backend, false);
    for (int step = 1; step <= 5; ++step) {
      saved.set_grads(step);
      a.step(1e-2);
    }
    configs.training.bf16 = bf16_params;
    const std::string path = dir.file(bf16_params ? "reuse" : "ema");
    ASSERT_TRUE(save_checkpoint(path, CheckpointState{.iteration = 5}, configs,
                                CheckpointTarget{saved.registry, *saved.buffer, a, *saved.ps}, true)
                    .ok());
    auto state = load_checkpoint(path, configs, CheckpointTarget{loaded.registry, *loaded.buffer, b, *loaded.ps}, {});
    ASSERT_TRUE(state.ok()) << state.status().message();
    EXPECT_EQ(saved.param_bytes(), loaded.param_bytes());
    for (OptimizerState kind : {OptimizerState::kMainParam, OptimizerState::kExpAvg, OptimizerState::kExpAvgSq,
                                OptimizerState::kEma}) {
      if (!a.has_state(kind)) continue;
      const std::vector<float> x = read_all(a, kind), y = read_all(b, kind);
      ASSERT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * sizeof(float))) << "state " << static_cast<int>(kind);
    }
    // And the next step is the same.
    saved.set_grads(6);
    loaded.set_grads(6);
    a.step(1e-2);
    b.step(1e-2);
    EXPECT_EQ(saved.param_bytes(), loaded.param_bytes());
  }
}

}  // namespace
}  // namespace mindspeed

namespace mindspeed {
namespace {

// --log-params-norm and --log-num-zeros-in-grad: the norm of the fp32 main parameters (read
// from each feature's storage: plain, reused, O2, swapped) and the zero gradient elements,
// against the same sums taken directly.
TEST(OptimizerLogging, ParamsNormAndZeroGradientsMatchDirectSums) {
  const mindspeed::testing::ScratchDir scratch("optimizer_logging");
  for (const char* feature : {"fp32", "bf16", "reuse", "o2", "swap"}) {
    SCOPED_TRACE(feature);
    const std::string f = feature;
    Rig rig(f != "fp32");
    OptimizerConfig oc = adamw();
    oc.reuse_fp32_param = f == "reuse";
    oc.o2_optimizer = f == "o2";
    oc.swap_optimizer = f == "swap";
    oc.swap_optimizer_times = 3;
    std::unique_ptr<FileSwapTier> tier;
    if (oc.swap_optimizer) {
      auto opened = FileSwapTier::open(scratch.path().string(), rig.alloc);
      ASSERT_TRUE(opened.ok()) << opened.status().to_string();
      tier = std::move(*opened);
    }
    Optimizer opt(oc, *rig.buffer, *rig.ps, rig.alloc, rig.backend, false, tier.get());
    rig.set_grads(1);
    opt.step(1e-3);
    rig.set_grads(2);
    for (int64_t i = 0; i < rig.numel(); i += 7) rig.buffer->grad_data()[i] = 0.0f;  // some zeros
    // Directly: the master values (or the fp32 weights) and the gradient buffer.
    double want_sq = 0.0;
    if (f == "fp32") {
      const auto* w = static_cast<const float*>(rig.buffer->param_data());
      for (int64_t i = 0; i < rig.numel(); ++i) want_sq += static_cast<double>(w[i]) * w[i];
    } else {
      for (float v : read_all(opt, OptimizerState::kMainParam)) want_sq += static_cast<double>(v) * v;
    }
    double want_zeros = 0.0;
    for (int64_t i = 0; i < rig.numel(); ++i) want_zeros += rig.buffer->grad_data()[i] == 0.0f ? 1.0 : 0.0;
    EXPECT_GE(want_zeros, static_cast<double>(rig.numel() / 7));
    EXPECT_NEAR(opt.params_norm(), std::sqrt(want_sq), 1e-6 * std::sqrt(want_sq));
    EXPECT_EQ(opt.count_zero_grads(), want_zeros);
  }
}

}  // namespace
}  // namespace mindspeed
