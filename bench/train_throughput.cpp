// End-to-end training throughput of mindspeed-cpp on one process: for each benchmark
// configuration, a few warm-up steps, then timed steps of forward + backward + AdamW on
// random tokens (fp32, fused kernels, flash attention). Prints tokens/s, model TFLOP/s
// (Megatron's formula), MFU against the GEMM peak given with --peak-gflops, and the
// allocator's peak memory plus the process's peak RSS, as one JSON line per configuration.
// For MoE configurations "active_params" counts the parameters one token uses (the routed
// experts' parameters scaled by top-k / experts); for dense ones it equals "params".
//   train_throughput [--config NAME] [--steps N] [--warmup N] [--peak-gflops G]
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench_configs.h"
#include "bench_model.h"
#include "config/validate_moe.h"
#include "core/check.h"
#include "core/timers.h"
#include "training/flops.h"

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
    if (m.moe.enabled()) {
      const Status valid = validate_moe(m, ParallelConfig{});
      if (!valid.ok()) fatal(valid.to_string());
    }
    bench::BenchModel bm(m, flash, bc.micro_batch);
    // Routed experts count top-k / experts of their parameters per token.
    double active_params = 0.0;
    for (const auto& p : bm.model.registry().params()) {
      const double n = static_cast<double>(p->data.numel());
      const bool routed = p->spec.name.find(".experts.local_experts.") != std::string::npos;
      active_params +=
          routed ? n * static_cast<double>(m.moe.router_topk) / static_cast<double>(m.moe.num_experts) : n;
    }
    for (int s = 0; s < warmup; ++s) bm.step(s + 1);
    bm.alloc.reset_peaks();
    Timer timer;
    double loss = 0.0;
    for (int s = 0; s < steps; ++s) {
      const auto r = bm.step(warmup + s + 1);
      loss = r.loss_sum / r.num_tokens;
    }
    const double sec = timer.seconds() / steps;
    const double flops = num_floating_point_operations(m, bc.micro_batch);
    const double tokens = static_cast<double>(bc.micro_batch * m.seq_length);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const MemoryStats st = bm.alloc.stats();
    std::printf("{\"impl\": \"mindspeed-cpp\", \"config\": \"%s\", \"params\": %lld, \"active_params\": %.0f, "
                "\"step_s\": %.4f, "
                "\"tokens_per_s\": %.1f, \"tflops\": %.4f, \"mfu\": %.4f, \"loss\": %.4f, "
                "\"alloc_peak_mib\": %.1f, \"max_rss_mib\": %.1f}\n",
                bc.name.c_str(), static_cast<long long>(bm.model.registry().num_local_elements()), active_params, sec,
                tokens / sec, flops / sec / 1e12, peak_gflops > 0 ? flops / sec / 1e9 / peak_gflops : 0.0, loss,
                static_cast<double>(st.total_peak) / (1 << 20), static_cast<double>(ru.ru_maxrss) / 1024.0);
    std::fflush(stdout);
  }
  return 0;
}
