// Flash attention forward + backward (cpu/ kernels) under npu_fusion_attention's sparse modes
// (kernels/sparse_mode.h) at long sequences, in GFLOP/s against the machine's SGEMM peak.
// FLOPs count only the visible score elements (attention_visible_pairs): per visible (query,
// key) pair and head, 2 GEMMs forward and 4 backward of 2*D FLOPs each (the recomputation of
// the scores in backward and the masked parts of partly visible tiles are not counted).
// Cases at sequence s (B = 1, D = 64 or --dim):
//   band     mode 0, Sq = Skv = s, pre_tokens 2048, next_tokens 0 (a sliding window);
//   causal   mode 2, Sq = Skv = s;
//   rdcausal mode 3, Sq = s/2 queries against Skv = s keys (bottom-right aligned);
//   rdband   mode 4, Sq = s/2, Skv = s, pre_tokens 2048, next_tokens 0;
//   varlen   mode 3 over TND documents of 2048 tokens (actual_seq_qlen = 2048, 4096, ...).
// With --dropout p the attention-probability dropout of training (position-keyed Philox masks,
// kernels/dropout) is on; --repeat n takes the fastest of n timed calls after a warm-up.
// Run: nice -n 19 build/release/bench/attention_bench [--seq 4096,8192] [--heads 2] [--dim 64]
//      [--cases band,causal,...] [--dropout 0.1] [--repeat 1]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/blas/gemm.h"
#include "kernels/kernels.h"
#include "kernels/sparse_mode.h"

using namespace mindspeed;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<float> randn(int64_t n, uint64_t stream) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_normal(v.data(), n, 0.0f, 1.0f, RngStream{5, stream});
  return v;
}

// Best of 3 of a 2048^3 SGEMM with the process's threads (bench/gemm_peak measures more shapes).
double sgemm_peak_gflops() {
  const int64_t n = 2048;
  std::vector<float> A = randn(n * n, 1), B = randn(n * n, 2), C(n * n);
  gemm(false, true, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const double t0 = now();
    gemm(false, true, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
    best = std::min(best, now() - t0);
  }
  return 2.0 * n * n * n / best / 1e9;
}

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::atoll(item.c_str()));
  return v;
}

struct Case {
  std::string name;
  SparseModeArgs args;
};

Case make_case(const std::string& name, int64_t s) {
  Case c{name, {}};
  SparseModeArgs& a = c.args;
  a.Tq = a.Tk = s;
  if (name == "band") {
    a.sparse_mode = 0;
    a.pre_tokens = 2048;
  } else if (name == "causal") {
    a.sparse_mode = 2;
  } else if (name == "rdcausal") {
    a.sparse_mode = 3;
    a.Tq = s / 2;
  } else if (name == "rdband") {
    a.sparse_mode = 4;
    a.Tq = s / 2;
    a.pre_tokens = 2048;
  } else {  // varlen
    a.sparse_mode = 3;
    for (int64_t end = 2048; end <= s; end += 2048) a.actual_seq_qlen.push_back(end);
    a.actual_seq_kvlen = a.actual_seq_qlen;
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> seqs{4096, 8192, 16384, 32768};
  std::vector<std::string> names{"band", "causal", "rdcausal", "rdband", "varlen"};
  int64_t heads = 2, dim = 64, repeat = 1;
  float dropout_p = 0.0f;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seq")) seqs = parse_list(argv[i + 1]);
    if (!std::strcmp(argv[i], "--heads")) heads = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dim")) dim = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--repeat")) repeat = std::max<int64_t>(1, std::atoll(argv[i + 1]));
    if (!std::strcmp(argv[i], "--dropout")) dropout_p = static_cast<float>(std::atof(argv[i + 1]));
    if (!std::strcmp(argv[i], "--cases")) {
      names.clear();
      std::stringstream ss(argv[i + 1]);
      std::string item;
      while (std::getline(ss, item, ',')) names.push_back(item);
    }
  }
  const KernelContext kc{omp_get_max_threads()};
  const double peak = sgemm_peak_gflops();
  std::printf(
      "threads %d, SGEMM peak (2048^3) %.1f GFLOP/s, B 1, heads %lld (kv heads %lld), D %lld, "
      "dropout %.2f\n",
      kc.num_threads, peak, static_cast<long long>(heads), static_cast<long long>(heads),
      static_cast<long long>(dim), dropout_p);
  std::printf("%-9s %5s %7s %7s %14s %10s %10s %10s %7s\n", "case", "mode", "Sq", "Skv",
              "visible pairs", "fwd s", "bwd s", "GFLOP/s", "% peak");
  for (int64_t s : seqs) {
    for (const std::string& name : names) {
      const Case c = make_case(name, s);
      const StatusOr<SparseMask> sm = sparse_mode_mask(c.args);
      if (!sm.ok()) {
        std::printf("%s: %s\n", name.c_str(), sm.status().to_string().c_str());
        return 1;
      }
      AttentionDims d{1, c.args.Tq, heads, heads, dim, 1.0f / std::sqrt(static_cast<float>(dim)),
                      0, heads};
      d.Tk = c.args.Tk;
      d.seq_total = sm->seq_total;
      const AttentionMask mask = sm->mask();
      const int64_t nq = d.T * heads * d.D, nkv = d.Tk * heads * d.D;
      const auto q = randn(nq, 3), k = randn(nkv, 4), v = randn(nkv, 5), dout = randn(nq, 6);
      std::vector<float> out(nq), lse(heads * d.T), dq(nq), dk(nkv), dv(nkv);
      std::vector<float> ws(
          std::max(cpu::attention_workspace_floats(kc, d, AttentionKernel::kFlash, false),
                   cpu::attention_workspace_floats(kc, d, AttentionKernel::kFlash, true)));
      DropoutSpec drop;
      drop.p = dropout_p;
      drop.rng = RngStream{7, 0x64726f70 /*"drop"*/};
      auto forward = [&] {
        cpu::flash_attention_forward(kc, out.data(), lse.data(), q.data(), k.data(), v.data(), mask,
                                     d, drop, ws.data());
      };
      auto backward = [&] {
        cpu::flash_attention_backward(kc, dq.data(), dk.data(), dv.data(), dout.data(), out.data(),
                                      lse.data(), q.data(), k.data(), v.data(), mask, d, drop,
                                      ws.data());
      };
      if (s <= 8192) {  // warm-up (the long ones take seconds)
        forward();
        backward();
      }
      double fwd = 1e30, bwd = 1e30;
      for (int64_t r = 0; r < repeat; ++r) {
        const double t0 = now();
        forward();
        const double t1 = now();
        backward();
        fwd = std::min(fwd, t1 - t0);
        bwd = std::min(bwd, now() - t1);
      }
      const double pairs = attention_visible_pairs(mask, d);
      const double flops = 6.0 * 2.0 * heads * d.D * pairs;
      const double gflops = flops / (fwd + bwd) / 1e9;
      std::printf("%-9s %5d %7lld %7lld %14.0f %10.5f %10.5f %10.1f %6.0f%%\n", name.c_str(),
                  c.args.sparse_mode, static_cast<long long>(d.T), static_cast<long long>(d.Tk),
                  pairs, fwd, bwd, gflops, 100.0 * gflops / peak);
      std::fflush(stdout);
    }
  }
  return 0;
}
