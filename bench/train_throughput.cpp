// End-to-end training throughput of mindspeed-cpp on one process: for each benchmark
// configuration, a few warm-up steps, then timed steps of forward + backward + AdamW on
// random tokens (fp32, fused kernels, flash attention). Prints tokens/s, model TFLOP/s
// (Megatron's formula), MFU against the GEMM peak given with --peak-gflops, and the
// allocator's peak memory plus the process's peak RSS, as one JSON line per configuration.
//   train_throughput [--config NAME] [--steps N] [--warmup N] [--peak-gflops G]
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench_configs.h"
#include "core/rng.h"
#include "core/timers.h"
#include "distributed/param_and_grad_buffer.h"
#include "models/gpt/gpt_model.h"
#include "optimizer/optimizer.h"
#include "training/flops.h"
#include "training/train_step.h"

using namespace mindspeed;

int main(int argc, char** argv) {
  std::string only;
  int steps = 3, warmup = 1;
  double peak_gflops = 0.0;
  bool flash = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) only = argv[++i];
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else if (a == "--peak-gflops" && i + 1 < argc) peak_gflops = std::atof(argv[++i]);
    else if (a == "--core-attention") flash = false;
    else {
      std::fprintf(stderr, "usage: train_throughput [--config NAME] [--steps N] [--warmup N] [--peak-gflops G] [--core-attention]\n");
      return 2;
    }
  }
  for (const auto& bc : bench::bench_configs()) {
    if (!only.empty() && bc.name != only) continue;
    ModelConfig m = bc.model;
    auto ps = ParallelState::single_process();
    const Backend backend = select_backend(KernelOptions{.fast = true, .flash_attention = flash});
    Allocator alloc;
    ParameterRegistry registry;
    GPTModel model(m, *ps, registry);
    ParamAndGradBuffer buffer(model.registry(), alloc, BufferOptions{});
    initialize_parameters(model.registry(), 1234, 0, 1);
    OptimizerConfig oc;
    oc.lr = 1e-4f;
    Optimizer optimizer(oc, buffer, *ps, alloc, backend, false);
    ForwardContext ctx;
    ctx.backend = &backend;
    ctx.alloc = &alloc;
    ctx.ps = ps.get();
    MicroBatch mb;
    mb.B = bc.micro_batch;
    mb.T = m.seq_length;
    for (int64_t i = 0; i < mb.B * mb.T; ++i) {
      const RngStream rng{1, static_cast<uint64_t>(i)};
      mb.tokens.push_back(static_cast<int32_t>(rng.block(0)[0] % m.vocab_size));
      mb.labels.push_back(static_cast<int32_t>(rng.block(0)[1] % m.vocab_size));
      mb.loss_mask.push_back(1.0f);
      mb.position_ids.push_back(static_cast<int32_t>(i % mb.T));
    }
    const std::vector<MicroBatch> batch{mb};
    for (int s = 0; s < warmup; ++s) {
      ctx.iteration = s + 1;
      train_step(model, buffer, optimizer, nullptr, ctx, batch, 1e-4);
    }
    alloc.reset_peaks();
    Timer timer;
    double loss = 0.0;
    for (int s = 0; s < steps; ++s) {
      ctx.iteration = warmup + s + 1;
      const auto r = train_step(model, buffer, optimizer, nullptr, ctx, batch, 1e-4);
      loss = r.loss_sum / r.num_tokens;
    }
    const double sec = timer.seconds() / steps;
    const double flops = num_floating_point_operations(m, mb.B);
    const double tokens = static_cast<double>(mb.B * mb.T);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const MemoryStats st = alloc.stats();
    std::printf("{\"impl\": \"mindspeed-cpp\", \"config\": \"%s\", \"params\": %lld, \"step_s\": %.4f, "
                "\"tokens_per_s\": %.1f, \"tflops\": %.4f, \"mfu\": %.4f, \"loss\": %.4f, "
                "\"alloc_peak_mib\": %.1f, \"max_rss_mib\": %.1f}\n",
                bc.name.c_str(), static_cast<long long>(model.registry().num_local_elements()), sec,
                tokens / sec, flops / sec / 1e12, peak_gflops > 0 ? flops / sec / 1e9 / peak_gflops : 0.0, loss,
                static_cast<double>(st.total_peak) / (1 << 20), static_cast<double>(ru.ru_maxrss) / 1024.0);
    std::fflush(stdout);
  }
  return 0;
}
