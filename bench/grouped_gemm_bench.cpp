// Grouped GEMM (cpu/ kernels: MindSpeed npu_gmm, Megatron GroupedMLP's gg.ops.gmm) forward
// and backward against ONE dense GEMM of the same FLOPs (a linear layer over all routed
// rows with one expert's weight), in GFLOP/s, with the machine's SGEMM peak beside them.
// Mixtral-like expert shapes: h = 1024, ffn = 2816 per expert, fc1 [ffn, h] and fc2
// [h, ffn]. Per (experts, routed rows) three routings:
//   balanced  rows / E per expert;
//   skewed    Zipf-like, expert g gets a share proportional to 1/(g+1);
//   empty     skewed over 3/4 of the experts, every 4th expert gets no row.
// Also the reference kernel (the same GEMMs one after another, each on all threads), to
// show what the cpu kernel's schedule (small groups side by side) buys.
// forward = out_g = x_g w_g^T; backward = dx_g = dout_g w_g and dw_g += dout_g^T x_g.
// Columns: GFLOP/s of the dense GEMM, the grouped cpu kernel and the per-group loop (ref),
// forward (f) and backward (b); grouped GFLOP/s over dense GFLOP/s ("f/dense", "b/dense", the
// target is >= 90 %); the grouped forward + backward against the SGEMM peak. Best of --reps
// rounds, the six measurements taking turns within a round (the VM is shared).
// Run: OMP_NUM_THREADS=2 build/release/bench/grouped_gemm_bench [--experts 8,16]
//      [--rows 2048,4096,8192] [--hidden 1024] [--ffn 2816] [--reps 5] [--routings
//      balanced,skewed,empty]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/blas/gemm.h"
#include "kernels/kernels.h"

using namespace mindspeed;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<float> randn(int64_t n, uint64_t stream) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_normal(v.data(), n, 0.0f, 1.0f, RngStream{7, stream});
  return v;
}

// Best of `reps` 2048^3 SGEMMs with the process's threads (attention_bench's measurement).
double sgemm_peak_gflops(int reps) {
  const int64_t n = 2048;
  std::vector<float> A = randn(n * n, 1), B = randn(n * n, 2), C(n * n);
  gemm(false, true, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
    gemm(false, true, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
    best = std::min(best, now() - t0);
  }
  return 2.0 * n * n * n / best / 1e9;
}

std::vector<std::string> parse_names(const char* s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(item);
  return v;
}
std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  for (const std::string& item : parse_names(s)) v.push_back(std::atoll(item.c_str()));
  return v;
}

// Rows per expert for a routing of M rows over E experts (largest-remainder rounding).
std::vector<int64_t> make_counts(const std::string& routing, int64_t E, int64_t M) {
  std::vector<double> share(static_cast<size_t>(E), 1.0);
  for (int64_t g = 0; g < E; ++g) {
    if (routing == "skewed" || routing == "empty") share[g] = 1.0 / static_cast<double>(g + 1);
    if (routing == "empty" && g % 4 == 3) share[g] = 0.0;
  }
  double total = 0.0;
  for (double s : share) total += s;
  std::vector<int64_t> counts(static_cast<size_t>(E));
  std::vector<std::pair<double, int64_t>> rest;
  int64_t given = 0;
  for (int64_t g = 0; g < E; ++g) {
    const double exact = static_cast<double>(M) * share[g] / total;
    counts[g] = static_cast<int64_t>(std::floor(exact));
    given += counts[g];
    if (share[g] > 0.0) rest.push_back({exact - std::floor(exact), g});
  }
  std::sort(rest.begin(), rest.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < M; ++i, ++given) ++counts[rest[i % rest.size()].second];
  return counts;
}

// Best time of each function over `reps` rounds after one warm-up round; the functions take
// turns within a round, so a busy neighbour on the shared VM slows them alike.
std::vector<double> best_of(int reps, const std::vector<std::function<void()>>& fns) {
  for (const auto& fn : fns) fn();
  std::vector<double> best(fns.size(), 1e30);
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < fns.size(); ++i) {
      const double t0 = now();
      fns[i]();
      best[i] = std::min(best[i], now() - t0);
    }
  }
  return best;
}

