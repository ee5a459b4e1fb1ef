// Kernel benchmarks (Google Benchmark): every fast (cpu/) kernel next to its reference (ref/)
// on the shapes of GPT-2 124M (rows N = 4096 tokens, C = 768, V = 50304), with bytes/s or
// FLOP/s counters. Run: build/release/bench/kernels_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <vector>

#include <omp.h>

#include "core/rng.h"
#include "kernels/kernels.h"

using namespace mindspeed;

namespace {

// The context every kernel call carries: the process's OpenMP threads.
const KernelContext kKc{omp_get_max_threads()};

std::vector<float> randn(int64_t n, uint64_t stream) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_normal(v.data(), n, 0.0f, 1.0f, RngStream{3, stream});
  return v;
}

template <bool kFast>
void BM_LayerNormForwardBackward(benchmark::State& state) {
  const int64_t N = 4096, C = 768;
  auto x = randn(N * C, 1), w = randn(C, 2), b = randn(C, 3), dy = randn(N * C, 4);
  std::vector<float> y(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C);
  for (auto _ : state) {
    (kFast ? cpu::layer_norm_forward : ref::layer_norm_forward)(kKc, y.data(), mean.data(), rstd.data(), x.data(),
                                                                w.data(), b.data(), N, C, 1e-5f);
    (kFast ? cpu::layer_norm_backward : ref::layer_norm_backward)(kKc, dx.data(), dw.data(), db.data(), dy.data(),
                                                                  x.data(), w.data(), mean.data(), rstd.data(), N, C);
  }
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * N * C * 4 * 5,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_LayerNormForwardBackward<false>)->Name("layer_norm_fwd_bwd/ref")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LayerNormForwardBackward<true>)->Name("layer_norm_fwd_bwd/fast")->Unit(benchmark::kMillisecond);

template <bool kFast>
void BM_GeluTanh(benchmark::State& state) {
  const int64_t n = 4096 * 3072;
  auto x = randn(n, 5), dy = randn(n, 6);
  std::vector<float> y(n), dx(n);
  for (auto _ : state) {
    (kFast ? cpu::gelu_forward : ref::gelu_forward)(kKc, y.data(), x.data(), n, GeluApproximation::kTanh);
    (kFast ? cpu::gelu_backward : ref::gelu_backward)(kKc, dx.data(), dy.data(), x.data(), n, GeluApproximation::kTanh);
  }
  state.counters["bytes/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n * 4 * 5, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GeluTanh<false>)->Name("gelu_tanh_fwd_bwd/ref")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GeluTanh<true>)->Name("gelu_tanh_fwd_bwd/fast")->Unit(benchmark::kMillisecond);

template <bool kFast>
void BM_SoftmaxCrossEntropy(benchmark::State& state) {
  const int64_t N = 256, V = 50304;
  const auto logits = randn(N * V, 7);
  std::vector<float> work(N * V), losses(N), scale(N, 1.0f / N);
  std::vector<int32_t> targets(N);
  for (int64_t i = 0; i < N; ++i) targets[i] = static_cast<int32_t>((i * 977) % V);
  for (auto _ : state) {
    state.PauseTiming();
    work = logits;
    state.ResumeTiming();
    (kFast ? cpu::softmax_cross_entropy : ref::softmax_cross_entropy)(kKc, work.data(), losses.data(), targets.data(),
                                                                      scale.data(), N, V, true);
  }
  state.counters["bytes/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * N * V * 4 * 3, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SoftmaxCrossEntropy<false>)->Name("softmax_cross_entropy/ref")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxCrossEntropy<true>)->Name("softmax_cross_entropy/fast")->Unit(benchmark::kMillisecond);

template <int kKernel>  // 0 reference core attention, 1 BLAS core attention, 2 flash
void BM_Attention(benchmark::State& state) {
  AttentionDims d;
  d.B = 1;
  d.T = state.range(0);
  d.NQ = d.NKV = 12;
  d.D = 64;
  d.scale = 0.125f;
  d.num_heads_total = 12;
  const int64_t nq = d.B * d.NQ * d.T * d.D;
  auto q = randn(nq, 8), k = randn(nq, 9), v = randn(nq, 10), dout = randn(nq, 11);
  std::vector<float> out(nq), lse(d.B * d.NQ * d.T), dq(nq), dk(nq), dv(nq);
  std::vector<float> probs(kKernel == 2 ? 1 : d.B * d.NQ * d.T * d.T);
  const auto kind = kKernel == 2 ? AttentionKernel::kFlash : AttentionKernel::kCore;
  std::vector<float> ws(std::max(cpu::attention_workspace_floats(kKc, d, kind, false),
                                 cpu::attention_workspace_floats(kKc, d, kind, true)));
  const AttentionMask mask{};
  const DropoutSpec drop{};
  for (auto _ : state) {
    if (kKernel == 2) {
      cpu::flash_attention_forward(kKc, out.data(), lse.data(), q.data(), k.data(), v.data(), mask, d, drop, ws.data());
      cpu::flash_attention_backward(kKc, dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), q.data(),
                                    k.data(), v.data(), mask, d, drop, ws.data());
    } else {
      auto fwd = kKernel == 0 ? ref::core_attention_forward : cpu::core_attention_forward;
      auto bwd = kKernel == 0 ? ref::core_attention_backward : cpu::core_attention_backward;
      fwd(kKc, out.data(), probs.data(), q.data(), k.data(), v.data(), mask, d, drop, ws.data());
      bwd(kKc, dq.data(), dk.data(), dv.data(), dout.data(), probs.data(), q.data(), k.data(), v.data(), d, drop, ws.data());
    }
  }
  // Causal: forward 2 GEMMs and backward 4 on half of T x T, 2 FLOPs per multiply-add.
  const double flops = 6.0 * 2.0 * d.B * d.NQ * d.T * d.T * d.D / 2.0;
  state.counters["FLOP/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * flops,
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Attention<0>)->Name("attention_fwd_bwd/ref")->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Attention<1>)->Name("attention_fwd_bwd/core_blas")->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Attention<2>)->Name("attention_fwd_bwd/flash")->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

template <bool kFast>
void BM_AdamW(benchmark::State& state) {
  const int64_t n = 1 << 24;
  auto p = randn(n, 12), m = randn(n, 13), v = randn(n, 14), g = randn(n, 15);
  for (float& x : v) x = x * x;
  int64_t step = 1;
  for (auto _ : state) {
    (kFast ? cpu::adamw_step : ref::adamw_step)(kKc, p.data(), m.data(), v.data(), g.data(), n, 1e-4f, 0.9f, 0.95f,
                                                1e-8f, 0.1f, step++, 1.0f);
  }
  state.counters["bytes/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n * 4 * 7, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AdamW<false>)->Name("adamw/ref")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdamW<true>)->Name("adamw/fast")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
