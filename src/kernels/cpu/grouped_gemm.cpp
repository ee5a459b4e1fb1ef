// Fast grouped GEMM (MindSpeed npu_gmm / gmm_v2 group_type 0 and npu_groupmatmul_add_fp32;
// Megatron GroupedMLP's gg.ops.gmm): one BLAS SGEMM per non-empty group, like
// ref/grouped_gemm.cpp, scheduled for the thread pool. Groups big enough to keep every thread
// busy run one after another, each GEMM on all threads; the rest (many small experts, a
// skewed routing's tail) run side by side, largest first, one single-threaded GEMM per
// thread (OpenBLAS's OpenMP build runs a GEMM called inside a parallel region on the calling
// thread). Every output element is one group's GEMM, so the schedule does not change a bit.
#include <algorithm>
#include <vector>

#include "kernels/blas/gemm.h"
#include "kernels/kernels.h"

namespace mindspeed::cpu {
namespace {

struct Group {
  int64_t g, row, m;  // expert, first row, rows
};

// True when greedy longest-first scheduling of groups[begin..] on `threads` threads
// (what schedule(dynamic, 1) over the sorted list does) ends within 10% of a perfect split,
// taking a group's time as proportional to its rows (N and K are shared).
bool balanced(const std::vector<Group>& groups, size_t begin, int threads) {
  std::vector<int64_t> load(static_cast<size_t>(threads), 0);
  int64_t total = 0;
  for (size_t i = begin; i < groups.size(); ++i) {
    *std::min_element(load.begin(), load.end()) += groups[i].m;
    total += groups[i].m;
  }
  const int64_t makespan = *std::max_element(load.begin(), load.end());
  return static_cast<double>(makespan) * threads <= 1.1 * static_cast<double>(total);
}

// Calls run(g, row, m) once for every non-empty group.
template <typename Run>
void for_each_group(const KernelContext& kc, const int64_t* counts, int64_t G, const Run& run) {
  std::vector<Group> groups;
  groups.reserve(static_cast<size_t>(G));
  int64_t row = 0;
  for (int64_t g = 0; g < G; ++g) {
    if (counts[g] > 0) groups.push_back({g, row, counts[g]});
    row += counts[g];
  }
  const int threads = kc.num_threads;
  if (threads <= 1 || groups.size() <= 1) {
    for (const Group& gr : groups) run(gr.g, gr.row, gr.m);
    return;
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.m > b.m; });
  // The largest groups go to the all-threads GEMMs until the rest balance over the threads.
  size_t first_shared = 0;
  while (groups.size() - first_shared >= 2 && !balanced(groups, first_shared, threads)) {
    ++first_shared;
  }
  if (groups.size() - first_shared < 2) first_shared = groups.size();
  for (size_t i = 0; i < first_shared; ++i) run(groups[i].g, groups[i].row, groups[i].m);
  const int64_t shared = static_cast<int64_t>(groups.size() - first_shared);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (shared > 1)
  for (int64_t i = 0; i < shared; ++i) {
    const Group& gr = groups[first_shared + static_cast<size_t>(i)];
    run(gr.g, gr.row, gr.m);
  }
}

}  // namespace

void grouped_gemm_forward(const KernelContext& kc, float* out, const float* x,
                          const float* const* w, const int64_t* counts, int64_t G, int64_t N,
                          int64_t K) {
  for_each_group(kc, counts, G, [&](int64_t g, int64_t row, int64_t m) {
    gemm(false, true, m, N, K, 1.0f, x + row * K, K, w[g], K, 0.0f, out + row * N, N);
  });
}

void grouped_gemm_backward_input(const KernelContext& kc, float* dx, const float* dout,
                                 const float* const* w, const int64_t* counts, int64_t G, int64_t N,
                                 int64_t K) {
  for_each_group(kc, counts, G, [&](int64_t g, int64_t row, int64_t m) {
    gemm(false, false, m, K, N, 1.0f, dout + row * N, N, w[g], K, 0.0f, dx + row * K, K);
  });
}

void grouped_gemm_backward_weight(const KernelContext& kc, float* const* dw, const float* dout,
                                  const float* x, const int64_t* counts, int64_t G, int64_t N,
                                  int64_t K) {
  for_each_group(kc, counts, G, [&](int64_t g, int64_t row, int64_t m) {
    gemm(true, false, N, K, m, 1.0f, dout + row * N, N, x + row * K, K, 1.0f, dw[g], K);
  });
}

}  // namespace mindspeed::cpu