struct Times {
  double fwd = 0, bwd = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> experts{8, 16}, rows{2048, 4096, 8192};
  std::vector<std::string> routings{"balanced", "skewed", "empty"};
  int64_t hidden = 1024, ffn = 2816;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--experts")) experts = parse_list(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rows")) rows = parse_list(argv[i + 1]);
    if (!std::strcmp(argv[i], "--routings")) routings = parse_names(argv[i + 1]);
    if (!std::strcmp(argv[i], "--hidden")) hidden = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--ffn")) ffn = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  const KernelContext kc{omp_get_max_threads()};
  blas_set_num_threads(kc.num_threads);
  const double peak = sgemm_peak_gflops(5);
  std::printf("threads %d, SGEMM peak (2048^3) %.1f GFLOP/s, hidden %lld, ffn %lld, best of %d\n",
              kc.num_threads, peak, static_cast<long long>(hidden), static_cast<long long>(ffn),
              reps);
  std::printf("%-4s %3s %6s %-9s %-9s %9s %9s %9s %9s %9s %9s %7s %7s %7s\n", "gemm", "E", "rows",
              "routing", "min/max", "dense f", "dense b", "group f", "group b", "loop f", "loop b",
              "f/dense", "b/dense", "%peak");
  struct Shape {
    const char* name;
    int64_t N, K;
  };
  const Shape shapes[] = {{"fc1", ffn, hidden}, {"fc2", hidden, ffn}};
  double worst_ratio = 1e30;
  for (const Shape& s : shapes) {
    for (int64_t E : experts) {
      std::vector<std::vector<float>> w, dw;
      for (int64_t g = 0; g < E; ++g) {
        w.push_back(randn(s.N * s.K, 10 + g));
        dw.push_back(std::vector<float>(s.N * s.K, 0.0f));
      }
      std::vector<const float*> wp;
      std::vector<float*> dwp;
      for (int64_t g = 0; g < E; ++g) {
        wp.push_back(w[g].data());
        dwp.push_back(dw[g].data());
      }
      for (int64_t M : rows) {
        const auto x = randn(M * s.K, 3), dout = randn(M * s.N, 4);
        std::vector<float> out(M * s.N), dx(M * s.K);
        const double flops = 2.0 * M * s.N * s.K;
        for (const std::string& routing : routings) {
          const std::vector<int64_t> counts = make_counts(routing, E, M);
          const int64_t lo = *std::min_element(counts.begin(), counts.end());
          const int64_t hi = *std::max_element(counts.begin(), counts.end());
          // The dense GEMM: one linear layer over all M rows (expert 0's weight).
          const std::vector<double> t = best_of(
              reps,
              {[&] { cpu::linear_forward(kc, out.data(), x.data(), wp[0], nullptr, M, s.K, s.N); },
               [&] {
                 cpu::grouped_gemm_forward(kc, out.data(), x.data(), wp.data(), counts.data(), E,
                                           s.N, s.K);
               },
               [&] {
                 ref::grouped_gemm_forward(kc, out.data(), x.data(), wp.data(), counts.data(), E,
                                           s.N, s.K);
               },
               [&] {
                 cpu::linear_backward_input(kc, dx.data(), dout.data(), wp[0], M, s.K, s.N, false);
                 cpu::linear_backward_weight(kc, dwp[0], nullptr, dout.data(), x.data(), M, s.K,
                                             s.N);
               },
               [&] {
                 cpu::grouped_gemm_backward_input(kc, dx.data(), dout.data(), wp.data(),
                                                  counts.data(), E, s.N, s.K);
                 cpu::grouped_gemm_backward_weight(kc, dwp.data(), dout.data(), x.data(),
                                                   counts.data(), E, s.N, s.K);
               },
               [&] {
                 ref::grouped_gemm_backward_input(kc, dx.data(), dout.data(), wp.data(),
                                                  counts.data(), E, s.N, s.K);
                 ref::grouped_gemm_backward_weight(kc, dwp.data(), dout.data(), x.data(),
                                                   counts.data(), E, s.N, s.K);
               }});
          const Times dense{t[0], t[3]}, grouped{t[1], t[4]}, loop{t[2], t[5]};
          const double f_ratio = dense.fwd / grouped.fwd, b_ratio = dense.bwd / grouped.bwd;
          worst_ratio = std::min({worst_ratio, f_ratio, b_ratio});
          char range[32];
          std::snprintf(range, sizeof range, "%lld/%lld", static_cast<long long>(lo),
                        static_cast<long long>(hi));
          const double group_gflops = 3.0 * flops / (grouped.fwd + grouped.bwd) / 1e9;
          std::printf(
              "%-4s %3lld %6lld %-9s %-9s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %6.0f%% %6.0f%% "
              "%6.0f%%\n",
              s.name, static_cast<long long>(E), static_cast<long long>(M), routing.c_str(), range,
              flops / dense.fwd / 1e9, 2.0 * flops / dense.bwd / 1e9, flops / grouped.fwd / 1e9,
              2.0 * flops / grouped.bwd / 1e9, flops / loop.fwd / 1e9, 2.0 * flops / loop.bwd / 1e9,
              100.0 * f_ratio, 100.0 * b_ratio, 100.0 * group_gflops / peak);
          std::fflush(stdout);
        }
      }
    }
  }
  std::printf("lowest grouped/dense ratio: %.0f%%\n", 100.0 * worst_ratio);
  // A busy neighbour during the first measurement would understate the peak.
  std::printf("SGEMM peak (2048^3) measured again at the end: %.1f GFLOP/s\n",
              sgemm_peak_gflops(5));
  return 0;
}
